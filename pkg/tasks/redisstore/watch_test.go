package redisstore

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// TestWatchAnnouncesTransitions: every transition a client can see is
// announced on the task's channel, in the round trip of the transition, to
// a Watch of that task alone (on a real redis-server and on the embedded
// Redis).
func TestWatchAnnouncesTransitions(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := New(b.client(t), &Options{Prefix: uniquePrefix()})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			now := time.Now()
			mk := func() *tasks.Task {
				tk, err := s.Create(ctx, &tasks.NewTask{ID: tasks.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				return tk
			}
			watched, other := mk(), mk()
			got := make(chan string, 16)
			sub, err := s.Watch(ctx, []string{watched.ID, "not an id"}, func(id string) { got <- id })
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-sub.Ready:
			case err := <-sub.Done:
				t.Fatalf("subscription ended: %v", err)
			case <-ctx.Done():
				t.Fatal("subscription never confirmed")
			}
			expect := func(what string) {
				t.Helper()
				select {
				case id := <-got:
					if id != watched.ID {
						t.Fatalf("%s: announced %s, want %s", what, id, watched.ID)
					}
				case <-ctx.Done():
					t.Fatalf("%s: not announced", what)
				}
			}
			// The other task's transitions are not this watch's business.
			if _, _, err := s.Cancel(ctx, "alice", other.ID, now); err != nil {
				t.Fatal(err)
			}
			c, err := s.Claim(ctx, watched.ID, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, c, &tasks.Change{Now: now, Park: map[string]json.RawMessage{"k": json.RawMessage(`{"method":"elicitation/create"}`)}}); err != nil {
				t.Fatal(err)
			}
			expect("park")
			if _, err := s.Update(ctx, "alice", watched.ID, map[string]json.RawMessage{"k": json.RawMessage(`{"action":"decline"}`)}, now); err != nil {
				t.Fatal(err)
			}
			expect("update")
			if _, _, err := s.Cancel(ctx, "alice", watched.ID, now); err != nil {
				t.Fatal(err)
			}
			expect("cancel")
			select {
			case id := <-got:
				t.Fatalf("unexpected announcement of %s", id)
			default:
			}
			cancel()
			if err := <-sub.Done; err != nil && err != context.Canceled {
				t.Fatalf("subscription ended with %v", err)
			}
		})
	}
}
