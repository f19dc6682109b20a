// Package pgstore implements [driver.Store] on PostgreSQL through
// github.com/jackc/pgx/v5, for deployments that have a database and no
// Redis (Neon on Vercel, RDS or Aurora on AWS, Supabase, a server of your
// own).
//
// # Schema
//
// Everything lives in one schema (Options.Schema, default "mcptasks"),
// created and migrated by the store on first use, or beforehand by
// [Migrate] (`mcptasks migrate`): a versioned migration in one transaction
// under a transaction-scoped advisory lock, so that concurrent processes
// migrate once and it works through a transaction-mode pooler. The tables:
//
//	tasks           one row per task: the record tasks/get shows (status,
//	                status_message, created_at, updated_at, expires_at,
//	                ttl_ms, poll_ms, args, result, error, traceparent), the
//	                worker's claim (gen, the fencing generation; attempts;
//	                lease_until; wake_at; cancel_requested), the input a
//	                parked task waits for (waiting) and its offers (offers),
//	                the responses received (responses, answered_at), and
//	                due_at, the due index of the sweeper
//	journal         the step journal: (task_id, seq, entry), one JSON entry
//	                per step
//	queue           pkg/queue/pgqueue's messages: (task_id, due_at, receipt)
//	locks           named expiring locks (the deployment's sweep turn)
//	schema_version  the schema's version
//
// Raw JSON (arguments, results, journal entries, input requests and
// responses) is stored as written, never re-encoded. Each transition is
// one call of a server-side function (create_task, update_task,
// cancel_task, claim_task, commit_task) that locks the task's row first,
// so the transitions of a task are serialised and atomic, with the owner
// check and the generation fence inside the same statement; every
// operation is one round trip.
//
// # Expiry
//
// A task is gone once its expires_at (creation plus TTL) has passed on the
// database's clock: every read and transition treats it as not found at
// once. Its rows are deleted by the sweeper: each [Store.Due] deletes up
// to Options.PurgeBatch expired tasks (their journal goes with them).
//
// # Poolers
//
// The store keeps no session state between statements and uses no named
// prepared statements (see [PoolConfig]), so it works through a
// transaction-mode pooler (PgBouncer, Neon's pooled URL, RDS Proxy). Only
// [Store.Watch] needs a session of its own (LISTEN): give it a direct
// connection with Options.Listen.
package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcptasks/mcptasks/internal/pglisten"
	"github.com/mcptasks/mcptasks/internal/pgschema"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Options configures a Store. The zero value is a sane default.
type Options struct {
	// Schema is the PostgreSQL schema of the store's tables (default
	// "mcptasks"): a lower-case identifier of at most 48 characters (see
	// CheckSchema).
	Schema string
	// EnqueueGrace is how long after a task was last handed to the queue
	// the sweeper assumes the message was lost and enqueues it again.
	// Zero means 30s.
	EnqueueGrace time.Duration
	// Dispatch makes the store enqueue tasks into the queue table of its
	// schema (pkg/queue/pgqueue on the same database and schema) in the
	// same transaction as the transition that makes a task runnable, and
	// drop its message when it ends or parks without a deadline (see
	// Store.Dispatches): a worker step costs round trips less, and the
	// caller enqueues nothing after those transitions.
	Dispatch bool
	// PurgeBatch is how many expired tasks each Due deletes at most
	// (default 500).
	PurgeBatch int
	// Migrated says the schema is current already (the caller ran
	// pgstore.Migrate on it): the first call does not check it.
	Migrated bool
	// Listen configures the connection that Watch LISTENs on. It must
	// reach the server directly, not through a transaction-mode pooler
	// (on Neon: the unpooled URL). Nil: a connection configured as the
	// pool's.
	Listen *pgx.ConnConfig
	// TracerProvider, when set, makes a client span for each statement
	// made within a traced operation (a recording span in the call's
	// context); nil means none.
	TracerProvider trace.TracerProvider
}

