package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/pgqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// A tasks server on PostgreSQL: the pool in the store's configuration
// (fit for a transaction-mode pooler), LISTEN on the direct URL, the
// store dispatching into the queue of the same schema, and this process's
// workers consuming it. pkg/bundle does the same from DATABASE_URL.
func Example() {
	ctx := context.Background()
	cfg, err := pgstore.PoolConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	direct, err := pgstore.ConnConfig(os.Getenv("DATABASE_URL_UNPOOLED"))
	if err != nil {
		log.Fatal(err)
	}
	q := pgqueue.New(pool, &pgqueue.Options{Listen: direct})
	store := pgstore.New(pool, &pgstore.Options{Dispatch: true, Listen: direct})
	defer store.Close()
	srv := tasks.New(&mcp.Implementation{Name: "reports", Version: "1"}, nil, store, q, nil)
	// ... tasks.AddTool(srv, ...), serve tasks.NewHandler(srv, nil) ...
	// Four workers until ctx ends: the store's commits settle their
	// messages.
	q.Consume(ctx, 4, func(ctx context.Context, id string) (queue.Settle, error) {
		res, err := srv.Advance(ctx, id)
		return queue.SettleOf(res.Settled, res.Status.Terminal()), err
	})
}

// Migrate creates the schema beforehand, as `mcptasks migrate` does, for
// a deployment whose own database role may not create tables.
func ExampleMigrate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL_UNPOOLED"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	from, to, err := pgstore.Migrate(ctx, pool, "mcptasks")
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("schema mcptasks: version %d to %d", from, to)
}
