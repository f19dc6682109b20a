package tasks_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerJobTools adds the tools of the async-jobs tests: nap sleeps
// `seconds` durably, confirm asks then acts, bg is a Background tool,
// must is Required, and inline sleeps like nap but is InlineOnly.
func registerJobTools(s *tasks.Server) {
	type napArgs struct {
		Seconds int `json:"seconds"`
	}
	nap := func(ctx context.Context, st *tasks.Step, in napArgs) (*mcp.CallToolResult, error) {
		st.Status("napping")
		if err := st.Sleep("nap", time.Duration(in.Seconds)*time.Second); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "rested"}}, StructuredContent: map[string]any{"rested": true}}, nil
	}
	tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "naps"}, tasks.Optional, nap)
	tasks.AddTool(s, &mcp.Tool{Name: "inline", Description: "naps, inline only"}, tasks.Optional, nap, tasks.InlineOnly())
	tasks.AddTool(s, &mcp.Tool{Name: "bg", Description: "naps in the background"}, tasks.Optional, nap, tasks.Background())
	tasks.AddTool(s, &mcp.Tool{Name: "must", Description: "naps, only as a task"}, tasks.Required, nap)
	tasks.AddTool(s, &mcp.Tool{Name: "confirm", Description: "asks, then acts"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			ans, err := tasks.Elicit[confirmation](st, "confirm", "Go ahead?")
			if err != nil {
				return nil, err
			}
			if !ans.Accepted() || !ans.Content.Confirm {
				return text("kept"), nil
			}
			return text("done"), nil
		})
}

// jobClients are a harness's clients without the extension, as principals
// alice and bob (X-Principal), and with it as alice.
func jobClients(t *testing.T, opts tasks.Options) (h *harness, alice, bob, aliceTasks *mcptest.Client) {
	opts.Principal = func(_ context.Context, extra *mcp.RequestExtra) string { return extra.Header.Get("X-Principal") }
	h = newHarness(t, "redis-server", opts, registerJobTools)
	addr := strings.TrimSuffix(strings.TrimPrefix(h.c.URL, "http://"), "/mcp")
	mk := func(who string, ext bool) *mcptest.Client {
		c := mcptest.NewClient(addr, ext)
		c.Header = http.Header{"X-Principal": {who}}
		return c
	}
	return h, mk("alice", false), mk("bob", false), mk("alice", true)
}

// jobResult is a companion tool's or a job handle's CallToolResult.
type jobResult struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent struct {
		TaskID         string                     `json:"taskId"`
		Status         string                     `json:"status"`
		StatusMessage  string                     `json:"statusMessage"`
		PollIntervalMs int64                      `json:"pollIntervalMs"`
		InputRequests  map[string]json.RawMessage `json:"inputRequests"`
		Rested         bool                       `json:"rested"`
	} `json:"structuredContent"`
	IsError bool                       `json:"isError"`
	Meta    map[string]json.RawMessage `json:"_meta"`
}

