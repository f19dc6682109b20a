// Package pgqueue is the [driver.Queue] on PostgreSQL, for deployments
// whose task store is pkg/tasks/pgstore and that have no Redis: the
// queue of local and self-hosted worker processes, which consume it with
// [Queue.Consume]. It needs nothing but the pool the store already uses.
//
// The queue is the table "queue" of the store's schema (see
// pkg/tasks/pgstore): one row per task id (the dedup key), due at due_at.
// A receive takes the earliest due row with FOR UPDATE SKIP LOCKED (so
// concurrent consumers never wait for each other), hides it until its
// visibility timeout ends and marks it with a receipt; a crashed
// consumer's message comes back after the timeout. An enqueue that arrives
// while the message is being handled is never lost: it replaces the
// receipt with its own time, so Ack, finding another receipt, keeps the
// message. Otherwise an enqueue only ever makes a waiting message due
// earlier.
//
// Idle consumers wait on the process, not on the database: each enqueue
// that must wake them notifies the channel "<schema>.queue" with its due
// time, which the consumers of each process hear on one LISTEN (a direct
// connection: see Options.Listen), and each receive tells them when the
// earliest message left falls due. A poll (Options.Poll) is the safety
// net for a missed notification.
//
// [driver.Queue]: https://pkg.go.dev/github.com/mcptasks/mcptasks/pkg/tasks/driver#Queue
package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/internal/pglisten"
	"github.com/mcptasks/mcptasks/internal/pgschema"
)

// Options configures a queue. The zero value is a sane default.
type Options struct {
	// Schema is the PostgreSQL schema of the queue's table: the task
	// store's (default "mcptasks").
	Schema string
	// Visibility is how long a received message stays hidden before it is
	// delivered again if not acknowledged: a crashed consumer's messages
	// come back after it. Set it above the worker's maximum duration
	// (default 2m).
	Visibility time.Duration
	// Poll is the longest the consumers of a process go without looking at
	// the queue (default DefaultPoll): only a safety net behind the
	// notifications (see the package doc).
	Poll time.Duration
	// Migrated says the schema is current already (the caller ran
	// pgstore.Migrate on it): the first call does not check it.
	Migrated bool
	// Listen configures the connection the consumers LISTEN on. It must
	// reach the server directly, not through a transaction-mode pooler.
	// Nil: a connection configured as the pool's.
	Listen *pgx.ConnConfig
	// Logger for consumer errors; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultPoll is Options.Poll's default: an idle process looks at the
// queue once a minute in case a notification was missed.
const DefaultPoll = time.Minute

// Queue is a delayed, at-least-once queue in a PostgreSQL table. It is
// safe for concurrent use.
type Queue struct {
	pool    *pgxpool.Pool
	schema  string
	o       Options
	dial    func(ctx context.Context) (*pgx.Conn, error)
	current *pgschema.Current
	sql     statements
}

// statements are the queue's SQL, with its schema's name in place.
type statements struct {
	enqueue, receive, ack, retry string
}

// New returns a queue on pool, which the caller owns and closes. Build
// pool from pgstore.PoolConfig so that it works through a
// transaction-mode pooler.
func New(pool *pgxpool.Pool, opts *Options) *Queue {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Schema = pgschema.Name(o.Schema)
	if o.Visibility <= 0 {
		o.Visibility = 2 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	q := func(src string) string { return pgschema.SQL(o.Schema, src) }
	return &Queue{pool: pool, schema: o.Schema, o: o, dial: pglisten.Dialer(o.Listen, pool), current: pgschema.NewCurrent(pool, o.Schema, o.Migrated),
		sql: statements{
			enqueue: q(`SELECT {S}.enqueue($1::text, {S}.ts($2::bigint), false)`),
			receive: q(`SELECT o_id, {S}.ms(o_next) FROM {S}.receive({S}.ts($1::bigint), $2::bigint, $3::bigint)`),
			ack:     q(`DELETE FROM {S}.queue WHERE task_id = $1::text AND receipt = $2::bigint`),
			retry:   q(`UPDATE {S}.queue SET due_at = {S}.ts($3::bigint), receipt = NULL WHERE task_id = $1::text AND receipt = $2::bigint`),
		}}
}

// Schema is the queue's schema.
func (q *Queue) Schema() string { return q.schema }

// Enqueue implements driver.Queue.
func (q *Queue) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	at := notBefore.UnixMilli()
	if notBefore.IsZero() {
		at = time.Now().UnixMilli()
	}
	if err := q.current.Ensure(ctx); err != nil {
		return fmt.Errorf("queue: enqueue %s: %w", taskID, err)
	}
	if _, err := q.pool.Exec(ctx, q.sql.enqueue, taskID, at); err != nil {
		return fmt.Errorf("queue: enqueue %s: %w", taskID, err)
	}
	return nil
}

// HonoursDeadline implements driver.DeadlineHonourer: pgx interrupts a
// statement's connection when its context ends.
func (q *Queue) HonoursDeadline() bool { return true }

// MaxDelay implements driver.Queue: a table holds any delay.
func (q *Queue) MaxDelay() time.Duration { return 0 }

// Delivery is one received message.
type Delivery struct {
	TaskID  string
	receipt int64
}

// never is the due time of a queue known to hold no message.
const never = math.MaxInt64

// receive takes the earliest due message at now (Unix ms), if any. next
// is when the earliest message left is due, or never.
func (q *Queue) receive(ctx context.Context, now int64) (d Delivery, ok bool, next int64, err error) {
	if err := q.current.Ensure(ctx); err != nil {
		return d, false, never, fmt.Errorf("queue: receive: %w", err)
	}
	receipt := rand.Int64()
	var id *string
	var nextMs *int64
	err = q.pool.QueryRow(ctx, q.sql.receive, now, q.o.Visibility.Milliseconds(), receipt).Scan(&id, &nextMs)
	if err != nil {
		return d, false, never, fmt.Errorf("queue: receive: %w", err)
	}
	next = never
	if nextMs != nil {
		next = *nextMs
	}
	if id == nil {
		return d, false, next, nil
	}
	return Delivery{TaskID: *id, receipt: receipt}, true, next, nil
}

// Receive returns the next due message, or ok=false and how long until
// the next one is due (capped at the poll interval) when none is.
func (q *Queue) Receive(ctx context.Context) (d Delivery, ok bool, wait time.Duration, err error) {
	d, ok, next, err := q.receive(ctx, time.Now().UnixMilli())
	if err != nil || ok {
		return d, ok, 0, err
	}
	wait = q.o.Poll
	if next != never {
		wait = min(wait, max(time.Until(time.UnixMilli(next)), time.Millisecond))
	}
	return d, false, wait, nil
}

// Ack removes a handled message (unless it was enqueued again meanwhile).
func (q *Queue) Ack(ctx context.Context, d Delivery) error {
	if _, err := q.pool.Exec(ctx, q.sql.ack, d.TaskID, d.receipt); err != nil {
		return fmt.Errorf("queue: ack %s: %w", d.TaskID, err)
	}
	return nil
}

// Retry makes a message due again at at (or earlier, if it was enqueued
// again meanwhile).
func (q *Queue) Retry(ctx context.Context, d Delivery, at time.Time) error {
	if _, err := q.pool.Exec(ctx, q.sql.retry, d.TaskID, d.receipt, at.UnixMilli()); err != nil {
		return fmt.Errorf("queue: retry %s: %w", d.TaskID, err)
	}
	return nil
}
