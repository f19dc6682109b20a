package tasks

import (
	"context"
	"sync"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The read cache (Options.ReadCache) answers a tasks/get from the
// process's own last read of the task when nothing can have changed it
// since: clients poll, and most polls find a task as it was.
//
// What makes a kept read true: a task is kept only in a state that no
// transition leaves without announcing it (driver.Watcher): terminal, in
// input_required, or working without a worker until a set time (asleep,
// or awaiting an event with a deadline), and only until the time at which it would move by itself (its
// wake time, its expiry). A read is kept only if it started after the
// process's subscription to the task's announcements was confirmed, and
// an announcement, or a write this process made, drops it; a read that
// an announcement overtook is not kept (each entry counts its
// announcements). The subscription's end drops the entry. So a kept read
// is served only while the store holds the same state, but for the time
// an announcement takes to reach this process: a write made through
// another process is seen here once its announcement arrived, which
// Redis sends before it answers the writer. Writes through this process
// drop the entry before they answer, and so does every other watch of the
// process that hears the announcement (a task stream, a job's status
// wait) before it acts on it: a client told of a change by a stream never
// reads the task as it was.
//
// What it costs: one subscription per kept task on the store's shared
// subscriber connection (Redis: a SUBSCRIBE at the task's second read
// within readCacheIdle, so that tasks read once cost none; an UNSUBSCRIBE
// when it is dropped); at most ReadCache entries, holding at most
// readCacheBytes (a task whose answer is larger than readCacheEntryBytes
// is read each time; its arguments, in no answer, are not kept); an entry
// unused for readCacheIdle is dropped and a kept read is re-read after
// readCacheMaxAge (a bound on anything unannounced). The owner is checked
// against the one the store returned: a caller that is not the owner is
// answered by the store, as an unknown task is.

const (
	readCacheIdle   = 10 * time.Second
	readCacheMaxAge = 30 * time.Second
	// A task whose answer is larger than readCacheEntryBytes (a long
	// result, large input requests) is read from the store each time,
	// and the kept reads hold at most readCacheBytes in all.
	readCacheEntryBytes = 64 << 10
	readCacheBytes      = 32 << 20
)

type readCache struct {
	w     driver.Watcher
	max   int
	clock func() time.Time // the engine's clock (Options.Now), for the task's own times

	mu sync.Mutex
	m  map[string]*cacheEntry
	// bytes is the size of the kept reads (see taskBytes).
	bytes int
	// seen holds the tasks read once lately (wall time of the read): a
	// task is watched from its second read, so that reading many tasks
	// once each costs no subscriptions.
	seen  map[string]time.Time
	timer *time.Timer // drops idle entries while there are any
}

// cacheEntry is one watched task.
type cacheEntry struct {
	sub  *driver.Subscription // nil while Watch is being called
	stop context.CancelFunc
	// gen counts the announcements and local writes since the entry was
	// made: a read is kept only if none came while it ran.
	gen  uint64
	task *driver.Task // the kept read, nil if none
	size int          // its taskBytes
	// until is when the kept task may move by itself (engine clock);
	// readAt and used are wall times (max age, idleness).
	until  time.Time
	readAt time.Time
	used   time.Time
}

func newReadCache(w driver.Watcher, max int, clock func() time.Time) *readCache {
	return &readCache{w: w, max: max, clock: clock, m: map[string]*cacheEntry{}, seen: map[string]time.Time{}}
}

// readToken is what a store read needs to be kept: the entry and its
// announcement count when the read began (entry nil: not kept).
type readToken struct {
	e   *cacheEntry
	gen uint64
}

// get returns the kept read of id, if there is one that owner owns, and
// otherwise a token to pass to put with the store's answer.
func (c *readCache) get(owner, id string) (*driver.Task, readToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[id]
	if e == nil || e.sub == nil {
		return nil, readToken{}
	}
	select {
	case <-e.sub.Done:
		c.drop(id, e)
		return nil, readToken{}
	case <-e.sub.Ready:
	default:
		return nil, readToken{} // reads before the subscription holds are not kept
	}
	now := time.Now()
	if e.task != nil && (!c.clock().Before(e.until) || now.Sub(e.readAt) > readCacheMaxAge) {
		c.clear(e)
	}
	if e.task != nil && e.task.Owner == owner {
		e.used = now
		return e.task, readToken{}
	}
	return nil, readToken{e: e, gen: e.gen}
}

// put records t, read from the store after get gave tok: kept if it can
// be, and the task watched from now on if it is not yet.
func (c *readCache) put(tok readToken, t *driver.Task) {
	until, ok := keepable(t, c.clock())
	if !ok {
		return
	}
	c.mu.Lock()
	e := c.m[t.ID]
	if e != nil {
		if tok.e == e && e.gen == tok.gen {
			c.clear(e)
			if size := taskBytes(t); size <= readCacheEntryBytes && c.bytes+size <= readCacheBytes {
				// Args are not part of any answer: not kept.
				kept := *t
				kept.Args = nil
				now := time.Now()
				e.task, e.size, e.until, e.readAt, e.used = &kept, size, until, now, now
				c.bytes += size
			}
		}
		c.mu.Unlock()
		return
	}
	now := time.Now()
	if at, ok := c.seen[t.ID]; !ok || now.Sub(at) >= readCacheIdle {
		if len(c.seen) < c.max {
			c.seen[t.ID] = now
			c.arm()
		}
		c.mu.Unlock()
		return
	}
	delete(c.seen, t.ID)
	if len(c.m) >= c.max {
		c.mu.Unlock()
		return
	}
	// Watch outside the lock: the store's announcements take the lock
	// from the store's own goroutine, which Watch may wait on.
	e = &cacheEntry{used: now}
	c.m[t.ID] = e
	c.arm()
	c.mu.Unlock()
	ctx, stop := context.WithCancel(context.Background())
	id := t.ID
	sub, err := c.w.Watch(ctx, []string{id}, func(string) { c.forget(id) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || c.m[id] != e {
		stop()
		if c.m[id] == e {
			delete(c.m, id)
		}
		return
	}
	e.sub, e.stop = sub, stop
}

// forget drops the kept read of id (an announcement, or a write made
// through this process).
func (c *readCache) forget(id string) {
	c.mu.Lock()
	if e := c.m[id]; e != nil {
		e.gen++
		c.clear(e)
	}
	c.mu.Unlock()
}

// drop removes the entry e of id, ending its subscription. Called with
// c.mu held.
func (c *readCache) drop(id string, e *cacheEntry) {
	c.clear(e)
	delete(c.m, id)
	if e.stop != nil {
		e.stop()
	}
}

// clear drops e's kept read. Called with c.mu held.
func (c *readCache) clear(e *cacheEntry) {
	c.bytes -= e.size
	e.task, e.size = nil, 0
}

// taskBytes is about what a kept read of t holds: its answer's variable
// parts and a fixed overhead.
func taskBytes(t *driver.Task) int {
	n := 256 + len(t.ID) + len(t.Owner) + len(t.Tool) + len(t.StatusMessage) + len(t.Result) + len(t.Awaiting)
	if t.Error != nil {
		n += 64 + len(t.Error.Message) + len(t.Error.Data)
	}
	for k, v := range t.InputRequests {
		n += 16 + len(k) + len(v)
	}
	return n
}

// arm starts the eviction timer if it is not running. Called with c.mu
// held.
func (c *readCache) arm() {
	if c.timer == nil {
		c.timer = time.AfterFunc(readCacheIdle, c.evict)
	}
}

// evict drops the entries unused for readCacheIdle and those whose
// subscription ended, and forgets the reads seen once before then; it
// runs every readCacheIdle while any remain.
func (c *readCache) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for id, at := range c.seen {
		if now.Sub(at) >= readCacheIdle {
			delete(c.seen, id)
		}
	}
	for id, e := range c.m {
		if e.sub == nil {
			continue // being made
		}
		ended := false
		select {
		case <-e.sub.Done:
			ended = true
		default:
		}
		if ended || now.Sub(e.used) >= readCacheIdle {
			c.drop(id, e)
		}
	}
	if len(c.m) == 0 && len(c.seen) == 0 {
		c.timer = nil
		return
	}
	c.timer.Reset(readCacheIdle)
}

// keepable reports whether t is in a state no transition leaves
// unannounced, and until when it stays so by itself.
func keepable(t *driver.Task, now time.Time) (time.Time, bool) {
	until := t.CreatedAt.Add(t.TTL) // its expiry
	if t.TTL <= 0 {
		return time.Time{}, false
	}
	switch {
	case t.Status.Terminal():
	case t.Status == driver.StatusInputRequired, t.Status == driver.StatusWorking:
		if t.Status == driver.StatusWorking {
			// Only asleep or awaiting until a set time: held by a worker,
			// due to run, or awaiting without a deadline (a worker or the
			// sweeper may claim it), its steps change it without
			// announcing.
			if t.LeaseUntil.After(now) || t.CancelRequested || t.WakeAt.IsZero() {
				return time.Time{}, false
			}
		}
		if !t.WakeAt.IsZero() && t.WakeAt.Before(until) {
			until = t.WakeAt
		}
	default:
		return time.Time{}, false
	}
	return until, now.Before(until)
}
