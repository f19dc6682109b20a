package redisstore

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
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
