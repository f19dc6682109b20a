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

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// Record is everything a store holds of one task, for an operator with
// access to the store (mcptasks inspect). It is never served to clients:
// it holds the principal's arguments, answers and results.
type Record struct {
	// Task is the task record, as Peek returns it.
	Task *tasks.Task
	// Journal is the task's journal, history entries (tasks.KindAttempt, tasks.KindLost)
	// included.
	Journal []tasks.Entry
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
}

// Store is implemented by a [tasks.Store] that can show an operator a
// task's whole [Record], whoever owns it.
type Store interface {
	// Inspect returns the Record of the task id, or tasks.ErrNotFound.
	Inspect(ctx context.Context, id string) (*Record, error)
}
