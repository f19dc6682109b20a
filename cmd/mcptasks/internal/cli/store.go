package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// Environment variables read by the operator's commands (inspect, tasks),
// as the bundle reads them.
const (
	EnvRedisURL    = "REDIS_URL"
	EnvKeyPrefix   = "MCPTASKS_KEY_PREFIX"
	EnvStore       = "MCPTASKS_STORE"
	EnvDatabaseURL = "DATABASE_URL"
	EnvPGSchema    = "MCPTASKS_PG_SCHEMA"
	// EnvRedisShards is how many shards the deployment spreads its
	// indexes over.
	EnvRedisShards = "MCPTASKS_REDIS_SHARDS"
)

// readStore is what the operator's commands read of a deployment's
// store: a task's whole record, and every task.
type readStore interface {
	inspect.Store
	inspect.Lister
}

// opened is the deployment's store, opened by an operator's command.
type opened struct {
	readStore
	// where names the namespace read (the key prefix or the schema) and
	// what the variable that sets it, for messages.
	where, what string
	close       func()
}

// openStore opens the store the environment names, chosen as the bundle
// chooses it (MCPTASKS_STORE, REDIS_URL, DATABASE_URL), with a client of
// its own, within ctx's deadline (the dial included); cmd names the
// command for a message. The caller calls close.
func (e *env) openStore(ctx context.Context, cmd string) (*opened, error) {
	redisURL, databaseURL := e.getenv(EnvRedisURL), strings.TrimSpace(e.getenv(EnvDatabaseURL))
	store := strings.ToLower(strings.TrimSpace(e.getenv(EnvStore)))
	if store == "" {
		store = bundle.DefaultStore(redisURL, databaseURL)
	}
	if store == bundle.StorePostgres {
		schema := strings.TrimSpace(e.getenv(EnvPGSchema))
		if schema == "" {
			schema = "mcptasks"
		}
		if databaseURL == "" {
			return nil, errors.New(cmd + " reads tasks from PostgreSQL (" + EnvStore + "=postgres): set " + EnvDatabaseURL + " to the deployment's database")
		}
		s, closeFn, err := openPostgres(ctx, databaseURL, schema)
		if err != nil {
			return nil, err
		}
		return &opened{readStore: s, where: fmt.Sprintf("schema %q", schema), what: EnvPGSchema, close: closeFn}, nil
	}
	if redisURL == "" {
		return nil, errors.New(cmd + " reads tasks from the deployment's store: set " + EnvRedisURL + " to its Redis, or " + EnvDatabaseURL +
			" to its PostgreSQL (the embedded Redis of `mcptasks serve` lives inside that process: run `mcptasks serve --dashboard` and open the dashboard)")
	}
	prefix := e.getenv(EnvKeyPrefix)
	if prefix == "" {
		prefix = "mcptasks:"
	}
	c, err := dialRedis(ctx, redisURL)
	if err != nil {
		return nil, err
	}
	s, err := e.redisStore(c, prefix)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &opened{readStore: s, where: fmt.Sprintf("key prefix %q", prefix), what: EnvKeyPrefix, close: c.Close}, nil
}

// redisStore returns the store over c under prefix with the deployment's
// shards (MCPTASKS_REDIS_SHARDS), as the bundle builds it.
func (e *env) redisStore(c rueidis.Client, prefix string) (*redisstore.Store, error) {
	shards := 0
	if v := e.getenv(EnvRedisShards); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a number of shards", EnvRedisShards, v)
		}
		shards = n
	}
	if shards == 0 && c.Mode() == rueidis.ClientModeCluster {
		shards = bundle.DefaultClusterShards
	}
	return redisstore.New(c, &redisstore.Options{Prefix: prefix, Shards: shards}), nil
}

// dialRedis connects to the Redis at url within ctx's deadline.
func dialRedis(ctx context.Context, url string) (rueidis.Client, error) {
	opt, err := bundle.RedisOptions(url)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		opt.Dialer.Timeout = min(opt.Dialer.Timeout, time.Until(d))
	}
	type dialed struct {
		c   rueidis.Client
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := rueidis.NewClient(opt)
		ch <- dialed{c, err}
	}()
	select {
	case d := <-ch:
		if d.err != nil {
			return nil, fmt.Errorf("connecting to Redis: %w", d.err)
		}
		return d.c, nil
	case <-ctx.Done():
		go func() {
			if d := <-ch; d.c != nil {
				d.c.Close()
			}
		}()
		return nil, fmt.Errorf("connecting to Redis: %w", ctx.Err())
	}
}

// openPostgres opens the store in schema with a connection pool of its
// own; close closes both. It never migrates: a schema that is missing
// holds no tasks (see pgReader), and one older than this mcptasks is read
// as it is.
func openPostgres(ctx context.Context, url, schema string) (readStore, func(), error) {
	cfg, err := pgstore.PoolConfig(url)
	if err != nil {
		return nil, nil, err
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	s := pgstore.New(pool, &pgstore.Options{Schema: schema, Migrated: true})
	return pgReader{s}, func() { s.Close(); pool.Close() }, nil
}

// pgReader is the Postgres store as the operator's commands read it: a
// schema that does not exist (yet) holds no task.
type pgReader struct{ *pgstore.Store }

// Inspect is the store's, a missing schema answering tasks.ErrNotFound.
func (s pgReader) Inspect(ctx context.Context, id string) (*inspect.Record, error) {
	rec, err := s.Store.Inspect(ctx, id)
	if noSchema(err) {
		return nil, tasks.ErrNotFound
	}
	return rec, err
}

// ListAll is the store's, a missing schema listing nothing.
func (s pgReader) ListAll(ctx context.Context, f *inspect.Filter, cursor string, limit int, now time.Time) ([]*driver.Task, string, error) {
	ts, next, err := s.Store.ListAll(ctx, f, cursor, limit, now)
	if noSchema(err) {
		return nil, "", nil
	}
	return ts, next, err
}

// noSchema reports whether err says the store's tables or schema do not
// exist.
func noSchema(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") // undefined_table, invalid_schema_name
}
