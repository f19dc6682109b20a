package e2e

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
)

// TestDiscoverAndList checks the foundation over HTTP against the real
// binary: server/discover and tools/list.
func TestDiscoverAndList(t *testing.T) {
	p := start(t, nil)
	c := newClient(p.addr, false)

	r := c.Call(t, "server/discover", nil)
	if r.HTTP != 200 {
		t.Fatalf("discover: HTTP %d", r.HTTP)
	}
	var d struct {
		ResultType        string                     `json:"resultType"`
		SupportedVersions []string                   `json:"supportedVersions"`
		CacheScope        string                     `json:"cacheScope"`
		TTLMs             *int64                     `json:"ttlMs"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Meta              map[string]struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"_meta"`
	}
	r.Decode(t, &d)
	if !slices.Contains(d.SupportedVersions, "2026-07-28") {
		t.Errorf("supportedVersions = %v, want 2026-07-28 among them", d.SupportedVersions)
	}
	if d.ResultType != "complete" {
		t.Errorf("resultType = %q, want complete", d.ResultType)
	}
	if d.CacheScope != "public" && d.CacheScope != "private" {
		t.Errorf("cacheScope = %q", d.CacheScope)
	}
	if d.TTLMs == nil || *d.TTLMs < 0 {
		t.Errorf("ttlMs = %v, want an integer >= 0", d.TTLMs)
	}
	if si := d.Meta["io.modelcontextprotocol/serverInfo"]; si.Name == "" || si.Version == "" {
		t.Errorf(`_meta["io.modelcontextprotocol/serverInfo"] = %+v, want name and version`, si)
	}
	var ext struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	caps, _ := json.Marshal(d.Capabilities)
	_ = json.Unmarshal(caps, &ext)
	if _, ok := ext.Extensions["io.modelcontextprotocol/tasks"]; !ok {
		t.Errorf("capabilities %s do not advertise the tasks extension", caps)
	}
	if _, ok := d.Capabilities["tasks"]; ok {
		t.Errorf("capabilities carry a v1 tasks slot: %s", caps)
	}

	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	c.Call(t, "tools/list", nil).Decode(t, &list)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" {
			t.Errorf("tool %s has no description", tl.Name)
		}
	}
	for _, want := range []string{"greet", "slow_compute", "confirm_delete", "batch_report"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list = %v, missing %s", names, want)
		}
	}
}

var isoTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}`)

// TestTaskOverHTTP: a task tool called with the extension returns a
// CreateTaskResult that tasks/get resolves at once, and it completes;
// without the extension the same tool answers synchronously.
func TestTaskOverHTTP(t *testing.T) {
	p := start(t, nil)
	c := newClient(p.addr, true)

	r := c.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": "e2e"}})
	var raw map[string]json.RawMessage
	r.Decode(t, &raw)
	for _, k := range []string{"result", "error", "inputRequests", "requestState", "task", "ttl", "pollInterval"} {
		if _, ok := raw[k]; ok {
			t.Errorf("CreateTaskResult has key %q: %s", k, r.Result)
		}
	}
	var created task
	r.Decode(t, &created)
	if created.ResultType != "task" || created.TaskID == "" || created.Status != "working" {
		t.Fatalf("CreateTaskResult = %s", r.Result)
	}
	if !isoTime.MatchString(created.CreatedAt) || !isoTime.MatchString(created.LastUpdatedAt) {
		t.Errorf("timestamps %q %q are not ISO 8601", created.CreatedAt, created.LastUpdatedAt)
	}
	if created.TTLMs == nil || *created.TTLMs <= 0 || created.PollIntervalMs <= 0 {
		t.Errorf("ttlMs=%v pollIntervalMs=%d, want positive integers", created.TTLMs, created.PollIntervalMs)
	}
	if len(created.TaskID) < 22 {
		t.Errorf("taskId %q is shorter than 128 bits in base64", created.TaskID)
	}

	// Durable create: tasks/get resolves immediately.
	got := c.Get(t, created.TaskID)
	if got.TaskID != created.TaskID || got.ResultType != "complete" {
		t.Fatalf("immediate tasks/get = %+v", got)
	}
	done := c.WaitFor(t, created.TaskID, 20*time.Second, terminal)
	if done.Status != "completed" {
		t.Fatalf("final status %q, want completed (%+v)", done.Status, done)
	}
	var res struct {
		ResultType string `json:"resultType"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(done.Result, &res); err != nil || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "e2e") {
		t.Fatalf("result = %s (%v)", done.Result, err)
	}

	// Without the extension: a synchronous CallToolResult.
	sync := newClient(p.addr, false)
	r = sync.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": "inline"}})
	var inline struct {
		ResultType string            `json:"resultType"`
		TaskID     string            `json:"taskId"`
		Content    []json.RawMessage `json:"content"`
	}
	r.Decode(t, &inline)
	if inline.ResultType != "complete" || inline.TaskID != "" || len(inline.Content) == 0 {
		t.Fatalf("inline call = %s", r.Result)
	}
}

