package tasks_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// The routing-header check answers -32020 with the id the go-sdk would
// answer with (a fractional id truncated), and leaves a body whose id the
// go-sdk refuses (array, object, boolean, a 999-deep array) to the go-sdk:
// it gets exactly the go-sdk's answer, never an echo of the id.
func TestRoutingCheckDoesNotEchoOddIDs(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, registerJob)
	var tk mcptest.Task
	h.c.Call(t, "tools/call", map[string]any{"name": "job", "arguments": map[string]any{"end": "sleep"}}).Decode(t, &tk)
	plainSrv := httptest.NewServer(tasks.NewSDKHandler(h.srv.MCP(), nil)) // the go-sdk alone
	t.Cleanup(plainSrv.Close)
	plain := plainSrv.URL + "/mcp"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	for name, id := range map[string]string{
		"array":      `[1,2]`,
		"object":     `{"a":1}`,
		"true":       `true`,
		"deep array": strings.Repeat("[", 999) + strings.Repeat("]", 999),
	} {
		t.Run(name, func(t *testing.T) {
			body := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/get","params":{"taskId":"` + tk.TaskID + `",` + meta + `}}`)
			hdr := getHeaders("not-the-task")
			ours := rawExchange(t, h.c.URL, body, hdr)
			sdkOnly := rawExchange(t, plain, body, hdr)
			if ours != sdkOnly {
				t.Errorf("ours: %s\ngo-sdk alone: %s", ours, sdkOnly)
			}
			if strings.Contains(ours, "-32020") {
				t.Errorf("answered -32020 echoing the id: %s", ours)
			}
		})
	}
	// A fractional id: the go-sdk accepts it as 1, so the header is
	// checked and the answer carries id 1, as the go-sdk's would.
	body := []byte(`{"jsonrpc":"2.0","id":1.5,"method":"tasks/get","params":{"taskId":"` + tk.TaskID + `",` + meta + `}}`)
	hdr := getHeaders("not-the-task")
	if got, want := rawExchange(t, h.c.URL, body, hdr), "HTTP 400 id 1 error -32020 Mcp-Name header does not match params.taskId"; got != want {
		t.Errorf("fractional id, wrong Mcp-Name: %s, want %s", got, want)
	}
	hdr.Set("Mcp-Name", tk.TaskID)
	if got := rawExchange(t, h.c.URL, body, hdr); !strings.HasPrefix(got, "HTTP 200 id 1 result") {
		t.Errorf("fractional id, right Mcp-Name: %s", got)
	}
}

// getHeaders are the transport headers of a tasks/get routed to mcpName.
func getHeaders(mcpName string) http.Header {
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	hdr.Set("MCP-Protocol-Version", "2026-07-28")
	hdr.Set("Mcp-Method", "tasks/get")
	hdr.Set("Mcp-Name", mcpName)
	return hdr
}
