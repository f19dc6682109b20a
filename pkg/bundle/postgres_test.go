package bundle

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testpg"
	"github.com/mcptasks/mcptasks/pkg/client"
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
	register := func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "big", Description: "echoes its padding's length and n bytes"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, a bigArgs) (*mcp.CallToolResult, error) {
				out, err := tasks.Do(st, "make", func(context.Context) (string, error) { return strings.Repeat("y", a.N), nil })
				if err != nil {
					return nil, err
				}
				if err := st.Sleep("nap", 50*time.Millisecond); err != nil {
					return nil, err
				}
				// A later step replays the first's bytes from the journal.
				if _, err := tasks.Do(st, "after", func(context.Context) (int, error) { return len(out), nil }); err != nil {
					return nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d:%s", len(a.Pad), out)}}}, nil
			})
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := New(ctx, cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), &tasks.App{Name: "t", Register: register})
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
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go b.RunWorkers(wctx, 2)
	srv := httptest.NewServer(b.Handler)
	defer srv.Close()
	res, err := client.New(srv.URL+"/mcp").Call(ctx, "big", bigArgs{Pad: strings.Repeat("p", 300_000), N: 700_000})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("result: %+v", res)
	}
	want := "300000:" + strings.Repeat("y", 700_000)
	if got := res.Content[0].(*mcp.TextContent).Text; got != want {
		t.Errorf("result text: %d bytes, want %d (%q...)", len(got), len(want), got[:min(len(got), 20)])
	}

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
