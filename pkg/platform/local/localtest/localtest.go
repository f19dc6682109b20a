// Package localtest serves a [tasks.App] inside a test, the way the local
// server does (endpoint, worker goroutines and sweeper on one store), so
// that a tool author can drive their task tools over real HTTP with any
// MCP client (pkg/client, the go-sdk's, raw JSON-RPC) from `go test`:
//
//	url := localtest.Serve(t, tools.App)
//	res, err := client.New(url).Call(ctx, "process", args)
//
// The store is the REDIS_URL of the environment when set (each test gets
// its own key prefix), or else an embedded in-process Redis per test.
package localtest

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// Options adjusts [ServeWith]. The zero value is what [Serve] uses.
type Options struct {
	// Env overrides environment variables of the configuration
	// (MCPTASKS_POLL_INTERVAL, MCPTASKS_TASK_TTL, ...); the process
	// environment is read for the others.
	Env map[string]string
	// LogLevel is the level of the server's log, written to the test's
	// output (shown for failed tests and with -v). Default: slog.LevelInfo.
	LogLevel slog.Level
}

// Serve serves app until the test ends and returns the URL of its MCP
// endpoint (http://127.0.0.1:PORT/mcp). Tasks run on worker goroutines
// with a fast poll interval (100ms) unless the environment sets one.
func Serve(t testing.TB, app *tasks.App) string {
	return ServeWith(t, app, Options{})
}

// ServeWith is [Serve] with options.
func ServeWith(t testing.TB, app *tasks.App, o Options) string {
	t.Helper()
	getenv := func(k string) string {
		if v, ok := o.Env[k]; ok {
			return v
		}
		if v := os.Getenv(k); v != "" {
			return v
		}
		switch k {
		case "MCPTASKS_POLL_INTERVAL":
			return "100ms"
		case "MCPTASKS_SWEEP_INTERVAL":
			return "1s"
		case "MCPTASKS_KEY_PREFIX":
			return "localtest:" + rand.Text()[:10] + ":"
		}
		return ""
	}
	cfg, err := bundle.FromEnv(getenv)
	if err != nil {
		t.Fatalf("localtest: configuration: %v", err)
	}
	cfg.Queue = bundle.QueueRedis
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: o.LogLevel}))
	b, err := bundle.New(t.Context(), cfg, log, app, bundle.WithEmbeddedRedis(func() (bundle.EmbeddedRedis, error) { return embedredis.Start() }))
	if err != nil {
		t.Fatalf("localtest: %v", err)
	}
	srv := httptest.NewServer(b.Handler)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { b.RunWorkers(ctx, cfg.Workers) })
	wg.Go(func() { b.RunSweeper(ctx, cfg.SweepEvery) })
	t.Cleanup(func() {
		srv.Close()
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("localtest: the workers did not stop within 30s of the test's end")
		}
		b.Close()
	})
	return srv.URL + "/mcp"
}
