package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mode says how a handler run executes new steps.
type mode int

const (
	// modeDurable runs in a worker against the store, one (or a few) new
	// steps per invocation.
	modeDurable mode = iota
	// modeInline runs within a tools/call request for a client that did
	// not declare the extension: steps run in-process, sleeps sleep, input
	// goes over MRTR.
	modeInline
	// modePreflight runs within a tools/call that will create a task: input
	// steps at the start go over MRTR; the first other step stops the run
	// and the task is created with what was gathered.
	modePreflight
)

// suspendKind says why a handler run unwound.
type suspendKind int

const (
	suspendContinue  suspendKind = iota // step budget used: run again now
	suspendWake                         // sleep or retry backoff: run again at `at`
	suspendPark                         // wait for input (durable)
	suspendCancelled                    // the task was cancelled
	suspendStop                         // the claim was lost: write nothing
	suspendInput                        // inline/preflight: ask over MRTR
	suspendNeedTask                     // preflight: a durable step is next
)

type suspend struct {
	kind suspendKind
	at   time.Time
	park map[string]json.RawMessage
	any  bool
}

// nondeterminism is raised when the handler's steps no longer match the
// journal: the tool's code changed while the task was in flight.
type nondeterminism struct{ msg string }

// run is the state of one execution of a handler. Only the handler's
// goroutine touches it, which guard enforces for Step methods.
type run struct {
	guard
	ctx       context.Context
	mode      mode
	taskID    string
	journal   []Entry
	cursor    int
	responses map[string]json.RawMessage
	now       func() time.Time
	// log and tool are for the records of panics (see recovered).
	log  *slog.Logger
	tool string

	statusMsg   string
	statusDirty bool
	// statusFresh: the message was set after replay caught up with the
	// journal, in this invocation, so it is the handler's latest word (kept
	// when the task ends); a message only replayed is stale by then.
	statusFresh bool
	// maxValue bounds a journaled step result (Options.MaxResultBytes).
	maxValue int

	// durable only
	w        *worker
	claim    *Claim
	pending  []Entry // journaled in memory, not yet written
	newSteps int
	stepDone bool // a step finished since the last write: reset attempts
	charged  bool // the claim's attempt charge was used by a step
}

func (r *run) next(name string, kind EntryKind) (*Entry, bool) {
	if r.cursor < len(r.journal) {
		e := &r.journal[r.cursor]
		if e.Name != name || e.Kind != kind {
			panic(nondeterminism{fmt.Sprintf(
				"step %d is %s %q in the journal but the handler now asks for %s %q: the tool's code changed while this task was in flight",
				r.cursor+1, e.Kind, e.Name, kind, name)})
		}
		r.cursor++
		return e, true
	}
	for i := range r.journal {
		if r.journal[i].Name == name {
			panic(nondeterminism{fmt.Sprintf("step name %q is used twice; step names must be unique within a task", name)})
		}
	}
	return nil, false
}

func (r *run) appendEntry(e Entry) {
	r.journal = append(r.journal, e)
	r.cursor++
	if r.mode == modeDurable {
		r.pending = append(r.pending, e)
	}
}

func (r *run) do(name string, o doOptions, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := r.enter("tasks.Do", name); err != nil {
		return nil, err
	}
	if e, ok := r.next(name, KindDo); ok {
		if e.Err != "" {
			return nil, &StepError{Step: name, Message: e.Err}
		}
		return e.Value, nil
	}
	switch r.mode {
	case modePreflight:
		panic(suspend{kind: suspendNeedTask})
	case modeInline:
		return r.doInline(name, o, fn)
	}
	return r.w.doDurable(r, name, o, fn)
}

func (r *run) doInline(name string, o doOptions, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := r.ctx, context.CancelFunc(func() {})
		if o.timeout > 0 {
			ctx, cancel = context.WithTimeout(r.ctx, o.timeout)
		}
		r.stepping = true
		v, err := r.callStep(ctx, name, fn)
		r.stepping = false
		cancel()
		if err == nil {
			r.appendEntry(Entry{Name: name, Kind: KindDo, Value: v})
			return v, nil
		}
		var perm *permanentError
		if errors.As(err, &perm) || attempt >= o.attempts || r.ctx.Err() != nil {
			r.appendEntry(Entry{Name: name, Kind: KindDo, Err: err.Error()})
			return nil, &StepError{Step: name, Message: err.Error()}
		}
		t := time.NewTimer(o.backoff(attempt))
		select {
		case <-r.ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// callStep runs fn, the closure of step name, turning a panic into an
// error (retried like any other) whose text names an incident logged with
// the panic and its stack. It may run on another goroutine than the
// handler's: it reads only fields that never change during the run.
func (r *run) callStep(ctx context.Context, name string, fn func(context.Context) (json.RawMessage, error)) (v json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("the step panicked (" + r.recovered("task step panicked", p, "step", name) + ")")
		}
	}()
	return fn(ctx)
}

// recovered logs a recovered panic p with its stack on the server's
// logger, at ERROR under msg, and returns the text to give the client in
// its place: the panic's value may hold anything, so only an incident id
// that points to the log record leaves the server. Call it from the
// deferred function that recovered p, so the stack is the panic's.
func (r *run) recovered(msg string, p any, attrs ...any) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	incident := hex.EncodeToString(b[:])
	attrs = append(attrs, "tool", r.tool, "panic", fmt.Sprint(p), "incident", incident, "stack", string(debug.Stack()))
	if r.taskID != "" {
		attrs = append(attrs, "task", r.taskID)
	}
	if r.log != nil {
		r.log.Error(msg, attrs...)
	}
	return "incident " + incident + "; the server logged the details"
}

