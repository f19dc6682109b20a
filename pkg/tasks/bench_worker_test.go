package tasks_test

import (
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// BenchmarkWorkerLoop10Steps is BenchmarkWorkflow10Steps through the
// worker loop of a self-hosted worker: one consumer of the Redis queue
// (redisqueue.Consume) advancing each task it is handed, so that the round
// trips per step include the queue's (with a dispatching store, the
// hand-backs that replace its receives; see redisqueue.HandBack).
func BenchmarkWorkerLoop10Steps(b *testing.B) {
	for _, backend := range backends {
		if backend == "cluster" {
			continue
		}
		b.Run(backend, func(b *testing.B) {
			h := newHarness(b, backend, benchOptions(), registerNoop(10))
			ids := make(map[string]bool, b.N)
			for range b.N {
				var tk mcptest.Task
				h.c.Call(b, "tools/call", map[string]any{"name": "noop", "arguments": map[string]any{}}).Decode(b, &tk)
				ids[tk.TaskID] = true
			}
			h.rc.Reset()
			redisCPU := serverCPU(b, h)
			cpu := processCPU()
			var mu sync.Mutex
			steps, left := 0, len(ids)
			var trips int64
			done := make(chan struct{})
			b.ResetTimer()
			h.workWatched(b, 1, func(id string, res tasks.AdvanceResult, _ error) {
				mu.Lock()
				defer mu.Unlock()
				steps += res.Steps
				if ids[id] && res.Status.Terminal() {
					delete(ids, id)
					if left--; left == 0 {
						trips = h.rc.Trips()
						close(done)
					}
				}
			})
			select {
			case <-done:
			case <-time.After(10 * time.Minute):
				b.Fatal("the tasks did not complete")
			}
			b.StopTimer()
			cpu = processCPU() - cpu
			redisCPU = serverCPU(b, h) - redisCPU
			reportSteps(b, steps, cpu, redisCPU, trips)
		})
	}
}
