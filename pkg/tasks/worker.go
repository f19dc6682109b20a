package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"go.opentelemetry.io/otel/trace"

	"encoding/json"
)

// errTaskCancelled is the cause set on a step's context when tasks/cancel
// arrives while it runs.
var errTaskCancelled = errors.New("task cancelled")

// AdvanceResult says what one Advance did.
type AdvanceResult struct {
	// Status is the task's status afterwards ("" if it is gone).
	Status driver.Status
	// Steps is how many new steps ran.
	Steps int
	// Skipped is true when nothing was to be done (gone, terminal, leased,
	// parked or sleeping).
	Skipped bool
	// Reason explains a skip.
	Reason string
	// Settled reports that the store already enqueued the task's next turn
	// or dropped its message in the write that ended this invocation (see
	// [driver.Dispatcher]): a queue whose messages the store writes needs no
	// acknowledgement of this delivery.
	Settled bool
}

// worker holds what Advance needs.
type worker struct {
	s   *Server
	log *slog.Logger
	// renewer renews the lease of the run's claim (nil: its lease lasts
	// the invocation, or it was lost), and renewed is when the claim was
	// taken or last renewed (see keepLease).
	renewer driver.LeaseRenewer
	renewed time.Time
	// qid is the id the queue carries for this invocation: the task's, or
	// a branch's (see All).
	qid string
	// cancelled, when set, asks whether the branch this worker runs must
	// stop (see advanceBranch); nil: the store's CancelRequested.
	cancelled func(ctx context.Context, c *driver.Claim) (bool, error)
}

// Advance runs the task id forward by at most Options.StepsPerInvocation new
// steps, within Options.MaxDuration minus Options.SafetyMargin. It is what a
// queue-triggered function calls for each message; it is idempotent, so
// duplicate or late deliveries are harmless, and an id the server never
// issued is skipped as not found. A returned error means the message should
// be redelivered (the store was unreachable); every outcome of the task
// itself, including its failure, is a nil error.
func (s *Server) Advance(ctx context.Context, id string) (res AdvanceResult, err error) {
	if !driver.ValidID(id) {
		if ref, ok := parseBranchID(id); ok {
			return s.advanceBranch(ctx, id, ref)
		}
		// Never issued (see ValidID): no task, and nothing to redeliver.
		return AdvanceResult{Skipped: true, Reason: "task not found"}, nil
	}
	w := &worker{s: s, log: s.log, qid: id}
	// The step budget runs on the monotonic clock from here; Options.Now
	// only stamps what is stored (the lease, timestamps).
	rctx, cancel := context.WithTimeout(ctx, s.opts.MaxDuration-s.opts.SafetyMargin)
	defer cancel()
	var start time.Time
	if s.tel.tracer != nil {
		start = time.Now()
	}
	now := s.now()
	lease, renewer := s.lease()
	c, err := s.store.Claim(ctx, id, now, lease)
	// The invocation's span joins the task's trace, known from the claim.
	ctx, span := s.advanceSpan(ctx, id, c, start, err)
	defer func() { endAdvance(span, res, err) }()
	if span != nil {
		rctx = trace.ContextWithSpan(rctx, span)
	}
	s.recordLag(ctx, c, now)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return AdvanceResult{Skipped: true, Reason: "task not found"}, nil
	case errors.Is(err, driver.ErrLeased):
		res := AdvanceResult{Status: driver.StatusWorking, Skipped: true, Reason: "leased by another worker"}
		if !s.dispatch {
			return res, w.leased(ctx, id, now)
		}
		return res, nil // the claim made the message due at the lease's end
	case err != nil:
		s.storeFailed(ctx, "claim")
		return AdvanceResult{}, err
	}
	if c.Gen == 0 {
		if c.Ended {
			w.auditTerminal(ctx, c)
		}
		res := AdvanceResult{Status: c.Task.Status, Skipped: true}
		switch {
		case c.Task.Status.Terminal():
			res.Reason = "task is " + string(c.Task.Status)
		case c.Task.Status == driver.StatusInputRequired:
			res.Reason = "waiting for input"
			if !c.Task.WakeAt.IsZero() {
				// A deadline, or a sleep with offers, past the queue's
				// delay limit: chain it, as for a sleep.
				if err := w.s.enqueue(ctx, id, c.Task.WakeAt); err != nil {
					return res, err
				}
			}
		default:
			res.Reason = "sleeping"
			if err := w.s.enqueue(ctx, id, c.Task.WakeAt); err != nil {
				return res, err
			}
		}
		return res, nil
	}
	if renewer != nil {
		w.renewer, w.renewed = renewer, time.Now()
	}
	t := s.tools[c.Task.Tool]
	r := &run{
		ctx: rctx, mode: modeDurable, taskID: id, journal: replayable(c.Journal), responses: c.Responses,
		now: s.now, w: w, claim: c, statusMsg: c.Task.StatusMessage, maxValue: s.opts.MaxResultBytes,
		log: s.log, tool: c.Task.Tool, tramps: s.tramps, events: c.Events, claimed: now,
	}
	if !c.Lost.IsZero() {
		// The worker before was lost holding the task: history for
		// operators, written with this run's first write (its step's name
		// is set when the run starts a step, see doDurable).
		lost := max(c.Attempts-1, 0)
		w.log.Warn("task delivered again: the worker that held it was lost", "task", id, "lease_ended", c.Lost, "lost_attempt", lost)
		r.pending = append(r.pending, driver.Entry{Kind: driver.KindLost, At: c.Lost, Until: now, Attempt: lost})
	}
	var out outcome
	if t == nil {
		out.failure = &driver.ErrorObject{Code: CodeInternalError,
			Message: fmt.Sprintf("tool %q is not registered in this worker", c.Task.Tool)}
	} else {
		r.stepDefaults = t.stepDefaults
		out = execute(r, t.bind(c.Task.Args))
	}
	// Writes use the caller's context, not the step budget: the safety
	// margin is there for them.
	return w.finish(ctx, r, out)
}

