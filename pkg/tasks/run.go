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

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
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
	// modeBranch runs one branch of a parallel step in a worker: the
	// handler replays the journal up to the step, which runs the branch
	// (see All); it takes no other new step.
	modeBranch
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
	suspendAwait                        // wait for an event (durable) until `at`
)

type suspend struct {
	kind suspendKind
	at   time.Time
	park map[string]json.RawMessage
	any  bool
	// sleep marks a suspendWake of a Sleep (not a retry's backoff): an
	// answer to one of the offers cuts it short.
	sleep bool
	// offers are the offers outstanding when the run parked or slept (see
	// openOffers).
	offers []string
	// why says what a synchronous run cannot do within its call, for a
	// suspendNeedTask of an inline run (see needTask).
	why string
	// await is the event a suspendAwait waits for; fork, the branches it
	// starts (a parallel step's join).
	await string
	fork  *driver.Fork
}

// nondeterminism is raised when the handler's steps no longer match the
// journal: the tool's code changed while the task was in flight.
type nondeterminism struct{ msg string }

// run is the state of one execution of a handler. Only the handler's
// goroutine touches it, which guard enforces for Step methods.
type run struct {
	guard
	// tramps are the trampolines of the run's server (nil: none; see
	// execute).
	tramps    *trampolines
	ctx       context.Context
	mode      mode
	taskID    string
	journal   []driver.Entry
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
	// stepDefaults is the tool's step policy (StepDefaults).
	stepDefaults []DoOption

	// inline only: what happens when the run cannot go on within its
	// call (see needTask). With jobs, it goes on as a task (the async-jobs
	// fallback); without, refuse gives the error to answer the call with.
	// minStep is the budget a new step needs left (Options.MinStepTime).
	jobs    bool
	refuse  func(why string) error
	minStep time.Duration

	// durable only
	w        *worker
	claim    *driver.Claim
	pending  []driver.Entry // journaled in memory, not yet written
	newSteps int
	stepDone bool // a step finished since the last write: reset attempts
	charged  bool // the claim's attempt charge was used by a step
	// opens are waits for events opened since the last write (written
	// with it); events the payloads the claim read (Claim.Events);
	// claimed the claim's time, which decides the waits it closed.
	opens   []driver.EventWait
	events  map[string]json.RawMessage
	claimed time.Time
	// branch is the branch a modeBranch run runs (see All); branchDone
	// reports that its outcome is written.
	branch     *branchRef
	branchDone bool
}

func (r *run) next(name string, kind driver.EntryKind) (*driver.Entry, bool) {
	if r.cursor < len(r.journal) {
		e := &r.journal[r.cursor]
		if e.Name != name || e.Kind != kind {
			r.mismatch(e, name, kind)
		}
		r.cursor++
		return e, true
	}
	for i := range r.journal {
		if r.journal[i].Name == name {
			panic(nondeterminism{fmt.Sprintf("step name %q is used twice; step names must be unique within a task", name)})
		}
	}
	if r.mode == modeBranch {
		r.strayBranch(name, kind)
	}
	return nil, false
}

// mismatch fails the run whose handler asks for (kind, name) where the
// journal holds e.
func (r *run) mismatch(e *driver.Entry, name string, kind driver.EntryKind) {
	panic(nondeterminism{fmt.Sprintf(
		"step %d is %s %q in the journal but the handler now asks for %s %q: the tool's code changed while this task was in flight",
		r.cursor+1, e.Kind, e.Name, kind, name)})
}

// setStatus sets the status message (Step.Status) for a holder of the run.
func (r *run) setStatus(msg string) {
	if r.mode == modeBranch {
		return // a branch writes nothing of its task's
	}
	r.statusFresh = r.cursor >= len(r.journal)
	if r.statusMsg != msg {
		r.statusMsg = msg
		r.statusDirty = true
	}
}

// replaying reports whether the journal goes on past the cursor: the run
// is replaying what an earlier run did, not deciding anew.
func (r *run) replaying() bool { return r.cursor < len(r.journal) }

// event consumes the journal's next entry if it is (kind, name): an event
// journaled where an earlier run met it (a check that found an answer, a
// sleep that was cut short).
func (r *run) event(name string, kind driver.EntryKind) (*driver.Entry, bool) {
	if !r.replaying() {
		return nil, false
	}
	e := &r.journal[r.cursor]
	if e.Kind != kind || e.Name != name {
		return nil, false
	}
	r.cursor++
	return e, true
}

func (r *run) appendEntry(e driver.Entry) {
	if r.mode == modeDurable {
		if e.At.IsZero() {
			e.At = r.now()
		}
		r.pending = append(r.pending, e)
	}
	r.journal = append(r.journal, e)
	r.cursor++
}

