package redisstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/storetest"
)

// midHour is a time in the middle of the current hour: creations at it and
// a few ms after fall in one upkeep window of the index of all tasks.
func midHour() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute) }

// The index of all tasks is bounded and expiring: the first creation of
// an hour drops the members beyond Options.MaxIndexed and those created
// more than driver.MaxTTL ago, and sets the set's expiry past the end of
// every task it holds; the other creations of the hour add one member.
// A store with the index off writes none.
func TestAllIndexBounded(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix(), MaxIndexed: 3})
			ctx := t.Context()
			now := midHour()
			create := func(at time.Time) string {
				t.Helper()
				// Not a trimming id (trimMark): this test is about the
				// hourly upkeep alone (TestAllIndexBoundedUnderBursts is
				// about the other).
				id := driver.NewID()
				for id[0] == trimMark {
					id = driver.NewID()
				}
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
					TTL: time.Hour, PollInterval: time.Second, Now: at}); err != nil {
					t.Fatal(err)
				}
				return id
			}
			key := s.allKeys[0]
			members := func() []string {
				t.Helper()
				m, err := rc.Do(ctx, rc.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			var made []string
			for i := range 5 {
				made = append(made, create(now.Add(time.Duration(i)*time.Millisecond)))
			}
			if got := members(); !slices.Equal(got, append([]string{"~"}, made...)) {
				t.Errorf("index within one hour = %v, want the marker and all five %v", got, made)
			}
			pttl, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
			if want := (driver.MaxTTL + indexWindow).Milliseconds(); err != nil || pttl <= want-time.Minute.Milliseconds() || pttl > want {
				t.Errorf("index PTTL = %d (%v), want about %d", pttl, err, want)
			}
			// The next hour's first creation trims to the newest three.
			late := create(now.Add(time.Hour))
			if got, want := members(), []string{"~", made[3], made[4], late}; !slices.Equal(got, want) {
				t.Errorf("index after the hour turned = %v, want %v", got, want)
			}
			ts, next, err := s.ListAll(ctx, nil, "", 10, now.Add(time.Hour))
			if err != nil || next != "" || len(ts) != 3 || ts[0].ID != late {
				t.Errorf("ListAll = %v, %q, %v; want the three indexed tasks, newest first", ids(ts), next, err)
			}
			// A creation more than MaxTTL later drops every older member.
			last := create(now.Add(driver.MaxTTL + 2*time.Hour))
			if got := members(); !slices.Equal(got, []string{"~", last}) {
				t.Errorf("index after MaxTTL = %v, want the marker and %s", got, last)
			}

			off := New(rc, &Options{Prefix: uniquePrefix(), MaxIndexed: -1})
			if _, err := off.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
				TTL: time.Hour, Now: now}); err != nil {
				t.Fatal(err)
			}
			if keys := (&keyChecker{t: t, c: rc, s: off}).scan(); slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "all") }) {
				t.Errorf("a store with the index off wrote %v", keys)
			}
			if _, _, err := off.ListAll(ctx, nil, "", 10, now); err == nil {
				t.Error("ListAll of a store with the index off succeeded")
			}
		})
	}
}

// A burst of creations within one upkeep window does not grow the index
// of all tasks past Options.MaxIndexed by more than the creations since
// the last one whose id starts with trimMark (one in 64): before, the
// whole burst stayed until the hour turned (a million creations in minutes
// kept a million members, about 120 bytes of Redis memory per task).
// The set's size is predicted exactly from the ids created.
func TestAllIndexBoundedUnderBursts(t *testing.T) {
	const maxIndexed, burst = 20, 3000
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix(), MaxIndexed: maxIndexed})
			ctx := t.Context()
			now := midHour()
			want, most := 0, 0
			for i := range burst {
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
					TTL: time.Hour, PollInterval: time.Second, Now: now.Add(time.Duration(i) * time.Millisecond)}); err != nil {
					t.Fatal(err)
				}
				want++
				if i > 0 && id[0] == trimMark {
					want = min(want, maxIndexed)
				}
				most = max(most, want)
			}
			n, err := rc.Do(ctx, rc.B().Zcard().Key(s.allKeys[0]).Build()).AsInt64()
			if err != nil || n != int64(want)+1 {
				t.Fatalf("the index holds %d members (%v) after %d creations, want %d and the marker", n, err, burst, want)
			}
			if most > burst/4 {
				t.Fatalf("the index held up to %d members of %d creations: the ids drew no trim", most, burst)
			}
			t.Logf("%d creations in one window: the index held at most %d members (MaxIndexed %d), %d at the end", burst, most+1, maxIndexed, n)
		})
	}
}

