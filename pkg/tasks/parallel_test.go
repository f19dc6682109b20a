package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// fanArgs are the arguments of the test tool "fan".
type fanArgs struct {
	N       int `json:"n"`
	Millis  int `json:"ms"`
	Fail    int `json:"fail"`    // the index of a branch that fails for good (-1: none)
	Flaky   int `json:"flaky"`   // the index of a branch whose first attempt fails (-1: none)
	Block   int `json:"block"`   // the index of a branch that runs until its context ends (-1: none)
	Workers int `json:"workers"` // Concurrency
}

// fanRuns counts the finished runs of each branch of each task, and the
// branches whose context was cancelled.
type fanRuns struct {
	mu        sync.Mutex
	runs      map[string]int
	running   atomic.Int32
	maxAtOnce atomic.Int32
	cancelled atomic.Int32
}

func (f *fanRuns) ran(id string, i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[fmt.Sprintf("%s/%d", id, i)]++
}

func (f *fanRuns) count(id string, i int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[fmt.Sprintf("%s/%d", id, i)]
}

// fan is the test tool "fan": a parallel step of n branches, branch i
// squaring i after ms milliseconds, then a step after the join.
func fan(f *fanRuns) func(s *tasks.Server) {
	return func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "fan"}, tasks.Optional, func(ctx context.Context, st *tasks.Step, in fanArgs) (*mcp.CallToolResult, error) {
			items := make([]int, in.N)
			for i := range items {
				items[i] = i
			}
			st.Status(fmt.Sprintf("squaring %d numbers", in.N))
			id := st.TaskID()
			squares, err := tasks.All(st, "square", items, func(ctx context.Context, i int) (int, error) {
				n := f.running.Add(1)
				defer f.running.Add(-1)
				for m := f.maxAtOnce.Load(); n > m && !f.maxAtOnce.CompareAndSwap(m, n); m = f.maxAtOnce.Load() {
				}
				if i == in.Block {
					<-ctx.Done()
					f.cancelled.Add(1)
					return 0, ctx.Err()
				}
				select {
				case <-time.After(time.Duration(in.Millis) * time.Millisecond):
				case <-ctx.Done():
					return 0, ctx.Err()
				}
				f.ran(id, i)
				if i == in.Fail {
					return 0, tasks.Permanent(fmt.Errorf("branch %d is broken", i))
				}
				if i == in.Flaky && f.count(id, i) == 1 {
					return 0, errors.New("flaky")
				}
				return i * i, nil
			}, tasks.Concurrency(in.Workers), tasks.Retries(1), tasks.Backoff(10*time.Millisecond, 10*time.Millisecond))
			var je *tasks.JoinError
			if errors.As(err, &je) {
				b, _ := json.Marshal(squares)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("failed %v kept %s", je.Failures, b)}}}, nil
			}
			if err != nil {
				return nil, err
			}
			sum, err := tasks.Do(st, "sum", func(context.Context) (int, error) {
				t := 0
				for _, v := range squares {
					t += v
				}
				return t, nil
			})
			if err != nil {
				return nil, err
			}
			b, _ := json.Marshal(squares)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s sum %d", b, sum)}}}, nil
		})
	}
}

func fanArgsOf(n, ms, workers int) map[string]any {
	return map[string]any{"n": n, "ms": ms, "fail": -1, "flaky": -1, "block": -1, "workers": workers}
}

