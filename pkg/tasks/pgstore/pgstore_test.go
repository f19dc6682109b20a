package pgstore_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
	"github.com/mcptasks/mcptasks/pkg/tasks/storetest"
)

// pool returns a pool of the server at url, configured as the store's,
// closed when t ends.
func pool(t *testing.T, url string) *pgxpool.Pool { return testpg.Pool(t, url) }

// TestStoreContract runs the Store contract on PostgreSQL, in a schema of
// its own per case, with and without dispatching.
func TestStoreContract(t *testing.T) {
	url := testpg.Start(t)
	p := pool(t, url)
	for _, dispatch := range []bool{false, true} {
		name := "plain"
		if dispatch {
			name = "dispatch"
		}
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) driver.Store {
				s := pgstore.New(p, &pgstore.Options{Schema: testpg.Schema(t, url), Dispatch: dispatch})
				t.Cleanup(s.Close)
				return s
			})
		})
	}
}

// TestStoreContractThroughPgBouncer runs the Store contract through a
// transaction-mode pooler (PgBouncer, as Neon's pooled URL and RDS Proxy
// are), in pgx's exec mode (PoolConfig's default) and its simple
// protocol; Watch listens on the direct URL.
func TestStoreContractThroughPgBouncer(t *testing.T) {
	direct := testpg.StartServer(t).URL
	pooled := testpg.StartPgBouncer(t, direct)
	listen, err := pgstore.ConnConfig(direct)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"", "simple_protocol"} {
		name, url := "exec", pooled
		if mode != "" {
			name, url = mode, pooled+"&default_query_exec_mode="+mode
		}
		t.Run(name, func(t *testing.T) {
			p := pool(t, url)
			storetest.Run(t, func(t *testing.T) driver.Store {
				s := pgstore.New(p, &pgstore.Options{Schema: testpg.Schema(t, url), Dispatch: true, Listen: listen})
				t.Cleanup(s.Close)
				return s
			})
		})
	}
}

// httptestServer serves h until tb ends and returns its URL.
func httptestServer(tb testing.TB, h http.Handler) string {
	s := httptest.NewServer(h)
	tb.Cleanup(s.Close)
	return s.URL
}
