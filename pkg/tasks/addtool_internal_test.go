package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An input schema inferred from In is resolved on first use, and still
// validates every call; one the caller gives is resolved at registration,
// where a bad one panics.
func TestAddToolSchemaResolution(t *testing.T) {
	s := New(&mcp.Implementation{Name: "t", Version: "1"}, nil, nil, nil, nil)
	type in struct {
		N int `json:"n"`
	}
	noop := func(context.Context, *Step, in) (*mcp.CallToolResult, error) { return nil, nil }
	AddTool(s, &mcp.Tool{Name: "inferred"}, Optional, noop)
	tl := s.tools["inferred"]
	for range 2 {
		if _, bad := tl.validateArgs(json.RawMessage(`{"n":"not a number"}`)); bad == nil || !bad.IsError {
			t.Errorf("arguments against the inferred schema were accepted: %+v", bad)
		}
		if got, bad := tl.validateArgs(json.RawMessage(`{"n":1}`)); bad != nil || string(got) != `{"n":1}` {
			t.Errorf("valid arguments: %s, %+v", got, bad)
		}
	}
	if tl.paramHeaders() {
		t.Error("a schema without x-mcp-header reported Mcp-Param headers")
	}

	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "resolving the input schema") {
			t.Errorf("AddTool with an unresolvable schema: recovered %v, want a panic naming the schema", p)
		}
	}()
	AddTool(s, &mcp.Tool{Name: "given", InputSchema: &jsonschema.Schema{Type: "object", Ref: "#/$defs/missing"}}, Optional, noop)
}
