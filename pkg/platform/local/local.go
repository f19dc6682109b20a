// Package local serves a [tasks.App] from a plain process: the MCP endpoint
// on net/http, worker goroutines consuming the queue, and the sweeper, on
// a real Redis (REDIS_URL), on PostgreSQL (DATABASE_URL) or, by default,
// an embedded in-process Redis, so that a newcomer needs nothing installed
// but Go.
//
// A user's cmd/NAME/main.go is one line:
//
//	func main() { local.Main(tools.App) }
//
// which gives the whole command line:
//
//	NAME [serve] [--addr 127.0.0.1:8080] [--no-worker]   MCP endpoint (+ workers + sweeper)
//	     [--dashboard]                                  (+ the tasks dashboard, where the program offers one)
//	NAME worker                                          workers + sweeper only (needs REDIS_URL or DATABASE_URL)
//	NAME token --sub alice [--scope s] [--ttl 1h]        mint a development HS256 token
//	NAME help                                            usage
//
// With several apps, --app (or MCPTASKS_APP) selects one by name.
// Configuration comes from environment variables (see package bundle).
package local

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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mcptasks/mcptasks/pkg/auth"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// DefaultAddr is where serve listens unless --addr or MCPTASKS_ADDR says
// otherwise.
const DefaultAddr = "127.0.0.1:8080"

// defaultReadCache is the local server's MCPTASKS_READ_CACHE when unset: a
// long-running process keeps the last reads of up to this many tasks.
const defaultReadCache = 10000

// localDefaults sets what the local server's defaults differ in from a
// serverless platform's: a read cache (its process is never frozen).
func localDefaults(cfg *bundle.Config) {
	if cfg.ReadCache < 0 {
		cfg.ReadCache = defaultReadCache
	}
}

// Server timeouts of serve. A request must arrive whole within
// MCPTASKS_READ_TIMEOUT (its headers within readHeaderTimeout at most); an
// answer may take as long as an inline run (MCPTASKS_MAX_DURATION) plus
// writeSlack.
const (
	readHeaderTimeout = 10 * time.Second
	writeSlack        = 15 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 10 * time.Second
)

// Command is an extra subcommand of a [Program].
type Command struct {
	// Name is the word that selects the command.
	Name string
	// Summary is its one-line description in the usage.
	Summary string
	// Run runs it with the arguments after its name, writing its output to
	// stdout. A [flag.ErrHelp] from Run exits 0; another error exits 1, or
	// 2 when it matches [ErrUsage] (see [Usagef]).
	Run func(ctx context.Context, args []string, stdout io.Writer) error
}

// ErrUsage marks an error in the command line (exit status 2); errors
// made by [Usagef] match it with errors.Is.
var ErrUsage = errors.New("usage")

// Usagef returns an error in the command line: its message is the
// formatted text alone, and it matches [ErrUsage].
func Usagef(format string, args ...any) error { return usageError(fmt.Sprintf(format, args...)) }

type usageError string

func (e usageError) Error() string        { return string(e) }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Program is a command line serving apps. [Main] is a Program with the
// defaults; set the fields to add commands or redirect its output.
type Program struct {
	// Name is the program's name in its usage (default: the base name of
	// os.Args[0]).
	Name string
	// Apps are the apps it can serve; --app or MCPTASKS_APP selects one by
	// name (default: the first).
	Apps []*tasks.App
	// Commands are extra subcommands, listed after the built-in ones.
	Commands []Command
	// Stdout and Stderr default to os.Stdout and os.Stderr; logs go to
	// Stderr.
	Stdout, Stderr io.Writer
	// Getenv reads the configuration (default os.Getenv).
	Getenv func(string) string
	// Dashboard, when set, offers an operator's web page beside serve:
	// with --dashboard (or MCPTASKS_DASHBOARD=1) serve calls it once the
	// bundle is built, with the bundle and --dashboard-addr (env
	// MCPTASKS_DASHBOARD_ADDR, default DefaultDashboardAddr); it starts
	// serving and returns a function that stops it, which serve calls
	// before it closes the bundle. cmd/mcptasks sets it.
	Dashboard func(ctx context.Context, b *bundle.Bundle, addr string, getenv func(string) string) (stop func(), err error)
}

// DefaultDashboardAddr is where serve --dashboard serves the dashboard
// unless --dashboard-addr or MCPTASKS_DASHBOARD_ADDR says otherwise.
const DefaultDashboardAddr = "127.0.0.1:8090"

// Main runs the command line of os.Args over apps and exits: 0 on success
// (and for --help), 1 when the command failed, 2 for a bad command line.
func Main(apps ...*tasks.App) {
	(&Program{Apps: apps}).Main()
}

// Main runs p over os.Args until SIGINT or SIGTERM, and exits with the
// status [Main] documents.
func (p *Program) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := p.Run(ctx, os.Args[1:])
	stop()
	os.Exit(p.exitCode(err))
}

func (p *Program) exitCode(err error) int {
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(p.stderr(), "%s: %v\nRun '%s help' for usage.\n", p.name(), err, p.name())
		return 2
	default:
		fmt.Fprintf(p.stderr(), "%s: %v\n", p.name(), err)
		return 1
	}
}

