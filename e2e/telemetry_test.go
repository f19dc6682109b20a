package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// exportedSpan is one span as the console exporter (OTEL_TRACES_EXPORTER=
// console, the OpenTelemetry stdout exporter) prints it: one JSON object
// a line on the process's stdout.
type exportedSpan struct {
	Name        string
	SpanContext spanRef
	Parent      spanRef
	Links       []struct{ SpanContext spanRef }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
	// process is the file the span was read from.
	process string
}

type spanRef struct{ TraceID, SpanID string }

func (r spanRef) valid() bool { return r.SpanID != "" && strings.Trim(r.SpanID, "0") != "" }

func (s *exportedSpan) attr(k string) string {
	for _, a := range s.Attributes {
		if a.Key == k {
			b, _ := json.Marshal(a.Value.Value)
			return strings.Trim(string(b), `"`)
		}
	}
	return ""
}

// readSpans reads the spans a process exported to path.
func readSpans(t *testing.T, path string) []*exportedSpan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var spans []*exportedSpan
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s exportedSpan
		if json.Unmarshal(sc.Bytes(), &s) != nil || s.Name == "" {
			continue // not a span
		}
		s.process = filepath.Base(path)
		spans = append(spans, &s)
	}
	return spans
}

// stopGracefully interrupts p and waits for it to exit (a local process
// flushes its telemetry on the way out).
func stopGracefully(t *testing.T, p *proc) {
	t.Helper()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("process did not stop within 20s")
	}
}

