// Package cli holds the client side of the mcptasks command line: the
// commands that call tools and follow tasks on any MCP server that speaks
// protocol revision 2026-07-28 with the tasks extension (SEP-2663), built
// on pkg/client.
//
//	mcptasks call [flags] TOOL [key=value ...]     call a tool, follow its task to the end
//	mcptasks task get|watch|cancel|answer TASKID   one task, by its id
//	mcptasks tools [flags]                         list the server's tools
//	mcptasks inspect TASKID [--json]               a task's history, read from the store (REDIS_URL or DATABASE_URL)
//	mcptasks tasks [--status S] [--json]           every principal's tasks, newest first (REDIS_URL or DATABASE_URL)
//
// inspect and tasks are the operator's commands: they read the task
// records straight from the deployment's store (Redis or PostgreSQL,
// chosen as the deployment chooses it), not over MCP. Every other command
// takes --url (env MCPTASKS_URL, default the local server at
// http://127.0.0.1:8080/mcp) and --token (env MCPTASKS_TOKEN, sent as a
// bearer token).
//
// # Checks before a call
//
// A command checks what it can before it sends anything: --url must be an
// http:// or https:// URL; call reads the tool's input schema (tools/list)
// and refuses arguments it does not take, naming each missing or wrong
// argument, the type it takes, and the tool's usage (exit status 2, the
// tool never ran); task answer refuses an answer its input request does
// not take, showing the shape it does. Errors reaching the server are said
// in the command's terms: a server that speaks plain HTTP to https://, a
// 404 (with the /mcp path suggested), a server not there after three
// attempts in every command. What cannot heal (a bad URL, TLS to a plain
// server, a 4xx) is not retried.
//
// # Output
//
// A tool's result goes to stdout: its text content by default, the
// CallToolResult as JSON with --output json. Everything else (progress,
// prompts, notes) goes to stderr. When stderr is a terminal, progress is
// one line redrawn in place (a spinner, the task's status and status
// message, the time elapsed); otherwise it is one plain line per change of
// status, so that a log stays readable.
//
// # Input
//
// A task that asks for input (an elicitation/create input request, or an
// MRTR round of the tools/call itself) is answered from stdin: the command
// asks whether to answer, decline or cancel, then asks for each field of
// the requested schema (strings, numbers, integers, booleans, enums and
// multi-select enums), re-asking on a value the schema refuses. A closed
// stdin leaves the task waiting: answer it later with `mcptasks task
// answer`.
//
// # Interrupts and exit status
//
// The first Ctrl-C of a call cancels its task (tasks/cancel) and waits for
// the state the task reaches; a second one stops waiting at once and
// leaves the task as it is. Ctrl-C during `task watch` only stops watching.
// `task cancel` likewise waits for the task to end (at most --wait, 30s by
// default: a running step stops at its next chance) and prints the status
// it reached.
// The exit status is
//
//	0    the tool's result is not an error (a task completed, or --detach
//	     printed its id); the command did what it was asked
//	1    the task failed, the result is a tool error (isError), the task
//	     was cancelled by someone else, or the command failed
//	2    the command line is wrong
//	130  interrupted: the task was cancelled by Ctrl-C, or the command
//	     stopped waiting (second Ctrl-C, Ctrl-C during watch)
package cli
