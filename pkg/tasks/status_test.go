package tasks_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/redis/rueidis"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// A status the handler sets after its last step (its final word, such as
// "done") stays on the finished task; one set before a step of an earlier
// invocation, and only replayed since, is cleared
// (TestStatusMessageClearedOnTerminal).
func TestFinalStatusMessageKept(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "sleeps, then says done"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					st.Status("napping")
					if err := st.Sleep("nap", 50*time.Millisecond); err != nil {
						return nil, err
					}
					st.Status("done")
					return text("rested"), nil
				})
		})
		h.work(t, 1)
		id := h.create(t, "nap", nil)
		if tk := h.wait(t, id); tk.Status != "completed" || tk.StatusMessage != "done" {
			t.Errorf("nap ended %s with statusMessage %q, want completed with \"done\"", tk.Status, tk.StatusMessage)
		}
	})
}

// A status message set before a step is written once the step has run
// for a cancellation poll, so tasks/get shows it while a slow step runs; a
// tasks/cancel arriving then still stops the step.
func TestStatusShownWhileStepRuns(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		release := make(chan struct{})
		h := newHarness(t, backend, tasks.Options{CancelPoll: 20 * time.Millisecond}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "slow", Description: "one slow step"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					st.Status("working hard")
					_, err := tasks.Do(st, "hard", func(ctx context.Context) (int, error) {
						select {
						case <-release:
							return 1, nil
						case <-ctx.Done():
							return 0, ctx.Err()
						}
					})
					return text("ok"), err
				})
		})
		h.work(t, 1)
		id := h.create(t, "slow", nil)
		h.c.WaitFor(t, id, 10*time.Second, func(tk mcptest.Task) bool { return tk.StatusMessage == "working hard" })
		h.c.Call(t, "tasks/cancel", map[string]any{"taskId": id})
		if tk := h.wait(t, id); tk.Status != "cancelled" {
			t.Errorf("slow ended %s after tasks/cancel, want cancelled", tk.Status)
		}
		close(release)
	})
}

// A worker step costs the claim and the commit, plus the enqueue (or, for
// the last, the due index's cleanup) unless the store dispatches (its
// scripts enqueue and keep the due index), whether or not the handler sets
// a status message before the step (the commit after a fast step carries
// it).
func TestStepRoundTrips(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		// No cancellation poll while a step runs: a step slowed past it on
		// a loaded machine would cost a round trip more.
		h := newHarness(t, backend, tasks.Options{CancelPoll: time.Hour}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "steps", Description: "three quick steps with a status"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					for i := range 3 {
						st.Status(fmt.Sprintf("step %d", i))
						if _, err := tasks.Do(st, fmt.Sprint(i), func(context.Context) (int, error) { return i, nil }); err != nil {
							return nil, err
						}
					}
					return text("ok"), nil
				})
		})
		id := h.create(t, "steps", nil)
		// A first task loads the scripts (NOSCRIPT costs a round trip); on
		// a cluster, scripts are loaded per master: warm tasks run until
		// one has run on the measured task's master.
		for n := 0; ; n++ {
			if n == 50 {
				t.Fatal("50 warm tasks, none on the measured task's master")
			}
			warm := h.create(t, "steps", nil)
			for range 3 {
				if _, err := h.srv.Advance(t.Context(), warm); err != nil {
					t.Fatal(err)
				}
			}
			if backend != "cluster" || nodeOf(t, h.rc, warm) == nodeOf(t, h.rc, id) {
				break
			}
		}
		want := int64(3)
		if strings.HasSuffix(backend, dispatching) {
			want = 2
		}
		for i := range 3 {
			h.rc.Reset()
			res, err := h.srv.Advance(t.Context(), id)
			if err != nil || res.Steps != 1 {
				t.Fatalf("Advance %d = %+v, %v; want one step", i, res, err)
			}
			if got := h.rc.Trips(); got != want {
				t.Errorf("step %d cost %d round trips, want %d", i, got, want)
			}
		}
	})
}

// A worker that consumes the Redis queue of a dispatching store pays two
// round trips per step, the claim and the commit: the commit hands back
// the queue's next due message (redisqueue.HandBack), which the consumer
// handles without a receive, each exactly once. Other stores keep a
// receive (and an enqueue or an acknowledgement) besides.
func TestConsumerStepRoundTrips(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		h := newHarness(t, backend, tasks.Options{CancelPoll: time.Hour, Logger: slog.New(slog.DiscardHandler)}, registerNoop(10))
		// Warm tasks load the scripts (NOSCRIPT costs a round trip). A
		// store that does not dispatch leaves their messages, delivered
		// (and skipped) among the measured ones.
		warmed := map[string]bool{}
		for range 3 {
			warm := h.create(t, "noop", nil)
			warmed[warm] = true
			for {
				res, err := h.srv.Advance(t.Context(), warm)
				if err != nil {
					t.Fatal(err)
				}
				if res.Status.Terminal() {
					break
				}
			}
		}
		const tasksN = 3
		left := map[string]bool{}
		for range tasksN {
			left[h.create(t, "noop", nil)] = true
		}
		h.rc.Reset()
		var mu sync.Mutex
		steps := 0
		var trips int64
		done := make(chan struct{})
		h.workWatched(t, 1, func(id string, res tasks.AdvanceResult, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case warmed[id] && !strings.HasSuffix(backend, dispatching):
			case !left[id]:
				t.Errorf("delivery of %s, which is not running", id)
			case err != nil || res.Steps != 1:
				t.Errorf("Advance(%s) = %+v, %v; want one step (each message handled once)", id, res, err)
			}
			steps += res.Steps
			if res.Status.Terminal() {
				delete(left, id)
				if len(left) == 0 {
					trips = h.rc.Trips()
					close(done)
				}
			}
		})
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the tasks did not complete")
		}
		mu.Lock()
		defer mu.Unlock()
		if steps != 10*tasksN {
			t.Fatalf("ran %d steps, want %d", steps, 10*tasksN)
		}
		t.Logf("%d round trips for %d steps", trips, steps)
		if strings.HasSuffix(backend, dispatching) {
			// The claim and the commit of each step, and the consumer's
			// first receive (a second, if the wake subscription's
			// confirmation crossed it).
			if most := int64(2*steps + 2); trips > most {
				t.Errorf("%d round trips for %d steps, want at most %d (2 per step)", trips, steps, most)
			}
			return
		}
		// A receive, the claim and the commit of each step, at least.
		if least := int64(3 * steps); trips < least {
			t.Errorf("%d round trips for %d steps, want at least %d", trips, steps, least)
		}
	})
}

// nodeOf returns the address of the node of c that holds the keys of
// task id.
func nodeOf(t *testing.T, c rueidis.Client, id string) string {
	t.Helper()
	for addr, n := range c.Nodes() {
		keys, err := n.Do(t.Context(), n.B().Keys().Pattern("*"+id+"*").Build()).AsStrSlice()
		if err != nil {
			t.Fatalf("KEYS on %s: %v", addr, err)
		}
		if len(keys) > 0 {
			return addr
		}
	}
	t.Fatalf("no node holds keys of task %s", id)
	return ""
}