// Every branch runs once, at most Concurrency at once, in invocations of
// their own; the task waits as working, awaiting the join, and resumes
// with the results in order.
func TestAll(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			runs := &fanRuns{runs: map[string]int{}}
			h := newHarness(t, backend, tasks.Options{}, fan(runs))
			var branchAdvances atomic.Int32
			h.workWatched(t, 6, func(id string, res tasks.AdvanceResult, err error) {
				if _, _, _, ok := driver.ParseBranchID(id); ok && !res.Skipped {
					branchAdvances.Add(1)
				}
			})
			id := h.create(t, "fan", fanArgsOf(10, 50, 3))
			h.c.WaitFor(t, id, 20*time.Second, func(mcptest.Task) bool { return h.get(t, id).Awaiting == "square" })
			if tk := h.c.Get(t, id); tk.Status != "working" || tk.StatusMessage != "squaring 10 numbers" {
				t.Errorf("forked task: %s %q", tk.Status, tk.StatusMessage)
			}
			done := h.wait(t, id)
			if done.Status != "completed" || textOf(t, done.Result) != "[0,1,4,9,16,25,36,49,64,81] sum 285" {
				t.Fatalf("task ended %s with %s", done.Status, done.Result)
			}
			for i := range 10 {
				if n := runs.count(id, i); n != 1 {
					t.Errorf("branch %d ran %d times, want 1", i, n)
				}
			}
			if n := runs.maxAtOnce.Load(); n > 3 {
				t.Errorf("%d branches ran at once, want at most Concurrency(3)", n)
			}
			if n := branchAdvances.Load(); n != 10 {
				t.Errorf("%d branch invocations ran a branch, want 10", n)
			}
		})
	}
}

// A branch that fails after its retries fails the join: the others'
// results are kept, and the error lists the failure; a branch whose first
// attempt fails is retried.
func TestAllFailures(t *testing.T) {
	runs := &fanRuns{runs: map[string]int{}}
	h := newHarness(t, "redis-server", tasks.Options{}, fan(runs))
	h.work(t, 4)
	args := fanArgsOf(5, 10, 5)
	args["fail"], args["flaky"] = 3, 1
	id := h.create(t, "fan", args)
	done := h.wait(t, id)
	if done.Status != "completed" || textOf(t, done.Result) != "failed [{3 branch 3 is broken}] kept [0,1,4,0,16]" {
		t.Fatalf("task ended %s with %s", done.Status, done.Result)
	}
	if n := runs.count(id, 1); n != 2 {
		t.Errorf("the flaky branch ran %d times, want 2", n)
	}
	if n := runs.count(id, 3); n != 1 {
		t.Errorf("the broken branch ran %d times, want 1 (a permanent error is not retried)", n)
	}
}

// Cancelling a task whose branches run ends it at once; the running
// branch sees its context cancelled, and no other branch starts.
func TestAllCancel(t *testing.T) {
	for _, backend := range []string{"redis-server", "redis-server" + dispatching} {
		t.Run(backend, func(t *testing.T) {
			runs := &fanRuns{runs: map[string]int{}}
			h := newHarness(t, backend, tasks.Options{CancelPoll: 20 * time.Millisecond}, fan(runs))
			h.work(t, 2)
			args := fanArgsOf(6, 60000, 1)
			args["block"] = 0
			id := h.create(t, "fan", args)
			for deadline := time.Now().Add(20 * time.Second); runs.running.Load() == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the first branch never started")
				}
			}
			h.c.Call(t, "tasks/cancel", map[string]any{"taskId": id})
			if tk := h.c.Get(t, id); tk.Status != "cancelled" {
				t.Fatalf("after tasks/cancel: %s, want cancelled at once", tk.Status)
			}
			for deadline := time.Now().Add(10 * time.Second); runs.cancelled.Load() == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the running branch never saw the cancellation")
				}
			}
			time.Sleep(200 * time.Millisecond)
			if n := runs.maxAtOnce.Load(); n != 1 {
				t.Errorf("%d branches ran, want only the first", n)
			}
		})
	}
}

