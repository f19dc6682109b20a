package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/queue/pgqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// A dispatching store keeps each live task's message in the queue at the
// time it must run next, in the same transaction as the transition: now
// at creation, the lease's end when a claim finds the task held, now or
// the wake time when a commit releases it, the deadline of a park (none
// without one), now when an update resumes it; a task that ends has none.
// Only enqueues that an idle consumer must see notify the queue's
// channel: a worker's own commit does not.
func TestDispatch(t *testing.T) {
	url := testpg.Start(t)
	p := pool(t, url)
	schema := testpg.Schema(t, url)
	s := pgstore.New(p, &pgstore.Options{Schema: schema, Dispatch: true})
	t.Cleanup(s.Close)
	q := pgqueue.New(p, &pgqueue.Options{Schema: schema})
	if !s.Dispatches() || pgstore.New(p, nil).Dispatches() {
		t.Fatal("Dispatches() must be true exactly when Options.Dispatch is set")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	now := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	queued := func(id string) (time.Time, bool) {
		t.Helper()
		var ms int64
		err := p.QueryRow(ctx, `SELECT `+schema+`.ms(due_at) FROM `+schema+`.queue WHERE task_id = $1::text`, id).Scan(&ms)
		if errors.Is(err, pgx.ErrNoRows) {
			return time.Time{}, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return time.UnixMilli(ms), true
	}
	want := func(stage, id string, at time.Time) {
		t.Helper()
		got, ok := queued(id)
		switch {
		case at.IsZero() && ok:
			t.Errorf("%s: message due at %v, want none", stage, got)
		case !at.IsZero() && !ok:
			t.Errorf("%s: no message, want one due at %v", stage, at)
		case !at.IsZero() && !got.Equal(at):
			t.Errorf("%s: message due at %v, want %v", stage, got, at)
		}
	}
	// The queue's notifications, on a connection of the test's own; a
	// sentinel notified after them tells when all have arrived (a
	// session receives notifications in commit order).
	lc, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close(context.Background())
	channel := schema + ".queue"
	if _, err := lc.Exec(ctx, `LISTEN "`+channel+`"`); err != nil {
		t.Fatal(err)
	}
	var wakes int
	tokens := func() int {
		t.Helper()
		if _, err := p.Exec(ctx, `SELECT pg_notify($1::text, 'sync')`, channel); err != nil {
			t.Fatal(err)
		}
		for {
			n, err := lc.WaitForNotification(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n.Payload == "sync" {
				return wakes
			}
			wakes++
		}
	}
	create := func() string {
		t.Helper()
		id := driver.NewID()
		if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "o", Tool: "x", Args: json.RawMessage(`{}`), TTL: 24 * time.Hour, Now: now}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// The queue's consumer takes the message before each claim, as a
	// worker does (times lie in the past so that it is due).
	take := func(id string) {
		t.Helper()
		d, ok, _, err := q.Receive(ctx)
		if err != nil || !ok || d.TaskID != id {
			t.Fatalf("Receive = %+v, %v, %v; want %s", d, ok, err, id)
		}
	}
	id := create()
	want("after Create", id, now)
	if n := tokens(); n != 1 {
		t.Errorf("after Create: %d notifications, want 1", n)
	}
	take(id)
	cl, err := s.Claim(ctx, id, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := tokens()
	wake := now.Add(30 * time.Minute)
	if err := s.Commit(ctx, cl, &driver.Change{Now: now, Release: true, WakeAt: wake}); err != nil {
		t.Fatal(err)
	}
	want("after a commit that sleeps", id, wake)
	if got := tokens(); got != before {
		t.Errorf("a worker's commit sent %d notifications, want none", got-before)
	}
	take(id)
	if cl, err = s.Claim(ctx, id, wake, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, cl, &driver.Change{Now: wake, Park: map[string]json.RawMessage{"k": json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	want("after a park without a deadline", id, time.Time{})
	if _, err := s.Update(ctx, "o", id, map[string]json.RawMessage{"k": json.RawMessage(`{"action":"accept"}`)}, wake); err != nil {
		t.Fatal(err)
	}
	want("after a resuming update", id, wake)
	take(id)
	if cl, err = s.Claim(ctx, id, wake, time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := wake.Add(time.Minute)
	if err := s.Commit(ctx, cl, &driver.Change{Now: wake, Park: map[string]json.RawMessage{"k2": json.RawMessage(`{}`)}, WakeAt: deadline}); err != nil {
		t.Fatal(err)
	}
	want("after a park with a deadline", id, deadline)
	take(id)
	if cl, err = s.Claim(ctx, id, deadline, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, cl, &driver.Change{Now: deadline, Complete: json.RawMessage(`{"content":[]}`)}); err != nil {
		t.Fatal(err)
	}
	want("after completion", id, time.Time{})

	held := create()
	take(held)
	if _, err := s.Claim(ctx, held, now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, held, now.Add(time.Second), time.Minute); !errors.Is(err, driver.ErrLeased) {
		t.Fatalf("second Claim: %v, want ErrLeased", err)
	}
	want("after a Claim that found a live lease", held, now.Add(time.Minute))

	other := create()
	if _, _, err := s.Cancel(ctx, "o", other, now); err != nil {
		t.Fatal(err)
	}
	want("after a cancel that ended the task", other, time.Time{})
}
