package tasks

// The tasks utility of protocol revision 2025-11-25 (the "legacy dialect"),
// served to clients that negotiated that revision in initialize, on the same
// Store, engine, principal binding and TTL as the 2026-07-28 extension. Its
// wire shapes differ: the task object nests under "task" in the creation
// result, lifetimes are "ttl" and "pollInterval" (ms), results carry no
// resultType, tasks/result returns the tool's result once the task is
// terminal (holding the request while it runs), tasks/list lists the
// caller's tasks, tasks/cancel answers the task, and input goes to the
// client as elicitation/create requests related to the task
// (_meta[RelatedTaskMetaKey]). Package endpoint carries them over HTTP; the
// operations here are transport-neutral, like those of ops.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Methods of the 2025-11-25 tasks utility that the 2026-07-28 extension
// does not have (tasks/get and tasks/cancel are shared names).
const (
	methodResult = "tasks/result"
	methodList   = "tasks/list"
)

// legacyTask is the Task object of the 2025-11-25 tasks utility.
type legacyTask struct {
	TaskID        string        `json:"taskId"`
	Status        driver.Status `json:"status"`
	StatusMessage string        `json:"statusMessage,omitempty"`
	CreatedAt     string        `json:"createdAt"`
	LastUpdatedAt string        `json:"lastUpdatedAt"`
	// TTL is the lifetime from creation in ms; nil encodes null.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// newLegacyTask returns the 2025-11-25 view of t.
func newLegacyTask(t *driver.Task) legacyTask {
	ttl := t.TTL.Milliseconds()
	return legacyTask{
		TaskID:        t.ID,
		Status:        t.Status,
		StatusMessage: t.StatusMessage,
		CreatedAt:     wireTime(t.CreatedAt),
		LastUpdatedAt: wireTime(t.UpdatedAt),
		TTL:           &ttl,
		PollInterval:  t.PollInterval.Milliseconds(),
	}
}

// legacyCreateTaskResult is the 2025-11-25 CreateTaskResult of a
// task-augmented tools/call.
type legacyCreateTaskResult struct {
	mcp.ResultBase
	Task legacyTask `json:"task"`
}

// legacyTaskResult is the result of the 2025-11-25 tasks/get and
// tasks/cancel: the task object itself.
type legacyTaskResult struct {
	mcp.ResultBase
	legacyTask
}

// legacyListTasksResult is the result of tasks/list.
type legacyListTasksResult struct {
	mcp.ResultBase
	Tasks      []legacyTask `json:"tasks"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// legacyCallResult is a CallToolResult as 2025-11-25 carries it: the
// stored (or inline) result without resultType, content never null, with
// its _meta.
type legacyCallResult struct {
	mcp.ResultBase
	fields map[string]json.RawMessage
}

// MarshalJSON encodes the result's members and its _meta.
func (r *legacyCallResult) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(r.fields)+1)
	for k, v := range r.fields {
		m[k] = v
	}
	if len(r.Meta) > 0 {
		m["_meta"] = r.Meta
	}
	return json.Marshal(m)
}

// newLegacyCallResult renders a CallToolResult, as JSON, for 2025-11-25.
func newLegacyCallResult(raw json.RawMessage) (*legacyCallResult, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "stored result is not an object"}
	}
	delete(fields, "resultType")
	if c, ok := fields["content"]; !ok || string(c) == "null" {
		fields["content"] = json.RawMessage("[]")
	}
	r := &legacyCallResult{fields: fields}
	if m, ok := fields["_meta"]; ok {
		delete(fields, "_meta")
		_ = json.Unmarshal(m, &r.Meta)
	}
	return r, nil
}

// legacyTTL is the lifetime of a task a 2025-11-25 client creates: the
// server's TTL, or the client's shorter request (at least a second).
func (s *Server) legacyTTL(requested time.Duration) time.Duration {
	if requested <= 0 || requested >= s.opts.TTL {
		return s.opts.TTL
	}
	return max(requested, time.Second)
}

// legacyCreateTask answers a 2025-11-25 task-augmented tools/call of the
// task tool named tool (params.task given, with ttl the client's requested
// lifetime, 0 for none) for owner: it creates the task durably, as
// Server.createFor does, and returns its legacyCreateTaskResult. A
// tool that is not a task tool answers -32601, as that revision asks. An
// argument error is a tool error (a CallToolResult with isError).
func (s *Server) legacyCreateTask(ctx context.Context, owner, tool string, args json.RawMessage, ttl time.Duration) (mcp.Result, error) {
	t := s.tools[tool]
	if t == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tool " + tool + " does not run as a task"}
	}
	res, err := s.create(ctx, creation{tool: t, owner: owner, args: args, ttl: s.legacyTTL(ttl)})
	if err != nil {
		return nil, err
	}
	switch v := res.(type) {
	case *createTaskResult:
		lt := legacyTask{TaskID: v.TaskID, Status: v.Status, StatusMessage: v.StatusMessage, CreatedAt: v.CreatedAt,
			LastUpdatedAt: v.LastUpdatedAt, TTL: v.TTLMs, PollInterval: v.PollIntervalMs}
		return &legacyCreateTaskResult{Task: lt}, nil
	case *mcp.CallToolResult:
		b, err := encodeResult(v)
		if err != nil {
			return nil, err
		}
		return newLegacyCallResult(b)
	}
	return res, nil
}

// legacyGetTask answers the 2025-11-25 tasks/get for owner: the task, or
// -32602 for a task that does not exist or that owner does not own.
func (s *Server) legacyGetTask(ctx context.Context, owner, id string) (mcp.Result, error) {
	t, err := s.lookup(ctx, owner, id, methodGet)
	if err != nil {
		return nil, err
	}
	return &legacyTaskResult{legacyTask: newLegacyTask(s.advised(t))}, nil
}

// LegacyCancelTask answers the 2025-11-25 tasks/cancel for owner: -32602
// for a task that is already terminal (as that revision requires) or
// unknown; else cancellation is requested as Server.cancelTask does it
// and the task is answered as it stands afterwards. A parked or queued
// task is cancelled at once. While a step of it runs, the answer waits
// (at most legacyCancelWait, within the invocation's budget) for the
// step to stop and the task to end, since that revision has the task
// cancelled before the response: cancelled, or the outcome the step
// reached first when it was the last; a step that outlasts the wait leaves
// the task working with its cancellation requested. Once the store took
// the request, the answer is never an error for want of a read after it:
// the task as last read, with the status the request left it in.
func (s *Server) legacyCancelTask(ctx context.Context, owner, id string) (mcp.Result, error) {
	t, err := s.lookup(ctx, owner, id, methodCancel)
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: fmt.Sprintf("cannot cancel task: already in terminal status '%s'", t.Status)}
	}
	st, err := s.requestCancel(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	before := t
	wctx, cancel := context.WithTimeout(ctx, min(legacyCancelWait, s.holdBudget()))
	defer cancel()
	t, err = s.watch(wctx, owner, id, methodCancel, cancelPoll, nil)
	var je *jsonrpc.Error
	if err != nil && errors.As(err, &je) && je.Code == CodeInvalidParams {
		return nil, err // gone meanwhile (expired)
	}
	if t == nil {
		// Not one reading after the request (the store slow or failing
		// within the wait): the cancellation is requested all the same,
		// and the answer is the task as read before, with the status the
		// request left it in. A failed read after one that succeeded
		// leaves the answer that one.
		c := *before
		c.CancelRequested = true
		if st != "" {
			c.Status = st
		}
		t = &c
	}
	if t.CancelRequested && !t.Status.Terminal() {
		t.StatusMessage = "cancellation requested; the step in flight ends first"
	}
	return &legacyTaskResult{legacyTask: newLegacyTask(s.advised(t))}, nil
}

// listEnabled reports whether the server offers the 2025-11-25 tasks/list:
// its store is a [driver.Lister] and callers are identified (not
// Options.Anonymous).
func (s *Server) listEnabled() bool {
	_, ok := s.store.(driver.Lister)
	return ok && !s.opts.Anonymous
}

// legacyListTasks answers tasks/list for owner: a page of owner's tasks,
// newest first, and the cursor of the next one. An invalid cursor answers
// -32602; a server without Server.listEnabled answers -32601.
func (s *Server) legacyListTasks(ctx context.Context, owner, cursor string) (mcp.Result, error) {
	l, ok := s.store.(driver.Lister)
	if !ok || s.opts.Anonymous {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list is not offered by this server"}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	type page struct {
		ts   []*driver.Task
		next string
	}
	p, err := await(ctx, s.storeDirect, func(ctx context.Context) (page, error) {
		ts, next, err := l.List(ctx, owner, cursor, driver.ListPageSize, s.now())
		return page{ts, next}, err
	})
	if errors.Is(err, driver.ErrBadCursor) {
		return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "invalid cursor"}
	}
	if err != nil {
		s.log.Error("tasks/list failed", "err", err)
		return nil, storeUnavailable()
	}
	res := &legacyListTasksResult{Tasks: make([]legacyTask, 0, len(p.ts)), NextCursor: p.next}
	for _, t := range p.ts {
		res.Tasks = append(res.Tasks, newLegacyTask(s.advised(t)))
	}
	return res, nil
}

// legacyCancelWait bounds how long a 2025-11-25 tasks/cancel waits for a
// task whose step is in flight to end (see [Server.LegacyCancelTask]).
const legacyCancelWait = 5 * time.Second

// watchPoll is how often WatchTask reads the task; cancelPoll how often
// the legacy tasks/cancel does, waiting for a step that stops at its next
// chance.
const (
	watchPoll  = 200 * time.Millisecond
	cancelPoll = 20 * time.Millisecond
)

// watchTask reads owner's task id until it is terminal, until each (called
// with every reading) returns true, or until ctx ends (its error then,
// with the last reading). It answers -32602 for an unknown or foreign
// task. The legacy tasks/result holds its request with it.
func (s *Server) watchTask(ctx context.Context, owner, id string, each func(*driver.Task) bool) (*driver.Task, error) {
	return s.watch(ctx, owner, id, methodResult, watchPoll, each)
}

// watch is WatchTask for the request method, reading every poll; a nil
// each waits for the terminal status. The end of ctx ends the wait, a read
// in flight included (each read is bounded by Options.StoreTimeout too):
// a request's budget is never spent waiting for a slow store.
func (s *Server) watch(ctx context.Context, owner, id, method string, poll time.Duration, each func(*driver.Task) bool) (*driver.Task, error) {
	if !driver.ValidID(id) {
		return nil, errUnknownTask(id)
	}
	var last *driver.Task
	for {
		t, err := s.read(ctx, owner, id)
		switch {
		case errors.Is(err, driver.ErrNotFound):
			return last, errUnknownTask(id)
		case err != nil && budgetErr(ctx) != nil:
			return last, budgetErr(ctx)
		case err != nil:
			s.log.Error(method+" failed", "task", id, "err", err)
			s.storeFailed(ctx, strings.TrimPrefix(method, "tasks/"))
			return last, storeUnavailable()
		}
		last = t
		if t.Status.Terminal() || (each != nil && each(t)) {
			return t, nil
		}
		if err := sleepCtx(ctx, poll); err != nil {
			return last, err
		}
	}
}

// budgetErr is ctx's error, or context.DeadlineExceeded once ctx's
// deadline has passed but its timer has not fired yet: a store client that
// checks the deadline itself (rueidis does) may fail a read at the
// deadline an instant before ctx reports it, and that read failed because
// the budget ended, not because the store did.
func budgetErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// holdBudget is how long a request may hold for a task (the legacy
// tasks/result and inline calls that carry input rounds): the invocation's
// budget, Options.MaxDuration less the SafetyMargin.
func (s *Server) holdBudget() time.Duration { return s.opts.MaxDuration - s.opts.SafetyMargin }

// legacyOutcome renders what tasks/result answers for the terminal task t:
// its CallToolResult (completed; with _meta[RelatedTaskMetaKey] when
// related is set), its JSON-RPC error (failed), or a -32603 error
// (cancelled).
func legacyOutcome(t *driver.Task, related bool) (mcp.Result, error) {
	switch t.Status {
	case driver.StatusCompleted:
		r, err := newLegacyCallResult(t.Result)
		if err != nil {
			return nil, err
		}
		if related {
			if r.Meta == nil {
				r.Meta = mcp.Meta{}
			}
			r.Meta[RelatedTaskMetaKey] = map[string]string{"taskId": t.ID}
		}
		return r, nil
	case driver.StatusFailed:
		if t.Error == nil {
			return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "task " + t.ID + " failed"}
		}
		return nil, &jsonrpc.Error{Code: t.Error.Code, Message: t.Error.Message, Data: t.Error.Data}
	case driver.StatusCancelled:
		return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "task " + t.ID + " was cancelled"}
	}
	return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "task " + t.ID + " has not ended"}
}

// inlineOutcome is what Server.callLegacyInline gives back: a result or
// an error to answer with, or a task that now carries the call's input
// rounds (TaskID set), which the transport holds with Server.watchTask.
type inlineOutcome struct {
	Result mcp.Result
	Err    error
	TaskID string
}

// callLegacyInline runs the task tool named tool inline for a client on
// an older revision (a tools/call without a task, for owner): within the
// invocation's budget, sleeps really sleep. When the handler asks for
// input and the client declared elicitation, the run so far becomes a
// task (its steps journaled, nothing run twice) whose input requests the
// transport sends as elicitation/create requests and whose answers,
// delivered on any instance through Server.updateTask, resume it. What
// cannot finish within the call (a sleep past the budget, input without
// elicitation, a [Background] tool) continues as a background
// job (see jobs.go), whose handle is the call's result; where the
// async-jobs fallback does not serve the tool, a sleep past the budget
// fails the call at once (-32603) and input without elicitation answers
// -32600. A Required tool answers -32601, as 2025-11-25 asks of a tool
// that must run as a task.
func (s *Server) callLegacyInline(ctx context.Context, owner, tool string, args json.RawMessage, elicitation bool) inlineOutcome {
	t := s.tools[tool]
	if t == nil {
		return inlineOutcome{Err: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "unknown task tool " + tool}}
	}
	jobs := s.jobsFor(t)
	if t.support == Required {
		return inlineOutcome{Err: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: "tool " + tool + " runs only as a task: call it with params.task"}}
	}
	valid, bad := t.validateArgs(args)
	if bad != nil {
		return legacyInlineResult(bad, nil)
	}
	if jobs && t.background {
		return legacyInlineResult(s.startJob(ctx, t, owner, valid, nil, nil, "it runs in the background", nil))
	}
	rctx, cancel := context.WithTimeout(ctx, s.holdBudget())
	defer cancel()
	r := &run{ctx: rctx, mode: modeInline, now: s.now, responses: map[string]json.RawMessage{}, maxValue: s.opts.MaxResultBytes,
		log: s.log, tool: t.name, stepDefaults: t.stepDefaults, jobs: jobs, minStep: s.opts.MinStepTime,
		refuse: func(why string) error {
			return &jsonrpc.Error{Code: CodeInternalError, Message: fmt.Sprintf(
				"tool %s cannot finish within this call: %s; call it as a task (params.task) instead", tool, why)}
		}}
	out := execute(r, t.bind(valid))
	switch {
	case out.susp != nil && out.susp.kind == suspendInput && !elicitation && jobs:
		return legacyInlineResult(s.startJob(ctx, t, owner, valid, r.journal, r.answered(),
			"it asks for input through elicitation, which this client did not declare", out.susp.park))
	case out.susp != nil && out.susp.kind == suspendNeedTask:
		return legacyInlineResult(s.startJob(ctx, t, owner, valid, r.journal, r.answered(), out.susp.why, nil))
	case out.susp != nil && out.susp.kind == suspendInput:
		if !elicitation {
			return inlineOutcome{Err: &jsonrpc.Error{Code: CodeInvalidRequest, Message: fmt.Sprintf(
				"tool %s asks the user for input through elicitation, which this client did not declare in initialize "+
					"(capabilities.elicitation)", tool)}}
		}
		res, err := s.create(ctx, creation{tool: t, owner: owner, args: valid, journal: r.journal, responses: r.answered()})
		if err != nil {
			return inlineOutcome{Err: err}
		}
		c, ok := res.(*createTaskResult)
		if !ok {
			return inlineOutcome{Err: &jsonrpc.Error{Code: CodeInternalError, Message: "internal error: inline input round without a task"}}
		}
		s.log.Info("inline call continues as a task for its input rounds", "tool", tool, "task", c.TaskID)
		return inlineOutcome{TaskID: c.TaskID}
	case out.susp != nil:
		return inlineOutcome{Err: &jsonrpc.Error{Code: CodeInternalError, Message: "internal error: unexpected suspension of an inline run"}}
	case out.failure != nil:
		return inlineOutcome{Err: &jsonrpc.Error{Code: out.failure.Code, Message: out.failure.Message}}
	case out.err != nil:
		return inlineOutcome{Err: asWireError(out.err)}
	}
	return legacyInlineResult(out.result, nil)
}

// legacyInlineResult renders the outcome of an inline call for
// 2025-11-25: res as a CallToolResult of that revision, or err.
func legacyInlineResult(res *mcp.CallToolResult, err error) inlineOutcome {
	if err != nil {
		return inlineOutcome{Err: err}
	}
	b, err := encodeResult(res)
	if err != nil {
		return inlineOutcome{Err: err}
	}
	lr, err := newLegacyCallResult(b)
	return inlineOutcome{Result: lr, Err: err}
}

// refuseHeld answers an inline call whose input rounds a task carries
// when the call cannot finish within its budget (why says what it waits
// for). Under the async-jobs fallback the task goes on as a background
// job, and its handle is the answer; else the task is cancelled (the
// client will never read it), the refusal logged, and the error to answer
// the call with returned.
func (s *Server) refuseHeld(ctx context.Context, owner string, t *driver.Task, why string) (mcp.Result, error) {
	if tt := s.tools[t.Tool]; tt != nil && s.jobsFor(tt) {
		return legacyHeldJob(s.jobAnswer(t))
	}
	if _, err := s.cancelTask(context.WithoutCancel(ctx), owner, t.ID); err != nil {
		s.log.Warn("cancelling a refused inline task failed", "task", t.ID, "err", err)
	}
	s.log.Warn("inline call refused: it cannot finish within the invocation's budget",
		slog.String("tool", t.Tool), slog.String("task", t.ID), slog.String("reason", why), slog.Duration("budget", s.holdBudget()))
	return nil, &jsonrpc.Error{Code: CodeInternalError, Message: fmt.Sprintf(
		"tool %s cannot finish within this call's budget of %s (%s); call it as a task (params.task) instead",
		t.Tool, s.holdBudget().Round(time.Second), why)}
}

// legacyHeldJob renders a held call's job state (jobAnswer) as the
// call's 2025-11-25 result.
func legacyHeldJob(res *mcp.CallToolResult) (mcp.Result, error) {
	out := legacyInlineResult(res, nil)
	return out.Result, out.Err
}
