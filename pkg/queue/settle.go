package queue

import "context"

// Settle says what a worker's own write did with the message it handles,
// for the pull queues whose consumers hand messages to a [Handler]
// (redisqueue, pgqueue): a store that enqueues through the queue in its
// own transitions (a driver.Dispatcher) makes a task's message due again,
// or removes it, in the same write as the task's transition, so the
// consumer need not acknowledge it.
type Settle int

const (
	// Ack: the handler's write left the message alone; the consumer
	// acknowledges it.
	Ack Settle = iota
	// Requeued: the handler's write made the message due again; no
	// acknowledgement is sent.
	Requeued
	// Removed: the handler's write removed the message; no
	// acknowledgement is sent.
	Removed
)

// SettleOf is the Settle of a handler whose write settled the message
// (settled), and removed it if the task ended (ended).
func SettleOf(settled, ended bool) Settle {
	switch {
	case !settled:
		return Ack
	case ended:
		return Removed
	}
	return Requeued
}

// Handler processes one task id for a pull queue's consumer. A nil error
// settles the message as the Settle says; an error makes it due again
// after a short backoff.
type Handler func(ctx context.Context, taskID string) (Settle, error)
