// Package otelexport gives a deployment OpenTelemetry traces and metrics
// configured by the standard OTEL_* environment variables, as the contrib
// autoexport package reads them: set it as an app's [tasks.App.Telemetry]
// (or wrap a binary's apps with [Apps]) and every process of the
// deployment exports the spans and metrics of the engine, the store and
// the endpoint.
//
// Telemetry is off unless asked for: OTEL_TRACES_EXPORTER and
// OTEL_METRICS_EXPORTER select the exporters (otlp, console, none; for
// metrics also prometheus), and unset means none here (autoexport alone
// would default to otlp). OTEL_SDK_DISABLED=true turns both off. The rest
// is the SDK's and the exporters' own configuration: OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the resource, OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf by default, or grpc) and
// OTEL_EXPORTER_OTLP_HEADERS reach the collector, OTEL_TRACES_SAMPLER
// samples, OTEL_BSP_* batch the spans, OTEL_METRIC_EXPORT_INTERVAL paces
// the metrics.
//
// This package links the OTLP exporters (gRPC and HTTP), the console and
// Prometheus ones: a few megabytes. The engine itself depends on the
// OpenTelemetry API only, so a binary that does not import this package
// pays nothing for telemetry.
package otelexport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// FromEnv builds the process's telemetry from the OTEL_* environment (see
// the package doc); nil when neither traces nor metrics are asked for. It
// has the signature of [tasks.App.Telemetry].
func FromEnv(ctx context.Context) (*tasks.Telemetry, error) {
	return fromEnv(ctx, os.Getenv)
}

func fromEnv(ctx context.Context, getenv func(string) string) (*tasks.Telemetry, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	traces, metrics := wanted(getenv("OTEL_TRACES_EXPORTER")), wanted(getenv("OTEL_METRICS_EXPORTER"))
	if !traces && !metrics {
		return nil, nil
	}
	res := resource.Default() // with OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	t := &tasks.Telemetry{}
	var flush, stop []func(context.Context) error
	if traces {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("otelexport: OTEL_TRACES_EXPORTER: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.TracerProvider = tp
		flush, stop = append(flush, tp.ForceFlush), append(stop, tp.Shutdown)
	}
	if metrics {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			for _, f := range stop {
				_ = f(ctx)
			}
			return nil, fmt.Errorf("otelexport: OTEL_METRICS_EXPORTER: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r), sdkmetric.WithResource(res))
		t.MeterProvider = mp
		flush, stop = append(flush, mp.ForceFlush), append(stop, mp.Shutdown)
	}
	t.ForceFlush = all(flush)
	t.Shutdown = all(stop)
	return t, nil
}

// wanted reports whether an exporter variable asks for an exporter.
func wanted(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && v != "none"
}

// all calls every f and joins their errors.
func all(fs []func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, f := range fs {
			errs = append(errs, f(ctx))
		}
		return errors.Join(errs...)
	}
}

// Apps returns copies of apps whose Telemetry is [FromEnv] (the apps
// themselves are left as they are): the one-line opt-in of an entry
// point, e.g.
//
//	func main() { awslambda.StartWorker(otelexport.Apps(tools.App)...) }
func Apps(apps ...*tasks.App) []*tasks.App {
	out := make([]*tasks.App, len(apps))
	for i, a := range apps {
		c := *a
		c.Telemetry = FromEnv
		out[i] = &c
	}
	return out
}
