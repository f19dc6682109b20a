package redisqueue_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/queuetest"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
)

// visibility is the short visibility timeout of the contract runs.
const visibility = 300 * time.Millisecond

// patience bounds waits for something that must happen; only a hang or a
// lost message reaches it.
const patience = 15 * time.Second

// backend is a Redis every test runs against (testredis.Backends): a real
// redis-server (the production target), the embedded miniredis (the local
// default) and a Redis Cluster.
type backend struct {
	name   string
	client func(t *testing.T) rueidis.Client
}

var backends = func() []backend {
	var bs []backend
	for _, name := range testredis.Backends() {
		bs = append(bs, backend{name, func(t *testing.T) rueidis.Client { return testredis.Client(t, name) }})
	}
	return bs
}()

// uniqueKey is a queue key private to t, also across runs on a shared
// REDIS_URL or the shared cluster; its hash tag keeps the queue's keys in
// one slot.
func uniqueKey(t *testing.T) string {
	return "queuetest:" + t.Name() + ":{" + rand.Text()[:8] + "}"
}

// uniquePrefix is a key prefix private to t (without braces: the shards
// add their own hash tags).
func uniquePrefix(t *testing.T) string {
	return "queuetest:" + strings.NewReplacer("{", "", "}", "").Replace(t.Name()) + ":" + rand.Text()[:8] + ":"
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// TestRedisContract runs the shared queue contract on both backends, with
// one shard (a single key) and with several.
func TestRedisContract(t *testing.T) {
	for _, b := range backends {
		for _, shards := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/shards=%d", b.name, shards), func(t *testing.T) {
				t.Parallel()
				c := b.client(t)
				queuetest.Run(t, func(t *testing.T) queuetest.Harness {
					o := &redisqueue.Options{
						Shards:     shards,
						Visibility: visibility,
						Poll:       20 * time.Millisecond,
						Logger:     logger(t),
					}
					if shards == 1 {
						o.Key = uniqueKey(t)
					} else {
						o.Prefix = uniquePrefix(t)
					}
					return harness(redisqueue.New(c, o), visibility)
				})
			})
		}
	}
}

// harness adapts the pull-style queue q to the contract.
func harness(q *redisqueue.Queue, vis time.Duration) queuetest.Harness {
	return queuetest.Pull[redisqueue.Delivery]{Q: q, Visibility: vis, Receive: q.Receive, Ack: q.Ack, Retry: q.Retry,
		ID: func(d redisqueue.Delivery) string { return d.TaskID }}
}

// backendCase is one test of a table run on every backend.
type backendCase struct {
	name string
	run  func(t *testing.T, c rueidis.Client)
}

// runOnBackends runs each case as a parallel subtest on each backend's
// client (one client per backend, shared by its cases).
func runOnBackends(t *testing.T, cases []backendCase) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := b.client(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, c)
				})
			}
		})
	}
}

// TestRedis covers what is specific to the Redis adapter: Receive's idle
// answer, the sorted set's state, the key's expiry, and Consume.
func TestRedis(t *testing.T) {
	runOnBackends(t, []backendCase{
		{"MaxDelayIsUnlimited", testMaxDelay},
		{"ReceiveOnEmptyQueue", testReceiveEmpty},
		{"ReceiveBeforeDue", testReceiveBeforeDue},
		{"AckRemovesMember", testAckRemoves},
		{"DedupKeepsOneMemberAtEarliest", testDedupState},
		{"KeyExpires", testKeyExpires},
		{"KeyExpiresByDefault", testKeyExpiresByDefault},
		{"NothingBesideTheSet", testBookkeeping},
		{"ConsumeSkipsAckWhenSettled", testConsumeSettled},
		{"ConsumeAfterRemovedStillDelivers", testConsumeRemoved},
		{"ConsumeDeliversEveryID", testConsumeAll},
		{"ConsumeRedeliversOnHandlerError", testConsumeHandlerError},
		{"ConsumeFinishesCurrentMessageOnCancel", testConsumeFinishesCurrent},
		{"DeferHoldsAMessageUntil", testDefer},
		{"DeferredMessageReachesAnotherProcess", testDeferredReachesOthers},
	})
}

