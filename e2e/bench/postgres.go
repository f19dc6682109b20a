package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
)

// pgProc is a PostgreSQL server for the run (testpg.Launch: a throwaway
// cluster, durability off as for redis-server's --save ""), counting its
// statements with pg_stat_statements.
type pgProc struct {
	srv  *testpg.Server
	stop func()
	url  string
	pool *pgxpool.Pool
}

func startPostgres() (*pgProc, error) {
	srv, stop, err := testpg.Launch("shared_preload_libraries=pg_stat_statements", "track_functions=pl")
	if err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	p := &pgProc{srv: srv, stop: stop, url: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if p.pool, err = pgxpool.New(ctx, srv.URL); err == nil {
		_, err = p.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
	}
	if err != nil {
		p.close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return p, nil
}

func (p *pgProc) close() {
	if p.pool != nil {
		p.pool.Close()
	}
	p.stop()
}

// statementsQuery reads the statements the store's processes ran (each
// one round trip), by statement: pg_stat_statements counts a statement
// when it ends (unlike pg_stat_database, whose counts a backend may keep
// for seconds), at top level only (a function's own statements are not
// counted apart). The run's own readings touch pg_stat_statements and
// are left out.
const statementsQuery = `SELECT query, calls FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'`

// statements returns the calls of each statement so far, keyed by what
// it is: the store's function it calls, or the first words of its SQL.
func (p *pgProc) statements() map[string]int64 {
	rows, err := p.pool.Query(context.Background(), statementsQuery)
	if err != nil {
		log.Fatalf("pg_stat_statements: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			log.Fatal(err)
		}
		out[statementName(q)] += n
	}
	return out
}

// statementName names a statement: the mcptasks function it calls, or
// its first words.
func statementName(q string) string {
	for _, fn := range []string{"create_task", "update_task", "cancel_task", "claim_task", "commit_task", "enqueue", "receive"} {
		if strings.Contains(q, `"mcptasks".`+fn+`(`) {
			return fn
		}
	}
	f := strings.Fields(q)
	return strings.Join(f[:min(len(f), 3)], " ")
}

// commands is how many statements the store's processes have run.
func (p *pgProc) commands() int64 {
	var n int64
	for _, v := range p.statements() {
		n += v
	}
	return n
}

// cpu is the CPU seconds of every postgres process so far.
func (p *pgProc) cpu() float64 { return p.srv.CPU().Seconds() }

// relationBytes is the size of the store's tables with their indexes and
// TOAST (pg_total_relation_size), after a checkpoint of the statistics.
func (p *pgProc) relationBytes() int64 {
	var n int64
	err := p.pool.QueryRow(context.Background(), `SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'mcptasks' AND c.relkind = 'r'`).Scan(&n)
	if err != nil {
		log.Fatalf("pg_total_relation_size: %v", err)
	}
	return n
}

// pgCostPerTask is costPerTask on PostgreSQL: statements (transactions)
// per completed 1-step task with one tasks/get, the calls of each
// function, and bytes: the growth of the tables (with indexes and dead
// row versions, as the server holds them before a vacuum), the bytes of
// one completed task's rows, and every table's size per task.
func pgCostPerTask(p *proc, pg *pgProc, n int) Cost {
	c := &client{url: p.url}
	for range 20 { // warm up: connections, the functions' plans
		waitDone(c, createOneStep(c), 2*time.Millisecond)
	}
	calls0, size0 := pg.statements(), pg.relationBytes()
	ids, gets := completeTasks(c, n)
	// The polls beyond one per task are taken off the statement that
	// tasks/get runs (its first words), one each.
	calls1, size1 := pg.statements(), pg.relationBytes()
	cost := Cost{Variant: "postgres", Store: "postgres", Tasks: n, ByCommand: map[string]float64{}, Keys: map[string]int64{},
		UsedMemory: float64(size1-size0) / float64(n)}
	for name, v := range calls1 {
		d := float64(v - calls0[name])
		if name == "SELECT owner, tool," { // tasks/get and Peek
			d -= float64(gets - n)
		}
		if name == "SELECT sum(pg_total_relation_size(c.oid))" {
			continue // the run's own reading
		}
		if per := d / float64(n); per > 0.005 {
			cost.ByCommand[name] = per
			cost.Commands += per
		}
	}
	id := ids[n/2]
	for key, q := range map[string]string{
		"tasks row":    `SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM mcptasks.tasks t WHERE id = $1::text`,
		"journal rows": `SELECT coalesce(sum(pg_column_size(j.*)), 0) FROM mcptasks.journal j WHERE task_id = $1::text`,
	} {
		var b int64
		if err := pg.pool.QueryRow(context.Background(), q, id).Scan(&b); err != nil {
			log.Fatal(err)
		}
		cost.Keys[key] = b
		cost.KeyBytes += b
	}
	if err := pg.pool.QueryRow(context.Background(), `SELECT count(*) FROM mcptasks.tasks`).Scan(&cost.AllKeys); err != nil {
		log.Fatal(err)
	}
	cost.AllKeyBytes = float64(size1) / float64(cost.AllKeys)
	return cost
}

// printPGCost prints a PostgreSQL cost (see pgCostPerTask).
func printPGCost(c Cost) {
	fmt.Printf("\nPostgreSQL cost of a completed 1-step task (create, one step, completed, one tasks/get; mean of %d):\n", c.Tasks)
	var calls []string
	for k, v := range c.ByCommand {
		calls = append(calls, fmt.Sprintf("%s %.2f", k, v))
	}
	slices.Sort(calls)
	fmt.Printf("- %.1f statements (pg_stat_statements, each one round trip): %s\n", c.Commands, strings.Join(calls, ", "))
	fmt.Printf("- table growth (with indexes, TOAST and dead row versions before a vacuum) %.0f bytes per task; one completed task's rows %d bytes %v; all %d tasks' tables afterwards: %.0f bytes per task\n",
		c.UsedMemory, c.KeyBytes, c.Keys, c.AllKeys, c.AllKeyBytes)
}