func (r jobResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func callJob(t *testing.T, c *mcptest.Client, tool string, args map[string]any) jobResult {
	t.Helper()
	var r jobResult
	c.Call(t, "tools/call", map[string]any{"name": tool, "arguments": args}).Decode(t, &r)
	return r
}

// A client without the extension starts a job that sleeps past the
// call's budget: the call answers at once with the job's handle (text for a
// model, the task id in structuredContent, the related-task _meta); the
// status tool reports it working, sleeping; cancel cancels it; another
// principal's calls about it answer exactly like an unknown id's.
func TestJobSleepsPastTheBudget(t *testing.T) {
	h, alice, bob, aliceTasks := jobClients(t, tasks.Options{})
	h.work(t, 2)
	start := callJob(t, alice, "nap", map[string]any{"seconds": 600})
	id := start.StructuredContent.TaskID
	if start.IsError || id == "" || start.StructuredContent.Status != "working" ||
		!strings.Contains(start.text(), "background job "+id) || !strings.Contains(start.text(), "task_status") ||
		string(start.Meta[tasks.RelatedTaskMetaKey]) != `{"taskId":"`+id+`"}` {
		t.Fatalf("job handle: %+v", start)
	}
	// The job is a task like any other: tasks/get reads it.
	if tk := aliceTasks.Get(t, id); tk.Status != "working" {
		t.Fatalf("tasks/get of the job: %+v", tk)
	}
	aliceTasks.WaitFor(t, id, 10*time.Second, func(tk mcptest.Task) bool { return tk.StatusMessage == "napping" })
	st := callJob(t, alice, "task_status", map[string]any{"taskId": id, "waitSeconds": 0})
	if st.IsError || st.StructuredContent.Status != "working" || st.StructuredContent.StatusMessage != "napping" ||
		!strings.Contains(st.text(), "sleeps until") {
		t.Fatalf("task_status: %+v", st)
	}
	unknown := callJob(t, bob, "task_status", map[string]any{"taskId": driver.NewID(), "waitSeconds": 0})
	for _, tool := range []string{"task_status", "task_cancel", "task_answer"} {
		r := callJob(t, bob, tool, map[string]any{"taskId": id, "key": "k", "waitSeconds": 0})
		if !r.IsError || strings.Replace(r.text(), id, "ID", 1) != strings.Replace(unknown.text(), unknown.text()[len("unknown taskId: "):], "ID", 1) {
			t.Errorf("bob's %s of alice's job: %+v, want exactly an unknown id's answer (%q)", tool, r, unknown.text())
		}
	}
	c := callJob(t, alice, "task_cancel", map[string]any{"taskId": id})
	if c.IsError || c.StructuredContent.Status != "cancelled" {
		t.Fatalf("task_cancel: %+v", c)
	}
	if st := callJob(t, alice, "task_status", map[string]any{"taskId": id}); st.StructuredContent.Status != "cancelled" || st.IsError {
		t.Fatalf("task_status after cancel: %+v", st)
	}
}

// A job finishes: a status call that waits sees it complete and answers
// exactly the tool's own result (content and structuredContent).
func TestJobStatusWaitsForTheResult(t *testing.T) {
	h, alice, _, _ := jobClients(t, tasks.Options{MaxDuration: 3 * time.Second, SafetyMargin: time.Second})
	h.work(t, 2)
	start := callJob(t, alice, "nap", map[string]any{"seconds": 4}) // past the 2s budget
	id := start.StructuredContent.TaskID
	if id == "" {
		t.Fatalf("no job: %+v", start)
	}
	var done jobResult
	for range 10 {
		done = callJob(t, alice, "task_status", map[string]any{"taskId": id})
		if done.StructuredContent.Status != "working" {
			break
		}
	}
	if done.IsError || done.text() != "rested" || !done.StructuredContent.Rested ||
		string(done.Meta[tasks.RelatedTaskMetaKey]) != `{"taskId":"`+id+`"}` {
		t.Fatalf("task_status of the completed job: %+v, want the tool's own result", done)
	}
}

// A tool that asks for input, from a client that declared no elicitation:
// the job's handle shows the question with its fields; an invalid answer
// through the answer tool is refused naming the field, and the job waits
// on; a valid one completes it.
func TestJobAnswersInput(t *testing.T) {
	h, alice, _, _ := jobClients(t, tasks.Options{})
	h.work(t, 2)
	start := callJob(t, alice, "confirm", map[string]any{})
	id := start.StructuredContent.TaskID
	if id == "" || !strings.Contains(start.text(), `Question "confirm": Go ahead?`) || !strings.Contains(start.text(), "confirm: a boolean") {
		t.Fatalf("job handle: %+v", start)
	}
	var st jobResult
	for range 10 {
		if st = callJob(t, alice, "task_status", map[string]any{"taskId": id, "waitSeconds": 1}); st.StructuredContent.Status == "input_required" {
			break
		}
	}
	if st.StructuredContent.InputRequests["confirm"] == nil || !strings.Contains(st.text(), "task_answer") {
		t.Fatalf("task_status of the waiting job: %+v", st)
	}
	bad := callJob(t, alice, "task_answer", map[string]any{"taskId": id, "key": "confirm", "content": map[string]any{"confirm": "yes"}})
	if !bad.IsError || !strings.Contains(bad.text(), `content.confirm must be a boolean (true or false), got the string "yes"`) {
		t.Fatalf("invalid answer: %+v", bad)
	}
	if wrong := callJob(t, alice, "task_answer", map[string]any{"taskId": id, "key": "nosuch", "content": map[string]any{}}); !wrong.IsError ||
		!strings.Contains(wrong.text(), `no open question "nosuch" (open: confirm)`) {
		t.Fatalf("answer to an unknown key: %+v", wrong)
	}
	if st := callJob(t, alice, "task_status", map[string]any{"taskId": id, "waitSeconds": 0}); st.StructuredContent.Status != "input_required" {
		t.Fatalf("after the invalid answer: %+v", st)
	}
	ok := callJob(t, alice, "task_answer", map[string]any{"taskId": id, "key": "confirm", "content": map[string]any{"confirm": true}})
	for range 10 {
		if ok.IsError || ok.text() == "done" {
			break
		}
		ok = callJob(t, alice, "task_status", map[string]any{"taskId": id})
	}
	if ok.IsError || ok.text() != "done" {
		t.Fatalf("after a valid answer: %+v", ok)
	}
}

// The job's handle shows the questions its call asked inline before a
// worker has parked the task on them: an answer sent at once, before that,
// waits for its question to open (here the workers start 500ms later) and
// is taken, not refused.
func TestJobAnswerBeforeTheQuestionOpens(t *testing.T) {
	h, alice, _, _ := jobClients(t, tasks.Options{})
	start := callJob(t, alice, "confirm", map[string]any{})
	id := start.StructuredContent.TaskID
	if id == "" || !strings.Contains(start.text(), `Question "confirm"`) {
		t.Fatalf("job handle: %+v", start)
	}
	time.AfterFunc(500*time.Millisecond, func() { h.work(t, 1) })
	ok := callJob(t, alice, "task_answer", map[string]any{"taskId": id, "key": "confirm", "content": map[string]any{"confirm": true}})
	if ok.IsError {
		t.Fatalf("an answer sent before the worker parked the job: %+v, want it taken", ok)
	}
	for range 10 {
		if ok.IsError || ok.text() == "done" {
			break
		}
		ok = callJob(t, alice, "task_status", map[string]any{"taskId": id})
	}
	if ok.IsError || ok.text() != "done" {
		t.Fatalf("after the answer: %+v", ok)
	}
}

// A Background tool starts a job at once; a Required one is refused with
// -32021, as the extension asks; an InlineOnly tool that cannot finish is
// refused with -32021; with the fallback off, no
// companion tools are listed, a sleep past the budget is refused with
// -32021 naming the extension, and input the client cannot give with
// -32021 naming elicitation.
func TestJobKinds(t *testing.T) {
	h, alice, _, _ := jobClients(t, tasks.Options{})
	h.work(t, 2)
	if r := callJob(t, alice, "bg", map[string]any{"seconds": 1}); r.StructuredContent.TaskID == "" || r.IsError {
		t.Errorf("bg: %+v, want a job", r)
	}
	if r := alice.Call(t, "tools/call", map[string]any{"name": "must", "arguments": map[string]any{"seconds": 1}}); r.Error == nil || r.Error.Code != -32021 {
		t.Errorf("must: %+v, want -32021", r)
	}
	r := alice.Call(t, "tools/call", map[string]any{"name": "inline", "arguments": map[string]any{"seconds": 600}})
	if r.Error == nil || r.Error.Code != -32021 || r.HTTP != http.StatusBadRequest || !strings.Contains(r.Error.Message, "sleeps 10m0s") ||
		!strings.Contains(string(r.Error.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
		t.Errorf("InlineOnly tool sleeping past the budget: %+v", r)
	}

	_, off, _, _ := jobClients(t, tasks.Options{Jobs: tasks.JobOptions{Disable: true}})
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	off.Call(t, "tools/list", nil).Decode(t, &list)
	for _, tl := range list.Tools {
		if strings.HasPrefix(tl.Name, "task_") {
			t.Errorf("fallback off, yet %s is listed", tl.Name)
		}
	}
	r = off.Call(t, "tools/call", map[string]any{"name": "nap", "arguments": map[string]any{"seconds": 600}})
	if r.Error == nil || r.Error.Code != -32021 || !strings.Contains(r.Error.Message, "sleeps 10m0s") {
		t.Errorf("fallback off, sleep past the budget: %+v", r)
	}
	r = off.Call(t, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{}})
	if r.Error == nil || r.Error.Code != -32021 || !strings.Contains(string(r.Error.Data), `"elicitation":{}`) {
		t.Errorf("fallback off, input without elicitation: %+v", r)
	}
}

// A request without protocol headers (a client that names no revision)
// whose tool asks for input: a background job, or -32600 with the
// fallback off; never a JSON-RPC error of code 0 after running the tool.
// Its answers carry no 2026-07-28 field.
func TestJobWithoutProtocolHeaders(t *testing.T) {
	for _, jobs := range []bool{true, false} {
		h, _, _, _ := jobClients(t, tasks.Options{Jobs: tasks.JobOptions{Disable: !jobs}})
		post := func(body string) *mcptest.Response {
			req, _ := http.NewRequest("POST", h.sdk.URL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("X-Principal", "alice")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var buf strings.Builder
			_, _ = io.Copy(&buf, resp.Body)
			r, err := mcptest.Parse(resp.StatusCode, resp.Header.Get("Content-Type"), []byte(buf.String()))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		r := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"confirm","arguments":{}}}`)
		if !jobs {
			if r.Error == nil || r.Error.Code != -32600 || !strings.Contains(r.Error.Message, "elicitation") {
				t.Errorf("fallback off: %+v, want -32600 naming elicitation", r)
			}
			continue
		}
		var job jobResult
		r.Decode(t, &job)
		if job.StructuredContent.TaskID == "" || strings.Contains(string(r.Result), `"resultType"`) {
			t.Errorf("without headers: %s, want a job's handle without resultType", r.Result)
		}
		list := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`)
		for _, f := range []string{`"ttlMs"`, `"cacheScope"`, `"resultType"`} {
			if strings.Contains(string(list.Result), f) {
				t.Errorf("tools/list without headers carries %s: %.200s", f, list.Result)
			}
		}
	}
}

