package redisstore

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The store and the Redis queue declare driver.DeadlineHonourer, so the
// server calls them directly on a request's path: every call a request
// makes returns with an error once its context's deadline passed, even
// while Redis does not answer at all (its process stopped).
func TestHonoursDeadline(t *testing.T) {
	srv := testredis.StartServer(t)
	c := testredis.Connect(t, srv.URL)
	prefix := uniquePrefix()
	q := redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})
	s := New(c, &Options{Prefix: prefix, Queue: q})
	var _ driver.DeadlineHonourer = s
	var _ driver.DeadlineHonourer = q
	if !s.HonoursDeadline() || !q.HonoursDeadline() {
		t.Fatal("HonoursDeadline() = false")
	}
	ctx := context.Background()
	now := time.Now()
	id := driver.NewID()
	if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "t", TTL: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}

	if err := srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume := func() {
		if stopped {
			stopped = false
			if err := srv.Process.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	defer resume()
	calls := map[string]func(context.Context) error{
		"Get": func(ctx context.Context) error { _, err := s.Get(ctx, "alice", id); return err },
		"Create": func(ctx context.Context) error {
			_, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now})
			return err
		},
		"Update": func(ctx context.Context) error {
			_, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"k": json.RawMessage(`{}`)}, now)
			return err
		},
		"Cancel":  func(ctx context.Context) error { _, _, err := s.Cancel(ctx, "alice", id, now); return err },
		"List":    func(ctx context.Context) error { _, _, err := s.List(ctx, "alice", "", 10, now); return err },
		"Enqueue": func(ctx context.Context) error { return q.Enqueue(ctx, id, time.Time{}) },
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			done <- call(ctx)
		}()
		// Redis stays stopped until every call returned: a call that
		// waited for it would only return once the test gives up.
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s answered nil while Redis was stopped", name)
			}
		case <-time.After(30 * time.Second):
			resume()
			t.Fatalf("%s did not return while Redis was stopped (its context's deadline was 100ms)", name)
		}
	}
	resume()
	if _, err := s.Get(ctx, "alice", id); err != nil {
		t.Fatalf("Get after Redis resumed: %v", err)
	}
}
