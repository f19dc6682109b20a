package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logRecorder is a slog.Handler that keeps every record, for tests that
// assert what the server logs. It is safe for concurrent use.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

// logRecord is a record with its attributes flattened to strings.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
	return nil
}

// all returns the records that match, oldest first.
func (l *logRecorder) all(match func(logRecord) bool) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

func atLeast(level slog.Level) func(logRecord) bool {
	return func(r logRecord) bool { return r.Level >= level }
}

func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

// Ids the server never issued are unknown tasks on every path, before they
// reach Redis: "queue" names the Redis queue's sorted set under the same
// prefix, which the task scripts used to run against (-32603 and an ERROR
// line while the queue key existed, -32602 otherwise: an oracle of other
// tenants' activity).
func TestForeignIDsAreUnknown(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		logs := &logRecorder{}
		h := newHarness(t, backend, tasks.Options{Logger: logs.logger()}, registerNoop(1))
		// A created task waits in the queue (no worker runs): the queue's
		// sorted set "<prefix>{queue}" exists.
		waiting := h.create(t, "noop", nil)
		qkey, _ := h.q.Keys()
		if n, err := h.rc.Do(t.Context(), h.rc.B().Zcard().Key(qkey).Build()).AsInt64(); err != nil || n != 1 {
			t.Fatalf("the queue key does not hold the waiting task: %d, %v", n, err)
		}
		ids := []string{"queue", "{queue}", "due", waiting + "x", waiting[1:], strings.Repeat("A", 21) + "B", strings.Repeat("A", 21) + "!"}
		for _, id := range ids {
			for _, path := range []struct {
				name string
				c    *mcptest.Client
			}{{"lean", h.c}, {"go-sdk", h.sdk}} {
				for _, call := range []struct {
					method string
					params map[string]any
				}{
					{"tasks/get", map[string]any{"taskId": id}},
					{"tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"q": map[string]any{"action": "decline"}}}},
					{"tasks/cancel", map[string]any{"taskId": id}},
				} {
					r := path.c.Call(t, call.method, call.params)
					if r.Error == nil || r.HTTP != 400 || r.Error.Code != tasks.CodeInvalidParams || r.Error.Message != "unknown taskId: "+id {
						t.Errorf("%s %s %q: HTTP %d %+v, want HTTP 400 -32602 unknown taskId", path.name, call.method, id, r.HTTP, r.Error)
					}
				}
			}
			res, err := h.srv.Advance(t.Context(), id)
			if err != nil || !res.Skipped || res.Steps != 0 {
				t.Errorf("Advance(%q) = %+v, %v; want skipped as not found", id, res, err)
			}
		}
		for _, r := range logs.all(atLeast(slog.LevelWarn)) {
			t.Errorf("logged %s %q %v", r.Level, r.Msg, r.Attrs)
		}
		// The queue was not touched: the waiting task is still delivered.
		if n, err := h.rc.Do(t.Context(), h.rc.B().Zcard().Key(qkey).Build()).AsInt64(); err != nil || n != 1 {
			t.Errorf("queue after the probes: %d entries, %v; want the waiting task", n, err)
		}
		h.work(t, 1)
		if tk := h.wait(t, waiting); tk.Status != "completed" {
			t.Errorf("the waiting task ended %s", tk.Status)
		}
	})
}