// A principal's status calls wait (for news of a working job) at most
// Jobs.MaxWaitsPerPrincipal at once; one past it answers at once, so that
// its waits never hold the requests others need. Another principal still
// waits.
func TestJobStatusWaitsBoundedPerPrincipal(t *testing.T) {
	h, alice, bob, _ := jobClients(t, tasks.Options{Jobs: tasks.JobOptions{MaxWaitsPerPrincipal: 1, MaxWait: 2 * time.Second}})
	h.work(t, 2)
	a := callJob(t, alice, "nap", map[string]any{"seconds": 600}).StructuredContent.TaskID
	b := callJob(t, bob, "nap", map[string]any{"seconds": 600}).StructuredContent.TaskID
	if a == "" || b == "" {
		t.Fatal("no jobs")
	}
	for _, j := range []struct {
		c  *mcptest.Client
		id string
	}{{alice, a}, {bob, b}} { // both asleep: nothing changes for 10 minutes
		for !strings.Contains(callJob(t, j.c, "task_status", map[string]any{"taskId": j.id, "waitSeconds": 0}).text(), "sleeps until") {
			time.Sleep(20 * time.Millisecond)
		}
	}
	timed := func(c *mcptest.Client, id string) time.Duration {
		began := time.Now()
		callJob(t, c, "task_status", map[string]any{"taskId": id, "waitSeconds": 2})
		return time.Since(began)
	}
	first := make(chan time.Duration)
	go func() { first <- timed(alice, a) }()
	time.Sleep(300 * time.Millisecond) // alice's first call is waiting
	second, others := timed(alice, a), timed(bob, b)
	if second > time.Second {
		t.Errorf("alice's second status call took %v: past her bound of 1 wait it answers at once", second)
	}
	if others < 1500*time.Millisecond {
		t.Errorf("bob's status call took %v: within his bound it waits for news (2s)", others)
	}
	if f := <-first; f < 1500*time.Millisecond {
		t.Errorf("alice's first status call took %v: it waits for news (2s)", f)
	}
}
