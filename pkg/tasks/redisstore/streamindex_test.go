package redisstore

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// listAll pages through owner's tasks (List) and returns their ids.
func listAll(t *testing.T, s *Store, owner string, limit int, now time.Time) []string {
	t.Helper()
	var out []string
	cursor := ""
	for range 1000 {
		ts, next, err := s.List(t.Context(), owner, cursor, limit, now)
		if err != nil {
			t.Fatalf("List(cursor %q): %v", cursor, err)
		}
		out = append(out, ids(ts)...)
		if next == "" {
			return out
		}
		cursor = next
	}
	t.Fatal("List did not end")
	return nil
}

// The list index of a principal is bounded (the oldest entries beyond
// about Options.MaxListed go: whole listpacks, so never more than
// MaxListed plus a hundred stay), drops expired entries, does not name the
// principal, and expires with its last entry; List pages through it newest
// first.
func TestListIndexBounded(t *testing.T) {
	const maxListed, n = 100, 450
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix(), MaxListed: maxListed})
			ctx := t.Context()
			now := time.Now().Truncate(time.Millisecond)
			key := streamOf(s.listKey("alice"))
			if strings.Contains(key, "alice") {
				t.Errorf("list key %q names the principal", key)
			}
			var made []string
			most := 0
			for i := range n {
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`), Listed: true,
					TTL: time.Hour + time.Duration(i)*time.Millisecond, PollInterval: time.Second, Now: now}); err != nil {
					t.Fatal(err)
				}
				made = append(made, id)
				most = max(most, len(entries(t, rc, key)))
			}
			got := entries(t, rc, key)
			if len(got) < maxListed || most > maxListed+100 || !slices.Equal(got, made[n-len(got):]) {
				t.Errorf("after %d creations the list index holds %d entries (at most %d), want the newest %d to %d in order",
					n, len(got), most, maxListed, maxListed+100)
			}
			at, err := rc.Do(ctx, rc.B().Pexpiretime().Key(key).Build()).AsInt64()
			if want := now.Add(time.Hour + (n-1)*time.Millisecond).UnixMilli(); err != nil || at < want-1 || at > want+int64(embedredis.Tick/time.Millisecond) {
				t.Errorf("list index expires at %d (%v), want with its last task at %d", at, err, want)
			}
			for _, limit := range []int{7, 1000} {
				if l := listAll(t, s, "alice", limit, now); !slices.Equal(l, reversed(got)) {
					t.Errorf("List in pages of %d = %d tasks, want the %d indexed, newest first", limit, len(l), len(got))
				}
			}
			// A creation past every earlier task's expiry drops them (but
			// those that share its listpack), and List shows it alone.
			late := now.Add(2 * time.Hour)
			id := driver.NewID()
			if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`), Listed: true,
				TTL: time.Hour, PollInterval: time.Second, Now: late}); err != nil {
				t.Fatal(err)
			}
			if got := entries(t, rc, key); len(got) > 101 || got[len(got)-1] != id {
				t.Errorf("list index after a late creation holds %d entries, want at most 101, the last %s", len(got), id)
			}
			if l := listAll(t, s, "alice", 10, late); !slices.Equal(l, []string{id}) {
				t.Errorf("List after a late creation = %v, want only %s", l, id)
			}
		})
	}
}

