package driver

import (
	"context"
	"encoding/json"
	"time"
)

// EntryKind is the kind of a journaled step.
type EntryKind string

// Journal entry kinds.
const (
	KindDo    EntryKind = "do"
	KindSleep EntryKind = "sleep"
	KindInput EntryKind = "input"
	// KindOffer puts up a standing input request (Step.Offer): Name is its
	// input key, Value the request.
	KindOffer EntryKind = "offer"
	// KindWithdraw takes the offer Name down (Step.Withdraw).
	KindWithdraw EntryKind = "withdraw"
	// KindCheck records that a Step.CheckInput found the answer to the
	// offer Name, Value. A check that found nothing leaves no entry: on
	// replay, its place in the journal says so.
	KindCheck EntryKind = "check"
	// KindWoke records that the sleep Name was cut short by an answer to an
	// offer. A sleep that ran its course leaves no entry.
	KindWoke EntryKind = "woke"
	// KindAttempt records a failed attempt of the Do step Name that is
	// retried: Err is its error, Attempt its number, Took how long it ran
	// and Until when the retry is due. It is history for operators
	// (mcptasks inspect): replay skips it.
	KindAttempt EntryKind = "attempt"
	// KindLost records that a worker lost the task while it ran: its lease
	// ran out (the worker died, or was cut off from the store) before it
	// wrote how its run ended, and another claim took the task over. At is
	// when that lease ran out, Until when the task was claimed again (its
	// re-delivery), Attempt the lost attempt of the next step and Name
	// that step, when the run that took over started it ("" otherwise).
	// The worker that takes over journals it; it is history for operators
	// (mcptasks inspect): replay skips it.
	KindLost EntryKind = "lost"
	// KindCallback records that the callback Name was made (Callback):
	// Value holds its token, Until the end of its wait.
	KindCallback EntryKind = "callback"
	// KindAwait records that the wait for the signal Name was opened
	// (AwaitSignal): Until is its end.
	KindAwait EntryKind = "await"
	// KindEvent is the outcome of the wait for the event Name: its
	// payload (Value), or Err when the wait timed out ("timeout") or the
	// payload did not fit.
	KindEvent EntryKind = "event"
	// KindFork records that the parallel step Name started its branches
	// (All): Value holds {"n": branches, "c": concurrency}.
	KindFork EntryKind = "fork"
	// KindJoin is the outcome of the parallel step Name once every branch
	// finished: Value holds {"v": [results], "e": {"index": error}}.
	KindJoin EntryKind = "join"
)

// Entry is one journaled step. Entries are append-only and ordered; replay
// matches the handler's n-th step against the n-th entry by name and kind.
type Entry struct {
	Name string    `json:"n"`
	Kind EntryKind `json:"k"`
	// Value is the step's JSON outcome (Do), nothing for Sleep and Input.
	Value json.RawMessage `json:"v,omitempty"`
	// Err is a Do step's final error, replayed as the step's error.
	Err string `json:"e,omitempty"`
	// Until is the wake time of a Sleep, or the deadline of an Input (zero
	// for none).
	Until time.Time `json:"u,omitzero"`
	// Keys are the input keys an Input step asked for; Any means it resumes
	// as soon as one of them is answered.
	Keys []string `json:"ks,omitempty"`
	Any  bool     `json:"any,omitempty"`

	// At is when a worker journaled the entry (zero for entries gathered
	// before the task existed, and in journals older than this field).
	At time.Time `json:"t,omitzero"`
	// Attempt is the attempt of a Do step that produced the entry (KindDo,
	// KindAttempt), counted from 1; zero when unknown.
	Attempt int `json:"a,omitempty"`
	// Took is how long that attempt ran.
	Took time.Duration `json:"d,omitempty"`
}

// Claim is a worker's exclusive, fenced hold on a task.
type Claim struct {
	Task *Task
	// Gen is the fencing generation: every write with this claim is
	// rejected once another claim has been made.
	Gen int64
	// Journal is the task's journal at claim time.
	Journal []Entry
	// Responses are the input responses received so far (key -> response).
	Responses map[string]json.RawMessage
	// Attempts is how many times the next unjournaled step has been
	// claimed, this claim included: Claim charges one attempt.
	Attempts int
	// Ended reports that this Claim made the task terminal itself: it
	// found the task's cancellation requested and no live lease (Gen is 0
	// and the task is cancelled).
	Ended bool
	// Lost, on a claim with a lease, is when the lease it took over ran
	// out, if its holder never ended it: the worker before was lost while
	// it held the task (it died, or could not write). It is zero when the
	// task was not leased: created, released, or parked and resumed.
	Lost time.Time
	// Events are the payloads of the events delivered to the task so far
	// (name -> payload), from a store that is an EventStore. A claim with
	// a lease also closes the task's waits whose Until is at or before its
	// now: a delivery for them is refused from then on, so what the claim
	// read is all they ever get.
	Events map[string]json.RawMessage
}

