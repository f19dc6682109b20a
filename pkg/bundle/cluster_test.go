package bundle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
// Redis commands over the masters as the tasks fall on them: no master
// serves a larger share of the commands than of the tasks (plus 5 points),
// as it did when the queue and the due index were single keys (one master
// then served 57-60% of the commands). With tasks spread evenly, the
// busiest master's share nears a third (BenchmarkClusterSpread).
func TestClusterSpreadsLoad(t *testing.T) {
	t.Parallel()
	l := clusterLoad(t, 120)
	for addr, share := range l.commands {
		if share > l.tasks[addr]+0.05 {
			t.Errorf("master %s served %.1f%% of the commands but holds %.1f%% of the tasks", addr, 100*share, 100*l.tasks[addr])
		}
	}
}

// BenchmarkClusterSpread runs b.N tasks of 10 steps on a 3-master Redis
// Cluster (run it with -benchtime 600x) and reports the busiest master's
// share of the commands and the commands per task.
func BenchmarkClusterSpread(b *testing.B) {
	l := clusterLoad(b, b.N)
	busiest := 0.0
	for _, share := range l.commands {
		busiest = max(busiest, share)
	}
	b.ReportMetric(100*busiest, "busiest-master-%")
	b.ReportMetric(l.perTask, "commands/task")
}

// load is how a workload's Redis commands and tasks fell on the masters
// (address -> share).
type load struct {
	commands, tasks map[string]float64
	perTask         float64
}

// clusterLoad runs n tasks of 10 steps through a Bundle on a 3-master
// Redis Cluster of its own (its workers and sweeper included) and counts
// each master's commands (INFO commandstats).
func clusterLoad(tb testing.TB, n int) load {
	cl := testredis.StartCluster(tb, 3, 0)
	cfg, err := FromEnv(envOf(map[string]string{"REDIS_URL": cl.URL, "MCPTASKS_SWEEP_INTERVAL": "1s"}))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()
	b, err := New(ctx, cfg, slog.New(slog.DiscardHandler), &tasks.App{Name: "t", Register: steps10})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	masters := cl.Masters(tb)
	for _, m := range masters {
		if err := m.Client().Do(ctx, m.Client().B().ConfigResetstat().Build()).Error(); err != nil {
			tb.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); b.RunWorkers(ctx, 4) }()
	go b.RunSweeper(ctx, cfg.SweepEvery)
	srv := httptest.NewServer(b.Handler)
	defer srv.Close()
	c := client.New(srv.URL + "/mcp")
	ids := make([]string, 0, n)
	for range n {
		task, _, err := c.Start(ctx, "steps10", nil)
		if err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, id := range ids {
		for {
			task, err := c.Get(ctx, id)
			if err != nil {
				tb.Fatal(err)
			}
			if task.Status == client.StatusCompleted {
				break
			}
			if task.Status.Terminal() || time.Now().After(deadline) {
				tb.Fatalf("task %s: %s", id, task.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var total int64
	calls := make([]int64, len(masters))
	for i, m := range masters {
		calls[i] = commandCalls(tb, m.Client())
		total += calls[i]
	}
	l := load{commands: map[string]float64{}, tasks: map[string]float64{}, perTask: float64(total) / float64(n)}
	for _, id := range ids {
		l.tasks[cl.MasterOf(tb, "{"+id+"}").Addr] += 1 / float64(n)
	}
	var report []string
	for i, m := range masters {
		l.commands[m.Addr] = float64(calls[i]) / float64(total)
		report = append(report, fmt.Sprintf("%s %d commands (%.1f%%), %.1f%% of the tasks", m.Addr, calls[i], 100*l.commands[m.Addr], 100*l.tasks[m.Addr]))
	}
	tb.Logf("%d tasks of 10 steps on 3 masters: %d commands, %.1f per task; per master: %s", n, total, l.perTask, strings.Join(report, "; "))
	cancel()
	<-done
	return l
}

// commandCalls sums the calls of INFO commandstats (a script's inner
// commands included, as Redis counts them), less the INFO and CONFIG
// commands of tests and the CLUSTER commands of the client's topology
// refreshes.
func commandCalls(t testing.TB, c rueidis.Client) int64 {
	t.Helper()
	var sum int64
	for name, n := range testredis.CommandCalls(t, c) {
		if name != "info" && name != "config|resetstat" && !strings.HasPrefix(name, "cluster") {
			sum += n
		}
	}
	return sum
}

// With MCPTASKS_REDIS_WAIT, a tools/call whose task no replica
// acknowledges is refused with -32603 and a retry hint, and creates no
// task; with the replica back, the same call succeeds.
func TestRedisWaitRefusesUnreplicatedCreation(t *testing.T) {
	t.Parallel()
	primary := testredis.StartServer(t)
	replica := testredis.StartReplica(t, primary)
	cfg, err := FromEnv(envOf(map[string]string{"REDIS_URL": primary.URL, "MCPTASKS_REDIS_WAIT": "1,200ms"}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(t.Context(), cfg, slog.New(slog.DiscardHandler), &tasks.App{Name: "t", Register: steps10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv := httptest.NewServer(b.Handler)
	defer srv.Close()
	c := client.New(srv.URL + "/mcp")
	if _, _, err := c.Start(t.Context(), "steps10", nil); err != nil {
		t.Fatalf("tools/call with the replica up: %v", err)
	}
	if err := replica.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Start(t.Context(), "steps10", nil)
	_ = replica.Process.Signal(syscall.SIGCONT)
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInternalError || !strings.Contains(string(rpc.Data), "retryAfterMs") {
		t.Fatalf("tools/call with the replica stopped: %v, want -32603 with a retry hint", err)
	}
	keys, err := testredis.ScanAll(t.Context(), b.client, "mcptasks:{*}")
	if err != nil {
		t.Fatal(err)
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "mcptasks:{queue}" })
	if len(keys) != 1 {
		t.Errorf("task records after one accepted and one refused creation: %v, want one", keys)
	}
	if _, _, err := c.Start(t.Context(), "steps10", nil); err != nil {
		t.Fatalf("tools/call with the replica back: %v", err)
	}
}
