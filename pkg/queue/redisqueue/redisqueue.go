// Package redisqueue is the [driver.Queue] on Redis: the local default (on
// the embedded Redis) and the queue of self-hosted worker processes, which
// consume it with [Queue.Consume]. It needs nothing but the rueidis client
// the task store already uses.
//
// [driver.Queue]: https://pkg.go.dev/github.com/mcptasks/mcptasks/pkg/tasks/driver#Queue
package redisqueue

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/pkg/queue"
)

// Options configures a Redis queue. The zero value is a sane default.
type Options struct {
	// Prefix names the queue's keys when Key is empty (default
	// "mcptasks:"): with one shard the queue is the sorted set
	// Prefix+"{queue}", with Shards n > 1 shard k is Prefix+"queue{"+tag+"}"
	// where tag is slots.Tags(n)[k], a hash tag whose Redis Cluster slot
	// lies in the range of the tasks of that shard (see [slots.ShardOf]). It
	// must not contain '{' or '}'.
	Prefix string
	// Key, with one shard, is the queue's sorted set itself, instead of
	// Prefix+"{queue}". It cannot be combined with Shards > 1.
	Key string
	// Shards is how many sorted sets the queue is spread over (default 1).
	// A task's message lives in shard slots.ShardOf(taskID, Shards). On a
	// Redis Cluster, shards put the queue's load on every master instead of
	// one; one shard keeps the single key of earlier versions, so a
	// deployment keeps its waiting messages. Every process of a deployment
	// must use the same count: a consumer reads only its own shards.
	Shards int
	// Visibility is how long a received message stays hidden before it is
	// delivered again if not acknowledged: a crashed consumer's messages
	// come back after it. Set it above the worker's maximum duration
	// (default 2m).
	Visibility time.Duration
	// Poll is the longest the consumers of a process go without looking at
	// a shard (default DefaultPoll). It is only a safety net: every
	// enqueue publishes its due time on the shard's wake channel (the
	// shard's key + ":wake"), which the consumers of each process receive
	// on one subscription; and each receive tells the consumers when the
	// shard's earliest message falls due (a delayed message, or one whose
	// consumer died), so they look again then. Idle consumers thus cost a
	// process about Shards commands per Poll, whatever their number.
	Poll time.Duration
	// KeyTTL is the expiry refreshed on a shard's key at every enqueue
	// (default 8 days).
	KeyTTL time.Duration
	// Logger for consumer errors; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock that due times and receipts are read on (default
	// time.Now). Every process of a deployment, and the store that
	// enqueues through the queue, must use the same clock: a test clock
	// (pkg/platform/local/localtest) moves all of them at once. After a
	// clock jumps forward, [Queue.Wake] has the consumers look at once.
	Now func() time.Time
}

// Queue is a delayed, at-least-once queue in Redis sorted sets (one per
// shard, see Options.Shards): the member is the task id (the dedup key),
// the score the time it is due, in Unix milliseconds. A receive moves the
// member's score forward by the visibility timeout (a crashed consumer's
// message comes back after it) and returns that score as the receipt;
// receipts, and only they, end in ".5", so a score says whether its
// message is being handled. An enqueue that arrives while the message is
// being handled is never lost: it replaces the receipt with its own time,
// so Ack, seeing another score, keeps the message. Otherwise an enqueue
// only ever makes a waiting message due earlier.
//
// A worker that holds a task under a renewed lease keeps its message
// hidden until the lease's end (see [LuaHold] and [Queue.Defer]): the
// receipt moves with the lease, so the message comes back when the lease
// runs out if the worker dies, not a visibility timeout later.
//
// A store on the same Redis may enqueue in its own scripts, in the same
// atomic write as the transition that makes a task runnable (see
// [LuaEnqueue], [Queue.KeysFor] and redisstore.Options.Queue); the handler
// then reports the delivery settled and Consume sends no acknowledgement.
// That write may also take the consumer's next message (see [HandBack]),
// which Consume then handles without a receive.
type Queue struct {
	c rueidis.Client
	o Options
	// keys and wakes are each shard's sorted set and wake channel.
	keys, wakes []string
	// cursor is where Receive starts looking among the shards.
	cursor atomic.Uint32
	// misuse is why this queue cannot run, if it cannot (an enqueue or a
	// receive then answers it instead of sending a command).
	misuse error
	// offers are the HandBack offers of the consumers handling a message
	// now, by task id (see TakeHandBack).
	offers sync.Map
}