// CheckSchema reports whether name can name the store's schema.
func CheckSchema(name string) error { return pgschema.Check(name) }

// Store is a driver.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	schema   string
	grace    int64 // ms
	dispatch bool
	purge    int
	sql      statements
	listen   *pglisten.Listener
	watches  watchHub
	tracer   trace.Tracer
	current  *pgschema.Current
}

var (
	_ driver.Store            = (*Store)(nil)
	_ driver.Dispatcher       = (*Store)(nil)
	_ driver.DeadlineHonourer = (*Store)(nil)
)

// New returns a Store on pool, which the caller owns and closes. Build
// pool from [PoolConfig] so that it works through a transaction-mode
// pooler. A schema name that CheckSchema refuses makes every call fail.
func New(pool *pgxpool.Pool, opts *Options) *Store {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Schema = pgschema.Name(o.Schema)
	if o.EnqueueGrace <= 0 {
		o.EnqueueGrace = 30 * time.Second
	}
	if o.PurgeBatch <= 0 {
		o.PurgeBatch = 500
	}
	s := &Store{pool: pool, schema: o.Schema, grace: o.EnqueueGrace.Milliseconds(), dispatch: o.Dispatch,
		purge: o.PurgeBatch, sql: newStatements(o.Schema), current: pgschema.NewCurrent(pool, o.Schema, o.Migrated)}
	s.listen = pglisten.New(pglisten.Dialer(o.Listen, pool), pgschema.TasksChannel(o.Schema), nil)
	if o.TracerProvider != nil {
		s.tracer = o.TracerProvider.Tracer("github.com/mcptasks/mcptasks/pkg/tasks/pgstore")
	}
	return s
}

// Close ends the store's watches and closes its listening connection (the
// pool is the caller's).
func (s *Store) Close() { s.listen.Close() }

// Schema is the store's schema.
func (s *Store) Schema() string { return s.schema }

// Dispatches reports whether the store enqueues tasks itself (see
// Options.Dispatch): the tasks Server then does not enqueue after a creation,
// a worker's commit or a resuming update.
func (s *Store) Dispatches() bool { return s.dispatch }

// HonoursDeadline implements driver.DeadlineHonourer: pgx interrupts a
// statement's connection when its context ends, and the pool's Acquire and
// the dial wait no longer than the context either.
func (s *Store) HonoursDeadline() bool { return true }

// Migrate creates the schema of a store (default "mcptasks" when schema
// is empty) on pool, or brings it up to the version this code uses; it is
// idempotent and safe to run concurrently. A store migrates on first use
// by itself; `mcptasks migrate` runs this beforehand (for a database role
// that may create tables, where the deployment's may not). It reports the
// versions before and after.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) (from, to int, err error) {
	return pgschema.Migrate(ctx, pool, pgschema.Name(schema))
}

// SchemaVersion is the schema version this code uses.
const SchemaVersion = pgschema.Version

// ensure makes sure, once, that the schema is current (migrating it if
// not). It waits no longer than ctx.
func (s *Store) ensure(ctx context.Context) error {
	if err := s.current.Ensure(ctx); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// span starts the client span of the statement name, when tracing is on
// and ctx holds a recording span; else it returns nil.
func (s *Store) span(ctx context.Context, name string) (context.Context, trace.Span) {
	if s.tracer == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return s.tracer.Start(ctx, "SELECT "+name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system.name", "postgresql"), attribute.String("db.operation.name", "SELECT"),
		attribute.String("db.stored_procedure.name", name), attribute.String("db.namespace", s.schema)))
}

// endSpan ends span (nil: none), marking an error.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// queryRow runs the statement sql (named name for its span) that returns
// one row, after making sure the schema is current, and scans it into
// dest.
func (s *Store) queryRow(ctx context.Context, name, sql string, args []any, dest ...any) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	ctx, span := s.span(ctx, name)
	err := s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
	endSpan(span, err)
	return err
}

