// Package redisstore implements [driver.Store] on Redis through rueidis.
//
// Layout: a task lives in keys that share the hash tag {id}, so all
// of them sit in one Cluster slot and every transition is one atomic
// server-side script over them:
//
//	<prefix>{<id>}    hash: the task record and its step journal, every value at most 64 bytes
//	<prefix>{<id>}:p  hash: input requests the parked task waits for (key -> request JSON), unless they are all in its journal (journal.go)
//	<prefix>{<id>}:o  hash: outstanding offers (key -> request JSON), in any live status
//	<prefix>{<id>}:j  list: a step journal past 3 KiB, one JSON entry per step (journal.go)
//	<prefix>{<id>}:r  hash: input responses received (key -> response JSON)
//	<prefix>{<id>}:x  string: the result of a completed task, the error of a failed one
//	<prefix>{<id>}:e  hash: the task's events and the waits for them (events.go)
//	<prefix>{<id>}:a  string: values of the creation longer than 1 KiB (spill.go)
//	<prefix>{<id>}:m  string: a status message longer than 64 bytes (spill.go)
//	<prefix>{<id>}:w:<digest>  string: the schema and secret of a signed callback's wait (events.go)
//	<prefix>wm:<day>.<digest>  string: a wait's schema, shared by the tasks expiring that day (events.go)
//
// and, outside any task's slot, the indexes: the due index and the queue
// (sorted sets, below), each principal's list {<prefix>list:<hash>} and the
// index of all tasks {<prefix>all} (streams of task ids: list.go,
// listall.go, streamindex.go).
//
// A task that makes no offers never has the :o key. A task in
// input_required shows both hashes as its InputRequests. The record
// keeps Redis's compact listpack encoding by holding no value longer than
// 64 bytes: longer owners, tools and arguments are cut into chunks, and
// the other long values live in :a, :m and :x (spill.go); the journal's
// entries are one stream cut into chunks (journal.go) until it passes
// 3 KiB, when it moves to :j.
//
// Only ids of the form driver.NewID issues (driver.ValidID) become keys: the
// store answers driver.ErrNotFound for any other id without a round trip,
// so no caller-chosen id can name a key that is not a task's (such as a
// queue sharing the prefix, "<prefix>{queue}").
//
// Every key of a task expires at the task's creation time plus its TTL
// (a shared wait schema at the end of the day its tasks expire). A sorted set
// per shard, the due index, (itself expiring) indexes the next time the
// sweeper must look at each live task, but for a task parked for input
// without a deadline: nothing is to be done for it until an answer
// resumes it (the update indexes it again, before it is dispatched) or it
// expires (its keys by themselves), so its park takes it out, and the
// index grows with the tasks that have a time (a sorted set member costs
// about 120 bytes). With Options.Queue, a wake further ahead than
// Options.WakeHorizon has no queue message: its entry is due the horizon
// before the wake, for the sweeper to enqueue it. The index is only a
// hint: the sweeper re-derives what to do from the task record. With one shard (the default)
// it is <prefix>due; with n shards (Options.Shards, for a Redis Cluster)
// shard k is <prefix>due{<tag>}, tag from slots.Tags(n), and a task is
// indexed in shard slots.ShardOf(id, n), which hashes to the task's own
// slot range: on a cluster laid out by redis-cli, the task's master. A
// create thus writes to one master only, and as the index entry is written
// before the task and removed after it ends, in one master's replication
// stream, a failover that loses a task's last transition loses the index
// change that followed it too: a task never looks ended, or gone, to the
// sweeper while its record says otherwise.
//
// A worker's claim stamps the task's lease end (field lease) and bumps its
// fencing generation (gen); RenewLease (driver.LeaseRenewer) moves the end
// while the generation holds, and a claim that finds an end that ran out
// without a release reports it (driver.Claim.Lost). With Options.Queue,
// each renewal also holds the task's queue message until the lease's new
// end in the same script (redisqueue.LuaHold), so that a worker that dies
// is replaced when its lease runs out without anything being sent for it;
// before the first renewal, the receipt of the delivery the claim answered
// does it, when the queue's visibility timeout is about the lease (as the
// bundle sets it).
//
// With Options.Wait, the transitions a client sees (create, update,
// cancel) and every commit of a worker wait until that many replicas have
// the write (Redis WAIT, pipelined after the script on its connection)
// before the store answers; a write the replicas do not acknowledge in
// time is answered ErrNotReplicated (a creation is undone first, best
// effort, so no task runs for a handle that was refused).
//
// When a creation carries a limit (driver.NewTask.MaxLive), a sorted set
// <prefix>live:<h> per principal (h: a hash of the principal) holds the ids
// of the principal's live tasks, scored by their expiry. It has its own
// Cluster slot, so it is never in a script with task keys: a creation first
// reserves a place in it (one atomic script: drop expired members, refuse
// when full, add), then creates the task; a terminal transition removes the
// id in the round trip that already drops it from the due index. A removal
// lost with a crashed process only keeps the place taken until a full set
// makes the next creation look up its members and drop those whose task
// ended; a reservation whose creation never happened keeps its place until
// its expiry. The set expires with its last member.
//
// A sorted set <prefix>list:<h> per principal indexes its tasks for
// driver.Lister (the 2025-11-25 tasks/list): see list.go. A sorted set
// <prefix>all (one per due-index shard) indexes every task for
// inspect.Lister (the operator's view), at one ZADD per creation, inside
// the create script: see listall.go.
package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a Store. The zero value is a sane default.
type Options struct {
	// Prefix is prepended to every key; empty means "mcptasks:". It must
	// not contain '{' or '}' (see CheckPrefix).
	Prefix string
	// EnqueueGrace is how long after a task was last handed to the queue
	// the sweeper assumes the message was lost and enqueues it again.
	// Zero means 30s.
	EnqueueGrace time.Duration
	// IndexTTL is the expiry refreshed on the due index at every write;
	// zero means 8 days (longer than any task TTL, see driver.MaxTTL).
	IndexTTL time.Duration
	// Queue, when set, is the Redis queue on the same standalone Redis
	// server that the tasks are dispatched to: the store enqueues a task
	// in the same atomic script as the transition that makes it runnable
	// (creation, a commit that releases it or parks it with a deadline, an
	// update that resumes it) and drops its message when it ends or
	// parks without a deadline, so a worker step costs one round trip
	// less and the caller enqueues nothing after those transitions (see
	// Store.Dispatches). A worker's commit that settles the message its
	// consumer of Queue handles also takes the queue shard's next due
	// message for that consumer (redisqueue.HandBack): a busy worker
	// consumes without receives, two round trips per step in all. On a
	// Redis Cluster it is ignored (a script runs on
	// one slot, and the queue's keys live in other slots than a task's):
	// the store does not dispatch, and the tasks Server enqueues.
	Queue *redisqueue.Queue
	// WakeHorizon applies with Queue: a commit that puts a task to sleep,
	// or waits for an event or for input with a deadline, more than
	// WakeHorizon ahead enqueues no message: the task's due entry comes
	// due WakeHorizon before the wake, and the sweeper then enqueues the
	// wake at its time (tasks.Server.Sweep). A long sleep so costs Redis
	// one sorted-set entry instead of two (about 120 bytes at a million
	// live tasks), and wakes on time as long as the sweeper runs at least
	// once in every WakeHorizon (late by at most one sweep interval if it
	// does not). Zero means DefaultWakeHorizon; a negative value enqueues
	// every wake in the commit.
	WakeHorizon time.Duration
	// MaxListed bounds each principal's list index (driver.Lister): List
	// shows the newest MaxListed unexpired tasks of a principal, and at most
	// about a hundred more (the index drops its oldest entries a listpack at
	// a time; see streamindex.go). Zero means DefaultMaxListed.
	MaxListed int
	// MaxIndexed bounds the index of all tasks (inspect.Lister, the
	// operator's view; see listall.go): it keeps at least the newest
	// MaxIndexed unexpired tasks, and at most about a hundred more. Zero means DefaultMaxIndexed; a negative
	// value turns the index off (a creation then costs no command for it,
	// and ListAll fails).
	MaxIndexed int
	// Shards is how many shards the due index (and the index of all
	// tasks) is spread over (see the package doc); zero means 1. Use the
	// queue's shard count.
	Shards int
	// Wait, when positive, makes every transition wait until that many
	// replicas acknowledge it, for at most WaitTimeout (zero: 1s); see the
	// package doc. It costs a round trip's worth of replication latency per
	// transition, and refuses writes while fewer replicas answer.
	Wait        int
	WaitTimeout time.Duration
	// TracerProvider, when set, makes a client span for each script call
	// (EVALSHA create, claim, commit, ...) made within a traced operation
	// (a recording span in the call's context); nil means none.
	TracerProvider trace.TracerProvider
}