// New returns a queue on c, which the caller owns and closes.
func New(c rueidis.Client, opts *Options) *Queue {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = "mcptasks:"
	}
	o.Shards = min(max(o.Shards, 1), slots.Count)
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
	if o.Now == nil {
		o.Now = time.Now
	}
	q := &Queue{c: c, o: o}
	switch {
	case o.Shards == 1:
		if o.Key == "" {
			o.Key = o.Prefix + "{queue}"
			q.o.Key = o.Key
		}
		q.keys = []string{o.Key}
	case o.Key != "":
		q.misuse = fmt.Errorf("queue: Key %q names a single queue: with %d shards the keys derive from Prefix", o.Key, o.Shards)
	case strings.ContainsAny(o.Prefix, "{}"):
		q.misuse = fmt.Errorf("queue: prefix %q must not contain '{' or '}': each shard's keys carry a hash tag of their own", o.Prefix)
	default:
		for _, tag := range slots.Tags(o.Shards) {
			q.keys = append(q.keys, o.Prefix+"queue{"+tag+"}")
		}
	}
	for _, k := range q.keys {
		q.wakes = append(q.wakes, k+":wake")
	}
	if q.misuse != nil {
		// Keep KeysFor and Keys answering something harmless.
		q.keys, q.wakes = []string{o.Prefix + "{queue}"}, []string{o.Prefix + "{queue}:wake"}
	}
	return q
}

// DefaultPoll is Options.Poll's default: idle consumers cost a process
// about one Redis command per shard a minute (metered Redis services bill
// every command), without delaying a message that was announced (see
// Options.Poll). A missed announcement, the only thing the poll guards
// against, is rare: a lost subscription is renewed, and each renewal looks
// at every shard; and a deployment's sweeper enqueues again, announcing
// it, any task whose message went unhandled.
const DefaultPoll = time.Minute

// errorBackoff bounds the wait after a failed command, so that a consumer
// notices a Redis that came back within a second.
const errorBackoff = time.Second

func (q *Queue) ttl() string { return strconv.FormatInt(q.o.KeyTTL.Milliseconds(), 10) }

// LuaEnqueue defines the Lua function enqueue(q, w, id, at, ttl, quiet)
// that every enqueue of a Queue runs, for stores that enqueue inside their
// own scripts: q is the sorted set of the task's shard and w its wake
// channel (see [Queue.KeysFor]), at the due time in Unix milliseconds, ttl
// the key expiry in milliseconds ([Queue.KeyTTL]). Unless quiet is true it
// publishes at on w, which wakes the idle consumers of every process at
// once (or makes them look when at comes); quiet suits an enqueue by the
// consumer that handles the message (a worker's commit), which receives
// again right after. w is a pub/sub channel, not a key: a script may take
// it from ARGV (declaring it among KEYS, as earlier versions did with a
// wake list, is harmless on a standalone server). A script must declare q
// among its KEYS, so it runs only where q shares a node with its other keys
// (a standalone Redis, or, with shards, a Redis Cluster whose masters own
// whole shards: q then shares the master, but not the slot, of the task's
// keys, which a script still cannot combine).
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
  if not quiet then redis.call('PUBLISH', w, at) end
end
`

// enqueueScript: KEYS q; ARGV id at ttl wake.
var enqueueScript = rueidis.NewLuaScript(LuaEnqueue + `
enqueue(KEYS[1], ARGV[4], ARGV[1], ARGV[2], ARGV[3], false)
return 1
`)

// LuaHold defines the Lua function hold(q, w, id, at, ttl) that
// [Queue.Defer] runs, and that a store's scripts run when a worker claims
// a task or renews its lease (redisstore with Options.Queue): it makes the
// task's message a receipt that runs out at at (Unix ms), as if a
// consumer had received it with that visibility: the message is being
// handled and is delivered again at at, unless the handler settles it
// first (an enqueue replaces a receipt, see [LuaEnqueue]; an Ack or a
// Retry with the receipt the consumer was given finds another score and
// leaves the message). It adds the message if there is none (refreshing
// the key's expiry, ttl ms). When that makes the message due earlier than
// it was, or adds it, it publishes at on w, so that the idle consumers of
// every process look at the shard then; moving it later publishes nothing,
// since a consumer that knew the earlier time looks then and learns the
// later one from its receive's reply. Arguments as for enqueue.
const LuaHold = `
local function hold(q, w, id, at, ttl)
  local cur = redis.call('ZSCORE', q, id)
  redis.call('ZADD', q, string.format('%d.5', at), id)
  if not cur then redis.call('PEXPIRE', q, ttl) end
  if not cur or tonumber(cur) > tonumber(at) then redis.call('PUBLISH', w, at) end