// TestErrorCodes checks each protocol error's JSON-RPC code and HTTP status.
func TestErrorCodes(t *testing.T) {
	p := start(t, nil)
	with := newClient(p.addr, true)
	without := newClient(p.addr, false)

	r := with.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 30}})
	var created task
	r.Decode(t, &created)

	cases := []struct {
		name     string
		c        *mcptest.Client
		method   string
		params   map[string]any
		override []string
		code     int64
		status   int
	}{
		{"get without extension", without, "tasks/get", map[string]any{"taskId": created.TaskID}, nil, -32021, 400},
		{"update without extension", without, "tasks/update", map[string]any{"taskId": "gate-test", "inputResponses": map[string]any{}}, nil, -32021, 400},
		{"cancel without extension", without, "tasks/cancel", map[string]any{"taskId": "gate-test"}, nil, -32021, 400},
		{"unknown task", with, "tasks/get", map[string]any{"taskId": "no-such-task"}, nil, -32602, 400},
		{"Mcp-Name mismatch", with, "tasks/get", map[string]any{"taskId": created.TaskID}, []string{"Mcp-Name", "other"}, -32020, 400},
		{"Mcp-Name mismatch on cancel", with, "tasks/cancel", map[string]any{"taskId": created.TaskID}, []string{"Mcp-Name", "other"}, -32020, 400},
		{"Mcp-Method mismatch", with, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}}, []string{"Mcp-Method", "tasks/get"}, -32020, 400},
		{"tasks/result removed", with, "tasks/result", map[string]any{"taskId": created.TaskID}, nil, -32601, 404},
		{"tasks/list removed", with, "tasks/list", nil, nil, -32601, 404},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.c.Call(t, tc.method, tc.params, tc.override...)
			if r.Error == nil {
				t.Fatalf("got result %s, want error %d", r.Result, tc.code)
			}
			if r.Error.Code != tc.code || r.HTTP != tc.status {
				t.Fatalf("got code %d HTTP %d (%s), want %d HTTP %d", r.Error.Code, r.HTTP, r.Error.Message, tc.code, tc.status)
			}
			if tc.code == -32021 && !strings.Contains(string(r.Error.Data), `"io.modelcontextprotocol/tasks"`) {
				t.Errorf("-32021 data = %s, want requiredCapabilities naming the extension", r.Error.Data)
			}
		})
	}

	// The rejected requests changed nothing: the task is still there.
	if got := with.Get(t, created.TaskID); got.Status != "working" {
		t.Errorf("after the error probes the task is %q, want working", got.Status)
	}
	// A legacy task param on tools/call is ignored.
	r = with.Call(t, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "legacy"},
		"task": map[string]any{"ttl": 60000, "pollInterval": 100}})
	var g struct {
		ResultType string `json:"resultType"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	r.Decode(t, &g)
	if g.ResultType != "complete" || len(g.Content) != 1 || g.Content[0].Text != "Hello, legacy!" {
		t.Errorf("greet with legacy task param = %s", r.Result)
	}
	// Cancel answers an acknowledgement, also once the task is terminal;
	// the task ends cancelled (at once when parked in its sleep, at the end
	// of its first step when that is still in flight).
	for range 2 {
		r = with.Call(t, "tasks/cancel", map[string]any{"taskId": created.TaskID})
		var ack map[string]json.RawMessage
		r.Decode(t, &ack)
		if string(ack["resultType"]) != `"complete"` || len(ack) > 2 {
			t.Errorf("cancel ack = %s, want only resultType (and _meta)", r.Result)
		}
	}
	if got := with.WaitFor(t, created.TaskID, 30*time.Second, terminal); got.Status != "cancelled" {
		t.Errorf("after cancel the task is %q, want cancelled", got.Status)
	}
}

// TestInputRound drives confirm_delete through input_required and
// tasks/update, and inline through MRTR.
func TestInputRound(t *testing.T) {
	p := start(t, nil)
	c := newClient(p.addr, true)
	var created task
	c.Call(t, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "a.txt"}}).Decode(t, &created)
	parked := c.WaitFor(t, created.TaskID, 10*time.Second, func(tk task) bool { return tk.Status == "input_required" || terminal(tk) })
	if parked.Status != "input_required" || len(parked.InputRequests) != 1 {
		t.Fatalf("parked = %+v", parked)
	}
	var key string
	for k := range parked.InputRequests {
		key = k
	}
	var ack map[string]json.RawMessage
	c.Call(t, "tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{
		"unknown-key": map[string]any{"ignored": true},
		key:           map[string]any{"action": "accept", "content": map[string]any{"confirm": true}},
	}}).Decode(t, &ack)
	if string(ack["resultType"]) != `"complete"` {
		t.Fatalf("update ack = %v", ack)
	}
	done := c.WaitFor(t, created.TaskID, 10*time.Second, terminal)
	if done.Status != "completed" || !strings.Contains(string(done.Result), "deleted a.txt") {
		t.Fatalf("done = %+v result %s", done, done.Result)
	}

	// Inline: round 1 asks over MRTR, round 2 answers with the requestState.
	in := newClient(p.addr, false)
	in.Caps["elicitation"] = map[string]any{}
	var r1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	in.Call(t, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "b.txt"}}).Decode(t, &r1)
	if r1.ResultType != "input_required" || len(r1.InputRequests) != 1 || r1.RequestState == "" {
		t.Fatalf("round 1 = %+v", r1)
	}
	for k := range r1.InputRequests {
		key = k
	}
	var r2 struct {
		ResultType string `json:"resultType"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	in.Call(t, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "b.txt"},
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}},
		"requestState":   r1.RequestState}).Decode(t, &r2)
	if r2.ResultType != "complete" || len(r2.Content) == 0 || r2.Content[0].Text != "deleted b.txt" {
		t.Fatalf("round 2 = %+v", r2)
	}
	// A tampered requestState is refused.
	bad := in.Call(t, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "b.txt"},
		"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}},
		"requestState":   r1.RequestState + "x"})
	if bad.Error == nil || bad.Error.Code != -32602 {
		t.Fatalf("tampered requestState: %+v", bad)
	}
}
