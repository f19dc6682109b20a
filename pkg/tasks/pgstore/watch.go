package pgstore

import (
	"context"
	"sync"

	"github.com/mcptasks/mcptasks/internal/pglisten"

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
// watches (through one subscription, dispatched by task id), opened by the
// first and closed a while after the last ends.
// Notifications are at most once: a watcher re-reads the task record (the
// truth) after each, and now and then anyway.

var (
	_ driver.Watcher      = (*Store)(nil)
	_ driver.LeaseRenewer = (*Store)(nil)
)

// Watch subscribes to the transitions of the tasks ids (see
// [driver.Watcher]). All the watches of a store share one subscription to
// its listening connection, which hands each notification to the watches
// of its task only (a lookup, whatever the number of watches); if the
// connection fails, every watch ends with its error.
func (s *Store) Watch(ctx context.Context, ids []string, fn func(id string)) (*driver.Subscription, error) {
	w := &watch{fn: fn, done: make(chan error, 1)}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if driver.ValidID(id) && !seen[id] {
			seen[id] = true
			w.ids = append(w.ids, id)
		}
	}
	if len(w.ids) == 0 {
		ready := make(chan struct{})
		close(ready)
		context.AfterFunc(ctx, func() { w.end(ctx.Err()) })
		return &driver.Subscription{Ready: ready, Done: w.done}, nil
	}
	return s.watches.join(ctx, s.listen, w), nil
}

// watchHub dispatches a Store's notifications to its watches by task id.
type watchHub struct {
	mu sync.Mutex
	// shared is the subscription every watch is on (nil when none is).
	shared *sharedSub
}

// sharedSub is one subscription to the store's Listener and its watches.
type sharedSub struct {
	ready  <-chan struct{}
	cancel context.CancelFunc
	byID   map[string]map[*watch]struct{}
	n      int
}

// watch is one Watch in place.
type watch struct {
	fn   func(id string)
	ids  []string
	done chan error
	once sync.Once
}

func (w *watch) end(err error) {
	w.once.Do(func() {
		w.done <- err
		close(w.done)
	})
}

// join adds w to the shared subscription, starting one if there is none,
// until ctx ends.
func (h *watchHub) join(ctx context.Context, l *pglisten.Listener, w *watch) *driver.Subscription {
	h.mu.Lock()
	sh := h.shared
	if sh == nil {
		sctx, cancel := context.WithCancel(context.Background())
		sh = &sharedSub{cancel: cancel, byID: map[string]map[*watch]struct{}{}}
		ready, done := l.Subscribe(sctx, func(id string) { h.dispatch(sh, id) })
		sh.ready = ready
		h.shared = sh
		go h.ended(sh, done)
	}
	for _, id := range w.ids {
		if sh.byID[id] == nil {
			sh.byID[id] = map[*watch]struct{}{}
		}
		sh.byID[id][w] = struct{}{}
	}
	sh.n++
	h.mu.Unlock()
	context.AfterFunc(ctx, func() {
		h.leave(sh, w)
		w.end(ctx.Err())
	})
	return &driver.Subscription{Ready: sh.ready, Done: w.done}
}

// dispatch hands the notification of task id to its watches.
func (h *watchHub) dispatch(sh *sharedSub, id string) {
	h.mu.Lock()
	fns := make([]func(string), 0, len(sh.byID[id]))
	for w := range sh.byID[id] {
		fns = append(fns, w.fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(id)
	}
}

// leave takes w off sh, and ends sh when no watch is left.
func (h *watchHub) leave(sh *sharedSub, w *watch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	removed := false
	for _, id := range w.ids {
		if ws := sh.byID[id]; ws != nil {
			if _, ok := ws[w]; ok {
				removed = true
				delete(ws, w)
				if len(ws) == 0 {
					delete(sh.byID, id)
				}
			}
		}
	}
	if !removed {
		return // ended with sh already
	}
	sh.n--
	if sh.n == 0 && h.shared == sh {
		h.shared = nil
		sh.cancel()
	}
}

// ended waits for sh's end and ends its watches with the reason (the
// connection's error; nothing is left when the hub ended it itself).
func (h *watchHub) ended(sh *sharedSub, done <-chan error) {
	err := <-done
	h.mu.Lock()
	if h.shared == sh {
		h.shared = nil
	}
	ws := map[*watch]struct{}{}
	for id, set := range sh.byID {
		for w := range set {
			ws[w] = struct{}{}
		}
		delete(sh.byID, id)
	}
	sh.n = 0
	h.mu.Unlock()
	sh.cancel()
	for w := range ws {
		w.end(err)
	}
}
