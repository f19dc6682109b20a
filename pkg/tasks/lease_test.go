package tasks_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// errCutOff is what a worker cut off from the store gets (see cutOff).
var errCutOff = errors.New("connection to the store lost")

// cutOff is a worker's view of the store that can be cut: from then on,
// every call it makes under a claim fails, as for a worker process that
// died or lost its network mid-step (its goroutines, which a test cannot
// kill, can then change nothing). Claims before the cut work.
type cutOff struct {
	*redisstore.Store
	cut atomic.Bool
}

func (s *cutOff) RenewLease(ctx context.Context, c *driver.Claim, now time.Time, lease time.Duration) error {
	if s.cut.Load() {
		return errCutOff
	}
	return s.Store.RenewLease(ctx, c, now, lease)
}

func (s *cutOff) Commit(ctx context.Context, c *driver.Claim, ch *driver.Change) error {
	if s.cut.Load() {
		return errCutOff
	}
	return s.Store.Commit(ctx, c, ch)
}

func (s *cutOff) CancelRequested(ctx context.Context, c *driver.Claim) (bool, error) {
	if s.cut.Load() {
		return false, errCutOff
	}
	return s.Store.CancelRequested(ctx, c)
}

// leaseTool registers "lease_job": a quick step "prepare", then a step
// "work" whose first attempt reports on started and blocks until release
// closes (a worker stuck, then killed); later attempts report on started
// and return at once. runs counts each step's runs.
func leaseTool(started chan<- int, release <-chan struct{}, runs map[string]*atomic.Int32) func(*tasks.Server) {
	return func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "lease_job", Description: "two steps"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if _, err := tasks.Do(st, "prepare", func(context.Context) (int, error) { return int(runs["prepare"].Add(1)), nil }); err != nil {
					return nil, err
				}
				v, err := tasks.Do(st, "work", func(ctx context.Context) (int, error) {
					n := int(runs["work"].Add(1))
					started <- n
					if n == 1 {
						<-release
					}
					return n, nil
				})
				if err != nil {
					return nil, err
				}
				return text("done by attempt " + string(rune('0'+v))), nil
			})
	}
}

// A worker that dies mid-step (cut off from the store, as a process killed
// with SIGKILL is) loses its claim when its short lease runs out, without
// a sweeper: the task's message, held until the lease's end and moved at
// each renewal, reaches another worker then, whose claim reports the lost
// worker and journals it as history. Its next attempt runs the step again
// (it was never journaled), no journaled step runs twice, and the dead
// worker's late write is fenced. The step's budget (30s) is the lease the
// claim took before: there the other worker would wait for it.
func TestDeadWorkerLosesItsLease(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		const lease = time.Second
		opts := tasks.Options{Lease: lease, MaxDuration: 30 * time.Second}
		started, release := make(chan int, 4), make(chan struct{})
		runs := map[string]*atomic.Int32{"prepare": {}, "work": {}}
		register := leaseTool(started, release, runs)
		h := newHarness(t, backend, opts, register)

		// The worker that dies: a server of its own on a view of the
		// store that is cut, consuming the queue as another process.
		dying := &cutOff{Store: h.store}
		opts.Anonymous, opts.Now = true, h.clock.Now
		srvA := tasks.New(&mcp.Implementation{Name: "test", Version: "1"}, nil, dying, h.q, &opts)
		register(srvA)
		qA := redisqueue.New(h.rc, &redisqueue.Options{Key: h.prefix + "{queue}", Poll: 5 * time.Millisecond, Visibility: 5 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			qA.Consume(ctx, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
				res, err := srvA.Advance(ctx, id)
				return redisqueue.SettleOf(res.Settled, res.Status.Terminal()), err
			})
		})
		t.Cleanup(func() { cancel(); wg.Wait() })
		t.Cleanup(func() { close(release) })

		id := h.create(t, "lease_job", nil)
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the step never started")
		}
		// Let the worker renew its lease a few times, then cut it off.
		time.Sleep(2 * lease)
		dying.cut.Store(true)
		killed := time.Now()
		h.work(t, 1) // the other worker
		select {
		case n := <-started:
			if n != 2 {
				t.Fatalf("attempt %d of the step started, want 2", n)
			}
			if after := time.Since(killed); after > opts.MaxDuration/2 {
				t.Errorf("the next attempt started %v after the worker died, want about the lease (%v)", after, lease)
			} else {
				t.Logf("the next attempt started %v after the worker died (lease %v)", after.Round(time.Millisecond), lease)
			}
		case <-time.After(opts.MaxDuration):
			t.Fatalf("no other attempt within the step's budget (%v) after the worker died", opts.MaxDuration)
		}
		done := h.wait(t, id)
		if done.Status != "completed" || textOf(t, done.Result) != "done by attempt 2" {
			t.Fatalf("task ended %+v %s", done, done.Result)
		}
		if n := runs["prepare"].Load(); n != 1 {
			t.Errorf("the journaled step ran %d times, want 1", n)
		}
		rec, err := h.store.Inspect(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		var lost []driver.Entry
		for _, e := range rec.Journal {
			if e.Kind == driver.KindLost {
				lost = append(lost, e)
			}
		}
		if len(lost) != 1 || lost[0].Name != "work" || lost[0].Attempt != 1 || lost[0].At.Before(killed.Add(-lease)) || !lost[0].Until.After(lost[0].At) {
			t.Errorf("journaled lost attempts %+v, want one of step work, attempt 1, its lease's end after the cut and its re-delivery after that", lost)
		}
		// The dead worker's step returns at last; its write is fenced (it
		// would be even if it reached the store).
		dying.cut.Store(false)
	})
}

