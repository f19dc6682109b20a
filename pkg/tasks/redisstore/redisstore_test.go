package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/rtcount"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/storetest"
	"github.com/redis/rueidis"
)

// backend is a Redis the tests run against.
type backend struct {
	name   string
	client func(t *testing.T) rueidis.Client
}

// backends are a real redis-server (testredis) and the embedded miniredis
// the local server runs on.
func backends() []backend {
	var bs []backend
	for _, name := range testredis.Backends() {
		bs = append(bs, backend{name, func(t *testing.T) rueidis.Client { return testredis.Client(t, name) }})
	}
	return bs
}

// dispatches reports whether a store on b may enqueue in its scripts: not
// on a Redis Cluster, where a task's keys and the queue's are in different
// slots (the bundle builds a store without Options.Queue there).
func (b backend) dispatches() bool { return b.name != "cluster" }

// uniquePrefix keeps each store's keys apart on a shared server.
func uniquePrefix() string { return "st" + driver.NewID() + ":" }

// TestStoreContract runs the Store contract against both Redis backends.
func TestStoreContract(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			storetest.Run(t, func(t *testing.T) driver.Store {
				return New(c, &Options{Prefix: uniquePrefix()})
			})
		})
		// And for a due index spread over shards.
		t.Run(b.name+"+shards", func(t *testing.T) {
			c := b.client(t)
			storetest.Run(t, func(t *testing.T) driver.Store {
				return New(c, &Options{Prefix: uniquePrefix(), Shards: 12})
			})
		})
		if !b.dispatches() {
			continue
		}
		// The same contract holds for a store that enqueues in its scripts.
		t.Run(b.name+"+dispatch", func(t *testing.T) {
			c := b.client(t)
			storetest.Run(t, func(t *testing.T) driver.Store {
				prefix := uniquePrefix()
				return New(c, &Options{Prefix: prefix, Queue: redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})})
			})
		})
		// And for one that enqueues into each task's shard of a sharded
		// queue, with the due index sharded alike.
		t.Run(b.name+"+dispatch+shards", func(t *testing.T) {
			c := b.client(t)
			storetest.Run(t, func(t *testing.T) driver.Store {
				prefix := uniquePrefix()
				return New(c, &Options{Prefix: prefix, Shards: 4, Queue: redisqueue.New(c, &redisqueue.Options{Prefix: prefix, Shards: 4})})
			})
		})
	}
}

