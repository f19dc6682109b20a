package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"go.opentelemetry.io/otel/trace"
)

// Parallel steps: All runs the branches of one step in separate worker
// invocations, each journaled, retried and fenced on its own, and joins
// them. See the package documentation, "Parallel steps".

// Concurrency bounds how many branches of an [All] step are in flight at
// once (queued, running or waiting for a retry); default
// DefaultConcurrency. As a branch finishes, the next one starts. It
// applies to All only.
func Concurrency(n int) DoOption { return func(o *doOptions) { o.concurrency = n } }

// JoinError is the error of an [All] step some of whose branches failed
// (each after its retries); the results of the others are returned with
// it.
type JoinError struct {
	// Step is the parallel step's name.
	Step string
	// Failures are the failed branches, by index.
	Failures []BranchFailure
}

// BranchFailure is one failed branch of a parallel step.
type BranchFailure struct {
	// Index is the branch's index in the step's items.
	Index int
	// Message is its final error.
	Message string
}

func (e *JoinError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "parallel step %q: %d branches failed", e.Step, len(e.Failures))
	for i, f := range e.Failures {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failures)-i)
			break
		}
		fmt.Fprintf(&b, "; branch %d: %s", f.Index, f.Message)
	}
	return b.String()
}

// All runs fn over items as the parallel step name: one branch per item,
// each in a worker invocation of its own, at most [Concurrency] at once,
// and returns their results in the items' order once every branch has
// finished. Each branch is a [Do] step of its own (the tool's
// StepDefaults and opts apply: retries, backoff, [Timeout] per attempt):
// its result is journaled when it finishes and a finished branch never
// runs again; a worker that dies mid-branch loses only that branch's
// attempt. The task waits without any invocation (status working) while
// its branches run, and resumes when the last one finishes.
//
// A branch that fails (after its retries) fails the join: All returns the
// results of the others (the zero Out for the failed ones) with a
// [*JoinError] that lists the failures. Cancelling the task stops the
// branches at their next chance (a running one sees its context
// cancelled). fn runs in a branch's invocation after the handler has
// replayed up to this step, so items must be the same on every run
// (computed from the arguments or from journaled steps), and fn must not
// call Step methods. Out must survive a JSON round trip; the results
// together are journaled as one value, at most Options.MaxResultBytes.
//
// On a store that is not a [driver.Brancher], the branches run one after another
// as Do steps named "name[i]". Inline (a client without the tasks
// extension) they run concurrently within the call, or, with the
// async-jobs fallback, the call goes on as a task.
func All[In, Out any](s *Step, name string, items []In, fn func(ctx context.Context, item In) (Out, error), opts ...DoOption) ([]Out, error) {
	o := s.r.doOpts(opts)
	limit := s.r.maxValue
	branch := func(ctx context.Context, i int) (json.RawMessage, error) {
		v, err := fn(ctx, items[i])
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, Permanent(fmt.Errorf("encoding the result of branch %d: %w", i, err))
		}
		if limit > 0 && len(b) > limit {
			return nil, Permanent(fmt.Errorf("the result of branch %d is %d bytes, over the %d byte limit (Options.MaxResultBytes)", i, len(b), limit))
		}
		return b, nil
	}
	var outs []driver.BranchOutcome
	var err error
	if s.r.forks() {
		outs, err = s.r.all(name, len(items), o, branch)
	} else {
		outs, err = s.r.allInSequence(s, name, len(items), opts, branch)
	}
	if err != nil {
		return nil, err
	}
	res := make([]Out, len(items))
	var fails []BranchFailure
	for i, oc := range outs {
		if oc.Err != "" {
			fails = append(fails, BranchFailure{Index: i, Message: oc.Err})
			continue
		}
		if err := json.Unmarshal(oc.Value, &res[i]); err != nil {
			return nil, fmt.Errorf("decoding the journaled result of branch %d of %q: %w", i, name, err)
		}
	}
	if len(fails) > 0 {
		return res, &JoinError{Step: name, Failures: fails}
	}
	return res, nil
}

