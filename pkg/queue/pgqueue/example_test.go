package pgqueue_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/pkg/queue/pgqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// A message delayed by a minute, received when due, and acknowledged once
// handled: a crashed consumer's message comes back after the visibility
// timeout.
func ExampleQueue_Receive() {
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
	q := pgqueue.New(pool, &pgqueue.Options{Visibility: 2 * time.Minute})
	if err := q.Enqueue(ctx, "task-id", time.Now().Add(time.Minute)); err != nil {
		log.Fatal(err)
	}
	for {
		d, ok, wait, err := q.Receive(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if !ok {
			time.Sleep(wait)
			continue
		}
		log.Printf("handling %s", d.TaskID)
		if err := q.Ack(ctx, d); err != nil {
			log.Fatal(err)
		}
		return
	}
}
