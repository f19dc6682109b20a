package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/rtcount"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// backends are the Redis servers every engine test runs against, and
// redis-server again with a store that enqueues in its own scripts
// (redisstore.Options.Queue).
var backends = append(testredis.Backends(), "redis-server"+dispatching)

// dispatching marks a backend whose store dispatches (see backends).
const dispatching = "+dispatch"

// newRedis returns a client of a fresh Redis of the given backend.
func newRedis(tb testing.TB, backend string) rueidis.Client {
	return testredis.Client(tb, strings.TrimSuffix(backend, dispatching))
}

// clock is a test clock: real time plus an offset the test can move
// forward (never backward, so deadlines derived from it stay in the future).
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(d time.Duration) { c.off.Add(int64(d)) }
func (c *clock) opts(o *tasks.Options)   { o.Now = c.Now }

// harness is a tasks server on a real Redis, served over httptest.
type harness struct {
	// prefix is the harness's own key prefix (redisstore.Options.Prefix);
	// url is the endpoint's base URL.
	prefix, url string
	srv         *tasks.Server
	store       *redisstore.Store
	q           *redisqueue.Queue
	rc          *rtcount.Client
	c           *mcptest.Client // through the lean tasks/* path
	sdk         *mcptest.Client // through the go-sdk only
	clock       *clock
}

func newHarness(t testing.TB, backend string, opts tasks.Options, register func(*tasks.Server)) *harness {
	t.Helper()
	rc := rtcount.Wrap(newRedis(t, backend))
	h := &harness{rc: rc, clock: &clock{}}
	// A prefix of the harness's own keeps it apart from the other tests on
	// the shared cluster (testredis.SharedCluster). A benchmark keeps the
	// default, so that the bytes it reports per task are a deployment's.
	prefix := "e" + driver.NewID() + ":"
	if _, bench := t.(*testing.B); bench {
		prefix = "mcptasks:"
	}
	h.prefix = prefix
	h.q = redisqueue.New(rc, &redisqueue.Options{Key: prefix + "{queue}", Poll: 5 * time.Millisecond, Visibility: 5 * time.Second})
	so := &redisstore.Options{Prefix: prefix, EnqueueGrace: time.Second, TracerProvider: opts.TracerProvider}
	if strings.HasSuffix(backend, dispatching) {
		so.Queue = h.q
	}
	h.store = redisstore.New(rc, so)
	if opts.Now == nil {
		h.clock.opts(&opts)
	}
	opts.Anonymous = true
	h.srv = tasks.New(&mcp.Implementation{Name: "test", Version: "1"}, nil, h.store, h.q, &opts)
	register(h.srv)
	ts := httptest.NewServer(tasks.NewHandler(h.srv, nil))
	t.Cleanup(ts.Close)
	h.url = ts.URL
	h.c = mcptest.NewClient(strings.TrimPrefix(ts.URL, "http://"), true)
	// The same server without the lean tasks/* path: every request goes
	// through the go-sdk.
	sdk := httptest.NewServer(tasks.NewHandler(h.srv, &tasks.HandlerOptions{DisableLeanPath: true}))
	t.Cleanup(sdk.Close)
	h.sdk = mcptest.NewClient(strings.TrimPrefix(sdk.URL, "http://"), true)
	return h
}

// work consumes the queue in the background until the test ends.
func (h *harness) work(t testing.TB, n int) { h.workWatched(t, n, nil) }

// workWatched is work with each (when set) called after every Advance, on
// the consumer's goroutine, with the task's id and what Advance returned.
func (h *harness) workWatched(t testing.TB, n int, each func(id string, res tasks.AdvanceResult, err error)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		h.q.Consume(ctx, n, func(ctx context.Context, id string) (redisqueue.Settle, error) {
			res, err := h.srv.Advance(ctx, id)
			if each != nil {
				each(id, res, err)
			}
			return redisqueue.SettleOf(res.Settled, res.Status.Terminal()), err
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// create calls tool with args as a task and returns its id.
func (h *harness) create(t *testing.T, tool string, args map[string]any) string {
	t.Helper()
	var tk mcptest.Task
	h.c.Call(t, "tools/call", map[string]any{"name": tool, "arguments": args}).Decode(t, &tk)
	if tk.ResultType != "task" || tk.TaskID == "" {
		t.Fatalf("tools/call %s did not create a task: %+v", tool, tk)
	}
	return tk.TaskID
}

func (h *harness) wait(t *testing.T, id string) mcptest.Task {
	t.Helper()
	return h.c.WaitFor(t, id, 30*time.Second, mcptest.Terminal)
}

func textOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s has no text content (%v)", raw, err)
	}
	return r.Content[0].Text
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

type noArgs struct{}

func forEach(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { f(t, b) })
	}
}