// exec runs a statement that returns no rows; it reports how many rows it
// changed.
func (s *Store) exec(ctx context.Context, name, sql string, args ...any) (int64, error) {
	if err := s.ensure(ctx); err != nil {
		return 0, err
	}
	ctx, span := s.span(ctx, name)
	tag, err := s.pool.Exec(ctx, sql, args...)
	endSpan(span, err)
	return tag.RowsAffected(), err
}

// ms is t in Unix milliseconds, or nil (SQL NULL) for the zero time.
func ms(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// fromMs is the time of a Unix millisecond count (nil: the zero time).
func fromMs(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.UnixMilli(*v).UTC()
}

// storable reports whether s can be stored in a text column as it is:
// PostgreSQL's text holds valid UTF-8 without NUL bytes.
func storable(s string) bool { return utf8.ValidString(s) && !strings.Contains(s, "\x00") }

// text returns s as a text column holds it: invalid UTF-8 and NUL bytes
// become U+FFFD (as a JSON encoder shows invalid UTF-8 anyway). Only text
// meant for display (status messages) and input keys go through it;
// owners are refused instead (see Create), since two principals must never
// become one.
func text(s string) string {
	if storable(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// rawText is raw JSON as a text column holds it: valid JSON has no raw NUL
// bytes, and invalid UTF-8 in its strings decodes as U+FFFD anyway.
func rawText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// rawObject encodes m (key -> raw JSON) as the JSON object of strings the
// schema keeps maps in; nil for an empty m.
func rawObject(m map[string]json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	o := make(map[string]string, len(m))
	for k, v := range m {
		o[text(k)] = rawText(v)
	}
	b, _ := json.Marshal(o) // a map of strings never fails
	return string(b)
}

// decodeObject decodes a JSON object of strings (a map column) into key
// -> raw JSON, adding to into (made when nil).
func decodeObject(col *string, into map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	if col == nil {
		return into, nil
	}
	var o map[string]string
	if err := json.Unmarshal([]byte(*col), &o); err != nil {
		return into, fmt.Errorf("decoding a map column: %w", err)
	}
	if into == nil {
		into = make(map[string]json.RawMessage, len(o))
	}
	for k, v := range o {
		into[k] = json.RawMessage(v)
	}
	return into, nil
}

// Create implements driver.Store.
func (s *Store) Create(ctx context.Context, nt *driver.NewTask) (*driver.Task, error) {
	if nt.Owner == "" {
		return nil, errors.New("pgstore: create: empty owner")
	}
	if !storable(nt.Owner) {
		return nil, errors.New("pgstore: create: the owner holds a NUL byte or invalid UTF-8, which PostgreSQL text cannot hold")
	}
	if !driver.ValidID(nt.ID) {
		return nil, fmt.Errorf("pgstore: create: %q is not an id from driver.NewID", nt.ID)
	}
	now := nt.Now.Truncate(time.Millisecond)
	journal := make([]string, len(nt.Journal))
	for i, e := range nt.Journal {
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("pgstore: encoding journal: %w", err)
		}
		journal[i] = string(b)
	}
	var code int
	err := s.queryRow(ctx, "create_task", s.sql.create, []any{nt.ID, nt.Owner, text(nt.Tool), rawText(nt.Args), now.UnixMilli(),
		nt.TTL.Milliseconds(), nt.PollInterval.Milliseconds(), text(nt.TraceParent), nt.Listed, int64(max(nt.MaxLive, 0)),
		journal, rawObject(nt.Responses), s.grace, s.dispatch}, &code)
	if err != nil {
		return nil, fmt.Errorf("pgstore: create %s: %w", nt.ID, err)
	}
	switch code {
	case 0:
		return nil, driver.ErrExists
	case -1:
		return nil, driver.ErrTooManyTasks
	}
	return &driver.Task{
		ID: nt.ID, Owner: nt.Owner, Tool: nt.Tool, Args: nt.Args,
		Status: driver.StatusWorking, CreatedAt: now, UpdatedAt: now,
		TTL: time.Duration(nt.TTL.Milliseconds()) * time.Millisecond, PollInterval: time.Duration(nt.PollInterval.Milliseconds()) * time.Millisecond,
		TraceParent: nt.TraceParent,
	}, nil
}

// Get implements driver.Store. The owner is compared in the statement, so a
// foreign task and an unknown one cost the same and answer the same:
// nothing of the foreign task leaves the database.
func (s *Store) Get(ctx context.Context, owner, id string) (*driver.Task, error) {
	if owner == "" || !storable(owner) {
		return nil, driver.ErrNotFound
	}
	return s.read(ctx, id, owner)
}

// Peek implements driver.Store.
func (s *Store) Peek(ctx context.Context, id string) (*driver.Task, error) {
	return s.read(ctx, id, "")
}

// read returns the task if owner is empty or owns it.
func (s *Store) read(ctx context.Context, id, owner string) (*driver.Task, error) {
	if !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	var r taskRow
	err := s.queryRow(ctx, "get", s.sql.get, []any{id, owner}, r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: get %s: %w", id, err)
	}
	return r.task(id)
}

// taskRow is the columns of a task that Get reads (taskColumns).
type taskRow struct {
	owner, tool, args, status, message, traceparent string
	created, updated, ttl, poll                     int64
	lease, wake                                     *int64
	result, errObj, waiting, offers                 *string
	cancel                                          bool
}

// taskColumns are the columns taskRow.dest scans, in its order.
const taskColumns = `owner, tool, args, status, status_message, traceparent, {S}.ms(created_at), {S}.ms(updated_at),
  ttl_ms, poll_ms, {S}.ms(lease_until), {S}.ms(wake_at), result, error, waiting::text, offers::text, cancel_requested`

func (r *taskRow) dest() []any {
	return []any{&r.owner, &r.tool, &r.args, &r.status, &r.message, &r.traceparent, &r.created, &r.updated,
		&r.ttl, &r.poll, &r.lease, &r.wake, &r.result, &r.errObj, &r.waiting, &r.offers, &r.cancel}
}

// task builds the task of row r.
func (r *taskRow) task(id string) (*driver.Task, error) {
	t := &driver.Task{
		ID: id, Owner: r.owner, Tool: r.tool, Args: json.RawMessage(r.args),
		Status: driver.Status(r.status), StatusMessage: r.message,
		CreatedAt: fromMs(&r.created), UpdatedAt: fromMs(&r.updated),
		TTL: time.Duration(r.ttl) * time.Millisecond, PollInterval: time.Duration(r.poll) * time.Millisecond,
		CancelRequested: r.cancel, LeaseUntil: fromMs(r.lease), WakeAt: fromMs(r.wake),
		TraceParent: r.traceparent,
	}
	if r.result != nil {
		t.Result = json.RawMessage(*r.result)
	}
	if r.errObj != nil {
		var e driver.ErrorObject
		if err := json.Unmarshal([]byte(*r.errObj), &e); err != nil {
			return nil, fmt.Errorf("pgstore: task %s: decoding error: %w", id, err)
		}
		t.Error = &e
	}
	if t.Status == driver.StatusInputRequired {
		var err error
		if t.InputRequests, err = decodeObject(r.waiting, nil); err == nil {
			t.InputRequests, err = decodeObject(r.offers, t.InputRequests)
		}
		if err != nil {
			return nil, fmt.Errorf("pgstore: task %s: %w", id, err)
		}
	}
	return t, nil
}

// pairs returns the keys and values of m as two arrays (keys made
// storable).
func pairs(m map[string]json.RawMessage) (keys, values []string) {
	keys, values = make([]string, 0, len(m)), make([]string, 0, len(m))
	for k, v := range m {
		keys, values = append(keys, text(k)), append(values, rawText(v))
	}
	return keys, values
}

// Outstanding implements driver.Store: one read-only statement, the owner
// compared in it.
func (s *Store) Outstanding(ctx context.Context, owner, id string, now time.Time) (map[string]json.RawMessage, error) {
	if owner == "" || !storable(owner) || !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	var (
		status          string
		wake            *int64
		leased          bool
		waiting, offers *string
	)
	err := s.queryRow(ctx, "outstanding", s.sql.outstanding, []any{id, owner}, &status, &wake, &leased, &waiting, &offers)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: outstanding %s: %w", id, err)
	}
	out := map[string]json.RawMessage{}
	if driver.Status(status).Terminal() {
		return out, nil
	}
	// The keys a parked task waits for take answers while it is parked,
	// before its deadline and unclaimed, as update_task decides it.
	if status == string(driver.StatusInputRequired) && (wake == nil || *wake > now.UnixMilli()) && !leased {
		if out, err = decodeObject(waiting, out); err != nil {
			return nil, fmt.Errorf("pgstore: outstanding %s: %w", id, err)
		}
	}
	if out, err = decodeObject(offers, out); err != nil {
		return nil, fmt.Errorf("pgstore: outstanding %s: %w", id, err)
	}
	return out, nil
}

// RenewLease implements driver.LeaseRenewer: one statement, which also
// holds the task's message until the lease's new end when the store
// dispatches.
func (s *Store) RenewLease(ctx context.Context, c *driver.Claim, now time.Time, lease time.Duration) error {
	id := c.Task.ID
	if !driver.ValidID(id) {
		return driver.ErrNotFound
	}
	var code int64
	if err := s.queryRow(ctx, "renew_lease", s.sql.renew, []any{id, c.Gen, now.UnixMilli(), lease.Milliseconds(), s.dispatch}, &code); err != nil {
		return fmt.Errorf("pgstore: renew lease %s: %w", id, err)
	}
	switch code {
	case -2:
		return driver.ErrNotFound
	case -1:
		return driver.ErrFenced
	}
	return nil
}

// Update implements driver.Store: one statement, which checks the owner,
// applies the responses and, when they resume the task, moves its due
// time to now plus the enqueue grace (so that the sweeper finds it if the
// caller's enqueue is lost).
func (s *Store) Update(ctx context.Context, owner, id string, responses map[string]json.RawMessage, now time.Time) (bool, error) {
	if owner == "" || !storable(owner) || !driver.ValidID(id) {
		return false, driver.ErrNotFound
	}
	keys, values := pairs(responses)
	var code int
	err := s.queryRow(ctx, "update_task", s.sql.update, []any{owner, id, now.UnixMilli(), keys, values, s.grace, s.dispatch}, &code)
	if err != nil {
		return false, fmt.Errorf("pgstore: update %s: %w", id, err)
	}
	switch code {
	case -1:
		return false, driver.ErrNotFound
	case 2:
		return true, nil
	}
	return false, nil
}

// Cancel implements driver.Store.
func (s *Store) Cancel(ctx context.Context, owner, id string, now time.Time) (driver.Status, bool, error) {
	if owner == "" || !storable(owner) || !driver.ValidID(id) {
		return "", false, driver.ErrNotFound
	}
	var st string
	var ended bool
	err := s.queryRow(ctx, "cancel_task", s.sql.cancel, []any{owner, id, now.UnixMilli(), s.dispatch}, &st, &ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, driver.ErrNotFound
	}
	if err != nil {
		return "", false, fmt.Errorf("pgstore: cancel %s: %w", id, err)
	}
	return driver.Status(st), ended, nil
}

// Claim implements driver.Store.
func (s *Store) Claim(ctx context.Context, id string, now time.Time, lease time.Duration) (*driver.Claim, error) {
	if !driver.ValidID(id) {
		return nil, driver.ErrNotFound
	}
	var (
		code                 string
		gen                  *int64
		att                  *int
		wake                 *int64
		owner, tool, args    *string
		status, message, tp  *string
		created, updated     *int64
		ttl, poll            *int64
		result, errObj, resp *string
		cancel               *bool
		leaseUntil, lost     *int64
		journal              []string
	)
	now = now.Truncate(time.Millisecond)
	err := s.queryRow(ctx, "claim_task", s.sql.claim, []any{id, now.UnixMilli(), lease.Milliseconds(), s.dispatch},
		&code, &gen, &att, &wake, &owner, &tool, &args, &status, &message, &created, &updated, &ttl, &poll,
		&result, &errObj, &cancel, &leaseUntil, &tp, &journal, &resp, &lost)
	if err != nil {
		return nil, fmt.Errorf("pgstore: claim %s: %w", id, err)
	}
	switch code {
	case "NF":
		return nil, driver.ErrNotFound
	case "L":
		return nil, driver.ErrLeased
	case "P", "W":
		task := &driver.Task{ID: id, Status: driver.StatusWorking, WakeAt: fromMs(wake)}
		if code == "P" {
			task.Status = driver.StatusInputRequired
		}
		return &driver.Claim{Task: task}, nil
	}
	r := taskRow{owner: deref(owner), tool: deref(tool), args: deref(args), status: deref(status),
		message: deref(message), traceparent: deref(tp), created: derefInt(created), updated: derefInt(updated),
		ttl: derefInt(ttl), poll: derefInt(poll), lease: leaseUntil, wake: wake, result: result, errObj: errObj,
		cancel: cancel != nil && *cancel}
	task, err := r.task(id)
	if err != nil {
		return nil, err
	}
	if code != "C" { // T, X
		return &driver.Claim{Task: task, Ended: code == "X"}, nil
	}
	c := &driver.Claim{Task: task, Gen: derefInt(gen), Journal: make([]driver.Entry, len(journal)), Lost: fromMs(lost)}
	if att != nil {
		c.Attempts = *att
	}
	for i, e := range journal {
		if err := json.Unmarshal([]byte(e), &c.Journal[i]); err != nil {
			return nil, fmt.Errorf("pgstore: claim %s: journal entry %d: %w", id, i, err)
		}
	}
	if c.Responses, err = decodeObject(resp, map[string]json.RawMessage{}); err != nil {
		return nil, fmt.Errorf("pgstore: claim %s: %w", id, err)
	}
	return c, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// Commit implements driver.Store.
func (s *Store) Commit(ctx context.Context, c *driver.Claim, ch *driver.Change) error {
	id := c.Task.ID
	if !driver.ValidID(id) {
		return driver.ErrNotFound
	}
	op := ch.Op()
	var payload any
	switch op {
	case driver.OpComplete:
		payload = rawText(ch.Complete)
	case driver.OpFail:
		b, err := json.Marshal(ch.Fail)
		if err != nil {
			return fmt.Errorf("pgstore: encoding error: %w", err)
		}
		payload = string(b)
	}
	var msg any
	if ch.StatusMessage != nil {
		msg = text(*ch.StatusMessage)
	}
	var att any
	if ch.SetAttempts != nil {
		att = int64(*ch.SetAttempts)
	}
	entries := make([]string, len(ch.Append))
	// Offers put up and withdrawn by the appended entries (see
	// driver.Change.Append): put up first, then withdrawn, as on Redis.
	offers := map[string]json.RawMessage{}
	var withdrawn []string
	for i, e := range ch.Append {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("pgstore: encoding journal: %w", err)
		}
		entries[i] = string(b)
		switch e.Kind {
		case driver.KindOffer:
			offers[e.Name] = e.Value
		case driver.KindWithdraw:
			withdrawn = append(withdrawn, text(e.Name))
		}
	}
	var park any
	if op == driver.OpPark {
		park = rawObject(ch.Park)
		if park == nil {
			park = "{}"
		}
	}
	var watch []string
	if op == driver.OpSleep {
		for _, k := range ch.WakeOn {
			watch = append(watch, text(k))
		}
	}
	now := ch.Now.Truncate(time.Millisecond)
	var (
		code   int
		n      *int
		status *string
		woke   *bool
	)
	err := s.queryRow(ctx, "commit_task", s.sql.commit, []any{id, c.Gen, now.UnixMilli(), op, ch.StatusMessage != nil, msg,
		att, payload, ms(ch.WakeAt), ch.ParkAny, park, entries, rawObject(offers), nilIfEmpty(withdrawn), nilIfEmpty(watch),
		s.grace, s.dispatch}, &code, &n, &status, &woke)
	if err != nil {
		return fmt.Errorf("pgstore: commit %s: %w", id, err)
	}
	switch code {
	case -2:
		return driver.ErrNotFound
	case -1:
		return driver.ErrFenced
	}
	attempts := c.Attempts
	if n != nil {
		attempts = *n
	}
	c.Committed(ch, driver.Status(deref(status)), attempts, woke != nil && *woke)
	return nil
}

// nilIfEmpty is list, or nil (SQL NULL) when it is empty.
func nilIfEmpty(list []string) any {
	if len(list) == 0 {
		return nil
	}
	return list
}

// CancelRequested implements driver.Store.
func (s *Store) CancelRequested(ctx context.Context, c *driver.Claim) (bool, error) {
	if !driver.ValidID(c.Task.ID) {
		return false, driver.ErrNotFound
	}
	var cancel bool
	var gen int64
	var status string
	err := s.queryRow(ctx, "cancel_requested", s.sql.cancelRequested, []any{c.Task.ID}, &cancel, &gen, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return true, nil // gone: the worker stops
	}
	if err != nil {
		return false, fmt.Errorf("pgstore: cancel flag %s: %w", c.Task.ID, err)
	}
	return cancel || gen != c.Gen || driver.Status(status).Terminal(), nil
}

// Due implements driver.Store. In the same statement it deletes up to
// Options.PurgeBatch tasks past their expiry (with their journals): the
// sweeper's purge.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]driver.DueTask, error) {
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	ctx, span := s.span(ctx, "due")
	rows, err := s.pool.Query(ctx, s.sql.due, now.UnixMilli(), int64(limit), int64(s.purge))
	var due []driver.DueTask
	if err == nil {
		var id string
		var at int64
		_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error {
			due = append(due, driver.DueTask{ID: id, At: time.UnixMilli(at).UTC()})
			return nil
		})
	}
	endSpan(span, err)
	if err != nil {
		return nil, fmt.Errorf("pgstore: due: %w", err)
	}
	return due, nil
}

