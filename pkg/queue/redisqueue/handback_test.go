package redisqueue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/internal/testkit/rtcount"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
)

// settleScript is what a store's write that settles a message does (see
// redisqueue.HandBack): KEYS q; ARGV id now receipt. It removes the
// message and hands back the shard's next one.
var settleScript = rueidis.NewLuaScript(redisqueue.LuaReceive + `
redis.call('ZREM', KEYS[1], ARGV[1])
return receive(KEYS[1], ARGV[2], ARGV[3])
`)

// settling returns a handler that calls seen and then settles its message
// as a store's script does: removed, with the next one handed back when
// the consumer offers it (else it leaves the acknowledgement to Consume).
func settling(t *testing.T, c rueidis.Client, q *redisqueue.Queue, seen func(ctx context.Context, id string)) redisqueue.Handler {
	return func(ctx context.Context, id string) (redisqueue.Settle, error) {
		seen(ctx, id)
		hb := q.TakeHandBack(id)
		if hb == nil {
			return redisqueue.Ack, nil
		}
		now, receipt := hb.Args()
		if q.TakeHandBack(id) != nil {
			t.Error("a hand-back offer was taken twice")
		}
		key, _ := q.KeysFor(id)
		m, err := settleScript.Exec(ctx, c, []string{key}, []string{id, now, receipt}).ToMessage()
		if err != nil {
			return redisqueue.Ack, err
		}
		if err := hb.Reply(m); err != nil {
			t.Errorf("Reply: %v", err)
		}
		return redisqueue.Removed, nil
	}
}

// TestHandBack covers consumers that take their next message from the
// script that settles the current one.
func TestHandBack(t *testing.T) {
	runOnBackends(t, []backendCase{
		{"EachMessageOnceInOneScriptEach", testHandBackOnce},
		{"BoundedRunsPerShard", testHandBackBound},
		{"StoppedConsumerReleasesIt", testHandBackRelease},
		{"NoOfferForAnotherTaskOrQueue", testHandBackScope},
	})
}

// Every message is handled exactly once, and a busy consumer sends about
// one script per message (its settling write) instead of a receive and
// that write: far fewer round trips than two per message.
func testHandBackOnce(t *testing.T, c rueidis.Client) {
	const n = 200
	rc := rtcount.Wrap(c)
	q := redisqueue.New(rc, &redisqueue.Options{Key: uniqueKey(t), Visibility: time.Minute, Poll: time.Hour, Logger: logger(t)})
	var ids []string
	for i := range n {
		id := fmt.Sprintf("m%03d", i)
		ids = append(ids, id)
		mustEnqueue(t, q, id, time.Time{})
	}
	rc.Reset()
	var mu sync.Mutex
	seen := map[string]int{}
	done := make(chan struct{})
	cancel, wait := runConsume(t, q, 2, settling(t, rc, q, func(_ context.Context, id string) {
		mu.Lock()
		defer mu.Unlock()
		seen[id]++
		if len(seen) == n && seen[id] == 1 {
			close(done)
		}
	}))
	stopWhenDone(t, done, cancel, wait)
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("%s handled %d times, want once", id, seen[id])
		}
	}
	key, _ := q.Keys()
	if left, err := c.Do(t.Context(), c.B().Zcard().Key(key).Build()).AsInt64(); err != nil || left != 0 {
		t.Errorf("queue holds %d messages (%v), want none", left, err)
	}
	// n settling scripts and a few receives (each consumer's first, and
	// those that found nothing): one shard bounds no run of hand-backs.
	// Without hand-backs it would be at least 2n.
	if trips, most := rc.Trips(), int64(n+20); trips > most {
		t.Errorf("%d round trips for %d messages, want at most %d", trips, n, most)
	}
}

