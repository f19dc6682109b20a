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

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// stopRequest is the offer the tests put up.
var stopRequest = tasks.InputRequest{Method: "elicitation/create", Params: map[string]any{
	"mode": "form", "message": "Stop early?", "requestedSchema": map[string]any{"type": "object"}}}

// advanceUntilIdle advances id until an invocation is skipped or the task
// leaves working, and returns the last result.
func advanceUntilIdle(t *testing.T, h *harness, id string) tasks.AdvanceResult {
	t.Helper()
	for range 20 {
		res, err := h.srv.Advance(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped || res.Status != driver.StatusWorking {
			return res
		}
	}
	t.Fatalf("task %s still working after 20 invocations", id)
	return tasks.AdvanceResult{}
}

func answer(t *testing.T, h *harness, id string, responses map[string]any) {
	t.Helper()
	if r := h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": responses}); r.Error != nil {
		t.Fatalf("tasks/update: %+v", r.Error)
	}
}

// An answer to an offer while the task sleeps cuts the sleep short (Sleep
// returns ErrWoken), and CheckInput returns the answer once. While the task
// sleeps with the offer outstanding it is input_required with the offer as
// its input request; the answer takes it out at once and enqueues it.
func TestOfferCutsSleep(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var woken, checks, found atomic.Int32
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "watch", Description: "sleeps until told to stop"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					if err := st.Offer("stop", stopRequest); err != nil {
						return nil, err
					}
					for i := range 3 {
						checks.Add(1)
						if ans, ok := st.CheckInput("stop"); ok {
							found.Add(1)
							_, again := st.CheckInput("stop")
							return text(fmt.Sprintf("stopped before nap %d: %s (again: %v)", i, ans, again)), nil
						}
						err := st.Sleep(fmt.Sprint("nap-", i), time.Hour)
						if errors.Is(err, tasks.ErrWoken) {
							woken.Add(1)
						} else if err != nil {
							return nil, err
						}
					}
					return text("slept through"), nil
				})
		})
		id := h.create(t, "watch", nil)
		res := advanceUntilIdle(t, h, id)
		if res.Status != driver.StatusInputRequired {
			t.Fatalf("after the first invocation: %+v, want input_required (sleeping with an offer)", res)
		}
		tk := h.c.Get(t, id)
		var req map[string]any
		if tk.Status != "input_required" || len(tk.InputRequests) != 1 || json.Unmarshal(tk.InputRequests["stop"], &req) != nil ||
			req["method"] != "elicitation/create" {
			t.Fatalf("sleeping task: %+v, want input_required with the offer", tk)
		}
		if res := advanceUntilIdle(t, h, id); !res.Skipped || res.Reason != "waiting for input" {
			t.Fatalf("a stray delivery of the sleeping task: %+v", res)
		}

		h.rcEnqueued(t, func() {
			answer(t, h, id, map[string]any{"stop": map[string]any{"action": "accept"}})
		}, id)
		if tk := h.c.Get(t, id); tk.Status != "working" || len(tk.InputRequests) != 0 {
			t.Fatalf("after the answer: %+v, want working without input requests", tk)
		}
		res = advanceUntilIdle(t, h, id)
		done := h.c.Get(t, id)
		if res.Status != driver.StatusCompleted || textOf(t, done.Result) != `stopped before nap 1: {"action":"accept"} (again: false)` {
			t.Fatalf("task ended %+v: %s", res, done.Result)
		}
		if woken.Load() != 1 || found.Load() != 1 {
			t.Errorf("Sleep returned ErrWoken %d times and CheckInput found the answer %d times, want 1 and 1", woken.Load(), found.Load())
		}
		// A late answer changes nothing.
		answer(t, h, id, map[string]any{"stop": map[string]any{"action": "decline"}})
		if again := h.c.Get(t, id); again.Status != "completed" || string(again.Result) != string(done.Result) {
			t.Errorf("a late answer changed the completed task: %+v", again)
		}
	})
}