// Advance's step budget runs on the monotonic clock, whatever Options.Now
// says: with Now two minutes behind the wall clock, steps still run (they
// used to get an already-expired context and the task was re-enqueued
// forever); with Now ahead, a step's deadline still lies within
// MaxDuration of the real clock.
func TestAdvanceBudgetIgnoresOptionsNow(t *testing.T) {
	for _, skew := range []time.Duration{-2 * time.Minute, 2 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			var late atomic.Int32
			opts := tasks.Options{MaxDuration: 10 * time.Second, Now: func() time.Time { return time.Now().Add(skew) }}
			h := newHarness(t, "redis-server", opts, func(s *tasks.Server) {
				tasks.AddTool(s, &mcp.Tool{Name: "three", Description: "three steps"}, tasks.Optional,
					func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
						for i := range 3 {
							if _, err := tasks.Do(st, fmt.Sprint(i), func(ctx context.Context) (int, error) {
								if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > opts.MaxDuration {
									late.Add(1)
								}
								return i, nil
							}); err != nil {
								return nil, err
							}
						}
						return text("ok"), nil
					})
			})
			id := h.create(t, "three", nil)
			var steps []int
			for range 10 {
				res, err := h.srv.Advance(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				steps = append(steps, res.Steps)
				if res.Status.Terminal() {
					break
				}
			}
			if fmt.Sprint(steps) != "[1 1 1]" {
				t.Errorf("new steps per Advance = %v, want [1 1 1]", steps)
			}
			if tk := h.c.Get(t, id); tk.Status != "completed" {
				t.Errorf("task is %s, want completed", tk.Status)
			}
			if n := late.Load(); n > 0 {
				t.Errorf("%d steps had a deadline beyond MaxDuration on the real clock", n)
			}
		})
	}
}

// A finished task shows no status message left from its running days: not
// "waiting for confirmation" once completed, not "computing for 30s" once
// cancelled.
func TestStatusMessageClearedOnTerminal(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "confirm", Description: "asks, then finishes"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					st.Status("waiting for confirmation")
					if _, err := tasks.Elicit[struct {
						OK bool `json:"ok"`
					}](st, "ok", "OK?"); err != nil {
						return nil, err
					}
					return text("done"), nil
				})
			tasks.AddTool(s, &mcp.Tool{Name: "compute", Description: "sleeps"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					st.Status("computing for 30s")
					return text("done"), st.Sleep("compute", 30*time.Second)
				})
		})
		h.work(t, 1)
		id := h.create(t, "confirm", nil)
		h.c.WaitFor(t, id, 10*time.Second, func(tk mcptest.Task) bool { return tk.Status == "input_required" })
		h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			"ok": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}})
		if tk := h.wait(t, id); tk.Status != "completed" || tk.StatusMessage != "" {
			t.Errorf("confirm ended %s with statusMessage %q, want completed without one", tk.Status, tk.StatusMessage)
		}

		id = h.create(t, "compute", nil)
		h.c.WaitFor(t, id, 10*time.Second, func(tk mcptest.Task) bool { return tk.StatusMessage == "computing for 30s" })
		h.c.Call(t, "tasks/cancel", map[string]any{"taskId": id})
		if tk := h.wait(t, id); tk.Status != "cancelled" || tk.StatusMessage != "" {
			t.Errorf("compute ended %s with statusMessage %q, want cancelled without one", tk.Status, tk.StatusMessage)
		}
	})
}

// registerFanOut registers "fanout", whose handler breaks the rule that
// Step methods are called from the handler's goroutine, in the ways a user
// might: Do from goroutines (sync.WaitGroup.Go), Status from a goroutine,
// and Do nested inside a Do closure.
func registerFanOut(closures *atomic.Int32) func(*tasks.Server) {
	return func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "fanout", Description: "steps from goroutines"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, in struct {
				Way string `json:"way"`
			}) (*mcp.CallToolResult, error) {
				var errs [2]error
				var wg sync.WaitGroup
				switch in.Way {
				case "goroutines":
					for i := range errs {
						wg.Go(func() {
							_, errs[i] = tasks.Do(st, fmt.Sprint("part", i), func(context.Context) (int, error) {
								closures.Add(1)
								return i, nil
							})
						})
					}
				case "status":
					wg.Go(func() { st.Status("from a goroutine") })
				case "nested":
					_, errs[0] = tasks.Do(st, "outer", func(context.Context) (int, error) {
						return tasks.Do(st, "inner", func(context.Context) (int, error) {
							closures.Add(1)
							return 1, nil
						})
					}, tasks.Retries(0))
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil && !errors.Is(err, tasks.ErrWrongGoroutine) {
						return nil, fmt.Errorf("unexpected step error: %w", err)
					}
				}
				// The handler goes on after the misuse: its next step
				// unwinds it.
				if _, err := tasks.Do(st, "after", func(context.Context) (int, error) { return 0, nil }); err != nil {
					return nil, err
				}
				return text("ok"), nil
			})
	}
}