// A consumer handles at most MaxHandBacks handed-back messages in a row
// before it receives again, taking the shards in turn: while other shards
// hold due messages, no shard gets more than MaxHandBacks+1 handlings in
// a row.
func testHandBackBound(t *testing.T, c rueidis.Client) {
	const shards, per = 3, 40
	q := redisqueue.New(c, &redisqueue.Options{Prefix: uniquePrefix(t), Shards: shards, Visibility: time.Minute, Poll: time.Hour, Logger: logger(t)})
	for k := range shards {
		for _, id := range idsIn(k, shards, per) {
			mustEnqueue(t, q, id, time.Time{})
		}
	}
	var mu sync.Mutex
	var order []int
	done := make(chan struct{})
	cancel, wait := runConsume(t, q, 1, settling(t, c, q, func(_ context.Context, id string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, slots.ShardOf(id, shards))
		if len(order) == shards*per {
			close(done)
		}
	}))
	stopWhenDone(t, done, cancel, wait)
	left := make([]int, shards)
	for k := range left {
		left[k] = per
	}
	run, others := 0, false
	for i, k := range order {
		if i == 0 || k != order[i-1] {
			// A new run: does another shard still hold messages?
			run, others = 0, false
			for j, l := range left {
				others = others || (j != k && l > 0)
			}
		}
		run++
		left[k]--
		if others && run > redisqueue.MaxHandBacks+1 {
			t.Fatalf("shard %d handled %d times in a row while other shards waited (order %v)", k, run, order)
		}
	}
}

// A consumer stopped while it holds a handed-back message makes it due at
// once: another consumer takes it without waiting for its receipt to run
// out.
func testHandBackRelease(t *testing.T, c rueidis.Client) {
	key := uniqueKey(t)
	q := redisqueue.New(c, &redisqueue.Options{Key: key, Visibility: time.Hour, Poll: time.Hour, Logger: logger(t)})
	mustEnqueue(t, q, "first", time.Now().Add(-time.Second))
	mustEnqueue(t, q, "second", time.Time{})
	var mu sync.Mutex
	var handled []string
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	h := settling(t, c, q, func(_ context.Context, id string) {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, id)
		stop() // the consumer stops while this message is handled
	})
	go func() {
		defer close(done)
		q.Consume(ctx, 1, h)
	}()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("Consume did not return")
	}
	if strings.Join(handled, ",") != "first" {
		t.Fatalf("handled %v, want [first] (second handed back, then released)", handled)
	}
	score, err := c.Do(t.Context(), c.B().Zscore().Key(key).Member("second").Build()).AsFloat64()
	if err != nil {
		t.Fatalf("the handed-back message is gone: %v", err)
	}
	if score != float64(int64(score)) || score > float64(time.Now().UnixMilli()) {
		t.Fatalf("the handed-back message scores %f: still leased, want due now", score)
	}
	receive(t, q, "second")
}

// An offer is for the handled message's task on its own queue only, stands
// while the handler runs, and is taken once.
func testHandBackScope(t *testing.T, c rueidis.Client) {
	q := redisqueue.New(c, &redisqueue.Options{Key: uniqueKey(t), Visibility: time.Minute, Poll: time.Hour, Logger: logger(t)})
	other := redisqueue.New(c, &redisqueue.Options{Key: uniqueKey(t)})
	if q.TakeHandBack("a") != nil {
		t.Error("an offer outside a handler")
	}
	mustEnqueue(t, q, "a", time.Time{})
	mustEnqueue(t, q, "c", time.Now().Add(200*time.Millisecond))
	mustEnqueue(t, q, "d", time.Now().Add(400*time.Millisecond))
	got := make(chan [3]bool, 1)
	standing := make(chan bool, 1)
	runConsume(t, q, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		switch id {
		case "c": // leaves its offer untaken
		case "d": // handled after c, by the one consumer: c's offer is down
			standing <- q.TakeHandBack("c") != nil
		default:
			got <- [3]bool{q.TakeHandBack(id) != nil, q.TakeHandBack("b") != nil, other.TakeHandBack(id) != nil}
		}
		return redisqueue.Ack, nil
	})
	select {
	case g := <-got:
		if g != [3]bool{true, false, false} {
			t.Errorf("offers (own task, another task, another queue) = %v, want only the first", g)
		}
	case <-time.After(patience):
		t.Fatal("the message was never handled")
	}
	select {
	case st := <-standing:
		if st {
			t.Error("an offer stands after its handler returned")
		}
	case <-time.After(patience):
		t.Fatal("the last message was never handled")
	}
}

// stopWhenDone waits for done (at most patience: every message handled),
// then stops the consumers and waits for them.
func stopWhenDone(t *testing.T, done <-chan struct{}, cancel, wait func()) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("not every message was handled")
	}
	cancel()
	wait()
}
