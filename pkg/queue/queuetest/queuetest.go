// Package queuetest is the behavioural contract of a [driver.Queue] adapter,
// written once and run against every adapter.
//
// An adapter's test supplies a [Harness]: the queue under test plus the
// consumer side of it, whatever shape that has. A pull adapter (Redis)
// receives in [Harness.Next] and acknowledges through [Delivery]; a push
// adapter (Amazon SQS as a Lambda event source, Upstash QStash calling an
// HTTP endpoint) runs the endpoint the platform pushes to inside the harness,
// hands each pushed message out of Next, and answers the platform when the
// test calls [Delivery.Ack] (success), [Delivery.Retry] (failure) or nothing
// at all (the consumer crashed).
//
// The contract only asserts what the [driver.Queue] documentation and the
// design promise: at-least-once delivery, no delivery before the requested
// time, one message per waiting id at the earlier time asked for (see
// [Duplicating] for queues that keep duplicates), no message lost by the
// acknowledgement of an earlier delivery, redelivery of an unanswered
// delivery. Timing is asserted only as lower bounds ("not before"); waits
// for a delivery use generous deadlines so a slow machine never fails a test.
package queuetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Harness is one queue under test, empty and private to the test that
// asked for it, together with its consumer side.
type Harness interface {
	// Queue is the adapter under test.
	Queue() driver.Queue
	// Next blocks until the queue delivers a message, and returns it; it
	// fails only when ctx ends or the adapter reports an error. The contract
	// calls Next from one goroutine at a time.
	Next(ctx context.Context) (Delivery, error)
	// Redelivery is how long after a delivery that was neither acknowledged
	// nor retried the queue delivers the message again (the visibility
	// timeout). Keep it as short as the platform allows (a few hundred
	// milliseconds for Redis): the contract waits for it several times.
	Redelivery() time.Duration
}

// Delivery is one message handed to the consumer. The consumer answers with
// at most one of Ack or Retry; answering neither is a crash, after which the
// queue must deliver the message again (see [Harness.Redelivery]).
type Delivery interface {
	// TaskID is the delivered task id.
	TaskID() string
	// Ack reports the message handled: it is not delivered again. An
	// enqueue of the same id that arrived since the delivery is kept.
	Ack(ctx context.Context) error
	// Retry reports the handling failed: the message is delivered again at
	// or after at. An enqueue of the same id that arrived since the
	// delivery is kept, and a Retry never postpones it.
	Retry(ctx context.Context, at time.Time) error
}

// Duplicating may be implemented by a [Harness] whose queue keeps every
// enqueue as a message of its own instead of one message per waiting id
// (an Amazon SQS standard queue; QStash with deduplication ids qualified
// by the due time). That departs from the [driver.Queue] documentation, but
// harmlessly for the worker, which re-reads the task at every delivery.
// When AllowsDuplicates reports true, the deduplication cases still require
// delivery at the earliest time asked for, but accept the extra deliveries.
type Duplicating interface {
	// AllowsDuplicates reports whether the queue keeps one message per
	// enqueue rather than one per waiting id.
	AllowsDuplicates() bool
}

func allowsDuplicates(h Harness) bool {
	d, ok := h.(Duplicating)
	return ok && d.AllowsDuplicates()
}

// wait bounds every wait for a delivery that must come. It only turns a
// lost message into a failure instead of a hang; nothing asserts speed.
const wait = 10 * time.Second

// Run runs the contract. newHarness is called once per case and must
// return a fresh, empty queue (a unique key, topic or URL per call);
// cleanup belongs in t.Cleanup. Cases run in parallel.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"EnqueueReceiveAck", testEnqueueReceiveAck},
		{"DelayedDelivery", testDelayedDelivery},
		{"OnlyDueIDsAreDelivered", testOnlyDue},
		{"DedupEarlierFirst", testDedupEarlierFirst},
		{"DedupEarlierSecond", testDedupEarlierSecond},
		{"EnqueueWhileHandlingSurvivesAck", testEnqueueWhileHandling},
		{"DelayedEnqueueWhileHandlingSurvivesAck", testDelayedEnqueueWhileHandling},
		{"RedeliveryAfterCrash", testRedeliveryAfterCrash},
		{"StaleAckKeepsRedeliveredMessage", testStaleAck},
		{"RetryAt", testRetryAt},
		{"RetryDoesNotPostponeNewEnqueue", testRetryKeepsEnqueue},
		{"ManyIDs", testManyIDs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newHarness(t))
		})
	}
}

// id returns a task id unique to this run.
func id(prefix string) string { return prefix + "-" + rand.Text()[:12] }

