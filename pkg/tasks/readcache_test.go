package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/rtcount"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// readCacheTools registers what the read cache tests poll: nap sleeps an
// hour, ask waits for an answer, busy runs one step until release closes.
func readCacheTools(release <-chan struct{}) func(*tasks.Server) {
	return func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "naps an hour"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if err := st.Sleep("nap", time.Hour); err != nil {
					return nil, err
				}
				return text("woke"), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "ask", Description: "asks"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				ans, err := tasks.Elicit[confirmation](st, "confirm", "Go ahead?")
				if err != nil {
					return nil, err
				}
				return text("answered " + ans.Action), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "big", Description: "answers 100 KB"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				return text(strings.Repeat("x", 100<<10)), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "small", Description: "answers a word"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				return text("done"), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "busy", Description: "runs until released"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if _, err := tasks.Do(st, "work", func(ctx context.Context) (int, error) {
					select {
					case <-release:
					case <-ctx.Done():
					}
					return 1, nil
				}); err != nil {
					return nil, err
				}
				return text("done"), nil
			})
	}
}

// newCacheHarness is a harness whose Server keeps readCache reads and
// whose round-trip count (harness.rc) counts only its store's (the queue's
// polling is not counted), and another Server on the same Redis and
// prefix, without a read cache: another process, whose writes reach the
// harness's cache only through their announcements.
func newCacheHarness(t *testing.T, backend string, readCache int, release <-chan struct{}) (*harness, *tasks.Server) {
	t.Helper()
	rc := newRedis(t, backend)
	h := &harness{rc: rtcount.Wrap(rc), clock: &clock{}, prefix: "c" + driver.NewID() + ":"}
	h.q = redisqueue.New(rc, &redisqueue.Options{Key: h.prefix + "{queue}", Poll: 5 * time.Millisecond, Visibility: 5 * time.Second})
	so := &redisstore.Options{Prefix: h.prefix, EnqueueGrace: time.Second}
	if strings.HasSuffix(backend, dispatching) {
		so.Queue = h.q
	}
	h.store = redisstore.New(h.rc, so)
	h.srv = tasks.New(&mcp.Implementation{Name: "test", Version: "1"}, nil, h.store, h.q,
		&tasks.Options{Anonymous: true, Now: h.clock.Now, ReadCache: readCache})
	readCacheTools(release)(h.srv)
	ts := httptest.NewServer(tasks.NewHandler(h.srv, nil))
	t.Cleanup(ts.Close)
	h.url = ts.URL
	h.c = mcptest.NewClient(strings.TrimPrefix(ts.URL, "http://"), true)
	other := tasks.New(&mcp.Implementation{Name: "other", Version: "1"}, nil,
		redisstore.New(rc, so), h.q, &tasks.Options{Anonymous: true, Now: h.clock.Now})
	readCacheTools(release)(other)
	return h, other
}

// serveOn has h serve, with a read cache, a Server on store (the
// harness's store behind a wrapper) instead of its own.
func serveOn(t *testing.T, h *harness, store driver.Store) {
	t.Helper()
	srv := tasks.New(&mcp.Implementation{Name: "wrapped", Version: "1"}, nil, store, h.q,
		&tasks.Options{Anonymous: true, ReadCache: 100})
	readCacheTools(nil)(srv)
	ts := httptest.NewServer(tasks.NewHandler(srv, nil))
	t.Cleanup(ts.Close)
	h.srv, h.c = srv, mcptest.NewClient(strings.TrimPrefix(ts.URL, "http://"), true)
}

// tripsOfGet returns the Redis round trips one tasks/get of id made, and
// the task it answered.
func tripsOfGet(t *testing.T, h *harness, id string) (int64, mcptest.Task) {
	t.Helper()
	before := h.rc.Trips()
	tk := h.c.Get(t, id)
	return h.rc.Trips() - before, tk
}

