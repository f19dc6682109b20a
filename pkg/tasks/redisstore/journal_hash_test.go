package redisstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// TestJournalInTheHash walks a task's journal through commits of entries
// whose sizes put the chunk boundaries everywhere (inside an entry, at its
// newline, at a chunk's end): every claim and Inspect sees every entry in
// order, the task has no journal key and its hash stays a listpack; once
// the chunks would pass maxJournalChunks the journal moves to its list for
// good, and later entries follow it there. A task written before this
// format (its journal in the list) keeps appending to its list.
func TestJournalInTheHash(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			s := New(c, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			exists := func(key string) bool {
				n, err := c.Do(ctx, c.B().Exists().Key(key).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			}
			entry := func(i, size int) driver.Entry {
				return driver.Entry{Name: fmt.Sprintf("s%d", i), Kind: driver.KindDo,
					Value: json.RawMessage(`"` + strings.Repeat(string(rune('a'+i%26)), size) + `"`), Attempt: 1}
			}
			// check claims the task and compares its journal, and
			// Inspect's, with want.
			check := func(stage, id string, want []driver.Entry) *driver.Claim {
				t.Helper()
				cl, err := s.Claim(ctx, id, now, time.Minute)
				if err != nil || cl.Gen == 0 {
					t.Fatalf("%s: Claim = %+v, %v", stage, cl, err)
				}
				rec, err := s.Inspect(ctx, id)
				if err != nil {
					t.Fatalf("%s: Inspect: %v", stage, err)
				}
				for _, got := range [][]driver.Entry{cl.Journal, rec.Journal} {
					if len(got) != len(want) {
						t.Fatalf("%s: %d entries, want %d", stage, len(got), len(want))
					}
					for i := range want {
						if got[i].Name != want[i].Name || string(got[i].Value) != string(want[i].Value) || got[i].Attempt != 1 {
							t.Fatalf("%s: entry %d = %+v, want %+v", stage, i, got[i], want[i])
						}
					}
				}
				return cl
			}

			seed := []driver.Entry{entry(0, 3)}
			id := driver.NewID()
			if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "t", Args: json.RawMessage(`{}`),
				TTL: time.Hour, Now: now, Journal: seed}); err != nil {
				t.Fatal(err)
			}
			tk, _, j, _ := s.keys(id)
			want := seed
			cl := check("created", id, want)
			// tasks/get reads the record, not the journal.
			arr, err := getScript.lua.Exec(ctx, c, s.readKeys(id), []string{"alice"}).ToArray()
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := arr[0].AsStrMap(); h["J0"] != "" || h["owner"] != "alice" {
				t.Errorf("the get script's record = %v, want the owner and no journal chunk", h)
			}
			// Entries of 1 to 130 bytes of value, one or three a commit.
			total := 0
			for i := 1; total < (maxJournalChunks-4)*maxInline; i++ {
				add := []driver.Entry{entry(i, i*7%131)}
				if i%3 == 0 {
					add = append(add, entry(i+1000, 40), entry(i+2000, 63-i%5))
				}
				for _, e := range add {
					b, _ := json.Marshal(e)
					total += len(b) + 1
				}
				if err := s.Commit(ctx, cl, &driver.Change{Now: now, Append: add}); err != nil {
					t.Fatal(err)
				}
				want = append(want, add...)
				if i%4 == 0 {
					if err := s.Commit(ctx, cl, &driver.Change{Now: now, Release: true}); err != nil {
						t.Fatal(err)
					}
					cl = check(fmt.Sprintf("after commit %d", i), id, want)
				}
			}
			if err := s.Commit(ctx, cl, &driver.Change{Now: now, Release: true}); err != nil {
				t.Fatal(err)
			}
			cl = check("near the bound", id, want)
			if exists(j) {
				t.Fatalf("a journal of %d bytes has a key of its own", total)
			}
			compact(t, b, c, s, id, "near the bound")
			// Past the bound: to the list, and the next entries after it.
			for i := range 3 {
				add := []driver.Entry{entry(100+i, 5*maxInline)}
				if err := s.Commit(ctx, cl, &driver.Change{Now: now, Append: add}); err != nil {
					t.Fatal(err)
				}
				want = append(want, add...)
			}
			if !exists(j) {
				t.Fatal("a journal past the bound is not in its list")
			}
			if n, _ := c.Do(ctx, c.B().Hexists().Key(tk).Field("J0").Build()).AsBool(); n {
				t.Error("chunks left in the hash after the move")
			}
			compact(t, b, c, s, id, "moved")
			if err := s.Commit(ctx, cl, &driver.Change{Now: now, Release: true}); err != nil {
				t.Fatal(err)
			}
			check("moved", id, want)

			// The previous format: the journal in the list, the flag j 1.
			prev := driver.NewID()
			if _, err := s.Create(ctx, &driver.NewTask{ID: prev, Owner: "alice", Tool: "t", Args: json.RawMessage(`{}`),
				TTL: time.Hour, Now: now}); err != nil {
				t.Fatal(err)
			}
			toEarlierFormat(t, c, s, prev)
			ptk, _, pj, _ := s.keys(prev)
			old, _ := json.Marshal(entry(0, 10))
			for _, cmd := range [][]string{{"RPUSH", pj, string(old)}, {"HSET", ptk, "j", "1"}} {
				if err := c.Do(ctx, c.B().Arbitrary(cmd...).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			pcl := check("previous format", prev, []driver.Entry{entry(0, 10)})
			if err := s.Commit(ctx, pcl, &driver.Change{Now: now, Release: true, Append: []driver.Entry{entry(1, 20)}}); err != nil {
				t.Fatal(err)
			}
			check("previous format, appended", prev, []driver.Entry{entry(0, 10), entry(1, 20)})
			if n, _ := c.Do(ctx, c.B().Llen().Key(pj).Build()).AsInt64(); n != 2 {
				t.Errorf("the previous format's list has %d entries, want 2", n)
			}
		})
	}
}