// A Step used from another goroutine (or inside a Do closure) does not crash
// the process (it used to: "panic: (tasks.suspend)" from tasks.Do inside a
// wg.Go took down every request of the instance): the task fails, durably
// or inline, with a message that states the rule, and no misused step's
// closure runs.
func TestStepFromAnotherGoroutine(t *testing.T) {
	var closures atomic.Int32
	h := newHarness(t, "redis-server", tasks.Options{}, registerFanOut(&closures))
	inline := mcptest.NewClient(strings.TrimPrefix(strings.TrimSuffix(h.c.URL, "/mcp"), "http://"), false)
	for _, way := range []string{"goroutines", "status", "nested"} {
		t.Run(way, func(t *testing.T) {
			id := h.create(t, "fanout", map[string]any{"way": way})
			for range 5 {
				res, err := h.srv.Advance(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if res.Status.Terminal() {
					break
				}
			}
			tk := h.c.Get(t, id)
			t.Logf("durable: %s", tk.Error)
			if tk.Status != "failed" || !strings.Contains(string(tk.Error), "must be called from the handler's goroutine") {
				t.Errorf("durable: task %s, error %s; want failed with the rule", tk.Status, tk.Error)
			}
			r := inline.Call(t, "tools/call", map[string]any{"name": "fanout", "arguments": map[string]any{"way": way}})
			if r.Error != nil {
				t.Logf("inline: %s", r.Error.Message)
			}
			if r.Error == nil || !strings.Contains(r.Error.Message, "must be called from the handler's goroutine") {
				t.Errorf("inline: %+v %s; want an error stating the rule", r.Error, r.Result)
			}
		})
	}
	if n := closures.Load(); n != 0 {
		t.Errorf("%d closures of misused steps ran", n)
	}
}

// panicky is a handler or step body that panics with a runtime error whose
// text must not reach the client.
func panicky() int {
	var m map[string]int
	//lint:ignore SA5000 the panic under test
	m["x"] = 1 // assignment to entry in nil map
	return m["x"]
}

// Panics in a handler or a step are logged on the server's logger with
// their stack, and the client (inline error, or the task's error on
// tasks/get) gets a generic message naming the incident, never the panic's
// text.
func TestPanicsAreLoggedNotSent(t *testing.T) {
	logs := &logRecorder{}
	h := newHarness(t, "redis-server", tasks.Options{Logger: logs.logger()}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "boom", Description: "panics"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, in struct {
				Where string `json:"where"`
			}) (*mcp.CallToolResult, error) {
				if in.Where == "step" {
					_, err := tasks.Do(st, "explode", func(context.Context) (int, error) { return panicky(), nil }, tasks.Retries(0))
					return nil, err
				}
				return text(fmt.Sprint(panicky())), nil
			})
	})
	inline := mcptest.NewClient(strings.TrimPrefix(strings.TrimSuffix(h.c.URL, "/mcp"), "http://"), false)
	// check requires the client's message to be generic and to name an
	// incident that a logged record with the panic and its stack carries.
	check := func(t *testing.T, clientMsg, logMsg string) {
		t.Helper()
		if strings.Contains(clientMsg, "nil map") || !strings.Contains(clientMsg, "incident ") {
			t.Errorf("client got %q: want a generic message naming an incident", clientMsg)
		}
		recs := logs.all(func(r logRecord) bool {
			return r.Msg == logMsg && r.Attrs["incident"] != "" && strings.Contains(clientMsg, r.Attrs["incident"])
		})
		if len(recs) != 1 {
			t.Fatalf("no single %q record for the incident in %q (have %d)", logMsg, clientMsg, len(recs))
		}
		r := recs[0]
		if r.Level != slog.LevelError || !strings.Contains(r.Attrs["panic"], "assignment to entry in nil map") ||
			!strings.Contains(r.Attrs["stack"], "tasks_test.panicky") || r.Attrs["tool"] != "boom" {
			t.Errorf("log record %s %q %v: want ERROR with the panic, its stack (through panicky) and the tool", r.Level, r.Msg, r.Attrs)
		}
	}
	for _, where := range []string{"handler", "step"} {
		logMsg := map[string]string{"handler": "tool handler panicked", "step": "task step panicked"}[where]
		t.Run(where+"/inline", func(t *testing.T) {
			r := inline.Call(t, "tools/call", map[string]any{"name": "boom", "arguments": map[string]any{"where": where}})
			if r.Error == nil {
				t.Fatalf("inline call answered %s, want an error", r.Result)
			}
			check(t, r.Error.Message, logMsg)
		})
		t.Run(where+"/durable", func(t *testing.T) {
			id := h.create(t, "boom", map[string]any{"where": where})
			if _, err := h.srv.Advance(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			tk := h.c.Get(t, id)
			if tk.Status != "failed" {
				t.Fatalf("task %s, want failed", tk.Status)
			}
			var e struct{ Message string }
			_ = json.Unmarshal(tk.Error, &e)
			check(t, e.Message, logMsg)
			if recs := logs.all(func(r logRecord) bool { return r.Msg == logMsg && r.Attrs["task"] == id }); len(recs) != 1 {
				t.Errorf("%d %q records name the task, want 1", len(recs), logMsg)
			}
		})
	}
}