// A dispatching store keeps each live task's message in the queue at the
// time it must run next, in the same script as the transition: now at
// creation, the lease's end when a claim finds the task held, now or the
// wake time when a commit releases it, the deadline of a park (none
// without one), now when an update resumes it; a task that ends has none.
// Only enqueues that an idle consumer must see push a wake token: a
// worker's own commit does not.
func TestDispatch(t *testing.T) {
	for _, b := range backends() {
		if !b.dispatches() {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			prefix := uniquePrefix()
			q := redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})
			s := New(c, &Options{Prefix: prefix, Queue: q})
			if !s.Dispatches() || New(c, nil).Dispatches() {
				t.Fatal("Dispatches() must be true exactly when Options.Queue is set")
			}
			qkey, wkey := q.Keys()
			ctx := t.Context()
			now := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
			queued := func(id string) (time.Time, bool) {
				t.Helper()
				sc, err := c.Do(ctx, c.B().Zscore().Key(qkey).Member(id).Build()).AsFloat64()
				if rueidis.IsRedisNil(err) {
					return time.Time{}, false
				}
				if err != nil {
					t.Fatalf("ZSCORE: %v", err)
				}
				return time.UnixMilli(int64(sc)), true
			}
			want := func(stage, id string, at time.Time) {
				t.Helper()
				got, ok := queued(id)
				switch {
				case at.IsZero() && ok:
					t.Errorf("%s: message due at %v, want none", stage, got)
				case !at.IsZero() && !ok:
					t.Errorf("%s: no message, want one due at %v", stage, at)
				case !at.IsZero() && !got.Equal(at):
					t.Errorf("%s: message due at %v, want %v", stage, got, at)
				}
			}
			// Wake messages published on the shard's channel.
			wakes := testredis.Listen(t, c, wkey)
			tokens := func() int64 {
				t.Helper()
				return wakes.Count(t)
			}
			create := func() string {
				t.Helper()
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "o", Tool: "x", Args: json.RawMessage(`{}`), TTL: 24 * time.Hour, Now: now}); err != nil {
					t.Fatal(err)
				}
				return id
			}

			// The queue's consumer takes the message before each claim, as a
			// worker does (times lie in the past so that it is due).
			take := func(id string) {
				t.Helper()
				d, ok, _, err := q.Receive(ctx)
				if err != nil || !ok || d.TaskID != id {
					t.Fatalf("Receive = %+v, %v, %v; want %s", d, ok, err, id)
				}
			}
			id := create()
			want("after Create", id, now)
			if tokens() != 1 {
				t.Errorf("after Create: %d wake tokens, want 1", tokens())
			}
			take(id)
			cl, err := s.Claim(ctx, id, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			// Each renewal holds the message until the lease's new end: a
			// worker that dies is replaced then. (The first announces it,
			// earlier than the receipt of the receive; later renewals move
			// it later, quietly.)
			if err := s.RenewLease(ctx, cl, now, time.Minute); err != nil {
				t.Fatal(err)
			}
			want("after a first RenewLease", id, now.Add(time.Minute))
			before := tokens()
			renewed := now.Add(20 * time.Second)
			if err := s.RenewLease(ctx, cl, renewed, time.Minute); err != nil {
				t.Fatal(err)
			}
			want("after a RenewLease", id, renewed.Add(time.Minute))
			if got := tokens(); got != before {
				t.Errorf("a renewal pushed %d wake tokens, want none", got-before)
			}
			wake := now.Add(30 * time.Minute)
			if err := s.Commit(ctx, cl, &driver.Change{Now: now, Release: true, WakeAt: wake}); err != nil {
				t.Fatal(err)
			}
			want("after a commit that sleeps", id, wake)
			if got := tokens(); got != before {
				t.Errorf("a worker's commit pushed %d wake tokens, want none", got-before)
			}
			take(id)
			if cl, err = s.Claim(ctx, id, wake, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, cl, &driver.Change{Now: wake, Park: map[string]json.RawMessage{"k": json.RawMessage(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			want("after a park without a deadline", id, time.Time{})
			if _, err := s.Update(ctx, "o", id, map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}, wake); err != nil {
				t.Fatal(err)
			}
			want("after a resuming update", id, wake)
			take(id)
			if cl, err = s.Claim(ctx, id, wake, time.Minute); err != nil {
				t.Fatal(err)
			}
			deadline := wake.Add(time.Minute)
			if err := s.Commit(ctx, cl, &driver.Change{Now: wake, Park: map[string]json.RawMessage{"k2": json.RawMessage(`{}`)}, WakeAt: deadline}); err != nil {
				t.Fatal(err)
			}
			want("after a park with a deadline", id, deadline)
			take(id)
			if cl, err = s.Claim(ctx, id, deadline, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, cl, &driver.Change{Now: deadline, Complete: json.RawMessage(`{"content":[]}`)}); err != nil {
				t.Fatal(err)
			}
			want("after completion", id, time.Time{})

			held := create()
			take(held)
			if _, err := s.Claim(ctx, held, now, time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Claim(ctx, held, now.Add(time.Second), time.Minute); !errors.Is(err, driver.ErrLeased) {
				t.Fatalf("second Claim: %v, want ErrLeased", err)
			}
			want("after a Claim that found a live lease", held, now.Add(time.Minute))

			other := create()
			if _, _, err := s.Cancel(ctx, "o", other, now); err != nil {
				t.Fatal(err)
			}
			want("after a cancel that ended the task", other, time.Time{})
		})
	}
}

// keyChecker asserts that every key under a store's prefix expires, and
// that each key of a task expires exactly when the task does.
type keyChecker struct {
	t   *testing.T
	c   rueidis.Client
	s   *Store
	exp map[string]time.Time // task id -> CreatedAt+TTL
	// late is how much later than the task's expiry a key may report: the
	// embedded Redis applies expiry on a ticker (embedredis.Tick), and
	// reports the expiry of a key as of its last tick.
	late time.Duration
}

// scan returns the keys under the store's prefix, from every master.
func (k *keyChecker) scan() []string {
	k.t.Helper()
	keys, err := testredis.ScanAll(k.t.Context(), k.c, k.s.prefix+"*")
	if err != nil {
		k.t.Fatalf("scanning %s*: %v", k.s.prefix, err)
	}
	return keys
}

// check scans the store's keys after stage and requires want among them.
// (The due index is deleted by Redis when its last member goes, so callers
// list it only when a live task is indexed.)
func (k *keyChecker) check(stage string, want ...string) {
	k.t.Helper()
	ctx := k.t.Context()
	keys := k.scan()
	for _, w := range want {
		if !slices.Contains(keys, w) {
			k.t.Errorf("%s: key %s missing (have %v)", stage, w, keys)
		}
	}
	for _, key := range keys {
		pttl, err := k.c.Do(ctx, k.c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			k.t.Fatalf("%s: PTTL %s: %v", stage, key, err)
		}
		if pttl == -2 {
			continue // expired or deleted since the scan
		}
		if pttl <= 0 {
			k.t.Errorf("%s: key %s has no expiry (PTTL %d)", stage, key, pttl)
			continue
		}
		open, closing := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
		if open < 0 || closing < open {
			continue // the due index
		}
		id := key[open+1 : closing]
		exp, ok := k.exp[id]
		if !ok {
			k.t.Errorf("%s: key %s of an unknown task", stage, key)
			continue
		}
		at, err := k.c.Do(ctx, k.c.B().Pexpiretime().Key(key).Build()).AsInt64()
		if err != nil {
			k.t.Fatalf("%s: PEXPIRETIME %s: %v", stage, key, err)
		}
		// miniredis keeps an absolute expiry as a TTL relative to its
		// clock and reports it back up to a millisecond early: allow that.
		if d := at - exp.UnixMilli(); d < -1 || d > k.late.Milliseconds() {
			k.t.Errorf("%s: key %s expires at %v, want the task's expiry %v", stage, key, time.UnixMilli(at).UTC(), exp)
		}
	}
}

// TestEveryKeyExpires walks tasks through every transition and checks
// after each one that every key the store wrote has an expiry, that a
// task's keys expire with the task (TTL counts from creation) and that the
// due index and the principal's live set expire too.
func TestEveryKeyExpires(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix()})
			k := &keyChecker{t: t, c: rc, s: s, exp: map[string]time.Time{}}
			if b.name == "embedded" {
				k.late = embedredis.Tick
			}
			ctx := t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			create := func(nt *driver.NewTask) string {
				t.Helper()
				nt.ID, nt.Owner, nt.Tool, nt.Args = driver.NewID(), "alice", "tool", json.RawMessage(`{}`)
				nt.TTL, nt.PollInterval, nt.Now = time.Hour, time.Second, now
				nt.MaxLive = 100 // the principal's live set is checked too
				tk, err := s.Create(ctx, nt)
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				k.exp[nt.ID] = tk.ExpiresAt()
				return nt.ID
			}
			claim := func(id string, at time.Time) *driver.Claim {
				t.Helper()
				c, err := s.Claim(ctx, id, at, time.Minute)
				if err != nil {
					t.Fatalf("Claim: %v", err)
				}
				if c.Gen == 0 {
					t.Fatalf("Claim: no lease (status %s)", c.Task.Status)
				}
				return c
			}
			commit := func(c *driver.Claim, ch *driver.Change) {
				t.Helper()
				if err := s.Commit(ctx, c, ch); err != nil {
					t.Fatalf("Commit: %v", err)
				}
			}
			update := func(id string, resp map[string]json.RawMessage) {
				t.Helper()
				if _, err := s.Update(ctx, "alice", id, resp, now); err != nil {
					t.Fatalf("Update: %v", err)
				}
			}
			reqs := map[string]json.RawMessage{"a": json.RawMessage(`{"q":1}`), "b": json.RawMessage(`{"q":2}`)}

			// A task through its whole life: the response key is first
			// written by Update, not by Create; the journal is in the hash
			// until it grows past maxJournalChunks (journal.go).
			id := create(&driver.NewTask{})
			tk, p, j, r := s.keys(id)
			k.check("create", tk, s.dueKey(id))
			c := claim(id, now)
			k.check("claim", tk, s.dueKey(id))
			msg := "step one"
			commit(c, &driver.Change{Now: now, StatusMessage: &msg,
				Append: []driver.Entry{{Name: "one", Kind: driver.KindDo, Value: json.RawMessage(`1`)}}})
			k.check("commit append", tk)
			commit(c, &driver.Change{Now: now, Park: reqs})
			k.check("park", tk, p)
			update(id, map[string]json.RawMessage{"a": json.RawMessage(`"A"`)})
			k.check("update one key", tk, p, r)
			update(id, map[string]json.RawMessage{"b": json.RawMessage(`"B"`)})
			k.check("update last key", tk, r)
			c = claim(id, now)
			commit(c, &driver.Change{Now: now, Release: true, WakeAt: now.Add(time.Minute)})
			k.check("release", tk, r)
			c = claim(id, now.Add(time.Minute))
			long := json.RawMessage(`"` + strings.Repeat("x", maxJournalChunks*maxInline) + `"`)
			commit(c, &driver.Change{Now: now, Append: []driver.Entry{{Name: "big", Kind: driver.KindDo, Value: long}}})
			k.check("journal moved to its list", tk, j, r)
			commit(c, &driver.Change{Now: now, Complete: json.RawMessage(`{"content":[]}`)})
			k.check("complete", tk, j, r, s.resultKey(id))

			// Created with a seeded journal and responses (MRTR before the task).
			id2 := create(&driver.NewTask{
				Journal:   []driver.Entry{{Name: "ask", Kind: driver.KindInput, Keys: []string{"x"}}},
				Responses: map[string]json.RawMessage{"x": json.RawMessage(`true`)},
			})
			tk2, _, _, r2 := s.keys(id2)
			k.check("create seeded", tk2, r2, s.dueKey(id2))

			// Cancellation paths.
			id3 := create(&driver.NewTask{})
			tk3, _, _, _ := s.keys(id3)
			c3 := claim(id3, now)
			if _, _, err := s.Cancel(ctx, "alice", id3, now); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			k.check("cancel requested", tk3)
			commit(c3, &driver.Change{Now: now, Release: true})
			k.check("cancelled by commit", tk3)
			id4 := create(&driver.NewTask{})
			c4 := claim(id4, now)
			commit(c4, &driver.Change{Now: now, Park: reqs, ParkAny: true})
			update(id4, map[string]json.RawMessage{"b": json.RawMessage(`"B"`)})
			k.check("park any resumed", s.dueKey(id4))
			if _, _, err := s.Cancel(ctx, "alice", id4, now); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			k.check("cancelled queued")
			if err := s.Schedule(ctx, id4, now.Add(time.Hour)); err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			k.check("schedule", s.dueKey(id4))

			// Offers: their hash is written by the commit that appends them,
			// taken from by answers, and dropped when the task ends.
			id5 := create(&driver.NewTask{})
			tk5, _, _, r5 := s.keys(id5)
			o5 := s.offersKey(id5)
			c5 := claim(id5, now)
			commit(c5, &driver.Change{Now: now, Append: []driver.Entry{
				{Name: "stop", Kind: driver.KindOffer, Value: json.RawMessage(`{"q":1}`)},
				{Name: "more", Kind: driver.KindOffer, Value: json.RawMessage(`{"q":2}`)},
			}, Release: true, Sleep: true, WakeAt: now.Add(time.Minute), WakeOn: []string{"more", "stop"}})
			k.check("sleep with offers", tk5, o5, s.dueKey(id5))
			update(id5, map[string]json.RawMessage{"stop": json.RawMessage(`true`)})
			k.check("offer answered", tk5, o5, r5, s.dueKey(id5))
			c5 = claim(id5, now)
			commit(c5, &driver.Change{Now: now, Append: []driver.Entry{{Name: "more", Kind: driver.KindWithdraw}}})
			k.check("offer withdrawn", tk5, r5)

			// Events: their hash is written by the commit that opens a
			// wait, by a delivery (a signal before its wait too) and by
			// the claim that closes a wait.
			id6 := create(&driver.NewTask{})
			tk6, e6 := s.recordAndEvents(id6)
			if _, err := s.Deliver(ctx, id6, &driver.Delivery{Name: "early", Payload: json.RawMessage(`1`), Now: now}); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			k.check("signal buffered", tk6, e6)
			c6 := claim(id6, now)
			commit(c6, &driver.Change{Now: now, Release: true, Await: "hook", WakeAt: now.Add(time.Minute),
				Open: []driver.EventWait{{Name: "hook", Kind: driver.EventCallback, Proof: "ab", Until: now.Add(time.Minute)}}})
			k.check("await a callback", tk6, e6)
			claim(id6, now.Add(time.Minute))
			k.check("wait closed", tk6, e6)

			// A fork: its hash is written by the commit that starts it and
			// by its branches.
			id7 := create(&driver.NewTask{})
			tk7, e7 := s.recordAndEvents(id7)
			c7 := claim(id7, now)
			commit(c7, &driver.Change{Now: now, Release: true, Await: "index", WakeAt: k.exp[id7],
				Fork: &driver.Fork{Name: "index", Number: 1, Branches: 2, Concurrency: 1}})
			k.check("fork", tk7, e7, s.forkKey(id7, 1))
			for i := range 2 {
				bc, err := s.ClaimBranch(ctx, driver.BranchID(id7, 1, i), now, time.Minute)
				if err != nil || bc.Claim == nil {
					t.Fatalf("ClaimBranch: %+v %v", bc, err)
				}
				if _, err := s.CommitBranch(ctx, driver.BranchID(id7, 1, i), bc.Claim.Gen, &driver.BranchChange{Now: now, Value: json.RawMessage(`1`)}); err != nil {
					t.Fatalf("CommitBranch: %v", err)
				}
			}
			k.check("joined", tk7, e7, s.forkKey(id7, 1))
		})
	}
}