// cachedWithin polls tasks/get of id until ten in a row are answered
// without a round trip (the read cache answered them), and returns the
// task as answered. (A late announcement of the transition before, which
// a Cluster's bus may bring after the subscription holds, drops a kept
// read once: the next get reads again.)
func cachedWithin(t *testing.T, h *harness, id string) mcptest.Task {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var tk mcptest.Task
	for run := 0; run < 10; {
		var n int64
		if n, tk = tripsOfGet(t, h, id); n == 0 {
			run++
			continue
		}
		run = 0
		if time.Now().After(deadline) {
			t.Fatalf("task %s: no ten tasks/get in a row answered from the read cache within 5 s", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return tk
}

// waitDriver waits until the store shows task id in the state cond wants.
func waitDriver(t *testing.T, h *harness, id string, cond func(*driver.Task) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk, err := h.store.Peek(t.Context(), id)
		if err == nil && cond(tk) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: not in the wanted state within 10 s (last %+v, %v)", id, tk, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func asleep(tk *driver.Task) bool {
	return tk.Status == driver.StatusWorking && !tk.WakeAt.IsZero() && tk.LeaseUntil.IsZero()
}

// With Options.ReadCache, polls of a task that nothing can change without
// an announcement (asleep, waiting for input, finished) are answered from
// the process's last read; the answer changes as soon as the task does,
// whoever changed it: a write through another process (announced), one
// through this process (dropped before it is answered), or the task's own
// wake time passing. A caller that does not own the task is answered by
// the store, and a task a worker holds is read from Redis every time.
func TestReadCacheAnswersUnchangedTasks(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		release := make(chan struct{})
		defer close(release)
		h, other := newCacheHarness(t, backend, 100, release)
		h.work(t, 2)
		ctx := t.Context()

		nap := h.create(t, "nap", nil)
		waitDriver(t, h, nap, asleep)
		if tk := cachedWithin(t, h, nap); tk.Status != "working" {
			t.Fatalf("the napping task answered %+v", tk)
		}
		// Not the owner: the store answers (one round trip), unknown.
		before := h.rc.Trips()
		if _, err := h.srv.GetTask(ctx, "mallory", nap); !isUnknown(err) {
			t.Fatalf("tasks/get by another principal: %v, want -32602", err)
		}
		if h.rc.Trips() == before {
			t.Error("tasks/get by another principal was answered from the cache")
		}
		// Cancelled through the other process: seen here once the
		// announcement arrives (Redis sends it before it answers the
		// canceller), not at the wake an hour on.
		if _, err := other.CancelTask(ctx, "anonymous", nap); err != nil {
			t.Fatal(err)
		}
		h.c.WaitFor(t, nap, time.Second, func(tk mcptest.Task) bool { return tk.Status == "cancelled" })
		if tk := cachedWithin(t, h, nap); tk.Status != "cancelled" {
			t.Fatalf("the cancelled task answered %+v", tk)
		}

		// Waiting for input, answered through this process: the very
		// next tasks/get shows the answer taken.
		ask := h.create(t, "ask", nil)
		h.c.WaitFor(t, ask, 10*time.Second, func(tk mcptest.Task) bool { return tk.Status == "input_required" })
		if tk := cachedWithin(t, h, ask); tk.InputRequests["confirm"] == nil {
			t.Fatalf("the asking task answered %+v", tk)
		}
		if _, err := h.srv.UpdateTask(ctx, "anonymous", ask, map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"decline"}`)}); err != nil {
			t.Fatal(err)
		}
		if tk := h.c.Get(t, ask); tk.Status == "input_required" {
			t.Fatalf("tasks/get right after this process's tasks/update: %+v, want the answer taken", tk)
		}

		// Held by a worker: every tasks/get reads Redis.
		busy := h.create(t, "busy", nil)
		waitDriver(t, h, busy, func(tk *driver.Task) bool { return tk.LeaseUntil.After(h.clock.Now()) })
		for i := range 5 {
			if n, _ := tripsOfGet(t, h, busy); n == 0 {
				t.Fatalf("tasks/get %d of a running task was answered from the cache", i)
			}
			time.Sleep(20 * time.Millisecond)
		}

		// Asleep until a time the clock passes: read from Redis again
		// (last: a store that dispatches then schedules on the moved clock).
		nap2 := h.create(t, "nap", nil)
		waitDriver(t, h, nap2, asleep)
		cachedWithin(t, h, nap2)
		h.clock.Advance(2 * time.Hour)
		if n, _ := tripsOfGet(t, h, nap2); n == 0 {
			t.Error("tasks/get past the task's wake time was answered from the cache")
		}
	})
}

// Without Options.ReadCache every tasks/get reads the store.
func TestReadCacheOffByDefault(t *testing.T) {
	h, _ := newCacheHarness(t, "redis-server", 0, nil)
	h.work(t, 1)
	nap := h.create(t, "nap", nil)
	waitDriver(t, h, nap, asleep)
	for i := range 20 {
		if n, _ := tripsOfGet(t, h, nap); n == 0 {
			t.Fatalf("tasks/get %d made no round trip without a read cache", i)
		}
	}
}

func isUnknown(err error) bool {
	var rpc *jsonrpc.Error
	return errors.As(err, &rpc) && rpc.Code == -32602 && strings.Contains(rpc.Message, "task")
}

// unheard is a store whose announcements never arrive (a subscriber that
// lags), so that only the Server's own bookkeeping can keep its reads true.
type unheard struct{ *redisstore.Store }

func (u unheard) Watch(ctx context.Context, ids []string, _ func(string)) (*driver.Subscription, error) {
	return u.Store.Watch(ctx, ids, func(string) {})
}

// A write made through this process drops its kept read before it is
// answered, without waiting for the write's announcement.
func TestReadCacheDropsOwnWrites(t *testing.T) {
	h, _ := newCacheHarness(t, "redis-server", 0, nil)
	serveOn(t, h, unheard{h.store})
	h.work(t, 1)
	ctx := t.Context()
	ask := h.create(t, "ask", nil)
	h.c.WaitFor(t, ask, 10*time.Second, func(tk mcptest.Task) bool { return tk.Status == "input_required" })
	cachedWithin(t, h, ask)
	if _, err := h.srv.UpdateTask(ctx, "anonymous", ask, map[string]json.RawMessage{"confirm": json.RawMessage(`{"action":"decline"}`)}); err != nil {
		t.Fatal(err)
	}
	if tk := h.c.Get(t, ask); tk.Status == "input_required" {
		t.Fatalf("tasks/get after this process's tasks/update: %+v, want the answer taken", tk)
	}
	nap := h.create(t, "nap", nil)
	waitDriver(t, h, nap, asleep)
	cachedWithin(t, h, nap)
	if _, err := h.srv.CancelTask(ctx, "anonymous", nap); err != nil {
		t.Fatal(err)
	}
	if tk := h.c.Get(t, nap); tk.Status != "cancelled" {
		t.Fatalf("tasks/get after this process's tasks/cancel: %+v, want cancelled", tk)
	}
}

// A task read once costs no subscription: the read cache watches a task
// from its second read.
func TestReadCacheWatchesFromTheSecondRead(t *testing.T) {
	h, _ := newCacheHarness(t, "redis-server", 100, nil)
	h.work(t, 1)
	channels := func() int {
		n, err := h.rc.Do(t.Context(), h.rc.B().PubsubChannels().Pattern(h.prefix+"{*}:ev").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return len(n)
	}
	var ids []string
	for range 5 {
		id := h.create(t, "nap", nil)
		waitDriver(t, h, id, asleep)
		ids = append(ids, id)
	}
	for _, id := range ids {
		h.c.Get(t, id)
	}
	if n := channels(); n != 0 {
		ch, _ := h.rc.Do(t.Context(), h.rc.B().PubsubChannels().Pattern(h.prefix+"{*}:ev").Build()).AsStrSlice()
		t.Fatalf("5 tasks read once: %d channels subscribed (%v of %v), want 0", n, ch, ids)
	}
	h.c.Get(t, ids[0])
	deadline := time.Now().Add(5 * time.Second)
	for channels() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("a task read twice: %d channels subscribed, want 1", channels())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A finished task is kept, unless its answer is large: a 100 KB result is
// read from the store at every poll.
func TestReadCacheKeepsSmallAnswersOnly(t *testing.T) {
	h, _ := newCacheHarness(t, "redis-server", 100, nil)
	h.work(t, 1)
	small := h.create(t, "small", nil)
	h.wait(t, small)
	if tk := cachedWithin(t, h, small); tk.Status != "completed" || textOf(t, tk.Result) != "done" {
		t.Fatalf("the small task answered %+v", tk)
	}
	big := h.create(t, "big", nil)
	h.wait(t, big)
	for i := range 20 {
		n, tk := tripsOfGet(t, h, big)
		if n == 0 {
			t.Fatalf("tasks/get %d of a task with a 100 KB result was answered from the cache", i)
		}
		if len(textOf(t, tk.Result)) != 100<<10 {
			t.Fatalf("tasks/get %d: result of %d bytes", i, len(tk.Result))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lateToCache is a store whose announcements reach the first watch made
// on it (the read cache's, in TestReadCacheDropsOnStreamNews) 3 s late, and
// every later watch at once.
type lateToCache struct {
	*redisstore.Store
	watches atomic.Int32
}

func (l *lateToCache) Watch(ctx context.Context, ids []string, fn func(string)) (*driver.Subscription, error) {
	if l.watches.Add(1) == 1 {
		inner := fn
		fn = func(id string) { time.AfterFunc(3*time.Second, func() { inner(id) }) }
	}
	return l.Store.Watch(ctx, ids, fn)
}

// A client told of a change by a task stream never reads the task as it
// was: the stream's news drops the kept read before the stream sends it,
// however late the read cache's own announcement.
func TestReadCacheDropsOnStreamNews(t *testing.T) {
	h, other := newCacheHarness(t, "redis-server", 0, nil)
	serveOn(t, h, &lateToCache{Store: h.store})
	h.work(t, 1)
	nap := h.create(t, "nap", nil)
	waitDriver(t, h, nap, asleep)
	cachedWithin(t, h, nap)
	events, stop := benchListen(t, h.c, nap)
	defer stop()
	for ev := range events {
		if ev == "working" {
			break
		}
	}
	if _, err := other.CancelTask(t.Context(), "anonymous", nap); err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev != "cancelled" {
			continue
		}
		if tk := h.c.Get(t, nap); tk.Status != "cancelled" {
			t.Fatalf("tasks/get right after the stream told of the cancellation: %+v", tk)
		}
		return
	}
	t.Fatal("the stream ended without telling of the cancellation")
}
