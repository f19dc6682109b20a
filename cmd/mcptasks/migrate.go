package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

var migrateCommand = local.Command{
	Name:    "migrate",
	Summary: "create or upgrade the Postgres store's schema: mcptasks migrate (DATABASE_URL_UNPOOLED or DATABASE_URL)",
	Run: func(ctx context.Context, args []string, stdout io.Writer) error {
		return runMigrate(ctx, args, stdout, os.Getenv)
	},
}

func runMigrate(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("mcptasks migrate", flag.ContinueOnError)
	fs.SetOutput(stdout)
	timeout := fs.Duration("timeout", time.Minute, "give up on the database after this long")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: mcptasks migrate [--timeout 1m]\n\n"+
			"Creates the schema of the Postgres task store and queue (MCPTASKS_PG_SCHEMA, default\n"+
			"mcptasks) in the database at DATABASE_URL_UNPOOLED, or DATABASE_URL, or brings it up\n"+
			"to the version this mcptasks uses. It is idempotent and safe to run while the\n"+
			"deployment runs; the store also migrates on first use, but a deployment whose\n"+
			"database role may not create tables needs this run once by one that may.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return local.Usagef("migrate: %v", err)
	}
	if fs.NArg() > 0 {
		return local.Usagef("migrate: unexpected argument %q", fs.Arg(0))
	}
	if *timeout <= 0 {
		return local.Usagef("migrate: --timeout must be positive")
	}
	url := strings.TrimSpace(getenv("DATABASE_URL_UNPOOLED"))
	if url == "" {
		url = strings.TrimSpace(getenv("DATABASE_URL"))
	}
	if url == "" {
		return errors.New("migrate: set DATABASE_URL (or DATABASE_URL_UNPOOLED, a direct connection) to the deployment's PostgreSQL")
	}
	schema := strings.TrimSpace(getenv("MCPTASKS_PG_SCHEMA"))
	if schema != "" {
		if err := pgstore.CheckSchema(schema); err != nil {
			return fmt.Errorf("migrate: MCPTASKS_PG_SCHEMA: %w", err)
		}
	} else {
		schema = "mcptasks"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg, err := pgstore.PoolConfig(url)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer pool.Close()
	from, to, err := pgstore.Migrate(ctx, pool, schema)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if from == to {
		fmt.Fprintf(stdout, "schema %s is at version %d already\n", schema, to)
		return nil
	}
	fmt.Fprintf(stdout, "schema %s migrated from version %d to %d\n", schema, from, to)
	return nil
}