// The index of all tasks costs a creation one command: a ZADD, inside the
// create script (no round trip of its own), measured with INFO
// commandstats against a store with the index off, creations interleaved,
// on a redis-server, with and without dispatching to a queue (the
// difference by command, connection upkeep of the client left out). (The hourly
// upkeep is in the warm-up creation.) On a Redis Cluster the ZADD runs in
// an EVAL pipelined after the create script: two commands, logged.
func TestAllIndexCommandsPerCreate(t *testing.T) {
	const rounds = 40
	// marked counts the measured creations of the indexed store whose id
	// starts with trimMark: each also counts the index (ZCARD).
	var marked int64
	measure := func(t *testing.T, rc rueidis.Client, admin func() map[string]int64, dispatch bool) (on, off int64, extra map[string]int64) {
		ctx := t.Context()
		mk := func(maxIndexed int) *Store {
			prefix := uniquePrefix()
			o := &Options{Prefix: prefix, MaxIndexed: maxIndexed}
			if dispatch {
				o.Queue = redisqueue.New(rc, &redisqueue.Options{Key: prefix + "{queue}"})
			}
			return New(rc, o)
		}
		stores := [2]*Store{mk(0), mk(-1)}
		now := midHour()
		marked = 0
		create := func(s *Store, i int) {
			id := driver.NewID()
			if s == stores[0] && i > 0 && id[0] == trimMark {
				marked++
			}
			if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
				TTL: time.Hour, PollInterval: time.Second, Now: now.Add(time.Duration(i) * time.Millisecond)}); err != nil {
				t.Fatal(err)
			}
		}
		// Warm-up: the scripts loaded (on every master of a cluster: 30
		// random ids miss one of three with odds of 1 in 60,000), the
		// index's upkeep of this hour done.
		for _, s := range stores {
			for range 30 {
				create(s, 0)
			}
		}
		extra = map[string]int64{}
		var totals [2]int64
		for i := range rounds {
			for k, s := range stores {
				before := admin()
				create(s, i+1)
				after := admin()
				n, _ := testredis.Sent(before, after)
				totals[k] += n
				for name, calls := range after {
					d := calls - before[name]
					if k == 0 {
						extra[name] += d
					} else {
						extra[name] -= d
					}
				}
			}
		}
		// Connection upkeep (a client that opens a connection meanwhile:
		// HELLO, CLIENT, CLUSTER, PING) is no creation's.
		for name, d := range extra {
			if d == 0 || name == "info" || name == "hello" || name == "ping" || name == "readonly" ||
				strings.HasPrefix(name, "client|") || strings.HasPrefix(name, "cluster|") {
				delete(extra, name)
			}
		}
		return totals[0], totals[1], extra
	}
	for _, dispatch := range []bool{false, true} {
		t.Run(fmt.Sprintf("redis-server/dispatch=%v", dispatch), func(t *testing.T) {
			rc := testredis.Client(t, "redis-server")
			on, off, extra := measure(t, rc, func() map[string]int64 { return testredis.CommandCalls(t, rc) }, dispatch)
			t.Logf("commands per create: %.2f with the index, %.2f without (%d creations each); the difference by command: %v",
				float64(on)/rounds, float64(off)/rounds, rounds, extra)
			want := map[string]int64{"zadd": rounds, "zcard": marked}
			if marked == 0 {
				delete(want, "zcard")
			}
			if !maps.Equal(extra, want) {
				t.Errorf("the index cost %v over %d creations, want exactly one ZADD each and a ZCARD for the %d whose id starts with %q", extra, rounds, marked, trimMark)
			}
		})
	}
	t.Run("cluster", func(t *testing.T) {
		rc := testredis.Client(t, "cluster")
		cl := testredis.SharedCluster(t)
		admin := func() map[string]int64 {
			sum := map[string]int64{}
			for _, n := range cl.Masters(t) {
				for name, calls := range testredis.CommandCalls(t, n.Client()) {
					sum[name] += calls
				}
			}
			return sum
		}
		on, off, extra := measure(t, rc, admin, false)
		t.Logf("Redis Cluster: commands per create: %.2f with the index, %.2f without; the difference by command: %v",
			float64(on)/rounds, float64(off)/rounds, extra)
		want := map[string]int64{"zadd": rounds, "eval": rounds, "zcard": marked}
		if marked == 0 {
			delete(want, "zcard")
		}
		if !maps.Equal(extra, want) {
			t.Errorf("on a Redis Cluster the index cost %v over %d creations, want an EVAL and its ZADD each (and a ZCARD for the %d marked)", extra, rounds, marked)
		}
	})
}

// An index entry whose task is gone (expired before an upkeep dropped it)
// is skipped, and a page of such entries does not end the listing early.
func TestListAllSkipsGone(t *testing.T) {
	rc := testredis.Client(t, "redis-server")
	s := New(rc, &Options{Prefix: uniquePrefix()})
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	keep := driver.NewID()
	if _, err := s.Create(ctx, &driver.NewTask{ID: keep, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`), TTL: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	// 60 entries newer than it whose tasks are gone.
	for i := range 60 {
		if err := rc.Do(ctx, rc.B().Zadd().Key(s.allKeys[0]).ScoreMember().ScoreMember(float64(now.UnixMilli()+int64(i)+1), driver.NewID()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	ts, next, err := s.ListAll(ctx, nil, "", 5, now.Add(time.Second))
	if err != nil || len(ts) != 1 || ts[0].ID != keep || next != "" {
		t.Errorf("ListAll = %v, %q, %v; want only %s", ids(ts), next, err, keep)
	}
}

func ids(ts []*driver.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// BenchmarkCreateIndexed measures Create on a redis-server with the index
// of all tasks and without it, interleaved: each iteration creates a task
// in a store with the index, then one in a store without, and the two
// are reported side by side (ns/create-indexed, ns/create-unindexed).
func BenchmarkCreateIndexed(b *testing.B) {
	rc := testredis.Client(b, "redis-server")
	now := midHour()
	stores := [2]*Store{New(rc, &Options{Prefix: uniquePrefix()}), New(rc, &Options{Prefix: uniquePrefix(), MaxIndexed: -1})}
	spent := storetest.CreateSideBySide(b, now, stores[0], stores[1])
	b.ReportMetric(float64(spent[0].Nanoseconds()), "ns/create-indexed")
	b.ReportMetric(float64(spent[1].Nanoseconds()), "ns/create-unindexed")
}
