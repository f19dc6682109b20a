// Package spantest checks, in tests, the spans a task's life leaves
// behind.
package spantest

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// CarriedTrace checks the spans of a task of tool whose first worker
// invocation came through a push queue carrying the enqueuer's trace
// context: the invocation ("advance <tool>") is a child of the creating
// "tools/call <tool>" span and links to the first "enqueue" span, which it
// returns (so that a caller can compare it with what the queue carried).
func CarriedTrace(t testing.TB, spans []sdktrace.ReadOnlySpan, tool string) (enqueue sdktrace.ReadOnlySpan) {
	t.Helper()
	var root, advance sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "tools/call " + tool:
			root = s
		case "enqueue":
			if enqueue == nil {
				enqueue = s
			}
		case "advance " + tool:
			advance = s
		}
	}
	if root == nil || enqueue == nil || advance == nil {
		t.Fatalf("spans: tools/call %v, enqueue %v, advance %v", root != nil, enqueue != nil, advance != nil)
	}
	if advance.Parent().SpanID() != root.SpanContext().SpanID() || advance.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("advance span parent %v, want the tools/call span %v", advance.Parent(), root.SpanContext())
	}
	linked := false
	for _, l := range advance.Links() {
		linked = linked || l.SpanContext.SpanID() == enqueue.SpanContext().SpanID()
	}
	if !linked {
		t.Errorf("advance span links %v, want the enqueue span %v", advance.Links(), enqueue.SpanContext())
	}
	return enqueue
}