// DefaultWakeHorizon is Options.WakeHorizon's default: far beyond the
// sweep intervals of the deployments (30 s locally, 1 minute on Lambda, 5
// on Vercel).
const DefaultWakeHorizon = time.Hour

// CheckPrefix reports whether prefix can prefix the store's keys: a brace
// in it would make Redis Cluster hash the prefix instead of each task's
// {id} tag, putting every key of every task in one slot.
func CheckPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return errors.New("must not contain '{' or '}': each task's keys carry the hash tag {taskId}, and a brace in the prefix would put every task in one Redis Cluster slot")
	}
	return nil
}

// Store is a driver.Store on Redis. It is safe for concurrent use.
type Store struct {
	c         rueidis.Client
	prefix    string
	grace     time.Duration
	indexTTL  time.Duration
	maxListed int
	sc        scripts
	dueKeys   []string // the due index's shards
	// allKeys are the shards of the index of all tasks (nil: it is off),
	// maxIndexed its bound; indexInline says the create script writes it
	// (not on a Redis Cluster). See listall.go.
	allKeys     []string
	maxIndexed  int
	indexInline bool
	// queueKeys returns a task's queue keys when the store dispatches,
	// else it is nil.
	queueKeys func(id string) (queue, wake string)
	// queue is the queue the store dispatches to (nil: none); its
	// consumers' hand-back offers are taken by Commit.
	queue  *redisqueue.Queue
	wait   int64
	waitMs int64
	// tracer is nil when tracing is off; names names the scripts by SHA
	// for their spans.
	tracer trace.Tracer
	names  map[string]string
	// hub carries every Watch of the store (watch.go).
	hub hub
}

var (
	_ driver.Store        = (*Store)(nil)
	_ driver.LeaseRenewer = (*Store)(nil)
)

// New returns a Store using c, which the caller owns and closes.
func New(c rueidis.Client, opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = "mcptasks:"
	}
	if o.EnqueueGrace == 0 {
		o.EnqueueGrace = 30 * time.Second
	}
	if o.IndexTTL == 0 {
		o.IndexTTL = 8 * 24 * time.Hour
	}
	if o.MaxListed <= 0 {
		o.MaxListed = DefaultMaxListed
	}
	s := &Store{c: c, prefix: o.Prefix, grace: o.EnqueueGrace, indexTTL: o.IndexTTL, maxListed: o.MaxListed}
	if o.Shards <= 1 {
		s.dueKeys = []string{o.Prefix + "due"}
	} else {
		for _, tag := range slots.Tags(o.Shards) {
			s.dueKeys = append(s.dueKeys, o.Prefix+"due{"+tag+"}")
		}
	}
	if o.MaxIndexed >= 0 {
		s.maxIndexed = o.MaxIndexed
		if s.maxIndexed == 0 {
			s.maxIndexed = DefaultMaxIndexed
		}
		for _, k := range s.dueKeys {
			s.allKeys = append(s.allKeys, o.Prefix+"all"+strings.TrimPrefix(k, o.Prefix+"due"))
		}
		s.indexInline = c.Mode() != rueidis.ClientModeCluster
	}
	if o.Wait > 0 {
		s.wait, s.waitMs = int64(o.Wait), time.Second.Milliseconds()
		if o.WaitTimeout > 0 {
			s.waitMs = max(o.WaitTimeout.Milliseconds(), 1)
		}
	}
	if o.Queue != nil && c.Mode() != rueidis.ClientModeCluster {
		s.queueKeys, s.queue = o.Queue.KeysFor, o.Queue
		if o.WakeHorizon == 0 {
			o.WakeHorizon = DefaultWakeHorizon
		}
		s.sc = newScripts(dispatchLua(o.Queue.KeyTTL(), o.EnqueueGrace, o.IndexTTL, max(o.WakeHorizon, 0)), s.indexingLua())
	} else {
		s.sc = newScripts(noDispatchLua, s.indexingLua())
	}
	if o.TracerProvider != nil {
		s.tracer = o.TracerProvider.Tracer("github.com/mcptasks/mcptasks/pkg/tasks/redisstore")
		s.names = map[string]string{s.sc.create.sha: "create", s.sc.update.sha: "update", s.sc.claim.sha: "claim",
			s.sc.commit.sha: "commit", s.sc.cancel.sha: "cancel", s.sc.renew.sha: "renew", s.sc.deliver.sha: "deliver",
			s.sc.claimBranch.sha: "claim_branch", s.sc.renewBranch.sha: "renew_branch", s.sc.commitBranch.sha: "commit_branch"}
	}
	return s
}

// span starts the client span of the script call name, when tracing is on
// and ctx holds a recording span (a store call outside any traced
// operation, such as the sweeper's index upkeep, makes no trace of its
// own); else it returns nil.
func (s *Store) span(ctx context.Context, name string) (context.Context, trace.Span) {
	if s.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return s.tracer.Start(ctx, "EVALSHA "+name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", "EVALSHA"),
		attribute.String("db.stored_procedure.name", name)))
}

// endSpan ends span (nil: none), marking a Redis error.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !rueidis.IsRedisNil(err) {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Dispatches reports whether the store enqueues tasks itself (see
// Options.Queue): the tasks Server then does not enqueue after a creation, a
// worker's commit or a resuming update.
func (s *Store) Dispatches() bool { return s.queueKeys != nil }

// HonoursDeadline implements driver.DeadlineHonourer: every call returns
// soon after its context's deadline, since rueidis sets each connection's
// deadline (and a dial's) from the context.
func (s *Store) HonoursDeadline() bool { return true }

// withQueue appends task id's due-index shard and queue keys to a
// transition script's keys when the store dispatches (see dispatchLua).
func (s *Store) withQueue(id string, keys ...string) []string {
	if s.queueKeys == nil {
		return keys
	}
	q, w := s.queueKeys(id)
	return append(keys, s.dueKey(id), q, w)
}

// withLive is withQueue for Commit and Cancel, which also drop an ended
// task from owner's live set.
func (s *Store) withLive(owner, id string, keys ...string) []string {
	if s.queueKeys == nil {
		return keys
	}
	return s.withQueue(id, append(keys, s.liveKey(owner))...)
}

// index returns cmds unless the store dispatches: its scripts then keep
// the due index themselves.
func (s *Store) index(cmds ...rueidis.Completed) []rueidis.Completed {
	if s.queueKeys != nil {
		return nil
	}
	return cmds
}

func (s *Store) keys(id string) (t, p, j, r string) {
	base := s.prefix + "{" + id + "}"
	return base, base + ":p", base + ":j", base + ":r"
}

