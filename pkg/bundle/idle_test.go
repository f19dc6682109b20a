package bundle

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// adminClient is a client of the Redis at url for the test's own reads.
func adminClient(t *testing.T, url string) rueidis.Client {
	t.Helper()
	opt, err := redisOptions(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// startProcess builds a bundle from env, as a worker process does, and
// runs its workers and its sweeper (each if asked) until the test ends.
func startProcess(t *testing.T, env map[string]string, workers, sweeper bool) *Bundle {
	t.Helper()
	cfg, err := FromEnv(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn + 1})), &tasks.App{Name: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if workers {
		wg.Go(func() { b.RunWorkers(ctx, cfg.Workers) })
	}
	if sweeper {
		wg.Go(func() { b.RunSweeper(ctx, cfg.SweepEvery) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		b.Close()
	})
	return b
}

// Two idle worker processes with the default configuration (four workers
// each, and the sweeper) cost Redis at most 2 commands per second in
// total, background PINGs included. The window is
// MCPTASKS_IDLE_WINDOW (default 3s), after the processes have settled;
// e2e.TestIdleWorkersCost measures real worker processes.
func TestIdleWorkerProcesses(t *testing.T) {
	window := 3 * time.Second
	if v := os.Getenv("MCPTASKS_IDLE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("MCPTASKS_IDLE_WINDOW: %v", err)
		}
		window = d
	}
	url := testredis.Start(t)
	admin := adminClient(t, url)
	prefix := "idle:" + driver.NewID() + ":"
	env := map[string]string{"REDIS_URL": url, "MCPTASKS_KEY_PREFIX": prefix}
	if v := os.Getenv("MCPTASKS_REDIS_SHARDS"); v != "" {
		env["MCPTASKS_REDIS_SHARDS"] = v
	}
	for range 2 {
		startProcess(t, env, true, true)
	}
	// Past the start-up, where each process looks at its shards once.
	before := testredis.Settle(t, admin, 500*time.Millisecond)
	time.Sleep(window)
	after := testredis.CommandCalls(t, admin)
	total, sent := testredis.Sent(before, after)
	rate := float64(total) / window.Seconds()
	t.Logf("two idle worker processes: %d commands in %v (%.3f/s): %v", total, window, rate, sent)
	if rate > 2 {
		t.Errorf("idle rate %.3f commands/s, want ≤ 2", rate)
	}
}

// Two processes sweeping every 100ms take turns: the deployment sweeps
// about once per interval, not once per process and interval.
func TestSweepersTakeTurns(t *testing.T) {
	const every, window = 100 * time.Millisecond, 2 * time.Second
	url := testredis.Start(t)
	admin := adminClient(t, url)
	env := map[string]string{"REDIS_URL": url, "MCPTASKS_KEY_PREFIX": "sweep:" + driver.NewID() + ":", "MCPTASKS_SWEEP_INTERVAL": every.String()}
	before := testredis.CommandCalls(t, admin)
	for range 2 {
		startProcess(t, env, false, true)
	}
	time.Sleep(window)
	after := testredis.CommandCalls(t, admin)
	// Each sweep reads the due index once (ZRANGE); nothing else reads it.
	sweeps, attempts := after["zrange"]-before["zrange"], after["set"]-before["set"]
	t.Logf("%d sweeps, %d lock attempts in %v", sweeps, attempts, window)
	// Without turns, two processes would sweep 2×window/every = 40 times.
	if limit := int64(window/(every-every/10)) + 2; sweeps < 1 || sweeps > limit {
		t.Errorf("%d sweeps in %v by two processes sweeping every %v, want 1 to %d (one per interval)", sweeps, window, every, limit)
	}
	if attempts < sweeps {
		t.Errorf("%d lock attempts for %d sweeps", attempts, sweeps)
	}
}