// A 5-step workflow completes with each closure run exactly once, one new
// step per invocation by default.
func TestFiveStepWorkflow(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var runs [5]atomic.Int32
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "five", Description: "five steps"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					sum := 0
					for i := range 5 {
						v, err := tasks.Do(st, fmt.Sprintf("s%d", i), func(context.Context) (int, error) {
							runs[i].Add(1)
							return i + 1, nil
						})
						if err != nil {
							return nil, err
						}
						sum += v
					}
					return text(fmt.Sprint("sum ", sum)), nil
				})
		})
		h.work(t, 2)
		id := h.create(t, "five", nil)
		done := h.wait(t, id)
		if done.Status != "completed" || textOf(t, done.Result) != "sum 15" {
			t.Fatalf("task ended %+v %s", done, done.Result)
		}
		for i := range runs {
			if n := runs[i].Load(); n != 1 {
				t.Errorf("step s%d ran %d times, want 1", i, n)
			}
		}
	})
}

// StepsPerInvocation lets one invocation run several new steps, and a
// duplicate delivery of a finished, sleeping or parked task does nothing.
func TestStepsPerInvocationAndDuplicates(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var runs atomic.Int32
		h := newHarness(t, backend, tasks.Options{StepsPerInvocation: 3}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "five", Description: "five steps"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					for i := range 5 {
						if _, err := tasks.Do(st, fmt.Sprint(i), func(context.Context) (int, error) { return int(runs.Add(1)), nil }); err != nil {
							return nil, err
						}
					}
					return text("ok"), nil
				})
			tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "sleeps"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					return text("woke"), st.Sleep("nap", time.Hour)
				})
		})
		ctx := context.Background()
		id := h.create(t, "five", nil)
		var steps []int
		for {
			res, err := h.srv.Advance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			steps = append(steps, res.Steps)
			if res.Status.Terminal() {
				break
			}
		}
		if fmt.Sprint(steps) != "[3 2]" {
			t.Errorf("new steps per invocation = %v, want [3 2]", steps)
		}
		before := runs.Load()
		res, err := h.srv.Advance(ctx, id)
		if err != nil || !res.Skipped || res.Status != driver.StatusCompleted {
			t.Errorf("duplicate delivery of a completed task: %+v, %v", res, err)
		}
		nap := h.create(t, "nap", nil)
		if _, err := h.srv.Advance(ctx, nap); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			res, err := h.srv.Advance(ctx, nap)
			if err != nil || !res.Skipped || res.Reason != "sleeping" {
				t.Errorf("duplicate delivery of a sleeping task: %+v, %v", res, err)
			}
		}
		if runs.Load() != before {
			t.Errorf("duplicate deliveries ran steps")
		}
	})
}

