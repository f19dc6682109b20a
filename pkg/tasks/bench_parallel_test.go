package tasks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// BenchmarkParallelStep runs 32 branches of 200 ms with 8 worker
// goroutines consuming the Redis queue, as a parallel step (tasks.All,
// Concurrency(8)) and, for comparison, as 32 Do steps one after another:
// the two rows of one run (-benchtime 1x) give the speed-up. Each op is
// one task, from its tools/call to its completion.
func BenchmarkParallelStep(b *testing.B) {
	const branches, workers, each = 32, 8, 200 * time.Millisecond
	for _, mode := range []string{"sequential", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			done := make(chan string, 1)
			h := newHarness(b, "redis-server"+dispatching, benchOptions(), func(s *tasks.Server) {
				tasks.AddTool(s, &mcp.Tool{Name: "index"}, tasks.Optional, func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
					docs := make([]int, branches)
					work := func(ctx context.Context, i int) (int, error) {
						time.Sleep(each)
						return i, nil
					}
					if mode == "parallel" {
						if _, err := tasks.All(st, "index", docs, work, tasks.Concurrency(workers)); err != nil {
							return nil, err
						}
					} else {
						for i := range docs {
							if _, err := tasks.Do(st, fmt.Sprint("doc-", i), func(ctx context.Context) (int, error) { return work(ctx, i) }); err != nil {
								return nil, err
							}
						}
					}
					return &mcp.CallToolResult{}, nil
				})
			})
			h.workWatched(b, workers, func(id string, res tasks.AdvanceResult, _ error) {
				if res.Status.Terminal() {
					done <- id
				}
			})
			b.ResetTimer()
			for range b.N {
				var tk struct {
					TaskID string `json:"taskId"`
				}
				h.c.Call(b, "tools/call", map[string]any{"name": "index", "arguments": map[string]any{}}).Decode(b, &tk)
				select {
				case <-done:
				case <-time.After(time.Minute):
					b.Fatal("the task did not complete")
				}
			}
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/task")
		})
	}
}
