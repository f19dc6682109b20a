package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxInputRounds bounds the MRTR rounds of one tools/call.
const maxInputRounds = 10

// createGrace is how long a tools/call already sent goes on after the
// caller's context ended, so that a task created meanwhile is learned of
// and cancelled rather than left running unseen.
const createGrace = 5 * time.Second

// cancelTimeout bounds the tasks/cancel sent when the caller's context
// ends.
const cancelTimeout = 10 * time.Second

// InputHandler answers one input request of a task (or of an MRTR round of
// tools/call). It returns the response to send under the request's key,
// which is encoded as JSON: for elicitation/create an [*mcp.ElicitResult],
// for sampling/createMessage an [*mcp.CreateMessageResult], and so on.
//
// ctx ends when the call's context does: a handler that prompts a user
// should return then.
type InputHandler func(ctx context.Context, req *InputRequest) (any, error)

// ElicitHandler answers an elicitation/create input request: it shows
// params.Message, collects content that matches params.RequestedSchema, and
// returns the user's action ("accept" with Content, "decline" or
// "cancel").
type ElicitHandler func(ctx context.Context, req *InputRequest, params *mcp.ElicitParams) (*mcp.ElicitResult, error)

// CallOption configures one [Client.Call], [Client.Start] or
// [Client.Resume].
type CallOption func(*callConfig)

type callConfig struct {
	onStatus   func(Task)
	input      InputHandler
	each       bool
	standing   bool
	cancelWait time.Duration
	detach     context.Context
}

func newCallConfig(opts []CallOption) *callConfig {
	cfg := &callConfig{cancelWait: DefaultCancelWait}
	for _, o := range opts {
		o(cfg)
	}
	return cfg
}

// OnStatus calls f with the task each time its status or statusMessage
// changes, starting with the state the task was created in and ending with
// its terminal state. f runs on the calling goroutine, between two
// requests.
func OnStatus(f func(Task)) CallOption {
	return func(c *callConfig) { c.onStatus = f }
}

// OnInput answers the task's input requests with h. Each pending request is
// handed to h once; its answer is sent with tasks/update (see
// [AnswerEach]). Without a handler, a task that needs input ends the call
// with [ErrInputRequired].
func OnInput(h InputHandler) CallOption {
	return func(c *callConfig) { c.input = h }
}

// OnElicit answers the task's elicitation/create input requests with h. An
// input request of any other method ends the call with an error (use
// [OnInput] to answer those).
func OnElicit(h ElicitHandler) CallOption {
	return OnInput(func(ctx context.Context, req *InputRequest) (any, error) {
		p, err := req.Elicitation()
		if err != nil {
			return nil, err
		}
		return h(ctx, req, p)
	})
}

// AnswerEach sends each answer in its own tasks/update as soon as the
// handler returns it, and reads the task again before asking the next
// question (a task that waits for any one answer withdraws the others). By
// default the answers to all the requests pending at once are collected
// and sent together in one tasks/update.
func AnswerEach() CallOption {
	return func(c *callConfig) { c.each = true }
}

// AskStanding also hands standing offers to the input handler: input
// requests the task does not wait for (marked with MetaStanding, such as
// "stop early?"). By default they are left unanswered: the call keeps
// polling, and a task whose only pending requests are standing offers is
// not an input_required that needs a handler.
func AskStanding() CallOption {
	return func(c *callConfig) { c.standing = true }
}

// MetaStanding is the params._meta key (true) by which an mcptasks server
// marks a standing offer among a task's inputRequests (tasks.MetaStanding).
const MetaStanding = "dev.mcptasks/standing"

// Standing reports whether the request is a standing offer: one the task
// does not wait for (see [AskStanding]).
func (r *InputRequest) Standing() bool {
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	if json.Unmarshal(r.Params, &p) != nil {
		return false
	}
	v, _ := p.Meta[MetaStanding].(bool)
	return v
}

// CancelWait bounds how long a call whose context ended keeps polling, after
// tasks/cancel, for the terminal status of its task (default
// [DefaultCancelWait]).
func CancelWait(d time.Duration) CallOption {
	return func(c *callConfig) {
		if d > 0 {
			c.cancelWait = d
		}
	}
}

