// Package pgschema is the PostgreSQL schema that the task store
// (pkg/tasks/pgstore) and the queue (pkg/queue/pgqueue) share: its tables,
// the server-side functions that make every transition one atomic
// statement, and the versioned migration that creates and upgrades it.
//
// Everything lives in one schema of the database (default "mcptasks"), so
// that one database can hold several deployments apart, as a key prefix
// does on Redis. The schema is documented, table by table, in
// pkg/tasks/pgstore's package doc and docs/postgres.md.
package pgschema

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Default is the schema of a deployment that names none.
const Default = "mcptasks"

// Version is the schema version this code reads and writes; Migrate
// brings a schema up to it.
const Version = 2

// validName is what a schema name may be: a lower-case identifier short
// enough that the notification channels named after it ("<schema>.tasks",
// "<schema>.queue") fit PostgreSQL's 63-byte identifiers.
var validName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// Check reports whether name can name the schema.
func Check(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("schema name %q: want a lower-case identifier of at most 48 characters (letters, digits, _)", name)
	}
	return nil
}

// Name returns name, or Default when it is empty.
func Name(name string) string {
	if name == "" {
		return Default
	}
	return name
}

// SQL returns the statement src with every {S} replaced by the quoted
// schema name and every {N} by the bare name (for string literals: a
// valid name needs no escaping).
func SQL(schema, src string) string {
	return strings.NewReplacer("{S}", `"`+schema+`"`, "{N}", schema).Replace(src)
}

// TasksChannel is the notification channel of task transitions: its
// payload is the task id.
func TasksChannel(schema string) string { return schema + ".tasks" }

// QueueChannel is the notification channel of enqueues that wake idle
// consumers: its payload is the message's due time in Unix milliseconds.
func QueueChannel(schema string) string { return schema + ".queue" }

// migrations are the steps of the schema's history: migrations[i] takes a
// schema from version i to i+1. A step only ever adds (tables, columns,
// functions under new names), so that processes of the previous version
// keep working while a deployment rolls over (a function whose meaning
// changes gets a new name).
var migrations = []string{tablesV1 + functionsV1, indexesV2}

// Installed returns the version of schema in the database (0: none).
func Installed(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) (int, error) {
	var v int
	err := q.QueryRow(ctx, SQL(schema, `SELECT coalesce(max(version), 0) FROM {S}.schema_version`)).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined_table, invalid_schema_name
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the schema version of %s: %w", schema, err)
	}
	return v, nil
}

// Migrate creates schema, or brings it up to Version, in one transaction
// that holds a transaction-scoped advisory lock (so concurrent processes
// migrate once, and it works through a transaction-mode pooler). A schema
// that is current costs one statement, which needs no privilege but
// reading it. It is idempotent. It reports the versions before and after.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) (from, to int, err error) {
	return MigrateTo(ctx, pool, schema, Version)
}

// MigrateTo is Migrate stopped at version target (at most Version): it
// makes the schema an older version of this code would have made, for
// the tests of an upgrade. A schema at target or newer is left as it is.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, target int) (from, to int, err error) {
	if err := Check(schema); err != nil {
		return 0, 0, err
	}
	if target < 1 || target > Version {
		return 0, 0, fmt.Errorf("migrating %s: no version %d (this code knows 1 to %d)", schema, target, Version)
	}
	if from, err = Installed(ctx, pool, schema); err != nil || from >= target {
		return from, from, err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migrating %s: %w", schema, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))`, "mcptasks.migrate:"+schema); err != nil {
		return 0, 0, fmt.Errorf("migrating %s: taking the migration lock: %w", schema, err)
	}
	if _, err := tx.Exec(ctx, SQL(schema, `CREATE SCHEMA IF NOT EXISTS {S}; CREATE TABLE IF NOT EXISTS {S}.schema_version (version integer NOT NULL)`)); err != nil {
		return 0, 0, fmt.Errorf("migrating %s: %w", schema, err)
	}
	if from, err = Installed(ctx, tx, schema); err != nil {
		return 0, 0, err
	}
	if from >= target {
		return from, from, tx.Commit(ctx)
	}
	for v := from; v < target; v++ {
		if _, err := tx.Exec(ctx, SQL(schema, migrations[v])); err != nil {
			return from, v, fmt.Errorf("migrating %s to version %d: %w", schema, v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, SQL(schema, `DELETE FROM {S}.schema_version`)); err != nil {
		return from, from, fmt.Errorf("migrating %s: %w", schema, err)
	}
	if _, err := tx.Exec(ctx, SQL(schema, `INSERT INTO {S}.schema_version (version) VALUES ($1::integer)`), target); err != nil {
		return from, from, fmt.Errorf("migrating %s: %w", schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return from, from, fmt.Errorf("migrating %s: %w", schema, err)
	}
	return from, target, nil
}

// Current makes sure, once per process, that a schema is at Version,
// migrating it if not: the check is one statement on first use, and
// nothing after. It is safe for concurrent use.
type Current struct {
	pool   *pgxpool.Pool
	schema string
	bad    error
	ok     atomic.Bool
	// token is held by the call that checks.
	token chan struct{}
}

// NewCurrent returns the check of schema on pool; known says the caller
// ran Migrate already (the check is then done). A schema name that Check
// refuses makes every Ensure fail.
func NewCurrent(pool *pgxpool.Pool, schema string, known bool) *Current {
	c := &Current{pool: pool, schema: schema, bad: Check(schema), token: make(chan struct{}, 1)}
	c.ok.Store(known && c.bad == nil)
	return c
}

// Ensure returns nil once the schema is known to be current; it waits
// for a concurrent check no longer than ctx.
func (c *Current) Ensure(ctx context.Context) error {
	if c.ok.Load() {
		return nil
	}
	if c.bad != nil {
		return c.bad
	}
	select {
	case c.token <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for the schema check: %w", ctx.Err())
	}
	defer func() { <-c.token }()
	if c.ok.Load() {
		return nil
	}
	if _, _, err := Migrate(ctx, c.pool, c.schema); err != nil {
		return err
	}
	c.ok.Store(true)
	return nil
}