func (p *Program) name() string {
	if p.Name != "" {
		return p.Name
	}
	return filepath.Base(os.Args[0])
}

func (p *Program) stdout() io.Writer {
	if p.Stdout != nil {
		return p.Stdout
	}
	return os.Stdout
}

func (p *Program) stderr() io.Writer {
	if p.Stderr != nil {
		return p.Stderr
	}
	return os.Stderr
}

func (p *Program) getenv(k string) string {
	if p.Getenv != nil {
		return p.Getenv(k)
	}
	return os.Getenv(k)
}

// Run runs the command line args (without the program name) until ctx
// ends. It returns [flag.ErrHelp] after printing the usage on request.
func (p *Program) Run(ctx context.Context, args []string) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve", "worker":
		return p.serve(ctx, cmd, args)
	case "token":
		return p.token(args)
	case "help":
		p.usage(p.stdout())
		return flag.ErrHelp
	}
	for _, c := range p.Commands {
		if c.Name == cmd {
			return c.Run(ctx, args, p.stdout())
		}
	}
	return Usagef("unknown command %q", cmd)
}

// usage prints the commands and the flags of serve.
func (p *Program) usage(w io.Writer) {
	n := p.name()
	fmt.Fprintf(w, "%s serves MCP tools with durable tasks (io.modelcontextprotocol/tasks).\n\nUsage:\n  %s [command] [flags]\n\nCommands:\n", n, n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  serve\tserve the MCP endpoint at http://ADDR/mcp with workers and the sweeper (the default command)\n")
	fmt.Fprintf(tw, "  worker\trun workers and the sweeper only, for `serve --no-worker` processes (needs REDIS_URL or DATABASE_URL)\n")
	fmt.Fprintf(tw, "  token\tmint a development HS256 token from MCPTASKS_AUTH_HS256_SECRET, _ISSUER and _AUDIENCE\n")
	for _, c := range p.Commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(tw, "  help\tshow this help\n")
	_ = tw.Flush()
	fmt.Fprintf(w, "\nFlags of serve and worker:\n")
	fs, _ := p.serveFlags("serve")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nRun '%s token -h' for the flags of token. Configuration comes from environment\n"+
		"variables (REDIS_URL or DATABASE_URL, MCPTASKS_*); without either an embedded in-process Redis is used.\n", n)
}

// serveArgs are the flags of serve and worker.
type serveArgs struct {
	addr, app, dashboardAddr string
	noWorker, dashboard      bool
}

// serveFlags returns the flag set of serve and worker.
func (p *Program) serveFlags(cmd string) (*flag.FlagSet, *serveArgs) {
	fs := flag.NewFlagSet(p.name()+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a := &serveArgs{}
	fs.StringVar(&a.addr, "addr", p.getenvOr("MCPTASKS_ADDR", DefaultAddr), "listen address of the MCP endpoint (env MCPTASKS_ADDR)")
	fs.BoolVar(&a.noWorker, "no-worker", false, "serve the MCP endpoint only; run the workers with the worker command (needs REDIS_URL or DATABASE_URL)")
	if len(p.Apps) > 1 {
		fs.StringVar(&a.app, "app", p.getenv("MCPTASKS_APP"), "which app to serve: "+bundle.AppNames(p.Apps)+" (env MCPTASKS_APP; default "+p.Apps[0].Implementation().Name+")")
	}
	if p.Dashboard != nil && cmd == "serve" {
		on, _ := strconv.ParseBool(p.getenv("MCPTASKS_DASHBOARD"))
		fs.BoolVar(&a.dashboard, "dashboard", on, "also serve the tasks dashboard, an operator's web page of every task (env MCPTASKS_DASHBOARD=1)")
		fs.StringVar(&a.dashboardAddr, "dashboard-addr", p.getenvOr("MCPTASKS_DASHBOARD_ADDR", DefaultDashboardAddr),
			"listen address of the dashboard: loopback unless MCPTASKS_DASHBOARD_TOKEN is set (env MCPTASKS_DASHBOARD_ADDR)")
	}
	return fs, a
}

// getenvOr is getenv(k), or def when it is empty.
func (p *Program) getenvOr(k, def string) string {
	if v := p.getenv(k); v != "" {
		return v
	}
	return def
}

func (p *Program) serve(ctx context.Context, cmd string, args []string) error {
	fs, sa := p.serveFlags(cmd)
	addr, noWorker, appName := &sa.addr, &sa.noWorker, &sa.app
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			p.usage(p.stdout())
			return err
		}
		return Usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := bundle.FromEnv(p.getenv)
	if err != nil {
		return err
	}
	if *appName != "" {
		cfg.App = *appName
	}
	app, err := bundle.Select(p.Apps, cfg.App)
	if err != nil {
		return Usagef("--app: %v", err)
	}
	if cfg.Queue != bundle.QueueRedis && cfg.Queue != bundle.QueuePostgres {
		return fmt.Errorf("MCPTASKS_QUEUE=%s: the local server consumes the Redis or Postgres queue (sqs is served by pkg/platform/awslambda, qstash by pkg/platform/vercel)", cfg.Queue)
	}
	serveHTTP, workers := cmd == "serve", cmd == "worker" || !*noWorker
	if !cfg.SharedStore() && (!serveHTTP || !workers) {
		return errors.New("the worker command and serve --no-worker need REDIS_URL or DATABASE_URL: the embedded Redis lives inside one process")
	}
	log := slog.New(slog.NewTextHandler(p.stderr(), &slog.HandlerOptions{Level: cfg.LogLevel}))
	// The address first: a server that cannot listen starts nothing.
	var ln net.Listener
	if serveHTTP {
		if ln, err = net.Listen("tcp", *addr); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		defer ln.Close()
		if cfg.PublicURL == "" {
			// Callback URLs on this server, for the callers on this
			// machine (set MCPTASKS_PUBLIC_URL for any other).
			cfg.PublicURL = "http://" + reachable(ln.Addr())
		}
	}
	localDefaults(&cfg)
	b, err := bundle.New(ctx, cfg, log, app, bundle.WithEmbeddedRedis(startEmbedded))
	if err != nil {
		return err
	}
	defer b.Close()
	var beside func() (func(), error)
	if sa.dashboard {
		beside = func() (func(), error) { return p.Dashboard(ctx, b, sa.dashboardAddr, p.getenv) }
	}
	return run(ctx, b, log, ln, workers, beside)
}