// Detach gives the call a second context: when detach ends, the call stops
// waiting at once and returns a [*TaskError] wrapping [ErrDetached], without
// cancelling the task (or without waiting any longer for the outcome of a
// cancellation already sent). An interactive program cancels the call's
// context on a first interrupt and detach on a second. To bound a wait
// without cancelling the task, put the deadline on detach, not on the
// call's context.
func Detach(detach context.Context) CallOption {
	return func(c *callConfig) { c.detach = detach }
}

// Call calls tool with args (any value that encodes to a JSON object; nil
// sends {}) and returns its result, whether the server answered at once or
// with a task: a task is polled with tasks/get until it ends, its input
// requests answered through the handler of [OnInput] or [OnElicit].
//
// A tool-level error (IsError) is a result, not an error. A failed task is a
// [*TaskError] wrapping a [*jsonrpc.Error]; a task the server no longer knows
// wraps [ErrTaskUnknown]. When ctx ends while the task runs, Call sends
// tasks/cancel, polls for the task's terminal status (see [CancelWait]) and
// returns a [*TaskError] wrapping ctx's error, with that final state.
func (c *Client) Call(ctx context.Context, tool string, args any, opts ...CallOption) (*mcp.CallToolResult, error) {
	cfg := newCallConfig(opts)
	// The tools/call outlives ctx by a grace period: if the server creates
	// a task meanwhile, the client learns its id and can cancel it.
	reqCtx, stop := withGrace(ctx, createGrace)
	task, res, err := c.start(ctx, reqCtx, tool, args, cfg)
	stop()
	if err != nil {
		return nil, err
	}
	if res != nil {
		return res, nil
	}
	return c.wait(ctx, cfg, task)
}

// Start calls tool with args like [Client.Call] but does not wait for a
// task: it returns either the task the server created (its handle) or the
// tool's result when the server answered synchronously. MRTR input rounds
// of the tools/call itself are answered through [OnInput] or [OnElicit].
func (c *Client) Start(ctx context.Context, tool string, args any, opts ...CallOption) (*Task, *mcp.CallToolResult, error) {
	cfg := newCallConfig(opts)
	task, res, err := c.start(ctx, ctx, tool, args, cfg)
	if err != nil {
		return nil, nil, err
	}
	if task != nil && cfg.onStatus != nil {
		cfg.onStatus(*task)
	}
	return task, res, nil
}

// Resume reattaches to the task taskID (created by an earlier call, perhaps
// by another process) and waits for its result exactly as [Client.Call]
// does.
func (c *Client) Resume(ctx context.Context, taskID string, opts ...CallOption) (*mcp.CallToolResult, error) {
	return c.wait(ctx, newCallConfig(opts), &Task{ID: taskID})
}

// start sends tools/call under reqCtx, answering MRTR rounds (an
// input_required result) through cfg's handler under ctx, until the server
// answers with a task or a result.
func (c *Client) start(ctx, reqCtx context.Context, tool string, args any, cfg *callConfig) (*Task, *mcp.CallToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	params := map[string]any{"name": tool, "arguments": args}
	var headers map[string]string
	for round := 1; ; round++ {
		var raw json.RawMessage
		// A tools/call is retried only when the server cannot have acted
		// on it: a retry must never start a second task.
		err := c.do(reqCtx, call{method: "tools/call", name: tool, params: params, header: headers, elicit: cfg.input != nil}, false, &raw)
		if err != nil && headers == nil && isHeaderMismatch(err) {
			// The tool may mirror arguments into Mcp-Param-* headers
			// (SEP-2243): learn which from tools/list and call again.
			if h := c.toolParamHeaders(reqCtx, tool, args); len(h) > 0 {
				headers = h
				err = c.do(reqCtx, call{method: "tools/call", name: tool, params: params, header: headers, elicit: cfg.input != nil}, false, &raw)
			}
		}
		if err != nil {
			return nil, nil, err
		}
		var head struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, nil, fmt.Errorf("tools/call %s: decoding the result: %w", tool, err)
		}
		switch head.ResultType {
		case "task":
			var w wireTask
			if err := json.Unmarshal(raw, &w); err != nil {
				return nil, nil, fmt.Errorf("tools/call %s: decoding the task: %w", tool, err)
			}
			t, err := w.task()
			if err != nil {
				return nil, nil, fmt.Errorf("tools/call %s: %w", tool, err)
			}
			c.log.DebugContext(ctx, "task created", "tool", tool, "task", t.ID, "status", t.Status)
			return t, nil, nil
		case "input_required":
			if round >= maxInputRounds {
				return nil, nil, fmt.Errorf("tools/call %s: still input_required after %d rounds", tool, round)
			}
			if err := ctx.Err(); err != nil {
				return nil, nil, fmt.Errorf("tools/call %s: %w", tool, context.Cause(ctx))
			}
			responses, err := c.answerRound(ctx, tool, head.InputRequests, cfg)
			if err != nil {
				return nil, nil, err
			}
			params["inputResponses"] = responses
			if head.RequestState != "" {
				params["requestState"] = head.RequestState
			} else {
				delete(params, "requestState")
			}
		default:
			var r mcp.CallToolResult
			if err := json.Unmarshal(raw, &r); err != nil {
				return nil, nil, fmt.Errorf("tools/call %s: decoding the result: %w", tool, err)
			}
			return nil, &r, nil
		}
	}
}

