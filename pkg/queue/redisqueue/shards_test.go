package redisqueue_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// idsIn returns n task ids whose message lives in shard k of shards.
func idsIn(k, shards, n int) []string {
	var ids []string
	for len(ids) < n {
		if id := driver.NewID(); slots.ShardOf(id, shards) == k {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestShards covers the sharded queue: where messages live, fair
// consumption, and wakes that reach idle consumers from any shard.
func TestShards(t *testing.T) {
	runOnBackends(t, []backendCase{
		{"KeysSitBesideTheirTasks", testShardKeys},
		{"OneShardKeepsTheSingleKey", testOneShardKey},
		{"Misuse", testShardMisuse},
		{"BusyShardStarvesNoOther", testFairness},
		{"IdleConsumersWakeForEveryShard", testWakeEveryShard},
		{"DelayedMessageWakesIdleConsumer", testDelayedWake},
		{"UnannouncedMessageFoundByPoll", testPollSafetyNet},
	})
}

// Shard k's key carries a hash tag in shard k's slot range, and a task's
// message lands in the shard of its id (KeysFor), so that on a Redis
// Cluster it shares a master with the task's own keys.
func testShardKeys(t *testing.T, c rueidis.Client) {
	const shards = 12
	prefix := uniquePrefix(t)
	q := redisqueue.New(c, &redisqueue.Options{Prefix: prefix, Shards: shards})
	if q.Shards() != shards {
		t.Fatalf("Shards() = %d, want %d", q.Shards(), shards)
	}
	for k := range shards {
		id := idsIn(k, shards, 1)[0]
		key, wake := q.KeysFor(id)
		if want := prefix + "queue{" + slots.Tags(shards)[k] + "}"; key != want || wake != want+":wake" {
			t.Errorf("KeysFor(shard %d) = %q, %q; want %q and its :wake", k, key, wake, want)
		}
		if lo, hi := k*slots.Count/shards, (k+1)*slots.Count/shards; slots.Slot(key) < lo || slots.Slot(key) >= hi {
			t.Errorf("shard %d key %q in slot %d, want in [%d, %d)", k, key, slots.Slot(key), lo, hi)
		}
		mustEnqueue(t, q, id, time.Time{})
		if err := c.Do(t.Context(), c.B().Zscore().Key(key).Member(id).Build()).Error(); err != nil {
			t.Errorf("message of %s not in its shard %d (%s): %v", id, k, key, err)
		}
	}
}

// With one shard the queue keeps the single key Prefix+"{queue}" of
// earlier versions (existing deployments keep their messages), and Keys
// answers it for every task.
func testOneShardKey(t *testing.T, c rueidis.Client) {
	prefix := uniquePrefix(t)
	q := redisqueue.New(c, &redisqueue.Options{Prefix: prefix})
	id := driver.NewID()
	if k, w := q.KeysFor(id); k != prefix+"{queue}" || w != prefix+"{queue}:wake" {
		t.Errorf("KeysFor = %q, %q; want %q and its :wake", k, w, prefix+"{queue}")
	}
	if k, w := q.Keys(); k != prefix+"{queue}" || w != prefix+"{queue}:wake" {
		t.Errorf("Keys = %q, %q", k, w)
	}
	mustEnqueue(t, q, id, time.Time{})
	if n := zcard(t, c, prefix+"{queue}"); n != 1 {
		t.Errorf("ZCARD %s = %d, want 1", prefix+"{queue}", n)
	}
}

// A Key with several shards, or a prefix with a brace, is refused with an
// error, never a panic, and nothing is written.
func testShardMisuse(t *testing.T, c rueidis.Client) {
	for _, o := range []redisqueue.Options{
		{Key: uniqueKey(t), Shards: 3},
		{Prefix: "app{x}:" + uniquePrefix(t), Shards: 3},
	} {
		q := redisqueue.New(c, &o)
		if err := q.Enqueue(t.Context(), "x", time.Time{}); err == nil {
			t.Errorf("Enqueue with %+v: no error", o)
		}
		if _, _, _, err := q.Receive(t.Context()); err == nil {
			t.Errorf("Receive with %+v: no error", o)
		}
	}
}

// One consumer, 100 messages due in one shard and one in another: the
// lone message is delivered among the first few, not after the busy
// shard is drained.
func testFairness(t *testing.T, c rueidis.Client) {
	const shards = 4
	q := redisqueue.New(c, &redisqueue.Options{Prefix: uniquePrefix(t), Shards: shards, Visibility: time.Minute, Logger: logger(t)})
	for _, id := range idsIn(0, shards, 100) {
		mustEnqueue(t, q, id, time.Time{})
	}
	lone := idsIn(2, shards, 1)[0]
	mustEnqueue(t, q, lone, time.Time{})
	var mu sync.Mutex
	calls := 0
	at := 0
	done := make(chan struct{})
	cancel, wait := runConsume(t, q, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if id == lone {
			at = calls
			close(done)
		}
		return redisqueue.Ack, nil
	})
	select {
	case <-done:
	case <-time.After(patience):
		t.Fatal("the lone message was never delivered")
	}
	cancel()
	wait()
	if at > shards+1 {
		t.Errorf("the lone message was delivery %d, want among the first %d (each shard in turn)", at, shards+1)
	}
}

// Consumers idle with an hour's poll interval take a message enqueued in
// any shard, by another process, at once: the enqueue's publication wakes
// them.
func testWakeEveryShard(t *testing.T, c rueidis.Client) {
	const shards = 5
	other, seen := idleConsumers(t, c, shards)
	// A first message shows the consumers running; the shards are empty
	// after it, so the consumers idle until woken.
	first := idsIn(0, shards, 1)[0]
	mustEnqueue(t, other, first, time.Time{})
	expect(t, seen, first)
	for k := range shards {
		time.Sleep(50 * time.Millisecond) // let the consumers go idle
		id := idsIn(k, shards, 1)[0]
		mustEnqueue(t, other, id, time.Time{})
		expect(t, seen, id)
	}
}

// idleConsumers starts two consumers of a queue of its own with the given
// shards, polling once an hour (so only a publication wakes them), that
// send each id they are given to seen; other is another process's handle
// on the same queue.
func idleConsumers(t *testing.T, c rueidis.Client, shards int) (other *redisqueue.Queue, seen <-chan string) {
	prefix := uniquePrefix(t)
	q := redisqueue.New(c, &redisqueue.Options{Prefix: prefix, Shards: shards, Poll: time.Hour, Visibility: time.Minute, Logger: logger(t)})
	ch := make(chan string, 16)
	runConsume(t, q, 2, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		ch <- id
		return redisqueue.Ack, nil
	})
	return redisqueue.New(c, &redisqueue.Options{Prefix: prefix, Shards: shards}), ch
}

func expect(t *testing.T, seen <-chan string, want string) {
	t.Helper()
	select {
	case id := <-seen:
		if id != want {
			t.Fatalf("delivered %q, want %q", id, want)
		}
	case <-time.After(patience):
		t.Fatalf("%q was not delivered to idle consumers", want)
	}
}

// A delayed message enqueued by another process while the consumers idle
// (poll interval an hour) is delivered when due, not before: the
// publication carries its due time.
func testDelayedWake(t *testing.T, c rueidis.Client) {
	const shards = 3
	other, seen := idleConsumers(t, c, shards)
	first := idsIn(1, shards, 1)[0]
	mustEnqueue(t, other, first, time.Time{})
	expect(t, seen, first)
	id := idsIn(2, shards, 1)[0]
	at := time.Now().Add(300 * time.Millisecond)
	mustEnqueue(t, other, id, at)
	expect(t, seen, id)
	if now := time.Now(); now.UnixMilli() < at.UnixMilli() {
		t.Errorf("delivered %v before it was due", at.Sub(now))
	}
}

// A message written without a publication (a lost wake) is still found
// within the poll interval.
func testPollSafetyNet(t *testing.T, c rueidis.Client) {
	const shards = 3
	q := redisqueue.New(c, &redisqueue.Options{Prefix: uniquePrefix(t), Shards: shards, Poll: 200 * time.Millisecond, Visibility: time.Minute, Logger: logger(t)})
	seen := make(chan string, 4)
	runConsume(t, q, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		seen <- id
		return redisqueue.Ack, nil
	})
	time.Sleep(100 * time.Millisecond)
	id := idsIn(1, shards, 1)[0]
	key, _ := q.KeysFor(id)
	if err := c.Do(t.Context(), c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(time.Now().UnixMilli()), id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	expect(t, seen, id)
}

// When the wake subscription's connection is killed, the consumers
// subscribe again and look at every shard: a message that arrived
// unannounced meanwhile is delivered although the poll interval is an
// hour. (redis-server only: the embedded Redis has no CLIENT KILL.)
func TestResubscribe(t *testing.T) {
	c := testredis.Client(t, "redis-server")
	const shards = 3
	q := redisqueue.New(c, &redisqueue.Options{Prefix: uniquePrefix(t), Shards: shards, Poll: time.Hour, Visibility: time.Minute, Logger: logger(t)})
	seen := make(chan string, 4)
	runConsume(t, q, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		seen <- id
		return redisqueue.Ack, nil
	})
	first := idsIn(0, shards, 1)[0]
	mustEnqueue(t, q, first, time.Time{})
	expect(t, seen, first)

	// Subscribed and settled: a message written unannounced now is not
	// seen (the poll interval is an hour)...
	subscriber := subscriberID(t, c, shards)
	testredis.Settle(t, c, 300*time.Millisecond)
	id := idsIn(2, shards, 1)[0]
	key, _ := q.KeysFor(id)
	if err := c.Do(t.Context(), c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(time.Now().UnixMilli()), id).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-seen:
		t.Fatalf("%q delivered before the subscription was lost: the test proves nothing", got)
	case <-time.After(300 * time.Millisecond):
	}
	// ...until the subscription's connection dies.
	if err := c.Do(t.Context(), c.B().Arbitrary("CLIENT", "KILL", "ID", subscriber).Build()).Error(); err != nil {
		t.Fatalf("CLIENT KILL ID %s: %v", subscriber, err)
	}
	expect(t, seen, id)
}

