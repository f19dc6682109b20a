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
	redis, _ := embedredis.Start(nil)
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

// A store's script that settles the message it is handed also takes the
// next due message of its shard for the consumer (what redisstore's
// commit does when it dispatches through the queue): the consumer handles
// it next without a receive.
func ExampleQueue_TakeHandBack() {
	redis, _ := embedredis.Start(nil)
	defer redis.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	defer client.Close()

	// KEYS q; ARGV id now receipt: remove the handled message, take the
	// next one.
	settle := rueidis.NewLuaScript(redisqueue.LuaReceive + `
redis.call('ZREM', KEYS[1], ARGV[1])
return receive(KEYS[1], ARGV[2], ARGV[3])
`)
	q := redisqueue.New(client, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = q.Enqueue(ctx, "task-1", time.Now().Add(-2*time.Second))
	_ = q.Enqueue(ctx, "task-2", time.Now().Add(-time.Second))
	q.Consume(ctx, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
		hb := q.TakeHandBack(id)
		if hb == nil {
			return redisqueue.Ack, nil
		}
		now, receipt := hb.Args()
		key, _ := q.KeysFor(id)
		reply, err := settle.Exec(ctx, client, []string{key}, []string{id, now, receipt}).ToMessage()
		if err != nil {
			return redisqueue.Ack, err
		}
		_ = hb.Reply(reply)
		next, _ := reply.ToArray()
		taken, _ := next[0].ToString()
		fmt.Printf("handled %s, took %q\n", id, taken)
		if id == "task-2" {
			cancel()
		}
		return redisqueue.Removed, nil
	})
	// Output:
	// handled task-1, took "task-2"
	// handled task-2, took ""
}

// A handler that runs long keeps its message hidden by deferring it, as a
// worker renewing its lease does: if its process dies, the message comes
// back when the last deferral runs out, not a visibility timeout later.
func ExampleQueue_Defer() {
	redis, _ := embedredis.Start(nil)
	defer redis.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	defer client.Close()

	q := redisqueue.New(client, &redisqueue.Options{Visibility: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = q.Enqueue(ctx, "task-1", time.Time{})
	d, ok, _, _ := q.Receive(ctx)
	fmt.Println("received", d.TaskID, ok)
	// The handler is alive: its message stays hidden 200ms more.
	_ = q.Defer(ctx, d.TaskID, time.Now().Add(200*time.Millisecond))
	// ... and it dies without acknowledging it.
	for {
		d, ok, wait, _ := q.Receive(ctx)
		if ok {
			fmt.Println("delivered again", d.TaskID)
			return
		}
		time.Sleep(wait)
	}
	// Output:
	// received task-1 true
	// delivered again task-1
}
