package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// TestFrozenRedis freezes redis-server (SIGSTOP) under the split shape for
// longer than any answer may take: every request made meanwhile (tasks/get,
// tasks/update, tasks/cancel, a task-creating tools/call) is answered with
// a JSON-RPC error (-32603 with a retry hint) bounded by
// MCPTASKS_STORE_TIMEOUT (default 5s), long before the HTTP client's own
// 20s limit and the 25s freeze; once Redis runs again every task completes.
func TestFrozenRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes Redis for 25s")
	}
	t.Parallel()
	rs := testredis.StartServer(t)
	env := []string{"REDIS_URL=" + rs.URL}
	api := start(t, env, "serve", "--no-worker")
	worker := start(t, env, "worker")
	c := newClient(api.addr, true)

	var ids []string
	for range 2 {
		var tk task
		c.Call(t, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 3, "stepMillis": 300}}).Decode(t, &tk)
		ids = append(ids, tk.TaskID)
	}
	// Freeze once the worker is connected and the tasks are under way.
	c.WaitFor(t, ids[0], 30*time.Second, func(tk task) bool { return tk.LastUpdatedAt != tk.CreatedAt })
	if !strings.Contains(worker.Log(), "mcptasks worker running") {
		t.Fatalf("the worker is not running:\n%s", worker.Log())
	}

	if err := rs.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = rs.Process.Signal(syscall.SIGCONT)
		}
	}
	defer thaw()

	hc := &http.Client{Timeout: 20 * time.Second}
	requests := map[string]struct {
		method string
		params map[string]any
	}{
		"tasks/get":    {"tasks/get", map[string]any{"taskId": ids[0]}},
		"tasks/update": {"tasks/update", map[string]any{"taskId": ids[0], "inputResponses": map[string]any{"k": map[string]any{"action": "accept"}}}},
		"tasks/cancel": {"tasks/cancel", map[string]any{"taskId": ids[1]}},
		"tools/call":   {"tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 1}}},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for name, rq := range requests {
		body, hdr := c.Envelope(rq.method, rq.params) // not concurrency-safe: build here
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, c.URL, bytes.NewReader(body))
			req.Header = hdr
			began := time.Now()
			resp, err := hc.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%s while Redis is frozen: no answer: %v", name, err)
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			r, err := mcptest.Parse(resp.StatusCode, resp.Header.Get("Content-Type"), raw)
			if err != nil || r.Error == nil || r.Error.Code != -32603 {
				t.Errorf("%s while Redis is frozen: HTTP %d %s, want a -32603 JSON-RPC error", name, resp.StatusCode, raw)
				return
			}
			t.Logf("%s answered in %v while Redis was frozen: %s", name, time.Since(began).Round(time.Millisecond), r.Error.Message)
		})
	}
	wg.Wait()
	if d := time.Since(frozen); d < 25*time.Second {
		time.Sleep(25*time.Second - d) // the worker's writes, too, meet a frozen Redis for a while
	}
	thaw()

	for _, id := range ids {
		tk := c.WaitFor(t, id, 90*time.Second, terminal)
		if tk.Status != "completed" && !(id == ids[1] && tk.Status == "cancelled") {
			t.Errorf("task %s after Redis came back: %+v, want completed", id, tk)
		}
	}
}