// doOpts is a Do step's policy: the engine's defaults, the tool's
// StepDefaults, then opts.
func (r *run) doOpts(opts []DoOption) doOptions {
	o := doOptions{attempts: 3, base: time.Second, max: time.Minute, jitterFrac: 0.2}
	for _, opt := range r.stepDefaults {
		opt(&o)
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// branchRef is a parsed branch id.
type branchRef struct {
	task        string
	fork, index int
}

func parseBranchID(id string) (branchRef, bool) {
	task, fork, index, ok := driver.ParseBranchID(id)
	return branchRef{task: task, fork: fork, index: index}, ok
}

// forks reports whether the run starts parallel steps as forks: durably
// on a Brancher, and inline (concurrently within the call).
func (r *run) forks() bool {
	if r.w == nil {
		return true
	}
	_, ok := r.w.s.store.(driver.Brancher)
	return ok
}

// forkNumber is how many parallel steps the journal holds up to the
// cursor.
func (r *run) forkNumber() int {
	n := 0
	for i := range r.journal[:r.cursor] {
		if r.journal[i].Kind == driver.KindFork {
			n++
		}
	}
	return n
}

// forkSpec is the Value of a KindFork entry.
type forkSpec struct {
	N int `json:"n"`
	C int `json:"c"`
}

// joinValue is the Value of a KindJoin entry.
type joinValue struct {
	V []json.RawMessage `json:"v"`
	E map[string]string `json:"e,omitempty"`
}

// all runs the parallel step name of n branches, or replays it.
func (r *run) all(name string, n int, o doOptions, branch func(context.Context, int) (json.RawMessage, error)) ([]driver.BranchOutcome, error) {
	if err := r.enter("tasks.All", name); err != nil {
		return nil, err
	}
	defer r.leave()
	if n > driver.MaxBranches {
		return nil, fmt.Errorf("parallel step %q has %d branches, over the limit of %d", name, n, driver.MaxBranches)
	}
	if e, ok := r.next(name, driver.KindFork); ok {
		var spec forkSpec
		_ = json.Unmarshal(e.Value, &spec)
		if spec.N != n {
			panic(nondeterminism{fmt.Sprintf("parallel step %q has %d branches in the journal but the handler now gives %d: the tool's code changed while this task was in flight", name, spec.N, n)})
		}
		number := r.forkNumber()
		if j, ok := r.event(name, driver.KindJoin); ok {
			return decodeJoin(j, n)
		}
		if r.mode == modeBranch && r.branch.fork == number {
			r.w.runBranch(r, name, o, branch) // unwinds
		}
		if r.replaying() || r.mode == modeBranch {
			r.mismatch(&r.journal[r.cursor], name, driver.KindJoin)
		}
		return r.w.join(r, name, number, n)
	}
	switch r.mode {
	case modePreflight:
		panic(suspend{kind: suspendNeedTask})
	case modeInline:
		return r.allInline(name, n, o, branch)
	}
	c := o.concurrency
	if c <= 0 {
		c = DefaultConcurrency
	}
	c = max(min(c, n), 1)
	spec, _ := json.Marshal(forkSpec{N: n, C: c})
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindFork, Value: spec})
	if n == 0 {
		return r.joined(name, nil)
	}
	fork := &driver.Fork{Name: name, Number: r.forkNumber(), Branches: n, Concurrency: c}
	panic(suspend{kind: suspendAwait, await: name, at: r.claim.Task.ExpiresAt().Truncate(time.Millisecond), fork: fork})
}

// decodeJoin returns the outcomes a KindJoin entry holds.
func decodeJoin(e *driver.Entry, n int) ([]driver.BranchOutcome, error) {
	if e.Err != "" {
		return nil, &StepError{Step: e.Name, Message: e.Err}
	}
	var jv joinValue
	if err := json.Unmarshal(e.Value, &jv); err != nil || len(jv.V) != n {
		return nil, fmt.Errorf("decoding the journaled join of %q: not %d results", e.Name, n)
	}
	outs := make([]driver.BranchOutcome, n)
	for i := range outs {
		outs[i].Value = jv.V[i]
		outs[i].Err = jv.E[strconv.Itoa(i)]
	}
	return outs, nil
}