// Schedule implements driver.Store.
func (s *Store) Schedule(ctx context.Context, id string, at time.Time) error {
	if !driver.ValidID(id) {
		return nil
	}
	if _, err := s.exec(ctx, "schedule", s.sql.schedule, id, ms(at)); err != nil {
		return fmt.Errorf("pgstore: schedule %s: %w", id, err)
	}
	return nil
}

// Reschedule implements driver.Store.
func (s *Store) Reschedule(ctx context.Context, id string, from, to time.Time) (bool, error) {
	if !driver.ValidID(id) {
		return false, nil
	}
	n, err := s.exec(ctx, "reschedule", s.sql.reschedule, id, from.UnixMilli(), ms(to))
	if err != nil {
		return false, fmt.Errorf("pgstore: reschedule %s: %w", id, err)
	}
	return n == 1, nil
}

// TryLock takes the lock name for holder until hold has passed, on the
// database's clock, unless it is held (by anyone) already: it reports
// whether it took it. The deployment's sweepers take turns with it.
func (s *Store) TryLock(ctx context.Context, name, holder string, hold time.Duration) (bool, error) {
	n, err := s.exec(ctx, "lock", s.sql.lock, text(name), text(holder), hold.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("pgstore: lock %s: %w", name, err)
	}
	return n == 1, nil
}
