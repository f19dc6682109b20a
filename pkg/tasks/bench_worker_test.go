package tasks_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/mcptest"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
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
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			b.ResetTimer()
			wg.Go(func() {
				h.q.Consume(ctx, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
					res, err := h.srv.Advance(ctx, id)
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
					return redisqueue.SettleOf(res.Settled, res.Status.Terminal()), err
				})
			})
			select {
			case <-done:
			case <-time.After(10 * time.Minute):
				b.Fatal("the tasks did not complete")
			}
			b.StopTimer()
			cpu = processCPU() - cpu
			redisCPU = serverCPU(b, h) - redisCPU
			cancel()
			wg.Wait()
			reportSteps(b, steps, cpu, redisCPU, trips)
		})
	}
}
