package tasks

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// App is what a deployment serves, defined once by the tool author and
// handed to every entry point of every platform (pkg/platform/local,
// pkg/platform/vercel, pkg/platform/awslambda): its identity, its tools and
// the go-sdk server options. Every process of a deployment (the endpoint,
// the workers, the sweeper) must be given the same App, since workers run
// its task handlers.
//
// A tool package declares its App next to its tools and imports nothing of
// the wiring:
//
//	var App = &tasks.App{Name: "transcode", Version: "1.2.0", Register: Register}
type App struct {
	// Name identifies the server in serverInfo and in --app (default
	// "mcptasks").
	Name string
	// Version is the server version reported in serverInfo (default
	// "0.0.0").
	Version string
	// Title is the optional human-readable name reported in serverInfo.
	Title string
	// Register adds the app's tools ([AddTool] for task tools,
	// s.MCP().AddTool for ordinary ones), prompts and resources.
	Register func(s *Server)
	// ServerOptions customizes the go-sdk server (capabilities, completion
	// handler, instructions, ...); nil for defaults. Its Logger, when nil,
	// is set by the wiring.
	ServerOptions *mcp.ServerOptions
	// Options adjusts the tasks server beyond what the deployment's
	// configuration sets; nil for none. It is called on the options built
	// from the environment, before the server is made, so code-level
	// settings (DisableLeanPath, MaxResultBytes, ...) travel with the App.
	Options func(*Options)
	// Telemetry, when set, gives every process of the deployment its
	// trace and metric providers (Options.TracerProvider and
	// MeterProvider, the store's and the endpoint's); the wiring calls it
	// once per process and flushes and shuts the providers down with the
	// process. otelexport.FromEnv configures them from the standard OTEL_*
	// environment variables; nil means no telemetry, and a binary that
	// never sets it links no exporter.
	Telemetry func(ctx context.Context) (*Telemetry, error)
}

// Implementation returns the app's serverInfo, with the defaults applied.
func (a *App) Implementation() *mcp.Implementation {
	name, version := a.Name, a.Version
	if name == "" {
		name = "mcptasks"
	}
	if version == "" {
		version = "0.0.0"
	}
	return &mcp.Implementation{Name: name, Title: a.Title, Version: version}
}
