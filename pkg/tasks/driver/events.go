package driver

import (
	"context"
	"encoding/json"
	"time"
)

// EventKind says what delivers an event.
type EventKind string

// The kinds of event a task waits for.
const (
	// EventCallback is a POST to a callback URL (tasks.Callback).
	EventCallback EventKind = "callback"
	// EventSignal is a Server.Signal from the tool author's code.
	EventSignal EventKind = "signal"
)

// EventWait is a task's wait for the event Name, as the engine opens it
// (Change.Open) and an [EventStore] keeps it.
type EventWait struct {
	// Name is the event's name: the name of the step that made it, unique
	// in the task.
	Name string
	Kind EventKind
	// Proof, for a callback, is the hex SHA-256 of its URL's token: a
	// delivery must present the same. The store never sees the token.
	Proof string
	// Secret, for a callback, is the Standard Webhooks signing secret its
	// deliveries are verified with ("" for none).
	Secret string
	// Schema is the JSON schema a payload is checked against (nil: any
	// JSON value).
	Schema json.RawMessage
	// Until is when the wait ends: a delivery at or after it is refused.
	// The engine always sets it (at the latest, the task's expiry).
	Until time.Time
}

// An EventStore is a [Store] that takes events for its tasks: callbacks
// and signals. A Store that is not one serves every other step; a tool
// that makes a callback or awaits a signal on it gets an error wrapping
// tasks.ErrEventsUnsupported (which it may return, failing the task), and
// Server.Signal that error too.
//
// Contract (the storetest suite checks it):
//
//   - A wait is opened by the Commit whose Change lists it (Change.Open)
//     and stays open until its event is delivered, its Until passes, or
//     the task ends. A claim with a lease closes the waits whose Until is
//     at or before its now, and reports the payloads delivered so far
//     (Claim.Events).
//   - A callback is delivered at most once: Deliver with its name and
//     proof succeeds while its wait is open and answers ErrNotFound
//     otherwise, exactly as for a task that does not exist (used,
//     expired, forged, another task's: indistinguishable).
//   - A signal is delivered at most once per name: before the task opened
//     its wait it is kept (buffered, at most MaxEvents events per task),
//     while the wait is open it is delivered; afterwards (delivered,
//     closed, or the name is a callback's) Deliver answers ErrEventClosed,
//     and so it does for a task that ended.
//   - A delivery of the event a released task awaits (Change.Await)
//     resumes it: working and due now, its Awaiting cleared; resumed is
//     then true (the caller enqueues it, unless the store is a
//     Dispatcher, which has).
//   - Deliveries never change what a claim already read: a delivery after
//     a claim is seen by the next claim, or resumes the task if it awaits
//     it then.
type EventStore interface {
	// Waiting returns the open wait a delivery to task id would fill:
	// for a callback (proof set) the open callback wait with that proof
	// (named name, or any name when name is empty), else ErrNotFound; for
	// a signal (proof empty) the open wait name, or nil when the task has
	// none yet (a delivery would be buffered), or ErrEventClosed when it
	// takes no more of name. It answers ErrNotFound for a task that does
	// not exist.
	Waiting(ctx context.Context, id, name, proof string, now time.Time) (*EventWait, error)
	// Deliver delivers d to task id, as the contract above says.
	Deliver(ctx context.Context, id string, d *Delivery) (resumed bool, err error)
}

// Delivery is an event delivered to a task.
type Delivery struct {
	// Name is the event's name; Proof, for a callback, the hex SHA-256 of
	// the token its URL carried ("" for a signal).
	Name, Proof string
	// Payload is the event's JSON payload, checked against the wait's
	// schema when it had one.
	Payload json.RawMessage
	Now     time.Time
}