func zcard(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(t.Context(), c.B().Zcard().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("ZCARD: %v", err)
	}
	return n
}

func pttl(t *testing.T, c rueidis.Client, key string) time.Duration {
	t.Helper()
	ms, err := c.Do(t.Context(), c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("PTTL: %v", err)
	}
	return time.Duration(ms) * time.Millisecond
}

func mustEnqueue(t *testing.T, q *redisqueue.Queue, id string, at time.Time) {
	t.Helper()
	if err := q.Enqueue(t.Context(), id, at); err != nil {
		t.Fatalf("Enqueue(%q): %v", id, err)
	}
}

// receive polls Receive until it returns a message, which must be want.
func receive(t *testing.T, q *redisqueue.Queue, want string) redisqueue.Delivery {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		d, ok, wait, err := q.Receive(t.Context())
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if ok {
			if d.TaskID != want {
				t.Fatalf("Receive = %q, want %q", d.TaskID, want)
			}
			return d
		}
		time.Sleep(max(wait, time.Millisecond))
	}
	t.Fatalf("%q never received", want)
	return redisqueue.Delivery{}
}

func testMaxDelay(t *testing.T, c rueidis.Client) {
	if got := redisqueue.New(c, nil).MaxDelay(); got != 0 {
		t.Errorf("MaxDelay() = %v, want 0 (a sorted set holds any delay)", got)
	}
}

// An empty queue answers "nothing", without error, and a positive wait no
// longer than the poll interval.
func testReceiveEmpty(t *testing.T, c rueidis.Client) {
	poll := 40 * time.Millisecond
	q := redisqueue.New(c, &redisqueue.Options{Key: uniqueKey(t), Poll: poll})
	d, ok, wait, err := q.Receive(t.Context())
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if ok {
		t.Fatalf("Receive on an empty queue = ok, delivery %+v", d)
	}
	if wait <= 0 || wait > poll {
		t.Errorf("wait = %v, want in (0, %v]", wait, poll)
	}
}

// A message due in 300 ms is not received before its time: Receive says
// not ok with a wait no longer than the time left, then it comes.
func testReceiveBeforeDue(t *testing.T, c rueidis.Client) {
	q := redisqueue.New(c, &redisqueue.Options{Key: uniqueKey(t), Poll: 5 * time.Second})
	at := time.Now().Add(300 * time.Millisecond)
	mustEnqueue(t, q, "delayed", at)
	left := time.Until(at)
	d, ok, wait, err := q.Receive(t.Context())
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	switch {
	case ok && (d.TaskID != "delayed" || time.Now().UnixMilli() < at.UnixMilli()):
		t.Fatalf("Receive = %q before it was due", d.TaskID)
	case ok:
		t.Log("machine too slow to observe the not-yet-due state")
	case wait <= 0 || wait > left+time.Millisecond:
		t.Errorf("wait = %v, want in (0, %v]: the time until the message is due", wait, left)
	}
	if !ok {
		receive(t, q, "delayed")
		if now := time.Now(); now.UnixMilli() < at.UnixMilli() {
			t.Errorf("received %v early", at.Sub(now))
		}
	}
}

// A received message stays in the set (hidden) until it is acknowledged,
// and the Ack removes it.
func testAckRemoves(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key})
	mustEnqueue(t, q, "x", time.Time{})
	d := receive(t, q, "x")
	if n := zcard(t, c, key); n != 1 {
		t.Errorf("while handled: ZCARD = %d, want 1 (the message stays until acknowledged)", n)
	}
	if _, ok, _, err := q.Receive(t.Context()); err != nil || ok {
		t.Errorf("second Receive while handled: ok=%v err=%v, want hidden", ok, err)
	}
	if err := q.Ack(t.Context(), d); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if n := zcard(t, c, key); n != 0 {
		t.Errorf("after Ack: ZCARD = %d, want 0", n)
	}
}

