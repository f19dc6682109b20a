package redisqueue

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// Consume runs n consumers until ctx ends, handing each due message to h.
//
// The consumers of one Consume call share what they know of each shard:
// when its earliest message falls due (learnt from every receive's reply
// and from the due times enqueues publish on the wake channels) and when
// they last looked at it. A consumer receives only from a shard believed
// to hold a due message, taking the shards in turn so that a busy shard
// starves no other; with nothing due it waits on the process, not on
// Redis. One subscription per Consume call (a connection of its own)
// hears the wake channels of every shard; a timer wakes a consumer when a
// known delayed message falls due, and each shard is looked at at least
// once per Options.Poll in case a wake was missed (every second while the
// subscription is down). Idle, a process thus sends about Options.Shards
// commands per Poll, and an enqueue reaches an idle consumer as fast as
// Redis delivers the publication.
//
// While a handler runs, its consumer's [HandBack] offer stands on the
// Queue (see [Queue.TakeHandBack]): when the handler's
// own write settles the message and takes the shard's next due one, the
// consumer handles that one next, without a receive (on a sharded queue,
// at most MaxHandBacks in a row, so that the shards still take turns).
// A consumer that stops holding such a message makes it due again at once.
func (q *Queue) Consume(ctx context.Context, n int, h Handler) {
	if q.misuse != nil {
		q.o.Logger.Error("queue cannot be consumed", "err", q.misuse)
		return
	}
	g := newGroup(q)
	var wg sync.WaitGroup
	wg.Go(func() { g.subscribe(ctx) })
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
	// cursor is the shard where the next pick starts looking.
	cursor int
	shards []shardState
	// subscribed is whether the wake subscription is up; while it is not,
	// shards are looked at every errorBackoff instead of every Poll.
	subscribed bool
}

// shardState is what a group knows of one shard. Times are Unix ms.
type shardState struct {
	// due is the earliest time a message may be due there, as far as the
	// group knows (never: none is known).
	due int64
	// looked is when a receive last looked at the shard.
	looked int64
	// gen counts the wakes (publications, the group's own enqueues): a
	// receive's reply that crossed one does not hide what it announced.
	gen uint64
	// inflight counts the receives under way on the shard. While one is,
	// another consumer receives there too only if the shard is busy: its
	// last receive took a message and saw another due behind it.
	inflight int
	busy     bool
}

func newGroup(q *Queue) *group {
	// Every shard starts due: the group knows nothing yet.
	return &group{q: q, kick: make(chan struct{}, 1), resched: make(chan struct{}, 1), shards: make([]shardState, len(q.keys))}
}

// nowMs is the queue's clock in Unix milliseconds.
func (q *Queue) nowMs() int64 { return q.o.Now().UnixMilli() }

// nextLocked is when shard s must be looked at: when a message is due
// there, or when it was last looked at a poll interval ago.
func (g *group) nextLocked(s *shardState) int64 {
	poll := g.q.o.Poll
	if !g.subscribed {
		poll = min(poll, errorBackoff)
	}
	return min(s.due, s.looked+poll.Milliseconds())
}

// pickableLocked reports whether a consumer should receive from shard s
// at now.
func (g *group) pickableLocked(s *shardState, now int64) bool {
	return g.nextLocked(s) <= now && (s.inflight == 0 || s.busy)
}

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

// pick returns a shard that must be looked at now, taking the shards in
// turn, and its wake count; ok is false when none must. If another shard
// must be looked at too, it wakes another consumer for it. The caller
// reports the receive's outcome with learn or failed.
func (g *group) pick(now int64) (k int, gen uint64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.shards)
	for i := range n {
		k = (g.cursor + i) % n
		s := &g.shards[k]
		if !g.pickableLocked(s, now) {
			continue
		}
		g.cursor = (k + 1) % n
		s.inflight++
		for j := range n {
			if g.pickableLocked(&g.shards[(k+j)%n], now) {
				g.kickOne()
				break
			}
		}
		return k, s.gen, true
	}
	return 0, 0, false
}

// learn records a receive's reply: shard k, looked at at lookedAt with
// wake count gen, next holds a message due at next (never: none); took
// says whether the receive took a message.
func (g *group) learn(k int, gen uint64, lookedAt, next int64, took bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shards[k].inflight--
	g.learnLocked(k, gen, lookedAt, next, took)
}