func (r *run) sleep(name string, until func(time.Time) time.Time) error {
	if err := r.enter("Step.Sleep", name); err != nil {
		return err
	}
	now := r.now()
	if e, ok := r.next(name, KindSleep); ok {
		if now.Before(e.Until) {
			if r.mode != modeDurable {
				return sleepCtx(r.ctx, e.Until.Sub(now))
			}
			panic(suspend{kind: suspendWake, at: e.Until})
		}
		return nil
	}
	if r.mode == modePreflight {
		panic(suspend{kind: suspendNeedTask})
	}
	at := until(now)
	r.appendEntry(Entry{Name: name, Kind: KindSleep, Until: at})
	if !now.Before(at) {
		return nil
	}
	if r.mode == modeInline {
		return sleepCtx(r.ctx, at.Sub(now))
	}
	panic(suspend{kind: suspendWake, at: at})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *run) input(name string, reqs map[string]json.RawMessage, o inputOptions) (map[string]json.RawMessage, error) {
	if err := r.enter("Step.Input", name); err != nil {
		return nil, err
	}
	now := r.now()
	if e, ok := r.next(name, KindInput); ok {
		got, done := r.collect(e)
		if done {
			return got, nil
		}
		if !e.Until.IsZero() && !now.Before(e.Until) {
			return got, ErrInputTimeout
		}
		var asked map[string]json.RawMessage
		if err := json.Unmarshal(e.Value, &asked); err != nil {
			return nil, fmt.Errorf("decoding journaled input requests of %q: %w", name, err)
		}
		for k := range got {
			delete(asked, k)
		}
		r.parkFor(asked, e.Any, e.Until)
	}
	keys := make([]string, 0, len(reqs))
	for k := range reqs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, prev := range r.journal {
		if prev.Kind != KindInput {
			continue
		}
		for _, k := range keys {
			if slices.Contains(prev.Keys, k) {
				panic(nondeterminism{fmt.Sprintf("input key %q was already used by step %q; input keys must be unique over a task's life", k, prev.Name)})
			}
		}
	}
	if len(keys) == 0 {
		panic(nondeterminism{fmt.Sprintf("input step %q asks for nothing", name)})
	}
	raw, err := json.Marshal(reqs)
	if err != nil {
		return nil, fmt.Errorf("encoding input requests of %q: %w", name, err)
	}
	e := Entry{Name: name, Kind: KindInput, Keys: keys, Any: o.any, Value: raw}
	if o.deadline > 0 {
		e.Until = now.Add(o.deadline)
	}
	r.appendEntry(e)
	if got, done := r.collect(&e); done {
		return got, nil
	}
	r.parkFor(reqs, e.Any, e.Until)
	return nil, nil // unreachable: parkFor unwinds
}

func (r *run) parkFor(reqs map[string]json.RawMessage, any bool, deadline time.Time) {
	if r.mode == modeDurable {
		panic(suspend{kind: suspendPark, park: reqs, any: any, at: deadline})
	}
	panic(suspend{kind: suspendInput, park: reqs})
}

// collect gathers the responses for e's keys and reports whether e's wait
// is over.
func (r *run) collect(e *Entry) (map[string]json.RawMessage, bool) {
	got := make(map[string]json.RawMessage)
	for _, k := range e.Keys {
		if v, ok := r.responses[k]; ok {
			got[k] = v
		}
	}
	if e.Any {
		return got, len(got) > 0
	}
	return got, len(got) == len(e.Keys)
}

// outcome is how a handler run ended.
type outcome struct {
	result  *mcp.CallToolResult // returned normally
	err     error               // returned error
	susp    *suspend            // unwound
	failure *ErrorObject        // nondeterminism or panic
}

// execute runs h under r and classifies how it ended.
func execute(r *run, h func(context.Context, *Step) (*mcp.CallToolResult, error)) (out outcome) {
	defer func() {
		p := recover()
		switch v := p.(type) {
		case nil:
		case suspend:
			out = outcome{susp: &v}
		case nondeterminism:
			out = outcome{failure: &ErrorObject{Code: CodeInternalError, Message: v.msg}}
		case misuse:
			out = outcome{failure: &ErrorObject{Code: CodeInternalError, Message: v.msg}}
		default:
			out = outcome{failure: &ErrorObject{Code: CodeInternalError,
				Message: "internal error: the tool handler panicked (" + r.recovered("tool handler panicked", v) + ")"}}
		}
		// A Step method called off the handler's goroutine broke the run:
		// it fails, however the handler ended (unless the claim was lost,
		// when nothing may be written).
		if msg := r.failure(); msg != "" && (out.susp == nil || out.susp.kind != suspendStop) {
			out = outcome{failure: &ErrorObject{Code: CodeInternalError, Message: msg}}
		}
	}()
	r.goroutine = goid()
	res, err := h(r.ctx, &Step{r: r})
	return outcome{result: res, err: err}
}

// toolError converts a handler's Go error into the JSON-RPC error object of
// a failed task.
func toolError(err error) *ErrorObject {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		e := &ErrorObject{Code: we.Code, Message: we.Message}
		if json.Valid(we.Data) {
			e.Data = we.Data // invalid data would make the task's record unwritable
		}
		return e
	}
	return &ErrorObject{Code: CodeInternalError, Message: err.Error()}
}

// encodeResult renders a final CallToolResult as stored and served inline
// on tasks/get, with resultType "complete" and content never null.
func encodeResult(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encoding the tool result: %w", err)
	}
	var probe struct {
		ResultType *string `json:"resultType"`
	}
	if json.Unmarshal(b, &probe) == nil && probe.ResultType == nil && len(b) > 1 && b[0] == '{' {
		sep := ","
		if b[1] == '}' {
			sep = ""
		}
		b = append([]byte(`{"resultType":"complete"`+sep), b[1:]...)
	}
	return b, nil
}
