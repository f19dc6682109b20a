// Package redisqueue is the [tasks.Queue] on Redis: the local default (on
// the embedded Redis) and the queue of self-hosted worker processes, which
// consume it with [Queue.Consume]. It needs nothing but the rueidis client
// the task store already uses.
//
// [tasks.Queue]: https://pkg.go.dev/github.com/mcptasks/mcptasks/pkg/tasks#Queue
package redisqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Options configures a Redis queue. The zero value is a sane default.
type Options struct {
	// Key is the sorted set holding the queue (default "mcptasks:{queue}").
	// A list Key+":wake" wakes idle consumers; give Key a hash tag ({...})
	// so that both land in one Redis Cluster slot.
	Key string
	// Visibility is how long a received message stays hidden before it is
	// delivered again if not acknowledged: a crashed consumer's messages
	// come back after it. Set it above the worker's maximum duration
	// (default 2m).
	Visibility time.Duration
	// Poll is the longest an idle consumer waits before looking again
	// (default DefaultPoll). It is only a safety net: an idle consumer
	// blocks on a short list Key+":wake" that every enqueue pushes a token
	// on, so a new message is taken at once, and it looks again when the
	// earliest waiting message falls due (a delayed message, or one whose
	// consumer died). An idle consumer thus costs two commands per Poll.
	Poll time.Duration
	// KeyTTL is the expiry refreshed on the queue key at every enqueue
	// (default 8 days).
	KeyTTL time.Duration
	// Logger for consumer errors; nil means slog.Default().
	Logger *slog.Logger
}

// Queue is a delayed, at-least-once queue in one Redis sorted set: the
// member is the task id (the dedup key), the score the time it is due, in
// Unix milliseconds. A receive moves the member's score forward by the
// visibility timeout (a crashed consumer's message comes back after it)
// and returns that score as the receipt; receipts, and only they, end in
// ".5", so a score says whether its message is being handled. An enqueue
// that arrives while the message is being handled is never lost: it
// replaces the receipt with its own time, so Ack, seeing another score,
// keeps the message. Otherwise an enqueue only ever makes a waiting
// message due earlier.
//
// A store on the same Redis may enqueue in its own scripts, in the same
// atomic write as the transition that makes a task runnable (see
// [LuaEnqueue] and redisstore.Options.Queue); the handler then reports the
// delivery settled and Consume sends no acknowledgement.
type Queue struct {
	c    rueidis.Client
	o    Options
	enq  *rueidis.Lua
	recv *rueidis.Lua
	ack  *rueidis.Lua
	// misuse is why this queue cannot run on its client, if it cannot (an
	// enqueue then answers it instead of sending a command).
	misuse error
}

