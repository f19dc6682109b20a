package pgqueue_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/pgqueue"
	"github.com/mcptasks/mcptasks/pkg/queue/queuetest"
)

// visibility is the short visibility timeout of the contract runs.
const visibility = 300 * time.Millisecond

// patience bounds waits for something that must happen; only a hang or a
// lost message reaches it.
const patience = 15 * time.Second

// pool returns a pool of the server at url, configured as the store's,
// closed when t ends.
func pool(t *testing.T, url string) *pgxpool.Pool { return testpg.Pool(t, url) }

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// TestContract runs the shared queue contract on PostgreSQL, a schema of
// its own per case.
func TestContract(t *testing.T) {
	url := testpg.Start(t)
	p := pool(t, url)
	queuetest.Run(t, func(t *testing.T) queuetest.Harness {
		return harness(pgqueue.New(p, &pgqueue.Options{Schema: testpg.Schema(t, url), Visibility: visibility,
			Poll: 20 * time.Millisecond, Logger: logger(t)}), visibility)
	})
}

// harness adapts the pull-style queue q to the contract.
func harness(q *pgqueue.Queue, vis time.Duration) queuetest.Harness {
	return queuetest.Pull[pgqueue.Delivery]{Q: q, Visibility: vis, Receive: q.Receive, Ack: q.Ack, Retry: q.Retry,
		ID: func(d pgqueue.Delivery) string { return d.TaskID }}
}

// Consume hands every enqueued id to a handler, once when it acknowledges;
// an enqueue wakes idle consumers at once (through the LISTEN of the
// consuming process, not its poll, which is an hour here); a delayed
// message is handled at its time; a handler's error makes it due again.
func TestConsume(t *testing.T) {
	url := testpg.Start(t)
	p := pool(t, url)
	schema := testpg.Schema(t, url)
	q := pgqueue.New(p, &pgqueue.Options{Schema: schema, Visibility: time.Minute, Poll: time.Hour, Logger: logger(t)})
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	handled := map[string]int{}
	got := make(chan string, 100)
	failOnce := map[string]bool{"flaky": true}
	var wg sync.WaitGroup
	wg.Go(func() {
		q.Consume(ctx, 3, func(_ context.Context, id string) (queue.Settle, error) {
			mu.Lock()
			handled[id]++
			fail := failOnce[id]
			delete(failOnce, id)
			mu.Unlock()
			if fail {
				return queue.Ack, context.DeadlineExceeded
			}
			got <- id
			return queue.Ack, nil
		})
	})
	defer func() { cancel(); wg.Wait() }()
	wait := func(want string) {
		t.Helper()
		select {
		case id := <-got:
			if id != want {
				t.Fatalf("handled %q, want %q", id, want)
			}
		case <-time.After(patience):
			t.Fatalf("%q never handled", want)
		}
	}
	// Let the consumers go idle first, listening: then only a notification
	// wakes them before their next look, an hour away.
	waitListening(t, p, schema+".queue")
	time.Sleep(1500 * time.Millisecond) // past the look of a fresh subscription
	for _, id := range []string{"a", "b", "c"} {
		if err := q.Enqueue(ctx, id, time.Time{}); err != nil {
			t.Fatal(err)
		}
		wait(id)
	}
	at := time.Now().Add(300 * time.Millisecond)
	if err := q.Enqueue(ctx, "later", at); err != nil {
		t.Fatal(err)
	}
	wait("later")
	if time.Now().Before(at) {
		t.Errorf("delayed message handled %v early", time.Until(at))
	}
	if err := q.Enqueue(ctx, "flaky", time.Time{}); err != nil {
		t.Fatal(err)
	}
	wait("flaky")
	mu.Lock()
	defer mu.Unlock()
	for id, n := range map[string]int{"a": 1, "b": 1, "c": 1, "later": 1, "flaky": 2} {
		if handled[id] != n {
			t.Errorf("%q handled %d times, want %d", id, handled[id], n)
		}
	}
}

// waitListening waits until a session LISTENs on channel.
func waitListening(t *testing.T, p *pgxpool.Pool, channel string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		var n int
		err := p.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN "' || $1::text || '"'`, channel).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody LISTENs on %s", channel)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