// TestOneTracePerTaskAcrossProcesses runs the split shape (the endpoint and
// two worker processes, one after the other, on a real redis-server), each
// exporting its spans with the console exporter to a file of its own; the
// test assembles them. A stoppable_batch of three parts parks in
// input_required (a pause with its offer outstanding) after part 1 on the
// first worker; the client answers the offer through the endpoint, and the
// second worker runs parts 2 and 3 and the summary. The task is one trace:
// the endpoint's tools/call span is its root, every worker invocation is
// its child across the process boundary and the queue, and every step span
// links to it: the trace context travels with the task in the store, so
// no queue message needs to carry it. The tasks/update is a span of the
// endpoint in the client's own trace.
func TestOneTracePerTaskAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	env := []string{
		"REDIS_URL=" + testredis.Start(t),
		"OTEL_TRACES_EXPORTER=console",
		"OTEL_BSP_SCHEDULE_DELAY=50",
		"MCPTASKS_SWEEP_INTERVAL=500ms",
		"MCPTASKS_WORKERS=1",
	}
	out := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	api := startTo(t, binPath, out("endpoint"), append(env, "OTEL_SERVICE_NAME=endpoint"), "serve", "--no-worker")
	w1 := startTo(t, binPath, out("worker1"), append(env, "OTEL_SERVICE_NAME=worker1"), "worker")
	c := newClient(api.addr, true)

	var created task
	c.Call(t, "tools/call", map[string]any{"name": "stoppable_batch",
		"arguments": map[string]any{"parts": 3, "partMillis": 10, "pauseMillis": 5000}}).Decode(t, &created)
	id := created.TaskID
	if id == "" {
		t.Fatal("no task created")
	}
	tk := c.WaitFor(t, id, 30*time.Second, func(tk task) bool { return tk.Status == "input_required" || terminal(tk) })
	if tk.Status != "input_required" || tk.InputRequests["stop"] == nil {
		t.Fatalf("task %+v, want input_required with the stop offer", tk)
	}
	stopGracefully(t, w1)
	w2 := startTo(t, binPath, out("worker2"), append(env, "OTEL_SERVICE_NAME=worker2"), "worker")
	if r := c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"stop": map[string]any{"action": "decline"}}}); r.Error != nil {
		t.Fatalf("tasks/update: %+v", r.Error)
	}
	done := c.WaitFor(t, id, 60*time.Second, terminal)
	if done.Status != "completed" || !strings.Contains(string(done.Result), "processed 3 of 3 parts") {
		t.Fatalf("task ended %+v %s", done, done.Result)
	}
	stopGracefully(t, w2)
	stopGracefully(t, api)

	var spans []*exportedSpan
	for _, p := range []string{"endpoint", "worker1", "worker2"} {
		spans = append(spans, readSpans(t, filepath.Join(dir, p))...)
	}
	var root *exportedSpan
	byID := map[string]*exportedSpan{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID] = s
		if s.Name == "tools/call stoppable_batch" && s.attr("mcptasks.task.id") == id {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no tools/call span for task %s among %d spans", id, len(spans))
	}
	if root.Parent.valid() || root.process != "endpoint" {
		t.Fatalf("tools/call span has a parent %+v or comes from %s", root.Parent, root.process)
	}
	under := func(s *exportedSpan) bool {
		for p := s.Parent; p.valid(); {
			if p.SpanID == root.SpanContext.SpanID {
				return true
			}
			ps := byID[p.SpanID]
			if ps == nil {
				return false
			}
			p = ps.Parent
		}
		return false
	}
	steps := map[string]string{} // step -> process
	advances := map[string]int{}
	enqueuers := map[string]int{} // what the message of each invocation was enqueued under

	for _, s := range spans {
		if s.attr("mcptasks.task.id") != id {
			continue
		}
		switch {
		case strings.HasPrefix(s.Name, "advance "):
			advances[s.process]++
			// An invocation that found nothing to do (a duplicate
			// delivery) may not learn the task's trace; one that ran a
			// step always does.
			ran := s.attr("mcptasks.advance.skipped") == ""
			if ran && (s.SpanContext.TraceID != root.SpanContext.TraceID || s.Parent.SpanID != root.SpanContext.SpanID) {
				t.Errorf("%s in %s: trace %s parent %s; want the child of the tools/call span %s/%s",
					s.Name, s.process, s.SpanContext.TraceID, s.Parent.SpanID, root.SpanContext.TraceID, root.SpanContext.SpanID)
			}
			// A message that carried its enqueue's context (a push
			// queue's, or the Redis queue's when the store does not
			// dispatch) is linked; the store that dispatches (this shape)
			// enqueues inside its own scripts, and the invocation joins the
			// task's trace from the store alone.
			for _, l := range s.Links {
				if e := byID[l.SpanContext.SpanID]; e != nil && e.Name == "enqueue" {
					enqueuers[e.process]++
				}
			}
		case strings.HasPrefix(s.Name, "step "):
			steps[strings.TrimPrefix(s.Name, "step ")] = s.process
			linked := false
			for _, l := range s.Links {
				linked = linked || l.SpanContext.SpanID == root.SpanContext.SpanID
			}
			if s.SpanContext.TraceID != root.SpanContext.TraceID || !under(s) || !linked {
				t.Errorf("%s in %s is not in the task's trace under and linked to its tools/call", s.Name, s.process)
			}
		case s.Name == "tasks/update":
			if s.process != "endpoint" || s.SpanContext.TraceID == root.SpanContext.TraceID {
				t.Errorf("tasks/update span in %s, trace %s: want the endpoint's, in the client's own trace", s.process, s.SpanContext.TraceID)
			}
		}
	}
	want := map[string]string{"part-1": "worker1", "part-2": "worker2", "part-3": "worker2", "summary": "worker2"}
	for step, p := range want {
		if steps[step] != p {
			t.Errorf("step %s exported by %q, want %s (all: %v)", step, steps[step], p, steps)
		}
	}
	if advances["worker1"] == 0 || advances["worker2"] == 0 {
		t.Errorf("worker invocations by process: %v", advances)
	}
	t.Logf("%d spans; the task's trace %s: steps %v, invocations %v, enqueued under %v", len(spans), root.SpanContext.TraceID, steps, advances, enqueuers)
}