// resultKey is the string holding a completed task's result (kept out of
// the task hash so that the hash stays small enough for Redis's compact
// encoding).
func (s *Store) resultKey(id string) string { return s.prefix + "{" + id + "}:x" }

// spillKey is the string holding the values of a task's creation kept
// out of its hash, and msgKey its long status message (see spill.go).
func (s *Store) spillKey(id string) string { return s.prefix + "{" + id + "}:a" }
func (s *Store) msgKey(id string) string   { return s.prefix + "{" + id + "}:m" }

// readKeys are the keys getScript reads for a task.
func (s *Store) readKeys(id string) []string {
	t, p, j, _ := s.keys(id)
	return []string{t, p, s.offersKey(id), s.resultKey(id), s.spillKey(id), s.msgKey(id), j}
}

// offersKey is the hash of a task's outstanding offers.
func (s *Store) offersKey(id string) string { return s.prefix + "{" + id + "}:o" }

// eventsKey is the hash of a task's events (see events.go).
func (s *Store) eventsKey(id string) string { return s.prefix + "{" + id + "}:e" }

// forkKey is the hash of the branches of a task's n-th parallel step (see
// branches.go).
func (s *Store) forkKey(id string, n int) string {
	return s.prefix + "{" + id + "}:f" + strconv.Itoa(n)
}

// dueKey is the due-index shard of task id.
func (s *Store) dueKey(id string) string { return s.dueKeys[slots.ShardOf(id, len(s.dueKeys))] }

// liveKey is the sorted set of owner's live tasks (see the package doc).
func (s *Store) liveKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return s.prefix + "live:" + hex.EncodeToString(h[:16])
}

// ended returns the commands that drop a task that just ended from the due
// index and from its owner's live set.
func (s *Store) ended(id, owner string) []rueidis.Completed {
	cmds := s.schedule(id, time.Time{})
	if owner != "" {
		cmds = append(cmds, s.c.B().Zrem().Key(s.liveKey(owner)).Member(id).Build())
	}
	return cmds
}

// forget runs ended's commands.
func (s *Store) forget(ctx context.Context, id, owner string) error {
	for _, r := range s.c.DoMulti(ctx, s.ended(id, owner)...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("redisstore: unindex %s: %w", id, err)
		}
	}
	return nil
}

// reserve takes a place for nt in its owner's live set, or answers
// driver.ErrTooManyTasks. added is false when the id already held one. A
// full set is checked once for members whose task ended (a removal lost
// with a crashed process); they are dropped and the reservation retried.
func (s *Store) reserve(ctx context.Context, nt *driver.NewTask, exp time.Time) (added bool, err error) {
	key := s.liveKey(nt.Owner)
	args := []string{ms(nt.Now), nt.ID, ms(exp), strconv.Itoa(nt.MaxLive)}
	for attempt := 0; ; attempt++ {
		sctx, span := s.span(ctx, "reserve")
		msg, err := reserveScript.lua.Exec(sctx, s.c, []string{key}, args).ToMessage()
		endSpan(span, err)
		if err != nil {
			return false, fmt.Errorf("redisstore: create %s: reserving: %w", nt.ID, err)
		}
		if msg.IsInt64() {
			n, _ := msg.AsInt64()
			return n == 1, nil
		}
		members, err := msg.AsStrSlice()
		if err != nil {
			return false, fmt.Errorf("redisstore: create %s: reserving: %w", nt.ID, err)
		}
		if attempt > 0 {
			return false, driver.ErrTooManyTasks
		}
		if n, err := s.dropEnded(ctx, key, members); err != nil || n == 0 {
			return false, errors.Join(driver.ErrTooManyTasks, err)
		}
	}
}

// handBackTimeout bounds giving a live-set place back after a failed create.
const handBackTimeout = 2 * time.Second

// dropEnded removes from the live set key the members whose task is
// terminal, and returns how many it removed. A member whose task is missing
// is kept: its creation may be under way.
func (s *Store) dropEnded(ctx context.Context, key string, members []string) (int, error) {
	var ids []string
	var cmds []rueidis.Completed
	for _, id := range members {
		if driver.ValidID(id) {
			t, _, _, _ := s.keys(id)
			ids = append(ids, id)
			cmds = append(cmds, s.c.B().Hget().Key(t).Field("status").Build())
		}
	}
	if len(cmds) == 0 {
		return 0, nil
	}
	var gone []string
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		st, err := r.ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return 0, fmt.Errorf("redisstore: checking live tasks: %w", err)
		}
		if driver.Status(st).Terminal() {
			gone = append(gone, ids[i])
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if err := s.c.Do(ctx, s.c.B().Zrem().Key(key).Member(gone...).Build()).Error(); err != nil {
		return 0, fmt.Errorf("redisstore: dropping ended live tasks: %w", err)
	}
	return len(gone), nil
}

// exec runs sc in one round trip together with the commands in before and
// after (pipelined in that order), and returns the script's result and the
// first error of the commands before it (which the caller weighs: they ran,
// or failed, independently of the script). Errors of the commands after
// the script are dropped: they only maintain the due index, a hint the
// sweeper re-derives. The script is sent as EVALSHA; on a server that has
// not seen it yet (NOSCRIPT) it is run again through rueidis, which loads
// it.
func (s *Store) exec(ctx context.Context, sc script, keys, args []string, before, after []rueidis.Completed) (_ rueidis.RedisResult, beforeErr error) {
	out, beforeErr, _ := s.run(ctx, sc, keys, args, before, after, false)
	return out, beforeErr
}

// ErrNotReplicated is the error of a transition that fewer replicas than
// Options.Wait acknowledged within Options.WaitTimeout: the primary has it,
// but a failover now could lose it, so the store does not report it done.
var ErrNotReplicated = errors.New("redisstore: write not acknowledged by enough replicas")