// Enqueueing one id several times keeps one member, scored at the earliest
// time asked for.
func testDedupState(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key})
	now := time.Now()
	early := now.Add(time.Hour)
	mustEnqueue(t, q, "x", now.Add(2*time.Hour))
	mustEnqueue(t, q, "x", early)
	mustEnqueue(t, q, "x", now.Add(3*time.Hour))
	if n := zcard(t, c, key); n != 1 {
		t.Errorf("ZCARD = %d, want 1", n)
	}
	score, err := c.Do(t.Context(), c.B().Zscore().Key(key).Member("x").Build()).AsFloat64()
	if err != nil {
		t.Fatalf("ZSCORE: %v", err)
	}
	if int64(score) != early.UnixMilli() {
		t.Errorf("due at %v, want the earliest %v", time.UnixMilli(int64(score)), early)
	}
}

// Every enqueue sets the key's expiry, and receiving or retrying keeps it.
func testKeyExpires(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, KeyTTL: time.Hour})
	mustEnqueue(t, q, "x", time.Time{})
	mustEnqueue(t, q, "y", time.Now().Add(time.Minute))
	if ttl := pttl(t, c, key); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("after Enqueue: PTTL = %v, want in (0, 1h]", ttl)
	}
	d := receive(t, q, "x")
	if ttl := pttl(t, c, key); ttl <= 0 {
		t.Errorf("after Receive: PTTL = %v, want > 0", ttl)
	}
	if err := q.Retry(t.Context(), d, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if ttl := pttl(t, c, key); ttl <= 0 {
		t.Errorf("after Retry: PTTL = %v, want > 0", ttl)
	}
}

// The queue keeps nothing beside its set (the wake channel is pub/sub): a receipt is
// the message's score. An enqueue that arrives while a message is handled
// replaces the receipt with its own time, later or earlier, and Ack then
// keeps the message, due at that time.
func testBookkeeping(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, KeyTTL: time.Hour})
	mustEnqueue(t, q, "a", time.Time{})
	mustEnqueue(t, q, "b", time.Time{})

	da := receive(t, q, "a")
	if err := q.Ack(t.Context(), da); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	db := receive(t, q, "b")
	later := time.Now().Add(time.Hour)
	mustEnqueue(t, q, "b", later) // arrives while b is handled
	if err := q.Ack(t.Context(), db); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	score, err := c.Do(t.Context(), c.B().Zscore().Key(key).Member("b").Build()).AsFloat64()
	if err != nil {
		t.Fatalf("after Ack, b is gone (ZSCORE: %v); want it due at the time enqueued meanwhile", err)
	}
	if int64(score) != later.UnixMilli() {
		t.Errorf("after Ack, b due at %v, want %v", time.UnixMilli(int64(score)), later)
	}
	// A later enqueue of a waiting message does not delay it.
	mustEnqueue(t, q, "b", later.Add(time.Hour))
	if s2, _ := c.Do(t.Context(), c.B().Zscore().Key(key).Member("b").Build()).AsFloat64(); int64(s2) != later.UnixMilli() {
		t.Errorf("a later enqueue moved b to %v, want it kept at %v", time.UnixMilli(int64(s2)), later)
	}
	keys, err := testredis.ScanAll(t.Context(), c, key+"*")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{key}; !slices.Equal(keys, want) {
		t.Errorf("queue keys = %v, want %v", keys, want)
	}
}

// score is the due time of id's message (false: none).
func score(t *testing.T, c rueidis.Client, key, id string) (float64, bool) {
	t.Helper()
	sc, err := c.Do(t.Context(), c.B().Zscore().Key(key).Member(id).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("ZSCORE: %v", err)
	}
	return sc, true
}

