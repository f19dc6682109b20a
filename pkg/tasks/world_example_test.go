package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// exampleServer is a tasks server on an embedded Redis, served over
// HTTP (its callback URLs too); the workers are driven by hand.
func exampleServer() (srv *tasks.Server, url string, stop func()) {
	redis, _ := embedredis.Start(nil)
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	var handler http.Handler
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	srv = tasks.New(&mcp.Implementation{Name: "example", Version: "1"}, nil,
		redisstore.New(client, nil), redisqueue.New(client, nil), &tasks.Options{Anonymous: true, PublicURL: ts.URL})
	handler = tasks.NewHandler(srv, nil)
	return srv, ts.URL, func() { ts.Close(); client.Close(); redis.Close() }
}

// createTask is what tools/call does for a client that declares the
// extension.
func createTask(srv *tasks.Server, tool, args string) string {
	task, _ := srv.Store().Create(context.Background(), &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: tool,
		Args: []byte(args), TTL: srv.Options().TTL, PollInterval: srv.Options().PollInterval, Now: srv.Options().Now()})
	return task.ID
}

func resultOf(srv *tasks.Server, id string) string {
	done, _ := srv.Store().Get(context.Background(), "alice", id)
	return string(done.Result)
}

// A callback: the tool hands a URL to a transcoding service and waits,
// without any invocation, until the service POSTs its result there.
func ExampleCallback() {
	srv, _, stop := exampleServer()
	defer stop()
	type Transcoded struct {
		Output string `json:"output"`
	}
	jobs := make(chan string, 1) // stands in for the transcoding service's API
	tasks.AddTool(srv, &mcp.Tool{Name: "transcode"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, in struct{}) (*mcp.CallToolResult, error) {
			cb, err := tasks.Callback[Transcoded](st, "transcoded", tasks.Timeout(2*time.Hour))
			if err != nil {
				return nil, err
			}
			if _, err := tasks.Do(st, "submit", func(ctx context.Context) (bool, error) {
				jobs <- cb.URL // POST the job, with its callback URL, to the service
				return true, nil
			}); err != nil {
				return nil, err
			}
			out, err := tasks.AwaitCallback(st, cb)
			if errors.Is(err, tasks.ErrCallbackTimeout) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no answer in 2h"}}}, nil
			}
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "transcoded to " + out.Output}}}, nil
		})

	ctx := context.Background()
	id := createTask(srv, "transcode", `{}`)
	res, _ := srv.Advance(ctx, id)
	fmt.Println("submitted:", res.Status)

	// Later, the service calls back; a second call is refused.
	url := <-jobs
	for range 2 {
		resp, _ := http.Post(url, "application/json", strings.NewReader(`{"output":"s3://videos/cat.mp4"}`))
		resp.Body.Close()
		fmt.Println("callback:", resp.Status)
	}
	res, _ = srv.Advance(ctx, id)
	fmt.Println("resumed:", res.Status)
	fmt.Println(resultOf(srv, id))
	// Output:
	// submitted: working
	// callback: 202 Accepted
	// callback: 404 Not Found
	// resumed: completed
	// {"resultType":"complete","content":[{"type":"text","text":"transcoded to s3://videos/cat.mp4"}]}
}

// A signal from the tool author's own code (another tool, a cron, a
// queue consumer) resumes the task that awaits it.
func ExampleAwaitSignal() {
	srv, _, stop := exampleServer()
	defer stop()
	type Approval struct {
		By string `json:"by"`
	}
	tasks.AddTool(srv, &mcp.Tool{Name: "deploy"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, in struct{}) (*mcp.CallToolResult, error) {
			ok, err := tasks.AwaitSignal[Approval](st, "approved", tasks.Timeout(24*time.Hour))
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed, approved by " + ok.By}}}, nil
		})

	ctx := context.Background()
	id := createTask(srv, "deploy", `{}`)
	res, _ := srv.Advance(ctx, id)
	fmt.Println("waiting:", res.Status)

	fmt.Println("signal:", srv.Signal(ctx, id, "approved", Approval{By: "ada"}))
	err := srv.Signal(ctx, id, "approved", Approval{By: "bob"})
	fmt.Println("again refused:", errors.Is(err, driver.ErrEventClosed))
	res, _ = srv.Advance(ctx, id)
	fmt.Println("resumed:", res.Status)
	fmt.Println(resultOf(srv, id))
	// Output:
	// waiting: working
	// signal: <nil>
	// again refused: true
	// resumed: completed
	// {"resultType":"complete","content":[{"type":"text","text":"deployed, approved by ada"}]}
}

// A parallel step: one branch per item, each in a worker invocation of
// its own (here driven by hand: each branch is a queue message of its own,
// a branch id), joined in order.
func ExampleAll() {
	srv, _, stop := exampleServer()
	defer stop()
	tasks.AddTool(srv, &mcp.Tool{Name: "index"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, in struct{}) (*mcp.CallToolResult, error) {
			docs := []string{"a.txt", "b.txt", "c.txt"}
			sizes, err := tasks.All(st, "index", docs, func(ctx context.Context, doc string) (int, error) {
				return len(doc) * 100, nil // index one document
			}, tasks.Concurrency(2))
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint("indexed ", sizes)}}}, nil
		})

	ctx := context.Background()
	id := createTask(srv, "index", `{}`)
	res, _ := srv.Advance(ctx, id)
	fmt.Println("forked:", res.Status)
	for i := range 3 {
		res, _ = srv.Advance(ctx, driver.BranchID(id, 1, i))
		fmt.Printf("branch %d: %d step(s)\n", i, res.Steps)
	}
	res, _ = srv.Advance(ctx, id)
	fmt.Println("joined:", res.Status)
	fmt.Println(resultOf(srv, id))
	// Output:
	// forked: working
	// branch 0: 1 step(s)
	// branch 1: 1 step(s)
	// branch 2: 1 step(s)
	// joined: completed
	// {"resultType":"complete","content":[{"type":"text","text":"indexed [500 500 500]"}]}
}

// What a system that calls back sends with a Standard Webhooks signature
// (a test standing in for it, too).
func ExampleSignWebhook() {
	at := time.Unix(1767225600, 0)
	body := []byte(`{"output":"s3://videos/cat.mp4"}`)
	fmt.Println("webhook-id: msg_1")
	fmt.Println("webhook-timestamp:", at.Unix())
	fmt.Println("webhook-signature:", tasks.SignWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_1", at, body))
	// Output:
	// webhook-id: msg_1
	// webhook-timestamp: 1767225600
	// webhook-signature: v1,y8y84Dke+D89Ys5Q0NCOr+U1Erp9Fe+6D1/0GxgKJHk=
}
