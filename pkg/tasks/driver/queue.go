package driver

import (
	"context"
	"time"
)

// Queue hands task ids to workers. The engine owns this contract (it is
// its only consumer); the adapters live in their own packages so that a
// binary links only the one it uses: pkg/queue/redisqueue (the local
// default and self-hosted workers), pkg/queue/sqsqueue (AWS Lambda) and
// pkg/queue/qstash (Vercel).
//
// A message is only a task id: "look at this task at or after this time".
// Delivery is at least once and messages carry no state, so a duplicated,
// late or lost message is harmless: the worker re-reads the task from the
// store, and the sweeper re-enqueues a task whose message was lost.
//
// A Queue that keeps one message per task and can move it later may also
// have the method
//
//	Defer(ctx context.Context, taskID string, at time.Time) error
//
// (redisqueue.Queue has it), which makes taskID's message due at at, later
// than it was if need be (Enqueue only ever brings a waiting message
// forward), or adds one; it must be idempotent. While a worker renews a
// task's lease (LeaseRenewer) on a store that does not dispatch
// (Dispatcher), each renewal defers the task's message to the lease's new
// end, so that if the worker dies the task is delivered again when its
// lease runs out. A Queue without it gets a delayed message (Enqueue) at
// each renewed lease's end instead: on SQS or QStash, a worker that dies
// after renewing is replaced by its last renewal's message.
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
