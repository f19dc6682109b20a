// Command mcptasks runs this repository's apps locally (the example tools,
// and the conformance suite's fixtures with --app conformance), calls any
// SEP-2663 server, and scaffolds modules that serve their own tools:
//
//	mcptasks [serve] [--addr 127.0.0.1:8080] [--no-worker] [--app examples] [--dashboard]
//	mcptasks worker                                      workers + sweeper only
//	mcptasks token --sub alice [--scope s] [--ttl 1h]    mint a development token
//	mcptasks call TOOL key=value ...                     call a tool, following its task
//	mcptasks task get|watch|cancel|answer TASKID         one task
//	mcptasks tools                                       list the tools
//	mcptasks inspect TASKID [--json]                     a task's timeline, from REDIS_URL or DATABASE_URL
//	mcptasks tasks [--status S] [--tool T] [--owner P]   every task, newest first, from REDIS_URL or DATABASE_URL
//	mcptasks dashboard [--addr 127.0.0.1:8090]           the tasks dashboard (web), from REDIS_URL or DATABASE_URL
//	mcptasks migrate                                     create or upgrade the Postgres schema (DATABASE_URL)
//	mcptasks init DIR --module PATH [--name NAME]        scaffold a module of your own tools
//
// Every process exports OpenTelemetry traces and metrics when the OTEL_*
// environment asks for them (pkg/otelexport).
//
// serve --dashboard serves the dashboard (cmd/mcptasks/internal/dashboard)
// of the local server's own store beside its endpoint: the embedded Redis,
// or the Redis or PostgreSQL the environment names.
//
// serve, worker and token are pkg/platform/local's command line, the same
// one a user's own cmd/NAME/main.go gets from local.Main.
package main

import (
	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/cli"
	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/dashboard"
	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/otelexport"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

func main() {
	(&local.Program{Name: "mcptasks", Apps: otelexport.Apps(apps.All()...), Commands: []local.Command{initCommand, migrateCommand, cli.Call, cli.Task, cli.Tools, cli.Inspect, cli.Tasks, dashboardCommand}, Dashboard: dashboard.Start}).Main()
}
