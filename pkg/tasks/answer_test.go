package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// confirmation is what the answer tests elicit.
type confirmation struct {
	Confirm bool `json:"confirm" jsonschema:"go ahead?"`
}

// badAnswers are answers to an elicitation of a confirmation that its
// request refuses, each with a word the refusal must carry.
func badAnswers() []struct {
	name string
	ans  any
	want string
} {
	deep := any(true)
	for range 50 {
		deep = map[string]any{"x": deep}
	}
	return []struct {
		name string
		ans  any
		want string
	}{
		{"string for a boolean", map[string]any{"action": "accept", "content": map[string]any{"confirm": "yes"}}, `content.confirm must be a boolean (true or false), got the string "yes"`},
		{"content a string", map[string]any{"action": "accept", "content": "yes"}, "content must be an object, got the string"},
		{"content a number", map[string]any{"action": "accept", "content": 3}, "content must be an object, got the number 3"},
		{"content an array", map[string]any{"action": "accept", "content": []any{true}}, "content must be an object, got an array"},
		{"missing field", map[string]any{"action": "accept", "content": map[string]any{}}, "missing required content.confirm"},
		{"unknown action", map[string]any{"action": "maybe"}, `action must be "accept", "decline" or "cancel"`},
		{"no action", map[string]any{"content": map[string]any{"confirm": true}}, `action must be "accept"`},
		{"not an object", "accept", "the answer must be a JSON object"},
		{"50 levels deep", map[string]any{"action": "accept", "content": map[string]any{"confirm": deep}}, "nested deeper than"},
	}
}

// goTypeNames are words of Go's type system that no client-visible message
// may carry.
var goTypeNames = regexp.MustCompile(`Go (struct|value)|unmarshal|tasks_test\.|\bbool\b|int64|float64|interface \{|map\[`)

func checkRefusal(t *testing.T, r *mcptest.Response, want string) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("answer accepted (%s), want a -32602 refusal", r.Result)
	}
	if r.Error.Code != -32602 || r.HTTP != http.StatusBadRequest {
		t.Errorf("refusal: code %d HTTP %d, want -32602 HTTP 400", r.Error.Code, r.HTTP)
	}
	if !strings.Contains(r.Error.Message, want) || !strings.Contains(r.Error.Message, `"confirm"`) {
		t.Errorf("refusal %q does not name the key and say %q", r.Error.Message, want)
	}
	if g := goTypeNames.FindString(r.Error.Message); g != "" {
		t.Errorf("refusal %q carries the Go word %q", r.Error.Message, g)
	}
}

// Every malformed answer to an elicitation is refused by tasks/update with
// -32602 naming the field, on the lean path and through the go-sdk alike;
// nothing of it is stored, the task keeps waiting, and a valid answer then
// completes it.
func TestInvalidAnswersRefused(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
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
		})
		h.work(t, 2)
		id := h.create(t, "confirm", nil)
		h.c.WaitFor(t, id, 10e9, func(tk mcptest.Task) bool { return tk.Status == "input_required" })
		for _, c := range []*mcptest.Client{h.c, h.sdk} {
			for _, b := range badAnswers() {
				t.Run(b.name, func(t *testing.T) {
					r := c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"confirm": b.ans}})
					checkRefusal(t, r, b.want)
				})
			}
		}
		tk := h.c.Get(t, id)
		if tk.Status != "input_required" || tk.InputRequests["confirm"] == nil {
			t.Fatalf("after the refused answers: %+v, want input_required still asking confirm", tk)
		}
		h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}).Decode(t, &struct{}{})
		done := h.wait(t, id)
		if done.Status != "completed" || textOf(t, done.Result) != "done" {
			t.Fatalf("after a valid answer: %+v", done)
		}
	})
}

// An answer to an offer is checked like one to a waited-for request, in
// any status of the task: a bad one is refused and leaves the offer up,
// a good one is taken.
func TestInvalidOfferAnswerRefused(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "offering", Description: "offers to stop"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if err := tasks.OfferElicit[confirmation](st, "confirm", "Stop?"); err != nil {
					return nil, err
				}
				for i := range 100 {
					ans, ok, err := tasks.CheckElicit[confirmation](st, "confirm")
					if err != nil {
						return nil, err
					}
					if ok {
						return text("stopped: " + ans.Action), nil
					}
					if err := st.Sleep("pause-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 50e6); err != nil && !errors.Is(err, tasks.ErrWoken) {
						return nil, err
					}
				}
				return text("ran to the end"), nil
			})
	})
	h.work(t, 2)
	id := h.create(t, "offering", nil)
	// The offer is up once the task first sleeps with it (input_required).
	h.c.WaitFor(t, id, 10e9, func(tk mcptest.Task) bool { return tk.Status == "input_required" })
	for _, b := range badAnswers()[:4] {
		r := h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"confirm": b.ans}})
		checkRefusal(t, r, b.want)
	}
	h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}).Decode(t, &struct{}{})
	if done := h.wait(t, id); done.Status != "completed" || textOf(t, done.Result) != "stopped: accept" {
		t.Fatalf("after a valid answer to the offer: %+v", done)
	}
}

// The inputResponses of an inline call's MRTR round are checked against
// the requests its requestState carries: a bad one is refused with -32602,
// and the round can be answered again with a good one.
func TestInvalidMRTRAnswerRefused(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "confirm", Description: "asks, then acts"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				ans, err := tasks.Elicit[confirmation](st, "confirm", "Go ahead?")
				if err != nil {
					return nil, err
				}
				if ans.Content.Confirm {
					return text("done"), nil
				}
				return text("kept"), nil
			})
	})
	in := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(h.c.URL, "http://"), "/mcp"), false)
	in.Caps["elicitation"] = map[string]any{"form": map[string]any{}}
	var first struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
		Content       *json.RawMessage           `json:"content"`
	}
	in.Call(t, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{}}).Decode(t, &first)
	if first.ResultType != "input_required" || first.InputRequests["confirm"] == nil || first.RequestState == "" {
		t.Fatalf("first round: %+v", first)
	}
	if first.Content != nil {
		t.Errorf("an InputRequiredResult carries content %s; it has none", *first.Content)
	}
	for _, b := range badAnswers()[:5] {
		t.Run(b.name, func(t *testing.T) {
			r := in.Call(t, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{},
				"requestState": first.RequestState, "inputResponses": map[string]any{"confirm": b.ans}})
			checkRefusal(t, r, b.want)
		})
	}
	var res mcp.CallToolResult
	in.Call(t, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{}, "requestState": first.RequestState,
		"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}).Decode(t, &res)
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "done" {
		t.Fatalf("after a valid answer: %+v", res)
	}
}
