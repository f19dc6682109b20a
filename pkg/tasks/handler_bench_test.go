package tasks_test

import (
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// BenchmarkLeanPathGet measures the endpoint's own cost of a tasks/get, in
// process (the store answers from memory, no network): on the lean path and
// through the go-sdk. BenchmarkTasksGetHTTP (package tasks) measures it
// over loopback HTTP on a real redis-server.
func BenchmarkLeanPathGet(b *testing.B) {
	d := newDiffServer(b, nil, tasks.Options{})
	x := fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idInput}, withExt)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"lean", d.lean[0]}, {"go-sdk", d.sdk[0]}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if a := x.send(c.h); a.status != http.StatusOK {
					b.Fatal(a)
				}
			}
		})
	}
}

// BenchmarkLeanPathGetTraced is BenchmarkLeanPathGet/lean with tracing on
// (an SDK tracer provider that samples every span and drops it): the cost
// a deployment pays per tasks/get for its traces, beside the same request
// untraced.
func BenchmarkLeanPathGetTraced(b *testing.B) {
	for _, traced := range []bool{false, true} {
		var opts tasks.Options
		name := "off"
		if traced {
			opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())))
			name = "on"
		}
		d := newDiffServer(b, nil, opts)
		x := fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idInput}, withExt)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if a := x.send(d.lean[0]); a.status != http.StatusOK {
					b.Fatal(a)
				}
			}
		})
	}
}
