package tasks_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The cost of waiting for a task: how many tasks/get a client that follows
// pollIntervalMs spends on one task (each is a billed invocation on a
// serverless platform), how late a polling client sees a quick task end,
// and how late a listen stream hears of a transition.

const benchOwner = "anonymous" // the shared principal under Options.Anonymous

func registerWaits(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "sleeps a minute, then finishes"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			if err := st.Sleep("nap", time.Minute); err != nil {
				return nil, err
			}
			return text("rested"), nil
		})
	tasks.AddTool(s, &mcp.Tool{Name: "ask", Description: "one input round"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			_, err := st.Input("q", map[string]tasks.InputRequest{"q": {Method: "elicitation/create",
				Params: map[string]any{"mode": "form", "message": "?", "requestedSchema": map[string]any{"type": "object"}}}})
			return text("ok"), err
		})
	tasks.AddTool(s, &mcp.Tool{Name: "one", Description: "one 200ms step"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			_, err := tasks.Do(st, "work", func(context.Context) (int, error) { time.Sleep(200 * time.Millisecond); return 1, nil })
			return text("ok"), err
		})
}

// adviceModes are the advice under test: the server's derived advice with
// its default bounds, and today's fixed 1s (every bound at 1s).
var adviceModes = []struct {
	name string
	opts tasks.Options
}{
	{"derived", tasks.Options{}},
	{"fixed1s", tasks.Options{PollInterval: time.Second, PollMin: time.Second, PollMax: time.Second}},
}

// BenchmarkPollCost reports tasks/get invocations per completed task for a
// client that waits exactly pollIntervalMs between two tasks/get, for a
// task that sleeps 60s then finishes (nap) and for one parked in
// input_required (ask) that is answered after 1 minute or 10 minutes,
// either by the polling client itself ("self": it reads input_required,
// its user answers after that long, and it reads again after the advice it
// last read, as the ext-tasks requester does) or by another party
// ("other": the client goes on reading on the advice's schedule). It also
// reports how long after the answer the client reads the outcome
// (ms-answer-to-seen).
//
// Method: the server, its Redis store (real redis-server) and the advice
// code are the real ones; only time is simulated. The server's clock
// (Options.Now) is moved forward to each event of the schedule in order:
// the worker's invocations (Advance, called directly as a queue-triggered
// function would be, 100ms after each enqueue or wake time: a queue's
// delivery delay), the answer (tasks/update) and the client's tasks/get
// (Server.GetTask, at the previous answer's time plus its pollIntervalMs).
// Nothing waits in real time.
func BenchmarkPollCost(b *testing.B) {
	const delivery = 100 * time.Millisecond
	for _, mode := range adviceModes {
		for _, sc := range []struct {
			name     string
			tool     string
			answerAt time.Duration // 0: nobody answers
			self     bool          // the polling client answers (after answerAt of thinking)
		}{
			{"nap", "nap", 0, false},
			{"ask-self-1m", "ask", time.Minute, true},
			{"ask-other-1m", "ask", time.Minute, false},
			{"ask-other-10m", "ask", 10 * time.Minute, false},
		} {
			b.Run(sc.name+"/"+mode.name, func(b *testing.B) {
				opts := mode.opts
				opts.Logger = benchOptions().Logger
				h := newHarness(b, "redis-server", opts, registerWaits)
				ctx := context.Background()
				gets := 0
				var seen time.Duration
				for b.Loop() {
					start := h.clock.Now()
					at := func(d time.Duration) { // moves the server's clock to start+d
						if now := h.clock.Now().Sub(start); d > now {
							h.clock.Advance(d - now)
						}
					}
					res, err := h.srv.CreateTask(ctx, benchOwner, sc.tool, json.RawMessage(`{}`))
					if err != nil {
						b.Fatal(err)
					}
					created := res.(*tasks.CreateTaskResult)
					id := created.TaskID
					poll := time.Duration(created.PollIntervalMs) * time.Millisecond
					next := poll
					work := delivery // when the worker runs next; <0: not scheduled
					answer := time.Duration(0)
					if !sc.self {
						answer = sc.answerAt
					}
					answered := time.Duration(-1)
					for {
						// Events due before the client's next tasks/get, in order.
						for (work >= 0 && work <= next) || (answer > 0 && answer <= next) {
							if answer > 0 && (work < 0 || answer <= work) {
								at(answer)
								if _, err := h.srv.UpdateTask(ctx, benchOwner, id, map[string]json.RawMessage{"q": json.RawMessage(`{"action":"accept","content":{}}`)}); err != nil {
									b.Fatal(err)
								}
								answered = answer
								answer, work = 0, h.clock.Now().Sub(start)+delivery
								continue
							}
							at(work)
							if _, err := h.srv.Advance(ctx, id); err != nil {
								b.Fatal(err)
							}
							tk, err := h.store.Peek(ctx, id)
							if err != nil {
								b.Fatal(err)
							}
							switch now := h.clock.Now(); {
							case tk.Status == driver.StatusWorking && tk.WakeAt.After(now):
								work = tk.WakeAt.Sub(start) + delivery
							case tk.Status == driver.StatusWorking:
								work = now.Sub(start) + delivery
							default:
								work = -1
							}
						}
						at(next)
						r, err := h.srv.GetTask(ctx, benchOwner, id)
						if err != nil {
							b.Fatal(err)
						}
						gets++
						d := r.(*tasks.DetailedTask)
						if d.Status.Terminal() {
							if answered >= 0 {
								seen += next - answered
							}
							break
						}
						advice := time.Duration(d.PollIntervalMs) * time.Millisecond
						if sc.self && d.Status == driver.StatusInputRequired && answered < 0 {
							// The client's user answers after thinking; the
							// client then waits the advice it read.
							answer = next + sc.answerAt
							next = answer + advice
							continue
						}
						next += advice
					}
				}
				b.ReportMetric(float64(gets)/float64(b.N), "gets/task")
				if sc.answerAt > 0 {
					b.ReportMetric(float64(seen.Milliseconds())/float64(b.N), "ms-answer-to-seen")
				}
			})
		}
	}
}