// joined journals the join of the parallel step name with outs and
// returns them (or the step's error, when together they are too large).
func (r *run) joined(name string, outs []driver.BranchOutcome) ([]driver.BranchOutcome, error) {
	jv := joinValue{V: make([]json.RawMessage, len(outs))}
	for i, oc := range outs {
		jv.V[i] = oc.Value
		if oc.Err != "" {
			jv.V[i] = json.RawMessage("null")
			if jv.E == nil {
				jv.E = map[string]string{}
			}
			jv.E[strconv.Itoa(i)] = oc.Err
		}
	}
	b, err := json.Marshal(jv)
	if err != nil {
		return nil, fmt.Errorf("encoding the join of %q: %w", name, err)
	}
	if r.maxValue > 0 && len(b) > r.maxValue {
		msg := fmt.Sprintf("the results of its %d branches are %d bytes together, over the %d byte limit (Options.MaxResultBytes)", len(outs), len(b), r.maxValue)
		r.appendEntry(driver.Entry{Name: name, Kind: driver.KindJoin, Err: msg})
		return nil, &StepError{Step: name, Message: msg}
	}
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindJoin, Value: b})
	return decodeJoin(&r.journal[len(r.journal)-1], len(outs))
}

// join is the durable run meeting its open fork number: it journals the
// join once every branch finished, and waits for it again otherwise.
func (w *worker) join(r *run, name string, number, n int) ([]driver.BranchOutcome, error) {
	outs, err := w.s.store.(driver.Brancher).Joined(r.ctx, r.taskID, number)
	if err != nil {
		w.log.Warn("reading a parallel step's branches failed; the task runs again at its lease's end", "task", r.taskID, "step", name, "err", err)
		panic(suspend{kind: suspendStop})
	}
	if outs == nil {
		panic(suspend{kind: suspendAwait, await: name, at: r.claim.Task.ExpiresAt().Truncate(time.Millisecond)})
	}
	if len(outs) != n {
		panic(nondeterminism{fmt.Sprintf("parallel step %q has %d branches in the store but %d in the handler", name, len(outs), n)})
	}
	return r.joined(name, outs)
}

// allInSequence runs the branches one after another as Do steps
// "name[i]", on a store that is not a Brancher.
func (r *run) allInSequence(s *Step, name string, n int, opts []DoOption, branch func(context.Context, int) (json.RawMessage, error)) ([]driver.BranchOutcome, error) {
	outs := make([]driver.BranchOutcome, n)
	for i := range n {
		v, err := Do(s, fmt.Sprintf("%s[%d]", name, i), func(ctx context.Context) (json.RawMessage, error) { return branch(ctx, i) }, opts...)
		var se *StepError
		switch {
		case errors.As(err, &se):
			outs[i].Err = se.Message
		case err != nil:
			return nil, err
		default:
			outs[i].Value = v
		}
	}
	return outs, nil
}

// allInline runs the branches concurrently within an inline call, each
// with Do's retries.
func (r *run) allInline(name string, n int, o doOptions, branch func(context.Context, int) (json.RawMessage, error)) ([]driver.BranchOutcome, error) {
	if left, ok := r.budgetLeft(); ok && r.jobs && left < r.minStep {
		return nil, r.needTask(fmt.Sprintf("its parallel step %q would start with only %s of this call's budget left", name, left.Round(time.Millisecond)))
	}
	c := o.concurrency
	if c <= 0 {
		c = DefaultConcurrency
	}
	outs := make([]driver.BranchOutcome, n)
	cut := make([]bool, n)
	sem := make(chan struct{}, max(c, 1))
	var wg sync.WaitGroup
	r.stepping(true)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			outs[i], cut[i] = r.inlineBranch(fmt.Sprintf("%s[%d]", name, i), i, o, branch)
		})
	}
	wg.Wait()
	r.stepping(false)
	for i := range cut {
		if cut[i] && r.jobs {
			return nil, r.needTask(fmt.Sprintf("a branch of its parallel step %q did not finish within this call's budget", name))
		}
	}
	spec, _ := json.Marshal(forkSpec{N: n, C: c})
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindFork, Value: spec})
	return r.joined(name, outs)
}

