package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// greetArgs are the arguments of greet.
type greetArgs struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// slowArgs are the arguments of slow_compute.
type slowArgs struct {
	Seconds int    `json:"seconds" jsonschema:"how long the computation takes, in seconds (0 to 3600)"`
	Label   string `json:"label,omitempty" jsonschema:"a label echoed in the result"`
}

// maxSlowSeconds bounds slow_compute.
const maxSlowSeconds = 3600

// confirmArgs are the arguments of confirm_delete.
type confirmArgs struct {
	Filename string `json:"filename" jsonschema:"the file to delete"`
}

// confirmForm is what confirm_delete asks the user for.
type confirmForm struct {
	Confirm bool `json:"confirm" jsonschema:"delete the file?"`
}

// detailsForm is the answer multi_input reads from each of its two input
// requests.
type detailsForm struct {
	Name    string `json:"name,omitempty"`
	Confirm bool   `json:"confirm,omitempty"`
}

// registerTaskFixtures adds the fixtures of the tasks-* scenarios. Except
// greet, each is a durable task tool on the Step API: with the tasks
// extension declared on the request it becomes a task that workers advance
// step by step through the store and queue.
func registerTaskFixtures(s *tasks.Server) {
	mcp.AddTool(s.MCP(), &mcp.Tool{Name: "greet", Description: "Greets someone synchronously; never a task."},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, any, error) {
			return text("Hello, %s!", in.Name), nil, nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "slow_compute",
		Description: "Computes for `seconds` (a durable sleep between two journaled steps), then reports. A task when the client declares the tasks extension; inline otherwise."},
		tasks.Optional, slowCompute)

	tasks.AddTool(s, &mcp.Tool{Name: "failing_job",
		Description: "A job that always fails its work step; the task ends completed with a tool error (isError). Requires the tasks extension."},
		tasks.Required, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			st.Status("preparing")
			if err := st.Sleep("warm-up", 300*time.Millisecond); err != nil {
				return nil, err
			}
			st.Status("processing")
			_, err := tasks.Do(st, "process", func(context.Context) (int, error) {
				return 0, tasks.Permanent(errors.New("the input batch is corrupt"))
			})
			if err != nil {
				return toolError("the job failed: %v", err), nil
			}
			return text("the job succeeded unexpectedly"), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "protocol_error_job",
		Description: "A job whose upstream answers with an unusable payload; the task ends failed with a JSON-RPC error."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			st.Status("calling upstream")
			payload, err := tasks.Do(st, "call-upstream", func(context.Context) (string, error) {
				return "<html>502 Bad Gateway</html>", nil
			})
			if err != nil {
				return nil, err
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(payload), &v); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
					Message: fmt.Sprintf("upstream answered with an unusable payload: %v", err)}
			}
			return text("upstream answered %v", v), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "confirm_delete",
		Description: "Deletes a file after the user confirms it (one elicitation/create input request)."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, in confirmArgs) (*mcp.CallToolResult, error) {
			st.Status("waiting for confirmation")
			ans, err := tasks.Elicit[confirmForm](st, "confirm", fmt.Sprintf("Delete %s?", in.Filename))
			if err != nil {
				return nil, err
			}
			if !ans.Accepted() || !ans.Content.Confirm {
				return text("kept %s", in.Filename), nil
			}
			st.Status("deleting")
			if _, err := tasks.Do(st, "delete", func(context.Context) (bool, error) { return true, nil }); err != nil {
				return nil, err
			}
			return text("deleted %s", in.Filename), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "multi_input",
		Description: "Asks two questions at once (two input requests pending together) and finishes when both are answered."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			st.Status("waiting for both answers")
			resp, err := st.Input("details", map[string]tasks.InputRequest{
				"project_name": askElicit("Name the project.", schemaFor[nameForm]()),
				"launch":       askElicit("Launch it now?", schemaFor[confirmForm]()),
			})
			if err != nil {
				return nil, err
			}
			name, err1 := decodeElicit[detailsForm](resp["project_name"])
			launch, err2 := decodeElicit[detailsForm](resp["launch"])
			if err := errors.Join(err1, err2); err != nil {
				return toolError("unreadable answers: %v", err), nil
			}
			return text("project %q (action %s), launch %t (action %s)", name.Content.Name, name.Action, launch.Content.Confirm, launch.Action), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "test_tool_with_task",
		Description: "Asks for the user's name over MRTR before any task exists, then runs as a task that greets them. Requires the tasks extension."},
		tasks.Required, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			ans, err := tasks.Elicit[nameForm](st, "user_name", "What is your name?")
			if err != nil {
				return nil, err
			}
			if !ans.Accepted() || ans.Content.Name == "" {
				return toolError("no name was given (action %q)", ans.Action), nil
			}
			greeting, err := tasks.Do(st, "compose", func(context.Context) (string, error) {
				return fmt.Sprintf("Hello, %s! This greeting was composed by a durable task.", ans.Content.Name), nil
			})
			if err != nil {
				return nil, err
			}
			return text("%s", greeting), nil
		}, tasks.GatherInputFirst())
}

// slowCompute journals its start, sleeps durably for in.Seconds and
// journals its end: a cancelled task stops at the sleep at once.
func slowCompute(_ context.Context, st *tasks.Step, in slowArgs) (*mcp.CallToolResult, error) {
	if in.Seconds < 0 || in.Seconds > maxSlowSeconds {
		return toolError("seconds must be between 0 and %d, not %d", maxSlowSeconds, in.Seconds), nil
	}
	st.Status(fmt.Sprintf("computing %q for %ds", in.Label, in.Seconds))
	start, err := tasks.Do(st, "start", func(context.Context) (time.Time, error) { return time.Now().UTC(), nil })
	if err != nil {
		return nil, err
	}
	if err := st.Sleep("compute", time.Duration(in.Seconds)*time.Second); err != nil {
		return nil, err
	}
	end, err := tasks.Do(st, "finish", func(context.Context) (time.Time, error) { return time.Now().UTC(), nil })
	if err != nil {
		return nil, err
	}
	st.Status("done")
	return text("computed %q: asked for %ds, took %s", in.Label, in.Seconds, end.Sub(start).Round(time.Millisecond)), nil
}
