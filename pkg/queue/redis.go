package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// RedisOptions configures a Redis queue. The zero value is a sane default.
type RedisOptions struct {
	// Key is the sorted set holding the queue (default "mcptasks:queue").
	Key string
	// Visibility is how long a received message stays hidden before it is
	// delivered again if not acknowledged: a crashed consumer's messages
	// come back after it. Set it above the worker's maximum duration
	// (default 2m).
	Visibility time.Duration
	// Poll is the longest an idle consumer waits before looking again
	// (default 50ms).
	Poll time.Duration
	// KeyTTL is the expiry refreshed on the queue key at every enqueue
	// (default 8 days).
	KeyTTL time.Duration
	// Logger for consumer errors; nil means slog.Default().
	Logger *slog.Logger
}

// Redis is a delayed, at-least-once queue in one Redis sorted set: the
// member is the task id (the dedup key), the score the time it is due. A
// receive moves the member's score forward by the visibility timeout and
// returns that score as the receipt; Ack removes the member only if the
// receipt still matches, so an enqueue that arrived while the message was
// being handled is not lost.
type Redis struct {
	c    rueidis.Client
	o    RedisOptions
	recv *rueidis.Lua
	ack  *rueidis.Lua
}

var _ Queue = (*Redis)(nil)

// NewRedis returns a queue on c, which the caller owns and closes.
func NewRedis(c rueidis.Client, opts *RedisOptions) *Redis {
	var o RedisOptions
	if opts != nil {
		o = *opts
	}
	if o.Key == "" {
		o.Key = "mcptasks:queue"
	}
	if o.Visibility <= 0 {
		o.Visibility = 2 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = 50 * time.Millisecond
	}
	if o.KeyTTL <= 0 {
		o.KeyTTL = 8 * 24 * time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Redis{c: c, o: o, recv: receiveScript, ack: ackScript}
}

// receiveScript: KEYS q; ARGV now hideUntil. Returns {id, receipt} or
// {false, nextDueScore|false}.
var receiveScript = rueidis.NewLuaScript(`
local r = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, 1)
if #r == 0 then
  local n = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {false, n[2] or false}
end
redis.call('ZADD', KEYS[1], ARGV[2], r[1])
return {r[1], ARGV[2]}
`)

// ackScript: KEYS q; ARGV id receipt [retryAt]. Removes id if its score
// still equals the receipt, or with retryAt reschedules it.
var ackScript = rueidis.NewLuaScript(`
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) ~= tonumber(ARGV[2]) then return 0 end
if ARGV[3] then redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1]) else redis.call('ZREM', KEYS[1], ARGV[1]) end
return 1
`)

// Enqueue implements Queue.
func (q *Redis) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	at := notBefore.UnixMilli()
	if notBefore.IsZero() {
		at = time.Now().UnixMilli()
	}
	res := q.c.DoMulti(ctx,
		q.c.B().Zadd().Key(q.o.Key).Lt().ScoreMember().ScoreMember(float64(at), taskID).Build(),
		q.c.B().Pexpire().Key(q.o.Key).Milliseconds(q.o.KeyTTL.Milliseconds()).Build())
	for _, r := range res {
		if err := r.Error(); err != nil {
			return fmt.Errorf("queue: enqueue %s: %w", taskID, err)
		}
	}
	return nil
}

// MaxDelay implements Queue: a sorted set holds any delay.
func (q *Redis) MaxDelay() time.Duration { return 0 }

// Delivery is one received message.
type Delivery struct {
	TaskID  string
	receipt string
}

// Receive returns the next due message, or ok=false and how long until the
// next one is due (capped at the poll interval) when none is.
func (q *Redis) Receive(ctx context.Context) (d Delivery, ok bool, wait time.Duration, err error) {
	now := time.Now()
	hide := now.Add(q.o.Visibility).UnixMilli()
	arr, err := q.recv.Exec(ctx, q.c, []string{q.o.Key},
		[]string{strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(hide, 10)}).ToArray()
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
	return Delivery{TaskID: id, receipt: receipt}, true, 0, nil
}

// Ack removes a handled message (unless it was enqueued again meanwhile).
func (q *Redis) Ack(ctx context.Context, d Delivery) error {
	if err := q.ack.Exec(ctx, q.c, []string{q.o.Key}, []string{d.TaskID, d.receipt}).Error(); err != nil {
		return fmt.Errorf("queue: ack %s: %w", d.TaskID, err)
	}
	return nil
}

// Retry makes a message due again at at (unless it was enqueued again
// meanwhile, which already made it due).
func (q *Redis) Retry(ctx context.Context, d Delivery, at time.Time) error {
	err := q.ack.Exec(ctx, q.c, []string{q.o.Key},
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
func (q *Redis) Consume(ctx context.Context, n int, h Handler) {
	var wg sync.WaitGroup
	for range max(n, 1) {
		wg.Go(func() { q.consume(ctx, h) })
	}
	wg.Wait()
}

func (q *Redis) consume(ctx context.Context, h Handler) {
	for ctx.Err() == nil {
		d, ok, wait, err := q.Receive(ctx)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				q.o.Logger.Warn("queue receive failed", "err", err)
			}
		}
		if !ok {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		// Handling is not tied to ctx: a shutdown lets the current message
		// finish (the worker's own budget bounds it).
		hctx := context.WithoutCancel(ctx)
		if err := h(hctx, d.TaskID); err != nil {
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
