// Package client calls tools on an MCP server that speaks protocol revision
// 2026-07-28 over stateless Streamable HTTP and implements the tasks
// extension (io.modelcontextprotocol/tasks, SEP-2663). It depends on the
// standard library and the go-sdk's protocol types only: a program that
// imports it links nothing of a server.
//
// # The model
//
// A tool call may be answered at once (a CallToolResult) or with a task: a
// handle (resultType "task", a taskId) for work that goes on on the server
// after the HTTP request has ended. The client then polls tasks/get at the
// pace the server asks for (pollIntervalMs, which may change from one
// answer to the next) until the task reaches a terminal status:
//
//   - completed: the task carries the tool's CallToolResult. A tool-level
//     error (isError) is a result like any other, not a Go error;
//   - failed: the task carries a JSON-RPC error object, returned as a
//     [*TaskError] that wraps a [*jsonrpc.Error];
//   - cancelled: after tasks/cancel.
//
// On the way a task may stop in input_required with inputRequests (most
// often elicitation/create: a message and a requested schema). The caller
// answers them through an [InputHandler] or an [ElicitHandler]; the client
// sends the answers with tasks/update, never answers one key twice, and
// goes on polling.
//
// [Client.Call] does all of this and returns the tool's result however the
// server chose to answer. [Client.Start] stops after the first answer (for
// callers that detach), [Client.Resume] reattaches to a task by its id (for
// instance after a restart), [Client.CancelAndWait] cancels a task by its
// id and reads it until it ends, and [Client.Get], [Client.Update],
// [Client.Cancel] and [Client.ListTools] are the single requests.
//
// # The wire
//
// Every request is one HTTP POST of one JSON-RPC request, with the headers
// the 2026-07-28 transport requires (Mcp-Protocol-Version, Mcp-Method, and
// Mcp-Name: the tool's name for tools/call, the taskId for tasks/*), and with
// the protocol version, client info and client capabilities in the request's
// _meta; the capabilities declare the tasks extension on every request. A
// tool whose input schema mirrors arguments into Mcp-Param-* headers
// (SEP-2243) gets them: when the server refuses a tools/call with -32020,
// the client reads the tool's schema from tools/list and calls again with
// the headers. The answer may be a JSON body or a text/event-stream; both
// are read.
//
// # Failures and cancellation
//
// Polling survives what a long wait meets: network errors, HTTP 5xx, 429
// and JSON-RPC -32603 answers are retried with jittered exponential backoff
// (see [RetryPolicy]), each request under its own deadline. A tools/call is
// retried only when the server cannot have acted on it (no connection, 503
// or 429), so a retry never starts a task twice. A tasks/get that answers
// -32602 for a task the client knows means the task expired or is gone:
// [ErrTaskUnknown].
//
// Cancelling the context of a Call (or Resume) that waits for a task sends
// tasks/cancel and then keeps polling for a bounded time to report the
// status the task reaches: cancellation is cooperative, and the task may
// still complete. The call returns a [*TaskError] that wraps the context's
// error and carries that last state. [Detach] stops waiting without
// cancelling anything.
package client