// inlineBranch runs branch i within an inline call; cut reports that the
// call's budget ended it.
func (r *run) inlineBranch(step string, i int, o doOptions, branch func(context.Context, int) (json.RawMessage, error)) (driver.BranchOutcome, bool) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := r.ctx, context.CancelFunc(func() {})
		if o.timeout > 0 {
			ctx, cancel = context.WithTimeout(r.ctx, o.timeout)
		}
		v, err := r.callStep(ctx, step, func(ctx context.Context) (json.RawMessage, error) { return branch(ctx, i) })
		cancel()
		if err == nil {
			return driver.BranchOutcome{Value: v}, false
		}
		var perm *permanentError
		if errors.Is(r.ctx.Err(), context.DeadlineExceeded) && !errors.As(err, &perm) {
			return driver.BranchOutcome{Err: err.Error()}, true
		}
		if errors.As(err, &perm) || attempt >= o.attempts || r.ctx.Err() != nil {
			return driver.BranchOutcome{Err: err.Error()}, false
		}
		if sleepCtx(r.ctx, o.backoff(attempt)) != nil {
			return driver.BranchOutcome{Err: err.Error()}, true
		}
	}
}

// strayBranch fails a branch's run whose handler, replaying, reached a
// step the journal does not hold before the parallel step.
func (r *run) strayBranch(name string, kind driver.EntryKind) {
	panic(nondeterminism{fmt.Sprintf("a branch of a parallel step replayed the handler and met %s %q, a step the journal does not hold, before reaching the parallel step: the tool's code changed while this task was in flight", kind, name)})
}

// enqueueBranches hands the first branches of fork to the queue, for a
// store that does not dispatch (the sweeper recovers a lost one).
func (s *Server) enqueueBranches(ctx context.Context, id string, fork *driver.Fork) {
	for i := range fork.Concurrency {
		if err := s.enqueue(ctx, driver.BranchID(id, fork.Number, i), time.Time{}); err != nil {
			s.log.Warn("enqueueing a branch failed; the sweeper will recover it", "task", id, "step", fork.Name, "branch", i, "err", err)
		}
	}
}