// run is exec for a transition a caller relies on: when the store waits
// for replicas (Options.Wait) and waited is true, a WAIT follows the
// script on the same connection, routed to the script's slot, and waitErr
// is ErrNotReplicated if too few replicas acknowledged the write (or the
// WAIT failed).
func (s *Store) run(ctx context.Context, sc script, keys, args []string, before, after []rueidis.Completed, waited bool) (_ rueidis.RedisResult, beforeErr, waitErr error) {
	var span trace.Span
	if s.tracer != nil {
		ctx, span = s.span(ctx, s.names[sc.sha])
	}
	waited = waited && s.wait > 0
	cmds := make([]rueidis.Completed, 0, len(before)+2+len(after))
	cmds = append(cmds, before...)
	evalsha := s.c.B().Evalsha().Sha1(sc.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	if sc.retryable {
		evalsha = evalsha.ToRetryable() // as sc.lua.Exec would send it
	}
	cmds = append(cmds, evalsha)
	if waited {
		cmds = append(cmds, s.waitCmd(keys[0]))
	}
	cmds = append(cmds, after...)
	res := s.c.DoMulti(ctx, cmds...)
	for _, r := range res[:len(before)] {
		if err := r.Error(); err != nil && beforeErr == nil {
			beforeErr = err
		}
	}
	out := res[len(before)]
	var ack rueidis.RedisResult
	if waited {
		ack = res[len(before)+1]
	}
	if err := out.Error(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		if waited {
			// The script's body, then the WAIT, on one connection again.
			r := s.c.DoMulti(ctx, s.c.B().Eval().Script(sc.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), s.waitCmd(keys[0]))
			out, ack = r[0], r[1]
		} else {
			out = sc.lua.Exec(ctx, s.c, keys, args)
		}
	}
	if waited && out.Error() == nil {
		waitErr = s.acknowledged(ack)
	}
	endSpan(span, errors.Join(out.Error(), waitErr))
	return out, beforeErr, waitErr
}

// waitCmd is the WAIT that follows a transition on key's slot. rueidis
// sends a pipeline holding a blocking command (WAIT is one) on a
// connection of its own, in order, so the WAIT covers the writes before it.
func (s *Store) waitCmd(key string) rueidis.Completed {
	return s.c.B().Wait().Numreplicas(s.wait).Timeout(s.waitMs).Build().SetSlot(key)
}

// acknowledged checks a WAIT's reply against Options.Wait.
func (s *Store) acknowledged(ack rueidis.RedisResult) error {
	n, err := ack.AsInt64()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if n < s.wait {
		return fmt.Errorf("%w: %d of %d replicas within %dms", ErrNotReplicated, n, s.wait, s.waitMs)
	}
	return nil
}

// schedule returns the commands that set a task's next attention time in
// the due index (a zero time removes it) and refresh the index's expiry.
func (s *Store) schedule(id string, at time.Time) []rueidis.Completed {
	key := s.dueKey(id)
	var cmd rueidis.Completed
	if at.IsZero() {
		cmd = s.c.B().Zrem().Key(key).Member(id).Build()
	} else {
		cmd = s.c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(at.UnixMilli()), id).Build()
	}
	return []rueidis.Completed{cmd, s.c.B().Pexpire().Key(key).Milliseconds(s.indexTTL.Milliseconds()).Build()}
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Create implements driver.Store.
func (s *Store) Create(ctx context.Context, nt *driver.NewTask) (*driver.Task, error) {
	if nt.Owner == "" {
		return nil, errors.New("redisstore: create: empty owner")
	}
	if !driver.ValidID(nt.ID) {
		return nil, fmt.Errorf("redisstore: create: %q is not an id from driver.NewID", nt.ID)
	}
	now := nt.Now.Truncate(time.Millisecond)
	exp := now.Add(nt.TTL)
	t, _, j, r := s.keys(nt.ID)
	// Values longer than maxInline are cut into chunks, or go to the spill
	// key (spill.go).
	var fields []string
	var spill []byte
	for i, v := range []string{nt.Owner, nt.Tool, string(nt.Args)} {
		fields, spill = inlineFields(fields, spill, spillable[i], v)
	}
	if spill != nil {
		fields = append(fields, "sp", "1")
	}
	// The fields whose value would be the default (gen, lease, wake, att,
	// cancel, of, lim, r "0"; ttl, which is exp - created) are left out
	// (format of 2026-12-03): readers take a missing one as its default, and
	// jn, always present from this format on (its chunks, or "0" for no
	// journal), tells this format from tasks written before, whose missing r
	// means that the task may have responses (see decodeTask and the
	// scripts).
	fields = append(fields,
		"status", string(driver.StatusWorking), "created", ms(now), "updated", ms(now),
		"exp", ms(exp), "poll", strconv.FormatInt(nt.PollInterval.Milliseconds(), 10),
	)
	if nt.TTL.Milliseconds() != exp.UnixMilli()-now.UnixMilli() {
		fields = append(fields, "ttl", strconv.FormatInt(nt.TTL.Milliseconds(), 10))
	}
	if len(nt.Responses) > 0 {
		fields = append(fields, "r", "1")
	}
	if nt.MaxLive > 0 {
		fields = append(fields, "lim", "1")
	}
	if nt.TraceParent != "" {
		fields = append(fields, "tp", nt.TraceParent)
	}
	raw := make([]string, len(nt.Journal))
	for i := range nt.Journal {
		var err error
		if raw[i], err = encodeEntry(&nt.Journal[i]); err != nil {
			return nil, fmt.Errorf("redisstore: encoding journal: %w", err)
		}
	}
	fields = journalFields(fields, raw)
	args := []string{ms(exp), ms(now), strconv.Itoa(len(nt.Responses)), string(spill)}
	args = append(args, fields...)
	for k, v := range nt.Responses {
		args = append(args, k, string(v))
	}
	// The owner's place under a limit first: nothing is created without one.
	reserved := false
	if nt.MaxLive > 0 {
		var err error
		if reserved, err = s.reserve(ctx, nt, exp); err != nil {
			return nil, err
		}
	}
	// Index first (in the same pipeline): a task must never exist outside the
	// due index, or a lost enqueue could not be recovered. A dangling entry
	// is cleaned by the sweeper.
	// The owner's list index (driver.Lister) in the same round trip, for a
	// task that is listed (NewTask.Listed).
	before := s.index(s.schedule(nt.ID, now.Add(s.grace))...)
	if nt.Listed {
		before = append(before, s.indexCmd(nt, now, exp))
	}
	// The index of all tasks in the create script, or right after it on a
	// Redis Cluster (listall.go).
	res, indexErr, waitErr := s.run(ctx, s.sc.create, s.withQueue(nt.ID, s.withIndex(nt.ID, t, j, r, s.spillKey(nt.ID))...), args, before, s.indexAfter(nt, now), true)
	if indexErr != nil && strings.HasPrefix(indexErr.Error(), "NOSCRIPT") {
		indexErr = s.indexAgain(ctx, nt, now, exp)
	}
	n, err := res.AsInt64()
	if err == nil && indexErr != nil {
		// Created but not indexed: the handle must not go out, since a lost
		// enqueue could then never be recovered. The task expires unused.
		err = indexErr
	}
	if err == nil && n == 1 && waitErr != nil {
		// Created, but a failover could lose it: the handle must not go
		// out, and no task may run for a handle that was refused.
		err = waitErr
		s.uncreate(ctx, nt)
	}
	if (err != nil || n == 0) && reserved {
		// Give the place back (best effort: else it is held until exp), on
		// a context of its own: the usual failure is ctx's deadline, under
		// which the hand-back would fail too.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
		_ = s.c.Do(hctx, s.c.B().Zrem().Key(s.liveKey(nt.Owner)).Member(nt.ID).Build()).Error()
		cancel()
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: create %s: %w", nt.ID, err)
	}
	if n == 0 {
		return nil, driver.ErrExists
	}
	return &driver.Task{
		ID: nt.ID, Owner: nt.Owner, Tool: nt.Tool, Args: nt.Args,
		Status: driver.StatusWorking, CreatedAt: now, UpdatedAt: now,
		TTL: nt.TTL, PollInterval: nt.PollInterval, TraceParent: nt.TraceParent,
	}, nil
}

// uncreate removes a task whose creation was refused after the write
// (best effort, on a context of its own: the usual cause is a failing
// primary): its keys, its due-index entry and, when the store dispatches,
// its queue message. Its entries in the list index and the index of all
// tasks stay: their readers skip a task that is gone. The live-set place
// is handed back by Create.
func (s *Store) uncreate(ctx context.Context, nt *driver.NewTask) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	t, p, j, r := s.keys(nt.ID)
	cmds := []rueidis.Completed{
		s.c.B().Del().Key(t, p, j, r, s.offersKey(nt.ID), s.resultKey(nt.ID), s.eventsKey(nt.ID), s.spillKey(nt.ID), s.msgKey(nt.ID)).Build(),
		s.c.B().Zrem().Key(s.dueKey(nt.ID)).Member(nt.ID).Build(),
	}
	if s.queueKeys != nil {
		q, _ := s.queueKeys(nt.ID)
		cmds = append(cmds, s.c.B().Zrem().Key(q).Member(nt.ID).Build())
	}
	s.c.DoMulti(ctx, cmds...)
}

// Get implements driver.Store. The owner is compared inside Redis, so a
// foreign task and an unknown one cost the same (one round trip and a nil
// reply: nothing of the foreign task crosses the wire) and answer the same.
func (s *Store) Get(ctx context.Context, owner, id string) (*driver.Task, error) {
	if owner == "" {
		return nil, driver.ErrNotFound
	}
	return s.read(ctx, id, owner)
}