// rcEnqueued runs f and requires that it enqueued id (a woken task runs at
// once, not at its wake time).
func (h *harness) rcEnqueued(t *testing.T, f func(), id string) {
	t.Helper()
	ctx := context.Background()
	for { // drain
		d, ok, _, err := h.q.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		_ = h.q.Ack(ctx, d)
	}
	f()
	d, ok, _, err := h.q.Receive(ctx)
	if err != nil || !ok || d.TaskID != id {
		t.Fatalf("after the answer the queue holds %+v (ok %v, err %v), want task %s due now", d, ok, err, id)
	}
	_ = h.q.Ack(ctx, d)
}

// What a CheckInput found is journaled where it happened: every replay of
// the handler sees the same outcomes at the same points, although the
// answer is in the store from the second invocation on. An offer answered
// while a step runs leaves the task working.
func TestCheckInputReplays(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var (
			mu          sync.Mutex
			invocations [][]bool // the CheckInput outcomes of each run
		)
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "parts", Description: "parts until told to stop"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					var seen []bool
					defer func() {
						mu.Lock()
						invocations = append(invocations, seen)
						mu.Unlock()
					}()
					if err := st.Offer("stop", stopRequest); err != nil {
						return nil, err
					}
					done := 0
					for i := range 5 {
						_, ok := st.CheckInput("stop")
						seen = append(seen, ok)
						if ok {
							break
						}
						if _, err := tasks.Do(st, fmt.Sprint("part-", i), func(context.Context) (int, error) { return i, nil }); err != nil {
							return nil, err
						}
						done++
					}
					_, again := st.CheckInput("stop")
					seen = append(seen, again)
					for _, name := range []string{"wrap-up", "report"} {
						if _, err := tasks.Do(st, name, func(context.Context) (bool, error) { return true, nil }); err != nil {
							return nil, err
						}
					}
					return text(fmt.Sprintf("%d parts", done)), nil
				})
		})
		ctx := context.Background()
		id := h.create(t, "parts", nil)
		if res, err := h.srv.Advance(ctx, id); err != nil || res.Steps != 1 {
			t.Fatalf("first invocation: %+v, %v", res, err)
		}
		answer(t, h, id, map[string]any{"stop": map[string]any{"action": "accept"}})
		if tk := h.c.Get(t, id); tk.Status != "working" || len(tk.InputRequests) != 0 {
			t.Fatalf("a task answered between steps: %+v, want working", tk)
		}
		if res := advanceUntilIdle(t, h, id); res.Status != driver.StatusCompleted {
			t.Fatalf("task ended %+v", res)
		}
		if got := textOf(t, h.c.Get(t, id).Result); got != "1 parts" {
			t.Errorf("result %q, want 1 parts (stopped at the first check after the answer)", got)
		}
		// Run 1 finds nothing twice (part-0 runs between); the answer
		// arrives; run 2 replays the first check as nothing (part-0
		// follows it in the journal), finds the answer at the second, and
		// nothing at the next; run 3 replays the same.
		want := "[[false false] [false true false] [false true false]]"
		if got := fmt.Sprint(invocations); got != want {
			t.Errorf("CheckInput outcomes per invocation = %s, want %s", got, want)
		}
	})
}

