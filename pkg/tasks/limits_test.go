package tasks_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// stream is an open answer of the endpoint: its status, headers and first
// message (for an SSE stream, the first data line; the stream stays open
// until close).
type stream struct {
	status int
	header http.Header
	first  string
	close  func()
}

// open sends body with hdr and reads the answer's first message (of an
// SSE stream, the data of its first event).
func open(t *testing.T, url string, hdr http.Header, body []byte) stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := stream{status: resp.StatusCode, header: resp.Header, close: func() { cancel(); resp.Body.Close() }}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		s.first = string(raw)
		s.close()
		return s
	}
	// The first event: up to the first blank line after a field.
	sc := bufio.NewScanner(resp.Body)
	for seen := false; sc.Scan(); {
		line := sc.Text()
		if line == "" && seen {
			break
		}
		seen = seen || line != ""
		if d, ok := strings.CutPrefix(line, "data: "); ok && s.first == "" {
			s.first = d
		}
	}
	t.Cleanup(s.close)
	return s
}

// refused checks that s is the CodeTooManyStreams refusal, with its retry
// hint, at HTTP status.
func (s stream) refused(t *testing.T, what string, status int) {
	t.Helper()
	var m struct {
		Error *struct {
			Code int64 `json:"code"`
			Data struct {
				RetryAfterMs int64 `json:"retryAfterMs"`
				MaxStreams   int64 `json:"maxStreams"`
			} `json:"data"`
		} `json:"error"`
	}
	if s.status != status || json.Unmarshal([]byte(s.first), &m) != nil || m.Error == nil || m.Error.Code != tasks.CodeTooManyStreams ||
		m.Error.Data.RetryAfterMs <= 0 || m.Error.Data.MaxStreams <= 0 || s.header.Get("Retry-After") == "" {
		t.Fatalf("%s: HTTP %d Retry-After %q %s, want HTTP %d with error %d and its retry hint", what, s.status, s.header.Get("Retry-After"), s.first, status, tasks.CodeTooManyStreams)
	}
}

// TestStreamBounds: task streams and held 2025-11-25 tasks/result count per
// principal (MaxStreamsPerPrincipal) and in a pool of their own
// (MaxStreams); past either bound the request is refused at once with
// CodeTooManyStreams and a retry hint (HTTP 429 on 2026-07-28, in-band on
// 2025-11-25); open streams hold no request slot (MaxRequests), so other
// requests are served; an ended stream gives its place back.
func TestStreamBounds(t *testing.T) {
	l := newLegacyServer(t, tasks.Options{})
	ts := httptest.NewServer(tasks.NewHandler(l.srv, &tasks.HandlerOptions{Logger: slog.New(slog.DiscardHandler),
		MaxRequests: 2, MaxStreams: 3, MaxStreamsPerPrincipal: 2}))
	t.Cleanup(ts.Close) // after the streams' cleanups, which close them
	as := func(principal string) *mcptest.Client {
		c := mcptest.NewClient(strings.TrimPrefix(ts.URL, "http://"), true)
		c.Header = http.Header{"X-Principal": {principal}}
		return c
	}
	listen := func(c *mcptest.Client, id string) stream {
		t.Helper()
		body, hdr := c.Envelope("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
		return open(t, c.URL, hdr, body)
	}
	result := func(principal, id string) stream {
		t.Helper()
		body, _ := json.Marshal(call(9, "tasks/result", map[string]any{"taskId": id}))
		hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {v1125}, "X-Principal": {principal}}
		return open(t, ts.URL+"/mcp", hdr, body)
	}
	alice, bob, carol := as("alice"), as("bob"), as("carol")
	mine, theirs := l.create("alice", "job", nil).TaskID, l.create("bob", "job", nil).TaskID

	first := listen(alice, mine)
	if first.status != 200 || !strings.Contains(first.first, "acknowledged") {
		t.Fatalf("alice's first listen: HTTP %d %s", first.status, first.first)
	}
	if s := result("alice", mine); s.status != 200 || !strings.HasPrefix(s.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("alice's held tasks/result: HTTP %d %s", s.status, s.first)
	}
	listen(alice, mine).refused(t, "alice's third stream", http.StatusTooManyRequests)
	result("alice", mine).refused(t, "alice's third stream, a tasks/result", http.StatusOK)

	if s := listen(bob, theirs); s.status != 200 {
		t.Fatalf("bob's listen while alice holds her bound: HTTP %d %s", s.status, s.first)
	}
	listen(carol, mine).refused(t, "a fourth stream of the server", http.StatusTooManyRequests)

	// Three streams open, and both request slots free.
	for range 4 {
		if r := carol.Call(t, "tasks/get", map[string]any{"taskId": mine}); r.HTTP == http.StatusServiceUnavailable || r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("tasks/get while streams are open: HTTP %d %+v", r.HTTP, r.Error)
		}
	}

	first.close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := listen(alice, mine)
		if s.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's stream after one of hers ended: HTTP %d %s", s.status, s.first)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