// isHeaderMismatch reports whether err is the server's -32020: a header
// is missing or does not match the body.
func isHeaderMismatch(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code == mcp.CodeHeaderMismatch
}

// toolParamHeaders returns the Mcp-Param-* headers a call of tool with
// args needs, according to the tool's input schema in tools/list (none if
// the tool cannot be found or read).
func (c *Client) toolParamHeaders(ctx context.Context, tool string, args any) map[string]string {
	tools, err := c.ListTools(ctx)
	if err != nil {
		c.log.DebugContext(ctx, "tools/list for Mcp-Param headers", "err", err)
		return nil
	}
	for _, t := range tools {
		if t.Name == tool {
			h, err := paramHeaders(t, args)
			if err != nil {
				c.log.DebugContext(ctx, "Mcp-Param headers", "tool", tool, "err", err)
			}
			return h
		}
	}
	return nil
}

// answerRound answers every input request of an MRTR round (all of them are
// needed for the retried call).
func (c *Client) answerRound(ctx context.Context, tool string, reqs map[string]json.RawMessage, cfg *callConfig) (map[string]json.RawMessage, error) {
	if len(reqs) == 0 {
		// An empty inputRequests is the server shedding load: retry.
		if err := c.sleep(ctx, c.backoff(1)); err != nil {
			return nil, fmt.Errorf("tools/call %s: %w", tool, err)
		}
		return map[string]json.RawMessage{}, nil
	}
	if cfg.input == nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, ErrInputRequired)
	}
	t := &Task{InputRequests: map[string]*InputRequest{}}
	for k, raw := range reqs {
		r, err := decodeInputRequest(k, raw)
		if err != nil {
			return nil, fmt.Errorf("tools/call %s: %w", tool, err)
		}
		t.InputRequests[k] = r
	}
	out := make(map[string]json.RawMessage, len(reqs))
	for _, k := range t.Pending() {
		b, err := ask(ctx, cfg.input, t.InputRequests[k])
		if err != nil {
			return nil, fmt.Errorf("tools/call %s: %w", tool, err)
		}
		out[k] = b
	}
	return out, nil
}

// ask hands req to h and encodes its answer.
func ask(ctx context.Context, h InputHandler, req *InputRequest) (json.RawMessage, error) {
	resp, err := h(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("answering input request %q: %w", req.Key, err)
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("encoding the answer to input request %q: %w", req.Key, err)
	}
	return b, nil
}

// Get returns the task taskID as the server has it now (tasks/get). A task
// the server does not know is an error wrapping [ErrTaskUnknown].
func (c *Client) Get(ctx context.Context, taskID string) (*Task, error) {
	return c.get(ctx, taskID, false)
}