// BenchmarkPolledLatency reports how late a polling client that follows
// pollIntervalMs sees a 1-step task (one 200ms step) completed, from its
// tools/call: real time, real workers on the Redis queue, over HTTP.
func BenchmarkPolledLatency(b *testing.B) {
	for _, mode := range adviceModes {
		b.Run(mode.name, func(b *testing.B) {
			opts := mode.opts
			opts.Logger = benchOptions().Logger
			h := newHarness(b, "redis-server", opts, registerWaits)
			h.work(b, 2)
			var lat []time.Duration
			for b.Loop() {
				began := time.Now()
				var tk mcptest.Task
				h.c.Call(b, "tools/call", map[string]any{"name": "one", "arguments": map[string]any{}}).Decode(b, &tk)
				for !mcptest.Terminal(tk) {
					time.Sleep(time.Duration(tk.PollIntervalMs) * time.Millisecond)
					tk = h.c.Get(b, tk.TaskID)
				}
				lat = append(lat, time.Since(began))
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkNotificationLatency reports how late a listen stream (over HTTP)
// hears of a transition: from the start of the transition's store round
// trip (tasks/cancel of a parked task, in process) to the notifications/tasks
// at the client. The announcement goes through Redis pub/sub.
func BenchmarkNotificationLatency(b *testing.B) {
	h := newHarness(b, "redis-server", benchOptions(), registerWaits)
	ctx := context.Background()
	var lat []time.Duration
	for b.Loop() {
		res, err := h.srv.CreateTask(ctx, benchOwner, "ask", json.RawMessage(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		id := res.(*tasks.CreateTaskResult).TaskID
		if _, err := h.srv.Advance(ctx, id); err != nil {
			b.Fatal(err)
		}
		events, stop := benchListen(b, h.c, id)
		for _, want := range []string{"ack", "input_required"} {
			if got := <-events; got != want {
				b.Fatalf("stream: %s, want %s", got, want)
			}
		}
		began := time.Now()
		if _, err := h.srv.CancelTask(ctx, benchOwner, id); err != nil {
			b.Fatal(err)
		}
		if got := <-events; got != "cancelled" {
			b.Fatalf("stream: %s, want cancelled", got)
		}
		lat = append(lat, time.Since(began))
		stop()
	}
	reportPercentiles(b, lat)
}

// benchListen opens a task stream for id and returns what arrives on it:
// "ack", each notification's status, "result".
func benchListen(b testing.TB, c *mcptest.Client, id string) (<-chan string, func()) {
	body, hdr := c.Envelope(tasks.MethodListen, map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "POST", c.URL, bytes.NewReader(body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out := make(chan string, 8)
	go func() {
		defer close(out) // a stream cut by its deadline reads as ""
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m struct {
				Method string `json:"method"`
				Params struct {
					Status string `json:"status"`
				} `json:"params"`
			}
			_ = json.Unmarshal([]byte(data), &m)
			switch m.Method {
			case tasks.MethodAcknowledged:
				out <- "ack"
			case tasks.MethodTaskStatus:
				out <- m.Params.Status
			default:
				out <- "result"
			}
		}
	}()
	return out, cancel
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
