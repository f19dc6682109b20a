package tasks_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// A task tool is straight-line Go over durable steps. Here the worker is
// driven by hand: each Advance is one queue-triggered invocation.
func ExampleAddTool() {
	redis, _ := embedredis.Start(nil)
	defer redis.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	defer client.Close()

	srv := tasks.New(&mcp.Implementation{Name: "example", Version: "1"}, nil,
		redisstore.New(client, nil), redisqueue.New(client, nil), &tasks.Options{Anonymous: true})

	type Args struct {
		Name string `json:"name"`
	}
	tasks.AddTool(srv, &mcp.Tool{Name: "welcome", Description: "Looks someone up, then greets them."}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, in Args) (*mcp.CallToolResult, error) {
			title, err := tasks.Do(st, "lookup", func(ctx context.Context) (string, error) {
				return "Dr.", nil // a slow call, journaled once it returns
			})
			if err != nil {
				return nil, err
			}
			st.Status("greeting")
			msg, err := tasks.Do(st, "greet", func(ctx context.Context) (string, error) {
				return fmt.Sprintf("Hello, %s %s!", title, in.Name), nil
			})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
		})

	// What tools/call does for a client that declares the extension.
	ctx := context.Background()
	task, _ := srv.Store().Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "welcome",
		Args: []byte(`{"name":"Ada"}`), TTL: srv.Options().TTL, PollInterval: srv.Options().PollInterval, Now: srv.Options().Now()})

	for i := 1; ; i++ {
		res, _ := srv.Advance(ctx, task.ID)
		fmt.Printf("invocation %d: %d new step(s), %s\n", i, res.Steps, res.Status)
		if res.Status.Terminal() {
			break
		}
	}
	done, _ := srv.Store().Get(ctx, "alice", task.ID)
	fmt.Println(string(done.Result))
	// Output:
	// invocation 1: 1 new step(s), working
	// invocation 2: 1 new step(s), completed
	// {"resultType":"complete","content":[{"type":"text","text":"Hello, Dr. Ada!"}]}
}
