package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/pgschema"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// waitReady waits for sub to be confirmed.
func waitReady(ctx context.Context, t *testing.T, sub *driver.Subscription) {
	t.Helper()
	select {
	case <-sub.Ready:
	case err := <-sub.Done:
		t.Fatalf("subscription ended: %v", err)
	case <-ctx.Done():
		t.Fatal("subscription never confirmed")
	}
}

// TestWatchAnnouncesTransitions: every transition a client can see is
// announced, when it commits, to a Watch of that task alone; a second
// watch of the store shares the listening connection and is ready at
// once.
func TestWatchAnnouncesTransitions(t *testing.T) {
	url := testpg.Start(t)
	s := pgstore.New(pool(t, url), &pgstore.Options{Schema: testpg.Schema(t, url)})
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	mk := func() *driver.Task {
		tk, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now})
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
	waitReady(ctx, t, sub)
	otherGot := make(chan string, 16)
	sub2, err := s.Watch(ctx, []string{other.ID}, func(id string) { otherGot <- id })
	if err != nil {
		t.Fatal(err)
	}
	waitReady(ctx, t, sub2)
	expect := func(ch chan string, id, what string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != id {
				t.Fatalf("%s: announced %s, want %s", what, got, id)
			}
		case <-ctx.Done():
			t.Fatalf("%s: not announced", what)
		}
	}
	// The other task's transitions are the other watch's business.
	if _, _, err := s.Cancel(ctx, "alice", other.ID, now); err != nil {
		t.Fatal(err)
	}
	expect(otherGot, other.ID, "the other task's cancel")
	c, err := s.Claim(ctx, watched.ID, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, c, &driver.Change{Now: now, Park: map[string]json.RawMessage{"k": json.RawMessage(`{"method":"elicitation/create"}`)}}); err != nil {
		t.Fatal(err)
	}
	expect(got, watched.ID, "park")
	if _, err := s.Update(ctx, "alice", watched.ID, map[string]json.RawMessage{"k": json.RawMessage(`{"action":"decline"}`)}, now); err != nil {
		t.Fatal(err)
	}
	expect(got, watched.ID, "update")
	if _, _, err := s.Cancel(ctx, "alice", watched.ID, now); err != nil {
		t.Fatal(err)
	}
	expect(got, watched.ID, "cancel")
	select {
	case id := <-got:
		t.Fatalf("unexpected announcement of %s", id)
	default:
	}
	cancel()
	if err := <-sub.Done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("subscription ended with %v", err)
	}
}

// A watch whose listening connection dies ends with an error (the stream
// that holds it ends, and its client listens again), and the next watch
// listens on a new connection.
func TestWatchEndsWithItsConnection(t *testing.T) {
	url := testpg.Start(t)
	p := pool(t, url)
	s := pgstore.New(p, &pgstore.Options{Schema: testpg.Schema(t, url)})
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := driver.NewID()
	if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "t", TTL: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Watch(ctx, []string{id}, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(ctx, t, sub)
	if _, err := p.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sub.Done:
		if err == nil {
			t.Fatal("the watch ended without an error when its connection died")
		}
	case <-ctx.Done():
		t.Fatal("the watch outlived its connection")
	}
	got := make(chan string, 1)
	sub, err = s.Watch(ctx, []string{id}, func(id string) { got <- id })
	if err != nil {
		t.Fatal(err)
	}
	waitReady(ctx, t, sub)
	if _, _, err := s.Cancel(ctx, "alice", id, time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("the new watch heard nothing")
	}
}

// BenchmarkWatchDispatch: one notification reaching its task's watch
// while 10,000 watches of other tasks are open on the same store (a read
// cache's or a server's task streams): the cost of a notification should
// not grow with the watches of other tasks.
func BenchmarkWatchDispatch(b *testing.B) {
	url := testpg.Start(b)
	p := testpg.Pool(b, url)
	schema := testpg.Schema(b, url)
	s := pgstore.New(p, &pgstore.Options{Schema: schema})
	b.Cleanup(s.Close)
	ctx := b.Context()
	for _, others := range []int{0, 10000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for range others {
				if _, err := s.Watch(wctx, []string{driver.NewID()}, func(string) {}); err != nil {
					b.Fatal(err)
				}
			}
			id := driver.NewID()
			got := make(chan struct{}, 1)
			sub, err := s.Watch(wctx, []string{id}, func(string) { got <- struct{}{} })
			if err != nil {
				b.Fatal(err)
			}
			select {
			case <-sub.Ready:
			case <-time.After(30 * time.Second):
				b.Fatal("not ready")
			}
			channel := pgschema.TasksChannel(schema)
			b.ResetTimer()
			for range b.N {
				if _, err := p.Exec(ctx, "SELECT pg_notify($1, $2)", channel, id); err != nil {
					b.Fatal(err)
				}
				<-got
			}
		})
	}
}
