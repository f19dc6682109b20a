package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// A batch job offers "stop" and checks it between parts: the client may
// answer it at any time (tasks/update), and the job stops after the part
// in flight. The tool's StepDefaults give every part the same policy. Here
// the worker is driven by hand, and the answer goes straight to the store.
func ExampleStep_Offer() {
	redis, _ := embedredis.Start(nil)
	defer redis.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	defer client.Close()
	srv := tasks.New(&mcp.Implementation{Name: "example", Version: "1"}, nil,
		redisstore.New(client, nil), redisqueue.New(client, nil), &tasks.Options{Anonymous: true})

	tasks.AddTool(srv, &mcp.Tool{Name: "batch", Description: "Processes five parts, unless told to stop."}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			if err := tasks.OfferElicit[struct{}](st, "stop", "Stop after the current part?"); err != nil {
				return nil, err
			}
			done := 0
			for i := 1; i <= 5; i++ {
				if ans, ok, _ := tasks.CheckElicit[struct{}](st, "stop"); ok && ans.Accepted() {
					break
				}
				if _, err := tasks.Do(st, fmt.Sprint("part-", i), func(ctx context.Context) (int, error) {
					return i, nil // the part's work
				}); err != nil {
					return nil, err
				}
				done++
			}
			st.Withdraw("stop")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("processed %d of 5 parts", done)}}}, nil
		}, tasks.StepDefaults(tasks.Retries(5), tasks.Timeout(time.Minute)))

	ctx := context.Background()
	task, _ := srv.Store().Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "batch",
		Args: []byte(`{}`), TTL: srv.Options().TTL, PollInterval: srv.Options().PollInterval, Now: srv.Options().Now()})

	res, _ := srv.Advance(ctx, task.ID) // part-1
	fmt.Println("invocation 1:", res.Status)
	// What tasks/update does with the client's answer; the task runs on.
	resumed, _ := srv.Store().Update(ctx, "alice", task.ID,
		map[string]json.RawMessage{"stop": json.RawMessage(`{"action":"accept","content":{}}`)}, srv.Options().Now())
	fmt.Println("answered; resumed:", resumed)
	for i := 2; !res.Status.Terminal(); i++ {
		res, _ = srv.Advance(ctx, task.ID)
		fmt.Printf("invocation %d: %s\n", i, res.Status)
	}
	done, _ := srv.Store().Get(ctx, "alice", task.ID)
	fmt.Println(string(done.Result))
	// Output:
	// invocation 1: working
	// answered; resumed: false
	// invocation 2: completed
	// {"resultType":"complete","content":[{"type":"text","text":"processed 1 of 5 parts"}]}
}
