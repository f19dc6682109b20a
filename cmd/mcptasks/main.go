// Command mcptasks runs an MCP server with durable tasks locally.
//
//	mcptasks [serve] [--addr 127.0.0.1:8080] [--no-worker]   MCP endpoint (+ workers + sweeper)
//	mcptasks worker                                          workers + sweeper only
//	mcptasks token --sub alice [--scope s] [--ttl 1h]         mint a development HS256 token
//
// Configuration comes from environment variables (see README.md); with no
// REDIS_URL an embedded in-process Redis is used.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcptasks/mcptasks/pkg/auth"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/platform"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	slog.SetDefault(log)
	if err := run(os.Args[1:], log); err != nil {
		log.Error("mcptasks failed", "err", err)
		os.Exit(1)
	}
}

func logLevel() slog.Level {
	var l slog.Level
	if v := os.Getenv("MCPTASKS_LOG_LEVEL"); v != "" {
		_ = l.UnmarshalText([]byte(v))
	}
	return l
}

func run(args []string, log *slog.Logger) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	if cmd == "token" {
		return token(args, os.Stdout)
	}
	fs := flag.NewFlagSet("mcptasks "+cmd, flag.ContinueOnError)
	defAddr := os.Getenv("MCPTASKS_ADDR")
	if defAddr == "" {
		defAddr = "127.0.0.1:8080"
	}
	addr := fs.String("addr", defAddr, "listen address (env MCPTASKS_ADDR)")
	noWorker := fs.Bool("no-worker", false, "serve the MCP endpoint only; run workers with `mcptasks worker`")
	appName := fs.String("app", envOr("MCPTASKS_APP", platform.DefaultApp), "which tools to serve: "+platform.AppNames()+" (env MCPTASKS_APP)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := bundle.FromEnv(nil)
	if err != nil {
		return err
	}
	app, err := platform.App(*appName)
	if err != nil {
		return fmt.Errorf("--app: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case "serve":
		if *noWorker && cfg.RedisURL == "" {
			return errors.New("--no-worker needs REDIS_URL: with the embedded Redis no other process can run the workers")
		}
		return serve(ctx, cfg, log, app, *addr, !*noWorker)
	case "worker":
		if cfg.RedisURL == "" {
			return errors.New("mcptasks worker needs REDIS_URL: the embedded Redis lives inside one process")
		}
		return work(ctx, cfg, log, app)
	default:
		return fmt.Errorf("unknown command %q (want serve, worker or token)", cmd)
	}
}

func serve(ctx context.Context, cfg bundle.Config, log *slog.Logger, app bundle.App, addr string, workers bool) error {
	b, err := bundle.New(ctx, cfg, log, app)
	if err != nil {
		return err
	}
	defer b.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: b.Handler, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	if workers {
		wg.Go(func() { b.RunWorkers(ctx, cfg.Workers) })
		wg.Go(func() { b.RunSweeper(ctx, cfg.SweepEvery) })
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("mcptasks listening", "url", "http://"+ln.Addr().String()+"/mcp", "workers", workers)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shut)
	wg.Wait()
	return err
}

func work(ctx context.Context, cfg bundle.Config, log *slog.Logger, app bundle.App) error {
	b, err := bundle.New(ctx, cfg, log, app)
	if err != nil {
		return err
	}
	defer b.Close()
	log.Info("mcptasks worker running", "workers", cfg.Workers)
	var wg sync.WaitGroup
	wg.Go(func() { b.RunWorkers(ctx, cfg.Workers) })
	wg.Go(func() { b.RunSweeper(ctx, cfg.SweepEvery) })
	wg.Wait()
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// token mints a development HS256 token from MCPTASKS_AUTH_HS256_SECRET,
// MCPTASKS_AUTH_ISSUER and MCPTASKS_AUTH_AUDIENCE.
func token(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("mcptasks token", flag.ContinueOnError)
	sub := fs.String("sub", "", "subject (the user) of the token; required")
	scopes := fs.String("scope", "", "space- or comma-separated scopes")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret, iss, aud := os.Getenv(auth.EnvHS256Secret), os.Getenv(auth.EnvIssuer), os.Getenv(auth.EnvAudience)
	if *sub == "" || secret == "" || iss == "" || aud == "" {
		return fmt.Errorf("mcptasks token needs --sub and %s, %s and %s", auth.EnvHS256Secret, auth.EnvIssuer, auth.EnvAudience)
	}
	tok, err := auth.MintDevToken([]byte(secret), iss, aud, *sub, *ttl, strings.Fields(strings.ReplaceAll(*scopes, ",", " ")))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, tok)
	return err
}