// lease returns how long a claim lasts, and the store's LeaseRenewer when
// the worker renews it (nil: the claim lasts the whole invocation).
func (s *Server) lease() (time.Duration, driver.LeaseRenewer) {
	whole := s.opts.MaxDuration + s.opts.SafetyMargin
	if r, ok := s.store.(driver.LeaseRenewer); ok && s.opts.Lease < whole {
		return s.opts.Lease, r
	}
	return whole, nil
}

// renewEvery is how often a worker renews its lease: three renewals per
// lease, so that one that fails or comes late costs nothing.
func (s *Server) renewEvery() time.Duration { return s.opts.Lease / 3 }

// leased handles a delivery of task id that found it leased by another
// worker, on a store that does not dispatch (a dispatching store's claim
// made the task's message due at the lease's end itself): the task is
// delivered again when that lease ends, on a queue that keeps one message
// per task (a deferrer, whose message the holder moves along with its
// renewals), or on any queue when the lease ends within a renewal (the
// holder's last renewal message may have come before it by clock skew, a
// visibility timeout may have run out just before it). A lease further
// off is renewed by a live holder, whose renewals send their own
// messages: this delivery is dropped, as a duplicate.
func (w *worker) leased(ctx context.Context, id string, now time.Time) error {
	t, err := w.s.store.Peek(ctx, id)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return nil
		}
		w.s.storeFailed(ctx, "peek")
		return err
	}
	if !t.LeaseUntil.After(now) {
		return nil // released meanwhile: its next turn is queued
	}
	if _, deferrer := w.s.queue.(deferrer); !deferrer && t.LeaseUntil.Sub(now) > w.s.renewEvery() {
		return nil
	}
	return w.s.enqueue(ctx, id, t.LeaseUntil)
}

// keepLease renews the run's lease (see LeaseRenewer) when a renewal is
// due: every renewEvery since the claim or the last renewal. The worker
// calls it where a run spends time: on each cancellation poll while a
// step runs (see runStep), and before a step starts; so a step that ends
// before the first renewal costs nothing more, not even a timer, and
// renewals never run beside the run's own writes. On a store that does not
// dispatch it also moves the task's message to the lease's new end (see
// deferrer), so that the task is delivered again when the lease runs out
// if this process dies. A lost claim shows in the run's next write or
// cancellation poll; a failed renewal is tried again at the next poll.
func (w *worker) keepLease(r *run) {
	if w.renewer == nil || time.Since(w.renewed) < w.s.renewEvery() {
		return
	}
	s, id := w.s, w.qid
	// Not bound by the step's budget (a renewal near its end still
	// matters), but by the renewal interval: a later one is late anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), min(s.opts.StoreTimeout, s.renewEvery()))
	defer cancel()
	now, started := s.now(), time.Now()
	err := w.renewer.RenewLease(ctx, r.claim, now, s.opts.Lease)
	switch {
	case errors.Is(err, driver.ErrFenced) || errors.Is(err, driver.ErrNotFound):
		w.renewer = nil // nothing left to renew: another worker claimed the task, or it ended
		return
	case err != nil:
		s.storeFailed(ctx, "renew")
		w.log.Warn("renewing a task's lease failed; retrying", "task", id, "err", err)
		return
	}
	w.renewed = started
	if s.dispatch {
		return // the renewal moved the message itself
	}
	until := now.Add(s.opts.Lease)
	if d, ok := s.queue.(deferrer); ok {
		err = d.Defer(ctx, id, until)
	} else {
		err = s.enqueue(ctx, id, until)
	}
	if err != nil {
		w.log.Warn("queueing a task's delivery at its lease's end failed", "task", id, "err", err)
	}
}

