package redisqueue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
)

// A queue spread over four shards: each task's message lives in the shard
// of its id (on a Redis Cluster, beside the task's own keys), and the
// consumers of a process take the shards in turn.
func ExampleQueue_KeysFor() {
	redis, _ := embedredis.Start()
	defer redis.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	defer client.Close()

	q := redisqueue.New(client, &redisqueue.Options{Prefix: "app:", Shards: 4})
	key, wake := q.KeysFor("task-1")
	fmt.Println(q.Shards(), key, wake)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = q.Enqueue(ctx, "task-1", time.Time{})
	q.Consume(ctx, 2, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		fmt.Println("handled", id)
		cancel()
		return redisqueue.Ack, nil
	})
	// Output:
	// 4 app:queue{2} app:queue{2}:wake
	// handled task-1
}
