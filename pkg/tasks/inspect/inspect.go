// Package inspect is what an operator's tools read of a task store: a
// task's whole Record (its journal, answers and history included), which
// mcptasks inspect and the dashboard show. It is never served to clients:
// it holds the principal's arguments, answers and results. Both stores of
// this module (redisstore, pgstore) implement [Store].
package inspect

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Record is everything a store holds of one task, for an operator with
// access to the store (mcptasks inspect). It is never served to clients:
// it holds the principal's arguments, answers and results.
type Record struct {
	// Task is the task record, as Peek returns it.
	Task *driver.Task
	// Journal is the task's journal, history entries (driver.KindAttempt, driver.KindLost)
	// included.
	Journal []driver.Entry
	// Responses are the input responses received (key -> response).
	Responses map[string]json.RawMessage
	// AnsweredAt is when each answered input key was answered.
	AnsweredAt map[string]time.Time
	// Waiting holds the input requests a parked task waits for, Offers
	// its outstanding offers (key -> request).
	Waiting, Offers map[string]json.RawMessage
	// CancelRequestedAt is when tasks/cancel first reached the live task
	// (zero: never).
	CancelRequestedAt time.Time
	// Attempts is how many times the next unjournaled step was claimed.
	Attempts int
	// Claims is the fencing generation: how many times a worker took a
	// lease on the task (zero once it ended: the store drops the count).
	Claims int64
	// Events are the task's callbacks, signals and parallel steps' joins,
	// by name (a store that is a driver.EventStore).
	Events map[string]Event
	// Forks are its parallel steps, in order, with their branches (a
	// store that is a driver.Brancher).
	Forks []Fork
}

// Event is one event of a task: a callback, a signal or the join of a
// parallel step.
type Event struct {
	// State is "open" (the task may still get it), "delivered" or
	// "closed" (its wait ended first).
	State string
	// Kind is the event's kind ("join" for a parallel step's); empty for
	// a closed wait.
	Kind driver.EventKind
	// Until is when an open wait ends; Signed, whether a callback checks
	// a signature.
	Until  time.Time
	Signed bool
	// Payload is a delivered event's payload.
	Payload json.RawMessage
}

// Fork is one parallel step of a task.
type Fork struct {
	// Number is the task's n-th parallel step; Name its step name.
	Number int
	Name   string
	// Branches and Concurrency are the step's; Dispatched is how many
	// branches were started so far, Finished how many finished.
	Branches, Concurrency, Dispatched, Finished int
	// Branch holds each branch, by index.
	Branch []Branch
}

// Branch is one branch of a parallel step.
type Branch struct {
	// State is "pending" (not started), "queued", "running", "retrying",
	// "done" or "failed".
	State string
	// Attempts is how many times it was claimed; Lost how many of its
	// leases ran out (its worker was lost).
	Attempts, Lost int
	// LeaseUntil is the end of a running branch's lease; RetryAt the time
	// of a retrying one's next attempt; FinishedAt when it finished, its
	// last attempt taking Took.
	LeaseUntil, RetryAt, FinishedAt time.Time
	Took                            time.Duration
	// Value is a done branch's result; Err a failed one's final error,
	// LastErr the error of its last retried attempt.
	Value        json.RawMessage
	Err, LastErr string
}

// Store is implemented by a [driver.Store] that can show an operator a
// task's whole [Record], whoever owns it.
type Store interface {
	// Inspect returns the Record of the task id, or driver.ErrNotFound.
	Inspect(ctx context.Context, id string) (*Record, error)
}