// reachable is the host:port a client on this machine reaches a listener
// on addr at: a loopback address for one on every interface.
func reachable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func startEmbedded() (bundle.EmbeddedRedis, error) { return embedredis.Start(nil) }

// run serves b on ln (nil: no HTTP) until ctx ends or the HTTP server
// fails, then stops the server, the workers and the sweeper, and returns
// only when all of them have returned (so the caller may close the bundle
// under nobody). beside, when set, starts what serves beside the endpoint
// (the dashboard) and returns what stops it.
func run(ctx context.Context, b *bundle.Bundle, log *slog.Logger, ln net.Listener, workers bool, beside func() (func(), error)) error {
	serveHTTP := ln != nil
	if beside != nil {
		stop, err := beside()
		if err != nil {
			return err
		}
		defer stop()
	}
	var wg sync.WaitGroup
	defer wg.Wait() // deferred first, so it runs after cancel: the workers have stopped before Close
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if workers {
		wg.Go(func() { b.RunWorkers(ctx, b.Config.Workers) })
		wg.Go(func() { b.RunSweeper(ctx, b.Config.SweepEvery) })
	}
	if !serveHTTP {
		log.Info("mcptasks worker running", "app", b.App.Implementation().Name, "workers", b.Config.Workers)
		<-ctx.Done()
		return nil
	}
	srv := &http.Server{
		Handler:           b.Handler, // which bounds the requests served at once (MCPTASKS_MAX_REQUESTS)
		ReadHeaderTimeout: min(readHeaderTimeout, b.Config.ReadTimeout),
		ReadTimeout:       b.Config.ReadTimeout,
		WriteTimeout:      b.Config.MaxDuration + writeSlack,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("mcptasks listening", "url", "http://"+ln.Addr().String()+"/mcp", "app", b.App.Implementation().Name, "workers", workers)
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	// In-flight requests may be inline runs of up to MaxDuration.
	shut, cancelShut := context.WithTimeout(context.WithoutCancel(ctx), max(shutdownTimeout, b.Config.MaxDuration+writeSlack))
	defer cancelShut()
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}

// token mints a development HS256 token from MCPTASKS_AUTH_HS256_SECRET,
// MCPTASKS_AUTH_ISSUER and MCPTASKS_AUTH_AUDIENCE.
func (p *Program) token(args []string) error {
	fs := flag.NewFlagSet(p.name()+" token", flag.ContinueOnError)
	fs.SetOutput(p.stdout())
	sub := fs.String("sub", "", "subject (the user) of the token; required")
	scopes := fs.String("scope", "", "space- or comma-separated scopes")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s token --sub SUBJECT [--scope S] [--ttl 1h]\n\nMints a development HS256 token from %s, %s and %s.\n\n",
			p.name(), auth.EnvHS256Secret, auth.EnvIssuer, auth.EnvAudience)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return Usagef("%v", err)
	}
	secret, iss, aud := p.getenv(auth.EnvHS256Secret), p.getenv(auth.EnvIssuer), p.getenv(auth.EnvAudience)
	if *sub == "" {
		return Usagef("token needs --sub")
	}
	if secret == "" || iss == "" || aud == "" {
		return fmt.Errorf("token needs %s, %s and %s", auth.EnvHS256Secret, auth.EnvIssuer, auth.EnvAudience)
	}
	tok, err := auth.MintDevToken([]byte(secret), iss, aud, *sub, *ttl, strings.Fields(strings.ReplaceAll(*scopes, ",", " ")))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(p.stdout(), tok)
	return err
}
