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

// midHour is a time in the middle of the current hour.
func midHour() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute) }

// entries are the task ids in the index stream key, oldest first.
func entries(t *testing.T, rc rueidis.Client, key string) []string {
	t.Helper()
	es, err := rc.Do(t.Context(), rc.B().Xrange().Key(key).Start("-").End("+").Build()).AsXRange()
	if err != nil && !rueidis.IsRedisNil(err) {
		t.Fatal(err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.FieldValues["i"]
	}
	return out
}

// The index of all tasks is bounded and expiring: each creation trims it
// to about Options.MaxIndexed entries (whole listpacks of about a hundred
// go, so it never holds more than MaxIndexed plus a hundred) and keeps it
// until driver.MaxTTL and an hour from now; a creation whose id starts
// with trimMark drops the entries older than MaxTTL. ListAll lists what it
// holds, newest first. A store with the index off writes none.
func TestAllIndexBounded(t *testing.T) {
	const maxIndexed, n = 100, 450
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix(), MaxIndexed: maxIndexed})
			ctx := t.Context()
			now := midHour()
			create := func(at time.Time, id string) string {
				t.Helper()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`),
					TTL: time.Hour, PollInterval: time.Second, Now: at}); err != nil {
					t.Fatal(err)
				}
				return id
			}
			key := streamOf(s.allKeys[0])
			var made []string
			most := 0
			for i := range n {
				made = append(made, create(now.Add(time.Duration(i)*time.Millisecond), driver.NewID()))
				most = max(most, len(entries(t, rc, key)))
			}
			got := entries(t, rc, key)
			if len(got) < maxIndexed || most > maxIndexed+100 || !slices.Equal(got, made[n-len(got):]) {
				t.Errorf("after %d creations the index holds %d entries (at most %d), want the newest %d to %d in order",
					n, len(got), most, maxIndexed, maxIndexed+100)
			}
			pttl, err := rc.Do(ctx, rc.B().Pttl().Key(key).Build()).AsInt64()
			if want := (driver.MaxTTL + indexWindow).Milliseconds(); err != nil || pttl <= want-time.Minute.Milliseconds() || pttl > want {
				t.Errorf("index PTTL = %d (%v), want about %d", pttl, err, want)
			}
			ts, next, err := s.ListAll(ctx, nil, "", 1000, now.Add(time.Second))
			if err != nil || next != "" || !slices.Equal(ids(ts), reversed(got)) {
				t.Errorf("ListAll = %d tasks, %q, %v; want the %d indexed, newest first", len(ts), next, err, len(got))
			}
			// A creation more than MaxTTL later whose id starts with
			// trimMark drops every older entry but those that share its
			// listpack.
			id := driver.NewID()
			for id[0] != trimMark {
				id = driver.NewID()
			}
			create(now.Add(driver.MaxTTL+2*time.Hour), id)
			if got := entries(t, rc, key); len(got) > 101 || got[len(got)-1] != id {
				t.Errorf("index after MaxTTL holds %d entries, want at most 101, the last %s", len(got), id)
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

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// The index of all tasks costs a creation two commands, an XADD and a
// PEXPIRE, inside the create script (no round trip of its own), and an
// XTRIM for one creation in 64, measured with INFO commandstats against a
// store with the index off, creations interleaved, on a redis-server, with
// and without dispatching to a queue (the difference by command,
// connection upkeep of the client left out). (The creation of the stream
// is in the warm-up.) On a Redis Cluster they run in an EVAL pipelined
// after the create script.
func TestAllIndexCommandsPerCreate(t *testing.T) {
	const rounds = 40
	// marked counts the measured creations of the indexed store whose id
	// starts with trimMark: each also trims the index (XTRIM).
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
		// index's stream made.
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
			want := map[string]int64{"xadd": rounds, "pexpire": rounds, "xtrim": marked}
			if marked == 0 {
				delete(want, "xtrim")
			}
			if !maps.Equal(extra, want) {
				t.Errorf("the index cost %v over %d creations, want exactly an XADD and a PEXPIRE each and an XTRIM for the %d whose id starts with %q", extra, rounds, marked, trimMark)
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
		want := map[string]int64{"xadd": rounds, "pexpire": rounds, "eval": rounds, "xtrim": marked}
		if marked == 0 {
			delete(want, "xtrim")
		}
		if !maps.Equal(extra, want) {
			t.Errorf("on a Redis Cluster the index cost %v over %d creations, want an EVAL and its XADD and PEXPIRE each (and an XTRIM for the %d marked)", extra, rounds, marked)
		}
	})
}

// An index entry whose task is gone (expired before a trim dropped it)
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
		if err := rc.Do(ctx, rc.B().Xadd().Key(streamOf(s.allKeys[0])).Id(entryID{uint64(now.UnixMilli() + int64(i) + 1), 0}.String()).
			FieldValue().FieldValue("i", driver.NewID()).Build()).Error(); err != nil {
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