// Change is one fenced write by the holder of a claim.
type Change struct {
	// Now is the write's timestamp (lastUpdatedAt).
	Now time.Time
	// Append adds entries to the journal; the first one gets sequence
	// number len(Claim.Journal) (plus entries appended earlier on the same
	// claim). An entry of kind KindOffer also puts up an offer: its Name
	// becomes an outstanding input key, with its Value as the request,
	// which Update accepts an answer for in any live status; one of kind
	// KindWithdraw takes the offer Name down (a later answer to it is
	// ignored). A task that ends drops its offers.
	Append []Entry
	// StatusMessage replaces the status message when non-nil. A change
	// that ends the task (Complete, Fail, Cancel) clears it when nil, and so
	// does a change that is turned into a cancellation.
	StatusMessage *string
	// SetAttempts, when non-nil, sets the attempt counter of the next
	// unjournaled step (Claim charges one attempt; a finished step resets it).
	SetAttempts *int

	// Exactly one of the following ends the write (all false/nil: keep the
	// lease and the status, e.g. to journal a step and go on).

	// Release ends the lease and leaves the task working, to be run again
	// at WakeAt (zero: now).
	Release bool
	// Sleep, with Release, says the release is a sleep (until WakeAt) that
	// an answer to an offer cuts short. If an answer to one of the offers
	// WakeOn names has arrived (Update accepted it since the claim), the
	// task is released to run now instead (Claim.Task.WakeAt is then
	// zero). Otherwise, with offers outstanding, the task waits in
	// input_required (its InputRequests are the offers) until WakeAt or
	// until Update answers an offer, which resumes it; without offers it
	// sleeps as a plain Release would.
	Sleep  bool
	WakeOn []string
	// Park ends the lease in input_required with these outstanding
	// requests; it resumes when all (or, with ParkAny, any) are answered or
	// at WakeAt (a deadline; zero for none).
	Park    map[string]json.RawMessage
	ParkAny bool
	// Complete, Fail or Cancel make the task terminal.
	Complete json.RawMessage
	Fail     *ErrorObject
	Cancel   bool

	WakeAt time.Time

	// Open opens waits for events (see EventStore), before the rest of
	// the change applies. A wait for an event already delivered (a
	// signal sent before the task waited for it) leaves the delivery as
	// it is.
	Open []EventWait
	// Await, with Release and a WakeAt (the end of the wait), releases the
	// task to wait for the event Await (Task.Awaiting): status working,
	// no invocation until a Deliver of that event resumes it, or WakeAt.
	// If the event was delivered already, the task is released to run
	// now instead (Claim.Task.WakeAt is then zero).
	Await string
	// Fork, with Await set to its Name, starts the branches of a parallel
	// step (see Brancher), whose last one to finish resumes the task.
	Fork *Fork
}

