package bundle

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// A bundle with DATABASE_URL and no REDIS_URL runs on PostgreSQL alone (no
// Redis client, no embedded Redis: the option is not even passed): a task
// tool's call is created, run by the Postgres queue's workers, followed
// to its result, large values included; and the
// deployment's sweepers take turns through the store's lock.
func TestPostgresBundle(t *testing.T) {
	t.Parallel()
	url := testpg.Start(t)
	schema := testpg.Schema(t, url)
	cfg, err := FromEnv(envOf(map[string]string{"DATABASE_URL": url, "MCPTASKS_PG_SCHEMA": schema}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != StorePostgres || cfg.Queue != QueuePostgres {
		t.Fatalf("store %q queue %q, want postgres for both", cfg.Store, cfg.Queue)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := New(ctx, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), &tasks.App{Name: "t", Register: registerBig})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.client != nil || b.embedded != nil {
		t.Error("a bundle on PostgreSQL made a Redis client")
	}
	if s, ok := b.Tasks.Store().(*pgstore.Store); !ok || !s.Dispatches() {
		t.Errorf("store %T, want a dispatching *pgstore.Store", b.Tasks.Store())
	}
	callBig(ctx, t, b, 300_000, 700_000)

	// Two processes' sweepers: one takes the turn, the other waits for
	// the next.
	b2, err := New(ctx, cfg, slog.New(slog.DiscardHandler), &tasks.App{Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	first, second := b.sweepLock(time.Hour), b2.sweepLock(time.Hour)
	if !first(ctx) || second(ctx) || first(ctx) {
		t.Error("the sweep turn: want the first taker alone to hold it for the interval")
	}
}
