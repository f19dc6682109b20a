package tasks_test

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// A task stream, as subscriptions/listen with params.notifications.taskIds
// gets it (NewHandler serves it over SSE): the caller's tasks are
// accepted, each is sent at once, then at each change, until all have
// ended. Here a worker invocation ends the task while the stream runs.
func ExampleServer_Listen() {
	redis, _ := embedredis.Start()
	defer redis.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	defer client.Close()
	srv := tasks.New(&mcp.Implementation{Name: "example", Version: "1"}, nil,
		redisstore.New(client, nil), redisqueue.New(client, nil), &tasks.Options{Anonymous: true})
	tasks.AddTool(srv, &mcp.Tool{Name: "hello"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
		})

	ctx := context.Background()
	created, _ := srv.CreateTask(ctx, "alice", "hello", []byte(`{}`))
	id := created.(*tasks.CreateTaskResult).TaskID

	l, _ := srv.Listen(ctx, "alice", []string{id, "someone-elses-or-unknown"})
	fmt.Println("accepted:", len(l.Accepted))
	ctx, cancel := context.WithTimeout(ctx, srv.ListenLimit())
	defer cancel()
	_ = l.Run(ctx, func(d *tasks.DetailedTask) error {
		fmt.Println(d.Status)
		if d.Status == tasks.StatusWorking {
			go srv.Advance(context.Background(), id) // another process, in production
		}
		return nil
	})
	// Output:
	// accepted: 1
	// working
	// completed
}

// The pollIntervalMs the server advises follows the task: here one that
// sleeps for another 30 seconds, and one that has waited 10 seconds for
// input (half its wait so far).
func ExampleServer_PollAdvice() {
	srv := tasks.New(&mcp.Implementation{Name: "example", Version: "1"}, nil, nil, nil, nil)
	now := time.Now()
	sleeping := &tasks.Task{Status: tasks.StatusWorking, UpdatedAt: now, WakeAt: now.Add(30 * time.Second)}
	parked := &tasks.Task{Status: tasks.StatusInputRequired, UpdatedAt: now.Add(-10 * time.Second)}
	fmt.Println(srv.PollAdvice(sleeping, now), srv.PollAdvice(parked, now))
	// Output: 31s 5s
}