// Store is the durable, shared state of tasks: the only state shared between
// the MCP endpoint, workers and the sweeper.
//
// Contract, which every implementation must meet and the storetest suite
// checks:
//
//   - Create is durable: when it returns nil, Get finds the task.
//   - Owner binding: every client operation takes the caller's principal and
//     answers ErrNotFound when it differs from the task's owner. An empty
//     principal matches nothing.
//   - Terminal states never change: Cancel, Update and Commit leave a
//     completed, failed or cancelled task as it is.
//   - A transition to a terminal state clears the status message, unless it
//     is a Commit whose Change asks for that terminal state and carries a
//     StatusMessage: a finished task shows no message of its running days.
//   - TTL counts from creation: a task is readable for its whole TTL and
//     gone after it; every key the store writes expires.
//   - A task is input_required only while it has input requests: one
//     whose last outstanding offer is answered after its sleep ended is
//     working (and due).
//   - Update accepts responses only for outstanding keys; answered keys
//     disappear from InputRequests at once; unknown or already answered
//     keys are ignored. The keys a parked task waits for are outstanding
//     while it is parked and before its deadline (and no worker claimed
//     it past it); an offer's key is outstanding from the Commit that
//     appended the offer until it is answered, withdrawn or the task ends,
//     whatever the task's status. An answer to an offer resumes a task
//     that sleeps with offers outstanding (Change.Sleep) before its wake
//     time, and nothing else: it never resumes a task waiting for input.
//   - Cancel makes a task that no worker holds cancelled at once; for a
//     running task it sets CancelRequested, which the worker sees.
//   - Claims are exclusive and fenced: Claim fails with ErrLeased while
//     another live lease exists; a Commit under a stale generation fails
//     with ErrFenced and changes nothing. A lease lasts until the lease
//     time Claim was given runs out (or RenewLease's, see LeaseRenewer),
//     or a Commit releases, parks or ends the task; a Claim that takes
//     over a lease that ran out reports its end (Claim.Lost).
//   - Every transition is atomic.
//   - Ids come from NewID: an id that ValidID rejects names no task. Create
//     refuses it; every other operation answers ErrNotFound for it and
//     touches nothing.
//   - A store that declares DeadlineHonourer returns from every call soon
//     after its context's deadline, with an error, however its backend
//     behaves; the server then calls it without a goroutine of its own.
type Store interface {
	// Create persists a new task in status working.
	Create(ctx context.Context, nt *NewTask) (*Task, error)
	// Get returns the task if owner owns it.
	Get(ctx context.Context, owner, id string) (*Task, error)
	// Update delivers input responses. resumed reports whether the task
	// left input_required because of them (the caller then enqueues it):
	// the input it waited for is answered, or an offer of a sleeping task.
	Update(ctx context.Context, owner, id string, responses map[string]json.RawMessage, now time.Time) (resumed bool, err error)
	// Outstanding returns the input requests an answer is accepted for now
	// (key -> request, as the engine stored it): the keys a parked task
	// waits for (while Update would take them) and its outstanding offers,
	// in any live status; none for a terminal task. The server checks
	// answers against these requests before it calls Update. It answers
	// ErrNotFound as Get does.
	Outstanding(ctx context.Context, owner, id string, now time.Time) (map[string]json.RawMessage, error)
	// Cancel asks for cancellation and returns the status afterwards;
	// ended reports whether this call made the task terminal (false when
	// it already was, or when a worker holds it and only CancelRequested
	// was set).
	Cancel(ctx context.Context, owner, id string, now time.Time) (st Status, ended bool, err error)

	// Claim takes a lease on a runnable task for a worker and charges one
	// attempt to its next step. A task parked for input (and not past its
	// deadline) or sleeping is returned without a lease (Gen 0) with its
	// status and WakeAt only. A task whose
	// cancellation was requested becomes cancelled here, and Claim returns
	// it with its terminal status (no lease). A terminal task is returned
	// as is, without a lease. A task claimed out of input_required (its
	// deadline passed) is working from then on: the input it waited for
	// is closed, and its outstanding offers stay.
	Claim(ctx context.Context, id string, now time.Time, lease time.Duration) (*Claim, error)
	// Commit applies a fenced change under c and updates c to match
	// (Task.Status, Task.WakeAt, Task.UpdatedAt, Journal, Attempts).
	Commit(ctx context.Context, c *Claim, ch *Change) error
	// CancelRequested reports whether cancellation was requested for the
	// task held by c (the worker polls it while a step runs).
	CancelRequested(ctx context.Context, c *Claim) (bool, error)

	// Peek returns a task without an owner check, for the worker and the
	// sweeper only. It never goes to clients.
	Peek(ctx context.Context, id string) (*Task, error)
	// Due returns up to limit tasks whose next attention time is at or
	// before now (lease expiry, wake time, lost enqueue), for the sweeper.
	// A store whose index is spread over several servers may return the
	// entries of those that answered together with an error naming the
	// others; the sweeper sweeps what it got.
	Due(ctx context.Context, now time.Time, limit int) ([]DueTask, error)
	// Schedule sets the next attention time of a task for the sweeper; a
	// zero time removes the task from the due index.
	Schedule(ctx context.Context, id string, at time.Time) error
	// Reschedule moves a task's attention time from `from` (as Due reported
	// it) to `to` (zero: remove it), only if it is still at `from`: a
	// sweeper never overwrites a time a concurrent transition just set.
	Reschedule(ctx context.Context, id string, from, to time.Time) (bool, error)
}

