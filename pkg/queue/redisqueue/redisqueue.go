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
	"sync"
	"time"

	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/redis/rueidis"
)

// Options configures a Redis queue. The zero value is a sane default.
type Options struct {
	// Key is the sorted set holding the queue (default "mcptasks:{queue}").
	// A hash Key+":meta" holds the receipts of messages being handled; give
	// Key a hash tag ({...}) so that both land in one Redis Cluster slot.
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
// member is the task id (the dedup key), the score the time it is due. A
// receive moves the member's score forward by the visibility timeout (a
// crashed consumer's message comes back after it) and returns that score as
// the receipt, also kept in a hash beside the set. An enqueue that arrives
// while the message is being handled is never lost: an earlier time moves
// the score (so Ack, seeing another score, keeps the message), a later one
// is remembered in the hash and Ack makes the message due at that time
// instead of removing it.
type Queue struct {
	c    rueidis.Client
	o    Options
	enq  *rueidis.Lua
	recv *rueidis.Lua
	ack  *rueidis.Lua
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
	return &Queue{c: c, o: o, enq: enqueueScript, recv: receiveScript, ack: ackScript}
}

// DefaultPoll is Options.Poll's default: idle consumers cost about two
// Redis commands every 30 seconds each (metered Redis services bill every
// command), without delaying a message (see Options.Poll).
const DefaultPoll = 30 * time.Second

// errorBackoff bounds the wait after a failed blocking wait, so that a
// consumer notices a Redis that came back within a second.
const errorBackoff = time.Second

func (q *Queue) keys() []string { return []string{q.o.Key, q.o.Key + ":meta"} }

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

// enqueueScript: KEYS q meta wake; ARGV id at ttlMs [traceparent].
// Besides the message, it pushes a token on the wake list (bounded) for an
// idle consumer, and keeps the enqueuer's trace context, if any, in meta
// ('t:' id): the latest enqueue's is the one delivered.
var enqueueScript = rueidis.NewLuaScript(`
if ARGV[4] and ARGV[4] ~= '' then redis.call('HSET', KEYS[2], 't:' .. ARGV[1], ARGV[4]) end
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if cur and redis.call('HEXISTS', KEYS[2], 'r:' .. ARGV[1]) == 1 and tonumber(ARGV[2]) >= tonumber(cur) then
  local a = redis.call('HGET', KEYS[2], 'a:' .. ARGV[1])
  if not a or tonumber(ARGV[2]) < tonumber(a) then redis.call('HSET', KEYS[2], 'a:' .. ARGV[1], ARGV[2]) end
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
else
  redis.call('ZADD', KEYS[1], 'LT', ARGV[2], ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('LPUSH', KEYS[3], '1')
redis.call('LTRIM', KEYS[3], 0, 63)
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return 1
`)

// receiveScript: KEYS q meta; ARGV now hideUntil ttlMs. Returns {id,
// receipt, traceparent|false} or {false, nextDueScore|false}.
var receiveScript = rueidis.NewLuaScript(`
local r = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, 1)
if #r == 0 then
  local n = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {false, n[2] or false}
end
redis.call('ZADD', KEYS[1], ARGV[2], r[1])
redis.call('HSET', KEYS[2], 'r:' .. r[1], ARGV[2])
redis.call('HDEL', KEYS[2], 'a:' .. r[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {r[1], ARGV[2], redis.call('HGET', KEYS[2], 't:' .. r[1])}
`)

// ackScript: KEYS q meta; ARGV id receipt [retryAt]. If id is still the
// delivery with this receipt, removes it, or makes it due again at the
// earlier of retryAt and an enqueue that arrived meanwhile.
var ackScript = rueidis.NewLuaScript(`
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if redis.call('HGET', KEYS[2], 'r:' .. ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[2], 'r:' .. ARGV[1]) end
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
local again = redis.call('HGET', KEYS[2], 'a:' .. ARGV[1])
redis.call('HDEL', KEYS[2], 'a:' .. ARGV[1])
if ARGV[3] and (not again or tonumber(ARGV[3]) < tonumber(again)) then again = ARGV[3] end
if again then redis.call('ZADD', KEYS[1], again, ARGV[1]) else redis.call('ZREM', KEYS[1], ARGV[1]); redis.call('HDEL', KEYS[2], 't:' .. ARGV[1]) end
return 1
`)

// Enqueue implements tasks.Queue.
func (q *Queue) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	at := notBefore.UnixMilli()
	if notBefore.IsZero() {
		at = time.Now().UnixMilli()
	}
	args := []string{taskID, strconv.FormatInt(at, 10), q.ttl()}
	if tp := queue.TraceParent(ctx); tp != "" {
		args = append(args, tp)
	}
	err := q.enq.Exec(ctx, q.c, []string{q.o.Key, q.o.Key + ":meta", q.wakeKey()}, args).Error()
	if err != nil {
		return fmt.Errorf("queue: enqueue %s: %w", taskID, err)
	}
	return nil
}

// MaxDelay implements tasks.Queue: a sorted set holds any delay.
func (q *Queue) MaxDelay() time.Duration { return 0 }

// Delivery is one received message.
type Delivery struct {
	TaskID string
	// TraceParent is the trace context of the enqueue the message carries
	// ("" when its enqueuer did not trace; see queue.TraceParent).
	TraceParent string
	receipt     string
}

// Receive returns the next due message, or ok=false and how long until the
// next one is due (capped at the poll interval) when none is.
func (q *Queue) Receive(ctx context.Context) (d Delivery, ok bool, wait time.Duration, err error) {
	now := time.Now()
	hide := now.Add(q.o.Visibility).UnixMilli()
	arr, err := q.recv.Exec(ctx, q.c, q.keys(),
		[]string{strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(hide, 10), q.ttl()}).ToArray()
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
	receipt, _ := arr[1].ToString()
	var tp string
	if len(arr) > 2 {
		tp, _ = arr[2].ToString()
	}
	return Delivery{TaskID: id, TraceParent: tp, receipt: receipt}, true, 0, nil
}

// Ack removes a handled message (unless it was enqueued again meanwhile).
func (q *Queue) Ack(ctx context.Context, d Delivery) error {
	if err := q.ack.Exec(ctx, q.c, q.keys(), []string{d.TaskID, d.receipt}).Error(); err != nil {
		return fmt.Errorf("queue: ack %s: %w", d.TaskID, err)
	}
	return nil
}

// Retry makes a message due again at at (or earlier, if it was enqueued
// again meanwhile).
func (q *Queue) Retry(ctx context.Context, d Delivery, at time.Time) error {
	err := q.ack.Exec(ctx, q.c, q.keys(),
		[]string{d.TaskID, d.receipt, strconv.FormatInt(at.UnixMilli(), 10)}).Error()
	if err != nil {
		return fmt.Errorf("queue: retry %s: %w", d.TaskID, err)
	}
	return nil
}

// Handler processes one task id. A nil error acknowledges the message; an
// error makes it due again after a short backoff.
type Handler func(ctx context.Context, taskID string) error

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
		if err := h(queue.WithTraceParent(hctx, d.TraceParent), d.TaskID); err != nil {
			q.o.Logger.Warn("task handler failed; message will be redelivered", "task", d.TaskID, "err", err)
			if err := q.Retry(hctx, d, time.Now().Add(time.Second)); err != nil {
				q.o.Logger.Warn("queue retry failed", "err", err)
			}
			continue
		}
		if err := q.Ack(hctx, d); err != nil {
			q.o.Logger.Warn("queue ack failed; message will be redelivered", "err", err)
		}
	}
}