// Two workers racing one task: one advances, the other is turned away
// while the lease lives; a worker whose lease expired and was taken over
// has its writes rejected.
func TestRacingWorkers(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		started := make(chan string, 4)
		release := make(chan struct{})
		var who atomic.Int32
		h := newHarness(t, backend, tasks.Options{MaxDuration: 10 * time.Second}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "one", Description: "one blocking step"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					v, err := tasks.Do(st, "work", func(ctx context.Context) (string, error) {
						me := fmt.Sprint("worker-", who.Add(1))
						started <- me
						<-release
						return me, nil
					})
					if err != nil {
						return nil, err
					}
					return text(v), nil
				})
		})
		ctx := context.Background()
		id := h.create(t, "one", nil)

		// Worker A claims and blocks inside the step.
		aDone := make(chan tasks.AdvanceResult, 1)
		go func() {
			res, err := h.srv.Advance(ctx, id)
			if err != nil {
				t.Error(err)
			}
			aDone <- res
		}()
		if got := <-started; got != "worker-1" {
			t.Fatalf("first runner %s", got)
		}
		// Worker B, while A's lease lives: turned away.
		res, err := h.srv.Advance(ctx, id)
		if err != nil || !res.Skipped || res.Reason != "leased by another worker" {
			t.Fatalf("racing worker: %+v, %v", res, err)
		}
		// A's lease expires (the clock jumps past it); worker C takes over
		// and finishes the task.
		h.clock.Advance(time.Minute)
		cDone := make(chan tasks.AdvanceResult, 1)
		go func() {
			res, err := h.srv.Advance(ctx, id)
			if err != nil {
				t.Error(err)
			}
			cDone <- res
		}()
		if got := <-started; got != "worker-2" {
			t.Fatalf("second runner %s", got)
		}
		close(release)
		a, c := <-aDone, <-cDone
		var winner, loser tasks.AdvanceResult = c, a
		if !(winner.Status == driver.StatusCompleted && loser.Skipped && loser.Reason == "claim lost") {
			t.Fatalf("A=%+v C=%+v: want C to complete and A's write rejected", a, c)
		}
		final := h.c.Get(t, id)
		if final.Status != "completed" || textOf(t, final.Result) != "worker-2" {
			t.Fatalf("final %+v %s: want worker-2's result", final, final.Result)
		}
	})
}

// A step that keeps failing fails the task once its retry budget is spent;
// a Permanent error fails it at once.
func TestRetryBudget(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var flaky, fatal atomic.Int32
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "flaky", Description: "always fails"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					_, err := tasks.Do(st, "call", func(context.Context) (int, error) {
						return 0, fmt.Errorf("boom %d", flaky.Add(1))
					}, tasks.Retries(2), tasks.Backoff(5*time.Millisecond, 10*time.Millisecond))
					return nil, err
				})
			tasks.AddTool(s, &mcp.Tool{Name: "fatal", Description: "fails for good"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					_, err := tasks.Do(st, "call", func(context.Context) (int, error) {
						fatal.Add(1)
						return 0, tasks.Permanent(errors.New("bad input"))
					}, tasks.Retries(5))
					return nil, err
				})
		})
		h.work(t, 2)
		done := h.wait(t, h.create(t, "flaky", nil))
		if done.Status != "failed" || !strings.Contains(string(done.Error), "boom 3") {
			t.Fatalf("flaky ended %+v error %s", done, done.Error)
		}
		if n := flaky.Load(); n != 3 {
			t.Errorf("flaky step ran %d times, want 3 (1 + 2 retries)", n)
		}
		done = h.wait(t, h.create(t, "fatal", nil))
		if done.Status != "failed" || !strings.Contains(string(done.Error), "bad input") || fatal.Load() != 1 {
			t.Fatalf("fatal ended %+v error %s after %d runs", done, done.Error, fatal.Load())
		}
	})
}

// A step whose worker keeps dying (each claim charges an attempt and never
// finishes) exhausts its retries instead of looping.
func TestCrashLoopExhaustsAttempts(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var runs atomic.Int32
		h := newHarness(t, backend, tasks.Options{MaxDuration: 10 * time.Second}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "crashy", Description: "its worker dies"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					_, err := tasks.Do(st, "oom", func(context.Context) (int, error) { return int(runs.Add(1)), nil }, tasks.Retries(1))
					return text("survived"), err
				})
		})
		ctx := context.Background()
		id := h.create(t, "crashy", nil)
		for range 2 { // two workers claim the task and die mid-step
			if _, err := h.store.Claim(ctx, id, h.clock.Now(), 10*time.Second); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Minute)
		}
		res, err := h.srv.Advance(ctx, id)
		if err != nil || res.Status != driver.StatusFailed {
			t.Fatalf("third claim: %+v, %v", res, err)
		}
		got := h.c.Get(t, id)
		if !strings.Contains(string(got.Error), "gave up after 2 attempts") || runs.Load() != 0 {
			t.Fatalf("task %+v error %s, step ran %d times", got, got.Error, runs.Load())
		}
	})
}