// A task whose index position is behind the stream's top (a shorter TTL
// than the task before it; a creation stamped by a clock behind another
// instance's) is indexed just after the top: listed first, nothing lost.
func TestIndexOutOfOrder(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			rc := b.client(t)
			s := New(rc, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now().Truncate(time.Millisecond)
			var made []string
			for i, d := range []struct{ ttl, clock time.Duration }{{2 * time.Hour, 0}, {time.Hour, 0}, {time.Hour, -time.Minute}} {
				id := driver.NewID()
				if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`), Listed: true,
					TTL: d.ttl, PollInterval: time.Second, Now: now.Add(d.clock + time.Duration(i)*time.Millisecond)}); err != nil {
					t.Fatal(err)
				}
				made = append(made, id)
			}
			want := reversed(made)
			if l := listAll(t, s, "alice", 1, now.Add(time.Second)); !slices.Equal(l, want) {
				t.Errorf("List = %v, want %v (the later creations first)", l, want)
			}
			ts, _, err := s.ListAll(ctx, nil, "", 10, now.Add(time.Second))
			if err != nil || !slices.Equal(ids(ts), want) {
				t.Errorf("ListAll = %v (%v), want %v", ids(ts), err, want)
			}
		})
	}
}

// Indexes of the format before 2026-12-03 (sorted sets) are moved into
// their streams by the first read or addition of this format, in the order
// of their scores and with their expiry: no task drops out of a listing,
// and a cursor of the earlier format goes on where it was.
func TestIndexesOfEarlierFormat(t *testing.T) {
	for _, b := range backends() {
		for _, by := range []string{"read", "addition"} {
			t.Run(b.name+"/"+by, func(t *testing.T) {
				rc := b.client(t)
				s := New(rc, &Options{Prefix: uniquePrefix()})
				ctx := t.Context()
				now := time.Now().Truncate(time.Millisecond)
				create := func(at time.Time) string {
					t.Helper()
					id := driver.NewID()
					if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "tool", Args: json.RawMessage(`{}`), Listed: true,
						TTL: time.Hour, PollInterval: time.Second, Now: at}); err != nil {
						t.Fatal(err)
					}
					return id
				}
				// Five tasks, the two last at the same ms, indexed as the
				// earlier format did (the index of all tasks with its marker).
				var old []string
				for i := range 5 {
					old = append(old, create(now.Add(time.Duration(min(i, 3))*time.Millisecond)))
				}
				byScore := slices.Clone(old)
				slices.SortStableFunc(byScore[3:], strings.Compare) // ties went by id
				list, all := s.listKey("alice"), s.allKey(old[0])
				cmds := []rueidis.Completed{rc.B().Del().Key(streamOf(list)).Build(), rc.B().Del().Key(streamOf(all)).Build()}
				for i, id := range old {
					at := now.Add(time.Duration(min(i, 3)) * time.Millisecond)
					cmds = append(cmds,
						rc.B().Zadd().Key(list).ScoreMember().ScoreMember(float64(at.Add(time.Hour).UnixMilli()), id).Build(),
						rc.B().Zadd().Key(all).ScoreMember().ScoreMember(float64(at.UnixMilli()), id).Build())
				}
				cmds = append(cmds,
					rc.B().Zadd().Key(all).ScoreMember().ScoreMember(-1, "~").Build(),
					rc.B().Pexpireat().Key(list).MillisecondsTimestamp(now.Add(time.Hour+3*time.Millisecond).UnixMilli()).Build(),
					rc.B().Pexpire().Key(all).Milliseconds((driver.MaxTTL + indexWindow).Milliseconds()).Build())
				for _, r := range rc.DoMulti(ctx, cmds...) {
					if err := r.Error(); err != nil {
						t.Fatal(err)
					}
				}
				want := reversed(byScore)
				var added string
				if by == "addition" {
					added = create(now.Add(10 * time.Millisecond))
					want = append([]string{added}, want...)
				}
				later := now.Add(time.Second)
				// A cursor of the earlier format, after the first of the
				// two tied tasks.
				oldCursor := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(now.Add(time.Hour+3*time.Millisecond).UnixMilli(), 10) + ":" + want[len(want)-5]))
				if l := listAll(t, s, "alice", 2, later); !slices.Equal(l, want) {
					t.Errorf("List = %v, want %v", l, want)
				}
				ts, _, err := s.ListAll(ctx, nil, "", 10, later)
				if err != nil || !slices.Equal(ids(ts), want) {
					t.Errorf("ListAll = %v (%v), want %v", ids(ts), err, want)
				}
				for _, k := range []string{list, all} {
					if n, _ := rc.Do(ctx, rc.B().Exists().Key(k).Build()).AsInt64(); n != 0 {
						t.Errorf("the sorted set %s is still there", k)
					}
				}
				wantAt := now.Add(time.Hour + 3*time.Millisecond).UnixMilli()
				if by == "addition" {
					wantAt = now.Add(time.Hour + 10*time.Millisecond).UnixMilli()
				}
				at, err := rc.Do(ctx, rc.B().Pexpiretime().Key(streamOf(list)).Build()).AsInt64()
				if err != nil || at < wantAt-1 || at > wantAt+int64(embedredis.Tick/time.Millisecond) {
					t.Errorf("the list stream expires at %d (%v), want %d", at, err, wantAt)
				}
				ts, next, err := s.List(ctx, "alice", oldCursor, 10, later)
				if err != nil || next != "" || !slices.Equal(ids(ts), want[len(want)-4:]) {
					t.Errorf("List after a cursor of the earlier format = %v, %q, %v; want %v", ids(ts), next, err, want[len(want)-4:])
				}
			})
		}
	}
}

// A cursor the store did not issue is refused, whatever its form.
func TestIndexCursors(t *testing.T) {
	s := New(backends()[0].client(t), &Options{Prefix: uniquePrefix()})
	for _, c := range []string{"%%", "MTIz", base64.RawURLEncoding.EncodeToString([]byte("12-x")),
		base64.RawURLEncoding.EncodeToString([]byte("12:notanid")), base64.RawURLEncoding.EncodeToString([]byte("12-3/-1"))} {
		if _, ok := decodeCursor(c); ok {
			t.Errorf("cursor %q decoded", c)
		}
	}
	for _, p := range []cursorPos{{at: entryID{1764750000000, 3}, shard: -1}, {at: entryID{1, maxSeq}, shard: 5}} {
		if got, ok := decodeCursor(encodeCursor(p.at, p.shard)); !ok || got != p {
			t.Errorf("cursor of %+v decoded as %+v, %v", p, got, ok)
		}
	}
	if _, _, err := s.List(t.Context(), "alice", encodeCursor(entryID{1, 2}, 0), 10, time.Now()); err != driver.ErrBadCursor {
		t.Errorf("List with a cursor of ListAll: %v, want ErrBadCursor", err)
	}
}

// The two indexes cost about 41 bytes of Redis memory per task they hold
// (MEMORY USAGE on redis-server 7.0 with jemalloc, 2,000 tasks of one
// principal): the sorted sets of the earlier format cost about 129 (a
// skiplist node, a hash table entry and the member), which at 1k–100k live
// tasks, where both hold every task, put a task over 1 KiB.
func TestIndexMemory(t *testing.T) {
	const n, bound = 2000, 50
	rc := testredis.Client(t, "redis-server")
	s := New(rc, &Options{Prefix: uniquePrefix()})
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	for i := range n {
		if _, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: longOwner, Tool: "tool", Args: json.RawMessage(`{}`), Listed: true,
			TTL: 24 * time.Hour, PollInterval: time.Second, Now: now.Add(time.Duration(i/4) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{streamOf(s.listKey(longOwner)), streamOf(s.allKeys[0])} {
		b, err := rc.Do(ctx, rc.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes for %d tasks, %.1f per task", key, b, n, float64(b)/n)
		if per := float64(b) / n; per > bound {
			t.Errorf("%s costs %.1f bytes per task, want at most %d", key, per, bound)
		}
	}
}
