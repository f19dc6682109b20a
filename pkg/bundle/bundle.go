// Package bundle is the one place that turns configuration (environment
// variables) into a running mcptasks deployment: the task store, the queue,
// the tasks server with its tools, the HTTP handler, and the worker and
// sweeper loops. cmd/mcptasks, the Vercel functions under api/ and the
// Lambda entry points under cmd/lambda all build on it.
package bundle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/mcptasks/mcptasks/pkg/auth"
	"github.com/mcptasks/mcptasks/pkg/endpoint"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"
)

// Version is reported as the server version.
const Version = "0.1.0"

// Config is the deployment's configuration. [FromEnv] documents the
// variable behind each field.
type Config struct {
	RedisURL       string        // REDIS_URL; empty: embedded in-process Redis
	KeyPrefix      string        // MCPTASKS_KEY_PREFIX (default "mcptasks:")
	TaskTTL        time.Duration // MCPTASKS_TASK_TTL (default 1h)
	PollInterval   time.Duration // MCPTASKS_POLL_INTERVAL (default 1s)
	MaxDuration    time.Duration // MCPTASKS_MAX_DURATION (default 60s)
	Steps          int           // MCPTASKS_STEPS_PER_INVOCATION (default 1)
	StateSecret    string        // MCPTASKS_STATE_SECRET (default: random per process)
	AllowedOrigins []string      // MCPTASKS_ALLOWED_ORIGINS, comma-separated
	Workers        int           // MCPTASKS_WORKERS: local worker goroutines (default 4)
	SweepEvery     time.Duration // MCPTASKS_SWEEP_INTERVAL (default 5s)
	Visibility     time.Duration // MCPTASKS_QUEUE_VISIBILITY (default 2×MaxDuration)
	// Auth is the bearer-token configuration (MCPTASKS_AUTH_*, see package
	// auth); AuthEnabled is false when none of it is set, and the server
	// then runs anonymously (local development only).
	Auth        auth.Config
	AuthEnabled bool
}

// FromEnv reads the configuration from environment variables through
// getenv (os.Getenv when nil).
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		RedisURL:    getenv("REDIS_URL"),
		KeyPrefix:   getenv("MCPTASKS_KEY_PREFIX"),
		StateSecret: getenv("MCPTASKS_STATE_SECRET"),
	}
	var errs []error
	dur := func(name string, dst *time.Duration, def time.Duration) {
		*dst = def
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as 30s", name, v))
				return
			}
			*dst = d
		}
	}
	num := func(name string, dst *int, def int) {
		*dst = def
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s=%q: want a positive integer", name, v))
				return
			}
			*dst = n
		}
	}
	dur("MCPTASKS_TASK_TTL", &c.TaskTTL, time.Hour)
	dur("MCPTASKS_POLL_INTERVAL", &c.PollInterval, time.Second)
	dur("MCPTASKS_MAX_DURATION", &c.MaxDuration, 60*time.Second)
	dur("MCPTASKS_SWEEP_INTERVAL", &c.SweepEvery, 5*time.Second)
	dur("MCPTASKS_QUEUE_VISIBILITY", &c.Visibility, 2*c.MaxDuration)
	num("MCPTASKS_STEPS_PER_INVOCATION", &c.Steps, 1)
	num("MCPTASKS_WORKERS", &c.Workers, 4)
	if v := getenv("MCPTASKS_ALLOWED_ORIGINS"); v != "" {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				c.AllowedOrigins = append(c.AllowedOrigins, o)
			}
		}
	}
	ac, on, err := auth.ConfigFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	c.Auth, c.AuthEnabled = ac, on
	if c.TaskTTL > tasks.MaxTTL {
		errs = append(errs, fmt.Errorf("MCPTASKS_TASK_TTL=%v exceeds the maximum %v", c.TaskTTL, tasks.MaxTTL))
	}
	return c, errors.Join(errs...)
}

// Bundle is a wired deployment.
type Bundle struct {
	Config  Config
	Tasks   *tasks.Server
	Queue   *queue.Redis
	Handler http.Handler
	// Embedded is the in-process Redis when no REDIS_URL was given.
	Embedded *miniredis.Miniredis
	client   rueidis.Client
	log      *slog.Logger
}

// App is what a deployment serves: its identity, go-sdk server options
// (capabilities, completion handler, ...) and the tools, prompts and
// resources it registers. The same App must be given to every process of a
// deployment (endpoint and workers), since workers run its task handlers.
type App struct {
	// Name is the server name reported in serverInfo (default "mcptasks").
	Name string
	// ServerOptions customizes the go-sdk server; nil for defaults.
	ServerOptions *mcp.ServerOptions
	// Register adds tools (tasks.AddTool, or s.MCP().AddTool), prompts and
	// resources.
	Register func(s *tasks.Server)
}