// next waits for the next delivery and fails unless it is want.
func next(t *testing.T, h Harness, want string) Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	d, err := h.Next(ctx)
	if err != nil {
		t.Fatalf("waiting for %q: %v (the message was lost)", want, err)
	}
	if got := d.TaskID(); got != want {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	return d
}

// notBefore fails if a delivery observed now came before at (the adapters
// keep milliseconds; nothing finer is promised).
func notBefore(t *testing.T, what string, at time.Time) {
	t.Helper()
	if now := time.Now(); now.UnixMilli() < at.UnixMilli() {
		t.Errorf("%s delivered %v before its time", what, at.Sub(now))
	}
}

func enqueue(t *testing.T, h Harness, taskID string, at time.Time) {
	t.Helper()
	if err := h.Queue().Enqueue(t.Context(), taskID, at); err != nil {
		t.Fatalf("Enqueue(%q, %v): %v", taskID, at, err)
	}
}

func ack(t *testing.T, d Delivery) {
	t.Helper()
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack(%q): %v", d.TaskID(), err)
	}
}

// expectGone fails if any of ids is delivered again. It waits until an
// unanswered copy would be due again, then enqueues a marker due now and
// drains (acknowledging) everything up to the marker.
func expectGone(t *testing.T, h Harness, ids ...string) {
	t.Helper()
	drain(t, h, ids, nil)
}

// drain is expectGone, which also accepts (and acknowledges) deliveries of
// the tolerated ids.
func drain(t *testing.T, h Harness, gone, tolerated []string) {
	t.Helper()
	time.Sleep(h.Redelivery() + 200*time.Millisecond)
	marker := id("marker")
	enqueue(t, h, marker, time.Time{})
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	for {
		d, err := h.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the marker: %v", err)
		}
		got := d.TaskID()
		ack(t, d)
		switch {
		case got == marker:
			return
		case contains(gone, got):
			t.Errorf("%q delivered again after it was acknowledged", got)
		case !contains(tolerated, got):
			t.Errorf("unexpected delivery %q", got)
		}
		if t.Failed() {
			return
		}
	}
}