// Cancel during a sleep is immediate; cancel during a running step cancels
// the step's context and ends the task cancelled.
func TestCancel(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		running := make(chan struct{}, 1)
		var sawCancel atomic.Bool
		h := newHarness(t, backend, tasks.Options{CancelPoll: 20 * time.Millisecond}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "sleeps an hour"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					return text("woke"), st.Sleep("nap", time.Hour)
				})
			tasks.AddTool(s, &mcp.Tool{Name: "grind", Description: "a step that runs until cancelled"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					_, err := tasks.Do(st, "grind", func(ctx context.Context) (int, error) {
						running <- struct{}{}
						<-ctx.Done()
						sawCancel.Store(true)
						return 0, ctx.Err()
					})
					return text("ground"), err
				})
		})
		h.work(t, 2)
		nap := h.create(t, "nap", nil)
		h.c.WaitFor(t, nap, 10*time.Second, func(tk mcptest.Task) bool { return tk.LastUpdatedAt != tk.CreatedAt })
		h.c.Call(t, "tasks/cancel", map[string]any{"taskId": nap})
		if got := h.c.Get(t, nap); got.Status != "cancelled" {
			t.Fatalf("sleeping task after cancel: %q, want cancelled at once", got.Status)
		}

		grind := h.create(t, "grind", nil)
		<-running
		h.c.Call(t, "tasks/cancel", map[string]any{"taskId": grind})
		done := h.wait(t, grind)
		if done.Status != "cancelled" || !sawCancel.Load() {
			t.Fatalf("running task after cancel: %+v (step saw cancel: %v)", done, sawCancel.Load())
		}
	})
}

// An input round with two pending keys answered one at a time resumes only
// when both are answered.
func TestInputTwoKeys(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var after atomic.Int32
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "two", Description: "asks two things"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					ask := func(q string) tasks.InputRequest {
						return tasks.InputRequest{Method: "elicitation/create", Params: map[string]any{
							"mode": "form", "message": q, "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}}}
					}
					got, err := st.Input("both", map[string]tasks.InputRequest{"first": ask("1?"), "second": ask("2?")})
					if err != nil {
						return nil, err
					}
					after.Add(1)
					return text(string(got["first"]) + "+" + string(got["second"])), nil
				})
		})
		ctx := context.Background()
		id := h.create(t, "two", nil)
		if _, err := h.srv.Advance(ctx, id); err != nil {
			t.Fatal(err)
		}
		tk := h.c.Get(t, id)
		if tk.Status != "input_required" || len(tk.InputRequests) != 2 {
			t.Fatalf("parked %+v", tk)
		}
		h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"first": map[string]any{"action": "accept", "content": map[string]any{"n": 1}}}})
		tk = h.c.Get(t, id)
		if _, ok := tk.InputRequests["first"]; ok || tk.Status != "input_required" || len(tk.InputRequests) != 1 {
			t.Fatalf("after the first answer: %+v", tk)
		}
		res, err := h.srv.Advance(ctx, id) // a stray delivery: nothing to do yet
		if err != nil || !res.Skipped || after.Load() != 0 {
			t.Fatalf("advance with one answer: %+v, %v (resumed %d)", res, err, after.Load())
		}
		h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"second": map[string]any{"action": "decline"}}})
		if res, err := h.srv.Advance(ctx, id); err != nil || res.Status != driver.StatusCompleted {
			t.Fatalf("advance with both answers: %+v, %v", res, err)
		}
		done := h.c.Get(t, id)
		if txt := textOf(t, done.Result); !strings.Contains(txt, `"n":1`) || !strings.Contains(txt, "decline") {
			t.Fatalf("result %q does not carry both answers", txt)
		}
	})
}

// A handler whose steps no longer match the journal fails the task loudly.
func TestNondeterminismFails(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var v2 atomic.Bool
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "evolving", Description: "its code changes"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					first := "fetch"
					if v2.Load() {
						first = "fetch-v2"
					}
					for _, name := range []string{first, "store"} {
						if _, err := tasks.Do(st, name, func(context.Context) (bool, error) { return true, nil }); err != nil {
							return nil, err
						}
					}
					return text("ok"), nil
				})
		})
		ctx := context.Background()
		id := h.create(t, "evolving", nil)
		if _, err := h.srv.Advance(ctx, id); err != nil {
			t.Fatal(err)
		}
		v2.Store(true) // deploy new code mid-task
		if res, err := h.srv.Advance(ctx, id); err != nil || res.Status != driver.StatusFailed {
			t.Fatalf("advance after the code change: %+v, %v", res, err)
		}
		got := h.c.Get(t, id)
		if !strings.Contains(string(got.Error), "code changed") || !strings.Contains(string(got.Error), "fetch-v2") {
			t.Fatalf("error %s does not explain the mismatch", got.Error)
		}
	})
}