// New connects to Redis (or starts the embedded one) and builds the tasks
// server with app's tools, and the HTTP handler.
func New(ctx context.Context, cfg Config, log *slog.Logger, app App) (*Bundle, error) {
	if log == nil {
		log = slog.Default()
	}
	b := &Bundle{Config: cfg, log: log}
	opt := rueidis.ClientOption{
		DisableCache:     true, // task state must never be served stale
		ConnWriteTimeout: 10 * time.Second,
	}
	if cfg.RedisURL == "" {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true) // keys expire on the wall clock, like a real server
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("starting the embedded Redis: %w", err)
		}
		b.Embedded = m
		opt.InitAddress = []string{m.Addr()}
		opt.ForceSingleClient = true
		log.Info("no REDIS_URL set: using an embedded in-process Redis; tasks do not survive a restart")
	} else {
		parsed, err := rueidis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		parsed.DisableCache = true
		parsed.ConnWriteTimeout = opt.ConnWriteTimeout
		opt = parsed
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("connecting to Redis: %w", err)
	}
	b.client = client
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = "mcptasks:"
	}
	store := redisstore.New(client, &redisstore.Options{Prefix: prefix, EnqueueGrace: cfg.MaxDuration / 2})
	b.Queue = queue.NewRedis(client, &queue.RedisOptions{Key: prefix + "queue", Visibility: cfg.Visibility, Logger: log})
	name := app.Name
	if name == "" {
		name = "mcptasks"
	}
	var so mcp.ServerOptions
	if app.ServerOptions != nil {
		so = *app.ServerOptions
	}
	if so.Logger == nil {
		// The go-sdk logs every stateless request at INFO; keep its warnings.
		so.Logger = slog.New(minLevel{log.Handler(), slog.LevelWarn})
	}
	wrap := tasks.CheckRoutingHeaders
	extra := map[string]http.Handler{}
	if cfg.AuthEnabled {
		v, err := auth.New(ctx, cfg.Auth, log)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("auth: %w", err)
		}
		wrap = func(h http.Handler) http.Handler { return v.Middleware(tasks.CheckRoutingHeaders(h)) }
		for _, p := range v.MetadataPaths() {
			extra["GET "+p] = v.MetadataHandler()
		}
	} else {
		log.Warn("authentication is off (no MCPTASKS_AUTH_* set): every caller shares one principal and task ids are the only capability; do not expose this server")
	}
	b.Tasks = tasks.New(&mcp.Implementation{Name: name, Version: Version}, &so,
		store, b.Queue, &tasks.Options{
			Logger:             log,
			TTL:                cfg.TaskTTL,
			PollInterval:       cfg.PollInterval,
			MaxDuration:        cfg.MaxDuration,
			StepsPerInvocation: cfg.Steps,
			StateSecret:        []byte(cfg.StateSecret),
			Anonymous:          !cfg.AuthEnabled,
		})
	if app.Register != nil {
		app.Register(b.Tasks)
	}
	b.Handler = endpoint.New(b.Tasks.MCP(), &endpoint.Options{
		Logger:         log,
		AllowedOrigins: cfg.AllowedOrigins,
		Wrap:           wrap,
		Extra:          extra,
	})
	return b, nil
}

// RunWorkers consumes the queue with n workers until ctx ends, advancing
// one task per message.
func (b *Bundle) RunWorkers(ctx context.Context, n int) {
	b.Queue.Consume(ctx, n, func(ctx context.Context, id string) error {
		res, err := b.Tasks.Advance(ctx, id)
		if err != nil {
			return err
		}
		b.log.Debug("advanced task", "task", id, "status", res.Status, "steps", res.Steps, "skipped", res.Reason)
		return nil
	})
}

// RunSweeper sweeps every interval until ctx ends.
func (b *Bundle) RunSweeper(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			res, err := b.Tasks.Sweep(ctx, 0)
			if err != nil && ctx.Err() == nil {
				b.log.Warn("sweep failed", "err", err)
			} else if res.Enqueued > 0 {
				b.log.Info("sweeper re-enqueued tasks", "count", res.Enqueued)
			}
		}
	}
}

// Close releases the Redis client and the embedded Redis.
func (b *Bundle) Close() {
	if b.client != nil {
		b.client.Close()
	}
	if b.Embedded != nil {
		b.Embedded.Close()
	}
}

// minLevel drops records below a level.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(a), h.min}
}

func (h minLevel) WithGroup(n string) slog.Handler { return minLevel{h.Handler.WithGroup(n), h.min} }