// recordAndEvents returns a task's record and events keys.
func (s *Store) recordAndEvents(id string) (t, e string) {
	t, _, _, _ = s.keys(id)
	return t, s.eventsKey(id)
}

// TestKeysVanishAfterTTL checks on Redis's own clock that nothing of a task
// outlives its TTL: once it expired no key of it is left.
func TestKeysVanishAfterTTL(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			id := driver.NewID()
			if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
				TTL: 5 * time.Second, PollInterval: time.Second, Now: time.Now()}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			c, err := s.Claim(ctx, id, time.Now(), time.Minute)
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			if err := s.Commit(ctx, c, &driver.Change{Now: time.Now(),
				Append: []driver.Entry{{Name: "one", Kind: driver.KindDo, Value: json.RawMessage(`1`)},
					{Name: "stop", Kind: driver.KindOffer, Value: json.RawMessage(`{}`)}},
				Park: map[string]json.RawMessage{"a": json.RawMessage(`{}`), "b": json.RawMessage(`{}`)}}); err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if _, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"a": json.RawMessage(`1`)}, time.Now()); err != nil {
				t.Fatalf("Update: %v", err)
			}
			k := &keyChecker{t: t, c: rc, s: s}
			taskKeys := func() []string {
				return slices.DeleteFunc(k.scan(), func(key string) bool { return !strings.Contains(key, "{"+id+"}") })
			}
			if n := len(taskKeys()); n != 4 {
				t.Fatalf("task has %d keys before expiry, want 4 (record with its journal, input, offers, responses): %v", n, taskKeys())
			}
			deadline := time.Now().Add(20 * time.Second)
			for len(taskKeys()) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("keys still present long after the TTL: %v", taskKeys())
				}
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := s.Get(ctx, "alice", id); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Get after expiry = %v, want ErrNotFound", err)
			}
		})
	}
}