// Defer makes a message a receipt running out at the time given, later or
// earlier than it was, or adds one: the consumer that handles it no longer
// removes it with its Ack, an enqueue replaces it, and it is delivered at
// that time, not before. Only a defer that makes a message due earlier
// than it was, or adds one, publishes on the wake channel.
func testDefer(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, Visibility: time.Minute})
	_, wake := q.Keys()
	wakes := testredis.Listen(t, c, wake)
	mustEnqueue(t, q, "x", time.Time{})
	d := receive(t, q, "x")
	later := time.Now().Add(2 * time.Minute)
	if err := q.Defer(t.Context(), "x", later); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	if sc, ok := score(t, c, key, "x"); !ok || int64(sc) != later.UnixMilli() || sc == float64(int64(sc)) {
		t.Errorf("after Defer: score %v (present %v), want the receipt %d.5", sc, ok, later.UnixMilli())
	}
	if err := q.Ack(t.Context(), d); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if _, ok := score(t, c, key, "x"); !ok {
		t.Fatalf("the Ack of the delivery removed a deferred message")
	}
	if _, ok, _, err := q.Receive(t.Context()); err != nil || ok {
		t.Errorf("Receive of a deferred message before its time: ok=%v err=%v", ok, err)
	}
	// An enqueue (the worker's next turn) replaces it, earlier or later.
	soon := time.Now().Add(time.Second)
	mustEnqueue(t, q, "x", soon)
	if sc, _ := score(t, c, key, "x"); int64(sc) != soon.UnixMilli() {
		t.Errorf("after an enqueue: due at %v, want %v", time.UnixMilli(int64(sc)), soon)
	}
	// Deferring a message that is gone adds it; moving one earlier or
	// adding one publishes, moving one later does not.
	published := wakes.Count(t) // the enqueue just above published
	if err := q.Defer(t.Context(), "y", later); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	if _, ok := score(t, c, key, "y"); !ok {
		t.Errorf("Defer of an id without a message added none")
	}
	if err := q.Defer(t.Context(), "y", later.Add(time.Minute)); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	if err := q.Defer(t.Context(), "y", soon); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	if got := wakes.Count(t) - published; got != 2 {
		t.Errorf("three defers (add, later, earlier) published %d wakes, want 2", got)
	}
}

// A message whose handler defers it and stops (a worker that dies holding
// its lease) reaches a consumer of another process at the deferred time,
// not before, although that process heard of nothing: it learns the
// message's time from its receives, which a later defer only postpones.
func testDeferredReachesOthers(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	opts := &redisqueue.Options{Key: key, Visibility: 500 * time.Millisecond, Logger: logger(t)}
	q1, q2 := redisqueue.New(c, opts), redisqueue.New(c, opts)
	mustEnqueue(t, q1, "x", time.Time{})
	handled, deferred := make(chan struct{}), make(chan time.Time, 1)
	stuck := make(chan struct{})
	cancel1, wait1 := runConsume(t, q1, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		// Renewals of a lease: each moves the message to the lease's end.
		for i := range 2 {
			at := time.Now().Add(time.Duration(i+1) * 700 * time.Millisecond)
			if err := q1.Defer(ctx, id, at); err != nil {
				t.Errorf("Defer: %v", err)
			}
			if i == 0 {
				close(handled)
			} else {
				deferred <- at
			}
			time.Sleep(200 * time.Millisecond)
		}
		<-stuck // the worker is gone: it settles nothing
		return redisqueue.Ack, nil
	})
	t.Cleanup(func() { close(stuck); cancel1(); wait1() })
	select {
	case <-handled:
	case <-time.After(patience):
		t.Fatal("message never delivered")
	}
	// Another process, started while the message is held.
	got := make(chan time.Time, 1)
	cancel2, wait2 := runConsume(t, q2, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		select {
		case got <- time.Now():
		default:
		}
		return redisqueue.Removed, nil
	})
	defer func() { cancel2(); wait2() }()
	at := <-deferred
	select {
	case when := <-got:
		if when.UnixMilli() < at.UnixMilli() {
			t.Errorf("delivered to the other process %v before the deferred time", at.Sub(when))
		}
	case <-time.After(patience):
		t.Fatal("the deferred message never reached the other process")
	}
}

