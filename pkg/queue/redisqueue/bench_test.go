package redisqueue_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
)

// BenchmarkConsume measures the queue's own throughput on redis-server:
// b.N messages enqueued, then four consumers that acknowledge each one
// (the receive, the handler, the ack), until all are handled. It uses only
// the API of one shard, so that the same file measures an earlier version.
func BenchmarkConsume(b *testing.B) {
	c := testredis.Client(b, "redis-server")
	ctx := context.Background()
	q := redisqueue.New(c, &redisqueue.Options{Key: "bench:" + rand.Text()[:8] + ":{queue}", Visibility: time.Minute})
	for i := range b.N {
		if err := q.Enqueue(ctx, fmt.Sprintf("task-%d", i), time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	var handled atomic.Int64
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(done)
		q.Consume(cctx, 4, func(ctx context.Context, id string) (redisqueue.Settle, error) {
			if handled.Add(1) == int64(b.N) {
				cancel()
			}
			return redisqueue.Ack, nil
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("handled %d of %d", handled.Load(), b.N)
	}
	b.StopTimer()
	cancel()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