// pushQueue is a queue like SQS or QStash: every Enqueue is a message of
// its own, delivered at its time on deliveries (no deduplication, no
// Defer). It is not a tasks.deferrer.
type pushQueue struct {
	deliveries chan string
	mu         sync.Mutex
	sent       []time.Time
}

func (q *pushQueue) MaxDelay() time.Duration { return 15 * time.Minute }

func (q *pushQueue) Enqueue(ctx context.Context, id string, at time.Time) error {
	q.mu.Lock()
	q.sent = append(q.sent, at)
	q.mu.Unlock()
	time.AfterFunc(time.Until(at), func() { q.deliveries <- id })
	return nil
}

// On a queue that keeps no message per task (SQS, QStash), a worker that
// renews its lease sends a delayed message due at each renewed lease's
// end; when it dies, the last one reaches another worker when the lease
// runs out.
func TestDeadWorkerLosesItsLeaseOnAPushQueue(t *testing.T) {
	const lease = time.Second
	opts := tasks.Options{Lease: lease, MaxDuration: 30 * time.Second, Anonymous: true}
	started, release := make(chan int, 4), make(chan struct{})
	runs := map[string]*atomic.Int32{"prepare": {}, "work": {}}
	register := leaseTool(started, release, runs)
	store := redisstore.New(newRedis(t, "redis-server"), &redisstore.Options{Prefix: "e" + driver.NewID() + ":"})
	q := &pushQueue{deliveries: make(chan string, 64)}
	dying := &cutOff{Store: store}
	srvA := tasks.New(&mcp.Implementation{Name: "test", Version: "1"}, nil, dying, q, &opts)
	srvB := tasks.New(&mcp.Implementation{Name: "test", Version: "1"}, nil, store, q, &opts)
	register(srvA)
	register(srvB)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { close(release) })
	ctx := context.Background()
	// The first worker takes one delivery at a time until it is stuck.
	stuck := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case id := <-q.deliveries:
				_, _ = srvA.Advance(ctx, id)
			case <-stuck:
				return
			}
		}
	})
	created, err := srvA.CreateTask(ctx, "anonymous", "lease_job", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := created.(*tasks.CreateTaskResult).TaskID
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the step never started")
	}
	close(stuck)
	time.Sleep(2 * lease)
	dying.cut.Store(true)
	killed := time.Now()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	wg.Go(func() {
		for {
			select {
			case id := <-q.deliveries:
				_, _ = srvB.Advance(ctx, id)
			case <-stop:
				return
			}
		}
	})
	select {
	case n := <-started:
		if n != 2 {
			t.Fatalf("attempt %d of the step started, want 2", n)
		}
		if after := time.Since(killed); after > opts.MaxDuration/2 {
			t.Errorf("the next attempt started %v after the worker died, want about the lease (%v)", after, lease)
		}
	case <-time.After(opts.MaxDuration):
		t.Fatalf("no other attempt within the step's budget (%v) after the worker died", opts.MaxDuration)
	}
	q.mu.Lock()
	sent := len(q.sent)
	q.mu.Unlock()
	// The creation's message, one per renewal (about three per lease
	// for two leases), the next turns of the other worker.
	if sent < 4 {
		t.Errorf("%d messages sent, want the creation's and one per renewal", sent)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		tk, err := store.Peek(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status.Terminal() {
			if tk.Status != driver.StatusCompleted {
				t.Fatalf("task ended %s", tk.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still %s 30s after the next attempt", tk.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := runs["prepare"].Load(); n != 1 {
		t.Errorf("the journaled step ran %d times, want 1", n)
	}
}

// A step that runs several times its lease keeps the task: its worker
// renews the lease while it runs, so every other delivery meanwhile finds
// it leased, and the step runs once.
func TestLongStepKeepsItsLease(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		const lease = 300 * time.Millisecond
		var runs atomic.Int32
		started := make(chan struct{})
		h := newHarness(t, backend, tasks.Options{Lease: lease}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "long", Description: "one long step"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					_, err := tasks.Do(st, "work", func(ctx context.Context) (int, error) {
						if runs.Add(1) == 1 {
							close(started)
						}
						time.Sleep(5 * lease)
						return 1, nil
					})
					return text("ok"), err
				})
		})
		h.work(t, 1)
		id := h.create(t, "long", nil)
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the step never started")
		}
		for range 8 {
			time.Sleep(lease / 2)
			res, err := h.srv.Advance(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status.Terminal() {
				break
			}
			if !res.Skipped || res.Reason != "leased by another worker" {
				t.Fatalf("a delivery while the step ran: %+v, want it refused (leased)", res)
			}
		}
		if done := h.wait(t, id); done.Status != "completed" {
			t.Fatalf("task ended %+v", done)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("the step ran %d times, want 1", n)
		}
	})
}