// shortQueue caps delays, to exercise chained sleeps.
type shortQueue struct {
	driver.Queue
	n atomic.Int32
}

func (q *shortQueue) MaxDelay() time.Duration { return 100 * time.Millisecond }
func (q *shortQueue) Enqueue(ctx context.Context, id string, at time.Time) error {
	q.n.Add(1)
	return q.Queue.Enqueue(ctx, id, at)
}

// A sleep longer than the queue's delay limit is chained through several
// deliveries and still wakes at the right time.
func TestLongSleepIsChained(t *testing.T) {
	rc := newRedis(t, "embedded")
	store := redisstore.New(rc, nil)
	rq := redisqueue.New(rc, &redisqueue.Options{Poll: 5 * time.Millisecond})
	sq := &shortQueue{Queue: rq}
	var wokeAfter atomic.Int64
	srv := tasks.New(&mcp.Implementation{Name: "t", Version: "1"}, nil, store, sq, &tasks.Options{Anonymous: true})
	tasks.AddTool(srv, &mcp.Tool{Name: "nap", Description: "naps"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			start, err := tasks.Do(st, "start", func(context.Context) (time.Time, error) { return time.Now(), nil })
			if err != nil {
				return nil, err
			}
			if err := st.Sleep("nap", 450*time.Millisecond); err != nil {
				return nil, err
			}
			wokeAfter.Store(int64(time.Since(start)))
			return text("woke"), nil
		})
	ts := httptest.NewServer(tasks.NewSDKHandler(srv.MCP(), nil))
	defer ts.Close()
	c := mcptest.NewClient(strings.TrimPrefix(ts.URL, "http://"), true)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		rq.Consume(ctx, 1, func(ctx context.Context, id string) (redisqueue.Settle, error) {
			res, err := srv.Advance(ctx, id)
			return redisqueue.SettleOf(res.Settled, res.Status.Terminal()), err
		})
	})
	defer func() { cancel(); wg.Wait() }()
	var tk mcptest.Task
	c.Call(t, "tools/call", map[string]any{"name": "nap", "arguments": map[string]any{}}).Decode(t, &tk)
	done := c.WaitFor(t, tk.TaskID, 20*time.Second, mcptest.Terminal)
	if done.Status != "completed" {
		t.Fatalf("ended %+v", done)
	}
	if d := time.Duration(wokeAfter.Load()); d < 450*time.Millisecond {
		t.Errorf("woke after %v, before the 450ms sleep ended", d)
	}
	if n := sq.n.Load(); n < 5 { // create + start step + >=3 chained wake-ups
		t.Errorf("%d enqueues, want >= 5 for a 450ms sleep through a 100ms queue", n)
	}
}