// finish writes how the run ended and enqueues the task's next turn.
func (w *worker) finish(ctx context.Context, r *run, out outcome) (AdvanceResult, error) {
	c := r.claim
	res := AdvanceResult{Steps: r.newSteps}
	if c.Task.Status.Terminal() {
		// A write of this run ended the task (a requested cancellation):
		// nothing is left to write.
		res.Status = c.Task.Status
		res.Settled = w.s.dispatch
		return res, nil
	}
	ch := &driver.Change{Now: w.s.now(), Append: r.pending, Open: r.opens}
	if r.statusDirty {
		ch.StatusMessage = &r.statusMsg
	}
	switch {
	case r.stepDone:
		ch.SetAttempts = new(int)
	case !r.charged:
		n := max(c.Attempts-1, 0)
		ch.SetAttempts = &n
	}
	var enqueueAt time.Time
	enqueue := false
	switch {
	case out.susp != nil:
		switch out.susp.kind {
		case suspendStop:
			// The claim was lost (a run that ended the task returned
			// above).
			res.Status = c.Task.Status
			return res, nil
		case suspendContinue:
			ch.Release, enqueue = true, true
		case suspendWake:
			ch.Release, ch.WakeAt, enqueue, enqueueAt = true, out.susp.at, true, out.susp.at
			ch.Sleep, ch.WakeOn = out.susp.sleep, out.susp.offers
		case suspendPark:
			ch.Park, ch.ParkAny, ch.WakeAt = out.susp.park, out.susp.any, out.susp.at
			if !out.susp.at.IsZero() {
				enqueue, enqueueAt = true, out.susp.at
			}
		case suspendAwait:
			ch.Release, ch.WakeAt, ch.Await, ch.Fork = true, out.susp.at, out.susp.await, out.susp.fork
			// A join needs no message at its (far) end: its last branch
			// resumes the task, and the sweeper watches the branches.
			enqueue, enqueueAt = ch.Fork == nil, out.susp.at
		case suspendCancelled:
			ch.Cancel = true
		default:
			ch.Fail = &driver.ErrorObject{Code: CodeInternalError, Message: "internal error: unexpected suspension in a worker"}
		}
	case out.failure != nil:
		ch.Fail = out.failure
	case out.err != nil:
		ch.Fail = toolError(out.err)
	default:
		b, err := encodeResult(out.result)
		switch {
		case err != nil:
			ch.Fail = &driver.ErrorObject{Code: CodeInternalError, Message: err.Error()}
		case w.s.opts.MaxResultBytes > 0 && len(b) > w.s.opts.MaxResultBytes:
			ch.Fail = &driver.ErrorObject{Code: CodeInternalError,
				Message: fmt.Sprintf("tool result of %d bytes exceeds the %d byte limit", len(b), w.s.opts.MaxResultBytes)}
		default:
			ch.Complete = b
		}
	}
	switch {
	case ch.Fail != nil:
		ch.StatusMessage = &ch.Fail.Message
	case (ch.Complete != nil || ch.Cancel) && r.statusFresh:
		ch.StatusMessage = &r.statusMsg // set after the last step: the handler's final word
	case ch.Complete != nil || ch.Cancel:
		ch.StatusMessage = nil // a finished task keeps no stale running message
	}
	if err := w.s.store.Commit(ctx, c, ch); err != nil {
		if errors.Is(err, driver.ErrFenced) || errors.Is(err, driver.ErrNotFound) {
			w.log.Warn("task write rejected: another worker claimed it or it ended", "task", c.Task.ID)
			res.Skipped, res.Reason = true, "claim lost"
			return res, nil
		}
		w.s.storeFailed(ctx, "commit")
		return res, err
	}
	res.Status = c.Task.Status
	res.Settled = w.s.dispatch
	if ch.Sleep || ch.Await != "" {
		// The store may have cut the sleep short (an answer arrived
		// while the run went on), or found the awaited event delivered:
		// the task then runs again now.
		enqueueAt = c.Task.WakeAt
		enqueue = enqueue || enqueueAt.IsZero()
	}
	if ch.Fork != nil && !w.s.dispatch {
		w.s.enqueueBranches(ctx, c.Task.ID, ch.Fork)
	}
	switch {
	case res.Status.Terminal():
		w.auditTerminal(ctx, c)
	case res.Status == driver.StatusInputRequired && (ch.Park != nil || ch.Sleep):
		keys := make(map[string]struct{}, len(ch.Park)+len(out.susp.offers))
		for k := range ch.Park {
			keys[k] = struct{}{}
		}
		for _, k := range out.susp.offers {
			keys[k] = struct{}{}
		}
		w.s.audit(ctx, AuditInputRequested, c.Task.Owner, c.Task.ID, auditKeys(keys), slog.String("tool", c.Task.Tool))
	}
	if enqueue && !res.Status.Terminal() && !w.s.dispatch {
		if err := w.s.enqueue(ctx, c.Task.ID, enqueueAt); err != nil {
			// The sweeper re-enqueues it: the write above is what counts.
			w.log.Warn("enqueue failed; the sweeper will recover the task", "task", c.Task.ID, "err", err)
		}
	}
	return res, nil
}

