package tasks

import (
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Poll advice: the pollIntervalMs of every CreateTaskResult and tasks/get
// answer is derived from the task, so that a client that follows it asks
// again about when the task may have changed, and not before:
//
//   - working, with a wake time ahead (a Sleep, or a step's retry backoff):
//     until the wake time, plus Options.PollInterval for the step that
//     follows it to run;
//   - working otherwise (queued, or a step running): as long as the task
//     has been in this state so far, at most Options.PollInterval: a task
//     that has just moved on is looked at again soon, one that works on is
//     looked at every PollInterval, as before;
//   - input_required: half as long as the task has waited for input so
//     far, at least PollInterval (and at most until its input deadline,
//     when it has one ahead, plus PollInterval). A client usually reads
//     input_required within a PollInterval of the task parking, answers
//     (however long its user takes), waits the advice it read and reads
//     again: a short advice then is what lets it see the answer's outcome
//     within a second or two. A client that keeps reading an unanswered
//     task backs off geometrically: 11 reads in the first minute with the
//     default PollInterval, then one per Options.PollMax;
//   - awaiting an event (a callback, a signal, a parallel step's join),
//     which may come any moment: as for input_required;
//   - terminal: PollInterval (nothing changes any more).
//
// Every advice lies within [Options.PollMin, Options.PollMax]. It is
// computed from the task record that tasks/get reads anyway (status,
// lastUpdatedAt, wake time): no extra store round trip.

// pollAdvice returns the pollIntervalMs the server advises for t at now.
func (s *Server) pollAdvice(t *driver.Task, now time.Time) time.Duration {
	return pollAdvice(t, now, s.opts.PollMin, s.opts.PollInterval, s.opts.PollMax)
}

func pollAdvice(t *driver.Task, now time.Time, lo, base, hi time.Duration) time.Duration {
	var d time.Duration
	switch {
	case t.Status.Terminal():
		d = base
	case t.Status == driver.StatusInputRequired || t.Awaiting != "":
		d = max(now.Sub(t.UpdatedAt)/2, base)
		if !t.WakeAt.IsZero() && t.WakeAt.After(now) {
			d = min(d, t.WakeAt.Sub(now)+base)
		}
	case !t.WakeAt.IsZero() && t.WakeAt.After(now):
		d = t.WakeAt.Sub(now) + base
	default:
		d = min(max(now.Sub(t.UpdatedAt), 0), base)
	}
	return min(max(d, lo), hi)
}

// advised returns a copy of t whose PollInterval is the server's advice.
func (s *Server) advised(t *driver.Task) *driver.Task {
	c := *t
	c.PollInterval = s.pollAdvice(t, s.now())
	return &c
}
