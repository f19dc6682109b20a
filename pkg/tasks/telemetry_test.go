package tasks_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// attr returns the attribute k of s ("" if absent).
func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value.String()
		}
	}
	return ""
}

// A traced task with three steps (the first retried once) and an input
// round, advanced by a queue consumer: its tools/call span is the root of
// one trace that holds every worker invocation and step, each step links
// to the root, and the caller's traceparent is honoured on tasks/*. The
// metrics count the creation, the end, the steps and the claims.
func TestTelemetryOneTracePerTask(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var failed atomic.Bool
	h := newHarness(t, backends[0], tasks.Options{TracerProvider: tp, MeterProvider: mp}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "three", Description: "three steps and a question"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				for _, name := range []string{"a", "b"} {
					if _, err := tasks.Do(st, name, func(context.Context) (int, error) {
						if name == "a" && failed.CompareAndSwap(false, true) {
							return 0, errors.New("flaky")
						}
						return 1, nil
					}, tasks.Backoff(time.Millisecond, time.Millisecond)); err != nil {
						return nil, err
					}
				}
				if _, err := tasks.Elicit[struct {
					OK bool `json:"ok"`
				}](st, "confirm", "Go on?"); err != nil {
					return nil, err
				}
				if _, err := tasks.Do(st, "c", func(context.Context) (int, error) { return 3, nil }); err != nil {
					return nil, err
				}
				return text("done"), nil
			})
	})
	h.work(t, 2)
	id := h.create(t, "three", nil)
	h.c.WaitFor(t, id, 30*time.Second, func(tk mcptest.Task) bool { return tk.Status == "input_required" })
	// The caller's trace context: tasks/update's span is its child.
	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}},
		"Traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	if tk := h.wait(t, id); tk.Status != "completed" {
		t.Fatalf("task ended %+v", tk)
	}
	// The client may see the task completed a moment before the last
	// invocation ends its span.
	ended := func() bool {
		for _, s := range rec.Ended() {
			if strings.HasPrefix(s.Name(), "advance ") && attr(s, tasks.AttrTaskStatus) == "completed" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !ended(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the last invocation's span never ended")
		}
	}

	spans := rec.Ended()
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "tools/call three" {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no tools/call span among %d", len(spans))
	}
	if root.Parent().IsValid() || root.SpanKind() != trace.SpanKindServer ||
		attr(root, tasks.AttrTaskID) != id || attr(root, tasks.AttrMCPMethod) != "tools/call" || attr(root, tasks.AttrTool) != "three" {
		t.Errorf("root span: parent %v kind %v attrs %v", root.Parent(), root.SpanKind(), root.Attributes())
	}
	traceID := root.SpanContext().TraceID()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	// descends reports whether s has the root among its ancestors.
	descends := func(s sdktrace.ReadOnlySpan) bool {
		for p := s.Parent(); p.IsValid(); {
			if p.SpanID() == root.SpanContext().SpanID() {
				return true
			}
			ps := byID[p.SpanID()]
			if ps == nil {
				return false
			}
			p = ps.Parent()
		}
		return false
	}
	count := map[string]int{}
	for _, s := range spans {
		count[s.Name()]++
		if strings.HasPrefix(s.Name(), "advance ") && attr(s, "mcptasks.advance.skipped") == "" {
			count["ran"]++
		}
		switch {
		case strings.HasPrefix(s.Name(), "step "), strings.HasPrefix(s.Name(), "advance "):
			if s.SpanContext().TraceID() != traceID || !descends(s) {
				t.Errorf("%s is not in the task's trace under its tools/call", s.Name())
			}
		}
		if strings.HasPrefix(s.Name(), "step ") {
			linked := false
			for _, l := range s.Links() {
				linked = linked || l.SpanContext.SpanID() == root.SpanContext().SpanID()
			}
			if !linked {
				t.Errorf("%s has no link to the tools/call span", s.Name())
			}
		}
		if s.Name() == "tasks/update" {
			if s.SpanContext().TraceID().String() != callerTrace || attr(s, tasks.AttrTaskID) != id {
				t.Errorf("tasks/update span: trace %s attrs %v; want the caller's trace", s.SpanContext().TraceID(), s.Attributes())
			}
		}
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.String(), "accept") || strings.Contains(a.Value.String(), "done") {
				t.Errorf("span %s records a payload: %v", s.Name(), a)
			}
		}
	}
	// a fails once then succeeds: two spans; b and c one each.
	if count["step a"] != 2 || count["step b"] != 1 || count["step c"] != 1 {
		t.Errorf("step spans %v", count)
	}
	// Four invocations run steps: a fails; a, then b is left for the next;
	// b, then the question parks it; c and the end. (A delivery a moment
	// before the retry is due is skipped: an invocation without a step.)
	// Every invocation has its claim.
	if count["ran"] != 4 || count["claim"] != count["advance three"] || count["EVALSHA create"] != 1 || count["EVALSHA commit"] < 4 ||
		count["EVALSHA update"] == 0 || count["EVALSHA get"] == 0 || count["enqueue"] < 4 || count["tasks/get"] == 0 {
		t.Errorf("span counts %v", count)
	}
	for _, s := range spans {
		if s.Name() == "EVALSHA create" && s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("EVALSHA create is not the tools/call's child")
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += int64(p.Count)
				}
			}
		}
	}
	if got[tasks.MetricTasksCreated] != 1 || got[tasks.MetricTasksEnded] != 1 || got[tasks.MetricStepDuration] != 4 ||
		got[tasks.MetricStepAttempts] != 3 || got[tasks.MetricQueueLag] != 4 {
		t.Errorf("metrics %v", got)
	}
}