func (c *Client) get(ctx context.Context, taskID string, elicit bool) (*Task, error) {
	var w wireTask
	err := c.do(ctx, call{method: "tasks/get", name: taskID, params: map[string]any{"taskId": taskID}, elicit: elicit}, true, &w)
	if err != nil {
		return nil, unknownTask(err)
	}
	t, err := w.task()
	if err != nil {
		return nil, fmt.Errorf("tasks/get %s: %w", taskID, err)
	}
	if t.ID != taskID {
		return nil, fmt.Errorf("tasks/get %s: the server answered with task %s", taskID, t.ID)
	}
	return t, nil
}

// Update answers input requests of the task taskID (tasks/update):
// responses maps request keys to their answers (such as *mcp.ElicitResult),
// each encoded as JSON. The server ignores keys it does not wait for.
func (c *Client) Update(ctx context.Context, taskID string, responses map[string]any) error {
	return c.update(ctx, taskID, responses, false)
}

func (c *Client) update(ctx context.Context, taskID string, responses map[string]any, elicit bool) error {
	if responses == nil {
		responses = map[string]any{}
	}
	err := c.do(ctx, call{method: "tasks/update", name: taskID, params: map[string]any{"taskId": taskID, "inputResponses": responses}, elicit: elicit}, true, nil)
	return unknownTask(err)
}

// Cancel asks the server to cancel the task taskID (tasks/cancel).
// Cancellation is cooperative: a parked task is cancelled at once, a
// running step at its next chance, and a task may still complete; read the
// outcome with [Client.Get] or [Client.Resume]. Cancelling a task that has
// ended is not an error.
func (c *Client) Cancel(ctx context.Context, taskID string) error {
	err := c.do(ctx, call{method: "tasks/cancel", name: taskID, params: map[string]any{"taskId": taskID}}, true, nil)
	return unknownTask(err)
}

// CancelAndWait cancels the task taskID (tasks/cancel) and reads it until it
// ends or wait passes, returning the last state read: cancelled, or the
// outcome a running step reached first (a task may still complete or
// fail), or, when wait passes first, a task still running with its
// cancellation requested. A wait of 0 reads the task once, right after the
// cancel.
func (c *Client) CancelAndWait(ctx context.Context, taskID string, wait time.Duration) (*Task, error) {
	if err := c.Cancel(ctx, taskID); err != nil {
		return nil, err
	}
	if wait <= 0 {
		return c.Get(ctx, taskID)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t, err := c.untilTerminal(wctx, func(ctx context.Context) (*Task, error) { return c.Get(ctx, taskID) })
	if t == nil && err == nil {
		// The wait ended within the first read: read once more, on ctx.
		return c.Get(ctx, taskID)
	}
	return t, err
}

// untilTerminal reads a task with get until it is terminal or ctx ends. It
// returns the last state read, and the error of a read that failed other
// than by ctx's end.
func (c *Client) untilTerminal(ctx context.Context, get func(context.Context) (*Task, error)) (*Task, error) {
	var last *Task
	for {
		t, err := get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return last, nil
			}
			return last, err
		}
		last = t
		if t.Status.Terminal() || c.sleep(ctx, c.pollWait(t.PollInterval)) != nil {
			return t, nil
		}
	}
}

// ListTools returns the server's tools (tools/list), following pagination.
func (c *Client) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	cursor := ""
	seen := map[string]bool{}
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page mcp.ListToolsResult
		if err := c.do(ctx, call{method: "tools/list", params: params}, true, &page); err != nil {
			return nil, err
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			return tools, nil
		}
		if seen[page.NextCursor] {
			return nil, fmt.Errorf("tools/list: the server repeated cursor %q", page.NextCursor)
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
}

// unknownTask marks a -32602 answer to a tasks/* request as
// [ErrTaskUnknown].
func unknownTask(err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeInvalidParams {
		return fmt.Errorf("%w: %w", ErrTaskUnknown, err)
	}
	return err
}

// withGrace returns a context that ends grace after ctx does (or when stop
// is called).
func withGrace(ctx context.Context, grace time.Duration) (gctx context.Context, stop func()) {
	gctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) })
		context.AfterFunc(gctx, func() { t.Stop() })
	})
	return gctx, func() {
		unhook()
		cancel(nil)
	}
}