// handedBack records the reply of a hand-back on shard k (see HandBack),
// as learn does a receive's; gen is the shard's wake count before the
// handler ran (see genOf).
func (g *group) handedBack(k int, gen uint64, lookedAt, next int64, took bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.learnLocked(k, gen, lookedAt, next, took)
}

func (g *group) learnLocked(k int, gen uint64, lookedAt, next int64, took bool) {
	s := &g.shards[k]
	s.looked = max(s.looked, lookedAt)
	s.busy = took && next <= lookedAt
	if s.gen == gen {
		s.due = next
	} else {
		// A wake arrived while the receive was under way: what it
		// announced may postdate the reply.
		s.due = min(s.due, next)
	}
	g.changedLocked(s)
}

// genOf returns shard k's wake count.
func (g *group) genOf(k int) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shards[k].gen
}

// failed records a receive on shard k that failed: the shard is looked at
// again after errorBackoff.
func (g *group) failed(k int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &g.shards[k]
	s.inflight--
	s.busy = false
	retry := g.q.nowMs() + errorBackoff.Milliseconds()
	s.due = retry
	s.looked = max(s.looked, retry-g.q.o.Poll.Milliseconds())
	g.changedLocked(s)
}

// markAt records that shard k holds a message due at at.
func (g *group) markAt(k int, at int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := &g.shards[k]
	s.gen++
	s.due = min(s.due, at)
	g.changedLocked(s)
}

// setSubscribed records whether the wake subscription is up.
func (g *group) setSubscribed(up bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subscribed = up
	g.reschedule()
}

// changedLocked wakes a consumer if shard s must be looked at now, and
// else has the scheduler look at its timer.
func (g *group) changedLocked(s *shardState) {
	if g.pickableLocked(s, g.q.nowMs()) {
		g.kickOne()
		return
	}
	g.reschedule()
}

// earliest is the earliest time after now that a shard must be looked at
// (never: none).
func (g *group) earliest(now int64) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := int64(never)
	for i := range g.shards {
		if t := g.nextLocked(&g.shards[i]); t > now {
			e = min(e, t)
		}
	}
	return e
}

