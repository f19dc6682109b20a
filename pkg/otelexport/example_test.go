package otelexport_test

import (
	"github.com/mcptasks/mcptasks/pkg/otelexport"
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// A Lambda worker whose invocations and steps export traces when the
// function's environment sets OTEL_TRACES_EXPORTER (and metrics with
// OTEL_METRICS_EXPORTER): the app is wrapped at the entry point, so the
// tool package imports nothing of the exporters.
func ExampleApps() {
	app := &tasks.App{Name: "reports", Register: func(s *tasks.Server) { /* tasks.AddTool(s, ...) */ }}
	_ = func() { awslambda.StartWorker(otelexport.Apps(app)...) } // in func main
}

// The same, set on the app itself: every entry point that serves it exports.
func ExampleFromEnv() {
	app := &tasks.App{Name: "reports", Telemetry: otelexport.FromEnv}
	_ = app
}