// auditTerminal logs the audit record of a transition to a terminal
// status that c's holder just made.
func (w *worker) auditTerminal(ctx context.Context, c *driver.Claim) {
	w.s.audit(ctx, AuditTerminal, c.Task.Owner, c.Task.ID,
		slog.String("status", string(c.Task.Status)), slog.String("tool", c.Task.Tool))
	w.s.countEnded(ctx, c.Task.Tool, c.Task.Status)
}

// commitKeep writes the run's pending journal and status under the claim,
// keeping the lease. A lost claim or a task that ended unwinds the run.
func (w *worker) commitKeep(r *run, ch *driver.Change) {
	ch.Now = w.s.now()
	ch.Append, ch.Open = r.pending, r.opens
	if r.statusDirty {
		ch.StatusMessage = &r.statusMsg
	}
	if err := w.s.store.Commit(r.ctx, r.claim, ch); err != nil {
		w.log.Warn("task write failed; stopping this run", "task", r.taskID, "err", err)
		panic(suspend{kind: suspendStop})
	}
	r.pending, r.opens, r.statusDirty = nil, nil, false
	if r.claim.Task.Status.Terminal() {
		w.auditTerminal(r.ctx, r.claim) // cancellation was requested
		panic(suspend{kind: suspendStop})
	}
}

// flushStatus writes the run's status message under the claim while a step
// runs. It reports whether the step must stop: the claim was lost, or the
// write found cancellation requested and cancelled the task.
func (w *worker) flushStatus(r *run) (stop bool) {
	msg := r.statusMsg
	if err := w.s.store.Commit(r.ctx, r.claim, &driver.Change{Now: w.s.now(), StatusMessage: &msg}); err != nil {
		w.log.Warn("task write failed while a step ran; stopping it", "task", r.taskID, "err", err)
		return true
	}
	r.statusDirty = false
	if r.claim.Task.Status.Terminal() {
		w.auditTerminal(r.ctx, r.claim) // cancellation was requested
		return true
	}
	return false
}

