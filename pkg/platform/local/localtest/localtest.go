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
//
// A test of a tool that sleeps or waits for hours runs on a [Clock] it
// moves forward itself (Options.Clock): the app reads it for everything
// it schedules, so the hour passes at once.
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
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
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
	// Clock, when set, is the app's clock instead of the wall clock (see
	// [Clock]). The store is then always an embedded Redis, whose keys
	// expire on the Clock (REDIS_URL is ignored: a real server expires
	// keys on its own clock), and the poll advice is capped at 1s
	// (MCPTASKS_POLL_MAX, unless Env sets it): the advice is computed on
	// the Clock, but a client waits it in real time.
	Clock *Clock
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
		if o.Clock != nil {
			switch k {
			case "REDIS_URL":
				return ""
			case "MCPTASKS_POLL_MAX":
				return "1s"
			}
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
	var embedded *embedredis.Server
	opts := []bundle.Option{bundle.WithEmbeddedRedis(func() (bundle.EmbeddedRedis, error) {
		var eo embedredis.Options
		if o.Clock != nil {
			eo.Now = o.Clock.Now
		}
		var err error
		embedded, err = embedredis.Start(&eo)
		return embedded, err
	})}
	if o.Clock != nil {
		opts = append(opts, bundle.WithClock(o.Clock.Now))
	}
	b, err := bundle.New(t.Context(), cfg, log, app, opts...)
	if err != nil {
		t.Fatalf("localtest: %v", err)
	}
	if o.Clock != nil {
		// A jump of the clock reaches the store's expiry and the queue's
		// consumers before Advance returns.
		q, _ := b.Queue.(*redisqueue.Queue)
		unwatch := o.Clock.watch(func() {
			if embedded != nil {
				embedded.Sync()
			}
			if q != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := q.Wake(ctx); err != nil {
					log.Warn("localtest: waking the workers after the clock moved", "err", err)
				}
			}
		})
		t.Cleanup(unwatch)
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

// Clock is a clock for tests that a test moves forward: it runs at the pace
// of the real clock from its start, and [Clock.Advance] moves it forward at
// once. An app served on it ([Options].Clock) reads it for everything it
// schedules or stamps: sleeps (Step.Sleep, SleepUntil), input deadlines
// (tasks.Deadline), the backoff of a step's retries, the TTL and expiry of
// tasks and of every key of the embedded store, lastUpdatedAt and the poll
// advice (pollIntervalMs). A test of a tool that sleeps an hour advances
// it an hour instead of waiting.
//
// What runs in real time stays real: a step's closure and its Timeout, the
// step budget of an invocation, the worker's lease renewals. Advance the
// clock while the task waits (sleeping, or waiting for input), not while a
// step runs: a jump past a running step's lease lets the sweeper hand the
// task to another worker, as it would after a crash.
type Clock struct {
	mu sync.Mutex
	// base is the clock's time at ref, a reading of the real clock.
	base, ref time.Time
	watchers  map[int]func()
	nextID    int
}

// NewClock returns a clock that reads start now (the current time if start
// is zero).
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = time.Now()
	}
	return &Clock{base: start.Round(0), ref: time.Now(), watchers: map[int]func(){}}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base.Add(time.Since(c.ref))
}

// Advance moves the clock forward by d (nothing for d <= 0). Before it
// returns, the apps served on the clock have seen the jump: the keys whose
// time came have expired, and their workers are looking for the tasks that
// fell due (a woken sleep, an input deadline that passed); those run soon
// after, in real time.
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.base = c.base.Add(d)
	watchers := make([]func(), 0, len(c.watchers))
	for _, f := range c.watchers {
		watchers = append(watchers, f)
	}
	c.mu.Unlock()
	for _, f := range watchers {
		f()
	}
}

// watch calls f after every Advance until unwatch is called.
func (c *Clock) watch(f func()) (unwatch func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextID
	c.nextID++
	c.watchers[id] = f
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.watchers, id)
	}
}