// subscriberID waits for the connection subscribed to n channels and
// returns its id. (RESP3 counts a subscribed connection as a normal
// client: it is found by its subscriptions.)
func subscriberID(t *testing.T, c rueidis.Client, n int) string {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		list, err := c.Do(t.Context(), c.B().ClientList().Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimPrefix(list, "txt:"), "\n") {
			var id string
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "id="); ok {
					id = v
				}
				if f == "sub="+strconv.Itoa(n) {
					return id
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no connection subscribed to %d channels", n)
	return ""
}

// Two idle processes of four consumers each, over a window shorter than
// the poll interval, send Redis no command at all once they have looked
// at their shards: idle consumers wait on their process's subscription.
// (The bundle's test measures whole idle processes, sweeper included.)
func TestIdleConsumersSendNothing(t *testing.T) {
	const shards = 4
	url := testredis.Start(t)
	newClient := func() rueidis.Client {
		opt, err := rueidis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		opt.DisableCache = true
		opt.Dialer.KeepAlive = time.Minute // no background PINGs in the window
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	admin := newClient()
	prefix := uniquePrefix(t)
	seen := make(chan string, 4)
	var qs []*redisqueue.Queue
	for range 2 {
		q := redisqueue.New(newClient(), &redisqueue.Options{Prefix: prefix, Shards: shards, Logger: logger(t)})
		qs = append(qs, q)
		runConsume(t, q, 4, func(ctx context.Context, id string) (redisqueue.Settle, error) {
			seen <- id
			return redisqueue.Ack, nil
		})
	}
	// A message taken shows both processes subscribed and settled.
	id := idsIn(3, shards, 1)[0]
	testredis.Settle(t, admin, 300*time.Millisecond)
	mustEnqueue(t, qs[0], id, time.Time{})
	expect(t, seen, id)
	before := testredis.Settle(t, admin, 300*time.Millisecond)
	time.Sleep(2 * time.Second)
	after := testredis.CommandCalls(t, admin)
	if _, sent := testredis.Sent(before, after); len(sent) > 0 {
		t.Errorf("idle consumers sent %v in 2s, want nothing", sent)
	}
	// And the first message after the idle spell is still taken at once.
	id = idsIn(1, shards, 1)[0]
	mustEnqueue(t, qs[1], id, time.Time{})
	expect(t, seen, id)
}

// An idle process looks at each shard about once per poll interval,
// however many consumers it runs: two processes of eight consumers each
// on three shards, with a 400 ms poll interval, send no more than
// processes × shards × (window/poll + 1) receives in a window, and no
// other command.
func TestIdleCostPerProcessNotPerConsumer(t *testing.T) {
	const shards, procs, consumers = 3, 2, 8
	const poll, window = 400 * time.Millisecond, 2 * time.Second
	c := testredis.Client(t, "redis-server")
	prefix := uniquePrefix(t)
	for range procs {
		q := redisqueue.New(c, &redisqueue.Options{Prefix: prefix, Shards: shards, Poll: poll, Logger: logger(t)})
		runConsume(t, q, consumers, func(ctx context.Context, id string) (redisqueue.Settle, error) {
			return redisqueue.Ack, nil
		})
	}
	time.Sleep(500 * time.Millisecond)
	before := testredis.CommandCalls(t, c)
	time.Sleep(window)
	after := testredis.CommandCalls(t, c)
	limit := int64(procs * shards * (int(window/poll) + 1))
	for name, n := range after {
		d := n - before[name]
		switch {
		case d == 0 || name == "info" || name == "ping":
		case name == "evalsha" || name == "zrange":
			t.Logf("%d %s in %v (limit %d)", d, name, window, limit)
			if d > limit {
				t.Errorf("%d %s in %v, want at most %d (each process looks at each shard once per poll)", d, name, window, limit)
			}
		default:
			t.Errorf("idle consumers sent %s×%d, want only receives", name, d)
		}
	}
}

// Four consumers over four shards deliver every one of 300 ids, 150
// waiting at the start and 150 enqueued by another process while they run,
// some delayed, with an hour's poll interval: every message is found
// through the wakes and the due times the consumers track, none through
// the safety net.
func TestShardedConsumeLosesNothing(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			const shards, total = 4, 300
			c := b.client(t)
			prefix := uniquePrefix(t)
			q := redisqueue.New(c, &redisqueue.Options{Prefix: prefix, Shards: shards, Poll: time.Hour, Visibility: time.Minute, Logger: logger(t)})
			other := redisqueue.New(c, &redisqueue.Options{Prefix: prefix, Shards: shards})
			ids := make([]string, total)
			for i := range ids {
				ids[i] = driver.NewID()
			}
			for _, id := range ids[:total/2] {
				mustEnqueue(t, q, id, time.Time{})
			}
			var mu sync.Mutex
			seen := map[string]int{}
			all := make(chan struct{})
			cancel, wait := runConsume(t, q, 4, func(ctx context.Context, id string) (redisqueue.Settle, error) {
				mu.Lock()
				defer mu.Unlock()
				seen[id]++
				if seen[id] == 1 && len(seen) == total {
					close(all)
				}
				return redisqueue.Ack, nil
			})
			for i, id := range ids[total/2:] {
				at := time.Time{}
				if i%3 == 0 {
					at = time.Now().Add(time.Duration(i%7) * 30 * time.Millisecond)
				}
				mustEnqueue(t, other, id, at)
				if i%10 == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			}
			select {
			case <-all:
			case <-time.After(patience):
			}
			cancel()
			wait()
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != total {
				var missing []string
				for _, id := range ids {
					if seen[id] == 0 {
						missing = append(missing, fmt.Sprintf("%s (shard %d)", id, slots.ShardOf(id, shards)))
					}
				}
				t.Fatalf("delivered %d of %d ids; missing %v", len(seen), total, missing)
			}
			for k := range shards {
				key, _ := q.KeysFor(idsIn(k, shards, 1)[0])
				if n := zcard(t, c, key); n != 0 {
					t.Errorf("shard %d holds %d messages after all were handled", k, n)
				}
			}
		})
	}
}
