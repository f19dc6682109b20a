package tasks

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is where a deployment sends its traces and metrics: the
// OpenTelemetry providers the engine, the store and the endpoint use, and
// how to flush them. The engine depends on the OpenTelemetry API only; a
// deployment gets providers configured by the OTEL_* environment variables
// from package otelexport (see [App.Telemetry]).
type Telemetry struct {
	// TracerProvider makes the spans; nil means no tracing.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments; nil means no metrics.
	MeterProvider metric.MeterProvider
	// ForceFlush exports what is buffered: a serverless platform calls it
	// before an invocation returns, since the process may be frozen right
	// after. Nil when there is nothing to flush.
	ForceFlush func(context.Context) error
	// Shutdown flushes and stops the exporters when the process ends; nil
	// when there is nothing to stop.
	Shutdown func(context.Context) error
}

// durationBounds are the histogram buckets of durations, in seconds: from
// a millisecond to fifteen minutes (a Lambda's limit).
var durationBounds = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900}

// telemetry holds the server's tracer and instruments. A nil tracer means
// tracing is off, nil instruments that metrics are: every hook checks
// before it builds anything, so an engine without providers does no
// tracing work at all on its hot paths.
type telemetry struct {
	tracer trace.Tracer

	created, ended, recoveries, storeErrors metric.Int64Counter
	stepDuration, queueLag                  metric.Float64Histogram
	stepAttempts                            metric.Int64Histogram
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	var t telemetry
	if tp != nil {
		t.tracer = tp.Tracer(ScopeName)
	}
	if mp == nil {
		return t
	}
	m := mp.Meter(ScopeName)
	// Instrument creation fails only on an invalid name; the names are
	// constants, so the errors are dropped (a nil instrument is off).
	t.created, _ = m.Int64Counter(MetricTasksCreated, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks durably created."))
	t.ended, _ = m.Int64Counter(MetricTasksEnded, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks that reached a terminal status, by status."))
	t.recoveries, _ = m.Int64Counter(MetricSweepRecoveries, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks the sweeper handed to the queue again (lost enqueue, dead worker, due timer)."))
	t.storeErrors, _ = m.Int64Counter(MetricStoreErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Task store calls that failed (unreachable or erroring store), by operation."))
	t.stepDuration, _ = m.Float64Histogram(MetricStepDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of one attempt of a Do step, by outcome."), metric.WithExplicitBucketBoundaries(durationBounds...))
	t.queueLag, _ = m.Float64Histogram(MetricQueueLag, metric.WithUnit("s"),
		metric.WithDescription("Time from a task being ready to run (enqueued, woken, resumed) to a worker claiming it."), metric.WithExplicitBucketBoundaries(durationBounds...))
	t.stepAttempts, _ = m.Int64Histogram(MetricStepAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts a Do step took, recorded when it succeeds or fails for good."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 10, 20))
	return t
}

// tracing reports whether the server makes spans (Options.TracerProvider
// is set); the endpoint extracts an incoming traceparent only then.
func (s *Server) tracing() bool { return s.tel.tracer != nil }

// requestSpan starts the span of an MCP request (tools/call creating a
// task, tasks/get, tasks/update, tasks/cancel), or returns nil when
// tracing is off. It never records arguments, answers or results.
func (s *Server) requestSpan(ctx context.Context, method, tool, id string) (context.Context, trace.Span) {
	if s.tel.tracer == nil {
		return ctx, nil
	}
	name := method
	attrs := make([]attribute.KeyValue, 0, 3)
	attrs = append(attrs, AttrMCPMethod.String(method))
	if tool != "" {
		name += " " + tool
		attrs = append(attrs, AttrTool.String(tool))
	}
	if id != "" {
		attrs = append(attrs, AttrTaskID.String(id))
	}
	return s.tel.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endSpan ends span (nil: tracing off), marking it failed with err's
// JSON-RPC code, if any.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			span.SetAttributes(AttrErrorType.String(strconv.FormatInt(we.Code, 10)))
		} else {
			span.SetAttributes(AttrErrorType.String("_OTHER"))
		}
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// storeFailed counts a failed store call (metrics on).
func (s *Server) storeFailed(ctx context.Context, op string) {
	if s.tel.storeErrors != nil {
		s.tel.storeErrors.Add(ctx, 1, metric.WithAttributes(AttrStoreOp.String(op)))
	}
}

// countEnded counts a task that reached status (metrics on).
func (s *Server) countEnded(ctx context.Context, tool string, status driver.Status) {
	if s.tel.ended == nil {
		return
	}
	if tool == "" { // tasks/cancel ends a task without reading it
		s.tel.ended.Add(ctx, 1, metric.WithAttributes(AttrTaskStatus.String(string(status))))
		return
	}
	s.tel.ended.Add(ctx, 1, metric.WithAttributes(AttrTool.String(tool), AttrTaskStatus.String(string(status))))
}

// traceParent is the W3C traceparent of the span in ctx ("" if none).
func traceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// spanContextOf decodes a stored traceparent (invalid if tp is not one).
func spanContextOf(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	return trace.SpanContextFromContext(ctx)
}

// advanceSpan starts the span of a worker invocation of task c, begun at
// start (before the claim): a child of the task's creating tools/call
// (its stored trace context), so that one trace holds the whole task,
// with a link to the context the queue message carried (the enqueuer)
// when that is another span. Without a stored context the span is a
// child of ctx's.
func (s *Server) advanceSpan(ctx context.Context, id string, c *driver.Claim, start time.Time, claimErr error) (context.Context, trace.Span) {
	if s.tel.tracer == nil {
		return ctx, nil
	}
	claimed := time.Now()
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start),
		trace.WithAttributes(AttrTaskID.String(id))}
	parent := ctx
	if c != nil && c.Task != nil {
		opts = append(opts, trace.WithAttributes(AttrTool.String(c.Task.Tool)))
		if root := spanContextOf(c.Task.TraceParent); root.IsValid() {
			parent = trace.ContextWithRemoteSpanContext(ctx, root)
			if msg := trace.SpanContextFromContext(ctx); msg.IsValid() && !msg.Equal(root) {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: msg,
					Attributes: []attribute.KeyValue{attribute.String("mcptasks.link", "enqueued_by")}}))
			}
		}
	}
	name := "advance"
	if c != nil && c.Task != nil && c.Task.Tool != "" {
		name += " " + c.Task.Tool
	}
	ctx, span := s.tel.tracer.Start(parent, name, opts...)
	// The claim came first (it tells which trace the invocation joins):
	// its span is drawn after the fact, from start to claimed.
	_, cs := s.tel.tracer.Start(ctx, "claim", trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient))
	if c != nil {
		cs.SetAttributes(attribute.Int64("mcptasks.claim.generation", c.Gen), attribute.Int("mcptasks.claim.attempts", c.Attempts))
	}
	if claimErr != nil {
		cs.SetStatus(codes.Error, claimErr.Error())
	}
	cs.End(trace.WithTimestamp(claimed))
	return ctx, span
}