// Peek implements driver.Store.
func (s *Store) Peek(ctx context.Context, id string) (*driver.Task, error) {
	return s.read(ctx, id, "")
}

// read returns the task (record and outstanding input, read atomically),
// if owner is empty or owns it.
func (s *Store) read(ctx context.Context, id, owner string) (*driver.Task, error) {
	if !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	sctx, span := s.span(ctx, "get")
	arr, err := getScript.lua.Exec(sctx, s.c, s.readKeys(id), []string{owner}).ToArray()
	endSpan(span, err)
	if rueidis.IsRedisNil(err) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: get %s: %w", id, err)
	}
	return decodeRead(id, arr)
}

// decodeRead decodes the reply of getScript.
func decodeRead(id string, arr []rueidis.RedisMessage) (*driver.Task, error) {
	if len(arr) == 0 || len(arr) > 4 {
		return nil, fmt.Errorf("redisstore: get %s: unexpected reply", id)
	}
	h, err := arr[0].AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("redisstore: get %s: %w", id, err)
	}
	var pending, offers map[string]string
	if len(arr) == 2 { // completed or failed: its result or error
		if res, err := arr[1].ToString(); err == nil {
			outcome(h, res)
		}
	}
	if len(arr) >= 3 { // input_required: its outstanding input too
		if pending, err = arr[1].AsStrMap(); err != nil {
			return nil, fmt.Errorf("redisstore: get %s input: %w", id, err)
		}
		if len(arr) == 4 {
			if err := requestsOf(pending, &arr[3]); err != nil {
				return nil, fmt.Errorf("redisstore: get %s input: %w", id, err)
			}
		}
		if offers, err = arr[2].AsStrMap(); err != nil {
			return nil, fmt.Errorf("redisstore: get %s offers: %w", id, err)
		}
	}
	return decodeTask(id, h, pending, offers)
}

// outcome sets in the record h the value of its result key: the result
// of a completed task, the error of a failed one (an earlier format kept
// it in the hash).
func outcome(h map[string]string, v string) {
	switch h["status"] {
	case string(driver.StatusCompleted):
		h["result"] = v
	case string(driver.StatusFailed):
		h["error"] = v
	}
}

// decodeTask builds a task from its record; pending and offers are its
// outstanding input requests, shown when it is input_required. The record
// may carry the values kept out of the hash as _a and _m (see spill.go).
func decodeTask(id string, h, pending, offers map[string]string) (*driver.Task, error) {
	joinChunks(h)
	if a, ok := h["_a"]; ok {
		unspill(a, h)
	}
	if m, ok := h["_m"]; ok {
		h["msg"] = m
	}
	if h["owner"] == "" {
		// A write that raced the key's expiry can leave a partial hash.
		return nil, driver.ErrNotFound
	}
	msTime := func(k string) time.Time {
		n, _ := strconv.ParseInt(h[k], 10, 64)
		if n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	msDur := func(k string) time.Duration {
		n, _ := strconv.ParseInt(h[k], 10, 64)
		return time.Duration(n) * time.Millisecond
	}
	if h["ttl"] == "" && h["exp"] != "" {
		// Left out as exp - created (format of 2026-12-03).
		h["ttl"] = strconv.FormatInt(msTime("exp").Sub(msTime("created")).Milliseconds(), 10)
	}
	t := &driver.Task{
		ID: id, Owner: h["owner"], Tool: h["tool"], Args: json.RawMessage(h["args"]),
		Status: driver.Status(h["status"]), StatusMessage: h["msg"],
		CreatedAt: msTime("created"), UpdatedAt: msTime("updated"),
		TTL: msDur("ttl"), PollInterval: msDur("poll"),
		CancelRequested: h["cancel"] == "1",
		LeaseUntil:      msTime("lease"), WakeAt: msTime("wake"),
		TraceParent: h["tp"], Awaiting: h["aw"],
	}
	if v := h["result"]; v != "" {
		t.Result = json.RawMessage(v)
	}
	if v := h["error"]; v != "" {
		var e driver.ErrorObject
		if err := json.Unmarshal([]byte(v), &e); err != nil {
			return nil, fmt.Errorf("redisstore: task %s: decoding error: %w", id, err)
		}
		t.Error = &e
	}
	if t.Status == driver.StatusInputRequired && len(pending)+len(offers) > 0 {
		t.InputRequests = make(map[string]json.RawMessage, len(pending)+len(offers))
		for k, v := range pending {
			t.InputRequests[k] = json.RawMessage(v)
		}
		for k, v := range offers {
			t.InputRequests[k] = json.RawMessage(v)
		}
	}
	return t, nil
}

// Outstanding implements driver.Store: one read-only script, the owner
// compared inside Redis.
func (s *Store) Outstanding(ctx context.Context, owner, id string, now time.Time) (map[string]json.RawMessage, error) {
	if owner == "" || !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	t, p, j, _ := s.keys(id)
	arr, err := outstandingScript.lua.Exec(ctx, s.c, []string{t, p, s.offersKey(id), j}, []string{owner, ms(now)}).ToArray()
	if rueidis.IsRedisNil(err) {
		return nil, driver.ErrNotFound
	}
	if err == nil && len(arr) < 2 {
		err = errors.New("unexpected reply")
	}
	var maps [2]map[string]string
	for i := range maps {
		if err == nil {
			maps[i], err = arr[i].AsStrMap()
		}
	}
	if err == nil && len(arr) > 2 {
		err = requestsOf(maps[0], &arr[2])
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: outstanding %s: %w", id, err)
	}
	out := map[string]json.RawMessage{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = json.RawMessage(v)
		}
	}
	return out, nil
}

// Update implements driver.Store.
//
// Only the owner's update may touch the task's entry in the due index (a
// separate key in its own Cluster slot, so the script cannot write it). A
// first script call checks the owner and applies the responses, unless
// they would resume the task: then it changes nothing and says so, and a
// second round trip moves the due entry to now+grace and applies them,
// pipelined in that order. The entry thus moves before the resume (if the
// process dies before the caller enqueues the task, the sweeper finds it
// within the grace), and it is set outright, so a sweeper that read the
// parked task's time before fails its compare-and-set instead of pushing
// the resumed task back to its expiry. (On Redis Cluster the two commands
// go to different nodes and their order is not guaranteed, as for every
// pipeline here that mixes the due index with task keys: the entry still
// ends at now+grace, since a sweeper's compare-and-set from the old time
// either fails or is overwritten, but a process that dies between them may
// leave the resumed task to be found at its old time.) A foreign, unknown
// or non-resuming update costs one round trip; a resuming one two, as
// before.
func (s *Store) Update(ctx context.Context, owner, id string, responses map[string]json.RawMessage, now time.Time) (bool, error) {
	if owner == "" || !driver.ValidID(id) {
		return false, driver.ErrNotFound
	}
	t, p, _, r := s.keys(id)
	args := make([]string, 0, 3+2*len(responses))
	args = append(args, owner, ms(now), "try")
	for k, v := range responses {
		args = append(args, k, string(v))
	}
	keys := s.withQueue(id, t, p, r, s.offersKey(id))
	if s.Dispatches() {
		args[2] = "apply" // the script moves the due entry itself
	}
	res, _, waitErr := s.run(ctx, s.sc.update, keys, args, nil, nil, true)
	n, err := res.AsInt64()
	if err == nil && n == 3 {
		args[2] = "apply"
		res, _, waitErr = s.run(ctx, s.sc.update, keys, args, s.schedule(id, now.Add(s.grace)), nil, true)
		n, err = res.AsInt64()
	}
	if err == nil && n != -1 {
		err = waitErr
	}
	if err != nil {
		return false, fmt.Errorf("redisstore: update %s: %w", id, err)
	}
	switch n {
	case -1:
		return false, driver.ErrNotFound
	case 2:
		return true, nil
	}
	return false, nil
}

