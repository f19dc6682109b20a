package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/mcptasks/mcptasks/cmd/mcptasks/internal/dashboard"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

var dashboardCommand = local.Command{
	Name:    "dashboard",
	Summary: "the tasks dashboard, a web page of every task read from the store: dashboard [--addr 127.0.0.1:8090]",
	Run: func(ctx context.Context, args []string, stdout io.Writer) error {
		return runDashboard(ctx, args, stdout, os.Getenv, os.Stderr)
	},
}

const dashboardUsage = `Usage: mcptasks dashboard [--addr 127.0.0.1:8090]

Serves the tasks dashboard: a web page listing the tasks of every principal,
newest first, filtered by status, tool, principal and creation time, with
counts by status; each task's record and timeline (as mcptasks inspect
shows it), updated live as the task moves; and the operator's actions:
cancel a task, answer its input requests through a form built from their
schemas. It reads the deployment's store, chosen as the deployment chooses
it (MCPTASKS_STORE, REDIS_URL, DATABASE_URL, and the deployment's other
MCPTASKS_* settings: key prefix, shards, schema, queue): Redis at
REDIS_URL, or PostgreSQL at DATABASE_URL (DATABASE_URL_UNPOOLED for the
live updates' LISTEN when DATABASE_URL is a pooler's). It acts through the
same operations as tasks/cancel and tasks/update, on behalf of the task's
owner, each action audit-logged. For the embedded Redis of a local server,
run mcptasks serve --dashboard instead.

It is an operator's tool: it listens on a loopback address unless
MCPTASKS_DASHBOARD_TOKEN is set; the token is then required on every
request (open the page once with ?token=..., or send Authorization: Bearer).

`

func runDashboard(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcptasks dashboard", flag.ContinueOnError)
	fs.SetOutput(stdout)
	def := getenv(dashboard.EnvAddr)
	if def == "" {
		def = dashboard.DefaultAddr
	}
	addr := fs.String("addr", def, "listen address (env "+dashboard.EnvAddr+"): loopback unless "+dashboard.EnvToken+" is set")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), dashboardUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return local.Usagef("dashboard: %v", err)
	}
	if fs.NArg() > 0 {
		return local.Usagef("dashboard: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := bundle.FromEnv(getenv)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if !cfg.SharedStore() {
		return errors.New("dashboard reads the deployment's store: set REDIS_URL to its Redis, or DATABASE_URL to its PostgreSQL (for the embedded Redis of a local server, run `mcptasks serve --dashboard`)")
	}
	// The dashboard verifies no client tokens: it acts as each task's owner.
	cfg.AuthEnabled = false
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	b, err := bundle.New(ctx, cfg, log, &tasks.App{Name: "mcptasks-dashboard"},
		bundle.WithQueue(bundle.QueueSQS, pushQueue), bundle.WithQueue(bundle.QueueQStash, pushQueue))
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	defer b.Close()
	if cfg.Queue != bundle.QueueRedis && cfg.Queue != bundle.QueuePostgres {
		log.Warn("the dashboard does not link the " + cfg.Queue + " adapter: a task its answer resumes runs when the deployment's sweeper finds it, within MCPTASKS_MAX_DURATION/2")
	}
	stop, err := dashboard.Start(ctx, b, *addr, getenv)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// pushQueue stands for a push queue (SQS, QStash) whose adapter the
// binary does not link: it enqueues nothing, and the deployment's sweeper
// recovers a resumed task (its due time was set by the update).
func pushQueue(context.Context, bundle.Config) (driver.Queue, error) { return noQueue{}, nil }

type noQueue struct{}

func (noQueue) Enqueue(context.Context, string, time.Time) error { return nil }
func (noQueue) MaxDelay() time.Duration                          { return 0 }
