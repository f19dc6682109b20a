package tasks

import "time"

// Committed updates c after its store applied the Commit of ch, as
// [Store.Commit] promises (Task.Status, Task.WakeAt, Task.UpdatedAt,
// Task.StatusMessage, Journal, Attempts): the task is now in status, the
// attempt counter of its next step is attempts, and woke reports that a
// sleep (Change.Sleep) was cut short by an answer, or that the event an
// await (Change.Await) waits for was delivered already, so the task runs
// now.
// Stores call it once their write succeeded.
func (c *Claim) Committed(ch *Change, status Status, attempts int, woke bool) {
	c.Attempts = attempts
	c.Journal = append(c.Journal, ch.Append...)
	c.Task.Status = status
	c.Task.UpdatedAt = ch.Now
	ended := status.Terminal()
	// A terminal change keeps the message it carries; a change turned
	// into a cancellation, or that sets none, leaves the task without one.
	switch explicit := ch.Complete != nil || ch.Fail != nil || ch.Cancel || !ended; {
	case ch.StatusMessage != nil && explicit:
		c.Task.StatusMessage = *ch.StatusMessage
	case ended:
		c.Task.StatusMessage = ""
	}
	if ch.Op() != OpKeep || ended {
		c.Task.LeaseUntil = time.Time{}
		c.Task.WakeAt = ch.WakeAt
		if woke || ended {
			c.Task.WakeAt = time.Time{}
		}
	}
}

// The ops of a Change (Change.Op).
const (
	OpKeep     = "keep"
	OpRelease  = "release"
	OpSleep    = "sleep"
	OpAwait    = "await"
	OpPark     = "park"
	OpComplete = "complete"
	OpFail     = "fail"
	OpCancel   = "cancel"
)

// Op names what ch does, for a store's server-side code to switch on:
// OpComplete, OpFail or OpCancel end the task, OpPark parks it, OpSleep,
// OpAwait and OpRelease release it (Change.Sleep, Change.Await), OpKeep
// keeps the lease.
func (ch *Change) Op() string {
	switch {
	case ch.Complete != nil:
		return OpComplete
	case ch.Fail != nil:
		return OpFail
	case ch.Cancel:
		return OpCancel
	case ch.Park != nil:
		return OpPark
	case ch.Release && ch.Await != "":
		return OpAwait
	case ch.Release && ch.Sleep:
		return OpSleep
	case ch.Release:
		return OpRelease
	}
	return OpKeep
}
