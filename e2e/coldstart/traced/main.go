// Command traced is the MCP bootstrap (cmd/lambda/mcp) with
// OpenTelemetry's exporters linked (pkg/otelexport), so that e2e/coldstart
// can measure a cold start with tracing on: the harness starts it with
// OTEL_TRACES_EXPORTER=otlp. This repository's functions do not link the
// exporters (they triple a bootstrap's size; see README, "Which binaries
// can export").
package main

import (
	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/otelexport"
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
)

func main() { awslambda.StartMCP(otelexport.Apps(apps.All()...)...) }