// A caller-chosen id that names another key under the store's prefix (here
// the Redis queue's "{queue}" sorted set) is unknown: no task script runs
// on that key, and it is left as it was.
func TestNonTaskKeysUntouched(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			prefix := uniquePrefix()
			s := New(rc, &Options{Prefix: prefix})
			ctx := t.Context()
			queueKey := prefix + "{queue}"
			if err := rc.Do(ctx, rc.B().Zadd().Key(queueKey).ScoreMember().ScoreMember(1, driver.NewID()).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			if _, err := s.Get(ctx, "alice", "queue"); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Get(queue) = %v, want ErrNotFound", err)
			}
			if _, err := s.Peek(ctx, "queue"); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Peek(queue) = %v, want ErrNotFound", err)
			}
			if _, err := s.Update(ctx, "alice", "queue", map[string]json.RawMessage{"k": json.RawMessage(`1`)}, now); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Update(queue) = %v, want ErrNotFound", err)
			}
			if _, _, err := s.Cancel(ctx, "alice", "queue", now); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Cancel(queue) = %v, want ErrNotFound", err)
			}
			if _, err := s.Claim(ctx, "queue", now, time.Minute); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Claim(queue) = %v, want ErrNotFound", err)
			}
			typ, err := rc.Do(ctx, rc.B().Type().Key(queueKey).Build()).ToString()
			if err != nil || typ != "zset" {
				t.Fatalf("TYPE %s = %q, %v; want zset", queueKey, typ, err)
			}
			if n, err := rc.Do(ctx, rc.B().Zcard().Key(queueKey).Build()).AsInt64(); err != nil || n != 1 {
				t.Errorf("ZCARD %s = %d, %v; want 1 (untouched)", queueKey, n, err)
			}
			if keys := (&keyChecker{t: t, c: rc, s: s}).scan(); !slices.Equal(keys, []string{queueKey}) {
				t.Errorf("keys under the prefix = %v, want only the queue's", keys)
			}
		})
	}
}