// schedule wakes a consumer whenever a shard's time to be looked at comes.
// A shard whose time has come already was handed to a consumer when it
// came (see changedLocked and pick).
func (g *group) schedule(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		now := g.q.nowMs()
		d := g.q.o.Poll
		if e := g.earliest(now); e != never {
			// A millisecond more: the shard is then due by the clock
			// pick reads.
			d = time.Duration(e-now+1) * time.Millisecond
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

// subscribe keeps a subscription to every shard's wake channel until ctx
// ends. Each confirmed subscription marks its shard to be looked at: a
// publication missed while the subscription was down is not missed
// again.
func (g *group) subscribe(ctx context.Context) {
	byChannel := make(map[string]int, len(g.q.wakes))
	for k, w := range g.q.wakes {
		byChannel[w] = k
	}
	backoff := errorBackoff
	for {
		var confirmed atomic.Int64
		hctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
			k, ok := byChannel[s.Channel]
			if s.Kind != "subscribe" || !ok {
				return
			}
			g.markAt(k, g.q.nowMs())
			if confirmed.Add(1) == int64(len(byChannel)) {
				g.setSubscribed(true)
			}
		})
		// A connection of its own: a subscribed connection takes no other
		// command on some servers (the embedded Redis), and ending the
		// subscription gives the connection back clean.
		dc, release := g.q.c.Dedicate()
		err := dc.Receive(hctx, dc.B().Subscribe().Channel(g.q.wakes...).Build(), func(m rueidis.PubSubMessage) {
			k, ok := byChannel[m.Channel]
			if !ok {
				return
			}
			at, err := strconv.ParseFloat(m.Message, 64)
			if err != nil {
				at = float64(g.q.nowMs())
			}
			g.markAt(k, int64(at))
		})
		release()
		g.setSubscribed(false)
		if ctx.Err() != nil {
			return
		}
		if confirmed.Load() == int64(len(byChannel)) {
			backoff = errorBackoff // it worked for a while: retry soon
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

func (g *group) consume(ctx context.Context, h Handler) {
	q := g.q
	// held is a message handed back by the last handling (see HandBack),
	// and run how many such messages were handled in a row.
	var held *Delivery
	run := 0
	for {
		if ctx.Err() != nil {
			if held != nil {
				g.release(ctx, *held)
			}
			return
		}
		var d Delivery
		if held != nil {
			d, held = *held, nil
			run++
		} else {
			run = 0
			now := g.q.nowMs()
			k, gen, ok := g.pick(now)
			if !ok {
				select {
				case <-ctx.Done():
					return
				case <-g.kick:
				}
				continue
			}
			var next int64
			var err error
			d, ok, next, err = q.receiveShard(ctx, k, now)
			if err != nil {
				g.failed(k)
				if !errors.Is(err, context.Canceled) {
					q.o.Logger.Warn("queue receive failed", "err", err)
				}
				// Redis unreachable: back off on a timer rather than spin.
				if !sleep(ctx, errorBackoff) {
					return
				}
				continue
			}
			g.learn(k, gen, now, next, ok)
			if !ok {
				continue
			}
		}
		// With one shard a receive would take what a hand-back does (the
		// earliest due message): the bound guards other shards only.
		held = g.handle(ctx, h, d, len(q.keys) == 1 || run < MaxHandBacks)
	}
}

// handle runs h on d and settles d as h says. With offer, h's context
// puts up a HandBack while h runs; handle returns the message it took, if
// any.
func (g *group) handle(ctx context.Context, h Handler, d Delivery, offer bool) *Delivery {
	q, k := g.q, d.shard
	// Handling is not tied to ctx: a shutdown lets the current message
	// finish (the worker's own budget bounds it).
	hctx := context.WithoutCancel(ctx)
	var hb *HandBack
	var gen uint64
	withdraw := func() {}
	if offer {
		hb = &HandBack{q: q, taskID: d.TaskID, shard: k}
		withdraw = q.offer(hb)
		gen = g.genOf(k)
	}
	settle, err := h(hctx, d.TaskID)
	withdraw()
	var held *Delivery
	learnt := hb != nil && hb.replied
	if learnt {
		// The handler's write settled d and looked at its shard.
		g.handedBack(k, gen, hb.lookedAt, hb.next, hb.ok)
		if hb.ok {
			held = &hb.d
		}
	}
	if err != nil {
		q.o.Logger.Warn("task handler failed; message will be redelivered", "task", d.TaskID, "err", err)
		at := q.o.Now().Add(time.Second)
		if err := q.Retry(hctx, d, at); err != nil {
			q.o.Logger.Warn("queue retry failed", "err", err)
		}
		g.markAt(k, at.UnixMilli())
		return held
	}
	switch settle {
	case Requeued:
		// The handler's write made the message due again, quietly
		// (no wake): look at its shard to learn when, unless the
		// hand-back did.
		if !learnt {
			g.markAt(k, g.q.nowMs())
		}
		return held
	case Removed:
		return held
	}
	if err := q.Ack(hctx, d); err != nil {
		q.o.Logger.Warn("queue ack failed; message will be redelivered", "err", err)
	}
	return held
}

// releaseTimeout bounds the release of a handed-back message by a
// stopping consumer.
const releaseTimeout = 5 * time.Second

// release makes d, handed back to a consumer that stops before handling
// it, due at once (else it would wait for its receipt to run out), and
// announces it on its shard's wake channel to the consumers of the other
// processes.
func (g *group) release(ctx context.Context, d Delivery) {
	q := g.q
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	now := strconv.FormatInt(g.q.nowMs(), 10)
	done, err := ackScript.Exec(rctx, q.c, []string{q.keys[d.shard]}, []string{d.TaskID, d.receipt, now}).AsInt64()
	if err == nil && done == 1 {
		err = q.c.Do(rctx, q.c.B().Publish().Channel(q.wakes[d.shard]).Message(now).Build()).Error()
	}
	if err != nil {
		q.o.Logger.Warn("queue release of a handed-back message failed; it is delivered again when its receipt runs out", "task", d.TaskID, "err", err)
	}
}
