// Package platform holds what the platform adapters share: the one bundle
// per process that every request or invocation of a serverless process
// reuses, built lazily from the environment for the app (or apps) it was
// given.
//
// The adapters live in its subpackages, each taking the user's
// [tasks.App]: local (the CLI and net/http server of a user's
// cmd/NAME/main.go), vercel (the handlers of api/*/index.go) and awslambda
// (the mains of cmd/lambda/*). None of them imports a tool package.
package platform

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// Process builds a process's bundle on first use and keeps it. It exists
// because a serverless platform calls a plain function per request or
// invocation, while the Redis client (its connections, its dial), the JWT
// verifier (its JWKS cache) and the queue client must outlive the call, to
// be reused by the warm invocations that follow and shared by the
// concurrent requests of one Vercel Fluid instance.
type Process struct {
	apps   []*tasks.App
	opts   []bundle.Option
	getenv func(string) string
	logger func(bundle.Config) *slog.Logger

	mu      sync.Mutex
	b       *bundle.Bundle
	lastErr error     // the last failed build, answered again until retryAt
	retryAt time.Time // so that a broken Redis is dialled once a second, not once per waiting request
	// pushQueue names the queue this platform's worker is fed by (qstash on
	// Vercel, sqs on Lambda): with another one configured the process warns
	// that only workers elsewhere will run tasks.
	pushQueue string
}

// failedBuildBackoff is how long a failed build is answered without being
// tried again: concurrent requests of one instance wait for one dial, not
// one each.
const failedBuildBackoff = time.Second

// ExpectQueue makes the process warn, once built, when MCPTASKS_QUEUE is
// not name (the queue that feeds the platform's worker function): with
// MCPTASKS_QUEUE=redis there, tasks run only if `worker` processes consume
// the Redis queue elsewhere.
func (p *Process) ExpectQueue(name string) *Process {
	p.pushQueue = name
	return p
}

// NewProcess returns the lazily built bundle of apps (MCPTASKS_APP selects
// one when there are several), built with opts from the environment read
// through getenv (os.Getenv when nil). logger makes the bundle's logger
// from the configuration (nil: a text logger on stderr at
// MCPTASKS_LOG_LEVEL).
func NewProcess(apps []*tasks.App, getenv func(string) string, logger func(bundle.Config) *slog.Logger, opts ...bundle.Option) *Process {
	if getenv == nil {
		getenv = os.Getenv
	}
	if logger == nil {
		logger = TextLogger
	}
	return &Process{apps: apps, opts: opts, getenv: getenv, logger: logger}
}

// Bundle returns the process's bundle, building it on first use. A failed
// build is answered again for a second (concurrent requests wait for one
// dial, not one each), then tried anew, so a Redis that was briefly
// unreachable at a cold start does not poison the instance. The bundle is
// never closed by Process: it lives as long as the process.
func (p *Process) Bundle() (*bundle.Bundle, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.b != nil {
		return p.b, nil
	}
	if p.lastErr != nil && time.Now().Before(p.retryAt) {
		return nil, p.lastErr
	}
	b, err := p.build()
	if err != nil {
		p.lastErr, p.retryAt = err, time.Now().Add(failedBuildBackoff)
		return nil, err
	}
	p.built(b)
	return b, nil
}

// Prepare starts building the bundle in the background, for a platform
// that hands the process its first request only after the process asks
// for it (AWS Lambda's runtime API): the Redis dial then overlaps with
// that exchange instead of preceding it. Bundle waits for this build. A
// failed one is not remembered: the next Bundle builds again at once (the
// background build may have failed only because the sandbox was frozen
// while it dialled). The builder logs why a build failed.
func (p *Process) Prepare() {
	p.mu.Lock() // held until the build ends, so Bundle waits for it
	go func() {
		defer p.mu.Unlock()
		if p.b != nil {
			return
		}
		if b, err := p.build(); err == nil {
			p.built(b)
		}
	}()
}

// Built returns the bundle if it has been built, waiting for a build under
// way, or nil.
func (p *Process) Built() *bundle.Bundle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b
}

// built keeps b, the bundle just built.
func (p *Process) built(b *bundle.Bundle) {
	p.b, p.lastErr = b, nil
	if p.pushQueue != "" && b.Config.Queue != p.pushQueue {
		b.Log().Warn("MCPTASKS_QUEUE is not this platform's push queue: tasks run only if worker processes consume it elsewhere",
			"queue", b.Config.Queue, "want", p.pushQueue)
	}
}

// build makes the bundle from the environment, logging why it failed.
func (p *Process) build() (*bundle.Bundle, error) {
	cfg, err := bundle.FromEnv(p.getenv)
	if err != nil {
		err = fmt.Errorf("configuration: %w", err)
		TextLogger(cfg).Error("building the mcptasks bundle failed", "err", err)
		return nil, err
	}
	log := p.logger(cfg)
	app, err := bundle.Select(p.apps, cfg.App)
	if err != nil {
		err = fmt.Errorf("MCPTASKS_APP: %w", err)
		log.Error("building the mcptasks bundle failed", "err", err)
		return nil, err
	}
	// Not a request's context: the bundle outlives the request that
	// happened to build it.
	b, err := bundle.New(context.Background(), cfg, log, app, p.opts...)
	if err != nil {
		log.Error("building the mcptasks bundle failed", "err", err)
		return nil, err
	}
	return b, nil
}

// TextLogger is a text logger on stderr at the configured level.
func TextLogger(cfg bundle.Config) *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

// JSONLogger is a JSON logger on stderr at the configured level (the
// format AWS Lambda's JSON log format expects).
func JSONLogger(cfg bundle.Config) *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
}
