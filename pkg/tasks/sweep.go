package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// SweepResult counts what one Sweep did.
type SweepResult struct {
	Examined    int // due index entries looked at
	Enqueued    int // tasks handed to the queue again
	Forgotten   int // entries of tasks that ended or expired
	Rescheduled int // entries pushed to a later time
	// Scheduled counts the wakes handed to the queue ahead of their time:
	// those a store left to the sweeper (redisstore.Options.WakeHorizon).
	// They are counted as Rescheduled too.
	Scheduled int
}

// Sweep is the safety net behind the queue: for every task whose next
// attention time has passed, it re-derives from the task record what must
// happen and makes it happen. It re-enqueues tasks whose lease expired (a
// worker died) or whose enqueue was lost, wakes due timers and input
// deadlines, and drops index entries of tasks that ended or expired (their
// keys expire by themselves). It is safe to run concurrently and often; the
// local server runs it on a ticker, Vercel as a cron, Lambda on a schedule.
func (s *Server) Sweep(ctx context.Context, limit int) (res SweepResult, err error) {
	if limit <= 0 {
		limit = 1000
	}
	var start time.Time
	if s.tel.tracer != nil {
		start = time.Now()
	}
	now := s.now()
	due, dueErr := s.store.Due(ctx, now, limit)
	// A sweep that finds nothing due (the usual tick) leaves no trace.
	ctx, span := s.sweepSpan(ctx, start, len(due) > 0 || dueErr != nil)
	defer func() { s.endSweep(ctx, span, res, err) }()
	if dueErr != nil {
		// A sharded index may have answered in part (one shard's primary
		// failing over): what it returned is swept, the error reported.
		s.storeFailed(ctx, "due")
		defer func() { err = errors.Join(err, dueErr) }()
	}
	grace := s.opts.MaxDuration
	// ahead enqueues the wake of a task whose entry came due before its
	// wake time: a store enqueues a far wake no sooner than that
	// (redisstore.Options.WakeHorizon), and sets the entry at the wake
	// otherwise. It returns the entry's next time, the wake's grace.
	ahead := func(d driver.DueTask, t *driver.Task, next time.Time) (time.Time, error) {
		if !d.At.Before(t.WakeAt) {
			return next, nil
		}
		if err := s.enqueue(ctx, d.ID, t.WakeAt); err != nil {
			return next, err
		}
		res.Scheduled++
		return t.WakeAt.Add(grace), nil
	}
	for _, d := range due {
		id := d.ID
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.Examined++
		t, err := s.store.Peek(ctx, id)
		if errors.Is(err, driver.ErrNotFound) {
			res.Forgotten++
			if _, err := s.store.Reschedule(ctx, id, d.At, time.Time{}); err != nil {
				return res, err
			}
			continue
		}
		if err != nil {
			return res, fmt.Errorf("sweep %s: %w", id, err)
		}
		var next time.Time
		switch {
		case t.Status.Terminal():
			res.Forgotten++
		case t.LeaseUntil.After(now):
			next = t.LeaseUntil
			res.Rescheduled++
		case t.Status == driver.StatusInputRequired && (t.WakeAt.IsZero() || t.WakeAt.After(now)):
			next = t.ExpiresAt()
			if !t.WakeAt.IsZero() {
				if next, err = ahead(d, t, t.WakeAt); err != nil {
					return res, err
				}
			}
			res.Rescheduled++
		case t.Awaiting != "" && t.WakeAt.After(now):
			// Awaiting an event; if it is a parallel step's join, its
			// branches are watched within the grace.
			open, err := s.watchFork(ctx, id, now, &res)
			if err != nil {
				return res, err
			}
			next = t.WakeAt
			if open {
				next = now.Add(grace)
			} else if next, err = ahead(d, t, next); err != nil {
				return res, err
			}
			res.Rescheduled++
		case t.WakeAt.After(now):
			if next, err = ahead(d, t, t.WakeAt); err != nil {
				return res, err
			}
			res.Rescheduled++
		default:
			// Runnable and nobody holds it: the message was lost, the
			// worker died, or a timer is due.
			if err := s.enqueue(ctx, id, time.Time{}); err != nil {
				return res, err
			}
			res.Enqueued++
			next = now.Add(grace)
		}
		if next.After(t.ExpiresAt()) {
			next = t.ExpiresAt()
		}
		// Only if no transition moved the task's time meanwhile.
		if _, err := s.store.Reschedule(ctx, id, d.At, next); err != nil {
			return res, err
		}
	}
	return res, nil
}
