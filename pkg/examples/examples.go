// Package examples holds the documented example tools that this
// repository's entry points serve (the local server, the Vercel functions
// and the Lambda functions): a quick synchronous tool and slow task tools
// built on the Step API. Like any user's tool package, it imports pkg/tasks
// and the go-sdk, and nothing of the wiring.
package examples

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// Version is the version the example app reports in serverInfo.
const Version = "0.2.0"

// App is the example deployment: the example tools, served under the name
// "examples" (mcptasks --app examples, MCPTASKS_APP=examples).
var App = &tasks.App{Name: "examples", Title: "mcptasks examples", Version: Version, Register: Register}

// Register adds the example tools to s:
//
//   - greet (sync): "Hello, {name}!".
//   - slow_compute (task, optional): sleeps `seconds` durably, then reports.
//   - confirm_delete (task, optional): asks the user to confirm through an
//     input round, then "deletes" the file.
//   - batch_report (task, optional): processes `steps` parts, one durable
//     step each.
func Register(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "batch_report", Description: "Processes a report in `steps` parts, one durable step per part."},
		tasks.Optional, batchReport(s.Options().Logger))
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

// BatchArgs are the arguments of batch_report.
type BatchArgs struct {
	Steps      int `json:"steps" jsonschema:"how many parts to process (1-100)"`
	StepMillis int `json:"stepMillis,omitempty" jsonschema:"how long each part takes, in milliseconds"`
}

// batchReport processes a report part by part, one durable step each. Each
// part logs "running step" on the deployment's logger when its closure
// runs, so a reader of the logs sees that no journaled part is ever
// processed twice.
func batchReport(log *slog.Logger) tasks.Handler[BatchArgs] {
	return func(ctx context.Context, st *tasks.Step, in BatchArgs) (*mcp.CallToolResult, error) {
		return batch(ctx, log, st, in)
	}
}

func batch(ctx context.Context, log *slog.Logger, st *tasks.Step, in BatchArgs) (*mcp.CallToolResult, error) {
	if in.Steps < 1 || in.Steps > 100 {
		return nil, &jsonrpc.Error{Code: -32602, Message: "steps must be between 1 and 100"}
	}
	total := 0
	for i := 1; i <= in.Steps; i++ {
		st.Status(fmt.Sprintf("processing part %d of %d", i, in.Steps))
		name := fmt.Sprintf("part-%d", i)
		n, err := tasks.Do(st, name, func(ctx context.Context) (int, error) {
			log.InfoContext(ctx, "running step", "task", st.TaskID(), "step", name)
			if err := sleepCtx(ctx, time.Duration(in.StepMillis)*time.Millisecond); err != nil {
				return 0, err
			}
			return i * i, nil
		})
		if err != nil {
			return nil, err
		}
		total += n
	}
	st.Status("done")
	return text(fmt.Sprintf("processed %d parts, checksum %d", in.Steps, total)), nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