// expectDeduplicated is expectGone for the deduplication cases.
func expectDeduplicated(t *testing.T, h Harness, x string) {
	t.Helper()
	if allowsDuplicates(h) {
		drain(t, h, nil, []string{x})
		return
	}
	drain(t, h, []string{x}, nil)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// An enqueued id is delivered, and once acknowledged it is not delivered
// again.
func testEnqueueReceiveAck(t *testing.T, h Harness) {
	x := id("x")
	enqueue(t, h, x, time.Time{})
	d := next(t, h, x)
	ack(t, d)
	expectGone(t, h, x)
}

// A message is not delivered before notBefore, and is delivered after it.
func testDelayedDelivery(t *testing.T, h Harness) {
	x := id("delayed")
	at := time.Now().Add(300 * time.Millisecond)
	enqueue(t, h, x, at)
	d := next(t, h, x)
	notBefore(t, "delayed message", at)
	ack(t, d)
}

// A message due in the future does not hold back one that is due now.
func testOnlyDue(t *testing.T, h Harness) {
	later, now := id("later"), id("now")
	enqueue(t, h, later, time.Now().Add(time.Hour))
	enqueue(t, h, now, time.Time{})
	ack(t, next(t, h, now))
	expectGone(t, h, now, later)
}

// Enqueue at a late time, then the same id at an early time: one message,
// due at the early time (see [Duplicating]).
func testDedupEarlierFirst(t *testing.T, h Harness) {
	x := id("dedup")
	enqueue(t, h, x, time.Now().Add(time.Hour))
	at := time.Now().Add(100 * time.Millisecond)
	enqueue(t, h, x, at)
	d := next(t, h, x)
	notBefore(t, "deduplicated message", at)
	ack(t, d)
	expectDeduplicated(t, h, x)
}

// Enqueue at an early time (twice), then the same id at a late time: one
// message, still due at the early time (see [Duplicating]).
func testDedupEarlierSecond(t *testing.T, h Harness) {
	x := id("dedup")
	enqueue(t, h, x, time.Time{})
	enqueue(t, h, x, time.Time{})
	enqueue(t, h, x, time.Now().Add(time.Hour))
	ack(t, next(t, h, x))
	expectDeduplicated(t, h, x)
}

// An enqueue that arrives after a delivery and before its Ack (the worker
// asked to be woken again) is not lost by the Ack.
func testEnqueueWhileHandling(t *testing.T, h Harness) {
	x := id("busy")
	enqueue(t, h, x, time.Time{})
	d := next(t, h, x)
	enqueue(t, h, x, time.Time{})
	ack(t, d)
	ack(t, next(t, h, x))
	expectGone(t, h, x)
}

// Same, with the new enqueue due later than the redelivery of the message
// being handled (a worker parks a task on a long timer): the Ack must not
// drop it either.
func testDelayedEnqueueWhileHandling(t *testing.T, h Harness) {
	x := id("busy-later")
	enqueue(t, h, x, time.Time{})
	d := next(t, h, x)
	at := time.Now().Add(2*h.Redelivery() + 200*time.Millisecond)
	enqueue(t, h, x, at)
	ack(t, d)
	d = next(t, h, x)
	notBefore(t, "message enqueued while handling", at)
	ack(t, d)
	expectGone(t, h, x)
}

// A delivery nobody answers (the consumer crashed) comes back, but not
// before the redelivery timeout.
func testRedeliveryAfterCrash(t *testing.T, h Harness) {
	x := id("crash")
	enqueue(t, h, x, time.Time{})
	start := time.Now()
	_ = next(t, h, x) // crashed: never answered
	d := next(t, h, x)
	notBefore(t, "redelivered message", start.Add(h.Redelivery()))
	ack(t, d)
	expectGone(t, h, x)
}

// A consumer that answers after its delivery was handed to another one
// (it was slower than the redelivery timeout) does not remove the message
// the other one is now handling.
func testStaleAck(t *testing.T, h Harness) {
	x := id("stale")
	enqueue(t, h, x, time.Time{})
	slow := next(t, h, x)
	_ = next(t, h, x) // redelivered to a second consumer, which then crashes
	if err := slow.Ack(t.Context()); err != nil {
		t.Fatalf("stale Ack: %v", err)
	}
	ack(t, next(t, h, x))
	expectGone(t, h, x)
}

// Retry makes the message due again at the given time, not before.
func testRetryAt(t *testing.T, h Harness) {
	x := id("retry")
	enqueue(t, h, x, time.Time{})
	d := next(t, h, x)
	at := time.Now().Add(400 * time.Millisecond)
	if err := d.Retry(t.Context(), at); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	d = next(t, h, x)
	notBefore(t, "retried message", at)
	ack(t, d)
	expectGone(t, h, x)
}

// A Retry far in the future does not postpone an enqueue that arrived while
// the message was being handled.
func testRetryKeepsEnqueue(t *testing.T, h Harness) {
	x := id("retry-busy")
	enqueue(t, h, x, time.Time{})
	d := next(t, h, x)
	enqueue(t, h, x, time.Time{})
	if err := d.Retry(t.Context(), time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	ack(t, next(t, h, x))
	expectGone(t, h, x)
}

// Every one of many ids is delivered.
func testManyIDs(t *testing.T, h Harness) {
	const n = 50
	want := make(map[string]bool, n)
	ids := make([]string, 0, n)
	for i := range n {
		x := id(fmt.Sprintf("many%02d", i))
		want[x] = true
		ids = append(ids, x)
		enqueue(t, h, x, time.Time{})
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	for len(want) > 0 {
		d, err := h.Next(ctx)
		if err != nil {
			t.Fatalf("%d of %d ids never delivered: %v", len(want), n, err)
		}
		if !contains(ids, d.TaskID()) {
			t.Fatalf("delivered %q, which was never enqueued", d.TaskID())
		}
		delete(want, d.TaskID())
		ack(t, d)
	}
	expectGone(t, h, ids...)
}

// Pull is the Harness of a pull queue, one that consumers receive from
// (redisqueue, pgqueue): Next receives until a message is due, waiting as
// long as Receive says between tries.
type Pull[D any] struct {
	// Q is the queue under test, and Visibility its visibility timeout.
	Q          driver.Queue
	Visibility time.Duration
	// Receive returns the next due message, or ok false and how long
	// until one may be.
	Receive func(ctx context.Context) (d D, ok bool, wait time.Duration, err error)
	// ID is a delivery's task id; Ack and Retry answer it.
	ID    func(D) string
	Ack   func(ctx context.Context, d D) error
	Retry func(ctx context.Context, d D, at time.Time) error
}

// Queue implements Harness.
func (p Pull[D]) Queue() driver.Queue { return p.Q }

// Redelivery implements Harness.
func (p Pull[D]) Redelivery() time.Duration { return p.Visibility }

// Next implements Harness.
func (p Pull[D]) Next(ctx context.Context) (Delivery, error) {
	for {
		d, ok, wait, err := p.Receive(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return pulled[D]{p, d}, nil
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// pulled is a delivery of a Pull harness.
type pulled[D any] struct {
	p Pull[D]
	d D
}

func (d pulled[D]) TaskID() string                { return d.p.ID(d.d) }
func (d pulled[D]) Ack(ctx context.Context) error { return d.p.Ack(ctx, d.d) }
func (d pulled[D]) Retry(ctx context.Context, at time.Time) error {
	return d.p.Retry(ctx, d.d, at)
}