// GatherInputFirst: leading input goes over MRTR before the task exists;
// the task starts with the answer journaled.
func TestGatherInputFirst(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		type who struct {
			Name string `json:"name"`
		}
		tasks.AddTool(s, &mcp.Tool{Name: "hello_task", Description: "asks a name, then works"}, tasks.Required,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				ans, err := tasks.Elicit[who](st, "user_name", "Your name?")
				if err != nil {
					return nil, err
				}
				msg, err := tasks.Do(st, "greet", func(context.Context) (string, error) { return "Hello, " + ans.Content.Name, nil })
				return text(msg), err
			}, tasks.GatherInputFirst())
	})
	h.work(t, 1)
	var r1 struct {
		ResultType    string                     `json:"resultType"`
		TaskID        string                     `json:"taskId"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	h.c.Call(t, "tools/call", map[string]any{"name": "hello_task", "arguments": map[string]any{}}).Decode(t, &r1)
	if r1.ResultType != "input_required" || r1.TaskID != "" || r1.InputRequests["user_name"] == nil {
		t.Fatalf("round 1 = %+v", r1)
	}
	var r2 map[string]json.RawMessage
	h.c.Call(t, "tools/call", map[string]any{"name": "hello_task", "arguments": map[string]any{},
		"inputResponses": map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}},
		"requestState":   r1.RequestState}).Decode(t, &r2)
	if string(r2["resultType"]) != `"task"` || r2["requestState"] != nil || r2["inputRequests"] != nil {
		t.Fatalf("round 2 = %v", r2)
	}
	var id string
	_ = json.Unmarshal(r2["taskId"], &id)
	done := h.wait(t, id)
	if done.Status != "completed" || textOf(t, done.Result) != "Hello, Alice" {
		t.Fatalf("task %+v %s", done, done.Result)
	}
}

// The sweeper re-enqueues a task whose enqueue was lost and one whose
// worker died holding the lease, wakes a due timer, and forgets ended tasks.
func TestSweeper(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var runs atomic.Int32
		h := newHarness(t, backend, tasks.Options{MaxDuration: 10 * time.Second}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "one", Description: "one step"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					_, err := tasks.Do(st, "work", func(context.Context) (int, error) { return int(runs.Add(1)), nil })
					return text("ok"), err
				})
		})
		ctx := context.Background()
		// received drains the queue as a worker would, without advancing.
		received := func() []string {
			var ids []string
			for {
				d, ok, _, err := h.q.Receive(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					return ids
				}
				ids = append(ids, d.TaskID)
				if err := h.q.Ack(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
		}
		lost := h.create(t, "one", nil)    // its message gets dropped below
		crashed := h.create(t, "one", nil) // its worker dies holding the lease
		done := h.create(t, "one", nil)    // finishes normally
		received()
		if _, err := h.store.Claim(ctx, crashed, h.clock.Now(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		for {
			res, err := h.srv.Advance(ctx, done)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status.Terminal() {
				break
			}
		}
		received()

		// Nothing is due yet: the lease lives and the grace has not passed.
		res, err := h.srv.Sweep(ctx, 0)
		if err != nil || res.Enqueued != 0 {
			t.Fatalf("early sweep: %+v, %v", res, err)
		}
		h.clock.Advance(time.Minute) // past the enqueue grace and the lease
		res, err = h.srv.Sweep(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := received()
		if res.Enqueued != 2 || len(got) != 2 || !slices.Contains(got, lost) || !slices.Contains(got, crashed) {
			t.Fatalf("sweep %+v re-enqueued %v, want the lost and the crashed task", res, got)
		}
		for _, id := range []string{lost, crashed} {
			for {
				r, err := h.srv.Advance(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status.Terminal() {
					break
				}
			}
		}
		h.clock.Advance(time.Minute)
		res, err = h.srv.Sweep(ctx, 0)
		if err != nil || res.Enqueued != 0 {
			t.Fatalf("sweep after all ended: %+v, %v", res, err)
		}
		if due, _ := h.store.Due(ctx, h.clock.Now().Add(24*time.Hour), 10); len(due) != 0 {
			t.Errorf("due index still holds %v after every task ended", due)
		}
	})
}

// A sleep longer than the store's wake horizon (an hour) costs no queue
// message until the sweeper runs within the hour before the wake, which
// enqueues it at the wake (redisstore.Options.WakeHorizon); a store that
// does not dispatch enqueues as before. Either way the task wakes at its
// time, and runs its steps once.
func TestFarWake(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var runs atomic.Int32
		h := newHarness(t, backend, tasks.Options{MaxDuration: 10 * time.Second, TTL: 24 * time.Hour}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "long", Description: "sleeps three hours"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					if _, err := tasks.Do(st, "before", func(context.Context) (int, error) { return int(runs.Add(1)), nil }); err != nil {
						return nil, err
					}
					if err := st.Sleep("nap", 3*time.Hour); err != nil {
						return nil, err
					}
					return text("woke"), nil
				})
		})
		ctx := context.Background()
		dispatches := strings.HasSuffix(backend, dispatching)
		id := h.create(t, "long", nil)
		for {
			res, err := h.srv.Advance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if res.Skipped || res.Status.Terminal() {
				t.Fatalf("advance: %+v", res)
			}
			if tk, _ := h.store.Peek(ctx, id); !tk.WakeAt.IsZero() {
				break
			}
		}
		tk, err := h.store.Peek(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wake := tk.WakeAt
		qkey, _ := h.q.KeysFor(id)
		score := func() (int64, bool) {
			v, err := h.rc.Do(ctx, h.rc.B().Zscore().Key(qkey).Member(id).Build()).AsFloat64()
			return int64(v), err == nil
		}
		// (Without dispatch, the creation's message stays: nothing
		// received it.)
		if at, ok := score(); dispatches && ok {
			t.Errorf("a wake 3 hours ahead has a queue message (at %d)", at)
		}
		// Within the hour before the wake: the sweeper enqueues it at the
		// wake, once.
		h.clock.Advance(wake.Sub(h.clock.Now()) - time.Hour + time.Second)
		res, err := h.srv.Sweep(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1}[dispatches]; res.Scheduled != want || res.Enqueued != 0 {
			t.Errorf("sweep within the horizon: %+v, want %d scheduled", res, want)
		}
		if at, ok := score(); dispatches && (!ok || at != wake.UnixMilli()) {
			t.Errorf("after the sweep: queue message at %d (%v), want %d", at, ok, wake.UnixMilli())
		}
		if res, err = h.srv.Sweep(ctx, 0); err != nil || res.Examined != 0 {
			t.Errorf("a second sweep: %+v, %v", res, err)
		}
		// At the wake, it runs on.
		h.clock.Advance(wake.Sub(h.clock.Now()))
		r, err := h.srv.Advance(ctx, id)
		if err != nil || r.Status != driver.StatusCompleted {
			t.Fatalf("at the wake: %+v, %v", r, err)
		}
		if runs.Load() != 1 {
			t.Errorf("the step before the sleep ran %d times", runs.Load())
		}
	})
}

// Input options: WaitAny resumes on the first answer; a Deadline ends the
// wait with ErrInputTimeout and what was answered.
func TestInputAnyAndDeadline(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		ask := func(q string) tasks.InputRequest {
			return tasks.InputRequest{Method: "elicitation/create", Params: map[string]any{
				"mode": "form", "message": q, "requestedSchema": map[string]any{"type": "object"}}}
		}
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "either", Description: "first answer wins"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					got, err := st.Input("pick", map[string]tasks.InputRequest{"a": ask("a?"), "b": ask("b?")}, tasks.WaitAny())
					if err != nil {
						return nil, err
					}
					return text(fmt.Sprint(len(got), " answer(s)")), nil
				})
			tasks.AddTool(s, &mcp.Tool{Name: "hurry", Description: "waits 300ms at most"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					_, err := st.Input("q", map[string]tasks.InputRequest{"q": ask("quick?")}, tasks.Deadline(300*time.Millisecond))
					if errors.Is(err, tasks.ErrInputTimeout) {
						return text("timed out"), nil
					}
					return text("answered"), err
				})
		})
		h.work(t, 2)
		either := h.create(t, "either", nil)
		h.c.WaitFor(t, either, 10*time.Second, func(tk mcptest.Task) bool { return tk.Status == "input_required" })
		h.c.Call(t, "tasks/update", map[string]any{"taskId": either, "inputResponses": map[string]any{"b": map[string]any{"action": "decline"}}})
		done := h.wait(t, either)
		if done.Status != "completed" || textOf(t, done.Result) != "1 answer(s)" {
			t.Fatalf("either: %+v %s", done, done.Result)
		}
		// A late answer to the withdrawn request is ignored.
		h.c.Call(t, "tasks/update", map[string]any{"taskId": either, "inputResponses": map[string]any{"a": map[string]any{"action": "decline"}}})

		hurry := h.create(t, "hurry", nil)
		done = h.wait(t, hurry)
		if done.Status != "completed" || textOf(t, done.Result) != "timed out" {
			t.Fatalf("hurry: %+v %s", done, done.Result)
		}
	})
}

// A handler's JSON-RPC error whose data is not valid JSON still ends the
// task failed (without the data), instead of making its record unwritable.
func TestInvalidErrorDataFailsTask(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "bad", Description: "bad error data"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				return nil, &jsonrpc.Error{Code: -32000, Message: "nope", Data: json.RawMessage(`{not json`)}
			})
	})
	id := h.create(t, "bad", nil)
	res, err := h.srv.Advance(context.Background(), id)
	if err != nil || res.Status != driver.StatusFailed {
		t.Fatalf("Advance: %+v, %v", res, err)
	}
	if got := h.c.Get(t, id); !strings.Contains(string(got.Error), `"nope"`) {
		t.Fatalf("error %s", got.Error)
	}
}

// Answers sent with the first call to keys nobody asked for are not kept:
// they cannot pre-answer an input step the task reaches later.
func TestUnsolicitedAnswersIgnored(t *testing.T) {
	type who struct {
		Name string `json:"name"`
	}
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "approve_later", Description: "asks twice"}, tasks.Required,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if _, err := tasks.Elicit[who](st, "user_name", "Name?"); err != nil {
					return nil, err
				}
				if _, err := tasks.Do(st, "work", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return nil, err
				}
				ok, err := tasks.Elicit[struct {
					OK bool `json:"ok"`
				}](st, "approve", "Approve?")
				return text(fmt.Sprint(ok.Content.OK)), err
			}, tasks.GatherInputFirst())
	})
	var r1 map[string]json.RawMessage
	h.c.Call(t, "tools/call", map[string]any{"name": "approve_later", "arguments": map[string]any{},
		"inputResponses": map[string]any{
			"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "A"}},
			"approve":   map[string]any{"action": "accept", "content": map[string]any{"ok": true}},
		}}).Decode(t, &r1)
	var id string
	if err := json.Unmarshal(r1["taskId"], &id); err != nil || id == "" {
		t.Fatalf("no task: %v", r1)
	}
	for range 5 {
		if res, err := h.srv.Advance(context.Background(), id); err != nil || res.Skipped {
			break
		}
	}
	if got := h.c.Get(t, id); got.Status != "input_required" || got.InputRequests["approve"] == nil {
		t.Fatalf("task %+v: the unsolicited answer to %q was used", got, "approve")
	}
}

// An inline run is bounded by the invocation's budget: without the
// async-jobs fallback, a sleep past it ends the call at once with -32021
// (it needs a task) instead of holding the request; with it (the default),
// the call answers at once with a background job's handle.
func TestInlineRunIsBounded(t *testing.T) {
	for _, jobs := range []bool{false, true} {
		h := newHarness(t, "embedded", tasks.Options{MaxDuration: 2 * time.Second, Jobs: tasks.JobOptions{Disable: !jobs}}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "long_nap", Description: "naps an hour"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					return text("woke"), st.Sleep("nap", time.Hour)
				})
		})
		in := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(h.c.URL, "http://"), "/mcp"), false)
		began := time.Now()
		r := in.Call(t, "tools/call", map[string]any{"name": "long_nap", "arguments": map[string]any{}})
		if took := time.Since(began); took > time.Second {
			t.Errorf("jobs=%v: the call held the request %v; it is answered at once", jobs, took)
		}
		if !jobs {
			if r.Error == nil || r.Error.Code != -32021 {
				t.Fatalf("inline hour-long sleep: %+v, want a -32021 error", r)
			}
			// Refused at once, saying why.
			if !strings.Contains(r.Error.Message, "sleeps 1h0m0s") || !strings.Contains(r.Error.Message, "call it as a task") {
				t.Fatalf("inline hour-long sleep: error %q does not say the sleep outlasts the budget", r.Error.Message)
			}
			continue
		}
		var job struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			Structured struct {
				TaskID string `json:"taskId"`
			} `json:"structuredContent"`
		}
		r.Decode(t, &job)
		if job.Structured.TaskID == "" || !strings.Contains(job.Content[0].Text, "sleeps 1h0m0s") {
			t.Fatalf("inline hour-long sleep with the fallback: %s, want a job's handle", r.Result)
		}
		if tk := h.c.Get(t, job.Structured.TaskID); tk.Status != "working" {
			t.Fatalf("the job: %+v", tk)
		}
	}
}

// A step result over the size limit fails the step (without retries) and
// is never journaled.
func TestOversizedStepResult(t *testing.T) {
	var runs atomic.Int32
	h := newHarness(t, "embedded", tasks.Options{MaxResultBytes: 1024}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "big", Description: "returns too much"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				_, err := tasks.Do(st, "blob", func(context.Context) (string, error) {
					runs.Add(1)
					return strings.Repeat("x", 4096), nil
				})
				return text("ok"), err
			})
	})
	id := h.create(t, "big", nil)
	res, err := h.srv.Advance(context.Background(), id)
	if err != nil || res.Status != driver.StatusFailed || runs.Load() != 1 {
		t.Fatalf("Advance: %+v, %v after %d runs", res, err, runs.Load())
	}
	if got := h.c.Get(t, id); !strings.Contains(string(got.Error), "over the 1024 byte limit") {
		t.Fatalf("error %s", got.Error)
	}
}