// Cancel implements driver.Store.
func (s *Store) Cancel(ctx context.Context, owner, id string, now time.Time) (driver.Status, bool, error) {
	if owner == "" || !driver.ValidID(id) {
		return "", false, driver.ErrNotFound
	}
	t, p, _, _ := s.keys(id)
	res, _, waitErr := s.run(ctx, s.sc.cancel, s.withLive(owner, id, t, p, s.offersKey(id), s.msgKey(id)), []string{owner, ms(now)}, nil, nil, true)
	arr, err := res.ToArray()
	if rueidis.IsRedisNil(err) {
		return "", false, driver.ErrNotFound
	}
	if err == nil && len(arr) != 2 {
		err = fmt.Errorf("unexpected reply of %d elements", len(arr))
	}
	if err == nil {
		err = waitErr
	}
	if err != nil {
		return "", false, fmt.Errorf("redisstore: cancel %s: %w", id, err)
	}
	st, _ := arr[0].ToString()
	ended, _ := arr[1].AsInt64()
	status := driver.Status(st)
	if status.Terminal() && !s.Dispatches() {
		if err := s.forget(ctx, id, owner); err != nil {
			return status, ended == 1, err
		}
	}
	return status, ended == 1, nil
}

// Claim implements driver.Store.
func (s *Store) Claim(ctx context.Context, id string, now time.Time, lease time.Duration) (*driver.Claim, error) {
	if !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	t, p, j, r := s.keys(id)
	// The due index moves to no later than the lease's end, in the same
	// round trip (LT: a refused claim never delays recovery of the task;
	// at worst the sweeper looks early and re-derives the time).
	res, err := s.exec(ctx, s.sc.claim, s.withQueue(id, t, p, j, r, s.offersKey(id), s.eventsKey(id), s.spillKey(id), s.msgKey(id)),
		[]string{ms(now), strconv.FormatInt(lease.Milliseconds(), 10)}, nil, s.index(
			s.c.B().Zadd().Key(s.dueKey(id)).Xx().Lt().ScoreMember().ScoreMember(float64(now.Add(lease).UnixMilli()), id).Build()))
	var arr []rueidis.RedisMessage
	if err == nil {
		arr, err = res.ToArray()
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim %s: %w", id, err)
	}
	code, _ := arr[0].ToString()
	switch code {
	case "NF":
		if !s.Dispatches() {
			_ = s.Schedule(ctx, id, time.Time{})
		}
		return nil, driver.ErrNotFound
	case "L":
		return nil, driver.ErrLeased
	case "P", "W":
		wake, _ := arr[3].AsInt64()
		task := &driver.Task{ID: id, Status: driver.StatusWorking}
		if code == "P" {
			task.Status = driver.StatusInputRequired
		}
		if wake > 0 {
			task.WakeAt = time.UnixMilli(wake).UTC()
		}
		return &driver.Claim{Task: task}, nil
	case "T", "X":
		h, err := arr[4].AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("redisstore: claim %s: %w", id, err)
		}
		task, err := decodeTask(id, h, nil, nil)
		if err != nil {
			return nil, err
		}
		_ = s.forget(ctx, id, task.Owner)
		return &driver.Claim{Task: task, Ended: code == "X"}, nil
	}
	cl, err := decodeClaim(id, arr, now, lease)
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim %s: %w", id, err)
	}
	return cl, nil
}

// requestsOf fills the requests of pending kept by reference from the
// journal m that parked returned (nil when none is).
func requestsOf(pending map[string]string, m *rueidis.RedisMessage) error {
	if m.IsNil() || m.IsBool() || m.IsInt64() {
		return nil // false: every request kept whole
	}
	raw, err := claimedJournal(m)
	if err != nil {
		return err
	}
	return fillRequests(pending, raw)
}

// claimedJournal returns the entries of a claim's journal: a stream (the
// task's chunks joined, see journal.go) or a list's entries.
func claimedJournal(m *rueidis.RedisMessage) ([]string, error) {
	if m.IsString() {
		s, err := m.ToString()
		return splitStream(s), err
	}
	return m.AsStrSlice()
}

// decodeClaim decodes the reply of a claim C (of a task, or of a branch:
// see branchClaimLua) taken at now for lease.
func decodeClaim(id string, arr []rueidis.RedisMessage, now time.Time, lease time.Duration) (*driver.Claim, error) {
	if len(arr) < 9 {
		return nil, fmt.Errorf("a reply of %d elements", len(arr))
	}
	gen, _ := arr[1].AsInt64()
	att, _ := arr[2].AsInt64()
	rec, err := arr[4].AsStrSlice()
	if err == nil && len(rec) != len(claimFields) {
		err = fmt.Errorf("%d fields, want %d", len(rec), len(claimFields))
	}
	if err != nil {
		return nil, err
	}
	h := make(map[string]string, len(claimFields))
	for i, k := range claimFields {
		h[k] = rec[i]
	}
	task, err := decodeTask(id, h, nil, nil)
	if err != nil {
		return nil, err
	}
	// The record is as read before the claim: it holds the lease now, and
	// runs (a task claimed out of input_required, or out of a wait for an
	// event, is working from here).
	task.Awaiting = ""
	task.LeaseUntil = now.Truncate(time.Millisecond).Add(lease.Truncate(time.Millisecond)).UTC()
	task.Status = driver.StatusWorking
	raw, err := claimedJournal(&arr[5])
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	journal := make([]driver.Entry, len(raw))
	for i, e := range raw {
		if journal[i], err = decodeEntry(e); err != nil {
			return nil, fmt.Errorf("journal entry %d: %w", i, err)
		}
	}
	resp, err := arr[6].AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("responses: %w", err)
	}
	evs, err := arr[8].AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	cl := &driver.Claim{Task: task, Gen: gen, Journal: journal, Responses: rawMap(resp), Attempts: int(att)}
	if len(evs) > 0 {
		cl.Events = rawMap(evs)
	}
	if lost, _ := arr[7].AsInt64(); lost > 0 {
		cl.Lost = time.UnixMilli(lost).UTC()
	}
	return cl, nil
}

// RenewLease implements driver.LeaseRenewer: one script, which also holds
// the task's message until the lease's new end when the store dispatches.
// It leaves the due index alone: the sweeper finds the lease live there
// and looks again at its end.
func (s *Store) RenewLease(ctx context.Context, c *driver.Claim, now time.Time, lease time.Duration) error {
	id := c.Task.ID
	if !driver.ValidID(id) {
		return driver.ErrNotFound
	}
	t, _, _, _ := s.keys(id)
	res, _ := s.exec(ctx, s.sc.renew, s.withQueue(id, t),
		[]string{strconv.FormatInt(c.Gen, 10), ms(now), strconv.FormatInt(lease.Milliseconds(), 10)}, nil, nil)
	return renewed(res, "renew lease", id)
}

// renewed is the outcome of a lease renewal script's reply res: -2 the
// task (or branch) is gone, -1 another claim holds it, else renewed.
func renewed(res rueidis.RedisResult, what, id string) error {
	code, err := res.AsInt64()
	if err != nil {
		return fmt.Errorf("redisstore: %s %s: %w", what, id, err)
	}
	switch code {
	case -2:
		return driver.ErrNotFound
	case -1:
		return driver.ErrFenced
	}
	return nil
}