// replayed takes the journal's next entry, without reading the goroutine
// id (see guard), when it is (kind, name): a call that only replays. It
// returns a copy of the entry.
func (r *run) replayed(name string, kind driver.EntryKind) (driver.Entry, bool) {
	if !r.tryReplay() {
		return driver.Entry{}, false
	}
	defer r.leave()
	if !r.replaying() {
		return driver.Entry{}, false
	}
	e := r.journal[r.cursor]
	if e.Name != name || e.Kind != kind {
		return driver.Entry{}, false
	}
	r.cursor++
	return e, true
}

// replayedSleep replays the sleep name, without reading the goroutine id,
// when the journal holds it next and goes on past it (the sleep is over):
// it reports whether an answer to an offer cut it short.
func (r *run) replayedSleep(name string) (woke, ok bool) {
	if !r.tryReplay() {
		return false, false
	}
	defer r.leave()
	if r.cursor+1 >= len(r.journal) {
		return false, false
	}
	if e := &r.journal[r.cursor]; e.Name != name || e.Kind != driver.KindSleep {
		return false, false
	}
	r.cursor++
	_, woke = r.event(name, driver.KindWoke)
	return woke, true
}

func (r *run) do(name string, o doOptions, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if e, ok := r.replayed(name, driver.KindDo); ok {
		if e.Err != "" {
			return nil, &StepError{Step: name, Message: e.Err}
		}
		return e.Value, nil
	}
	if err := r.enter("tasks.Do", name); err != nil {
		return nil, err
	}
	defer r.leave()
	if e, ok := r.next(name, driver.KindDo); ok {
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
	if left, ok := r.budgetLeft(); ok && r.jobs && left < r.minStep {
		return nil, r.needTask(fmt.Sprintf("its step %q would start with only %s of this call's budget left", name, left.Round(time.Millisecond)))
	}
	for attempt := 1; ; attempt++ {
		ctx, cancel := r.ctx, context.CancelFunc(func() {})
		if o.timeout > 0 {
			ctx, cancel = context.WithTimeout(r.ctx, o.timeout)
		}
		r.stepping(true)
		v, err := r.callStep(ctx, name, fn)
		r.stepping(false)
		cancel()
		if err == nil {
			r.appendEntry(driver.Entry{Name: name, Kind: driver.KindDo, Value: v})
			return v, nil
		}
		var perm *permanentError
		if r.jobs && errors.Is(r.ctx.Err(), context.DeadlineExceeded) && !errors.As(err, &perm) {
			// Cut short by the call's budget: the task runs it again.
			return nil, r.needTask(fmt.Sprintf("its step %q did not finish within this call's budget", name))
		}
		if errors.As(err, &perm) || attempt >= o.attempts || r.ctx.Err() != nil {
			r.appendEntry(driver.Entry{Name: name, Kind: driver.KindDo, Err: err.Error()})
			return nil, &StepError{Step: name, Message: err.Error()}
		}
		wait := o.backoff(attempt)
		if left, ok := r.budgetLeft(); ok && r.jobs && wait+r.minStep > left {
			return nil, r.needTask(fmt.Sprintf("its step %q failed and is retried in %s, past this call's budget", name, wait.Round(time.Millisecond)))
		}
		t := time.NewTimer(wait)
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
	if woke, ok := r.replayedSleep(name); ok {
		if woke {
			return ErrWoken
		}
		return nil
	}
	if err := r.enter("Step.Sleep", name); err != nil {
		return err
	}
	defer r.leave()
	now := r.now()
	if e, ok := r.next(name, driver.KindSleep); ok {
		if r.replaying() {
			// The journal goes on past the sleep: it is over, and says
			// whether an answer to an offer cut it short.
			if _, woke := r.event(name, driver.KindWoke); woke {
				return ErrWoken
			}
			return nil
		}
		return r.sleepOn(name, e.Until, now)
	}
	if r.mode == modePreflight {
		panic(suspend{kind: suspendNeedTask})
	}
	at := until(now)
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindSleep, Until: at})
	return r.sleepOn(name, at, now)
}

// sleepOn sleeps the journaled sleep name, at the end of the journal,
// until at: it returns once at has passed; inline, it really sleeps;
// durably, it parks the run, unless an answer to an outstanding offer is
// there, which ends the sleep (journaled, so that a replay ends it too).
func (r *run) sleepOn(name string, at, now time.Time) error {
	if !now.Before(at) {
		return nil
	}
	if r.mode != modeDurable {
		if dl, ok := r.ctx.Deadline(); ok && at.After(dl) {
			return r.needTask(fmt.Sprintf("it sleeps %s (step %q), longer than the %s this call has left",
				at.Sub(now).Round(time.Millisecond), name, dl.Sub(now).Round(time.Second)))
		}
		return sleepCtx(r.ctx, at.Sub(now)) // offers are never answered inline
	}
	offers := r.openOffers()
	for _, k := range offers {
		if _, ok := r.responses[k]; ok {
			r.appendEntry(driver.Entry{Name: name, Kind: driver.KindWoke})
			return ErrWoken
		}
	}
	panic(suspend{kind: suspendWake, at: at, sleep: true, offers: offers})
}