// advanceBranch is Advance for the branch id: it claims the branch,
// replays the task's handler up to the parallel step, runs the branch and
// commits its outcome.
func (s *Server) advanceBranch(ctx context.Context, id string, ref branchRef) (res AdvanceResult, err error) {
	b, ok := s.store.(driver.Brancher)
	if !ok {
		return AdvanceResult{Skipped: true, Reason: "task not found"}, nil
	}
	w := &worker{s: s, log: s.log, qid: id,
		cancelled: func(ctx context.Context, c *driver.Claim) (bool, error) { return b.BranchCancelled(ctx, id, c.Gen) }}
	rctx, cancel := context.WithTimeout(ctx, s.opts.MaxDuration-s.opts.SafetyMargin)
	defer cancel()
	var start time.Time
	if s.tel.tracer != nil {
		start = time.Now()
	}
	now := s.now()
	lease, renews := s.opts.Lease, true
	if whole := s.opts.MaxDuration + s.opts.SafetyMargin; lease >= whole {
		lease, renews = whole, false
	}
	bc, err := b.ClaimBranch(ctx, id, now, lease)
	var c *driver.Claim
	if bc != nil {
		c = bc.Claim
	}
	ctx, span := s.advanceSpan(ctx, id, c, start, err)
	defer func() { endAdvance(span, res, err) }()
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return AdvanceResult{Skipped: true, Reason: "branch not found"}, nil
	case err != nil:
		s.storeFailed(ctx, "claim")
		return AdvanceResult{}, err
	}
	res = AdvanceResult{Status: driver.StatusWorking, Skipped: true}
	switch bc.State {
	case driver.BranchLeased:
		res.Reason = "leased by another worker"
		_, deferrer := s.queue.(deferrer)
		if !s.dispatch && (deferrer || bc.Until.Sub(now) <= s.renewEvery()) {
			return res, s.enqueue(ctx, id, bc.Until)
		}
		return res, nil
	case driver.BranchWaiting:
		res.Reason = "waiting for a retry"
		return res, s.enqueue(ctx, id, bc.Until)
	case driver.BranchIdle:
		res.Reason = "nothing to run"
		return res, nil
	}
	if renews {
		w.renewer, w.renewed = branchRenewer{b, id}, time.Now()
	}
	if span != nil {
		rctx = trace.ContextWithSpan(rctx, span)
	}
	t := s.tools[c.Task.Tool]
	r := &run{
		ctx: rctx, mode: modeBranch, taskID: ref.task, journal: replayable(c.Journal), responses: c.Responses,
		events: c.Events, claimed: now, now: s.now, w: w, claim: c, statusMsg: c.Task.StatusMessage,
		maxValue: s.opts.MaxResultBytes, log: s.log, tool: c.Task.Tool, tramps: s.tramps, branch: &ref,
	}
	if !c.Lost.IsZero() {
		w.log.Warn("branch delivered again: the worker that held it was lost", "task", ref.task, "branch", id, "lease_ended", c.Lost)
	}
	var out outcome
	if t == nil {
		out.failure = &driver.ErrorObject{Code: CodeInternalError,
			Message: fmt.Sprintf("tool %q is not registered in this worker", c.Task.Tool)}
	} else {
		r.stepDefaults = t.stepDefaults
		out = execute(r, t.bind(c.Task.Args))
	}
	return w.finishBranch(ctx, r, out)
}

// branchRenewer renews a branch's lease through the worker's lease
// machinery (see keepLease).
type branchRenewer struct {
	b  driver.Brancher
	id string
}

func (br branchRenewer) RenewLease(ctx context.Context, c *driver.Claim, now time.Time, lease time.Duration) error {
	return br.b.RenewBranch(ctx, br.id, c.Gen, now, lease)
}

// runBranch runs the branch r.branch of the parallel step name: one
// attempt of fn, whose outcome it commits. It unwinds the handler.
func (w *worker) runBranch(r *run, name string, o doOptions, fn func(context.Context, int) (json.RawMessage, error)) {
	ref, c := r.branch, r.claim
	if time.Until(deadlineOf(r.ctx)) < w.s.opts.MinStepTime {
		w.commitBranch(r, &driver.BranchChange{Release: true})
	}
	att := c.Attempts
	if att > o.attempts {
		w.commitBranch(r, &driver.BranchChange{Err: fmt.Sprintf("gave up after %d attempts: the worker died or ran out of time on each", att-1), Attempt: att - 1})
	}
	w.keepLease(r)
	step := fmt.Sprintf("%s[%d]", name, ref.index)
	sctx, span := r.stepSpan(step, att)
	start := w.s.now()
	r.stepping(true)
	v, err, cancelled := w.runStep(r, sctx, step, o, func(ctx context.Context) (json.RawMessage, error) { return fn(ctx, ref.index) })
	r.stepping(false)
	end := w.s.now()
	took := end.Sub(start)
	switch {
	case cancelled:
		r.endStep(span, "cancelled", took, att, nil)
		panic(suspend{kind: suspendStop}) // the task ended or the claim was lost: nothing to write
	case err == nil:
		r.endStep(span, "ok", took, att, nil)
		w.commitBranch(r, &driver.BranchChange{Value: v, Attempt: att, Took: took})
	}
	var perm *permanentError
	if errors.As(err, &perm) || att >= o.attempts {
		r.endStep(span, "error", took, att, err)
		w.commitBranch(r, &driver.BranchChange{Err: err.Error(), Attempt: att, Took: took})
	}
	r.endStep(span, "retry", took, att, err)
	w.log.Info("branch attempt failed; will retry", "task", ref.task, "step", step, "attempt", att, "err", err)
	w.commitBranch(r, &driver.BranchChange{Err: err.Error(), Retry: end.Add(o.backoff(att)).Truncate(time.Millisecond), Attempt: att, Took: took})
}

