package tasks_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func registerNoop(steps int) func(*tasks.Server) {
	return func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "noop", Description: "no-op steps"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				for i := range steps {
					if _, err := tasks.Do(st, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return nil, err
					}
				}
				return text("ok"), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "noop_status", Description: "no-op steps, each under a status message"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				for i := range steps {
					st.Status(fmt.Sprintf("step %d of %d", i+1, steps))
					if _, err := tasks.Do(st, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return nil, err
					}
				}
				return text("ok"), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "noop_offer", Description: "no-op steps, checking an offer before each"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if err := st.Offer("stop", tasks.InputRequest{Method: "elicitation/create"}); err != nil {
					return nil, err
				}
				for i := range steps {
					if _, ok := st.CheckInput("stop"); ok {
						break
					}
					if _, err := tasks.Do(st, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return nil, err
					}
				}
				return text("ok"), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "ask", Description: "one input round"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				_, err := st.Input("q", map[string]tasks.InputRequest{"q": {Method: "elicitation/create",
					Params: map[string]any{"mode": "form", "message": "?", "requestedSchema": map[string]any{"type": "object"}}}})
				return text("ok"), err
			})
	}
}

// BenchmarkWorkflow10Steps measures worker throughput: a no-op 10-step
// workflow advanced one step per invocation (Advance called directly, as a
// queue-triggered function would), and the Redis round trips per step.
func BenchmarkWorkflow10Steps(b *testing.B) { benchWorkflow(b, "noop") }

// BenchmarkWorkflow10StepsOffer is BenchmarkWorkflow10Steps for a tool that
// offers input (never answered) and checks it before each step.
func BenchmarkWorkflow10StepsOffer(b *testing.B) { benchWorkflow(b, "noop_offer") }

// BenchmarkWorkflow10StepsStatus is BenchmarkWorkflow10Steps for a tool
// that sets a status message before each step (as batch_report does).
func BenchmarkWorkflow10StepsStatus(b *testing.B) { benchWorkflow(b, "noop_status") }

func benchWorkflow(b *testing.B, tool string) {
	for _, backend := range backends {
		if backend == "cluster" {
			continue // scripts/bench reports one server and the embedded Redis
		}
		b.Run(backend, func(b *testing.B) {
			h := newHarness(b, backend, benchOptions(), registerNoop(10))
			ctx := context.Background()
			ids := make([]string, b.N)
			for i := range ids {
				var tk mcptest.Task
				h.c.Call(b, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}}).Decode(b, &tk)
				ids[i] = tk.TaskID
			}
			h.rc.Reset()
			redisCPU := serverCPU(b, h)
			cpu := processCPU()
			b.ResetTimer()
			steps := 0
			for _, id := range ids {
				for {
					res, err := h.srv.Advance(ctx, id)
					if err != nil {
						b.Fatal(err)
					}
					steps += res.Steps
					if res.Status.Terminal() {
						break
					}
				}
			}
			b.StopTimer()
			cpu = processCPU() - cpu
			redisCPU = serverCPU(b, h) - redisCPU
			reportSteps(b, steps, cpu, redisCPU, h.rc.Trips())
		})
	}
}

// reportSteps checks that b's tasks ran their 10 steps each and reports
// the CPU (this process's and redis-server's), the rate and the round
// trips per step.
func reportSteps(b *testing.B, steps int, cpu, redisCPU time.Duration, trips int64) {
	b.Helper()
	if steps != 10*b.N {
		b.Fatalf("ran %d steps, want %d", steps, 10*b.N)
	}
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(steps), "cpu-µs/step")
	}
	if redisCPU > 0 {
		b.ReportMetric(float64(redisCPU.Microseconds())/float64(steps), "redis-cpu-µs/step")
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
	b.ReportMetric(float64(trips)/float64(steps), "trips/step")
}