// A delivery that finds a task leased, on a store that does not dispatch,
// brings the task back when the lease ends: always on a queue that keeps
// one message per task (a deferrer: the Redis queue on a Cluster), and on
// a push queue when the lease ends within a renewal interval (a visibility
// timeout or a renewal's message come a little early); a lease further
// off is left to its holder's renewals.
func TestLeasedDeliveryComesBackAtTheLeasesEnd(t *testing.T) {
	const lease = 3 * time.Second // renewals every second
	opts := tasks.Options{Lease: lease, Anonymous: true}
	noop := func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "noop", Description: "one step"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				_, err := tasks.Do(st, "work", func(context.Context) (int, error) { return 1, nil })
				return text("ok"), err
			})
	}
	// ranAfter requires the task's step to have run after the lease it
	// was claimed under ended, by a claim that found it lost.
	ranAfter := func(t *testing.T, rec *redisstore.Record, leaseEnd time.Time) {
		t.Helper()
		if len(rec.Journal) != 2 || rec.Journal[0].Kind != driver.KindLost || rec.Journal[1].Name != "work" ||
			rec.Journal[1].At.Before(leaseEnd) {
			t.Errorf("journal %+v: want the lost lease, then the step after %v", rec.Journal, leaseEnd)
		}
	}
	t.Run("deferrer", func(t *testing.T) {
		h := newHarness(t, "redis-server", opts, noop) // a store that does not dispatch
		id := h.create(t, "noop", nil)
		// A worker claims the task and dies at once (no renewal); its
		// delivery is acknowledged, as a dead consumer's receipt runs out.
		c, err := h.store.Claim(t.Context(), id, h.clock.Now(), lease)
		if err != nil {
			t.Fatal(err)
		}
		// The next delivery finds it leased: the message must come back.
		h.work(t, 1)
		if done := h.wait(t, id); done.Status != "completed" {
			t.Fatalf("task %+v", done)
		}
		rec, err := h.store.Inspect(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		ranAfter(t, rec, c.Task.LeaseUntil)
	})
	t.Run("PushQueue", func(t *testing.T) {
		store := redisstore.New(newRedis(t, "redis-server"), &redisstore.Options{Prefix: "e" + driver.NewID() + ":"})
		q := &pushQueue{deliveries: make(chan string, 64)}
		srv := tasks.New(&mcp.Implementation{Name: "test", Version: "1"}, nil, store, q, &opts)
		noop(srv)
		ctx := t.Context()
		created, err := srv.CreateTask(ctx, "anonymous", "noop", nil)
		if err != nil {
			t.Fatal(err)
		}
		id := created.(*tasks.CreateTaskResult).TaskID
		<-q.deliveries // the creation's
		c, err := store.Claim(ctx, id, time.Now(), lease)
		if err != nil {
			t.Fatal(err)
		}
		sent := func() int {
			q.mu.Lock()
			defer q.mu.Unlock()
			return len(q.sent)
		}
		// Far from the lease's end: dropped (a live holder renews).
		if res, err := srv.Advance(ctx, id); err != nil || res.Reason != "leased by another worker" {
			t.Fatalf("Advance: %+v, %v", res, err)
		}
		if n := sent(); n != 1 {
			t.Fatalf("%d messages after a delivery far from the lease's end, want only the creation's", n)
		}
		// Within a renewal of its end: brought back then.
		time.Sleep(time.Until(c.Task.LeaseUntil.Add(-lease / 6)))
		if res, err := srv.Advance(ctx, id); err != nil || res.Reason != "leased by another worker" {
			t.Fatalf("Advance: %+v, %v", res, err)
		}
		q.mu.Lock()
		last := q.sent[len(q.sent)-1]
		q.mu.Unlock()
		if n := sent(); n != 2 || !last.Equal(c.Task.LeaseUntil) {
			t.Fatalf("%d messages, the last due %v; want one more, due at the lease's end %v", n, last, c.Task.LeaseUntil)
		}
		select {
		case id := <-q.deliveries:
			if res, err := srv.Advance(ctx, id); err != nil || res.Status != driver.StatusCompleted {
				t.Fatalf("Advance at the lease's end: %+v, %v", res, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no delivery at the lease's end")
		}
		rec, err := store.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ranAfter(t, rec, c.Task.LeaseUntil)
	})
}