func (w *worker) doDurable(r *run, name string, o doOptions, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	opts := w.s.opts
	if r.newSteps >= opts.StepsPerInvocation || time.Until(deadlineOf(r.ctx)) < opts.MinStepTime {
		panic(suspend{kind: suspendContinue})
	}
	r.newSteps++
	w.keepLease(r)
	for i := range r.pending {
		if e := &r.pending[i]; e.Kind == driver.KindLost && e.Name == "" {
			e.Name = name // the step the lost worker ran (see Advance)
		}
	}
	switch {
	case r.charged:
		one := 1
		w.commitKeep(r, &driver.Change{SetAttempts: &one})
	case len(r.pending) > 0 || len(r.opens) > 0:
		w.commitKeep(r, &driver.Change{})
	}
	// A status message set before the step (with nothing else to write)
	// waits: the commit after the step carries it, or, if the step is
	// still running at the first cancellation poll, that poll writes it
	// (runStep). A fast step thus costs no write of its own.
	r.charged, r.stepDone = true, false
	att := r.claim.Attempts
	if att > o.attempts {
		msg := fmt.Sprintf("gave up after %d attempts: the worker died or ran out of time on each", att-1)
		r.appendEntry(driver.Entry{Name: name, Kind: driver.KindDo, Err: msg})
		r.stepDone = true
		return nil, &StepError{Step: name, Message: msg}
	}
	sctx, span := r.stepSpan(name, att)
	start := w.s.now()
	r.stepping(true)
	v, err, cancelled := w.runStep(r, sctx, name, o, fn)
	r.stepping(false)
	end := w.s.now()
	if cancelled {
		r.endStep(span, "cancelled", end.Sub(start), att, nil)
		panic(suspend{kind: suspendCancelled})
	}
	if err == nil {
		r.endStep(span, "ok", end.Sub(start), att, nil)
		r.appendEntry(driver.Entry{Name: name, Kind: driver.KindDo, Value: v, At: end, Attempt: att, Took: end.Sub(start)})
		r.stepDone = true
		return v, nil
	}
	var perm *permanentError
	if errors.As(err, &perm) || att >= o.attempts {
		r.endStep(span, "error", end.Sub(start), att, err)
		r.appendEntry(driver.Entry{Name: name, Kind: driver.KindDo, Err: err.Error(), At: end, Attempt: att, Took: end.Sub(start)})
		r.stepDone = true
		return nil, &StepError{Step: name, Message: err.Error()}
	}
	r.endStep(span, "retry", end.Sub(start), att, err)
	w.log.Info("step attempt failed; will retry", "task", r.taskID, "step", name, "attempt", att, "err", err)
	retry := end.Add(o.backoff(att)).Truncate(time.Millisecond) // as the store keeps it
	// History only (replay skips it): written with the release below.
	r.pending = append(r.pending, driver.Entry{Name: name, Kind: driver.KindAttempt, Err: err.Error(), At: end, Attempt: att, Took: end.Sub(start), Until: retry})
	panic(suspend{kind: suspendWake, at: retry})
}

// runStep runs one attempt of a step with its deadline, watching for
// cancellation of the task. ctx is the run's context (with the step's span
// when tracing).
func (w *worker) runStep(r *run, ctx context.Context, name string, o doOptions, fn func(context.Context) (json.RawMessage, error)) (json.RawMessage, error, bool) {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	sctx, scancel := context.WithCancelCause(ctx)
	defer scancel(nil)

	type result struct {
		v   json.RawMessage
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := r.callStep(sctx, name, fn)
		done <- result{v, err}
	}()
	poll := w.s.opts.CancelPoll
	if w.renewer != nil {
		poll = min(poll, w.s.renewEvery()) // renewals ride on the poll (see keepLease)
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			if errors.Is(context.Cause(sctx), errTaskCancelled) {
				return nil, nil, true
			}
			if res.err != nil && sctx.Err() != nil {
				res.err = fmt.Errorf("step timed out: %w", res.err)
			}
			return res.v, res.err, false
		case <-tick.C:
			w.keepLease(r)
			if r.statusDirty {
				// The status message the step runs under, written now that
				// the step takes a while; the write reports a requested
				// cancellation too (the task is then cancelled).
				if w.flushStatus(r) {
					scancel(errTaskCancelled)
				}
				continue
			}
			cancelled := w.s.store.CancelRequested
			if w.cancelled != nil {
				cancelled = w.cancelled
			}
			if yes, err := cancelled(r.ctx, r.claim); err == nil && yes {
				scancel(errTaskCancelled)
			}
		case <-sctx.Done():
			// Give the step a moment to notice; then abandon it (its
			// result, if any, is never written).
			t := time.NewTimer(w.s.opts.AbandonGrace)
			select {
			case res := <-done:
				t.Stop()
				if errors.Is(context.Cause(sctx), errTaskCancelled) {
					return nil, nil, true
				}
				if res.err == nil {
					return res.v, nil, false
				}
				return nil, fmt.Errorf("step timed out: %w", res.err), false
			case <-t.C:
				if errors.Is(context.Cause(sctx), errTaskCancelled) {
					return nil, nil, true
				}
				return nil, errors.New("step did not return after its context ended; abandoned"), false
			}
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(24 * time.Hour)
}
