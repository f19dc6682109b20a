// Command mcptasks runs this repository's apps locally (the example tools,
// and the conformance suite's fixtures with --app conformance) and
// scaffolds modules that serve their own tools:
//
//	mcptasks [serve] [--addr 127.0.0.1:8080] [--no-worker] [--app examples]
//	mcptasks worker                                      workers + sweeper only
//	mcptasks token --sub alice [--scope s] [--ttl 1h]    mint a development token
//	mcptasks init DIR --module PATH [--name NAME]        scaffold a module of your own tools
//
// Everything but init is pkg/platform/local's command line, the same one a
// user's own cmd/NAME/main.go gets from local.Main.
package main

import (
	"github.com/mcptasks/mcptasks/internal/cli"
	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

func main() {
	(&local.Program{Name: "mcptasks", Apps: apps.All(), Commands: []local.Command{initCommand, cli.Call, cli.Task, cli.Tools}}).Main()
}
