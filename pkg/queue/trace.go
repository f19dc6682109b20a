package queue

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceParent is the W3C traceparent value of the span in ctx, "" when ctx
// carries none (tracing is off). An adapter sends it beside the message,
// never in its body: as the String message attribute "traceparent" on
// Amazon SQS, as the forwarded header Traceparent on QStash. The worker
// then links its span to the enqueuer's. (The Redis queue carries ids
// only: its worker's invocation joins the task's trace from the store.)
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// WithTraceParent returns ctx carrying the remote span context that a
// message's traceparent value tp names, or ctx itself when tp is empty or
// not a valid traceparent.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}
