package pgstore

import (
	"context"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Transition announcements: every function that may change what a client
// sees of a task (update_task, cancel_task, claim_task when it cancels a
// task or takes it out of input_required, commit_task) notifies the
// channel "<schema>.tasks" with the task's id, in the transition's own
// transaction: PostgreSQL delivers it when the transaction commits, so a
// watcher never reads the task before the transition is durable. NOTIFY
// works through any pooler; LISTEN needs a session, so Watch listens on a
// direct connection (Options.Listen), one per store shared by all its
// watches, opened by the first and closed a while after the last ends.
// Notifications are at most once: a watcher re-reads the task record (the
// truth) after each, and now and then anyway.

var (
	_ driver.Watcher      = (*Store)(nil)
	_ driver.LeaseRenewer = (*Store)(nil)
)

// Watch subscribes to the transitions of the tasks ids (see
// [driver.Watcher]). All the watches of a store share its one listening
// connection; if it fails, every watch ends with its error.
func (s *Store) Watch(ctx context.Context, ids []string, fn func(id string)) (*driver.Subscription, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		if driver.ValidID(id) {
			want[id] = true
		}
	}
	if len(want) == 0 {
		ready, done := make(chan struct{}), make(chan error, 1)
		close(ready)
		go func() { <-ctx.Done(); done <- ctx.Err(); close(done) }()
		return &driver.Subscription{Ready: ready, Done: done}, nil
	}
	ready, done := s.listen.Subscribe(ctx, func(id string) {
		if want[id] {
			fn(id)
		}
	})
	return &driver.Subscription{Ready: ready, Done: done}, nil
}