// endAdvance ends a worker invocation's span with what it did.
func endAdvance(span trace.Span, res AdvanceResult, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrTaskStatus.String(string(res.Status)), attribute.Int("mcptasks.advance.steps", res.Steps))
	if res.Skipped {
		span.SetAttributes(attribute.String("mcptasks.advance.skipped", res.Reason))
	}
	endSpan(span, err)
}

// stepSpan starts the span of one attempt of the Do step name, with a
// link to the task's creating tools/call, and returns the context the
// step runs in (the run's, with the span).
func (r *run) stepSpan(name string, attempt int) (context.Context, trace.Span) {
	tr := r.w.s.tel.tracer
	if tr == nil {
		return r.ctx, nil
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(AttrStep.String(name), AttrStepAttempt.Int(attempt), AttrTaskID.String(r.taskID))}
	if root := spanContextOf(r.claim.Task.TraceParent); root.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: root,
			Attributes: []attribute.KeyValue{attribute.String("mcptasks.link", "task")}}))
	}
	return tr.Start(r.ctx, "step "+name, opts...)
}

// endStep ends a step attempt's span and records its metrics. outcome is
// ok, error or retry.
func (r *run) endStep(span trace.Span, outcome string, took time.Duration, attempt int, err error) {
	s := r.w.s
	if span != nil {
		span.SetAttributes(AttrStepOutcome.String(outcome))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	if s.tel.stepDuration != nil {
		s.tel.stepDuration.Record(r.ctx, took.Seconds(), metric.WithAttributes(AttrTool.String(r.tool), AttrStepOutcome.String(outcome)))
		if outcome != "retry" {
			s.tel.stepAttempts.Record(r.ctx, int64(attempt), metric.WithAttributes(AttrTool.String(r.tool), AttrStepOutcome.String(outcome)))
		}
	}
}

// recordLag records the queue lag of a claim made at now: from when the
// task was last made ready (its last write, or its wake time) to now.
func (s *Server) recordLag(ctx context.Context, c *driver.Claim, now time.Time) {
	if s.tel.queueLag == nil || c == nil || c.Task == nil || c.Gen == 0 {
		return
	}
	ready := c.Task.UpdatedAt
	if c.Task.WakeAt.After(ready) {
		ready = c.Task.WakeAt
	}
	if ready.IsZero() || now.Before(ready) {
		return
	}
	s.tel.queueLag.Record(ctx, now.Sub(ready).Seconds(), metric.WithAttributes(AttrTool.String(c.Task.Tool)))
}

// enqueueSpan starts the span of handing task id to the queue.
func (s *Server) enqueueSpan(ctx context.Context, id string, at time.Time) (context.Context, trace.Span) {
	if s.tel.tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{AttrTaskID.String(id), attribute.String("messaging.operation.type", "send")}
	if !at.IsZero() {
		attrs = append(attrs, attribute.String("mcptasks.queue.not_before", at.UTC().Format(time.RFC3339Nano)))
	}
	return s.tel.tracer.Start(ctx, "enqueue", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
}

// sweepSpan starts the span of one Sweep begun at start, if it found
// work (traced).
func (s *Server) sweepSpan(ctx context.Context, start time.Time, found bool) (context.Context, trace.Span) {
	if s.tel.tracer == nil || !found {
		return ctx, nil
	}
	return s.tel.tracer.Start(ctx, "sweep", trace.WithTimestamp(start))
}

// endSweep ends a Sweep's span and counts the tasks it recovered.
func (s *Server) endSweep(ctx context.Context, span trace.Span, res SweepResult, err error) {
	if s.tel.recoveries != nil && res.Enqueued > 0 {
		s.tel.recoveries.Add(ctx, int64(res.Enqueued))
	}
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Int("mcptasks.sweep.examined", res.Examined), attribute.Int("mcptasks.sweep.enqueued", res.Enqueued),
		attribute.Int("mcptasks.sweep.forgotten", res.Forgotten), attribute.Int("mcptasks.sweep.rescheduled", res.Rescheduled))
	endSpan(span, err)
}
