package pgstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// Expired tasks are deleted, with their journals, by the sweeper's Due
// calls, at most Options.PurgeBatch per call; live tasks stay.
func TestDuePurgesExpiredInBatches(t *testing.T) {
	url := testpg.Start(t)
	p := pool(t, url)
	schema := testpg.Schema(t, url)
	s := pgstore.New(p, &pgstore.Options{Schema: schema, PurgeBatch: 3})
	t.Cleanup(s.Close)
	ctx := t.Context()
	const expiring = 7
	created := time.Now().Add(-time.Hour) // expired an hour ago by the database's clock
	for range expiring {
		nt := &driver.NewTask{ID: driver.NewID(), Owner: "o", Tool: "x", Args: json.RawMessage(`{}`), TTL: time.Minute, Now: created,
			Journal: []driver.Entry{{Name: "a", Kind: driver.KindDo, Value: json.RawMessage(`1`)}}}
		if _, err := s.Create(ctx, nt); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "o", nt.ID); err == nil {
			t.Fatal("a task created past its expiry is readable")
		}
	}
	live := driver.NewID()
	if _, err := s.Create(ctx, &driver.NewTask{ID: live, Owner: "o", Tool: "x", Args: json.RawMessage(`{}`), TTL: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	count := func(table string) int {
		t.Helper()
		var n int
		if err := p.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.`+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, want := range []int{expiring - 3, expiring - 6, 0, 0} {
		if _, err := s.Due(ctx, time.Now(), 100); err != nil {
			t.Fatal(err)
		}
		if got := count("tasks") - 1; got != want {
			t.Fatalf("%d expired tasks left after a Due, want %d", got, want)
		}
	}
	if n := count("journal"); n != 0 {
		t.Errorf("%d journal entries of deleted tasks left", n)
	}
	if _, err := s.Get(ctx, "o", live); err != nil {
		t.Errorf("the live task: %v", err)
	}
}

// Text PostgreSQL cannot hold (NUL bytes, invalid UTF-8) never fails a
// transition: status messages and input keys are stored with U+FFFD in
// its place, raw JSON with U+FFFD for invalid UTF-8 (as a JSON decoder
// reads it); an owner that cannot be stored as it is cannot create a task,
// and finds none.
func TestUnstorableText(t *testing.T) {
	url := testpg.Start(t)
	s := pgstore.New(pool(t, url), &pgstore.Options{Schema: testpg.Schema(t, url)})
	t.Cleanup(s.Close)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	id := driver.NewID()
	if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "o", Tool: "x", Args: json.RawMessage("{\"a\":\"\xff\"}"), TTL: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	var args struct{ A string }
	got, err := s.Get(ctx, "o", id)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got.Args, &args); err != nil || args.A != "\uFFFD" {
		t.Errorf("args = %s (%v), want the invalid byte read as U+FFFD", got.Args, err)
	}
	c, err := s.Claim(ctx, id, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	msg := "a\x00b\xffc"
	if err := s.Commit(ctx, c, &driver.Change{Now: now, StatusMessage: &msg, Park: map[string]json.RawMessage{"k\x00": json.RawMessage(`{}`)}}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got, err = s.Get(ctx, "o", id)
	if err != nil {
		t.Fatal(err)
	}
	if got.StatusMessage != "a\uFFFDb\uFFFDc" {
		t.Errorf("status message %q", got.StatusMessage)
	}
	if resumed, err := s.Update(ctx, "o", id, map[string]json.RawMessage{"k\x00": json.RawMessage(`1`)}, now); err != nil || !resumed {
		t.Errorf("an answer to the key as the client names it: %v, %v; want it to resume the task", resumed, err)
	}
	for _, owner := range []string{"o\x00", "o\xff"} {
		if _, err := s.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: owner, Tool: "x", Args: json.RawMessage(`{}`), TTL: time.Hour, Now: now}); err == nil {
			t.Errorf("Create with owner %q succeeded", owner)
		}
		if _, err := s.Get(ctx, owner, id); err == nil {
			t.Errorf("Get with owner %q found a task", owner)
		}
	}
}
