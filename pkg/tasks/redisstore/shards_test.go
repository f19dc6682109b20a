package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/slots"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Each task's due entry is in the shard whose hash tag falls in the task's
// own slot range, and Due merges the shards in time order.
func TestDueShards(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			c := b.client(t)
			const n = 12
			s := New(c, &Options{Prefix: uniquePrefix(), Shards: n})
			now := time.Now().Truncate(time.Millisecond)
			var ids []string
			used := map[string]bool{}
			for i := range 40 {
				nt := &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now}
				if _, err := s.Create(ctx, nt); err != nil {
					t.Fatal(err)
				}
				// Spread the attention times: task i is due at now+i ms.
				if err := s.Schedule(ctx, nt.ID, now.Add(time.Duration(i)*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, nt.ID)
				key := s.dueKey(nt.ID)
				used[key] = true
				// Shard k holds the slots s with s*n/Count = k.
				if ks, ts := slots.Slot(key), slots.Slot("{"+nt.ID+"}"); ks*n/slots.Count != ts*n/slots.Count {
					t.Fatalf("task slot %d and its shard %s (slot %d) are in different slot ranges", ts, key, ks)
				}
				if _, err := c.Do(ctx, c.B().Zscore().Key(key).Member(nt.ID).Build()).AsFloat64(); err != nil {
					t.Fatalf("task %s not in its shard %s: %v", nt.ID, key, err)
				}
			}
			if len(used) < 6 {
				t.Fatalf("40 tasks used only %d of %d shards", len(used), n)
			}
			due, err := s.Due(ctx, now.Add(time.Hour), 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(due) != 5 {
				t.Fatalf("Due returned %d entries, want 5", len(due))
			}
			for i, d := range due {
				if d.ID != ids[i] {
					t.Fatalf("Due[%d] = %s, want %s (the earliest across shards)", i, d.ID, ids[i])
				}
			}

			// A shard that fails does not hide the others.
			broken := s.dueKey(ids[0])
			if err := c.Do(ctx, c.B().Del().Key(broken).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := c.Do(ctx, c.B().Set().Key(broken).Value("x").Build()).Error(); err != nil {
				t.Fatal(err)
			}
			due, err = s.Due(ctx, now.Add(time.Hour), 100)
			if err == nil || !strings.Contains(err.Error(), broken) {
				t.Fatalf("Due with a broken shard: err %v, want one naming %s", err, broken)
			}
			want := 0
			for _, id := range ids {
				if s.dueKey(id) != broken {
					want++
				}
			}
			if len(due) != want {
				t.Fatalf("Due with a broken shard returned %d entries, want the other shards' %d", len(due), want)
			}
		})
	}
}

// The sweeper sweeps the shards that answered and reports the one that did
// not.
func TestSweepPartialDue(t *testing.T) {
	ctx := context.Background()
	c := backends()[0].client(t)
	s := New(c, &Options{Prefix: uniquePrefix(), Shards: 4, EnqueueGrace: time.Millisecond})
	now := time.Now()
	var ids []string
	for range 8 {
		nt := &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now}
		if _, err := s.Create(ctx, nt); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, nt.ID)
	}
	broken := s.dueKey(ids[0])
	c.Do(ctx, c.B().Del().Key(broken).Build())
	c.Do(ctx, c.B().Set().Key(broken).Value("x").Build())
	q := &countQueue{}
	srv := tasks.New(&mcp.Implementation{Name: "sweep", Version: "1"}, nil, s, q, nil)
	res, err := srv.Sweep(ctx, 0)
	if err == nil || !strings.Contains(err.Error(), broken) {
		t.Fatalf("Sweep: err %v, want one naming %s", err, broken)
	}
	want := 0
	for _, id := range ids {
		if s.dueKey(id) != broken {
			want++
		}
	}
	if res.Enqueued != want || q.n != want {
		t.Fatalf("Sweep re-enqueued %d (queue saw %d), want the %d tasks of the shards that answered", res.Enqueued, q.n, want)
	}
}

type countQueue struct{ n int }

func (q *countQueue) Enqueue(context.Context, string, time.Time) error { q.n++; return nil }
func (q *countQueue) MaxDelay() time.Duration                          { return 0 }
