package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// legacyServer is a tasks server on a real redis-server, spoken to on
// protocol revision 2025-11-25; tasks advance only when the test calls
// Advance (no queue consumer).
type legacyServer struct {
	t   *testing.T
	srv *tasks.Server
	h   http.Handler
	// started receives the task id of each run of the stubborn tool's
	// step, which then waits for release, ignoring its context.
	started chan string
	release chan struct{}
}

func newLegacyServer(t *testing.T, opts tasks.Options, wrap ...func(driver.Store) driver.Store) *legacyServer {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	rc := testredis.Client(t, "redis-server")
	var store driver.Store = redisstore.New(rc, &redisstore.Options{Prefix: "legacy" + driver.NewID() + ":"})
	for _, w := range wrap {
		store = w(store)
	}
	opts.Logger = quiet
	opts.Principal = func(_ context.Context, extra *mcp.RequestExtra) string {
		if extra != nil && extra.Header != nil {
			return extra.Header.Get("X-Principal")
		}
		return ""
	}
	srv := tasks.New(&mcp.Implementation{Name: "legacy", Version: "1"}, &mcp.ServerOptions{Logger: quiet}, store, nopQueue{}, &opts)
	registerFuzzTools(srv)
	type confirm struct {
		Confirm bool `json:"confirm"`
	}
	tasks.AddTool(srv, &mcp.Tool{Name: "ask", Description: "asks first"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			ans, err := tasks.Elicit[confirm](st, "confirm", "Go on?")
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer " + ans.Action}}}, nil
		})
	tasks.AddTool(srv, &mcp.Tool{Name: "nap", Description: "naps an hour"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "woke"}}}, st.Sleep("nap", time.Hour)
		})
	started, release := make(chan string, 4), make(chan struct{})
	tasks.AddTool(srv, &mcp.Tool{Name: "stubborn", Description: "a step that stops late"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			if _, err := tasks.Do(st, "part", func(context.Context) (int, error) {
				started <- st.TaskID()
				<-release
				return 1, nil
			}); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, st.Sleep("rest", time.Hour)
		})
	return &legacyServer{t: t, srv: srv, h: tasks.NewHandler(srv, &tasks.HandlerOptions{Logger: quiet}), started: started, release: release}
}

// legacyAnswer is an HTTP answer: status, headers and body.
type legacyAnswer struct {
	status int
	header http.Header
	body   []byte
}

// rpc is a decoded JSON-RPC response.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// messages decodes the JSON-RPC messages of a JSON or SSE answer.
func (a legacyAnswer) messages(t *testing.T) []rpc {
	t.Helper()
	raw := [][]byte{a.body}
	if strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
		raw = nil
		for _, line := range strings.Split(string(sseMessages(a.body)), "\n") {
			if strings.TrimSpace(line) != "" {
				raw = append(raw, []byte(line))
			}
		}
	}
	var out []rpc
	for _, b := range raw {
		var m rpc
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("not a JSON-RPC message: %s (HTTP %d %s)", b, a.status, a.header.Get("Content-Type"))
		}
		out = append(out, m)
	}
	return out
}

// one is the only message of an answer, which must be HTTP 200.
func (a legacyAnswer) one(t *testing.T) rpc {
	t.Helper()
	ms := a.messages(t)
	if a.status != http.StatusOK || len(ms) != 1 {
		t.Fatalf("want one message with HTTP 200, got HTTP %d: %s", a.status, a.body)
	}
	return ms[0]
}

// send posts msg as principal on revision version ("" for no header), with
// extra headers.
func (l *legacyServer) send(principal, version string, msg any, hdr ...string) legacyAnswer {
	l.t.Helper()
	return l.do(http.MethodPost, principal, version, msg, hdr...)
}