// A handler that reports the delivery settled (its own write made the
// message due again) gets no acknowledgement: the message keeps the time
// that write gave it.
func testConsumeSettled(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, Visibility: time.Minute, Logger: logger(t)})
	mustEnqueue(t, q, "s", time.Time{})
	handled := make(chan struct{})
	var once sync.Once
	cancel, wait := runConsume(t, q, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		once.Do(func() { close(handled) })
		return redisqueue.Requeued, nil
	})
	select {
	case <-handled:
	case <-time.After(patience):
		t.Fatal("message never delivered")
	}
	cancel()
	wait()
	score, err := c.Do(t.Context(), c.B().Zscore().Key(key).Member("s").Build()).AsFloat64()
	if err != nil {
		t.Fatalf("a settled delivery was acknowledged (ZSCORE: %v)", err)
	}
	if until := time.Until(time.UnixMilli(int64(score))); until < 50*time.Second {
		t.Errorf("settled message due in %v, want it still hidden for the visibility timeout", until)
	}
}

// With default options the key still expires (8 days).
func testKeyExpiresByDefault(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key})
	mustEnqueue(t, q, "x", time.Time{})
	if ttl := pttl(t, c, key); ttl <= 0 || ttl > 8*24*time.Hour {
		t.Errorf("PTTL = %v, want in (0, 8 days]", ttl)
	}
}

// runConsume starts Consume. cancel ends its context; wait waits
// (generously) for Consume to return.
func runConsume(t *testing.T, q *redisqueue.Queue, n int, h redisqueue.Handler) (cancel, wait func()) {
	t.Helper()
	ctx, cancelCtx := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Consume(ctx, n, h)
	}()
	wait = func() {
		t.Helper()
		select {
		case <-done:
		case <-time.After(patience):
			t.Fatal("Consume did not return after its context was cancelled")
		}
	}
	t.Cleanup(func() {
		cancelCtx()
		select {
		case <-done:
		case <-time.After(patience):
			t.Error("Consume did not return after its context was cancelled")
		}
	})
	return cancelCtx, wait
}

// Four consumers run at once and deliver every one of 200 ids; Consume
// returns when its context is cancelled, with every message acknowledged.
func testConsumeAll(t *testing.T, c rueidis.Client) {
	const total, consumers = 200, 4
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, Visibility: time.Minute, Logger: logger(t)})
	want := make(map[string]bool, total)
	for i := range total {
		id := fmt.Sprintf("task-%03d", i)
		want[id] = true
		mustEnqueue(t, q, id, time.Time{})
	}

	var (
		mu         sync.Mutex
		seen       = make(map[string]int, total)
		unexpected []string
		calls      atomic.Int64
		arrived    atomic.Int64
		together   = make(chan struct{})
		allSeen    = make(chan struct{})
	)
	cancel, wait := runConsume(t, q, consumers, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		// The first four calls wait for each other: they only all return
		// if four consumers really run at once.
		if calls.Add(1) <= consumers {
			if arrived.Add(1) == consumers {
				close(together)
			}
			select {
			case <-together:
			case <-time.After(patience):
				t.Errorf("only %d of %d consumers ran at once", arrived.Load(), consumers)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !want[id] {
			unexpected = append(unexpected, id)
			return redisqueue.Ack, nil
		}
		seen[id]++
		if seen[id] == 1 && len(seen) == total {
			close(allSeen)
		}
		return redisqueue.Ack, nil
	})
	select {
	case <-allSeen:
	case <-time.After(patience):
	}
	cancel()
	wait()

	mu.Lock()
	defer mu.Unlock()
	if len(unexpected) > 0 {
		t.Errorf("handler called %d times with ids never enqueued, e.g. %q", len(unexpected), unexpected[0])
	}
	if len(seen) != total {
		t.Fatalf("delivered %d of %d ids", len(seen), total)
	}
	if n := zcard(t, c, key); n != 0 {
		t.Errorf("after Consume returned: ZCARD = %d, want 0 (every handled message acknowledged)", n)
	}
}

