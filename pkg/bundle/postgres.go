package bundle

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/pkg/queue/pgqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// PostgreSQL settings of a bundle.
const (
	// pgConnectTimeout bounds building the bundle's pool: its first
	// connection and the schema check.
	pgConnectTimeout = 10 * time.Second
)

// connectPostgres makes the pool of DATABASE_URL (statements in pgx's
// exec mode, fit for a transaction-mode pooler: see pgstore.PoolConfig)
// and the configuration of the direct connection that LISTENs
// (DATABASE_URL_UNPOOLED, or DATABASE_URL). It dials at once, checking
// that the schema is current (migrating it if not): a serverless entry
// point that builds its bundle during init pays the dial there, as for
// Redis, and its first request does not pay the check.
func (b *Bundle) connectPostgres(ctx context.Context) error {
	cfg := b.Config
	pcfg, err := pgstore.PoolConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	direct := pcfg.ConnConfig
	if cfg.DatabaseDirectURL != "" {
		if direct, err = pgstore.ConnConfig(cfg.DatabaseDirectURL); err != nil {
			return fmt.Errorf("DATABASE_URL_UNPOOLED: %w", err)
		}
	}
	b.pgListen = direct
	pool, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), pcfg)
	if err != nil {
		return fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	b.pool = pool
	cctx, cancel := context.WithTimeout(ctx, pgConnectTimeout)
	defer cancel()
	if _, _, err := pgstore.Migrate(cctx, pool, cfg.PGSchema); err != nil {
		return fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	return nil
}

// newPostgresStore builds the Postgres store; it dispatches into the
// Postgres queue when that is the queue (same database, same schema).
func (b *Bundle) newPostgresStore(_ context.Context, tel *tasks.Telemetry) (driver.Store, error) {
	b.pgStore = pgstore.New(b.pool, &pgstore.Options{
		Schema:         b.Config.PGSchema,
		EnqueueGrace:   b.Config.MaxDuration / 2,
		Dispatch:       b.pgConsumer != nil,
		Migrated:       true,
		Listen:         b.pgListen,
		TracerProvider: tel.TracerProvider,
	})
	return b.pgStore, nil
}

// newPostgresQueue builds the Postgres queue, which local and
// self-hosted workers consume (RunWorkers).
func (b *Bundle) newPostgresQueue() driver.Queue {
	b.pgConsumer = pgqueue.New(b.pool, &pgqueue.Options{
		Schema:     b.Config.PGSchema,
		Visibility: b.Config.Visibility,
		Migrated:   true,
		Listen:     b.pgListen,
		Logger:     b.log,
	})
	return b.pgConsumer
}

// runPostgresWorkers consumes the Postgres queue with n workers until ctx
// ends.
func (b *Bundle) runPostgresWorkers(ctx context.Context, n int) {
	b.pgConsumer.Consume(ctx, n, b.advanceMessage)
}

// closePostgres closes the store's listening connection and the pool.
func (b *Bundle) closePostgres() {
	if b.pgStore != nil {
		b.pgStore.Close()
	}
	if b.pool != nil {
		b.pool.Close()
	}
}
