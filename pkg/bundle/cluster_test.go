package bundle

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testredis"
	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"
)

type noArgs struct{}

// steps10 is a task tool of ten no-op steps.
func steps10(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "steps10", Description: "ten no-op steps"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			for i := range 10 {
				if _, err := tasks.Do(st, strconv.Itoa(i), func(context.Context) (int, error) { return i, nil }); err != nil {
					return nil, err
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
}

// On a 3-master Redis Cluster, the create + 10-step workload spreads its
// Redis commands over the masters: no master serves more than 40% of them
// (the queue and the due index are sharded beside their tasks).
func TestClusterSpreadsLoad(t *testing.T) {
	t.Parallel()
	cl := testredis.StartCluster(t, 3, 0)
	cfg, err := FromEnv(envOf(map[string]string{"REDIS_URL": cl.URL, "MCPTASKS_SWEEP_INTERVAL": "1s"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b, err := New(ctx, cfg, slog.New(slog.DiscardHandler), &tasks.App{Name: "t", Register: steps10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	masters := cl.Masters(t)
	for _, m := range masters {
		if err := m.Client().Do(ctx, m.Client().B().ConfigResetstat().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); b.RunWorkers(ctx, 4) }()
	go b.RunSweeper(ctx, cfg.SweepEvery)
	srv := httptest.NewServer(b.Handler)
	defer srv.Close()
	c := client.New(srv.URL + "/mcp")
	const n = 120
	ids := make([]string, 0, n)
	for range n {
		task, _, err := c.Start(ctx, "steps10", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range ids {
		for {
			task, err := c.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status == client.StatusCompleted {
				break
			}
			if task.Status.Terminal() || time.Now().After(deadline) {
				t.Fatalf("task %s: %s", id, task.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var total int64
	calls := make([]int64, len(masters))
	for i, m := range masters {
		calls[i] = commandCalls(t, m.Client())
		total += calls[i]
	}
	var report []string
	var busiest float64
	for i, m := range masters {
		share := float64(calls[i]) / float64(total)
		busiest = max(busiest, share)
		report = append(report, fmt.Sprintf("%s %d (%.1f%%)", m.Addr, calls[i], 100*share))
	}
	t.Logf("%d tasks of 10 steps on 3 masters: %d commands, %.1f per task; per master: %s", n, total, float64(total)/n, strings.Join(report, ", "))
	if busiest > 0.40 {
		t.Errorf("the busiest master served %.1f%% of the commands, want ≤ 40%%", 100*busiest)
	}
	cancel()
	<-done
}

// commandCalls sums the calls of INFO commandstats (a script's inner
// commands included, as Redis counts them), less the INFO and CONFIG
// commands of tests and of the client's topology refreshes.
func commandCalls(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	info, err := c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_info" || name == "cmdstat_config|resetstat" || strings.HasPrefix(name, "cmdstat_cluster") {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}