// New returns a queue on c, which the caller owns and closes.
func New(c rueidis.Client, opts *Options) *Queue {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Key == "" {
		o.Key = "mcptasks:{queue}"
	}
	if o.Visibility <= 0 {
		o.Visibility = 2 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.KeyTTL <= 0 {
		o.KeyTTL = 8 * 24 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	q := &Queue{c: c, o: o, enq: enqueueScript, recv: receiveScript, ack: ackScript}
	if c.Mode() == rueidis.ClientModeCluster && !hashTagged(o.Key) {
		q.misuse = fmt.Errorf("queue: key %q has no hash tag ({...}): on a Redis Cluster the queue and its wake list %q would live in different slots", o.Key, q.wakeKey())
	}
	return q
}

// hashTagged reports whether key holds a Redis Cluster hash tag: a '{'
// followed, after at least one character, by a '}'.
func hashTagged(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	closing := strings.IndexByte(key[open+1:], '}')
	return closing > 0
}

// DefaultPoll is Options.Poll's default: idle consumers cost about two
// Redis commands every 30 seconds each (metered Redis services bill every
// command), without delaying a message (see Options.Poll).
const DefaultPoll = 30 * time.Second

// errorBackoff bounds the wait after a failed blocking wait, so that a
// consumer notices a Redis that came back within a second.
const errorBackoff = time.Second

func (q *Queue) wakeKey() string { return q.o.Key + ":wake" }

// idle waits up to d for an enqueue (a token on the wake list), or until
// ctx ends. It reports false when ctx ended.
func (q *Queue) idle(ctx context.Context, d time.Duration) bool {
	// BLPOP blocks on a dedicated connection; its timeout has a resolution
	// of a millisecond.
	secs := max(d, time.Millisecond).Seconds()
	err := q.c.Do(ctx, q.c.B().Blpop().Key(q.wakeKey()).Timeout(secs).Build()).Error()
	if err == nil || rueidis.IsRedisNil(err) {
		return ctx.Err() == nil
	}
	if ctx.Err() != nil {
		return false
	}
	// Redis unreachable: back off on a timer rather than spin.
	t := time.NewTimer(min(d, errorBackoff))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (q *Queue) ttl() string { return strconv.FormatInt(q.o.KeyTTL.Milliseconds(), 10) }

// enqueueScript: KEYS q meta wake; ARGV id at ttlMs. Besides the message,
// it pushes a token on the wake list (bounded) for an idle consumer.
// LuaEnqueue defines the Lua function enqueue(q, w, id, at, ttl, quiet)
// that every enqueue of a Queue runs, for stores that enqueue inside their
// own scripts: q and w are the queue's Key and Key+":wake" (see
// [Queue.Keys]), at the due time in Unix milliseconds, ttl the key expiry
// in milliseconds ([Queue.KeyTTL]). Unless quiet is true it pushes a token
// that wakes an idle consumer; quiet suits an enqueue by the consumer that
// handles the message (a worker's commit), which receives again right
// after. Such a script must declare q and w among its KEYS, so it runs only
// where they share a node with its other keys (a standalone Redis, not a
// Cluster).
const LuaEnqueue = `
local function enqueue(q, w, id, at, ttl, quiet)
  if redis.call('ZADD', q, 'LT', at, id) == 1 then
    redis.call('PEXPIRE', q, ttl)
  else
    -- Present: LT made it due earlier, or kept it. A receipt (the message
    -- is being handled) gives way to the new time, so Ack keeps it.
    local cur = redis.call('ZSCORE', q, id)
    if tonumber(cur) % 1 ~= 0 then redis.call('ZADD', q, at, id) end
  end
  if quiet then return end
  local n = redis.call('LPUSH', w, '1')
  if n == 1 then redis.call('PEXPIRE', w, ttl) elseif n > 64 then redis.call('LTRIM', w, 0, 63) end
end
`

// enqueueScript: KEYS q w; ARGV id at ttl.
var enqueueScript = rueidis.NewLuaScript(LuaEnqueue + `
enqueue(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], false)
return 1
`)

// receiveScript: KEYS q; ARGV now receipt. Takes the earliest message if
// it is due and hides it until the receipt; returns {id, receipt, the next
// earliest score or false}, or {false, the earliest score or false} when
// nothing is due.
var receiveScript = rueidis.NewLuaScript(`
local n = redis.call('ZRANGE', KEYS[1], 0, 1, 'WITHSCORES')
if #n == 0 then return {false, false} end
if tonumber(n[2]) > tonumber(ARGV[1]) then return {false, n[2]} end
redis.call('ZADD', KEYS[1], ARGV[2], n[1])
return {n[1], ARGV[2], n[4] or false}
`)

// ackScript: KEYS q; ARGV id receipt [at]. If the message still holds the
// receipt (no enqueue arrived meanwhile), removes it, or with at makes it
// due then. Returns 1 if it did.
var ackScript = rueidis.NewLuaScript(`
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) else redis.call('ZREM', KEYS[1], ARGV[1]) end
return 1
`)

// Keys returns the queue's sorted set and its wake list, for a store that
// enqueues in its own scripts (see [LuaEnqueue]).
func (q *Queue) Keys() (queue, wake string) { return q.o.Key, q.wakeKey() }

// KeyTTL is the expiry an enqueue refreshes on the queue's keys.
func (q *Queue) KeyTTL() time.Duration { return q.o.KeyTTL }

// Enqueue implements tasks.Queue.
func (q *Queue) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	if q.misuse != nil {
		return q.misuse
	}
	at := notBefore.UnixMilli()
	if notBefore.IsZero() {
		at = time.Now().UnixMilli()
	}
	err := q.enq.Exec(ctx, q.c, []string{q.o.Key, q.wakeKey()}, []string{taskID, strconv.FormatInt(at, 10), q.ttl()}).Error()
	if err != nil {
		return fmt.Errorf("queue: enqueue %s: %w", taskID, err)
	}
	return nil
}

// MaxDelay implements tasks.Queue: a sorted set holds any delay.
func (q *Queue) MaxDelay() time.Duration { return 0 }

// Delivery is one received message.
type Delivery struct {
	TaskID  string
	receipt string
	// next is when the next message was due when this one was received
	// (zero: there was none).
	next time.Time
}

// Receive returns the next due message, or ok=false and how long until the
// next one is due (capped at the poll interval) when none is.
func (q *Queue) Receive(ctx context.Context) (d Delivery, ok bool, wait time.Duration, err error) {
	now := time.Now()
	// The receipt: the time the message shows again, marked ".5".
	receipt := strconv.FormatInt(now.Add(q.o.Visibility).UnixMilli(), 10) + ".5"
	arr, err := q.recv.Exec(ctx, q.c, []string{q.o.Key},
		[]string{strconv.FormatInt(now.UnixMilli(), 10), receipt}).ToArray()
	if err != nil {
		return d, false, q.o.Poll, fmt.Errorf("queue: receive: %w", err)
	}
	id, err := arr[0].ToString()
	if err != nil {
		wait = q.o.Poll
		if next, err := arr[1].AsFloat64(); err == nil {
			wait = min(wait, max(time.Until(time.UnixMilli(int64(next))), time.Millisecond))
		}
		return d, false, wait, nil
	}
	d = Delivery{TaskID: id, receipt: receipt}
	if len(arr) > 2 {
		if next, err := arr[2].AsFloat64(); err == nil {
			d.next = time.UnixMilli(int64(next))
		}
	}
	return d, true, 0, nil
}

// Ack removes a handled message (unless it was enqueued again meanwhile).
func (q *Queue) Ack(ctx context.Context, d Delivery) error {
	if err := q.ack.Exec(ctx, q.c, []string{q.o.Key}, []string{d.TaskID, d.receipt}).Error(); err != nil {
		return fmt.Errorf("queue: ack %s: %w", d.TaskID, err)
	}
	return nil
}

// Retry makes a message due again at at (or earlier, if it was enqueued
// again meanwhile).
func (q *Queue) Retry(ctx context.Context, d Delivery, at time.Time) error {
	err := q.ack.Exec(ctx, q.c, []string{q.o.Key},
		[]string{d.TaskID, d.receipt, strconv.FormatInt(at.UnixMilli(), 10)}).Error()
	if err != nil {
		return fmt.Errorf("queue: retry %s: %w", d.TaskID, err)
	}
	return nil
}

// Settle says what a handler's own write did with the message it was
// given: a store that enqueues through this queue in its scripts (see
// [LuaEnqueue]) makes a task's message due again, or removes it, in the
// same write as the task's transition.
type Settle int

const (
	// Ack: the handler's write left the message alone; Consume
	// acknowledges it.
	Ack Settle = iota
	// Requeued: the handler's write made the message due again; no
	// acknowledgement is sent.
	Requeued
	// Removed: the handler's write removed the message; no
	// acknowledgement is sent, and if nothing else was due when the
	// message was received the consumer goes idle at once (an enqueue by
	// anyone else wakes it).
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

// Handler processes one task id. A nil error settles the message as the
// Settle says; an error makes it due again after a short backoff.
type Handler func(ctx context.Context, taskID string) (Settle, error)

// Consume runs n consumers until ctx ends, handing each due message to h.
func (q *Queue) Consume(ctx context.Context, n int, h Handler) {
	var wg sync.WaitGroup
	for range max(n, 1) {
		wg.Go(func() { q.consume(ctx, h) })
	}
	wg.Wait()
}

func (q *Queue) consume(ctx context.Context, h Handler) {
	for ctx.Err() == nil {
		d, ok, wait, err := q.Receive(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				q.o.Logger.Warn("queue receive failed", "err", err)
			}
		}
		if !ok {
			if !q.idle(ctx, wait) {
				return
			}
			continue
		}
		// Handling is not tied to ctx: a shutdown lets the current message
		// finish (the worker's own budget bounds it).
		hctx := context.WithoutCancel(ctx)
		settle, err := h(hctx, d.TaskID)
		if err != nil {
			q.o.Logger.Warn("task handler failed; message will be redelivered", "task", d.TaskID, "err", err)
			if err := q.Retry(hctx, d, time.Now().Add(time.Second)); err != nil {
				q.o.Logger.Warn("queue retry failed", "err", err)
			}
			continue
		}
		switch settle {
		case Requeued:
			continue
		case Removed:
			// Nothing else was due: skip the receive that would find
			// nothing (an enqueue since pushed a wake token).
			if now := time.Now(); d.next.IsZero() || d.next.After(now) {
				wait := q.o.Poll
				if !d.next.IsZero() {
					wait = min(wait, d.next.Sub(now))
				}
				if !q.idle(ctx, wait) {
					return
				}
			}
			continue
		}
		if err := q.Ack(hctx, d); err != nil {
			q.o.Logger.Warn("queue ack failed; message will be redelivered", "err", err)
		}
	}
}
