package tasks

import "context"

// Watcher is implemented by a [Store] that announces its transitions to
// every process (the Redis store does, through pub/sub). A server whose
// store is a Watcher serves subscriptions/listen for task ids
// (Server.listen); without one it leaves task ids out of every
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