// A handler error makes the message due again soon (well before the
// one-minute visibility timeout); once handled, it is acknowledged.
func testConsumeHandlerError(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, Visibility: time.Minute, Logger: logger(t)})
	mustEnqueue(t, q, "flaky", time.Time{})
	var calls atomic.Int64
	var other atomic.Int64
	handled := make(chan struct{})
	cancel, wait := runConsume(t, q, 2, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		if id != "flaky" {
			other.Add(1)
			return redisqueue.Ack, nil
		}
		switch calls.Add(1) {
		case 1:
			return redisqueue.Ack, errors.New("transient failure")
		case 2:
			close(handled)
		}
		return redisqueue.Ack, nil
	})
	select {
	case <-handled:
	case <-time.After(patience):
		t.Errorf("message not redelivered after a handler error (handler calls: %d)", calls.Load())
	}
	cancel()
	wait()
	if n := other.Load(); n > 0 {
		t.Errorf("handler called %d times with ids never enqueued", n)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("handler called %d times, want 2 (one failure, one success)", n)
	}
	if n := zcard(t, c, key); n != 0 {
		t.Errorf("after success: ZCARD = %d, want 0", n)
	}
}

// Cancelling Consume's context does not cancel the handler running at that
// moment: the message finishes, is acknowledged, then Consume returns.
func testConsumeFinishesCurrent(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, Visibility: time.Minute, Logger: logger(t)})
	mustEnqueue(t, q, "slow", time.Time{})
	started, release := make(chan struct{}), make(chan struct{})
	var handlerCtxErr error
	var once sync.Once
	cancel, wait := runConsume(t, q, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		if id != "slow" {
			t.Errorf("handler called with %q, never enqueued", id)
			return redisqueue.Ack, nil
		}
		once.Do(func() { close(started) })
		<-release
		handlerCtxErr = ctx.Err()
		return redisqueue.Ack, nil
	})
	select {
	case <-started:
	case <-time.After(patience):
		t.Fatal("message never delivered")
	}
	cancel() // shutdown while the message is being handled
	close(release)
	wait()
	if handlerCtxErr != nil {
		t.Errorf("handler context ended by Consume's cancellation: %v", handlerCtxErr)
	}
	if n := zcard(t, c, key); n != 0 {
		t.Errorf("after shutdown: ZCARD = %d, want 0 (the running message acknowledged)", n)
	}
}

// A handler that reports its message removed sends no acknowledgement; the
// consumer still delivers a message that was due alongside it, and one
// enqueued later (whose publication on the wake channel ends its idling), although its poll
// interval is an hour.
func testConsumeRemoved(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, Visibility: time.Minute, Poll: time.Hour, Logger: logger(t)})
	mustEnqueue(t, q, "a", time.Time{})
	mustEnqueue(t, q, "b", time.Time{})
	seen := make(chan string, 8)
	cancel, wait := runConsume(t, q, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		// The handler's own write removes the message, as a dispatching
		// store's terminal commit does.
		if err := c.Do(ctx, c.B().Zrem().Key(key).Member(id).Build()).Error(); err != nil {
			t.Errorf("ZREM: %v", err)
		}
		seen <- id
		return redisqueue.Removed, nil
	})
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case id := <-seen:
			got[id] = true
		case <-time.After(patience):
			t.Fatalf("delivered %v of a and b, both due", got)
		}
	}
	mustEnqueue(t, q, "c", time.Time{})
	select {
	case id := <-seen:
		if id != "c" {
			t.Errorf("delivered %q, want c", id)
		}
	case <-time.After(patience):
		t.Fatal("a message enqueued while the consumer idled was not delivered")
	}
	cancel()
	wait()
}

// SettleOf: a handler's write that did not settle the message asks for an
// acknowledgement; one that did removed it when the task ended, else made
// it due again.
func TestSettleOf(t *testing.T) {
	for _, c := range []struct {
		settled, ended bool
		want           redisqueue.Settle
	}{{false, false, redisqueue.Ack}, {false, true, redisqueue.Ack}, {true, false, redisqueue.Requeued}, {true, true, redisqueue.Removed}} {
		if got := redisqueue.SettleOf(c.settled, c.ended); got != c.want {
			t.Errorf("SettleOf(%v, %v) = %v, want %v", c.settled, c.ended, got, c.want)
		}
	}
}