// auditTrail returns the audit records of task id as "event" or
// "event status", in order, and checks that each names the principal.
func auditTrail(t *testing.T, logs *logRecorder, id, principal string) []string {
	t.Helper()
	var trail []string
	for _, r := range logs.all(func(r logRecord) bool { return r.Msg == tasks.AuditMessage && r.Attrs["task"] == id }) {
		if r.Level != slog.LevelInfo || r.Attrs["principal"] != principal {
			t.Errorf("audit record %s %v: want INFO with principal %q", r.Level, r.Attrs, principal)
		}
		e := r.Attrs["event"]
		for _, k := range []string{"status", "keys", "resumed"} {
			if v, ok := r.Attrs[k]; ok {
				e += " " + k + "=" + v
			}
		}
		trail = append(trail, e)
	}
	return trail
}

// The lifecycle of every task is in the log as "task audit" records a log
// pipeline can select: created, input requested and answered, cancel
// requested, and the terminal status (once, by whichever process made the
// transition), each with the principal and the task id.
func TestAuditLog(t *testing.T) {
	logs := &logRecorder{}
	stepStarted := make(chan struct{}, 1)
	h := newHarness(t, "redis-server", tasks.Options{Logger: logs.logger(), CancelPoll: 10 * time.Millisecond}, func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "confirm", Description: "asks, then finishes"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				_, err := tasks.Elicit[struct {
					OK bool `json:"ok"`
				}](st, "ok", "OK?")
				return text("done"), err
			})
		tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "sleeps"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				return text("done"), st.Sleep("nap", time.Hour)
			})
		tasks.AddTool(s, &mcp.Tool{Name: "block", Description: "a step that runs until cancelled"}, tasks.Optional,
			func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
				_, err := tasks.Do(st, "block", func(ctx context.Context) (int, error) {
					stepStarted <- struct{}{}
					<-ctx.Done()
					return 0, ctx.Err()
				})
				return text("done"), err
			})
	})
	ctx := t.Context()
	advance := func(id string) {
		t.Helper()
		if _, err := h.srv.Advance(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	want := func(id string, trail ...string) {
		t.Helper()
		if got := auditTrail(t, logs, id, "anonymous"); !slices.Equal(got, trail) {
			t.Errorf("audit trail of %s:\n got %q\nwant %q", id, got, trail)
		}
	}

	// Created, input requested, answered, completed.
	id := h.create(t, "confirm", nil)
	advance(id)
	h.c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"ok": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}})
	advance(id)
	want(id, "created", "input_requested keys=ok", "input_answered keys=ok resumed=true", "terminal status=completed")

	// Cancelled while sleeping: at once, by tasks/cancel.
	id = h.create(t, "nap", nil)
	advance(id)
	h.c.Call(t, "tasks/cancel", map[string]any{"taskId": id})
	h.c.Call(t, "tasks/cancel", map[string]any{"taskId": id}) // again: no second terminal record
	want(id, "created", "cancel_requested status=cancelled", "terminal status=cancelled",
		"cancel_requested status=cancelled")

	// Cancelled while a step runs: the worker ends it.
	id = h.create(t, "block", nil)
	done := make(chan struct{})
	go func() { defer close(done); advance(id) }()
	<-stepStarted
	h.c.Call(t, "tasks/cancel", map[string]any{"taskId": id})
	<-done
	want(id, "created", "cancel_requested status=working", "terminal status=cancelled")

	// Cancelled while a worker that then died held it: the next claim ends it.
	id = h.create(t, "nap", nil)
	if _, err := h.store.Claim(ctx, id, h.clock.Now(), time.Second); err != nil {
		t.Fatal(err)
	}
	h.c.Call(t, "tasks/cancel", map[string]any{"taskId": id})
	h.clock.Advance(2 * time.Second)
	advance(id)
	want(id, "created", "cancel_requested status=working", "terminal status=cancelled")

	// Nobody else's calls leave audit records (they are unknown tasks).
	h.c.Call(t, "tasks/cancel", map[string]any{"taskId": driver.NewID()})
	if n := len(logs.all(func(r logRecord) bool { return r.Msg == tasks.AuditMessage && r.Attrs["event"] == "cancel_requested" })); n != 4 {
		t.Errorf("%d cancel_requested records, want 4", n)
	}
}