end
`

// holdScript: KEYS q; ARGV id at ttl wake.
var holdScript = rueidis.NewLuaScriptRetryable(LuaHold + `
hold(KEYS[1], ARGV[4], ARGV[1], ARGV[2], ARGV[3])
return 1
`)

// LuaReceive defines the Lua function receive(q, now, receipt) that every
// receive of a Queue runs, and that a store's script runs to hand back the
// next message of a shard (see [HandBack]): it takes the earliest message
// of the sorted set q if it is due at now (Unix ms), hiding it until the
// receipt (see [HandBack.Args]), and returns {id, receipt, the next
// earliest score or false}, or {false, the earliest score or false} when
// nothing is due. A message being handled holds a receipt, a time after
// now, so it is never taken twice.
const LuaReceive = `
local function receive(q, now, receipt)
  local n = redis.call('ZRANGE', q, 0, 1, 'WITHSCORES')
  if #n == 0 then return {false, false} end
  if tonumber(n[2]) > tonumber(now) then return {false, n[2]} end
  redis.call('ZADD', q, receipt, n[1])
  return {n[1], receipt, n[4] or false}
end
`

// receiveScript: KEYS q; ARGV now receipt (see LuaReceive).
var receiveScript = rueidis.NewLuaScript(LuaReceive + `
return receive(KEYS[1], ARGV[1], ARGV[2])
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

// Keys returns the sorted set and the wake channel of the queue's first
// shard: with one shard (the default), the queue's. A store that enqueues
// in its own scripts (see [LuaEnqueue]) into a sharded queue uses
// [Queue.KeysFor].
func (q *Queue) Keys() (queue, wake string) { return q.keys[0], q.wakes[0] }

// KeysFor returns the sorted set and the wake channel of the shard that
// holds taskID's message, for a store that enqueues in its own scripts
// (see [LuaEnqueue]).
func (q *Queue) KeysFor(taskID string) (queue, wake string) {
	k := q.shardOf(taskID)
	return q.keys[k], q.wakes[k]
}

// Shards is the number of shards the queue is spread over.
func (q *Queue) Shards() int { return len(q.keys) }

func (q *Queue) shardOf(taskID string) int { return slots.ShardOf(taskID, len(q.keys)) }

// KeyTTL is the expiry an enqueue refreshes on the queue's keys.
func (q *Queue) KeyTTL() time.Duration { return q.o.KeyTTL }

// Enqueue implements driver.Queue.
func (q *Queue) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	if q.misuse != nil {
		return q.misuse
	}
	at := notBefore.UnixMilli()
	if notBefore.IsZero() {
		at = q.nowMs()
	}
	key, wake := q.KeysFor(taskID)
	err := enqueueScript.Exec(ctx, q.c, []string{key}, []string{taskID, strconv.FormatInt(at, 10), q.ttl(), wake}).Error()
	if err != nil {
		return fmt.Errorf("queue: enqueue %s: %w", taskID, err)
	}
	return nil
}

// Wake tells the consumers of every process (see [Queue.Consume]) that
// messages may be due now on every shard, as an enqueue does for its own:
// they look at once instead of at the times they learnt. A test whose
// clock (Options.Now) jumps forward calls it after the jump.
func (q *Queue) Wake(ctx context.Context) error {
	if q.misuse != nil {
		return q.misuse
	}
	now := strconv.FormatInt(q.nowMs(), 10)
	cmds := make(rueidis.Commands, len(q.wakes))
	for i, w := range q.wakes {
		cmds[i] = q.c.B().Publish().Channel(w).Message(now).Build()
	}
	for _, r := range q.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("queue: wake: %w", err)
		}
	}
	return nil
}

// Defer is the method of a queue that moves a task's message later (see driver.Queue): it makes taskID's message a receipt
// that runs out at at (see [LuaHold]), later or earlier than the message
// was due, or adds one. A worker whose store does not dispatch defers its
// task's message to the end of each renewed lease: the message then comes
// back when the lease runs out if the worker dies. It is idempotent, so
// rueidis may retry it.
func (q *Queue) Defer(ctx context.Context, taskID string, at time.Time) error {
	if q.misuse != nil {
		return q.misuse
	}
	key, wake := q.KeysFor(taskID)
	err := holdScript.Exec(ctx, q.c, []string{key}, []string{taskID, strconv.FormatInt(at.UnixMilli(), 10), q.ttl(), wake}).Error()
	if err != nil {
		return fmt.Errorf("queue: defer %s: %w", taskID, err)
	}
	return nil
}

