package tasks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// A task stream, as subscriptions/listen with params.notifications.taskIds
// gets it (NewHandler serves it over SSE): the caller's tasks are
// accepted, each is sent at once, then at each change, until all have
// ended. Here a worker invocation ends the task while the stream runs.
func TestListenStream(t *testing.T) {
	redis, _ := embedredis.Start(nil)
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
	if len(l.Accepted) != 1 {
		t.Fatalf("accepted %v, want alice's task alone", l.Accepted)
	}
	ctx, cancel := context.WithTimeout(ctx, srv.ListenLimit())
	defer cancel()
	var seen []driver.Status
	_ = l.Run(ctx, func(d *tasks.DetailedTask) error {
		seen = append(seen, d.Status)
		if d.Status == driver.StatusWorking {
			go srv.Advance(context.Background(), id) // another process, in production
		}
		return nil
	})
	if fmt.Sprint(seen) != "[working completed]" {
		t.Errorf("the stream sent %v, want [working completed]", seen)
	}
}

// The pollIntervalMs the server advises follows the task: here one that
// sleeps for another 30 seconds, and one that has waited 10 seconds for
// input (half its wait so far).
func TestPollAdviceFollowsTheTask(t *testing.T) {
	srv := tasks.New(&mcp.Implementation{Name: "example", Version: "1"}, nil, nil, nil, nil)
	now := time.Now()
	sleeping := &driver.Task{Status: driver.StatusWorking, UpdatedAt: now, WakeAt: now.Add(30 * time.Second)}
	parked := &driver.Task{Status: driver.StatusInputRequired, UpdatedAt: now.Add(-10 * time.Second)}
	if a, b := srv.PollAdvice(sleeping, now), srv.PollAdvice(parked, now); a != 31*time.Second || b != 5*time.Second {
		t.Errorf("advice %v and %v, want 31s and 5s", a, b)
	}
}
