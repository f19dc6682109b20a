package tasks

import (
	"errors"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Errors: those a task handler's Step calls return, then those of events
// (callbacks, signals).
var (
	// ErrNotFound is [driver.ErrNotFound]: no task with that id is visible
	// to the caller (it never existed, expired, or belongs to another
	// principal). [Server.Signal] returns an error wrapping it for a task
	// that does not exist.
	ErrNotFound = driver.ErrNotFound
	// ErrWoken is returned by [Step.Sleep] and [Step.SleepUntil] when an answer
	// to an offer cut the sleep short. It is not a failure: a handler that
	// offers input usually goes on to [Step.CheckInput].
	ErrWoken = errors.New("tasks: the sleep was cut short by an answer to an offer")
	// ErrInputTimeout is returned by Input when its deadline passed first.
	ErrInputTimeout = errors.New("input deadline passed before the requests were answered")
	// ErrWrongGoroutine is returned (wrapped) by a Step method called from a
	// goroutine other than the handler's, or from inside a Do closure. The task
	// then fails: see [Step].
	ErrWrongGoroutine = errors.New("tasks: Step methods must be called from the handler's goroutine")
	// Errors of events (callbacks, signals).
	// ErrEventsUnsupported: the task store is not a [driver.EventStore].
	ErrEventsUnsupported = errors.New("tasks: the task store does not take events (callbacks, signals): it is not a driver.EventStore")
	// ErrEventClosed is [driver.ErrEventClosed]: the task takes no more
	// of this signal (see [Server.Signal]).
	ErrEventClosed = driver.ErrEventClosed
	// ErrCallbackTimeout is returned by AwaitCallback when the callback's
	// wait ended before a valid request arrived.
	ErrCallbackTimeout = errors.New("tasks: the callback's wait timed out")
	// ErrSignalTimeout is returned by AwaitSignal when its wait ended
	// before the signal arrived.
	ErrSignalTimeout = errors.New("tasks: the signal's wait timed out")
	// ErrInvalidPayload: an event's payload does not fit its type (or is
	// too large, or not JSON).
	ErrInvalidPayload = errors.New("tasks: invalid event payload")
	// ErrNoPublicURL: Callback needs Options.PublicURL, the public URL the
	// MCP function is served under (MCPTASKS_PUBLIC_URL), to form its URL.
	ErrNoPublicURL = errors.New("tasks: callbacks need the server's public URL (Options.PublicURL, MCPTASKS_PUBLIC_URL)")
)

// history reports whether entries of kind k are history for operators,
// which replay skips.
func history(k driver.EntryKind) bool { return k == driver.KindAttempt || k == driver.KindLost }

// replayable returns the entries of journal that replay matches steps
// against: all but the history entries (KindAttempt, KindLost). It returns
// journal itself when it has none.
func replayable(journal []driver.Entry) []driver.Entry {
	i := 0
	for i < len(journal) && !history(journal[i].Kind) {
		i++
	}
	if i == len(journal) {
		return journal
	}
	out := append(make([]driver.Entry, 0, len(journal)), journal[:i]...)
	for _, e := range journal[i:] {
		if !history(e.Kind) {
			out = append(out, e)
		}
	}
	return out
}

// honoursDeadline reports whether v declares [driver.DeadlineHonourer].
func honoursDeadline(v any) bool {
	d, ok := v.(driver.DeadlineHonourer)
	return ok && d.HonoursDeadline()
}
