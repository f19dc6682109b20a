package pgstore_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/internal/pgschema"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
	"github.com/mcptasks/mcptasks/pkg/tasks/storetest"
)

// ListAll orders the tasks of one millisecond by id in byte order, as the
// contract says and the Redis store does, in a database whose collation
// orders text otherwise (ICU's English: case and punctuation count less
// than letters), and pages through them without skipping or repeating.
func TestListAllOrdersIDsBytewise(t *testing.T) {
	srv := testpg.StartServer(t)
	admin := pool(t, srv.URL)
	ctx := t.Context()
	if _, err := admin.Exec(ctx, `CREATE DATABASE english TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/english"
	p := pool(t, u.String())
	var mixed bool
	if err := p.QueryRow(ctx, `SELECT 'B' < 'a'`).Scan(&mixed); err != nil || mixed {
		t.Fatalf("the database orders 'B' < 'a' = %v (%v), want an ICU English collation that does not", mixed, err)
	}
	s := pgstore.New(p, &pgstore.Options{Schema: testpg.Schema(t, u.String())})
	t.Cleanup(s.Close)

	now := time.Now().Truncate(time.Millisecond)
	var ids []string
	for _, first := range []string{"-", "0", "B", "_", "a", "b", "Z"} {
		id := first + strings.Repeat("x", 20) + "A"
		if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "o", Tool: "t", Args: json.RawMessage(`{}`), TTL: time.Hour, Now: now}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	for _, limit := range []int{1, 3, 10} {
		var got []string
		cursor := ""
		for range len(ids) + 1 {
			ts, next, err := s.ListAll(ctx, nil, cursor, limit, now)
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range ts {
				got = append(got, tk.ID)
			}
			if cursor = next; cursor == "" {
				break
			}
		}
		if !slices.Equal(got, ids) {
			t.Errorf("ListAll in pages of %d = %v, want %v", limit, got, ids)
		}
	}
}

// A schema of version 1 (as the store before the listing made it) is
// upgraded on the store's first use: the index of every task is added, and
// the tasks created before are listed.
func TestStoreUpgradesSchema(t *testing.T) {
	url := testpg.Start(t)
	p := pool(t, url)
	schema := testpg.Schema(t, url)
	ctx := t.Context()
	if from, to, err := pgschema.MigrateTo(ctx, p, schema, 1); err != nil || from != 0 || to != 1 {
		t.Fatalf("MigrateTo(1) = %d, %d, %v", from, to, err)
	}
	old := pgstore.New(p, &pgstore.Options{Schema: schema, Migrated: true}) // as a process of version 1 finds it
	t.Cleanup(old.Close)
	now := time.Now()
	id := driver.NewID()
	if _, err := old.Create(ctx, &driver.NewTask{ID: id, Owner: "o", Tool: "t", Args: json.RawMessage(`{}`), TTL: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	index := func() bool {
		t.Helper()
		var n int
		if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'tasks_created'`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if index() {
		t.Fatal("a schema of version 1 has the index of version 2")
	}

	s := pgstore.New(p, &pgstore.Options{Schema: schema})
	t.Cleanup(s.Close)
	ts, _, err := s.ListAll(ctx, &inspect.Filter{Owner: "o"}, "", 10, now)
	if err != nil || len(ts) != 1 || ts[0].ID != id {
		t.Fatalf("ListAll on the upgraded schema = %v, %v; want %s", ts, err, id)
	}
	if v, err := pgschema.Installed(ctx, p, schema); err != nil || v != pgstore.SchemaVersion {
		t.Errorf("after the first use the schema is at version %d (%v), want %d", v, err, pgstore.SchemaVersion)
	}
	if !index() {
		t.Error("the upgrade did not add the index tasks_created")
	}
	if from, to, err := pgstore.Migrate(ctx, p, schema); err != nil || from != to || to != pgstore.SchemaVersion {
		t.Errorf("Migrate after the upgrade = %d, %d, %v; want current", from, to, err)
	}
}

// BenchmarkCreateIndexed measures what the index of every task
// (tasks_created, schema version 2) costs a creation: each iteration
// creates a task in a schema with the index, then one in a schema of
// version 1 without it, on one server, and the two are reported side by
// side (ns/create-indexed, ns/create-unindexed), with the index's size
// per task (index-bytes/task) and the statements of a ListAll page
// (statements/page: one).
func BenchmarkCreateIndexed(b *testing.B) {
	stmts := &statements{}
	url := testpg.Start(b)
	p := testpg.Pool(b, url, func(c *pgxpool.Config) { c.ConnConfig.Tracer = stmts })
	ctx := b.Context()
	var stores [2]*pgstore.Store
	schemas := [2]string{testpg.Schema(b, url), testpg.Schema(b, url)}
	for k, version := range []int{pgstore.SchemaVersion, 1} {
		if _, _, err := pgschema.MigrateTo(ctx, p, schemas[k], version); err != nil {
			b.Fatal(err)
		}
		stores[k] = pgstore.New(p, &pgstore.Options{Schema: schemas[k], Migrated: true})
		b.Cleanup(stores[k].Close)
	}
	now := time.Now()
	spent := storetest.CreateSideBySide(b, now, stores[0], stores[1])
	b.StopTimer()
	var size int64
	if err := p.QueryRow(ctx, `SELECT pg_relation_size(($1::text || '.tasks_created')::regclass)`, schemas[0]).Scan(&size); err != nil {
		b.Fatal(err)
	}
	before := stmts.n.Load()
	if _, _, err := stores[0].ListAll(ctx, &inspect.Filter{Owner: "alice"}, "", 50, now); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(spent[0].Nanoseconds()), "ns/create-indexed")
	b.ReportMetric(float64(spent[1].Nanoseconds()), "ns/create-unindexed")
	b.ReportMetric(float64(size)/float64(b.N), "index-bytes/task")
	b.ReportMetric(float64(stmts.n.Load()-before), "statements/page")
}
