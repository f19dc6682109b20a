package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func validate(t *testing.T, s *jsonschema.Schema, what string, raw []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s does not match the schema: %v\n%s", what, err, raw)
	}
}

// envelope rebuilds the JSON-RPC response a client received.
func envelope(r *mcptest.Response) []byte {
	m := map[string]any{"jsonrpc": "2.0", "id": r.ID}
	if r.Error != nil {
		m["error"] = r.Error
	} else {
		m["result"] = r.Result
	}
	b, _ := json.Marshal(m)
	return b
}

// TestWireMatchesSchema drives a task through every status over HTTP and
// validates every message the server emitted against the published schema
// and the SEP-2663 task shapes.
func TestWireMatchesSchema(t *testing.T) {
	compile := mcptest.Schemas(t, "testdata")
	var (
		resultResp = compile("mcp.json#/$defs/JSONRPCResultResponse")
		errorResp  = compile("mcp.json#/$defs/JSONRPCErrorResponse")
		missingCap = compile("mcp.json#/$defs/MissingRequiredClientCapabilityError")
		created    = compile("tasks.json#/$defs/CreateTaskResult")
		detailed   = compile("tasks.json#/$defs/DetailedTask")
		ack        = compile("tasks.json#/$defs/Ack")
		callResult = compile("mcp.json#/$defs/CallToolResult")
		inputReq   = compile("mcp.json#/$defs/InputRequiredResult")
	)
	h := newHarness(t, "embedded", tasks.Options{}, registerJob)
	ctx := context.Background()
	call := func(method string, params map[string]any) *mcptest.Response {
		r := h.c.Call(t, method, params)
		if r.Error != nil {
			validate(t, errorResp, method+" error", envelope(r))
		} else {
			validate(t, resultResp, method+" response", envelope(r))
		}
		return r
	}
	get := func(id string) []byte {
		r := call("tasks/get", map[string]any{"taskId": id})
		validate(t, detailed, "tasks/get result", r.Result)
		return r.Result
	}
	run := func(end string) string {
		r := call("tools/call", map[string]any{"name": "job", "arguments": map[string]any{"end": end}})
		validate(t, created, "CreateTaskResult", r.Result)
		var tk mcptest.Task
		r.Decode(t, &tk)
		get(tk.TaskID) // working
		for range 5 {
			if res, err := h.srv.Advance(ctx, tk.TaskID); err != nil || res.Skipped {
				break
			}
		}
		return tk.TaskID
	}

	for _, end := range []string{"done", "fail", "crash", "toolerror"} {
		var d map[string]json.RawMessage
		_ = json.Unmarshal(get(run(end)), &d)
		if end == "done" || end == "toolerror" {
			validate(t, callResult, "completed task's result", d["result"])
		}
	}
	asking := run("ask")
	var d struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	_ = json.Unmarshal(get(asking), &d)
	if len(d.InputRequests) != 1 {
		t.Fatalf("input_required task has %d input requests", len(d.InputRequests))
	}
	r := call("tasks/update", map[string]any{"taskId": asking, "inputResponses": map[string]any{
		"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}})
	validate(t, ack, "tasks/update ack", r.Result)
	// A task sleeping with an offer outstanding: input_required, the offer
	// among its inputRequests; answered, it is working again.
	offering := run("offer")
	var o struct {
		Status        string                     `json:"status"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	_ = json.Unmarshal(get(offering), &o)
	if o.Status != "input_required" || o.InputRequests["stop"] == nil {
		t.Fatalf("a task sleeping with an offer: %+v", o)
	}
	r = call("tasks/update", map[string]any{"taskId": offering, "inputResponses": map[string]any{
		"stop": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}})
	validate(t, ack, "tasks/update ack of an offer", r.Result)
	get(offering) // working
	for range 5 {
		if res, err := h.srv.Advance(ctx, offering); err != nil || res.Skipped || res.Status.Terminal() {
			break
		}
	}
	var fin map[string]json.RawMessage
	_ = json.Unmarshal(get(offering), &fin)
	validate(t, callResult, "completed offering task's result", fin["result"])

	sleeping := run("sleep")
	r = call("tasks/cancel", map[string]any{"taskId": sleeping})
	validate(t, ack, "tasks/cancel ack", r.Result)
	get(sleeping) // cancelled

	// Errors: unknown task, and the capability gate.
	call("tasks/get", map[string]any{"taskId": "missing"})
	without := mcptest.NewClient(h.c.URL[len("http://"):len(h.c.URL)-len("/mcp")], false)
	gate := without.Call(t, "tasks/get", map[string]any{"taskId": "gate-test"})
	if gate.Error == nil {
		t.Fatal("tasks/get without the extension succeeded")
	}
	validate(t, missingCap, "-32021 error", envelope(gate))

	// Inline MRTR round: an InputRequiredResult.
	without.Caps["elicitation"] = map[string]any{}
	ir := without.Call(t, "tools/call", map[string]any{"name": "job", "arguments": map[string]any{"end": "ask"}})
	validate(t, inputReq, "InputRequiredResult", ir.Result)
	validate(t, resultResp, "inline tools/call response", envelope(ir))
}