// The round trips of Update, on a warm connection (scripts loaded): a
// stranger's, an unknown task's and a non-resuming update cost one (so
// does an answer to the offer of a running task); a resuming one two (the
// due index moves before the resume, in the second), whether it ends a
// wait for input or wakes a task sleeping with an offer.
func TestUpdateRoundTrips(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := rtcount.Wrap(b.client(t))
			s := New(rc, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now()
			park := func() string {
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
					TTL: time.Hour, PollInterval: time.Second, Now: now}); err != nil {
					t.Fatalf("Create: %v", err)
				}
				c, err := s.Claim(ctx, id, now, time.Minute)
				if err != nil {
					t.Fatalf("Claim: %v", err)
				}
				if err := s.Commit(ctx, c, &driver.Change{Now: now,
					Park: map[string]json.RawMessage{"a": json.RawMessage(`{}`), "b": json.RawMessage(`{}`)}}); err != nil {
					t.Fatalf("Commit: %v", err)
				}
				return id
			}
			// offering: a task that offers "a", running (sleep false) or
			// sleeping.
			offering := func(sleep bool) string {
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
					TTL: time.Hour, PollInterval: time.Second, Now: now}); err != nil {
					t.Fatalf("Create: %v", err)
				}
				c, err := s.Claim(ctx, id, now, time.Minute)
				if err != nil {
					t.Fatalf("Claim: %v", err)
				}
				if err := s.Commit(ctx, c, &driver.Change{Now: now, Release: sleep, Sleep: sleep, WakeAt: now.Add(time.Hour), WakeOn: []string{"a"},
					Append: []driver.Entry{{Name: "a", Kind: driver.KindOffer, Value: json.RawMessage(`{}`)}}}); err != nil {
					t.Fatalf("Commit: %v", err)
				}
				return id
			}
			trips := func(owner, id string, resp map[string]json.RawMessage) (int64, bool) {
				rc.Reset()
				resumed, _ := s.Update(ctx, owner, id, resp, now)
				return rc.Trips(), resumed
			}
			a := map[string]json.RawMessage{"a": json.RawMessage(`1`)}
			both := map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`2`)}
			trips("alice", park(), both) // loads the script
			for _, c := range []struct {
				name      string
				owner, id string
				resp      map[string]json.RawMessage
				want      int64
				resumed   bool
			}{
				{"stranger", "mallory", park(), both, 1, false},
				{"unknown", "alice", driver.NewID(), both, 1, false},
				{"partial", "alice", park(), a, 1, false},
				{"resuming", "alice", park(), both, 2, true},
				{"offer of a running task", "alice", offering(false), a, 1, false},
				{"offer of a sleeping task", "alice", offering(true), a, 2, true},
			} {
				n, resumed := trips(c.owner, c.id, c.resp)
				t.Logf("%s update: %d round trips", c.name, n)
				if n != c.want || resumed != c.resumed {
					t.Errorf("%s update: %d round trips, resumed %v; want %d, %v", c.name, n, resumed, c.want, c.resumed)
				}
			}
		})
	}
}