func (l *legacyServer) do(method, principal, version string, msg any, hdr ...string) legacyAnswer {
	l.t.Helper()
	var body []byte
	if msg != nil {
		body, _ = json.Marshal(msg)
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:8080/mcp", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		r.Header.Set("MCP-Protocol-Version", version)
	}
	r.Header.Set("X-Principal", principal)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	l.h.ServeHTTP(w, r)
	return legacyAnswer{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

func call(id any, method string, params map[string]any) map[string]any {
	if params == nil {
		params = map[string]any{}
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}
}

const v1125 = tasks.LegacyProtocolVersion

// initialize on 2025-11-25 offers that revision's tasks utility and not the
// 2026-07-28 extension, and issues a session id; an older revision gets
// neither tasks dialect.
func TestLegacyInitialize(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{})
	for _, c := range []struct {
		version   string
		wantTasks bool
	}{{v1125, true}, {"2025-06-18", false}} {
		a := l.send("alice", "", call(1, "initialize", map[string]any{
			"protocolVersion": c.version, "clientInfo": map[string]any{"name": "t", "version": "1"},
			"capabilities": map[string]any{"elicitation": map[string]any{}},
		}))
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
			Capabilities    struct {
				Extensions map[string]any `json:"extensions"`
				Tasks      *struct {
					List     *struct{} `json:"list"`
					Cancel   *struct{} `json:"cancel"`
					Requests struct {
						Tools struct {
							Call *struct{} `json:"call"`
						} `json:"tools"`
					} `json:"requests"`
				} `json:"tasks"`
				Tools *struct{} `json:"tools"`
			} `json:"capabilities"`
		}
		m := a.one(t)
		if err := json.Unmarshal(m.Result, &res); err != nil || res.ProtocolVersion != c.version {
			t.Fatalf("%s initialize: %s (%v)", c.version, a.body, err)
		}
		if _, ok := res.Capabilities.Extensions[tasks.ExtensionID]; ok {
			t.Errorf("%s initialize advertises the 2026-07-28 extension: %s", c.version, m.Result)
		}
		tc := res.Capabilities.Tasks
		if got := tc != nil && tc.List != nil && tc.Cancel != nil && tc.Requests.Tools.Call != nil; got != c.wantTasks || res.Capabilities.Tools == nil {
			t.Errorf("%s initialize capabilities: %s, want tasks %v", c.version, m.Result, c.wantTasks)
		}
		if a.header.Get("Mcp-Session-Id") == "" {
			t.Errorf("%s initialize: no Mcp-Session-Id", c.version)
		}
	}
}

// tools/list on 2025-11-25 says which tools run as tasks.
func TestLegacyToolsList(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{})
	var res struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	raw := l.send("alice", v1125, call(1, "tools/list", nil)).one(t).Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	// No field of 2026-07-28 (the go-sdk sets the cache fields on every
	// revision).
	var top map[string]json.RawMessage
	_ = json.Unmarshal(raw, &top)
	for _, f := range []string{"ttlMs", "cacheScope", "resultType"} {
		if _, ok := top[f]; ok {
			t.Errorf("2025-11-25 tools/list carries %s", f)
		}
	}
	got := map[string]string{}
	for _, tl := range res.Tools {
		got[tl.Name] = "none"
		if tl.Execution != nil {
			got[tl.Name] = tl.Execution.TaskSupport
		}
	}
	for name, want := range map[string]string{"job": "optional", "must": "required", "plain": "none", "ask": "optional", "task_status": "none"} {
		if got[name] != want {
			t.Errorf("tool %s: taskSupport %q, want %q (all %v)", name, got[name], want, got)
		}
	}
}

// An unknown method answers a JSON-RPC -32601 on every revision (the
// go-sdk answered older ones with HTTP 400 text/plain), on a tasks server
// and a plain one alike.
func TestUnknownMethodIsMethodNotFound(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{})
	plain := tasks.NewSDKHandler(l.srv.MCP(), &tasks.HandlerOptions{Logger: slog.New(slog.DiscardHandler)})
	for _, h := range []http.Handler{l.h, plain} {
		l2 := *l
		l2.h = h
		for _, v := range []string{v1125, "2025-06-18", "2025-03-26"} {
			m := l2.send("alice", v, call(7, "no/such/method", nil)).one(t)
			if m.Error == nil || m.Error.Code != -32601 || string(m.ID) != "7" {
				t.Errorf("%s unknown method: %+v", v, m)
			}
		}
	}
	// On 2026-07-28 the go-sdk answers it itself, as before.
	a := l.send("alice", tasks.ProtocolVersion, call(7, "no/such/method", map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion": tasks.ProtocolVersion, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}),
		"Mcp-Method", "no/such/method")
	if ms := a.messages(t); a.status != http.StatusNotFound || len(ms) != 1 || ms[0].Error == nil || ms[0].Error.Code != -32601 {
		t.Errorf("2026-07-28 unknown method: HTTP %d %s", a.status, a.body)
	}
}

