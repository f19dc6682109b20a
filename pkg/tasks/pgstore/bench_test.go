package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/queue/pgqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// The benchmarks of the Postgres store, the counterparts of pkg/tasks's
// BenchmarkWorkflow10Steps and BenchmarkOps on Redis (scripts/bench runs
// both): an engine on pgstore (dispatching into pgqueue, as the bundle
// builds it) served over httptest, the statements (each one round trip)
// its pool sends counted by a pgx tracer.

// statements counts the statements a pool sends.
type statements struct{ n atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// engine is a tasks server on the Postgres store.
type engine struct {
	srv    *tasks.Server
	store  *pgstore.Store
	pool   *pgxpool.Pool
	stmts  *statements
	c      *mcptest.Client
	server *testpg.Server // nil on a DATABASE_URL
	schema string
}

func newEngine(b *testing.B, register func(*tasks.Server)) *engine {
	e := &engine{stmts: &statements{}}
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		e.server = testpg.StartServer(b)
		url = e.server.URL
	}
	e.pool = testpg.Pool(b, url, func(c *pgxpool.Config) { c.ConnConfig.Tracer = e.stmts })
	e.schema = testpg.Schema(b, url)
	if _, _, err := pgstore.Migrate(context.Background(), e.pool, e.schema); err != nil {
		b.Fatal(err)
	}
	q := pgqueue.New(e.pool, &pgqueue.Options{Schema: e.schema, Migrated: true})
	e.store = pgstore.New(e.pool, &pgstore.Options{Schema: e.schema, Dispatch: true, Migrated: true, EnqueueGrace: time.Second})
	b.Cleanup(e.store.Close)
	e.srv = tasks.New(&mcp.Implementation{Name: "bench", Version: "1"}, nil, e.store, q,
		&tasks.Options{Logger: slog.New(slog.DiscardHandler), Anonymous: true})
	register(e.srv)
	ts := httptestServer(b, tasks.NewHandler(e.srv, nil))
	e.c = mcptest.NewClient(strings.TrimPrefix(ts, "http://"), true)
	return e
}

// serverCPU is the database server's CPU time so far (0 on a DATABASE_URL).
func (e *engine) serverCPU() time.Duration {
	if e.server == nil {
		return 0
	}
	return e.server.CPU()
}

// processCPU is this process's CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func noopTools(steps int) func(*tasks.Server) {
	return func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "noop", Description: "no-op steps"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
				for i := range steps {
					if _, err := tasks.Do(st, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
						return nil, err
					}
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "ask", Description: "one input round"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
				_, err := st.Input("q", map[string]tasks.InputRequest{"q": {Method: "elicitation/create",
					Params: map[string]any{"mode": "form", "message": "?", "requestedSchema": map[string]any{"type": "object"}}}})
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, err
			})
	}
}

// BenchmarkWorkflow10Steps measures worker throughput on PostgreSQL: a
// no-op 10-step workflow advanced one step per invocation (Advance called
// directly, as a queue-triggered function would), the statements (round
// trips) per step, and the CPU of this process and of the server.
func BenchmarkWorkflow10Steps(b *testing.B) {
	e := newEngine(b, noopTools(10))
	ctx := context.Background()
	ids := make([]string, b.N)
	for i := range ids {
		var tk mcptest.Task
		e.c.Call(b, "tools/call", map[string]any{"name": "noop", "arguments": map[string]any{}}).Decode(b, &tk)
		ids[i] = tk.TaskID
	}
	e.stmts.n.Store(0)
	serverCPU, cpu := e.serverCPU(), processCPU()
	b.ResetTimer()
	steps := 0
	for _, id := range ids {
		for {
			res, err := e.srv.Advance(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			steps += res.Steps
			if res.Status.Terminal() {
				break
			}
		}
	}
	b.StopTimer()
	if steps != 10*b.N {
		b.Fatalf("ran %d steps, want %d", steps, 10*b.N)
	}
	if c := processCPU() - cpu; c > 0 {
		b.ReportMetric(float64(c.Microseconds())/float64(steps), "cpu-µs/step")
	}
	if c := e.serverCPU() - serverCPU; c > 0 {
		b.ReportMetric(float64(c.Microseconds())/float64(steps), "pg-cpu-µs/step")
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
	b.ReportMetric(float64(e.stmts.n.Load())/float64(steps), "trips/step")
}

// BenchmarkOps measures the store cost of the client-facing operations on
// PostgreSQL: the statements (round trips) of a task-creating tools/call,
// a tasks/get and a tasks/update, and the bytes of one completed task's
// rows (its tasks row and journal entries, as pg_column_size counts them).
func BenchmarkOps(b *testing.B) {
	e := newEngine(b, noopTools(1))
	ctx := context.Background()
	var created mcptest.Task
	e.stmts.n.Store(0)
	e.c.Call(b, "tools/call", map[string]any{"name": "noop", "arguments": map[string]any{}}).Decode(b, &created)
	tripsCreate := e.stmts.n.Load()

	e.stmts.n.Store(0)
	e.c.Get(b, created.TaskID)
	tripsGet := e.stmts.n.Load()

	var asking mcptest.Task
	e.c.Call(b, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}).Decode(b, &asking)
	if _, err := e.srv.Advance(ctx, asking.TaskID); err != nil {
		b.Fatal(err)
	}
	e.stmts.n.Store(0)
	e.c.Call(b, "tasks/update", map[string]any{"taskId": asking.TaskID, "inputResponses": map[string]any{"q": map[string]any{"action": "decline"}}})
	tripsUpdate := e.stmts.n.Load()

	for {
		res, err := e.srv.Advance(ctx, created.TaskID)
		if err != nil {
			b.Fatal(err)
		}
		if res.Status.Terminal() {
			break
		}
	}
	var bytes int64
	err := e.pool.QueryRow(ctx, `SELECT (SELECT pg_column_size(t.*) FROM `+e.schema+`.tasks t WHERE id = $1::text)
  + coalesce((SELECT sum(pg_column_size(j.*)) FROM `+e.schema+`.journal j WHERE task_id = $1::text), 0)`, created.TaskID).Scan(&bytes)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		e.c.Get(b, created.TaskID)
	}
	b.StopTimer()
	b.ReportMetric(float64(tripsCreate), "trips/create")
	b.ReportMetric(float64(tripsGet), "trips/get")
	b.ReportMetric(float64(tripsUpdate), "trips/update")
	b.ReportMetric(float64(bytes), "bytes/completed-task")
}