// The sweeper enqueues again a dispatched branch whose message was lost
// (a store that does not dispatch: the worker's enqueue failed).
func TestAllSweepRecoversBranch(t *testing.T) {
	runs := &fanRuns{runs: map[string]int{}}
	h := newHarness(t, "redis-server", tasks.Options{}, fan(runs))
	ctx := t.Context()
	id := h.create(t, "fan", fanArgsOf(2, 1, 2))
	if _, err := h.srv.Advance(ctx, id); err != nil {
		t.Fatal(err)
	}
	if tk := h.get(t, id); tk.Awaiting != "square" {
		t.Fatalf("the task does not await its branches: %+v", tk)
	}
	qkey, _ := h.q.Keys()
	if err := h.rc.Do(ctx, h.rc.B().Del().Key(qkey).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(2 * time.Second) // past the store's grace
	res, err := h.srv.Sweep(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Enqueued != 2 {
		t.Errorf("Sweep enqueued %d, want the two branches", res.Enqueued)
	}
	h.work(t, 2)
	if done := h.wait(t, id); textOf(t, done.Result) != "[0,1] sum 1" {
		t.Fatalf("task ended %s with %s", done.Status, done.Result)
	}
}

// On a store that is not a Brancher, the branches run one after another
// as Do steps; inline (a client without the extension, no async-jobs
// fallback) they run concurrently within the call.
func TestAllFallbacks(t *testing.T) {
	t.Run("sequence", func(t *testing.T) {
		runs := &fanRuns{runs: map[string]int{}}
		h := newHarness(t, "embedded", tasks.Options{}, func(*tasks.Server) {})
		plain := tasks.New(&mcp.Implementation{Name: "plain", Version: "1"}, nil, struct{ driver.Store }{h.store}, h.q, &tasks.Options{Anonymous: true})
		fan(runs)(plain)
		res, err := plain.CreateTask(t.Context(), "anonymous", "fan", []byte(`{"n":3,"ms":1,"fail":-1,"flaky":-1,"block":-1,"workers":3}`))
		if err != nil {
			t.Fatal(err)
		}
		id := res.(*tasks.CreateTaskResult).TaskID
		for range 10 {
			if _, err := plain.Advance(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}
		tk := h.get(t, id)
		if tk.Status != driver.StatusCompleted || !strings.Contains(string(tk.Result), "[0,1,4] sum 5") {
			t.Fatalf("task: %s %s", tk.Status, tk.Result)
		}
		if runs.maxAtOnce.Load() != 1 {
			t.Errorf("branches ran %d at once, want one after another", runs.maxAtOnce.Load())
		}
	})
	t.Run("inline", func(t *testing.T) {
		runs := &fanRuns{runs: map[string]int{}}
		h := newHarness(t, "embedded", tasks.Options{Jobs: tasks.JobOptions{Disable: true}}, fan(runs))
		inline := mcptest.NewClient(strings.TrimPrefix(h.url, "http://"), false)
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		inline.Call(t, "tools/call", map[string]any{"name": "fan", "arguments": fanArgsOf(4, 100, 4)}).Decode(t, &res)
		if len(res.Content) != 1 || res.Content[0].Text != "[0,1,4,9] sum 14" {
			t.Fatalf("inline result %+v", res)
		}
		if runs.maxAtOnce.Load() < 2 {
			t.Errorf("inline branches ran %d at once, want them concurrent", runs.maxAtOnce.Load())
		}
	})
}

// A traced parallel step: every branch's invocation joins the task's one
// trace, with a step span named after the branch.
func TestAllTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	runs := &fanRuns{runs: map[string]int{}}
	h := newHarness(t, "redis-server", tasks.Options{TracerProvider: tp}, fan(runs))
	h.work(t, 3)
	id := h.create(t, "fan", fanArgsOf(3, 1, 3))
	if tk := h.wait(t, id); tk.Status != "completed" {
		t.Fatalf("task ended %+v", tk)
	}
	var root trace.TraceID
	traces := map[trace.TraceID]bool{}
	steps := map[string]bool{}
	for deadline := time.Now().Add(10 * time.Second); len(steps) < 3 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, s := range rec.Ended() {
			switch {
			case s.Name() == "tools/call fan":
				root = s.SpanContext().TraceID()
			case strings.HasPrefix(s.Name(), "step square["):
				steps[s.Name()] = true
				traces[s.SpanContext().TraceID()] = true
			}
		}
	}
	if len(steps) != 3 || len(traces) != 1 || !traces[root] {
		t.Errorf("branch step spans %v in traces %v, want square[0..2] in the task's trace %v", steps, traces, root)
	}
}
