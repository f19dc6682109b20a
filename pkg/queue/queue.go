// Package queue defines the work queue that wakes task workers, and its
// adapters.
//
// A message is only a task id: "look at this task at or after this time".
// Delivery is at least once and messages carry no state, so a duplicated,
// late or lost message is harmless: the worker re-reads the task from the
// store, and the sweeper re-enqueues a task whose message was lost. The
// queue must never be the only record of anything.
package queue

import (
	"context"
	"time"
)

// Queue hands task ids to workers.
type Queue interface {
	// Enqueue asks for taskID to be delivered at or after notBefore (now if
	// zero or past). On the Redis queue, enqueueing an id that is already
	// waiting keeps one message, due at the earlier of the two times (the
	// id is the dedup key). The push queues deduplicate less: SQS (standard)
	// not at all, QStash only an identical (id, time) pair; the extra
	// deliveries are harmless, since a worker re-reads the task.
	Enqueue(ctx context.Context, taskID string, notBefore time.Time) error
	// MaxDelay is the longest delay the queue can hold (0: unlimited).
	// Longer waits are chained by the worker.
	MaxDelay() time.Duration
}
