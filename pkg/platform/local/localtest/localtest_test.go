package localtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/platform/local/localtest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type countArgs struct {
	N int `json:"n"`
}

var app = &tasks.App{Name: "counter", Version: "1.0.0", Register: func(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "count", Description: "Counts to n, one durable step each."}, tasks.Required,
		func(ctx context.Context, st *tasks.Step, in countArgs) (*mcp.CallToolResult, error) {
			sum := 0
			for i := 1; i <= in.N; i++ {
				v, err := tasks.Do(st, "step-"+string(rune('0'+i)), func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return nil, err
				}
				sum += v
			}
			return &mcp.CallToolResult{StructuredContent: map[string]int{"sum": sum}, Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
}}

// Serve runs the app's task tools to the end on worker goroutines: a
// required task tool called through a real client comes back completed,
// with its tasks/get state visible meanwhile.
func TestServe(t *testing.T) {
	url := localtest.Serve(t, app)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var seen []client.Status
	res, err := client.New(url).Call(ctx, "count", countArgs{N: 3}, client.OnStatus(func(tk client.Task) { seen = append(seen, tk.Status) }))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.StructuredContent; got == nil {
		t.Fatalf("no structured result: %+v", res)
	}
	if len(seen) == 0 || seen[len(seen)-1] != client.StatusCompleted {
		t.Errorf("statuses %v, want ... completed (the call ran as a task)", seen)
	}
	// Two servers in one test are isolated from each other.
	other := localtest.ServeWith(t, app, localtest.Options{Env: map[string]string{"MCPTASKS_POLL_INTERVAL": "50ms"}})
	if other == url {
		t.Fatal("the same URL twice")
	}
	if _, err := client.New(other).Call(ctx, "count", countArgs{N: 1}); err != nil {
		t.Fatal(err)
	}
}