// A Dispatcher is a Store that can hand tasks to the queue itself, in the
// same atomic write as the transition that makes a task runnable. When
// Dispatches reports true, the Server enqueues nothing after Create, after
// an Update that resumes the task, or after a worker's Commit that releases
// or parks it: the store has enqueued it (at the wake time or deadline for
// a sleep or a parked task with one), or dropped its message when it ended
// or parked without a deadline. A RenewLease (see LeaseRenewer) makes the
// task's message due at the renewed lease's end, in the same write, so
// that if the worker dies the task is delivered again when its lease runs
// out; and a Claim that finds a live lease makes the message due at that
// lease's end. (Before the first renewal, the delivery that the claim
// answers stays hidden for the queue's visibility timeout, which a
// deployment sets to about the lease.) The same holds for the events and
// branches of an EventStore and a Brancher: a Deliver that resumes a task,
// a Commit that starts a fork (its first branches), a CommitBranch (the
// branch's retry, the next branch, the resumed task) and a RenewBranch
// dispatch in their own writes. Explicit enqueues (a sleeping task's
// chained delay, the sweeper) still go through the Queue.
type Dispatcher interface {
	Dispatches() bool
}

// A LeaseRenewer is a Store whose leases a worker can renew while it runs:
// the Server then claims a task for Options.Lease only, and renews the
// lease every third of it while a step runs and before each new step, so
// that a worker that dies loses the task within Options.Lease, and the
// task is delivered again then (see Dispatcher, and the Queue's Defer method
// for a store that does not dispatch). A Store that is not a LeaseRenewer gets claims
// that last the whole invocation (Options.MaxDuration plus
// Options.SafetyMargin), as it always has: a dead worker's task then waits
// for that lease to run out and for the sweeper.
type LeaseRenewer interface {
	// RenewLease makes the lease of claim c last until now+lease, if c
	// still holds the task: no Claim was made since c, and no Commit
	// under c released, parked or ended the task (a lease that ran out with
	// neither is still c's, and is renewed). Otherwise it returns ErrFenced
	// (ErrNotFound if the task is gone) and changes nothing. It reads only
	// c.Task.ID and c.Gen, and leaves c as it is. Like Commit, it never
	// fences on the lease's time: a Claim after the lease ran out is what
	// takes a task away.
	RenewLease(ctx context.Context, c *Claim, now time.Time, lease time.Duration) error
}

// A DeadlineHonourer is a Store (or a [Queue]) that declares that each of
// its calls returns soon after its context's deadline passes, with an
// error, whatever the state of the backend (a client that sets its
// connection's deadline from the context, as rueidis does, qualifies).
// When HonoursDeadline reports true, the Server calls it directly on a
// request's path. Otherwise it runs each such call on a goroutine of its
// own and answers the request at the deadline even if the call has not
// returned (it finishes in the background): a store that ignores its
// context cannot hold a request past Options.StoreTimeout, at the cost of
// a goroutine per call.
type DeadlineHonourer interface {
	HonoursDeadline() bool
}

// Lister is implemented by a [Store] that can list a principal's tasks,
// which the 2025-11-25 tasks/list needs. A server whose store is not a
// Lister (or that runs under Options.Anonymous, where every caller is one
// principal) does not offer tasks/list.
type Lister interface {
	// List returns up to limit tasks that owner owns and that have not
	// expired at now, newest first, starting after cursor ("" for the
	// first page), and the cursor of the next page ("" when there is
	// none). A cursor the store did not issue answers ErrBadCursor. An
	// empty owner owns nothing. The index behind it is bounded per
	// principal and expires with the tasks.
	List(ctx context.Context, owner, cursor string, limit int, now time.Time) (ts []*Task, next string, err error)
}

// Watcher is implemented by a [Store] that announces its transitions to
// every process (the Redis store does, through pub/sub). A server whose
// store is a Watcher serves subscriptions/listen for task ids;
// without one it leaves task ids out of every
// acknowledgement, and clients poll.
type Watcher interface {
	// Watch subscribes to the transitions of the tasks ids: fn is called
	// with a task's id each time a transition may have changed what a
	// client sees of it (status, message, result, input requests), after
	// the transition is durable. Announcements are at most once and carry
	// nothing: the watcher reads the task to learn what changed. fn must
	// not block. The subscription ends when ctx does (or fails); Done
	// then yields why (nil or ctx's error for an orderly end).
	Watch(ctx context.Context, ids []string, fn func(id string)) (*Subscription, error)
}

// Subscription is a Watch in place.
type Subscription struct {
	// Ready is closed once every transition committed from then on is
	// announced (the subscription is confirmed).
	Ready <-chan struct{}
	// Done receives the reason the subscription ended, then is closed.
	Done <-chan error
}

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