// An offer nobody answers does not hold the task up: it sleeps its sleeps
// in full and completes. While it sleeps, the offer is its input request;
// while a step runs after the sleep, it is working. Answers after it ended
// are ignored.
func TestOfferNeverAnswered(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var woken atomic.Int32
		inPart1, release := make(chan struct{}), make(chan struct{})
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "patient", Description: "offers, works, naps"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					if err := st.Offer("stop", stopRequest); err != nil {
						return nil, err
					}
					stopped := 0
					for i := range 2 {
						if _, ok := st.CheckInput("stop"); ok {
							stopped++
						}
						if _, err := tasks.Do(st, fmt.Sprint("part-", i), func(context.Context) (int, error) {
							if i == 1 {
								close(inPart1)
								<-release
							}
							return i, nil
						}); err != nil {
							return nil, err
						}
						if err := st.Sleep(fmt.Sprint("nap-", i), 300*time.Millisecond); errors.Is(err, tasks.ErrWoken) {
							woken.Add(1)
						} else if err != nil {
							return nil, err
						}
					}
					return text(fmt.Sprint("finished; stops seen: ", stopped)), nil
				})
		})
		h.work(t, 2)
		id := h.create(t, "patient", nil)
		sleeping := h.c.WaitFor(t, id, 10*time.Second, func(tk mcptest.Task) bool { return tk.Status != "working" })
		if sleeping.Status != "input_required" || sleeping.InputRequests["stop"] == nil {
			t.Fatalf("while it sleeps: %+v, want input_required with the offer", sleeping)
		}
		<-inPart1
		running := h.c.Get(t, id)
		close(release)
		if running.Status != "working" || len(running.InputRequests) != 0 {
			t.Fatalf("while a step runs after the sleep: %+v, want working", running)
		}
		done := h.wait(t, id)
		if done.Status != "completed" || textOf(t, done.Result) != "finished; stops seen: 0" || woken.Load() != 0 {
			t.Fatalf("task ended %+v %s (woken %d)", done, done.Result, woken.Load())
		}
		answer(t, h, id, map[string]any{"stop": map[string]any{"action": "accept"}})
		if again := h.c.Get(t, id); again.Status != "completed" || len(again.InputRequests) != 0 {
			t.Errorf("after a late answer: %+v", again)
		}
	})
}

// A withdrawn offer leaves inputRequests, and its late answer is ignored
// like an unknown key's: it neither wakes the sleeping task nor reaches
// CheckInput. The other offer still wakes it.
func TestWithdrawnOfferIgnored(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "steer", Description: "offers two things, withdraws one"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					for _, k := range []string{"stop", "budget"} {
						if err := st.Offer(k, stopRequest); err != nil {
							return nil, err
						}
					}
					st.Withdraw("stop")
					st.Withdraw("stop") // a second withdrawal does nothing
					err := st.Sleep("nap", time.Hour)
					if err != nil && !errors.Is(err, tasks.ErrWoken) {
						return nil, err
					}
					_, stop := st.CheckInput("stop")
					budget, ok := st.CheckInput("budget")
					return text(fmt.Sprintf("woken=%v stop=%v budget=%v %s", err != nil, stop, ok, budget)), nil
				})
		})
		id := h.create(t, "steer", nil)
		advanceUntilIdle(t, h, id)
		tk := h.c.Get(t, id)
		if tk.Status != "input_required" || len(tk.InputRequests) != 1 || tk.InputRequests["budget"] == nil {
			t.Fatalf("sleeping: %+v, want input_required with only the budget offer", tk)
		}
		answer(t, h, id, map[string]any{"stop": map[string]any{"action": "accept"}})
		if tk := h.c.Get(t, id); tk.Status != "input_required" || len(tk.InputRequests) != 1 {
			t.Fatalf("after an answer to the withdrawn offer: %+v, want it still sleeping", tk)
		}
		if res := advanceUntilIdle(t, h, id); !res.Skipped {
			t.Fatalf("the withdrawn offer's answer woke the task: %+v", res)
		}
		answer(t, h, id, map[string]any{"budget": map[string]any{"action": "accept", "content": map[string]any{"n": 42}}})
		if res := advanceUntilIdle(t, h, id); res.Status != driver.StatusCompleted {
			t.Fatalf("after the budget answer: %+v", res)
		}
		if got := textOf(t, h.c.Get(t, id).Result); got != `woken=true stop=false budget=true {"action":"accept","content":{"n":42}}` {
			t.Errorf("result %q", got)
		}
	})
}