// TestInputRequestsByReference parks tasks the way the engine does (the
// input entry journaled in the parking commit) and otherwise: a request
// the parking commit journals byte for byte is kept by reference, and
// tasks/get, Outstanding and Inspect show it whole (after one answer, the
// other key's), also once the journal has moved to its list; a request
// that differs from its entry (whitespace), or has none, is kept whole in
// :p. A park whose requests are all by reference keeps their keys in the
// task hash's field pk (no :p), which answers, the claim past the deadline
// and a cancellation take down; keys that do not fit there are kept in :p
// as "", a listpack on redis-server.
func TestInputRequestsByReference(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			c := b.client(t)
			s := New(c, &Options{Prefix: uniquePrefix()})
			ctx := t.Context()
			now := time.Now().UTC().Truncate(time.Millisecond)
			reqA := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Delete a.pdf?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}}}}}`)
			reqB := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Really?"}}`)
			both := map[string]json.RawMessage{"a": reqA, "b": reqB}
			raw, _ := json.Marshal(both)
			park := func(journal []driver.Entry, reqs map[string]json.RawMessage) string {
				t.Helper()
				return committed(t, s, driver.NewTask{TTL: time.Hour, Now: now}, &driver.Change{Now: now, Append: journal, Park: reqs})
			}
			// stored returns the requests as kept: the hash p's, and the
			// keys of the task hash's field pk (as "").
			stored := func(id string) map[string]string {
				t.Helper()
				tk, p, _, _ := s.keys(id)
				h, err := c.Do(ctx, c.B().Hgetall().Key(p).Build()).AsStrMap()
				if err != nil {
					t.Fatal(err)
				}
				pk, err := c.Do(ctx, c.B().Hget().Key(tk).Field("pk").Build()).ToString()
				if err != nil && !rueidis.IsRedisNil(err) {
					t.Fatal(err)
				}
				for _, k := range pkKeys(pk) {
					if _, dup := h[k]; dup {
						t.Errorf("key %q both in pk and in the requests hash", k)
					}
					h[k] = ""
				}
				return h
			}
			// inHash reports whether the task's requests are all in its
			// field pk (no key p).
			inHash := func(id string) bool {
				t.Helper()
				tk, p, _, _ := s.keys(id)
				n, _ := c.Do(ctx, c.B().Exists().Key(p).Build()).AsInt64()
				pk, _ := c.Do(ctx, c.B().Hexists().Key(tk).Field("pk").Build()).AsBool()
				return n == 0 && pk
			}
			shows := func(stage, id string, want map[string]json.RawMessage) {
				t.Helper()
				tk, err := s.Get(ctx, "alice", id)
				if err != nil {
					t.Fatalf("%s: Get: %v", stage, err)
				}
				out, err := s.Outstanding(ctx, "alice", id, now)
				if err != nil {
					t.Fatalf("%s: Outstanding: %v", stage, err)
				}
				rec, err := s.Inspect(ctx, id)
				if err != nil {
					t.Fatalf("%s: Inspect: %v", stage, err)
				}
				for name, got := range map[string]map[string]json.RawMessage{"Get": tk.InputRequests, "Outstanding": out, "Inspect": rec.Waiting} {
					if len(got) != len(want) {
						t.Errorf("%s: %s shows %d requests, want %d", stage, name, len(got), len(want))
					}
					for k, v := range want {
						if string(got[k]) != string(v) {
							t.Errorf("%s: %s request %q = %s, want %s", stage, name, k, got[k], v)
						}
					}
				}
			}
			entry := driver.Entry{Name: "confirm", Kind: driver.KindInput, Keys: []string{"a", "b"}, Value: raw}

			id := park([]driver.Entry{{Name: "s", Kind: driver.KindDo, Value: json.RawMessage(`1`)}, entry}, both)
			if h := stored(id); len(h) != 2 || h["a"] != "" || h["b"] != "" || !inHash(id) {
				t.Errorf("requests = %v (in the field pk: %v), want both by reference in pk", h, inHash(id))
			}
			shows("parked", id, both)
			if resumed, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"a": json.RawMessage(`{"action":"accept"}`)}, now); err != nil || resumed {
				t.Fatal(resumed, err)
			}
			shows("one answered", id, map[string]json.RawMessage{"b": reqB})
			if h := stored(id); len(h) != 1 || !inHash(id) {
				t.Errorf("after one answer: requests %v, want b in pk", h)
			}
			// An answer to a key not waited for changes nothing; the last
			// one resumes the task, and no key is left.
			if _, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"a": json.RawMessage(`{"action":"accept"}`)}, now); err != nil {
				t.Fatal(err)
			}
			shows("a answered again", id, map[string]json.RawMessage{"b": reqB})
			if resumed, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"b": json.RawMessage(`{"action":"decline"}`)}, now); err != nil || !resumed {
				t.Fatalf("the last answer: resumed %v, %v", resumed, err)
			}
			if h := stored(id); len(h) != 0 {
				t.Errorf("after the last answer: requests %v", h)
			}
			if cl, err := s.Claim(ctx, id, now, time.Minute); err != nil || len(cl.Responses) != 2 {
				t.Fatalf("claim after the answers: %+v, %v", cl, err)
			}

			// Leaving input_required otherwise drops pk: a claim past the
			// deadline, a cancellation.
			for _, leave := range []string{"deadline", "cancel"} {
				id := committed(t, s, driver.NewTask{TTL: time.Hour, Now: now}, &driver.Change{Now: now, Append: []driver.Entry{entry}, Park: both, WakeAt: now.Add(time.Minute)})
				if !inHash(id) {
					t.Fatalf("%s: requests not in pk", leave)
				}
				if leave == "deadline" {
					if _, err := s.Claim(ctx, id, now.Add(2*time.Minute), time.Minute); err != nil {
						t.Fatal(err)
					}
				} else if _, _, err := s.Cancel(ctx, "alice", id, now); err != nil {
					t.Fatal(err)
				}
				if h := stored(id); len(h) != 0 {
					t.Errorf("%s: requests left %v", leave, h)
				}
				if out, err := s.Outstanding(ctx, "alice", id, now.Add(2*time.Minute)); err != nil || len(out) != 0 {
					t.Errorf("%s: Outstanding = %v, %v", leave, out, err)
				}
			}

			// Keys that do not fit in pk (longer than 64 bytes together, or
			// holding a newline) are kept in the hash p, by reference; on
			// redis-server it stays a listpack.
			long := strings.Repeat("k", 40)
			for _, keys := range [][]string{{long + "1", long + "2"}, {"a\nb"}} {
				reqs := map[string]json.RawMessage{}
				for _, k := range keys {
					reqs[k] = reqB
				}
				v, _ := json.Marshal(reqs)
				id := park([]driver.Entry{{Name: "q", Kind: driver.KindInput, Keys: keys, Value: v}}, reqs)
				if h := stored(id); len(h) != len(keys) || inHash(id) {
					t.Errorf("keys %q: requests %v, in pk %v; want by reference in p", keys, h, inHash(id))
				}
				if b.name == "redis-server" {
					_, p, _, _ := s.keys(id)
					if enc, _ := c.Do(ctx, c.B().ObjectEncoding().Key(p).Build()).ToString(); enc != "listpack" {
						t.Errorf("requests hash encoding %q, want listpack", enc)
					}
				}
				shows("keys "+strings.Join(keys, ","), id, reqs)
			}

			// The journal in its list.
			big := driver.Entry{Name: "big", Kind: driver.KindDo, Value: json.RawMessage(`"` + strings.Repeat("x", maxJournalChunks*maxInline) + `"`)}
			listed := park([]driver.Entry{big, entry}, both)
			_, _, j, _ := s.keys(listed)
			if n, _ := c.Do(ctx, c.B().Llen().Key(j).Build()).AsInt64(); n != 2 {
				t.Fatalf("journal list of %d entries, want 2", n)
			}
			shows("journal in its list", listed, both)

			// Kept whole: a request that is not its entry's bytes, and a
			// park without an entry.
			spaced := map[string]json.RawMessage{"a": json.RawMessage(`{ "method": "elicitation/create" }`), "b": reqB}
			id = park([]driver.Entry{entry}, spaced)
			if h := stored(id); h["a"] != string(spaced["a"]) || h["b"] != "" {
				t.Errorf("requests hash = %v, want a whole and b by reference", h)
			}
			shows("one whole", id, spaced)
			id = park(nil, both)
			if h := stored(id); h["a"] != string(reqA) || h["b"] != string(reqB) {
				t.Errorf("requests hash without a journal entry = %v, want both whole", h)
			}
			shows("no entry", id, both)
		})
	}
}