// legacyTask is the 2025-11-25 task object.
type legacyTask struct {
	TaskID        string  `json:"taskId"`
	Status        string  `json:"status"`
	StatusMessage string  `json:"statusMessage"`
	CreatedAt     string  `json:"createdAt"`
	LastUpdatedAt string  `json:"lastUpdatedAt"`
	TTL           *int64  `json:"ttl"`
	PollInterval  *int64  `json:"pollInterval"`
	TTLMs         *int64  `json:"ttlMs"`
	ResultType    *string `json:"resultType"`
}

func (l *legacyServer) create(principal, tool string, task map[string]any) legacyTask {
	l.t.Helper()
	if task == nil {
		task = map[string]any{}
	}
	m := l.send(principal, v1125, call(1, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}, "task": task})).one(l.t)
	var res struct {
		Task       legacyTask `json:"task"`
		ResultType *string    `json:"resultType"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || res.Task.TaskID == "" || res.ResultType != nil {
		l.t.Fatalf("task-augmented tools/call of %s: %+v %s", tool, m.Error, m.Result)
	}
	return res.Task
}

// The 2025-11-25 tasks utility on the shared store (pollInterval is the
// server's advice, as on 2026-07-28): creation honours a
// shorter ttl, tasks/get and tasks/list show the 2025-11-25 task object (no
// 2026-07-28 names) to the owner only, tasks/cancel answers the cancelled
// task and refuses a terminal one, tasks/result answers the result with
// related-task _meta, and the errors are in-band JSON-RPC errors.
func TestLegacyTasksUtility(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{TTL: time.Hour, PollInterval: 1500 * time.Millisecond})
	tk := l.create("alice", "job", map[string]any{"ttl": 60000})
	if tk.Status != "working" || tk.TTL == nil || *tk.TTL != 60000 || tk.PollInterval == nil || *tk.PollInterval <= 0 || *tk.PollInterval > 1500 || tk.TTLMs != nil || tk.CreatedAt == "" || tk.LastUpdatedAt == "" {
		t.Fatalf("created %+v", tk)
	}
	// Past the server's: the server's, however large (18446744073710 ms
	// overflows a time.Duration; 1e300 does not fit an int64).
	for i, ttl := range []float64{1e9, 9223372036855, 18446744073710, 1e300} {
		who := "alice"
		if i > 0 {
			who = "carol" // alice's tasks/list below has three
		}
		if long := l.create(who, "job", map[string]any{"ttl": ttl}); *long.TTL != time.Hour.Milliseconds() {
			t.Errorf("a ttl of %g ms: %d, want the server's %d", ttl, *long.TTL, time.Hour.Milliseconds())
		}
	}
	var got legacyTask
	if err := json.Unmarshal(l.send("alice", v1125, call(2, "tasks/get", map[string]any{"taskId": tk.TaskID})).one(t).Result, &got); err != nil || got.TaskID != tk.TaskID || got.Status != "working" || got.TTLMs != nil || got.ResultType != nil {
		t.Fatalf("tasks/get: %+v (%v)", got, err)
	}
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/result"} {
		r := l.send("bob", v1125, call(3, m, map[string]any{"taskId": tk.TaskID})).one(t)
		if r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("bob's %s of alice's task: %+v", m, r)
		}
	}
	if _, err := l.srv.Advance(context.Background(), tk.TaskID); err != nil {
		t.Fatal(err)
	}
	res := l.send("alice", v1125, call(4, "tasks/result", map[string]any{"taskId": tk.TaskID}))
	msgs := res.messages(t)
	last := msgs[len(msgs)-1]
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		ResultType *string `json:"resultType"`
		Meta       map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(last.Result, &out); err != nil || string(last.ID) != "4" || len(out.Content) != 1 || out.Content[0].Text != "ran <>" ||
		out.ResultType != nil || out.Meta[tasks.RelatedTaskMetaKey].TaskID != tk.TaskID {
		t.Fatalf("tasks/result: %s", res.body)
	}
	if r := l.send("alice", v1125, call(5, "tasks/cancel", map[string]any{"taskId": tk.TaskID})).one(t); r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "terminal") {
		t.Errorf("tasks/cancel of a completed task: %+v", r)
	}
	other := l.create("alice", "job", nil)
	var cancelled legacyTask
	if err := json.Unmarshal(l.send("alice", v1125, call(6, "tasks/cancel", map[string]any{"taskId": other.TaskID})).one(t).Result, &cancelled); err != nil || cancelled.Status != "cancelled" || cancelled.TaskID != other.TaskID {
		t.Errorf("tasks/cancel: %+v (%v)", cancelled, err)
	}
	l.create("bob", "job", nil)
	var list struct {
		Tasks      []legacyTask `json:"tasks"`
		NextCursor string       `json:"nextCursor"`
	}
	if err := json.Unmarshal(l.send("alice", v1125, call(7, "tasks/list", nil)).one(t).Result, &list); err != nil || len(list.Tasks) != 3 || list.NextCursor != "" {
		t.Fatalf("alice's tasks/list: %+v (%v)", list, err)
	}
	if list.Tasks[0].TaskID != other.TaskID || list.Tasks[0].Status != "cancelled" || list.Tasks[2].TaskID != tk.TaskID || list.Tasks[2].Status != "completed" {
		t.Errorf("alice's tasks/list, newest first: %+v", list.Tasks)
	}
	if r := l.send("alice", v1125, call(8, "tasks/list", map[string]any{"cursor": "bogus"})).one(t); r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("tasks/list with a bad cursor: %+v", r)
	}
	// Methods the revision does not have, and a task request on one
	// without tasks, are -32601; so is a task for a tool that is not a
	// task tool, and an inline call of a Required one.
	for _, c := range []struct {
		version, method string
		params          map[string]any
	}{
		{v1125, "tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": map[string]any{}}},
		{"2025-06-18", "tasks/get", map[string]any{"taskId": tk.TaskID}},
		{v1125, "tools/call", map[string]any{"name": "plain", "arguments": map[string]any{}, "task": map[string]any{}}},
		{v1125, "tools/call", map[string]any{"name": "must", "arguments": map[string]any{}}},
	} {
		if r := l.send("alice", c.version, call(9, c.method, c.params)).one(t); r.Error == nil || r.Error.Code != -32601 {
			t.Errorf("%s %s %v: %+v", c.version, c.method, c.params, r)
		}
	}
}

// An input round of a task: tasks/result sends the input request as an
// elicitation/create request related to the task, after a priming event
// that names the stream; the client's answer, POSTed as a JSON-RPC
// response (on any instance), becomes the task's input; a tasks/result
// still waiting at the end of its budget closes its stream with a retry
// hint, and the client resumes it with GET and Last-Event-ID until the
// result.
func TestLegacyInputRound(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{MaxDuration: 2 * time.Second, SafetyMargin: 1500 * time.Millisecond})
	tk := l.create("alice", "ask", nil)
	if _, err := l.srv.Advance(context.Background(), tk.TaskID); err != nil {
		t.Fatal(err)
	}
	a := l.send("alice", v1125, call("r1", "tasks/result", map[string]any{"taskId": tk.TaskID}))
	events := string(a.body)
	if !strings.HasPrefix(events, "id: ") || !strings.Contains(events, "\nretry: ") {
		t.Fatalf("held tasks/result stream: no priming id or no retry at its end:\n%s", events)
	}
	lastEventID := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(events, "id: "), "\n", 2)[0])
	ms := a.messages(t)
	if len(ms) != 1 || ms[0].Method != "elicitation/create" || len(ms[0].ID) == 0 || ms[0].Result != nil {
		t.Fatalf("held tasks/result: want one elicitation/create request, got %s", a.body)
	}
	var params struct {
		Message string                     `json:"message"`
		Meta    map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(ms[0].Params, &params); err != nil || params.Message != "Go on?" ||
		string(params.Meta[tasks.RelatedTaskMetaKey]) != `{"taskId":"`+tk.TaskID+`"}` {
		t.Fatalf("elicitation params %s", ms[0].Params)
	}
	// Bob's answer is not delivered; alice's is.
	answer := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(ms[0].ID), "result": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
	if a := l.send("bob", v1125, answer); a.status != http.StatusAccepted {
		t.Fatalf("bob's answer: HTTP %d %s", a.status, a.body)
	}
	if got := l.get("alice", tk.TaskID); got.Status != "input_required" {
		t.Fatalf("after bob's answer: %+v", got)
	}
	if a := l.send("alice", v1125, answer); a.status != http.StatusAccepted {
		t.Fatalf("alice's answer: HTTP %d %s", a.status, a.body)
	}
	if got := l.get("alice", tk.TaskID); got.Status != "working" {
		t.Fatalf("after alice's answer: %+v, want working", got)
	}
	if _, err := l.srv.Advance(context.Background(), tk.TaskID); err != nil {
		t.Fatal(err)
	}
	// Resume the closed stream: the result, under the original request id.
	r := l.do(http.MethodGet, "alice", v1125, nil, "Last-Event-ID", lastEventID, "Accept", "text/event-stream")
	ms = r.messages(t)
	var out struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if len(ms) != 1 || string(ms[0].ID) != `"r1"` || json.Unmarshal(ms[0].Result, &out) != nil || len(out.Content) != 1 || out.Content[0].Text != "answer accept" {
		t.Fatalf("resumed tasks/result: HTTP %d %s", r.status, r.body)
	}
	// Another principal cannot resume it.
	if ms := l.do(http.MethodGet, "bob", v1125, nil, "Last-Event-ID", lastEventID, "Accept", "text/event-stream").messages(t); len(ms) != 1 || ms[0].Error == nil || ms[0].Error.Code != -32602 {
		t.Fatalf("bob resuming alice's tasks/result: %+v", ms)
	}
}

// An answer to an elicitation/create request of a held tasks/result that
// its request refuses (a wrong type, a content that is no object, an
// action that is none, nesting 5,000 levels deep) gets HTTP 400 with a
// JSON-RPC error naming the field; the task keeps waiting, and a valid
// answer then completes it.
func TestLegacyInvalidAnswerRefused(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{MaxDuration: 2 * time.Second, SafetyMargin: 1500 * time.Millisecond})
	tk := l.create("alice", "ask", nil)
	if _, err := l.srv.Advance(context.Background(), tk.TaskID); err != nil {
		t.Fatal(err)
	}
	ms := l.send("alice", v1125, call("r1", "tasks/result", map[string]any{"taskId": tk.TaskID})).messages(t)
	if len(ms) != 1 || ms[0].Method != "elicitation/create" {
		t.Fatalf("held tasks/result: want one elicitation/create request, got %+v", ms)
	}
	deep := any(true)
	for range 5000 {
		deep = map[string]any{"x": deep}
	}
	for _, c := range []struct {
		result any
		want   string
	}{
		{map[string]any{"action": "accept", "content": map[string]any{"confirm": "yes"}}, `content.confirm must be a boolean (true or false), got the string "yes"`},
		{map[string]any{"action": "accept", "content": "yes"}, "content must be an object"},
		{map[string]any{"action": "accept", "content": 7}, "content must be an object"},
		{map[string]any{"action": "accept", "content": []any{}}, "content must be an object"},
		{map[string]any{"action": "ok"}, `action must be "accept", "decline" or "cancel"`},
		{map[string]any{"action": "accept", "content": map[string]any{"confirm": deep}}, "nested deeper than"},
	} {
		a := l.send("alice", v1125, map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(ms[0].ID), "result": c.result})
		var e rpc
		if a.status != http.StatusBadRequest || json.Unmarshal(a.body, &e) != nil || e.Error == nil || e.Error.Code != -32602 ||
			!strings.Contains(e.Error.Message, c.want) || !strings.Contains(e.Error.Message, `"confirm"`) {
			t.Errorf("invalid answer (%.60s): HTTP %d %.300s, want 400 with -32602 saying %q", fmt.Sprint(c.result), a.status, a.body, c.want)
		}
		if got := l.get("alice", tk.TaskID); got.Status != "input_required" {
			t.Fatalf("after an invalid answer: %+v, want input_required", got)
		}
	}
	valid := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(ms[0].ID), "result": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
	if a := l.send("alice", v1125, valid); a.status != http.StatusAccepted {
		t.Fatalf("valid answer: HTTP %d %s", a.status, a.body)
	}
	if _, err := l.srv.Advance(context.Background(), tk.TaskID); err != nil {
		t.Fatal(err)
	}
	if got := l.get("alice", tk.TaskID); got.Status != "completed" {
		t.Fatalf("after the valid answer: %+v, want completed", got)
	}
}

func (l *legacyServer) get(principal, id string) legacyTask {
	l.t.Helper()
	var got legacyTask
	if err := json.Unmarshal(l.send(principal, v1125, call(2, "tasks/get", map[string]any{"taskId": id})).one(l.t).Result, &got); err != nil {
		l.t.Fatal(err)
	}
	return got
}

// Inline calls of task tools on 2025-11-25: a result has content (never
// null) and no resultType. What cannot finish within the call (a tool
// that asks for input without the elicitation capability in the session,
// one that sleeps past the budget) continues as a background job whose
// handle is the result; without the async-jobs fallback they answer
// -32600 and -32603, at once.
func TestLegacyInlineCalls(t *testing.T) {
	for _, jobs := range []bool{true, false} {
		l := newLegacyServer(t, tasks.Options{Jobs: tasks.JobOptions{Disable: !jobs}})
		m := l.send("alice", v1125, call(1, "tools/call", map[string]any{"name": "job", "arguments": map[string]any{"end": "x"}})).one(t)
		var res struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			ResultType *string `json:"resultType"`
			Structured struct {
				TaskID string `json:"taskId"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != "ran <x>" || res.ResultType != nil {
			t.Fatalf("inline job: %s %+v", m.Result, m.Error)
		}
		init := l.send("alice", "", call(1, "initialize", map[string]any{
			"protocolVersion": v1125, "clientInfo": map[string]any{"name": "t", "version": "1"}, "capabilities": map[string]any{},
		}))
		sid := init.header.Get("Mcp-Session-Id")
		for _, c := range []struct {
			tool, refusal string
			code          int64
		}{
			{"ask", "elicitation", -32600},
			{"nap", "sleeps 1h0m0s", -32603},
		} {
			m := l.send("alice", v1125, call(2, "tools/call", map[string]any{"name": c.tool, "arguments": map[string]any{}}), "Mcp-Session-Id", sid).one(t)
			if !jobs {
				if m.Error == nil || m.Error.Code != c.code || !strings.Contains(m.Error.Message, c.refusal) {
					t.Errorf("inline %s without the fallback: %+v, want %d saying %q", c.tool, m, c.code, c.refusal)
				}
				continue
			}
			res.Structured.TaskID, res.ResultType = "", nil
			if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.Structured.TaskID == "" || res.ResultType != nil ||
				!strings.Contains(res.Content[0].Text, "background job "+res.Structured.TaskID) {
				t.Errorf("inline %s: %s %+v, want a background job's handle", c.tool, m.Result, m.Error)
				continue
			}
			if got := l.get("alice", res.Structured.TaskID); got.Status != "working" {
				t.Errorf("inline %s: its job %+v", c.tool, got)
			}
		}
	}
}