// A task waiting at a blocking input shows its offers beside the requests
// it waits for. An answer to an offer does not end the wait; the awaited
// answer does, and CheckInput then finds the offer's answer.
func TestOfferWhileWaitingForInput(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		type confirm struct {
			OK bool `json:"ok"`
		}
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "ask", Description: "offers, then asks"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					if err := tasks.OfferElicit[confirm](st, "stop", "Stop early?"); err != nil {
						return nil, err
					}
					ok, err := tasks.Elicit[confirm](st, "go", "Go on?")
					if err != nil {
						return nil, err
					}
					stop, found, err := tasks.CheckElicit[confirm](st, "stop")
					if err != nil {
						return nil, err
					}
					return text(fmt.Sprintf("go=%v stop=%v/%v", ok.Content.OK, found, stop.Content.OK)), nil
				})
		})
		id := h.create(t, "ask", nil)
		advanceUntilIdle(t, h, id)
		tk := h.c.Get(t, id)
		if tk.Status != "input_required" || len(tk.InputRequests) != 2 || tk.InputRequests["stop"] == nil || tk.InputRequests["go"] == nil {
			t.Fatalf("waiting: %+v, want input_required with the offer and the question", tk)
		}
		answer(t, h, id, map[string]any{"stop": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}})
		tk = h.c.Get(t, id)
		if tk.Status != "input_required" || len(tk.InputRequests) != 1 || tk.InputRequests["go"] == nil {
			t.Fatalf("after answering the offer: %+v, want still waiting for go", tk)
		}
		if res := advanceUntilIdle(t, h, id); !res.Skipped {
			t.Fatalf("the offer's answer ended the wait: %+v", res)
		}
		answer(t, h, id, map[string]any{"go": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}})
		if res := advanceUntilIdle(t, h, id); res.Status != driver.StatusCompleted {
			t.Fatalf("after the awaited answer: %+v", res)
		}
		if got := textOf(t, h.c.Get(t, id).Result); got != "go=true stop=true/true" {
			t.Errorf("result %q", got)
		}
	})
}

// Inline (a client without the extension), an offer is never shown nor
// answered: the MRTR round asks only for the blocking input, an answer to
// the offer's key sent with it is not seen, sleeps run in full and
// CheckInput reports nothing.
func TestOfferInline(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "ask", Description: "offers, naps, asks"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if err := st.Offer("stop", stopRequest); err != nil {
					return nil, err
				}
				if err := st.Sleep("nap", 50*time.Millisecond); err != nil {
					return nil, err
				}
				if _, err := tasks.Elicit[struct{}](st, "go", "Go on?"); err != nil {
					return nil, err
				}
				_, stop := st.CheckInput("stop")
				st.Withdraw("stop")
				return text(fmt.Sprint("stop=", stop)), nil
			})
	})
	in := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(h.c.URL, "http://"), "/mcp"), false)
	in.Caps["elicitation"] = map[string]any{}
	var r1 struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	in.Call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}).Decode(t, &r1)
	if r1.ResultType != "input_required" || len(r1.InputRequests) != 1 || r1.InputRequests["go"] == nil {
		t.Fatalf("round 1 = %+v, want only the blocking question", r1)
	}
	var r2 mcp.CallToolResult
	in.Call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "requestState": r1.RequestState,
		"inputResponses": map[string]any{"go": map[string]any{"action": "accept", "content": map[string]any{}},
			"stop": map[string]any{"action": "accept"}}}).Decode(t, &r2)
	if len(r2.Content) != 1 || r2.Content[0].(*mcp.TextContent).Text != "stop=false" {
		t.Fatalf("round 2 = %+v, want stop=false", r2)
	}
}

