// Package examples holds the documented example tools that the local
// server, the Vercel functions and the Lambda functions register: a quick
// synchronous tool and slow task tools built on the Step API.
package examples

import (
	"context"
	"fmt"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// GreetArgs are the arguments of greet.
type GreetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// SlowArgs are the arguments of slow_compute.
type SlowArgs struct {
	Seconds int    `json:"seconds" jsonschema:"how long the computation takes, in seconds"`
	Label   string `json:"label,omitempty" jsonschema:"a label echoed in the result"`
}

// ConfirmArgs are the arguments of confirm_delete.
type ConfirmArgs struct {
	Filename string `json:"filename" jsonschema:"the file to delete"`
}

// Confirmation is what confirm_delete asks the user for.
type Confirmation struct {
	Confirm bool `json:"confirm" jsonschema:"delete the file?"`
}

// Register adds the example tools to s:
//
//   - greet (sync): "Hello, {name}!".
//   - slow_compute (task, optional): sleeps `seconds` durably, then reports.
//   - confirm_delete (task, optional): asks the user to confirm through an
//     input round, then "deletes" the file.
func Register(s *tasks.Server) {
	mcp.AddTool(s.MCP(), &mcp.Tool{Name: "greet", Description: "Greets someone, synchronously."},
		func(_ context.Context, _ *mcp.CallToolRequest, in GreetArgs) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("Hello, %s!", in.Name)), nil, nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "slow_compute", Description: "Computes slowly: a durable task that sleeps `seconds`, then reports."},
		tasks.Optional, func(ctx context.Context, st *tasks.Step, in SlowArgs) (*mcp.CallToolResult, error) {
			st.Status(fmt.Sprintf("computing for %ds", in.Seconds))
			start, err := tasks.Do(st, "start", func(context.Context) (time.Time, error) { return time.Now().UTC(), nil })
			if err != nil {
				return nil, err
			}
			if err := st.Sleep("compute", time.Duration(in.Seconds)*time.Second); err != nil {
				return nil, err
			}
			st.Status("done")
			return text(fmt.Sprintf("computed %q in %ds (started %s)", in.Label, in.Seconds, start.Format(time.RFC3339))), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "confirm_delete", Description: "Deletes a file after the user confirms (an input round)."},
		tasks.Optional, func(ctx context.Context, st *tasks.Step, in ConfirmArgs) (*mcp.CallToolResult, error) {
			st.Status("waiting for confirmation")
			ans, err := tasks.Elicit[Confirmation](st, "confirm", fmt.Sprintf("Delete %s?", in.Filename))
			if err != nil {
				return nil, err
			}
			if !ans.Accepted() || !ans.Content.Confirm {
				return text(fmt.Sprintf("kept %s", in.Filename)), nil
			}
			if _, err := tasks.Do(st, "delete", func(context.Context) (bool, error) { return true, nil }); err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("deleted %s", in.Filename)), nil
		})
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
