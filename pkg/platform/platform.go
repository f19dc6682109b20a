// Package platform holds what the serverless entry points share: the tool
// sets a deployment can serve (MCPTASKS_APP), and the one bundle per
// process that every request or invocation of that process reuses.
//
// The platform adapters live in its subpackages: vercel (the handlers the
// api/ functions call) and awslambda (the handler functions of the
// cmd/lambda binaries).
package platform

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/examples/conformance"
)

// DefaultApp is the tool set served when MCPTASKS_APP is unset.
const DefaultApp = "examples"

// Apps returns the tool sets a deployment can serve, by the name
// MCPTASKS_APP (or mcptasks --app) selects them with. Add yours here to
// serve it from every platform.
func Apps() map[string]bundle.App {
	return map[string]bundle.App{
		"examples":    examples.App(),
		"conformance": conformance.App(),
	}
}

// AppNames lists the names of Apps, sorted, comma-separated.
func AppNames() string { return strings.Join(slices.Sorted(maps.Keys(Apps())), ", ") }

// App returns the app called name (DefaultApp when empty).
func App(name string) (bundle.App, error) {
	if name == "" {
		name = DefaultApp
	}
	a, ok := Apps()[name]
	if !ok {
		return bundle.App{}, fmt.Errorf("unknown app %q (want one of %s)", name, AppNames())
	}
	return a, nil
}

// Build makes a bundle from the environment read through getenv: the
// configuration of bundle.FromEnv and the app named by MCPTASKS_APP.
func Build(ctx context.Context, getenv func(string) string, log *slog.Logger, opts ...bundle.Option) (*bundle.Bundle, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := bundle.FromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	app, err := App(getenv("MCPTASKS_APP"))
	if err != nil {
		return nil, fmt.Errorf("MCPTASKS_APP: %w", err)
	}
	return bundle.New(ctx, cfg, log, app, opts...)
}

// process is the bundle of this process. It is package-level state because
// it must be: a serverless platform calls a plain function per request or
// invocation, and the Redis client (its connections, its dial), the JWT
// verifier (its JWKS cache) and the queue client must outlive the call to
// be reused by the warm invocations that follow, and be shared by the
// concurrent requests of one Vercel Fluid instance. It only ever holds one
// bundle, so it does not grow.
var process struct {
	mu sync.Mutex
	b  *bundle.Bundle
}

// Default returns this process's bundle, building it from the environment
// (os.Getenv) on first use. A failed build is not remembered: the next call
// tries again, so a Redis that was briefly unreachable at a cold start does
// not poison the instance. The bundle is never closed: it lives as long as
// the process (Lambda entry points close it on SIGTERM).
func Default() (*bundle.Bundle, error) {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.b != nil {
		return process.b, nil
	}
	log := slog.Default()
	// Not a request's context: the bundle (and the JWKS refresh it may
	// start) outlives the request that happened to build it.
	b, err := Build(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("building the mcptasks bundle failed", "err", err)
		return nil, err
	}
	process.b = b
	return b, nil
}
