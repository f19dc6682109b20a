package redisstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// TestParkedWithoutDeadlineLeavesTheDueIndex: a task parked for input
// without a deadline has nothing for the sweeper to do until an answer
// resumes it or it expires, so it costs the due index nothing (a member
// is about 120 bytes of Redis memory); the answer that resumes it indexes
// it again, due within the grace, and a park with a deadline stays
// indexed at the deadline.
func TestParkedWithoutDeadlineLeavesTheDueIndex(t *testing.T) {
	for _, b := range backends() {
		for _, dispatch := range []bool{false, true} {
			if dispatch && !b.dispatches() {
				continue
			}
			name := b.name
			if dispatch {
				name += "+dispatch"
			}
			t.Run(name, func(t *testing.T) {
				c := b.client(t)
				prefix := uniquePrefix()
				o := &Options{Prefix: prefix, EnqueueGrace: 30 * time.Second}
				if dispatch {
					o.Queue = redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})
				}
				s := New(c, o)
				ctx := t.Context()
				now := time.Now().UTC().Truncate(time.Millisecond)
				park := func(deadline time.Time) string {
					t.Helper()
					id := driver.NewID()
					if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "t", Args: json.RawMessage(`{}`),
						TTL: time.Hour, PollInterval: time.Second, Now: now}); err != nil {
						t.Fatal(err)
					}
					cl, err := s.Claim(ctx, id, now, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Commit(ctx, cl, &driver.Change{Now: now, WakeAt: deadline,
						Park: map[string]json.RawMessage{"ok": json.RawMessage(`{}`)}}); err != nil {
						t.Fatal(err)
					}
					return id
				}
				dueAt := func(id string) (time.Time, bool) {
					t.Helper()
					sc, err := c.Do(ctx, c.B().Zscore().Key(s.dueKey(id)).Member(id).Build()).AsFloat64()
					if rueidis.IsRedisNil(err) {
						return time.Time{}, false
					}
					if err != nil {
						t.Fatal(err)
					}
					return time.UnixMilli(int64(sc)).UTC(), true
				}
				id := park(time.Time{})
				if at, ok := dueAt(id); ok {
					t.Errorf("a task parked without a deadline is in the due index at %v", at)
				}
				if due, err := s.Due(ctx, now.Add(2*time.Hour), 100); err != nil || hasDue(due, id) {
					t.Errorf("Due after its expiry = %v, %v; want without the parked task", due, err)
				}
				if resumed, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"ok": json.RawMessage(`{"action":"accept"}`)}, now); err != nil || !resumed {
					t.Fatalf("Update = %v, %v", resumed, err)
				}
				if at, ok := dueAt(id); !ok || !at.Equal(now.Add(30*time.Second)) {
					t.Errorf("a resumed task is due at %v (%v), want %v", at, ok, now.Add(30*time.Second))
				}
				deadline := now.Add(10 * time.Minute)
				id2 := park(deadline)
				if at, ok := dueAt(id2); !ok || !at.Equal(deadline.Add(30*time.Second)) {
					t.Errorf("a task parked until %v is due at %v (%v), want its deadline and the grace", deadline, at, ok)
				}
			})
		}
	}
}
