package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// normalized is a response reduced to what must be equal on both paths.
func normalized(t *testing.T, r *mcptest.Response) string {
	t.Helper()
	var v any
	if r.Error != nil {
		return fmt.Sprintf("HTTP %d error %d %s", r.HTTP, r.Error.Code, r.Error.Message)
	}
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v) // canonical key order
	return fmt.Sprintf("HTTP %d result %s", r.HTTP, b)
}

// The lean tasks/* path answers exactly what the go-sdk path answers, for
// results and for every error it handles itself; requests it does not
// handle reach the go-sdk unchanged.
func TestLeanPathMatchesSDK(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				ans, err := tasks.Elicit[struct {
					OK bool `json:"ok"`
				}](st, "ok", "OK?")
				return text(fmt.Sprint(ans.Content.OK)), err
			})
	})
	ctx := context.Background()
	var tk mcptest.Task
	h.c.Call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}).Decode(t, &tk)
	if _, err := h.srv.Advance(ctx, tk.TaskID); err != nil {
		t.Fatal(err)
	}
	id := tk.TaskID
	without := func(c *mcptest.Client) *mcptest.Client {
		n := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(c.URL, "http://"), "/mcp"), false)
		return n
	}
	type call struct {
		name     string
		client   func(*mcptest.Client) *mcptest.Client
		method   string
		params   map[string]any
		override []string
	}
	same := func(c *mcptest.Client) *mcptest.Client { return c }
	calls := []call{
		{"get parked", same, "tasks/get", map[string]any{"taskId": id}, nil},
		{"get unknown", same, "tasks/get", map[string]any{"taskId": "nope"}, nil},
		{"get without extension", without, "tasks/get", map[string]any{"taskId": id}, nil},
		{"get wrong Mcp-Name", same, "tasks/get", map[string]any{"taskId": id}, []string{"Mcp-Name", "other"}},
		{"get wrong protocol header", same, "tasks/get", map[string]any{"taskId": id}, []string{"MCP-Protocol-Version", "2025-11-25"}},
		{"get wrong Mcp-Method", same, "tasks/get", map[string]any{"taskId": id}, []string{"Mcp-Method", "tasks/cancel"}},
		{"get empty taskId", same, "tasks/get", map[string]any{"taskId": ""}, []string{"Mcp-Name", ""}},
		{"update unknown key", same, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"zz": map[string]any{"action": "decline"}}}, nil},
		{"update unknown task", same, "tasks/update", map[string]any{"taskId": "nope", "inputResponses": map[string]any{}}, nil},
		{"update without extension", without, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}, nil},
		{"cancel unknown", same, "tasks/cancel", map[string]any{"taskId": "nope"}, nil},
		{"get malformed clientInfo", same, "tasks/get", map[string]any{"taskId": id,
			"_meta": map[string]any{"io.modelcontextprotocol/clientInfo": "not an object"}}, nil},
		{"get null clientInfo", same, "tasks/get", map[string]any{"taskId": id,
			"_meta": map[string]any{"io.modelcontextprotocol/clientInfo": nil}}, nil},
		{"get malformed capabilities", same, "tasks/get", map[string]any{"taskId": id,
			"_meta": map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{"sampling": "yes",
				"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}}}, nil},
		{"call with bad arguments", same, "tools/call", map[string]any{"name": "ask", "arguments": []any{1}}, nil},
		{"call wrong Mcp-Name", same, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}, []string{"Mcp-Name", "other"}},
		{"call unknown tool", same, "tools/call", map[string]any{"name": "nope", "arguments": map[string]any{}}, nil},
		{"get case-variant taskId", same, "tasks/get", map[string]any{"TaskId": id}, []string{"Mcp-Name", id}},
		{"get taskId and TASKID", same, "tasks/get", map[string]any{"taskId": id, "TASKID": "other"}, []string{"Mcp-Name", "other"}},
		{"call case-variant name", same, "tools/call", map[string]any{"Name": "ask", "arguments": map[string]any{}}, []string{"Mcp-Name", "ask"}},
		{"call malformed clientInfo", same, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{},
			"_meta": map[string]any{"io.modelcontextprotocol/clientInfo": 7}}, nil},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			lean := normalized(t, c.client(h.c).Call(t, c.method, c.params, c.override...))
			sdk := normalized(t, c.client(h.sdk).Call(t, c.method, c.params, c.override...))
			if lean != sdk {
				t.Errorf("lean path: %s\n go-sdk path: %s", lean, sdk)
			}
		})
	}
	// Task creation: the same handle (up to its id and times), and the same
	// task behind it.
	lean := h.c.Call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}})
	sdk := h.sdk.Call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}})
	var lt, st mcptest.Task
	lean.Decode(t, &lt)
	sdk.Decode(t, &st)
	ln, sn := normalizedTask(t, lean, lt.TaskID), normalizedTask(t, sdk, st.TaskID)
	if ln != sn || lt.ResultType != "task" {
		t.Errorf("create: lean %s\n go-sdk %s", ln, sn)
	}
	if a, b := h.c.Get(t, lt.TaskID), h.c.Get(t, st.TaskID); a.Status != b.Status || a.TTLMs == nil || *a.TTLMs != *b.TTLMs {
		t.Errorf("created tasks differ: %+v vs %+v", a, b)
	}

	// State-changing calls, each on its own twin task: the outcome and the
	// task afterwards are the same.
	twin := func() string {
		var tk mcptest.Task
		h.c.Call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}).Decode(t, &tk)
		if _, err := h.srv.Advance(ctx, tk.TaskID); err != nil {
			t.Fatal(err)
		}
		return tk.TaskID
	}
	for _, method := range []string{"tasks/update", "tasks/cancel"} {
		a, b := twin(), twin()
		params := func(id string) map[string]any {
			p := map[string]any{"taskId": id}
			if method == "tasks/update" {
				p["inputResponses"] = map[string]any{"ok": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
			}
			return p
		}
		lean, sdk := normalized(t, h.c.Call(t, method, params(a))), normalized(t, h.sdk.Call(t, method, params(b)))
		ga, gb := h.c.Get(t, a), h.c.Get(t, b)
		if lean != sdk || ga.Status != gb.Status || len(ga.InputRequests) != len(gb.InputRequests) {
			t.Errorf("%s: lean %s → %s; go-sdk %s → %s", method, lean, ga.Status, sdk, gb.Status)
		}
	}
}

