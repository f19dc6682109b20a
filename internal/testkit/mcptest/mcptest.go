// Package mcptest is a small client of the 2026-07-28 stateless wire for
// tests: it sends requests with the transport headers and _meta the way the
// official conformance client does, and decodes JSON or SSE answers.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Client speaks the 2026-07-28 stateless wire to one endpoint.
type Client struct {
	URL  string
	Caps map[string]any // clientCapabilities sent in _meta
	// Header is added to every request (e.g. Authorization).
	Header http.Header
	id     atomic.Int64 // a Client is safe for concurrent calls
}

// NewClient returns a client of the endpoint at addr (host:port, path /mcp),
// declaring the tasks extension when withTasks is set.
func NewClient(addr string, withTasks bool) *Client {
	caps := map[string]any{}
	if withTasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	return &Client{URL: "http://" + addr + "/mcp", Caps: caps}
}

// Response is one JSON-RPC response and its HTTP status.
type Response struct {
	HTTP   int
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// Decode fails the test on a JSON-RPC error and decodes the result into v.
func (r *Response) Decode(t testing.TB, v any) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("unexpected JSON-RPC error %d: %s", r.Error.Code, r.Error.Message)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		t.Fatalf("decoding result %s: %v", r.Result, err)
	}
}

// Call sends method with params (a map; _meta is added) and headers as the
// conformance client does: Mcp-Method always, Mcp-Name for named methods.
// override replaces headers after the defaults.
func (c *Client) Call(t testing.TB, method string, params map[string]any, override ...string) *Response {
	t.Helper()
	body, hdr := c.Envelope(method, params)
	req, _ := http.NewRequestWithContext(context.Background(), "POST", c.URL, bytes.NewReader(body))
	req.Header = hdr
	for i := 0; i+1 < len(override); i += 2 {
		req.Header.Set(override[i], override[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading body: %v", method, err)
	}
	r, err := Parse(resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

// Envelope returns the JSON-RPC body and the HTTP headers of a call of
// method with params (a map; _meta is added), exactly as Call sends them,
// for tests that deliver a request another way (a Lambda event, a handler
// called directly).
func (c *Client) Envelope(method string, params map[string]any) ([]byte, http.Header) {
	body, h := Request(method, c.id.Add(1), params, c.Caps, "e2e")
	for k, v := range c.Header {
		h[k] = v
	}
	return body, h
}

// Request returns the JSON-RPC body and the HTTP headers of request id of
// method with params (a map; _meta is added, with caps as the client's
// capabilities and client as its name), as the conformance client sends
// them: Mcp-Method always, Mcp-Name for named methods.
func Request(method string, id any, params, caps map[string]any, client string) ([]byte, http.Header) {
	if params == nil {
		params = map[string]any{}
	}
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": client, "version": "1"},
	}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", method)
	switch method {
	case "tools/call", "prompts/get":
		h.Set("Mcp-Name", fmt.Sprint(params["name"]))
	case "tasks/get", "tasks/update", "tasks/cancel":
		h.Set("Mcp-Name", fmt.Sprint(params["taskId"]))
	}
	return body, h
}

// Parse decodes an HTTP answer to a JSON-RPC request: a JSON body, or an
// SSE stream whose data: line carries the response.
func Parse(status int, contentType string, raw []byte) (*Response, error) {
	r := &Response{HTTP: status}
	// An SSE stream carries one JSON message per data: line; a JSON body is
	// the message itself.
	payload := raw
	if strings.HasPrefix(contentType, "text/event-stream") {
		payload = nil
		for _, line := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && strings.Contains(d, `"id"`) {
				payload = []byte(strings.TrimSpace(d))
			}
		}
	}
	if err := json.Unmarshal(payload, r); err != nil {
		return nil, fmt.Errorf("HTTP %d, undecodable body %q: %w", status, raw, err)
	}
	return r, nil
}

// Task is the subset of Task fields the tests read.
type Task struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *int64                     `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result"`
	Error          json.RawMessage            `json:"error"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
}

// Get returns the task id through tasks/get.
func (c *Client) Get(t testing.TB, id string) Task {
	t.Helper()
	var tk Task
	c.Call(t, "tasks/get", map[string]any{"taskId": id}).Decode(t, &tk)
	return tk
}

// WaitFor polls tasks/get until cond holds or the deadline passes.
func (c *Client) WaitFor(t testing.TB, id string, within time.Duration, cond func(Task) bool) Task {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		tk := c.Get(t, id)
		if cond(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: condition not met within %v; last state %+v", id, within, tk)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Terminal reports whether the task has ended.
func Terminal(tk Task) bool {
	return tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled"
}