// Options.MaxLiveTasks caps a principal's live tasks: over it a
// task-creating tools/call answers CodeTooManyTasks (the same on the lean
// and the go-sdk path) and creates nothing; a task that ends frees its
// place; inline calls create no task and are not counted.
func TestLiveTaskLimit(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		logs := &logRecorder{}
		h := newHarness(t, backend, tasks.Options{MaxLiveTasks: 1, Logger: logs.logger()}, registerNoop(1))
		first := h.create(t, "ask", nil)
		created := func() int {
			return len(logs.all(func(r logRecord) bool { return r.Msg == tasks.AuditMessage && r.Attrs["event"] == "created" }))
		}
		for _, c := range []*mcptest.Client{h.c, h.sdk} {
			r := c.Call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}})
			if r.Error == nil || r.Error.Code != tasks.CodeTooManyTasks || r.HTTP != 200 ||
				!strings.Contains(r.Error.Message, "too many live tasks") || string(r.Error.Data) != `{"maxLiveTasks":1}` {
				t.Errorf("second task: HTTP %d %+v %s; want HTTP 200, %d too many live tasks", r.HTTP, r.Error, r.Result, tasks.CodeTooManyTasks)
			}
		}
		if n := created(); n != 1 {
			t.Errorf("%d tasks created, want 1", n)
		}
		inline := mcptest.NewClient(strings.TrimPrefix(strings.TrimSuffix(h.c.URL, "/mcp"), "http://"), false)
		if r := inline.Call(t, "tools/call", map[string]any{"name": "noop", "arguments": map[string]any{}}); r.Error != nil {
			t.Errorf("inline call at the limit: %+v", r.Error)
		}
		h.c.Call(t, "tasks/cancel", map[string]any{"taskId": first})
		h.create(t, "ask", nil)
		if n := created(); n != 2 {
			t.Errorf("%d tasks created, want 2", n)
		}
	})
}