// offerState says what the journal, up to the cursor, holds of the offer
// name: whether it was made, withdrawn, and its answer found by a check.
func (r *run) offerState(name string) (offered, withdrawn, checked bool) {
	for i := range r.journal[:r.cursor] {
		e := &r.journal[i]
		if e.Name != name {
			continue
		}
		switch e.Kind {
		case driver.KindOffer:
			offered = true
		case driver.KindWithdraw:
			withdrawn = true
		case driver.KindCheck:
			checked = true
		}
	}
	return offered, withdrawn, checked
}

// openOffers returns the keys of the offers the journal, up to the cursor,
// holds open (made, not withdrawn, answer not yet found), sorted.
func (r *run) openOffers() []string {
	var open []string
	for i := range r.journal[:r.cursor] {
		e := &r.journal[i]
		switch e.Kind {
		case driver.KindOffer:
			open = append(open, e.Name)
		case driver.KindWithdraw, driver.KindCheck:
			open = slices.DeleteFunc(open, func(k string) bool { return k == e.Name })
		}
	}
	slices.Sort(open)
	return open
}

// keyUsed panics if key was already an input key of the task: asked by an
// Input step or offered.
func (r *run) keyUsed(key string) {
	for _, prev := range r.journal {
		if (prev.Kind == driver.KindInput && slices.Contains(prev.Keys, key)) || (prev.Kind == driver.KindOffer && prev.Name == key) {
			panic(nondeterminism{fmt.Sprintf("input key %q was already used by step %q; input keys must be unique over a task's life", key, prev.Name)})
		}
	}
}

func (r *run) offer(name string, req json.RawMessage) error {
	if _, ok := r.replayed(name, driver.KindOffer); ok {
		return nil
	}
	if err := r.enter("Step.Offer", name); err != nil {
		return err
	}
	defer r.leave()
	if _, ok := r.next(name, driver.KindOffer); ok {
		return nil
	}
	if r.mode == modePreflight {
		panic(suspend{kind: suspendNeedTask}) // an offer stands on a task
	}
	if name == "" {
		panic(nondeterminism{"Step.Offer needs a name (the offer's input key)"})
	}
	r.keyUsed(name)
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindOffer, Value: req})
	return nil
}

// replayedCheck replays the check of the offer name, without reading the
// goroutine id, while the journal goes on past the cursor: what the check
// found there (found), if ok. It leaves a check of an offer the journal
// never made to the checked path, which fails the run.
func (r *run) replayedCheck(name string) (v json.RawMessage, found, ok bool) {
	if !r.tryReplay() {
		return nil, false, false
	}
	defer r.leave()
	if !r.replaying() {
		return nil, false, false
	}
	if offered, _, _ := r.offerState(name); !offered {
		return nil, false, false
	}
	if e, ok := r.event(name, driver.KindCheck); ok {
		return e.Value, true, true
	}
	return nil, false, true // the check found nothing here the first time
}

func (r *run) checkInput(name string) (json.RawMessage, bool) {
	if v, found, ok := r.replayedCheck(name); ok {
		return v, found
	}
	if r.enter("Step.CheckInput", name) != nil {
		return nil, false
	}
	defer r.leave()
	offered, withdrawn, checked := r.offerState(name)
	if !offered {
		panic(nondeterminism{fmt.Sprintf("Step.CheckInput(%q): the task made no offer of that name (see Step.Offer)", name)})
	}
	if e, ok := r.event(name, driver.KindCheck); ok {
		return e.Value, true
	}
	if r.replaying() || withdrawn || checked || r.mode != modeDurable {
		// Replaying: the check found nothing here the first time.
		return nil, false
	}
	v, ok := r.responses[name]
	if !ok {
		return nil, false
	}
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindCheck, Value: v})
	return v, true
}

func (r *run) withdraw(name string) {
	if r.enter("Step.Withdraw", name) != nil {
		return
	}
	defer r.leave()
	offered, withdrawn, _ := r.offerState(name)
	if !offered {
		panic(nondeterminism{fmt.Sprintf("Step.Withdraw(%q): the task made no offer of that name (see Step.Offer)", name)})
	}
	if withdrawn {
		return
	}
	if r.replaying() {
		if _, ok := r.event(name, driver.KindWithdraw); !ok {
			r.mismatch(&r.journal[r.cursor], name, driver.KindWithdraw)
		}
		return
	}
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindWithdraw})
}