// Commit implements driver.Store: one script, in one of two modes. A
// store that dispatches (Options.Queue) keeps the task's queue message and
// the due index in the script itself, and hands the next message of the
// task's queue shard back to the consumer that handles this one
// (commitHandBack). One that does not keeps the due index with commands of
// its own around the script (dueBefore, indexAfter).
func (s *Store) Commit(ctx context.Context, c *driver.Claim, ch *driver.Change) error {
	id := c.Task.ID
	if !driver.ValidID(id) {
		return driver.ErrNotFound
	}
	t, p, j, r := s.keys(id)
	op := ch.Op()
	var hb *redisqueue.HandBack
	if s.Dispatches() && op != driver.OpKeep {
		hb = s.queue.TakeHandBack(id)
	}
	args, metas, err := s.commitArgs(c, ch, op, hb)
	if err != nil {
		return err
	}
	if len(metas) > 0 {
		if err := s.writeMetas(ctx, metas); err != nil {
			return fmt.Errorf("redisstore: commit %s: %w", id, err)
		}
	}
	forkKey := s.forkKey(id, 0)
	if f := ch.Fork; op == driver.OpAwait && f != nil {
		forkKey = s.forkKey(id, f.Number)
	}
	var after []rueidis.Completed
	var due time.Time
	var drop bool
	if !s.Dispatches() {
		after, due, drop = s.dueBefore(c, ch, op)
	}
	res, _, waitErr := s.run(ctx, s.sc.commit, s.withLive(c.Task.Owner, id, t, p, j, r, s.offersKey(id), s.resultKey(id), s.eventsKey(id), forkKey, s.msgKey(id)), args, nil, after, true)
	arr, err := res.ToArray()
	if err == nil && hb != nil && len(arr) > 4 {
		// Recorded even if the write did not replicate: the consumer
		// handles what it took rather than wait for its receipt to run
		// out. A reply of another shape (none can come) leaves the
		// consumer receiving as before.
		_ = hb.Reply(arr[4])
	}
	if err == nil && waitErr != nil {
		if code, _ := arr[0].AsInt64(); code >= 0 {
			// Applied on the primary only: the caller retries the step,
			// whose next claim finds what did replicate.
			err = waitErr
		}
	}
	if err != nil {
		return fmt.Errorf("redisstore: commit %s: %w", id, err)
	}
	code, _ := arr[0].AsInt64()
	switch code {
	case -2:
		return driver.ErrNotFound
	case -1:
		return driver.ErrFenced
	}
	n, _ := arr[1].AsInt64()
	st, _ := arr[2].ToString()
	woke, _ := arr[3].AsInt64()
	c.Committed(ch, driver.Status(st), int(n), woke == 1)
	if s.Dispatches() {
		return nil
	}
	return s.dueAfter(ctx, c, ch, due, drop, woke == 1)
}

// commitArgs are the ARGV of commitScript for ch under c, whose op is op;
// with hb, the script also takes the next message of the task's queue
// shard for hb's consumer (a store that dispatches: see
// redisqueue.Queue.TakeHandBack).
func (s *Store) commitArgs(c *driver.Claim, ch *driver.Change, op string, hb *redisqueue.HandBack) ([]string, []*metaWrite, error) {
	var payload string
	switch op {
	case driver.OpComplete:
		payload = string(ch.Complete)
	case driver.OpFail:
		b, err := json.Marshal(ch.Fail)
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: encoding error: %w", err)
		}
		payload = string(b)
	}
	hasMsg, msg := "0", ""
	if ch.StatusMessage != nil {
		hasMsg, msg = "1", *ch.StatusMessage
	}
	att := ""
	if ch.SetAttempts != nil {
		att = strconv.Itoa(*ch.SetAttempts)
	}
	wake := "0"
	if !ch.WakeAt.IsZero() {
		wake = ms(ch.WakeAt)
	}
	// Offers put up and withdrawn by the appended entries (see
	// driver.Change.Append).
	var offers, withdrawn []string
	for _, e := range ch.Append {
		switch e.Kind {
		case driver.KindOffer:
			offers = append(offers, e.Name, string(e.Value))
		case driver.KindWithdraw:
			withdrawn = append(withdrawn, e.Name)
		}
	}
	var watch []string
	if op == driver.OpSleep {
		watch = ch.WakeOn
	}
	hbNow, hbReceipt := "", ""
	if hb != nil {
		hbNow, hbReceipt = hb.Args()
	}
	awaited, fork := "", ""
	if op == driver.OpAwait {
		awaited = ch.Await
		if f := ch.Fork; f != nil {
			fork = fmt.Sprintf("%d %d %d", f.Number, f.Branches, f.Concurrency)
		}
	}
	args := make([]string, 0, 19+len(ch.Append)+2*len(ch.Park)+len(offers)+len(withdrawn)+len(watch)+2*len(ch.Open))
	args = append(args, strconv.FormatInt(c.Gen, 10), ms(ch.Now), op, hasMsg, msg, att, payload, wake,
		boolArg(ch.ParkAny), strconv.Itoa(len(ch.Park)), strconv.Itoa(len(ch.Append)),
		strconv.Itoa(len(offers)/2), strconv.Itoa(len(withdrawn)), strconv.Itoa(len(watch)), hbNow, hbReceipt,
		awaited, strconv.Itoa(len(ch.Open)), fork)
	for i := range ch.Append {
		e, err := encodeEntry(&ch.Append[i])
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: encoding journal: %w", err)
		}
		args = append(args, e)
	}
	appended := args[len(args)-len(ch.Append):]
	for k, v := range ch.Park {
		args = append(args, k, parkValue(appended, k, v))
	}
	args = append(args, offers...)
	args = append(args, withdrawn...)
	args = append(args, watch...)
	var metas []*metaWrite
	for i := range ch.Open {
		w, m, err := s.encodeWait(c.Task.ID, &ch.Open[i], c.Task.ExpiresAt())
		if err != nil {
			return nil, nil, fmt.Errorf("redisstore: commit %s: %w", c.Task.ID, err)
		}
		args = append(args, ch.Open[i].Name, w)
		if m != nil {
			metas = append(metas, m)
		}
	}
	return args, metas, nil
}

// dueBefore keeps the sweeper's due index in step with a commit of a
// store that does not dispatch (a hint; see the package doc). A stale
// (fenced) commit must never move the index entry later or drop it: the
// current holder's entry is what recovers the task if that holder dies. So
// only the common "run again now" case rides in the script's round trip
// (the commands returned, sent after the script), as a ZADD LT (never
// later); later times (due) and removals (drop: a task parked without a
// deadline, which an answer indexes again) are written by dueAfter once
// the commit is known to have succeeded.
func (s *Store) dueBefore(c *driver.Claim, ch *driver.Change, op string) (after []rueidis.Completed, due time.Time, drop bool) {
	id := c.Task.ID
	switch {
	case op == driver.OpKeep:
	case op == driver.OpRelease && ch.WakeAt.IsZero():
		key := s.dueKey(id)
		after = []rueidis.Completed{
			s.c.B().Zadd().Key(key).Lt().ScoreMember().ScoreMember(float64(ch.Now.Add(s.grace).UnixMilli()), id).Build(),
			s.c.B().Pexpire().Key(key).Milliseconds(s.indexTTL.Milliseconds()).Build(),
		}
	case op == driver.OpPark && ch.WakeAt.IsZero():
		drop = true
	case op == driver.OpPark:
		due = ch.WakeAt.Add(s.grace)
	case op == driver.OpAwait && ch.Fork != nil:
		due = ch.Now.Add(s.grace) // the sweeper watches the branches
	case op == driver.OpRelease, op == driver.OpSleep, op == driver.OpAwait:
		due = ch.WakeAt.Add(s.grace)
	}
	return after, due, drop
}