// The live set of a principal under a limit: it expires with its last
// task, a place whose removal was lost (a process died after the task
// ended) is recovered when the set is full, and a place reserved by a
// creation that never happened is kept until its expiry (it might be under
// way).
func TestLiveSet(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now().Truncate(time.Millisecond)
			create := func(ttl time.Duration) (string, error) {
				id := driver.NewID()
				_, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
					TTL: ttl, PollInterval: time.Second, Now: now, MaxLive: 2})
				return id, err
			}
			key := s.liveKey("alice")
			if strings.Contains(key, "alice") {
				t.Errorf("live key %q names the principal", key)
			}
			a, err := create(time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := create(2 * time.Hour); err != nil {
				t.Fatal(err)
			}
			at, err := rc.Do(ctx, rc.B().Pexpiretime().Key(key).Build()).AsInt64()
			if want := now.Add(2 * time.Hour).UnixMilli(); err != nil || at < want-1 || at > want+int64(embedredis.Tick/time.Millisecond) {
				t.Errorf("live set expires at %d (%v), want with its last task at %d", at, err, want)
			}
			if _, err := create(time.Hour); !errors.Is(err, driver.ErrTooManyTasks) {
				t.Fatalf("third Create = %v, want ErrTooManyTasks", err)
			}

			// a ends, but its removal is lost: the full set is repaired.
			c, err := s.Claim(ctx, a, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, c, &driver.Change{Now: now, Complete: json.RawMessage(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := rc.Do(ctx, rc.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(now.Add(time.Hour).UnixMilli()), a).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if _, err := create(time.Hour); err != nil {
				t.Errorf("Create with an ended task's place still taken = %v, want the place recovered", err)
			}

			// A reservation whose task does not exist (yet) keeps its place.
			s2 := New(rc, &Options{Prefix: uniquePrefix()})
			key2 := s2.liveKey("alice")
			for range 2 {
				if err := rc.Do(ctx, rc.B().Zadd().Key(key2).ScoreMember().ScoreMember(float64(now.Add(time.Hour).UnixMilli()), driver.NewID()).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s2.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
				TTL: time.Hour, PollInterval: time.Second, Now: now, MaxLive: 2}); !errors.Is(err, driver.ErrTooManyTasks) {
				t.Errorf("Create with two places reserved = %v, want ErrTooManyTasks", err)
			}
		})
	}
}

