package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKClientJobs drives the official go-sdk client (v1.8.0, which does
// not declare the tasks extension) against the split shape (endpoint and
// worker processes on a real redis-server): every long tool reaches it as
// an async job, through plain tools/call requests. A 600 s slow_compute
// starts at once and is cancelled; one that outlasts the call's budget is
// followed with task_status to its result; confirm_delete, which asks for
// input this client cannot give within the call (it declares no
// elicitation), is answered with task_answer (an invalid answer first,
// refused naming the field).
func TestGoSDKClientJobs(t *testing.T) {
	env := append(redisEnv(t, "redis-server"), "MCPTASKS_MAX_DURATION=5s")
	api := start(t, env, "serve", "--no-worker")
	start(t, env, "worker")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go-sdk", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + api.addr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	type job struct {
		TaskID        string                     `json:"taskId"`
		Status        string                     `json:"status"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, job, string) {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var j job
		if res.StructuredContent != nil {
			b, _ := json.Marshal(res.StructuredContent)
			_ = json.Unmarshal(b, &j)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		return res, j, text.String()
	}

	// The task tools and their companions are listed.
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, want := range []string{"slow_compute", "confirm_delete", "task_status", "task_answer", "task_cancel"} {
		if !names[want] {
			t.Errorf("tools/list lacks %s", want)
		}
	}

	// A 600 s job: answered at once, working, then cancelled.
	began := time.Now()
	res, long, text := call("slow_compute", map[string]any{"seconds": 600, "label": "long"})
	if res.IsError || long.TaskID == "" || long.Status != "working" || !strings.Contains(text, "task_status") {
		t.Fatalf("600 s slow_compute: %s %+v", text, long)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("the 600 s call took %v to answer; a job's handle comes at once", took)
	}
	_, st, text := call("task_status", map[string]any{"taskId": long.TaskID, "waitSeconds": 0})
	if st.Status != "working" {
		t.Fatalf("task_status of the 600 s job: %s %+v", text, st)
	}
	res, st, text = call("task_cancel", map[string]any{"taskId": long.TaskID})
	if res.IsError || st.Status != "cancelled" {
		t.Fatalf("task_cancel: %s %+v", text, st)
	}

	// A job that outlasts the 4 s budget, followed to its result.
	_, short, text := call("slow_compute", map[string]any{"seconds": 6, "label": "followed"})
	if short.TaskID == "" {
		t.Fatalf("6 s slow_compute: %s", text)
	}
	for i := 0; ; i++ {
		res, st, text = call("task_status", map[string]any{"taskId": short.TaskID})
		if st.Status != "working" || i > 10 {
			break
		}
	}
	if res.IsError || !strings.Contains(text, `computed "followed" in 6s`) {
		t.Fatalf("the followed job's result: %s", text)
	}

	// An input round, answered through task_answer.
	_, ask, text := call("confirm_delete", map[string]any{"filename": "notes.txt"})
	if ask.TaskID == "" || !strings.Contains(text, `Question "confirm": Delete notes.txt?`) {
		t.Fatalf("confirm_delete: %s", text)
	}
	res, _, text = call("task_answer", map[string]any{"taskId": ask.TaskID, "key": "confirm", "content": map[string]any{"confirm": "yes"}})
	if !res.IsError || !strings.Contains(text, `content.confirm must be a boolean (true or false), got the string "yes"`) {
		t.Fatalf("invalid answer: %s", text)
	}
	res, _, text = call("task_answer", map[string]any{"taskId": ask.TaskID, "key": "confirm", "content": map[string]any{"confirm": true}})
	for i := 0; !strings.Contains(text, "deleted notes.txt") && i < 10; i++ {
		res, _, text = call("task_status", map[string]any{"taskId": ask.TaskID})
	}
	if res.IsError || text != "deleted notes.txt" {
		t.Fatalf("after the answer: %s", text)
	}
}