// normalizedTask is normalized with the task's id and times replaced.
func normalizedTask(t *testing.T, r *mcptest.Response, id string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.Result, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(normalize(v, id))
	return fmt.Sprintf("HTTP %d result %s", r.HTTP, b)
}

// rawExchange posts body with headers to url and returns the status and a
// comparable form of the answer.
func rawExchange(t *testing.T, url string, body []byte, hdr http.Header) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header = hdr.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r, err := mcptest.Parse(resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	if err != nil { // not JSON-RPC: a transport error
		return fmt.Sprintf("HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	var v any
	if r.Error != nil {
		return fmt.Sprintf("HTTP %d id %s error %d %s", r.HTTP, r.ID, r.Error.Code, r.Error.Message)
	}
	_ = json.Unmarshal(r.Result, &v)
	b, _ := json.Marshal(normalize(v, ""))
	return fmt.Sprintf("HTTP %d id %s result %s", r.HTTP, r.ID, b)
}

// Requests a map cannot express (duplicate or case-variant members, deep
// nesting, odd ids, transport headers) get the same answer on both paths.
func TestLeanPathMatchesSDKRaw(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, registerJob)
	var tk mcptest.Task
	h.c.Call(t, "tools/call", map[string]any{"name": "job", "arguments": map[string]any{"end": "sleep"}}).Decode(t, &tk)
	id := tk.TaskID
	meta := func(caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	ext := `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	cases := []struct {
		name, method, mcpName, body string
		extra                       []string
	}{
		{"get", "tasks/get", id, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + id + `",` + meta(ext) + `}}`, nil},
		{"case-variant Extensions", "tasks/get", id, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + id + `",` + meta(`{"Extensions":{"io.modelcontextprotocol/tasks":{}}}`) + `}}`, nil},
		{"duplicate extensions", "tasks/get", id, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + id + `",` + meta(`{"extensions":{"io.modelcontextprotocol/tasks":{}},"extensions":{}}`) + `}}`, nil},
		{"duplicate taskId", "tasks/get", id, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"other","taskId":"` + id + `",` + meta(ext) + `}}`, nil},
		{"large id", "tasks/get", id, `{"jsonrpc":"2.0","id":123456789012345678,"method":"tasks/get","params":{"taskId":"` + id + `",` + meta(ext) + `}}`, nil},
		{"negative zero id", "tasks/get", id, `{"jsonrpc":"2.0","id":-0,"method":"tasks/get","params":{"taskId":"` + id + `",` + meta(ext) + `}}`, nil},
		{"Last-Event-ID", "tasks/get", id, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + id + `",` + meta(ext) + `}}`, []string{"Last-Event-ID", "7"}},
		{"deep inputResponses", "tasks/update", id, `{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"` + id + `","inputResponses":{"k":` + deep + `},` + meta(ext) + `}}`, nil},
		{"deep arguments", "tools/call", "job", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{"x":` + deep + `},` + meta(ext) + `}}`, nil},
		{"case-variant Extensions on create", "tools/call", "must_be_task", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"must_be_task","arguments":{},` + meta(`{"Extensions":{"io.modelcontextprotocol/tasks":{}}}`) + `}}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hdr := http.Header{}
			hdr.Set("Content-Type", "application/json")
			hdr.Set("Accept", "application/json, text/event-stream")
			hdr.Set("MCP-Protocol-Version", "2026-07-28")
			hdr.Set("Mcp-Method", c.method)
			hdr.Set("Mcp-Name", c.mcpName)
			for i := 0; i+1 < len(c.extra); i += 2 {
				hdr.Set(c.extra[i], c.extra[i+1])
			}
			lean := rawExchange(t, h.c.URL, []byte(c.body), hdr)
			sdk := rawExchange(t, h.sdk.URL, []byte(c.body), hdr)
			if lean != sdk {
				t.Errorf("lean path: %s\n go-sdk path: %s", lean, sdk)
			}
		})
	}
}

// rawMessage posts body with headers to url and returns the status and the
// JSON-RPC message as sent: the body, or the data of an SSE stream's event.
func rawMessage(t *testing.T, url string, body []byte, hdr http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header = hdr.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				return resp.StatusCode, data
			}
		}
	}
	return resp.StatusCode, string(raw)
}

// The lean path's answers are the go-sdk's byte for byte: encoded without
// HTML escaping (an unknown taskId "a<b>&" is echoed as the go-sdk echoes
// it), and with the id as the go-sdk re-encodes it (a string id written
// with escapes). Before, the lean path wrote "a\u003cb\u003e\u0026" and
// echoed "\u0041" where the go-sdk answers "A".
func TestLeanPathBytesMatchSDK(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, registerJob)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for _, c := range []struct{ name, id, taskID string }{
		{"HTML characters in an error", `1`, `a<b>&`},
		{"escaped string id", `"\u0041"`, `nope`},
		{"HTML characters in a string id", `"<id>&"`, `nope`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(`{"jsonrpc":"2.0","id":` + c.id + `,"method":"tasks/get","params":{"taskId":"` + c.taskID + `",` + meta + `}}`)
			hdr := http.Header{}
			hdr.Set("Content-Type", "application/json")
			hdr.Set("Accept", "application/json, text/event-stream")
			hdr.Set("MCP-Protocol-Version", "2026-07-28")
			hdr.Set("Mcp-Method", "tasks/get")
			hdr.Set("Mcp-Name", c.taskID)
			ls, lean := rawMessage(t, h.c.URL, body, hdr)
			ss, sdk := rawMessage(t, h.sdk.URL, body, hdr)
			if ls != ss || lean != sdk {
				t.Errorf("lean path: HTTP %d %s\n go-sdk path: HTTP %d %s", ls, lean, ss, sdk)
			}
		})
	}
}

// tasks/get, tasks/update and tasks/cancel without params, in the
// pre-2026-07-28 protocol (which needs no _meta), are answered on both
// paths, and the server goes on serving: without a protocol version header
// -32021 (no capability declared); on 2025-11-25, whose tasks utility the
// endpoint speaks, -32602 (no taskId) for tasks/get and tasks/cancel and
// -32601 for tasks/update, which that revision does not have.
// Before, the go-sdk's ClientCapabilities dereferenced the nil params in
// the tasks middleware: a panic in a go-sdk goroutine, which ended the
// process (found by FuzzLeanPath).
func TestTasksMethodWithoutParams(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, registerJob)
	id := h.create(t, "job", map[string]any{"end": "sleep"})
	for _, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		for _, version := range []string{"2025-11-25", ""} {
			for _, url := range []string{h.c.URL, h.sdk.URL} {
				hdr := http.Header{}
				hdr.Set("Content-Type", "application/json")
				hdr.Set("Accept", "application/json, text/event-stream")
				if version != "" {
					hdr.Set("MCP-Protocol-Version", version)
				}
				hdr.Set("Mcp-Method", method)
				hdr.Set("Mcp-Name", id)
				got := rawExchange(t, url, []byte(`{"jsonrpc":"2.0","id":1,"method":"`+method+`"}`), hdr)
				want := "HTTP 200 id 1 error -32021 "
				switch {
				case version == "":
				case method == "tasks/update":
					want = "HTTP 200 id 1 error -32601 "
				default:
					want = "HTTP 200 id 1 error -32602 "
				}
				if !strings.HasPrefix(got, want) {
					t.Errorf("%s without params (protocol %q) at %s: %s", method, version, url, got)
				}
			}
		}
	}
	if tk := h.c.Get(t, id); tk.Status != "working" {
		t.Errorf("after: %+v", tk)
	}
}