// Misused offers fail the task with a message that says what is wrong: a
// check of a name never offered, and a key used twice.
func TestOfferMisuse(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "typo", Description: "checks what it never offered"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if err := st.Offer("stop-early", stopRequest); err != nil {
					return nil, err
				}
				st.CheckInput("stop")
				return text("unreachable"), nil
			})
		tasks.AddTool(s, &mcp.Tool{Name: "reuse", Description: "offers a key it asked before"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				if _, err := st.Input("ask", map[string]tasks.InputRequest{"k": stopRequest}); err != nil {
					return nil, err
				}
				return text("unreachable"), st.Offer("k", stopRequest)
			})
	})
	id := h.create(t, "typo", nil)
	if res := advanceUntilIdle(t, h, id); res.Status != driver.StatusFailed {
		t.Fatalf("typo: %+v", res)
	}
	if got := h.c.Get(t, id); !strings.Contains(string(got.Error), `CheckInput(\"stop\"): the task made no offer of that name`) {
		t.Errorf("typo error %s", got.Error)
	}
	id = h.create(t, "reuse", nil)
	advanceUntilIdle(t, h, id)
	answer(t, h, id, map[string]any{"k": map[string]any{"action": "decline"}})
	if res := advanceUntilIdle(t, h, id); res.Status != driver.StatusFailed {
		t.Fatalf("reuse: %+v", res)
	}
	if got := h.c.Get(t, id); !strings.Contains(string(got.Error), `input key \"k\" was already used`) {
		t.Errorf("reuse error %s", got.Error)
	}
}

// StepDefaults sets the policy of every Do of a tool; a step's own option
// overrides only what it sets. Durably and inline alike.
func TestStepDefaults(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		var flaky, patient, slow, slowOK atomic.Int32
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "policy", Description: "steps under a tool policy"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					fail := func(n *atomic.Int32) func(context.Context) (int, error) {
						return func(context.Context) (int, error) { return 0, fmt.Errorf("attempt %d failed", n.Add(1)) }
					}
					wait := func(n *atomic.Int32, d time.Duration) func(context.Context) (int, error) {
						return func(ctx context.Context) (int, error) {
							n.Add(1)
							select {
							case <-ctx.Done():
								return 0, ctx.Err()
							case <-time.After(d):
								return 1, nil
							}
						}
					}
					var out []string
					report := func(name string, err error) {
						if err != nil {
							out = append(out, name+": "+err.Error())
						} else {
							out = append(out, name+": ok")
						}
					}
					_, err := tasks.Do(st, "flaky", fail(&flaky))
					report("flaky", err)
					_, err = tasks.Do(st, "patient", fail(&patient), tasks.Retries(3))
					report("patient", err)
					_, err = tasks.Do(st, "slow", wait(&slow, 2*time.Second))
					report("slow", err)
					_, err = tasks.Do(st, "slow-ok", wait(&slowOK, 300*time.Millisecond), tasks.Timeout(10*time.Second))
					report("slow-ok", err)
					return text(strings.Join(out, "\n")), nil
				}, tasks.StepDefaults(tasks.Retries(1), tasks.Backoff(5*time.Millisecond, 10*time.Millisecond), tasks.Timeout(100*time.Millisecond)))
		})
		check := func(how, got string) {
			t.Helper()
			for _, want := range []string{
				`flaky: step "flaky" failed: attempt 2 failed`,
				`patient: step "patient" failed: attempt 4 failed`,
				`slow: step "slow" failed: `, // timed out

				"slow-ok: ok",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("%s: result %q lacks %q", how, got, want)
				}
			}
			if flaky.Load() != 2 || patient.Load() != 4 || slow.Load() != 2 || slowOK.Load() != 1 {
				t.Errorf("%s: attempts flaky %d, patient %d, slow %d, slow-ok %d; want 2 (tool policy), 4 (step's Retries(3)), 2 (tool timeout), 1 (step's own timeout)",
					how, flaky.Load(), patient.Load(), slow.Load(), slowOK.Load())
			}
			for _, n := range []*atomic.Int32{&flaky, &patient, &slow, &slowOK} {
				n.Store(0)
			}
		}
		h.work(t, 1)
		done := h.wait(t, h.create(t, "policy", nil))
		if done.Status != "completed" {
			t.Fatalf("task ended %+v", done)
		}
		check("durable", textOf(t, done.Result))

		in := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(h.c.URL, "http://"), "/mcp"), false)
		var r mcp.CallToolResult
		in.Call(t, "tools/call", map[string]any{"name": "policy", "arguments": map[string]any{}}).Decode(t, &r)
		if len(r.Content) != 1 {
			t.Fatalf("inline result %+v", r)
		}
		check("inline", r.Content[0].(*mcp.TextContent).Text)
	})
}