// commitBranch writes ch for the run's branch, enqueues what it
// dispatched when the store does not, and unwinds the handler.
func (w *worker) commitBranch(r *run, ch *driver.BranchChange) {
	ch.Now = w.s.now()
	b := w.s.store.(driver.Brancher)
	res, err := b.CommitBranch(r.ctx, w.qid, r.claim.Gen, ch)
	if err != nil {
		w.log.Warn("branch write rejected: another worker claimed it, its task ended, or the store failed", "branch", w.qid, "err", err)
		panic(suspend{kind: suspendStop})
	}
	r.branchDone = true
	if !w.s.dispatch {
		ctx := context.WithoutCancel(r.ctx)
		for _, id := range res.Next {
			if err := w.s.enqueue(ctx, id, time.Time{}); err != nil {
				w.log.Warn("enqueueing a branch failed; the sweeper will recover it", "branch", id, "err", err)
			}
		}
		if !ch.Retry.IsZero() {
			if err := w.s.enqueue(ctx, w.qid, ch.Retry); err != nil {
				w.log.Warn("enqueueing a branch's retry failed; the sweeper will recover it", "branch", w.qid, "err", err)
			}
		}
		if ch.Release {
			if err := w.s.enqueue(ctx, w.qid, time.Time{}); err != nil {
				w.log.Warn("enqueueing a branch failed; the sweeper will recover it", "branch", w.qid, "err", err)
			}
		}
		if res.Resumed {
			if err := w.s.enqueue(ctx, r.taskID, time.Time{}); err != nil {
				w.log.Warn("enqueueing a joined task failed; the sweeper will recover it", "task", r.taskID, "err", err)
			}
		}
	}
	panic(suspend{kind: suspendStop})
}

// finishBranch ends a branch's invocation: the branch's outcome is
// written already, unless the handler never reached the parallel step,
// which fails the branch.
func (w *worker) finishBranch(ctx context.Context, r *run, out outcome) (AdvanceResult, error) {
	res := AdvanceResult{Status: driver.StatusWorking}
	if r.branchDone {
		res.Steps, res.Settled = 1, w.s.dispatch
		return res, nil
	}
	if out.susp != nil && out.susp.kind == suspendStop {
		res.Skipped, res.Reason = true, "claim lost"
		return res, nil
	}
	msg := "the handler did not reach the parallel step when it replayed (it returned or stopped before): the tool's code changed while this task was in flight"
	if out.failure != nil {
		msg = out.failure.Message
	}
	w.log.Warn("branch failed: its handler did not replay to it", "branch", w.qid, "reason", msg)
	r.ctx = ctx
	func() {
		defer func() { _ = recover() }() // commitBranch unwinds
		w.commitBranch(r, &driver.BranchChange{Err: msg, Attempt: r.claim.Attempts})
	}()
	res.Settled = w.s.dispatch && r.branchDone
	return res, nil
}

// watchFork is the sweeper's look at a task that awaits an event: when it
// is a parallel step's join, the branches whose message may be lost are
// enqueued again. It reports whether the task has an open fork (the
// sweeper then looks again within its grace).
func (s *Server) watchFork(ctx context.Context, id string, now time.Time, res *SweepResult) (bool, error) {
	b, ok := s.store.(driver.Brancher)
	if !ok {
		return false, nil
	}
	ids, open, err := b.Stalled(ctx, id, now)
	if err != nil {
		return false, fmt.Errorf("sweep %s: branches: %w", id, err)
	}
	for _, bid := range ids {
		if err := s.enqueue(ctx, bid, time.Time{}); err != nil {
			return open, err
		}
		res.Enqueued++
	}
	return open, nil
}