// dueAfter writes what dueBefore left for after a successful commit:
// the task's new due time, or, for a task that ended, its removal from the
// indexes (and for one parked without a deadline, drop, from the due
// index). woke reports that an answer cut a sleep short: the task runs
// again now.
func (s *Store) dueAfter(ctx context.Context, c *driver.Claim, ch *driver.Change, due time.Time, drop, woke bool) error {
	if woke {
		due = ch.Now.Add(s.grace)
	}
	switch {
	case c.Task.Status.Terminal():
		return s.forget(ctx, c.Task.ID, c.Task.Owner)
	case drop && c.Task.Status == driver.StatusInputRequired:
		return s.Schedule(ctx, c.Task.ID, time.Time{})
	case !due.IsZero():
		return s.Schedule(ctx, c.Task.ID, due)
	}
	return nil
}

// CancelRequested implements driver.Store.
func (s *Store) CancelRequested(ctx context.Context, c *driver.Claim) (bool, error) {
	if !driver.ValidID(c.Task.ID) {
		return false, driver.ErrNotFound
	}
	t, _, _, _ := s.keys(c.Task.ID)
	v, err := s.c.Do(ctx, s.c.B().Hmget().Key(t).Field("cancel", "gen", "status").Build()).ToArray()
	if err != nil {
		return false, fmt.Errorf("redisstore: cancel flag %s: %w", c.Task.ID, err)
	}
	cancel, _ := v[0].ToString()
	gen, _ := v[1].AsInt64()
	status, _ := v[2].ToString()
	return cancel == "1" || gen != c.Gen || driver.Status(status).Terminal(), nil
}

// Due implements driver.Store. It reads every shard of the due index in
// one pipelined round trip and returns the earliest entries; a shard that
// does not answer (its master failing over) is reported in the error
// alongside the entries of the shards that did.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]driver.DueTask, error) {
	cmds := make([]rueidis.Completed, len(s.dueKeys))
	for i, k := range s.dueKeys {
		cmds[i] = s.c.B().Zrange().Key(k).Min("-inf").Max(ms(now)).Byscore().Limit(0, int64(limit)).Withscores().Build()
	}
	var due []driver.DueTask
	var errs []error
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		zs, err := r.AsZScores()
		if err != nil {
			errs = append(errs, fmt.Errorf("redisstore: due index %s: %w", s.dueKeys[i], err))
			continue
		}
		for _, z := range zs {
			due = append(due, driver.DueTask{ID: z.Member, At: time.UnixMilli(int64(z.Score)).UTC()})
		}
	}
	if len(s.dueKeys) > 1 {
		slices.SortStableFunc(due, func(a, b driver.DueTask) int { return a.At.Compare(b.At) })
		due = due[:min(len(due), limit)]
	}
	return due, errors.Join(errs...)
}

// Reschedule implements driver.Store.
func (s *Store) Reschedule(ctx context.Context, id string, from, to time.Time) (bool, error) {
	target := ""
	if !to.IsZero() {
		target = ms(to)
	}
	sctx, span := s.span(ctx, "reschedule")
	n, err := rescheduleScript.lua.Exec(sctx, s.c, []string{s.dueKey(id)},
		[]string{id, ms(from), target, strconv.FormatInt(s.indexTTL.Milliseconds(), 10)}).AsInt64()
	endSpan(span, err)
	if err != nil {
		return false, fmt.Errorf("redisstore: reschedule %s: %w", id, err)
	}
	return n == 1, nil
}

// Schedule implements driver.Store.
func (s *Store) Schedule(ctx context.Context, id string, at time.Time) error {
	for _, r := range s.c.DoMulti(ctx, s.schedule(id, at)...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("redisstore: schedule %s: %w", id, err)
		}
	}
	return nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Record is everything the store holds of one task (see package inspect).
type Record = inspect.Record

var _ inspect.Store = (*Store)(nil)

// Inspect returns the whole Record of the task id, whoever owns it, or
// driver.ErrNotFound. Its reads are one pipelined round trip, not one
// atomic snapshot: a task that moves meanwhile may show a journal a step
// ahead of its record.
func (s *Store) Inspect(ctx context.Context, id string) (*Record, error) {
	if !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	t, p, j, r := s.keys(id)
	res := s.c.DoMulti(ctx,
		s.c.B().Hgetall().Key(t).Build(),
		s.c.B().Hgetall().Key(p).Build(),
		s.c.B().Hgetall().Key(s.offersKey(id)).Build(),
		s.c.B().Lrange().Key(j).Start(0).Stop(-1).Build(),
		s.c.B().Hgetall().Key(r).Build(),
		s.c.B().Get().Key(s.resultKey(id)).Build(),
		s.c.B().Hgetall().Key(s.eventsKey(id)).Build(),
		s.c.B().Get().Key(s.spillKey(id)).Build(),
		s.c.B().Get().Key(s.msgKey(id)).Build())
	var maps [5]map[string]string
	for i, k := range []int{0, 1, 2, 4, 6} {
		m, err := res[k].AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("redisstore: inspect %s: %w", id, err)
		}
		maps[i] = m
	}
	h, pending, offers, resp := maps[0], maps[1], maps[2], maps[3]
	if len(h) == 0 {
		return nil, driver.ErrNotFound
	}
	for _, k := range pkKeys(h["pk"]) {
		pending[k] = ""
	}
	if v, err := res[5].ToString(); err == nil { // a completed task's result, a failed one's error
		outcome(h, v)
	}
	if v, err := res[7].ToString(); err == nil && h["sp"] == "1" {
		h["_a"] = v
	}
	if v, err := res[8].ToString(); err == nil && h["ml"] == "1" {
		h["_m"] = v
	}
	raw, chunked := journalStream(h)
	if !chunked {
		var err error
		if raw, err = res[3].AsStrSlice(); err != nil {
			return nil, fmt.Errorf("redisstore: inspect %s journal: %w", id, err)
		}
	}
	if err := fillRequests(pending, raw); err != nil {
		return nil, fmt.Errorf("redisstore: inspect %s: %w", id, err)
	}
	task, err := decodeTask(id, h, pending, offers)
	if err != nil {
		return nil, err
	}
	rec := &Record{Task: task, Journal: make([]driver.Entry, len(raw)),
		Responses: rawMap(resp), Waiting: rawMap(pending), Offers: rawMap(offers),
		AnsweredAt: map[string]time.Time{}}
	for i, e := range raw {
		if rec.Journal[i], err = decodeEntry(e); err != nil {
			return nil, fmt.Errorf("redisstore: inspect %s: journal entry %d: %w", id, i, err)
		}
	}
	msTime := func(v string) time.Time {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	for k, v := range h {
		if key, ok := strings.CutPrefix(k, "answered:"); ok {
			rec.AnsweredAt[key] = msTime(v)
		}
	}
	rec.CancelRequestedAt = msTime(h["cancelat"])
	att, _ := strconv.Atoi(h["att"])
	rec.Attempts = att
	rec.Claims, _ = strconv.ParseInt(h["gen"], 10, 64)
	if rec.Events, err = eventsOf(maps[4]); err != nil {
		return nil, fmt.Errorf("redisstore: inspect %s: %w", id, err)
	}
	var forks []rueidis.Completed
	for _, e := range rec.Journal {
		if e.Kind == driver.KindFork {
			forks = append(forks, s.c.B().Hgetall().Key(s.forkKey(id, len(forks)+1)).Build())
		}
	}
	if len(forks) > 0 {
		now := time.Now()
		for i, r := range s.c.DoMulti(ctx, forks...) {
			fh, err := r.AsStrMap()
			if err != nil {
				return nil, fmt.Errorf("redisstore: inspect %s: fork %d: %w", id, i+1, err)
			}
			if len(fh) > 0 {
				rec.Forks = append(rec.Forks, forkRecord(i+1, fh, now))
			}
		}
	}
	return rec, nil
}

func rawMap(m map[string]string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = json.RawMessage(v)
	}
	return out
}
