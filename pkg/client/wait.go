package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waiter follows one task to its end.
type waiter struct {
	c   *Client
	cfg *callConfig
	id  string
	// last is the latest state read; reported the latest one handed to
	// OnStatus.
	last     *Task
	reported *Task
	// answered holds the input keys already answered: none is asked or
	// sent twice.
	answered map[string]bool
}

// wait polls the task t (a handle, or just an ID to resume) until it ends,
// answering its input requests.
func (c *Client) wait(ctx context.Context, cfg *callConfig, t *Task) (*mcp.CallToolResult, error) {
	w := &waiter{c: c, cfg: cfg, id: t.ID, last: t, answered: map[string]bool{}}
	lctx, stop := ctx, func() {}
	if cfg.detach != nil {
		lctx, stop = joinDone(ctx, cfg.detach)
	}
	defer stop()

	if t.Status == "" {
		var err error
		if t, err = w.get(lctx); err != nil {
			return nil, w.stopped(ctx, err)
		}
	} else {
		w.observe(t)
	}
	for {
		if t.Status.Terminal() {
			return w.finish(t)
		}
		wait := c.pollWait(t.PollInterval)
		if t.Status == StatusInputRequired {
			sent, err := w.answer(lctx, t)
			if err != nil {
				return nil, w.stopped(ctx, err)
			}
			if sent {
				wait = 0 // read the task again at once: what is still pending?
			}
		}
		if wait > 0 && !c.noListen.Load() {
			began := time.Now()
			last, err := w.stream(lctx)
			switch {
			case err == nil && last != nil && last.Status.Terminal():
				return w.finish(last)
			case err == nil:
				// The stream ended (at the server's time limit): read the
				// task, then listen again, at the pace polling would have.
				wait = max(0, wait-time.Since(began))
			case errors.Is(err, errNoStream):
				c.log.Debug("polling the task", "task", t.ID, "reason", err)
			default:
				return nil, w.stopped(ctx, err)
			}
		}
		if wait > 0 {
			if err := c.sleep(lctx, wait); err != nil {
				return nil, w.stopped(ctx, err)
			}
		}
		var err error
		if t, err = w.get(lctx); err != nil {
			return nil, w.stopped(ctx, err)
		}
	}
}

func (w *waiter) get(ctx context.Context) (*Task, error) {
	t, err := w.c.get(ctx, w.id, w.cfg.input != nil)
	if err != nil {
		return nil, err
	}
	w.observe(t)
	return t, nil
}

// observe records t and reports it when its status or message changed.
func (w *waiter) observe(t *Task) {
	w.last = t
	if r := w.reported; r != nil && r.Status == t.Status && r.StatusMessage == t.StatusMessage {
		return
	}
	w.reported = t
	w.c.log.Debug("task status", "task", t.ID, "status", t.Status, "message", t.StatusMessage)
	if w.cfg.onStatus != nil {
		w.cfg.onStatus(*t)
	}
}

// finish turns a terminal task into Call's return values.
func (w *waiter) finish(t *Task) (*mcp.CallToolResult, error) {
	switch t.Status {
	case StatusCompleted:
		return t.Result, nil
	case StatusFailed:
		return nil, &TaskError{Task: t, Err: t.Error}
	default:
		return nil, &TaskError{Task: t, Err: ErrCancelled}
	}
}

// answer hands t's pending input requests that were not answered yet to
// the handler and sends the answers: all together, or (AnswerEach) only the
// first one. It reports whether it sent any.
func (w *waiter) answer(ctx context.Context, t *Task) (bool, error) {
	var pending []string
	for _, k := range t.Pending() {
		if w.answered[k] || (!w.cfg.standing && t.InputRequests[k].Standing()) {
			continue // answered already, or a standing offer left alone
		}
		pending = append(pending, k)
	}
	if len(pending) == 0 {
		return false, nil // answered already; the server has yet to move on
	}
	if w.cfg.input == nil {
		return false, fmt.Errorf("%w (pending: %v)", ErrInputRequired, pending)
	}
	responses := map[string]any{}
	send := func() error {
		if len(responses) == 0 {
			return nil
		}
		if err := w.c.update(ctx, w.id, responses, true); err != nil {
			return err
		}
		for k := range responses {
			w.answered[k] = true
		}
		return nil
	}
	for _, k := range pending {
		b, err := ask(ctx, w.cfg.input, t.InputRequests[k])
		if err != nil {
			// Keep what was answered so far.
			return len(responses) > 0, errors.Join(err, send())
		}
		responses[k] = json.RawMessage(b)
		if w.cfg.each {
			break
		}
	}
	return true, send()
}

// stopped is the error of a wait that ended on err before the task did.
// When the call's own context ended, it cancels the task first and follows
// it to its terminal status (bounded by CancelWait).
func (w *waiter) stopped(ctx context.Context, err error) error {
	if d := w.cfg.detach; d != nil && d.Err() != nil {
		return &TaskError{Task: w.last, Err: fmt.Errorf("%w: %w", ErrDetached, context.Cause(d))}
	}
	if ctx.Err() == nil {
		return &TaskError{Task: w.last, Err: err}
	}
	cause := context.Cause(ctx)
	if w.last != nil && w.last.Status.Terminal() {
		return &TaskError{Task: w.last, Err: cause}
	}
	if cerr := w.cancel(ctx); cerr != nil {
		return &TaskError{Task: w.last, Err: fmt.Errorf("%w (and tasks/cancel: %w)", cause, cerr)}
	}
	return &TaskError{Task: w.last, Err: cause}
}

// cancel sends tasks/cancel on a context of its own (ctx has ended) and
// polls until the task ends or CancelWait passes.
func (w *waiter) cancel(ctx context.Context) error {
	base, stop := context.WithoutCancel(ctx), func() {}
	if w.cfg.detach != nil {
		base, stop = joinDone(base, w.cfg.detach)
	}
	defer stop()
	w.c.log.Debug("cancelling task", "task", w.id, "cause", context.Cause(ctx))
	cctx, cancel := context.WithTimeout(base, min(cancelTimeout, w.c.reqTimeout))
	err := w.c.Cancel(cctx, w.id)
	cancel()
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(base, w.cfg.cancelWait)
	defer cancel()
	// What the wait read is in w.last; a failed read ends it quietly.
	_, _ = w.c.untilTerminal(pctx, w.get)
	return nil
}

// joinDone returns a context that ends when a or b does, with the values
// of a.
func joinDone(a, b context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(a)
	unhook := context.AfterFunc(b, func() { cancel(context.Cause(b)) })
	return ctx, func() {
		unhook()
		cancel(nil)
	}
}