// HonoursDeadline implements driver.DeadlineHonourer: Enqueue returns soon
// after its context's deadline, since rueidis sets the connection's
// deadline from the context.
func (q *Queue) HonoursDeadline() bool { return true }

// MaxDelay implements driver.Queue: a sorted set holds any delay.
func (q *Queue) MaxDelay() time.Duration { return 0 }

// Delivery is one received message.
type Delivery struct {
	TaskID  string
	receipt string
	shard   int
}

// never is the due time of a shard known to hold no message.
const never = math.MaxInt64

// receipt is the receipt of a message received at now (Unix ms): the
// time it shows again, marked ".5".
func (q *Queue) receipt(now int64) string {
	return strconv.FormatInt(now+q.o.Visibility.Milliseconds(), 10) + ".5"
}

// receiveShard takes the earliest due message of shard k, if any, at now
// (Unix ms). next is when the shard's next message (the earliest one when
// none was taken) is due, or never.
func (q *Queue) receiveShard(ctx context.Context, k int, now int64) (d Delivery, ok bool, next int64, err error) {
	receipt := q.receipt(now)
	arr, err := receiveScript.Exec(ctx, q.c, []string{q.keys[k]},
		[]string{strconv.FormatInt(now, 10), receipt}).ToArray()
	if err != nil {
		return d, false, never, fmt.Errorf("queue: receive: %w", err)
	}
	d, ok, next = received(arr, receipt, k)
	return d, ok, next, nil
}

// received decodes the reply of receive() (see LuaReceive) on shard k.
func received(arr []rueidis.RedisMessage, receipt string, k int) (d Delivery, ok bool, next int64) {
	next, i := never, 1
	id, err := arr[0].ToString()
	if err == nil {
		d, ok, i = Delivery{TaskID: id, receipt: receipt, shard: k}, true, 2
	}
	if len(arr) > i {
		if f, err := arr[i].AsFloat64(); err == nil {
			next = int64(f)
		}
	}
	return d, ok, next
}

// Receive returns the next due message of any shard, or ok=false and how
// long until the next one is due (capped at the poll interval) when none
// is. With several shards, successive calls start at successive shards,
// and a call may send one command per shard.
func (q *Queue) Receive(ctx context.Context) (d Delivery, ok bool, wait time.Duration, err error) {
	if q.misuse != nil {
		return d, false, q.o.Poll, q.misuse
	}
	n := len(q.keys)
	start := int(q.cursor.Add(1) % uint32(n))
	earliest := int64(never)
	for i := range n {
		now := q.nowMs()
		d, ok, next, err := q.receiveShard(ctx, (start+i)%n, now)
		if err != nil || ok {
			return d, ok, 0, err
		}
		earliest = min(earliest, next)
	}
	wait = q.o.Poll
	if earliest != never {
		wait = min(wait, max(time.UnixMilli(earliest).Sub(q.o.Now()), time.Millisecond))
	}
	return d, false, wait, nil
}

// Ack removes a handled message (unless it was enqueued again meanwhile).
func (q *Queue) Ack(ctx context.Context, d Delivery) error {
	if err := ackScript.Exec(ctx, q.c, []string{q.keys[d.shard]}, []string{d.TaskID, d.receipt}).Error(); err != nil {
		return fmt.Errorf("queue: ack %s: %w", d.TaskID, err)
	}
	return nil
}

// Retry makes a message due again at at (or earlier, if it was enqueued
// again meanwhile).
func (q *Queue) Retry(ctx context.Context, d Delivery, at time.Time) error {
	err := ackScript.Exec(ctx, q.c, []string{q.keys[d.shard]},
		[]string{d.TaskID, d.receipt, strconv.FormatInt(at.UnixMilli(), 10)}).Error()
	if err != nil {
		return fmt.Errorf("queue: retry %s: %w", d.TaskID, err)
	}
	return nil
}

// Settle says what a handler's own write did with the message it was
// given (see queue.Settle): a store that enqueues through this queue in
// its scripts (see [LuaEnqueue]) makes a task's message due again, or
// removes it, in the same write as the task's transition. After Removed,
// if nothing else was due when the message was received, the consumer
// goes idle at once (an enqueue by anyone else wakes it).
type Settle = queue.Settle

// The Settle values (see queue.Settle).
const (
	Ack      = queue.Ack
	Requeued = queue.Requeued
	Removed  = queue.Removed
)

// SettleOf is the Settle of a handler whose write settled the message
// (settled), and removed it if the task ended (ended).
func SettleOf(settled, ended bool) Settle { return queue.SettleOf(settled, ended) }

// Handler processes one task id (see queue.Handler).
type Handler = queue.Handler