// BenchmarkOps measures the store cost of the client-facing operations:
// the Redis round trips of a task-creating tools/call, a tasks/get and a
// tasks/update, and the Redis memory of one completed task.
func BenchmarkOps(b *testing.B) {
	for _, backend := range backends {
		if backend == "cluster" {
			continue // scripts/bench reports one server and the embedded Redis
		}
		b.Run(backend, func(b *testing.B) {
			h := newHarness(b, backend, benchOptions(), registerNoop(1))
			ctx := context.Background()
			var created mcptest.Task
			h.c.Call(b, "tools/call", map[string]any{"name": "noop", "arguments": map[string]any{}}).Decode(b, &created)

			h.rc.Reset()
			h.c.Call(b, "tools/call", map[string]any{"name": "noop", "arguments": map[string]any{}}).Decode(b, &created)
			tripsCreate := h.rc.Trips()

			h.c.Get(b, created.TaskID) // loads the script
			h.rc.Reset()
			h.c.Get(b, created.TaskID)
			tripsGet := h.rc.Trips()

			var tripsUpdate int64
			for range 2 { // the first run loads the script
				var asking mcptest.Task
				h.c.Call(b, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}).Decode(b, &asking)
				if _, err := h.srv.Advance(ctx, asking.TaskID); err != nil {
					b.Fatal(err)
				}
				h.rc.Reset()
				h.c.Call(b, "tasks/update", map[string]any{"taskId": asking.TaskID, "inputResponses": map[string]any{"q": map[string]any{"action": "decline"}}})
				tripsUpdate = h.rc.Trips()
			}

			for {
				res, err := h.srv.Advance(ctx, created.TaskID)
				if err != nil {
					b.Fatal(err)
				}
				if res.Status.Terminal() {
					break
				}
			}
			var bytes int64
			if backend == "redis-server" {
				for _, k := range []string{"", ":j", ":r", ":p"} {
					n, err := h.rc.Do(ctx, h.rc.B().MemoryUsage().Key(h.prefix+"{"+created.TaskID+"}"+k).Build()).AsInt64()
					if err == nil {
						bytes += n
					}
				}
			}
			b.ResetTimer()
			for range b.N {
				h.c.Get(b, created.TaskID)
			}
			b.StopTimer()
			b.ReportMetric(float64(tripsCreate), "trips/create")
			b.ReportMetric(float64(tripsGet), "trips/get")
			b.ReportMetric(float64(tripsUpdate), "trips/update")
			if bytes > 0 {
				b.ReportMetric(float64(bytes), "bytes/completed-task")
			}
		})
	}
}

// BenchmarkTasksGetHTTP measures tasks/get over loopback HTTP on a real
// redis-server, through the go-sdk and through the lean path, side by side.
func BenchmarkTasksGetHTTP(b *testing.B) {
	h := newHarness(b, "redis-server", benchOptions(), registerNoop(1))
	var created mcptest.Task
	h.c.Call(b, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}).Decode(b, &created)
	for _, path := range []struct {
		name string
		c    *mcptest.Client
	}{{"go-sdk", h.sdk}, {"lean", h.c}} {
		b.Run(path.name, func(b *testing.B) {
			b.SetParallelism(16) // 32 clients on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				c := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(path.c.URL, "http://"), "/mcp"), true)
				for pb.Next() {
					if r := c.Call(b, "tasks/get", map[string]any{"taskId": created.TaskID}); r.Error != nil {
						b.Error(r.Error.Message)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCreateHTTP measures a task-creating tools/call over loopback
// HTTP on a real redis-server (the slowest request path).
func BenchmarkCreateHTTP(b *testing.B) {
	h := newHarness(b, "redis-server", benchOptions(), registerNoop(1))
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		c := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(h.c.URL, "http://"), "/mcp"), true)
		for pb.Next() {
			if r := c.Call(b, "tools/call", map[string]any{"name": "noop", "arguments": map[string]any{}}); r.Error != nil {
				b.Error(r.Error.Message)
				return
			}
		}
	})
}

// serverCPU returns the CPU time (user and system) the Redis server of h
// used so far, from INFO cpu (0 when it does not say, as the embedded one).
func serverCPU(b *testing.B, h *harness) time.Duration {
	info, err := h.rc.Do(context.Background(), h.rc.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0
	}
	var total time.Duration
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			b.Fatalf("INFO cpu: %s: %v", line, err)
		}
		total += time.Duration(s * float64(time.Second))
	}
	return total
}

// benchOptions are the server options of the benchmarks: the defaults, with
// the log (the audit records of every created task) discarded.
func benchOptions() tasks.Options {
	return tasks.Options{Logger: slog.New(slog.DiscardHandler)}
}