// The legacy layer answers only what passes the go-sdk's transport checks:
// a wrong Content-Type or Accept gets the go-sdk's refusal.
func TestLegacyTransportChecks(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{})
	tk := l.create("alice", "job", nil)
	get := call(1, "tasks/get", map[string]any{"taskId": tk.TaskID})
	if a := l.send("alice", v1125, get, "Content-Type", "text/plain"); a.status != http.StatusUnsupportedMediaType {
		t.Errorf("tasks/get as text/plain: HTTP %d %s", a.status, a.body)
	}
	if a := l.send("alice", v1125, get, "Accept", "application/json"); a.status != http.StatusBadRequest {
		t.Errorf("tasks/get accepting no event stream: HTTP %d %s", a.status, a.body)
	}
}

// 2025-11-25 has a task cancelled before the tasks/cancel response: with a
// step of it in flight (one that stops late), the answer waits for the
// step's end and says cancelled; a step that outlasts the wait (the
// invocation's budget, here 1s) leaves the task working, its cancellation
// requested, and the task ends cancelled when the step does.
func TestLegacyCancelWaitsForRunningStep(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{MaxDuration: 2 * time.Second})
	cancelWhileRunning := func(releaseAfter time.Duration) (legacyTask, string) {
		t.Helper()
		tk := l.create("alice", "stubborn", nil)
		advanced := make(chan error, 1)
		go func() {
			_, err := l.srv.Advance(context.Background(), tk.TaskID)
			advanced <- err
		}()
		select {
		case id := <-l.started:
			if id != tk.TaskID {
				t.Fatalf("step of %s started, want %s", id, tk.TaskID)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the step did not start")
		}
		released := time.AfterFunc(releaseAfter, func() { l.release <- struct{}{} })
		defer func() {
			if released.Stop() {
				l.release <- struct{}{}
			}
			if err := <-advanced; err != nil {
				t.Errorf("advance: %v", err)
			}
		}()
		var got legacyTask
		m := l.send("alice", v1125, call(7, "tasks/cancel", map[string]any{"taskId": tk.TaskID})).one(t)
		if err := json.Unmarshal(m.Result, &got); err != nil || got.TaskID != tk.TaskID {
			t.Fatalf("tasks/cancel: %+v %s (%v)", m.Error, m.Result, err)
		}
		return got, tk.TaskID
	}

	if got, _ := cancelWhileRunning(150 * time.Millisecond); got.Status != "cancelled" {
		t.Errorf("tasks/cancel while the step ran 150ms more: %+v", got)
	}

	got, id := cancelWhileRunning(time.Hour) // released when the answer is in
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "cancellation requested") {
		t.Errorf("tasks/cancel while the step outlasts the wait: %+v", got)
	}
	var after legacyTask
	if err := json.Unmarshal(l.send("alice", v1125, call(8, "tasks/get", map[string]any{"taskId": id})).one(t).Result, &after); err != nil || after.Status != "cancelled" {
		t.Errorf("tasks/get after the step ended: %+v (%v)", after, err)
	}
}

