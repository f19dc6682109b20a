package pgqueue

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mcptasks/mcptasks/internal/pglisten"
	"github.com/mcptasks/mcptasks/internal/pgschema"
	"github.com/mcptasks/mcptasks/pkg/queue"
)

// errorBackoff bounds the wait after a failed statement, so that a
// consumer notices a database that came back within a second.
const errorBackoff = time.Second

// Consume runs n consumers until ctx ends, handing each due message to h,
// and settling it as h says (queue.Settle: a store that dispatches into
// this queue, pgstore.Options.Dispatch, settles it in its own write).
//
// The consumers of one Consume call share what they know of the queue:
// when its earliest message falls due, learnt from every receive's reply
// and from the due times that enqueues notify. A consumer receives only
// when a message is believed due, and one at a time unless the last
// receive saw another due behind the one it took; with nothing due the
// consumers wait on the process, not on the database. One LISTEN per
// Consume call (a connection of its own) hears the enqueues of every
// process; a timer wakes a consumer when a known delayed message falls
// due, and the queue is looked at at least once per Options.Poll (every
// second while the LISTEN is down). A handler's message is handled to
// the end when ctx ends (the worker's own budget bounds it).
func (q *Queue) Consume(ctx context.Context, n int, h queue.Handler) {
	l := pglisten.New(q.dial, pgschema.QueueChannel(q.schema), &pglisten.Options{Linger: time.Millisecond})
	defer l.Close()
	g := &group{q: q, kick: make(chan struct{}, 1), resched: make(chan struct{}, 1), due: time.Now().UnixMilli()}
	var wg sync.WaitGroup
	wg.Go(func() { g.subscribe(ctx, l) })
	wg.Go(func() { g.schedule(ctx) })
	for range max(n, 1) {
		wg.Go(func() { g.consume(ctx, h) })
	}
	wg.Wait()
}

// group is the consumers of one Consume call and what they share.
type group struct {
	q *Queue
	// kick wakes one idle consumer (capacity 1: a kick sent while none
	// waits is taken by the next one to wait, so none is lost).
	kick chan struct{}
	// resched makes the scheduler recompute its timer.
	resched chan struct{}

	mu sync.Mutex
	// due is when a consumer must next look at the queue (Unix ms; never
	// while one is looking).
	due int64
	// gen counts the wakes: a receive's reply that crossed one does not
	// hide what it announced.
	gen        uint64
	subscribed bool
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (g *group) kickOne() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

func (g *group) reschedule() {
	select {
	case g.resched <- struct{}{}:
	default:
	}
}

// take reports whether the queue must be looked at now; if so the caller
// looks, and the others wait for what it learns.
func (g *group) take(now int64) (gen uint64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.due > now {
		return 0, false
	}
	g.due = never
	return g.gen, true
}

// learn records a receive's reply at now with wake count gen: the
// earliest message left is due at next (never: none). A reply that shows
// another message due wakes another consumer.
func (g *group) learn(gen uint64, now, next int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	poll := g.q.o.Poll
	if !g.subscribed {
		poll = min(poll, errorBackoff)
	}
	next = min(next, now+poll.Milliseconds())
	if g.gen == gen {
		g.due = next
	} else {
		g.due = min(g.due, next)
	}
	g.changedLocked()
}

// markAt records that a message is due at at.
func (g *group) markAt(at int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.due = min(g.due, at)
	g.changedLocked()
}

// changedLocked wakes a consumer if the queue must be looked at now, and
// else has the scheduler look at its timer.
func (g *group) changedLocked() {
	if g.due <= nowMs() {
		g.kickOne()
		return
	}
	g.reschedule()
}

func (g *group) setSubscribed(up bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subscribed = up
	if !up {
		g.due = min(g.due, nowMs()+errorBackoff.Milliseconds())
	}
	g.reschedule()
}

// schedule wakes a consumer whenever the time to look at the queue comes.
func (g *group) schedule(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		g.mu.Lock()
		due := g.due
		g.mu.Unlock()
		d := g.q.o.Poll
		if due != never {
			// A millisecond more: the queue is then due by the clock take
			// reads.
			d = time.Duration(max(due-nowMs()+1, 0)) * time.Millisecond
		}
		t.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-g.resched:
		case <-t.C:
			g.kickOne()
		}
	}
}

// subscribe keeps a LISTEN for the queue's notifications until ctx ends.
// Each confirmed subscription makes the queue due at once: a
// notification missed while it was down is not missed again.
func (g *group) subscribe(ctx context.Context, l *pglisten.Listener) {
	backoff := errorBackoff
	for {
		ready, done := l.Subscribe(ctx, func(payload string) {
			at, err := strconv.ParseInt(payload, 10, 64)
			if err != nil {
				at = nowMs()
			}
			g.markAt(at)
		})
		var err error
		select {
		case <-ready:
			g.setSubscribed(true)
			g.markAt(nowMs())
			backoff = errorBackoff
			err = <-done
		case err = <-done:
		}
		g.setSubscribed(false)
		if ctx.Err() != nil {
			return
		}
		g.q.o.Logger.Warn("queue wake subscription failed; consumers look every second until it is back", "err", err, "retry_in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, g.q.o.Poll)
	}
}

// sleep waits d or until ctx ends; it reports false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (g *group) consume(ctx context.Context, h queue.Handler) {
	for {
		now := nowMs()
		gen, ok := g.take(now)
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-g.kick:
			}
			continue
		}
		if ctx.Err() != nil {
			g.markAt(now) // another consumer of the group would have looked
			return
		}
		d, ok, next, err := g.q.receive(ctx, now)
		if err != nil {
			g.learn(gen, now, now+errorBackoff.Milliseconds())
			if !errors.Is(err, context.Canceled) {
				g.q.o.Logger.Warn("queue receive failed", "err", err)
			}
			// Database unreachable: back off on a timer rather than spin.
			if !sleep(ctx, errorBackoff) {
				return
			}
			continue
		}
		g.learn(gen, now, next)
		if ok {
			g.handle(ctx, h, d)
		}
	}
}

// handle runs h on d and settles d as h says.
func (g *group) handle(ctx context.Context, h queue.Handler, d Delivery) {
	q := g.q
	// Handling is not tied to ctx: a shutdown lets the current message
	// finish (the worker's own budget bounds it).
	hctx := context.WithoutCancel(ctx)
	settle, err := h(hctx, d.TaskID)
	if err != nil {
		q.o.Logger.Warn("task handler failed; message will be redelivered", "task", d.TaskID, "err", err)
		at := time.Now().Add(time.Second)
		if err := q.Retry(hctx, d, at); err != nil {
			q.o.Logger.Warn("queue retry failed", "err", err)
		}
		g.markAt(at.UnixMilli())
		return
	}
	switch settle {
	case queue.Requeued:
		// The handler's write made the message due again, quietly (no
		// notification): look at the queue to learn when.
		g.markAt(nowMs())
		return
	case queue.Removed:
		return
	}
	if err := q.Ack(hctx, d); err != nil {
		q.o.Logger.Warn("queue ack failed; message will be redelivered", "err", err)
	}
}