// needTask is what an inline run does when it cannot go on within its
// call (why says what it cannot do): with the async-jobs fallback it
// unwinds, and the call continues the run as a task; without, the call is
// refused at once (and the refusal logged) instead of holding the request
// until its deadline.
func (r *run) needTask(why string) error {
	if r.jobs {
		panic(suspend{kind: suspendNeedTask, why: why})
	}
	if r.log != nil {
		r.log.Warn("inline call refused: it cannot finish within the call's budget", "tool", r.tool, "reason", why)
	}
	if r.refuse == nil {
		return &jsonrpc.Error{Code: CodeInternalError, Message: "tool " + r.tool + " cannot finish within this call: " + why}
	}
	return r.refuse(why)
}

// budgetLeft is how much of its context's deadline an inline run has
// left; ok is false without one.
func (r *run) budgetLeft() (time.Duration, bool) {
	dl, ok := r.ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl), true
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
	defer r.leave()
	now := r.now()
	if e, ok := r.next(name, driver.KindInput); ok {
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
	for _, k := range keys {
		r.keyUsed(k)
	}
	if len(keys) == 0 {
		panic(nondeterminism{fmt.Sprintf("input step %q asks for nothing", name)})
	}
	raw, err := json.Marshal(reqs)
	if err != nil {
		return nil, fmt.Errorf("encoding input requests of %q: %w", name, err)
	}
	e := driver.Entry{Name: name, Kind: driver.KindInput, Keys: keys, Any: o.any, Value: raw}
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
		panic(suspend{kind: suspendPark, park: reqs, any: any, at: deadline, offers: r.openOffers()})
	}
	panic(suspend{kind: suspendInput, park: reqs})
}

// collect gathers the responses for e's keys and reports whether e's wait
// is over.
func (r *run) collect(e *driver.Entry) (map[string]json.RawMessage, bool) {
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
	failure *driver.ErrorObject // nondeterminism or panic
}

// execute runs h under r and classifies how it ended. When r.tramps has a
// trampoline free, the handler runs inside it on the calling goroutine, and
// the guard looks for it on the stack (see trampolines). Otherwise it runs
// on a goroutine of its own: its stack starts shallow, and so does every
// read of its goroutine id (see guard), which costs in proportion to the
// stack's depth.
func execute(r *run, h func(context.Context, *Step) (*mcp.CallToolResult, error)) outcome {
	if k := r.tramps.take(); k >= 0 {
		return executeOn(k, r, h)
	}
	done := make(chan outcome, 1)
	go func() { done <- executeHere(r, h) }()
	return <-done
}

// executeOn is execute inside trampoline k, taken from r.tramps, which it
// gives back once the handler returned and the guard is closed: no Step
// call of this run succeeds from then on, whatever goroutine makes it.
func executeOn(k int, r *run, h func(context.Context, *Step) (*mcp.CallToolResult, error)) (out outcome) {
	defer r.tramps.give(k)
	r.tramp = k + 1
	trampolineFuncs[k](func() { out = executeHere(r, h) })
	return out
}

// executeHere is execute on the calling goroutine.
func executeHere(r *run, h func(context.Context, *Step) (*mcp.CallToolResult, error)) (out outcome) {
	defer func() {
		p := recover()
		switch v := p.(type) {
		case nil:
		case suspend:
			out = outcome{susp: &v}
		case nondeterminism:
			out = outcome{failure: &driver.ErrorObject{Code: CodeInternalError, Message: v.msg}}
		case misuse:
			out = outcome{failure: &driver.ErrorObject{Code: CodeInternalError, Message: v.msg}}
		default:
			out = outcome{failure: &driver.ErrorObject{Code: CodeInternalError,
				Message: "internal error: the tool handler panicked (" + r.recovered("tool handler panicked", v) + ")"}}
		}
		// A Step method called off the handler's goroutine broke the run:
		// it fails, however the handler ended (unless the claim was lost,
		// when nothing may be written).
		if msg := r.failure(); msg != "" && (out.susp == nil || out.susp.kind != suspendStop) {
			out = outcome{failure: &driver.ErrorObject{Code: CodeInternalError, Message: msg}}
		}
	}()
	r.open()
	defer r.close()
	res, err := h(r.ctx, &Step{r: r})
	return outcome{result: res, err: err}
}

// toolError converts a handler's Go error into the JSON-RPC error object of
// a failed task.
func toolError(err error) *driver.ErrorObject {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		e := &driver.ErrorObject{Code: we.Code, Message: we.Message}
		if json.Valid(we.Data) {
			e.Data = we.Data // invalid data would make the task's record unwritable
		}
		return e
	}
	return &driver.ErrorObject{Code: CodeInternalError, Message: err.Error()}
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