// stallAfterCancel is a store whose reads stall (ignoring their context)
// once a cancellation was requested, until release is closed: a store
// too slow to answer within a request's budget.
type stallAfterCancel struct {
	driver.Store
	cancelled atomic.Bool
	release   chan struct{}
}

func (s *stallAfterCancel) Cancel(ctx context.Context, owner, id string, now time.Time) (driver.Status, bool, error) {
	st, ended, err := s.Store.Cancel(ctx, owner, id, now)
	s.cancelled.Store(true)
	return st, ended, err
}

func (s *stallAfterCancel) Get(ctx context.Context, owner, id string) (*driver.Task, error) {
	if s.cancelled.Load() {
		<-s.release
	}
	return s.Store.Get(context.WithoutCancel(ctx), owner, id)
}

// A 2025-11-25 tasks/cancel whose cancellation the store took answers the
// task cancelled or with its cancellation requested even when no read of
// the task succeeds afterwards within the wait (a loaded store): not an
// error that would tell the client the cancel failed.
func TestLegacyCancelAnswersWithoutAReadAfter(t *testing.T) {
	stall := &stallAfterCancel{release: make(chan struct{})}
	t.Cleanup(func() { close(stall.release) })
	l := newLegacyServer(t, tasks.Options{MaxDuration: 2 * time.Second, StoreTimeout: 100 * time.Millisecond},
		func(s driver.Store) driver.Store { stall.Store = s; return stall })
	cancel := func(id string) legacyTask {
		t.Helper()
		var got legacyTask
		m := l.send("alice", v1125, call(7, "tasks/cancel", map[string]any{"taskId": id})).one(t)
		if err := json.Unmarshal(m.Result, &got); err != nil || got.TaskID != id {
			t.Fatalf("tasks/cancel: %+v %s (%v)", m.Error, m.Result, err)
		}
		return got
	}
	// Queued, no step in flight: the request cancels it at once.
	queued := l.create("alice", "nap", nil)
	if got := cancel(queued.TaskID); got.Status != "cancelled" {
		t.Errorf("tasks/cancel of a queued task, no read after: %+v, want cancelled", got)
	}
	// A step in flight: working, its cancellation requested.
	stall.cancelled.Store(false)
	running := l.create("alice", "stubborn", nil)
	advanced := make(chan error, 1)
	go func() {
		_, err := l.srv.Advance(context.Background(), running.TaskID)
		advanced <- err
	}()
	<-l.started
	got := cancel(running.TaskID)
	l.release <- struct{}{}
	if err := <-advanced; err != nil {
		t.Errorf("advance: %v", err)
	}
	if got.Status != "working" || !strings.Contains(got.StatusMessage, "cancellation requested") {
		t.Errorf("tasks/cancel with a step in flight, no read after: %+v, want working with its cancellation requested", got)
	}
}