// The round trips of Create on a warm connection: one without a limit, two
// with one (the reservation in the principal's live set comes first).
func TestCreateRoundTrips(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := rtcount.Wrap(b.client(t))
			s := New(rc, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			create := func(limit int) int64 {
				rc.Reset()
				if _, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
					TTL: time.Hour, PollInterval: time.Second, Now: time.Now(), MaxLive: limit}); err != nil {
					t.Fatal(err)
				}
				return rc.Trips()
			}
			create(10) // loads the scripts
			for _, limit := range []int{0, 10} {
				n := create(limit)
				t.Logf("Create with MaxLive %d: %d round trips", limit, n)
				if want := map[int]int64{0: 1, 10: 2}[limit]; n != want {
					t.Errorf("Create with MaxLive %d: %d round trips, want %d", limit, n, want)
				}
			}
		})
	}
}

// Inspect returns the whole record: the trace context a Claim also hands
// the worker, the journal with its history entries, when each input key
// was answered and when cancellation was first requested (a repeat keeps
// the first time).
func TestInspect(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := New(b.client(t), &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now().Truncate(time.Millisecond)
			const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			id := driver.NewID()
			if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
				TTL: time.Hour, PollInterval: time.Second, Now: now, TraceParent: tp}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Inspect(ctx, driver.NewID()); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("Inspect of an unknown task: %v", err)
			}
			c, err := s.Claim(ctx, id, now, time.Minute)
			if err != nil || c.Task.TraceParent != tp {
				t.Fatalf("Claim: %v, TraceParent %q", err, c.Task.TraceParent)
			}
			journal := []driver.Entry{
				{Name: "fetch", Kind: driver.KindAttempt, Err: "503", Attempt: 1, At: now, Took: time.Second, Until: now.Add(2 * time.Second)},
				{Name: "ask", Kind: driver.KindInput, Keys: []string{"q"}, At: now.Add(time.Second)},
			}
			if err := s.Commit(ctx, c, &driver.Change{Now: now.Add(time.Second), Append: journal,
				Park: map[string]json.RawMessage{"q": json.RawMessage(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			answered := now.Add(3 * time.Second)
			if _, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"q": json.RawMessage(`{"action":"decline"}`)}, answered); err != nil {
				t.Fatal(err)
			}
			c, err = s.Claim(ctx, id, now.Add(4*time.Second), time.Minute)
			if err != nil || c.Gen == 0 {
				t.Fatalf("second Claim: %+v, %v", c, err)
			}
			for i := range 2 { // the first request's time stays
				if _, _, err := s.Cancel(ctx, "alice", id, now.Add(time.Duration(5+i)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			rec, err := s.Inspect(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Task.TraceParent != tp || rec.Claims != 2 || rec.Attempts != 2 || !rec.Task.CancelRequested {
				// (a live task: the store drops the counts when it ends)
				t.Errorf("record: TraceParent %q, Claims %d, Attempts %d, CancelRequested %v", rec.Task.TraceParent, rec.Claims, rec.Attempts, rec.Task.CancelRequested)
			}
			if len(rec.Journal) != 2 || rec.Journal[0].Kind != driver.KindAttempt || !rec.Journal[0].Until.Equal(journal[0].Until) ||
				rec.Journal[0].Took != time.Second || !rec.Journal[1].At.Equal(journal[1].At) {
				t.Errorf("journal %+v", rec.Journal)
			}
			if !rec.AnsweredAt["q"].Equal(answered) || string(rec.Responses["q"]) != `{"action":"decline"}` {
				t.Errorf("answers: at %v, responses %v", rec.AnsweredAt, rec.Responses)
			}
			if !rec.CancelRequestedAt.Equal(now.Add(5 * time.Second)) {
				t.Errorf("CancelRequestedAt = %v, want %v", rec.CancelRequestedAt, now.Add(5*time.Second))
			}
		})
	}
}

// A task written before the hash flags existed (no j, r, of, lim) is
// claimed with its journal and responses, ends with its offers dropped, and
// leaves its owner's live set: a missing flag counts as set.
func TestTaskWithoutFlags(t *testing.T) {
	for _, b := range backends() {
		for _, dispatch := range []bool{false, true} {
			if dispatch && !b.dispatches() {
				continue
			}
			t.Run(fmt.Sprintf("%s/dispatch=%v", b.name, dispatch), func(t *testing.T) {
				c := b.client(t)
				prefix := uniquePrefix()
				o := &Options{Prefix: prefix}
				if dispatch {
					o.Queue = redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})
				}
				s := New(c, o)
				ctx := t.Context()
				now := time.Now().Truncate(time.Millisecond)
				id := driver.NewID()
				entry := driver.Entry{Name: "a", Kind: driver.KindDo, Value: json.RawMessage(`1`)}
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "o", Tool: "x", Args: json.RawMessage(`{}`), TTL: time.Hour, Now: now,
					Journal: []driver.Entry{entry}, Responses: map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}, MaxLive: 5}); err != nil {
					t.Fatal(err)
				}
				toEarlierFormat(t, c, s, id)
				tkey, _, _, _ := s.keys(id)
				if err := c.Do(ctx, c.B().Hdel().Key(tkey).Field("j", "r", "of", "lim").Build()).Error(); err != nil {
					t.Fatal(err)
				}
				cl, err := s.Claim(ctx, id, now, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if len(cl.Journal) != 1 || cl.Journal[0].Name != "a" || len(cl.Responses) != 1 {
					t.Fatalf("claim of a task without flags: journal %+v, responses %v; want its entry and response", cl.Journal, cl.Responses)
				}
				if err := c.Do(ctx, c.B().Hset().Key(s.offersKey(id)).FieldValue().FieldValue("old", "{}").Build()).Error(); err != nil {
					t.Fatal(err)
				}
				if err := s.Commit(ctx, cl, &driver.Change{Now: now, Complete: json.RawMessage(`{"content":[]}`)}); err != nil {
					t.Fatal(err)
				}
				if n, _ := c.Do(ctx, c.B().Exists().Key(s.offersKey(id)).Build()).AsInt64(); n != 0 {
					t.Error("the offers of a task without flags survived its end")
				}
				if _, err := c.Do(ctx, c.B().Zscore().Key(s.liveKey("o")).Member(id).Build()).AsFloat64(); !rueidis.IsRedisNil(err) {
					t.Errorf("a task without flags stayed in its owner's live set after it ended (ZSCORE: %v)", err)
				}
			})
		}
	}
}
