package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/client/internal/faketasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// exampleServer stands in for a real server (such as `mcptasks serve`): a
// synchronous greet, a report that takes a few polls, a delete that asks
// for confirmation, and a job that fails.
func exampleServer() *faketasks.Server {
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	return faketasks.New(map[string]faketasks.Tool{
		"greet": {Sync: text("Hello, Ada!")},
		"report": {Steps: []faketasks.Step{
			{Message: "processing part 1 of 2"},
			{Message: "processing part 2 of 2"},
			{Message: "done", Result: text("processed 2 parts")},
		}},
		"confirm_delete": {Steps: []faketasks.Step{
			{Message: "waiting for confirmation", Ask: map[string]*mcp.ElicitParams{"confirm": {
				Mode: "form", Message: "Delete notes.txt?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}},
			}}},
			{Result: text("deleted notes.txt")},
		}},
		"import": {Steps: []faketasks.Step{
			{Message: "calling upstream"},
			{Error: &jsonrpc.Error{Code: -32603, Message: "upstream answered with an unusable payload"}},
		}},
	}, &faketasks.Options{PollIntervalMs: 10})
}

func printText(res *mcp.CallToolResult) {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			fmt.Println(t.Text)
		}
	}
}

// Call returns a tool's result whether the server answers at once or with a
// task it runs durably; a task is polled at the pace the server asks for.
func ExampleClient_Call() {
	srv := exampleServer()
	defer srv.Close()

	c := client.New(srv.URL) // e.g. "http://127.0.0.1:8080/mcp"
	ctx := context.Background()

	res, err := c.Call(ctx, "greet", map[string]any{"name": "Ada"})
	if err != nil {
		fmt.Println(err)
		return
	}
	printText(res)

	res, err = c.Call(ctx, "report", map[string]any{"steps": 2},
		client.OnStatus(func(t client.Task) { fmt.Printf("[%s] %s\n", t.Status, t.StatusMessage) }))
	if err != nil {
		fmt.Println(err)
		return
	}
	printText(res)
	// Output:
	// Hello, Ada!
	// [working] processing part 1 of 2
	// [working] processing part 2 of 2
	// [completed] done
	// processed 2 parts
}

// A task that needs input parks in input_required; the handler answers
// each request (here an elicitation) and the call goes on.
func ExampleOnElicit() {
	srv := exampleServer()
	defer srv.Close()
	c := client.New(srv.URL)

	res, err := c.Call(context.Background(), "confirm_delete", map[string]any{"filename": "notes.txt"},
		client.OnElicit(func(ctx context.Context, req *client.InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			fmt.Printf("%s: %s\n", req.Key, p.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	printText(res)
	// Output:
	// confirm: Delete notes.txt?
	// deleted notes.txt
}

// A failed task is a *TaskError that wraps the JSON-RPC error object.
func ExampleTaskError() {
	srv := exampleServer()
	defer srv.Close()
	c := client.New(srv.URL)

	_, err := c.Call(context.Background(), "import", nil)
	var te *client.TaskError
	var rpc *jsonrpc.Error
	if errors.As(err, &te) && errors.As(err, &rpc) {
		fmt.Println(te.Task.Status, rpc.Code, rpc.Message)
	}
	// Output:
	// failed -32603 upstream answered with an unusable payload
}

// Start returns the task's handle without waiting (a program that
// detaches prints the id); Resume reattaches to it later, from any process.
func ExampleClient_Resume() {
	srv := exampleServer()
	defer srv.Close()
	ctx := context.Background()

	task, _, err := client.New(srv.URL).Start(ctx, "report", map[string]any{"steps": 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("started", task.ID, task.Status)

	// Later, perhaps after a restart:
	res, err := client.New(srv.URL).Resume(ctx, task.ID)
	if err != nil {
		fmt.Println(err)
		return
	}
	printText(res)
	// Output:
	// started task-1 working
	// processed 2 parts
}

// Cancelling the call's context cancels the task (tasks/cancel) and reports
// the status it reached.
func ExampleClient_Call_cancel() {
	srv := exampleServer()
	defer srv.Close()
	c := client.New(srv.URL)

	ctx, cancel := context.WithCancel(context.Background())
	_, err := c.Call(ctx, "report", nil, client.OnStatus(func(client.Task) { cancel() }))
	var te *client.TaskError
	if errors.Is(err, context.Canceled) && errors.As(err, &te) {
		fmt.Println("task", te.Task.ID, te.Task.Status)
	}
	// Output:
	// task task-1 cancelled
}

// CancelAndWait cancels a task by its id (from any process) and reads it
// until it ends: cancelled, or the outcome a running step reached first.
func ExampleClient_CancelAndWait() {
	srv := exampleServer()
	defer srv.Close()
	c := client.New(srv.URL)
	ctx := context.Background()

	task, _, err := c.Start(ctx, "report", map[string]any{"steps": 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	task, err = c.CancelAndWait(ctx, task.ID, 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("task", task.ID, task.Status)
	// Output:
	// task task-1 cancelled
}

// The options of a client: authentication, transport and pacing.
func ExampleNew() {
	c := client.New("https://tasks.example.com/mcp",
		client.WithTokenSource(func(ctx context.Context) (string, error) { return os.Getenv("MCPTASKS_TOKEN"), nil }),
		client.WithHeader("X-Request-Source", "nightly-batch"),
		client.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		client.WithPollInterval(500*time.Millisecond, 10*time.Second),
		client.WithRetry(client.RetryPolicy{Initial: time.Second, Max: 30 * time.Second, GiveUpAfter: 10 * time.Minute}),
	)
	_ = c
	// Output:
}

// A client that never listens for task notifications: it polls tasks/get
// at the pace the server advises (by default the client listens when the
// server offers task streams, and polls otherwise).
func ExampleWithPolling() {
	srv := exampleServer()
	defer srv.Close()
	c := client.New(srv.URL, client.WithPolling())
	res, err := c.Call(context.Background(), "report", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// processed 2 parts
}
