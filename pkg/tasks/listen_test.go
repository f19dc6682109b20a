package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
)

// rawListen sends subscriptions/listen with notifications and returns the
// HTTP status and the data lines of the answer (its body, for JSON).
func rawListen(t *testing.T, c *mcptest.Client, notifications map[string]any) (int, []string) {
	t.Helper()
	body, hdr := c.Envelope("subscriptions/listen", map[string]any{"notifications": notifications})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", c.URL, bytes.NewReader(body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, []string{string(raw)}
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			out = append(out, d)
		}
	}
	return resp.StatusCode, out
}

// A listen without taskIds is the go-sdk's, as before: its acknowledgement
// and result; taskIds that are not an array of strings get -32602; a task
// that moves on while nobody listens is sent as it is now, once; a journal
// write that changes nothing a client sees sends nothing.
func TestListenEdges(t *testing.T) {
	h := newHarness(t, "embedded", benchOptions(), registerNoop(2))

	status, msgs := rawListen(t, h.c, map[string]any{"toolsListChanged": true})
	if status != 200 || len(msgs) != 2 || !strings.Contains(msgs[0], `"notifications":{}`) || strings.Contains(msgs[0], "taskIds") ||
		!strings.Contains(msgs[1], `"resultType":"complete"`) {
		t.Fatalf("listen without taskIds: HTTP %d %q", status, msgs)
	}

	status, msgs = rawListen(t, h.c, map[string]any{"taskIds": "abc"})
	if status != 400 || !strings.Contains(msgs[0], `"code":-32602`) {
		t.Fatalf("taskIds not an array: HTTP %d %q", status, msgs)
	}

	id := h.create(t, "noop", map[string]any{})
	for range 3 { // both steps and the end
		if _, err := h.srv.Advance(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	_, msgs = rawListen(t, h.c, map[string]any{"taskIds": []string{id, id}})
	if len(msgs) != 3 || !strings.Contains(msgs[0], `"taskIds":["`+id+`"]`) || !strings.Contains(msgs[1], `"status":"completed"`) {
		t.Fatalf("listen on a finished task: %q", msgs)
	}

	// Streamed: the steps in between change nothing a client sees.
	id = h.create(t, "noop", map[string]any{})
	events, stop := benchListen(t, h.c, id)
	defer stop()
	for _, want := range []string{"ack", "working"} {
		if got := <-events; got != want {
			t.Fatalf("stream: %s, want %s", got, want)
		}
	}
	for range 3 {
		if _, err := h.srv.Advance(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"completed", "result"} {
		if got := <-events; got != want {
			t.Fatalf("stream: %s, want %s", got, want)
		}
	}
	var note struct {
		Params struct {
			Result json.RawMessage `json:"result"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(msgs[1]), &note); err != nil || !bytes.Contains(note.Params.Result, []byte(`"ok"`)) {
		t.Fatalf("completed without its result inline: %s", msgs[1])
	}
}
