package e2e

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// TestIdleWorkersCost counts the commands two idle worker processes send
// to Redis (metered Redis bills each one): at most 2 a second together,
// sweepers included, over 15s (MCPTASKS_IDLE_WINDOW overrides it: the
// figure in README.md is of 60s). A task created after the idle spell is
// still taken at once (the enqueue publishes on the queue's wake channel,
// which each worker process subscribes to), which the split-shape tests
// exercise as well.
func TestIdleWorkersCost(t *testing.T) {
	if testing.Short() {
		t.Skip("watches idle workers for 15s")
	}
	t.Parallel()
	rs := testredis.StartServer(t)
	env := []string{"REDIS_URL=" + rs.URL}
	opt, err := rueidis.ParseURL(rs.URL)
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	opt.Dialer.KeepAlive = time.Hour // the test's own client sends no PINGs in the window
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	idleWorkers(t, env)
	processed := func() int {
		info, err := rc.Do(t.Context(), rc.B().Info().Section("stats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatal("no total_commands_processed in INFO")
		return 0
	}
	window := idleWindow(t)
	stats := func() map[string]int64 { return testredis.CommandCalls(t, rc) }
	beforeStats := stats()
	before := processed()
	time.Sleep(window)
	n := processed() - before - 1 // less our own INFO
	_, by := testredis.Sent(beforeStats, stats())
	rate := float64(n) / window.Seconds()
	t.Logf("two idle worker processes: %d commands in %v (%.2f/s, scripts' inner commands included): %v", n, window, rate, by)
	if rate > 2 {
		t.Errorf("idle workers cost %.2f commands/s, want at most 2", rate)
	}
}

// TestIdleWorkersCostCluster is TestIdleWorkersCost on a 3-master Redis
// Cluster of the test's own (12 queue and due-index shards by default):
// the idle processes look at every shard once a minute and take turns
// sweeping, and their clients' keep-alive PINGs come once a minute per
// connection; all of it together stays within 2 commands a second.
func TestIdleWorkersCostCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("watches idle workers for 15s")
	}
	t.Parallel()
	cl := testredis.StartCluster(t, 3, 0)
	env := []string{"REDIS_URL=" + cl.URL}
	idleWorkers(t, env)
	window := idleWindow(t)
	masters := cl.Masters(t)
	// The commands of the workers: every command but the test's own INFO
	// and its client's and the harness's topology reads.
	count := func() map[string]int64 {
		m := map[string]int64{}
		for _, n := range masters {
			for name, calls := range testredis.CommandCalls(t, n.Client()) {
				if name != "info" && !strings.HasPrefix(name, "cluster") {
					m[n.Addr+" "+name] = calls
				}
			}
		}
		return m
	}
	before := count()
	time.Sleep(window)
	var n int64
	var by []string
	for k, calls := range count() {
		if d := calls - before[k]; d > 0 {
			n += d
			by = append(by, k+"×"+strconv.FormatInt(d, 10))
		}
	}
	slices.Sort(by)
	rate := float64(n) / window.Seconds()
	t.Logf("two idle worker processes on a 3-master cluster: %d commands in %v (%.2f/s): %v", n, window, rate, by)
	if rate > 2 {
		t.Errorf("idle workers cost %.2f commands/s on a cluster, want at most 2", rate)
	}
}

// idleWorkers starts two `mcptasks worker` processes with env and returns
// once both run and their start-up commands are past.
func idleWorkers(t *testing.T, env []string) {
	t.Helper()
	w1, w2 := start(t, env, "worker"), start(t, env, "worker")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w1.Log(), "worker running") || !strings.Contains(w2.Log(), "worker running") {
		if time.Now().After(deadline) {
			t.Fatalf("workers did not start:\n%s\n%s", w1.Log(), w2.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // past the start-up commands
}

// idleWindow is how long the idle tests watch: 15s, or
// MCPTASKS_IDLE_WINDOW.
func idleWindow(t *testing.T) time.Duration {
	t.Helper()
	window := 15 * time.Second
	if v := os.Getenv("MCPTASKS_IDLE_WINDOW"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			t.Fatalf("MCPTASKS_IDLE_WINDOW: %v", err)
		}
	}
	return window
}
