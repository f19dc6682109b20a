package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client/internal/faketasks"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sleeps records the waits a client chooses (and really waits them).
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return sleepCtx(ctx, d)
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

// newClient is a client of srv that records its waits, with a 1ms poll
// floor so that the server's intervals are followed as given.
func newClient(srv *faketasks.Server, opts ...Option) (*Client, *sleeps) {
	rec := &sleeps{}
	c := New(srv.URL, append([]Option{WithPollInterval(time.Millisecond, time.Minute),
		WithRetry(RetryPolicy{Initial: 4 * time.Millisecond, Max: 16 * time.Millisecond})}, opts...)...)
	c.sleep = rec.sleep
	return c, rec
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func textOf(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if r == nil || len(r.Content) != 1 {
		t.Fatalf("result %+v: want one content item", r)
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", r.Content[0])
	}
	return tc.Text
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestCallFollowsPollInterval: the wait before each tasks/get is the
// pollIntervalMs of the answer before it, which changes from poll to poll,
// clamped to the client's floor and ceiling. The waits are recorded, and
// the server sees its requests at least that far apart.
func TestCallFollowsPollInterval(t *testing.T) {
	tool := faketasks.Tool{Steps: []faketasks.Step{
		{Polls: 1, PollIntervalMs: 30},
		{Polls: 1, PollIntervalMs: 120},
		{Polls: 2, PollIntervalMs: 5},
		{Result: text("done")},
	}}
	for _, tc := range []struct {
		name         string
		floor, ceil  time.Duration
		want         []time.Duration
		wantGetCount int
	}{
		// create (30) → get1 (30) → get2 (120) → get3 (5) → get4 (5) → get5 completed
		{"as given", time.Millisecond, time.Minute, []time.Duration{ms(30), ms(30), ms(120), ms(5), ms(5)}, 5},
		{"clamped", ms(10), ms(50), []time.Duration{ms(30), ms(30), ms(50), ms(10), ms(10)}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := faketasks.New(map[string]faketasks.Tool{"job": tool}, nil)
			defer srv.Close()
			c, rec := newClient(srv, WithPollInterval(tc.floor, tc.ceil))
			res, err := c.Call(context.Background(), "job", nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, res); got != "done" {
				t.Fatalf("result %q", got)
			}
			if got := rec.all(); !slices.Equal(got, tc.want) {
				t.Errorf("waits %v, want %v", got, tc.want)
			}
			reqs := srv.Requests("tools/call", "tasks/get") // and one subscriptions/listen, refused
			if len(reqs) != 1+tc.wantGetCount || reqs[0].Method != "tools/call" {
				t.Fatalf("requests: %d, want tools/call then %d tasks/get", len(reqs), tc.wantGetCount)
			}
			for i := 1; i < len(reqs); i++ {
				if gap := reqs[i].At.Sub(reqs[i-1].At); gap < tc.want[i-1] {
					t.Errorf("request %d came %v after the one before, less than the %v wait", i, gap, tc.want[i-1])
				}
			}
		})
	}
}

// TestPollWait: a task without pollIntervalMs is polled at the default;
// every interval is clamped to the floor and ceiling.
func TestPollWait(t *testing.T) {
	c := New("http://x")
	for _, tc := range []struct{ in, want time.Duration }{
		{0, DefaultPollInterval}, {ms(1), DefaultPollFloor}, {ms(2500), ms(2500)}, {time.Hour, DefaultPollCeiling},
	} {
		if got := c.pollWait(tc.in); got != tc.want {
			t.Errorf("pollWait(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestRetriesTransientErrors: tasks/get answered with 503, a dropped
// connection, a -32603, and a 502 from a proxy is retried each time, with
// waits that double up to the maximum (jitter pinned to the middle of its
// range), and the call still returns the result.
func TestRetriesTransientErrors(t *testing.T) {
	faults := map[int]*faketasks.Fault{
		1: {Status: http.StatusServiceUnavailable, Body: "busy"},
		2: {Hangup: true},
		3: {Status: http.StatusInternalServerError, RPCError: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "store timeout"}},
		4: {Status: http.StatusBadGateway, Body: "<html>bad gateway</html>"},
	}
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{PollIntervalMs: 1}, {Result: text("done")}}}},
		&faketasks.Options{Fault: func(r faketasks.Request) *faketasks.Fault {
			if r.Method == "tasks/get" {
				return faults[r.N]
			}
			return nil
		}})
	defer srv.Close()
	c, rec := newClient(srv, WithRetry(RetryPolicy{Initial: ms(8), Max: ms(24)}))
	c.jitter = func() float64 { return 0.5 }
	res, err := c.Call(context.Background(), "job", nil)
	if err != nil {
		t.Fatal(err)
	}
	if textOf(t, res) != "done" {
		t.Fatalf("result %v", res)
	}
	// 1ms poll wait, then the backoffs 3/4 of 8, 16, 24 (capped), 24, then
	// the get that works shows "working", a 1ms wait, and the last get.
	want := []time.Duration{ms(1), ms(6), ms(12), ms(18), ms(18), ms(1)}
	if got := rec.all(); !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if n := len(srv.Requests("tasks/get")); n != 6 {
		t.Errorf("%d tasks/get, want 6 (4 failed, 2 answered)", n)
	}
}

// TestBackoffJitter: each backoff lies in the upper half of its doubled,
// capped base.
func TestBackoffJitter(t *testing.T) {
	c := New("http://x", WithRetry(RetryPolicy{Initial: ms(100), Max: ms(1000)}))
	for attempt, base := range map[int]time.Duration{1: ms(100), 2: ms(200), 3: ms(400), 4: ms(800), 5: ms(1000), 9: ms(1000)} {
		for range 200 {
			if d := c.backoff(attempt); d < base/2 || d > base {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, d, base/2, base)
			}
		}
	}
}

// TestGivesUpAfterRetryWindow: a tasks/get that keeps failing is retried
// until GiveUpAfter, then the call returns the last failure with the task.
func TestGivesUpAfterRetryWindow(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{Polls: 100, PollIntervalMs: 1}}}},
		&faketasks.Options{Fault: func(r faketasks.Request) *faketasks.Fault {
			if r.Method == "tasks/get" {
				return &faketasks.Fault{Status: http.StatusServiceUnavailable}
			}
			return nil
		}})
	defer srv.Close()
	c, _ := newClient(srv, WithRetry(RetryPolicy{Initial: ms(4), Max: ms(8), GiveUpAfter: ms(60)}))
	_, err := c.Call(context.Background(), "job", nil)
	var te *TaskError
	var he *HTTPError
	if !errors.As(err, &te) || !errors.As(err, &he) || he.StatusCode != 503 {
		t.Fatalf("err %v, want a TaskError wrapping HTTP 503", err)
	}
	if te.Task == nil || te.Task.ID != "task-1" || te.Task.Status != StatusWorking {
		t.Errorf("task %+v, want task-1 working", te.Task)
	}
	if n := len(srv.Requests("tasks/get")); n < 3 {
		t.Errorf("only %d tasks/get before giving up", n)
	}
}

// TestToolsCallRetriedOnlyWhenUnsent: a tools/call answered 503 is retried
// (the server did not act on it); one whose connection dropped or that
// answered -32603 is not, so that no task is started twice.
func TestToolsCallRetriedOnlyWhenUnsent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     *faketasks.Fault
		wantCalls int
		wantErr   bool
	}{
		{"503", &faketasks.Fault{Status: http.StatusServiceUnavailable}, 2, false},
		{"429", &faketasks.Fault{Status: http.StatusTooManyRequests}, 2, false},
		{"hangup", &faketasks.Fault{Hangup: true}, 1, true},
		{"-32603", &faketasks.Fault{Status: 500, RPCError: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "boom"}}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{Result: text("done")}}}},
				&faketasks.Options{PollIntervalMs: 1, Fault: func(r faketasks.Request) *faketasks.Fault {
					if r.Method == "tools/call" && r.N == 1 {
						return tc.fault
					}
					return nil
				}})
			defer srv.Close()
			c, _ := newClient(srv)
			_, err := c.Call(context.Background(), "job", nil)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if n := len(srv.Requests("tools/call")); n != tc.wantCalls {
				t.Errorf("%d tools/call, want %d", n, tc.wantCalls)
			}
		})
	}
}

// TestJSONAndSSE: the same calls work whether the server answers with a
// JSON body or with an event stream (where a notification, split over two
// data lines, comes before the response).
func TestJSONAndSSE(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			srv := faketasks.New(map[string]faketasks.Tool{
				"greet": {Sync: text("Hello!")},
				"job":   {Steps: []faketasks.Step{{PollIntervalMs: 1}, {Result: text("done")}}},
			}, &faketasks.Options{SSE: sse})
			defer srv.Close()
			c, _ := newClient(srv)
			ctx := context.Background()
			res, err := c.Call(ctx, "greet", map[string]string{"name": "x"})
			if err != nil || textOf(t, res) != "Hello!" {
				t.Fatalf("greet: %v %v", res, err)
			}
			res, err = c.Call(ctx, "job", nil)
			if err != nil || textOf(t, res) != "done" {
				t.Fatalf("job: %v %v", res, err)
			}
			if _, err := c.Get(ctx, "task-1"); err != nil {
				t.Fatal(err)
			}
			if err := c.Cancel(ctx, "task-1"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHeadersAndMeta: every request carries the 2026-07-28 headers
// (Mcp-Name the tool for tools/call, the task id for tasks/*, none for
// tools/list), the bearer token fetched for each request, the extra
// headers, and _meta declaring the tasks extension (and elicitation when the
// call can answer input).
func TestHeadersAndMeta(t *testing.T) {
	ask := &mcp.ElicitParams{Mode: "form", Message: "ok?", RequestedSchema: map[string]any{"type": "object"}}
	srv := faketasks.New(map[string]faketasks.Tool{
		"job":   {Steps: []faketasks.Step{{PollIntervalMs: 1}, {Ask: map[string]*mcp.ElicitParams{"q": ask}}, {Result: text("done")}}},
		"greet": {Sync: text("hi")},
	}, nil)
	defer srv.Close()
	var tokens atomic.Int32
	c, _ := newClient(srv, WithHeader("X-Trace", "abc"), WithTokenSource(func(context.Context) (string, error) {
		return fmt.Sprintf("tok-%d", tokens.Add(1)), nil
	}))
	ctx := context.Background()
	if _, err := c.Call(ctx, "job", map[string]int{"n": 1}, OnElicit(func(context.Context, *InputRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
	})); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, "task-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "greet", nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	for i, r := range reqs {
		h := r.Header
		wantName := map[string]string{"tools/call": "job", "tasks/get": "task-1", "tasks/update": "task-1", "tasks/cancel": "task-1", "tools/list": ""}[r.Method]
		if i == len(reqs)-1 {
			wantName = "greet"
		}
		for k, want := range map[string]string{
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": r.Method, "Mcp-Name": wantName,
			"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
			"Authorization": fmt.Sprintf("Bearer tok-%d", i+1), "X-Trace": "abc",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("request %d (%s): %s = %q, want %q", i, r.Method, k, got, want)
			}
		}
		var meta struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
			Caps    struct {
				Extensions  map[string]json.RawMessage `json:"extensions"`
				Elicitation json.RawMessage            `json:"elicitation"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
			Info struct{ Name string } `json:"io.modelcontextprotocol/clientInfo"`
		}
		if err := r.Param("_meta", &meta); err != nil {
			t.Fatalf("request %d: _meta: %v", i, err)
		}
		if meta.Version != "2026-07-28" || string(meta.Caps.Extensions[ExtensionID]) != "{}" || meta.Info.Name == "" {
			t.Errorf("request %d (%s): _meta %+v", i, r.Method, meta)
		}
		inCall := i < len(reqs)-3 // the Call with a handler, before Cancel, ListTools and greet
		if (meta.Caps.Elicitation != nil) != inCall {
			t.Errorf("request %d (%s): elicitation capability %s, want declared=%v", i, r.Method, meta.Caps.Elicitation, inCall)
		}
	}
	var args map[string]int
	if err := reqs[0].Param("arguments", &args); err != nil || args["n"] != 1 {
		t.Errorf("arguments %v (%v)", args, err)
	}
	var greetArgs json.RawMessage
	if err := reqs[len(reqs)-1].Param("arguments", &greetArgs); err != nil || string(greetArgs) != "{}" {
		t.Errorf("nil arguments sent as %s, want {}", greetArgs)
	}
}

// TestOnStatusReportsChangesOnly: the callback sees each distinct (status,
// statusMessage) once, from the created state to the terminal one, however
// many polls show it.
func TestOnStatusReportsChangesOnly(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{
		{Message: "a", Polls: 3, PollIntervalMs: 1},
		{Message: "b", Polls: 2, PollIntervalMs: 1},
		{Message: "b", Polls: 2, PollIntervalMs: 1},
		{Ask: map[string]*mcp.ElicitParams{"k": {Message: "?"}}, Message: "b"},
		{Message: "done", Result: text("ok")},
	}}}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	var seen []string
	_, err := c.Call(context.Background(), "job", nil,
		OnStatus(func(tk Task) { seen = append(seen, string(tk.Status)+"/"+tk.StatusMessage) }),
		OnElicit(func(context.Context, *InputRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept"}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"working/a", "working/b", "input_required/b", "completed/done"}
	if !slices.Equal(seen, want) {
		t.Errorf("reported %v, want %v", seen, want)
	}
}

func twoQuestions(stale bool) faketasks.Tool {
	return faketasks.Tool{Steps: []faketasks.Step{
		{PollIntervalMs: 1},
		{Stale: stale, PollIntervalMs: 1, Ask: map[string]*mcp.ElicitParams{
			"name":   {Mode: "form", Message: "Name?", RequestedSchema: map[string]any{"type": "object"}},
			"launch": {Mode: "form", Message: "Launch?", RequestedSchema: map[string]any{"type": "object"}},
		}},
		{ResultFunc: func(a map[string]json.RawMessage) *mcp.CallToolResult {
			return text(fmt.Sprintf("name=%s launch=%s", a["name"], a["launch"]))
		}},
	}}
}

// answerer answers elicitations by key and counts the questions.
type answerer struct {
	mu    sync.Mutex
	asked []string
}

func (a *answerer) elicit(_ context.Context, req *InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req.Key)
	a.mu.Unlock()
	if p.Message == "" {
		return nil, errors.New("no message")
	}
	if req.Key == "launch" {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "apollo"}}, nil
}

// TestInputAnswers: two pending input requests are answered in one
// tasks/update by default and in two with AnswerEach; each key is asked and
// sent once even when the server keeps listing answered keys (stale reads).
func TestInputAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stale   bool
		opts    []CallOption
		updates []string
	}{
		{"together", false, nil, []string{"launch,name"}},
		{"each", false, []CallOption{AnswerEach()}, []string{"launch", "name"}},
		{"each, stale reads", true, []CallOption{AnswerEach()}, []string{"launch", "name"}},
		{"together, stale reads", true, nil, []string{"launch,name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := faketasks.New(map[string]faketasks.Tool{"multi": twoQuestions(tc.stale)}, nil)
			defer srv.Close()
			c, _ := newClient(srv)
			a := &answerer{}
			res, err := c.Call(context.Background(), "multi", nil, append(tc.opts, OnElicit(a.elicit))...)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := textOf(t, res), `name={"action":"accept","content":{"name":"apollo"}} launch={"action":"decline"}`; got != want {
				t.Errorf("result %q, want %q", got, want)
			}
			if !slices.Equal(a.asked, []string{"launch", "name"}) {
				t.Errorf("asked %v, want each key once, in order", a.asked)
			}
			var got []string
			for _, u := range srv.Updates("task-1") {
				keys := make([]string, 0, len(u))
				for k := range u {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				got = append(got, strings.Join(keys, ","))
			}
			if !slices.Equal(got, tc.updates) {
				t.Errorf("updates carried keys %v, want %v", got, tc.updates)
			}
		})
	}
}

// TestInputWithoutHandler: a task that needs input and a call without a
// handler ends the call with ErrInputRequired; the task is left waiting
// (not cancelled) with its requests in the error.
func TestInputWithoutHandler(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"multi": twoQuestions(false)}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	_, err := c.Call(context.Background(), "multi", nil)
	var te *TaskError
	if !errors.Is(err, ErrInputRequired) || !errors.As(err, &te) {
		t.Fatalf("err %v, want ErrInputRequired", err)
	}
	if te.Task.Status != StatusInputRequired || !slices.Equal(te.Task.Pending(), []string{"launch", "name"}) {
		t.Errorf("task %+v", te.Task)
	}
	p, err := te.Task.InputRequests["name"].Elicitation()
	if err != nil || p.Message != "Name?" {
		t.Errorf("elicitation %+v %v", p, err)
	}
	if n := len(srv.Requests("tasks/cancel")); n != 0 {
		t.Errorf("%d tasks/cancel sent", n)
	}
	// Answered by hand, the task resumes and Resume gets its result.
	if err := c.Update(context.Background(), "task-1", map[string]any{
		"name": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "x"}}, "launch": &mcp.ElicitResult{Action: "cancel"},
	}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Resume(context.Background(), "task-1")
	if err != nil || !strings.Contains(textOf(t, res), `"cancel"`) {
		t.Fatalf("resume: %v %v", res, err)
	}
}

// TestInputHandlerError: a handler's error ends the call, after sending the
// answers already given; the task is not cancelled.
func TestInputHandlerError(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"multi": twoQuestions(false)}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	boom := errors.New("no terminal")
	_, err := c.Call(context.Background(), "multi", nil, OnInput(func(_ context.Context, r *InputRequest) (any, error) {
		if r.Key == "name" {
			return nil, boom
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}))
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if u := srv.Updates("task-1"); len(u) != 1 || len(u[0]) != 1 || u[0]["launch"] == nil {
		t.Errorf("updates %v, want the launch answer alone", u)
	}
	if srv.Status("task-1") != "input_required" {
		t.Errorf("task %s", srv.Status("task-1"))
	}
}

// TestCancelOnContextDone: when the caller's context ends, the client sends
// tasks/cancel and reports the state the task reaches: cancelled, or
// completed when the task ignored the cancellation, or still working when
// CancelWait passes first. The error wraps the context's error and carries
// the task.
func TestCancelOnContextDone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		steps  []faketasks.Step
		wait   time.Duration // CancelWait: ample unless the wait is to pass
		status Status
	}{
		{"cancelled", []faketasks.Step{{Polls: 1000, PollIntervalMs: 1}}, 5 * time.Second, StatusCancelled},
		{"completes anyway", []faketasks.Step{{Polls: 3, PollIntervalMs: 1, IgnoreCancel: true}, {Result: text("finished")}}, 5 * time.Second, StatusCompleted},
		{"still working", []faketasks.Step{{Polls: 1 << 30, PollIntervalMs: 2, IgnoreCancel: true}}, ms(80), StatusWorking},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: tc.steps}}, nil)
			defer srv.Close()
			c, _ := newClient(srv)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var seen []Status
			_, err := c.Call(ctx, "job", nil, CancelWait(tc.wait), OnStatus(func(tk Task) {
				seen = append(seen, tk.Status)
				cancel()
			}))
			var te *TaskError
			if !errors.Is(err, context.Canceled) || !errors.As(err, &te) {
				t.Fatalf("err %v, want a TaskError wrapping context.Canceled", err)
			}
			if te.Task.Status != tc.status {
				t.Errorf("final status %s, want %s", te.Task.Status, tc.status)
			}
			if tc.status == StatusCompleted && textOf(t, te.Task.Result) != "finished" {
				t.Errorf("result %v", te.Task.Result)
			}
			cancels := srv.Requests("tasks/cancel")
			if len(cancels) != 1 || cancels[0].Header.Get("Mcp-Name") != "task-1" {
				t.Fatalf("tasks/cancel requests: %d", len(cancels))
			}
			if seen[len(seen)-1] != tc.status {
				t.Errorf("OnStatus saw %v", seen)
			}
		})
	}
}

// CancelAndWait reads the task until it ends, whatever it ends as, or
// returns the running task when the wait passes; a wait of 0 reads once.
func TestCancelAndWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		steps  []faketasks.Step
		wait   time.Duration
		status Status
		gets   int // tasks/get requests, -1: more than one
	}{
		{"cancelled", []faketasks.Step{{Polls: 1000, PollIntervalMs: 1}}, 5 * time.Second, StatusCancelled, 1},
		{"completes anyway", []faketasks.Step{{Polls: 3, PollIntervalMs: 1, IgnoreCancel: true}, {Result: text("finished")}}, 5 * time.Second, StatusCompleted, -1},
		{"still working", []faketasks.Step{{Polls: 1 << 30, PollIntervalMs: 2, IgnoreCancel: true}}, ms(80), StatusWorking, -1},
		{"no wait", []faketasks.Step{{Polls: 3, PollIntervalMs: 1, IgnoreCancel: true}, {Result: text("finished")}}, 0, StatusWorking, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: tc.steps}}, nil)
			defer srv.Close()
			c, _ := newClient(srv)
			ctx := t.Context()
			task, _, err := c.Start(ctx, "job", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.CancelAndWait(ctx, task.ID, tc.wait)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != task.ID || got.Status != tc.status {
				t.Errorf("task %s %s, want %s %s", got.ID, got.Status, task.ID, tc.status)
			}
			if n := len(srv.Requests("tasks/get")); (tc.gets > 0 && n != tc.gets) || (tc.gets < 0 && n < 2) {
				t.Errorf("%d tasks/get requests, want %d (-1: more than one)", n, tc.gets)
			}
			if n := len(srv.Requests("tasks/cancel")); n != 1 {
				t.Errorf("%d tasks/cancel requests", n)
			}
		})
	}
	t.Run("unknown task", func(t *testing.T) {
		srv := faketasks.New(map[string]faketasks.Tool{}, nil)
		defer srv.Close()
		c, _ := newClient(srv)
		if _, err := c.CancelAndWait(t.Context(), "nope", ms(100)); !errors.Is(err, ErrTaskUnknown) {
			t.Errorf("err %v, want ErrTaskUnknown", err)
		}
	})
}

// TestCancelDuringCreate: a context that ends while tools/call is in
// flight does not lose the task the server creates meanwhile: the client
// reads the handle and cancels it.
func TestCancelDuringCreate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{Polls: 1000}}}},
		&faketasks.Options{Fault: func(r faketasks.Request) *faketasks.Fault {
			if r.Method == "tools/call" {
				cancel()
				time.Sleep(ms(50)) // the answer comes after the context ended
			}
			return nil
		}})
	defer srv.Close()
	c, _ := newClient(srv)
	_, err := c.Call(ctx, "job", nil)
	var te *TaskError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &te) || te.Task.Status != StatusCancelled {
		t.Fatalf("err %v, want the cancelled task", err)
	}
	if srv.Status("task-1") != "cancelled" {
		t.Errorf("server status %q", srv.Status("task-1"))
	}
}

// TestDetach: when the Detach context ends, the call returns at once with
// ErrDetached and leaves the task running: no tasks/cancel.
func TestDetach(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{Polls: 1000, PollIntervalMs: 1}}}}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	detach, stop := context.WithCancel(context.Background())
	_, err := c.Call(context.Background(), "job", nil, Detach(detach), OnStatus(func(Task) { stop() }))
	var te *TaskError
	if !errors.Is(err, ErrDetached) || !errors.As(err, &te) || te.Task.Status != StatusWorking {
		t.Fatalf("err %v, want ErrDetached with the working task", err)
	}
	if n := len(srv.Requests("tasks/cancel")); n != 0 {
		t.Errorf("%d tasks/cancel", n)
	}
}

// TestFailedIsAnError: a failed task is a TaskError wrapping the JSON-RPC
// error object, code, message and data intact.
func TestFailedIsAnError(t *testing.T) {
	rpcErr := &jsonrpc.Error{Code: -32000, Message: "upstream refused", Data: json.RawMessage(`{"retryAfter":30}`)}
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{PollIntervalMs: 1}, {Error: rpcErr}}}}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	_, err := c.Call(context.Background(), "job", nil)
	var te *TaskError
	var got *jsonrpc.Error
	if !errors.As(err, &te) || !errors.As(err, &got) {
		t.Fatalf("err %v", err)
	}
	if got.Code != -32000 || got.Message != "upstream refused" || string(got.Data) != `{"retryAfter":30}` {
		t.Errorf("error object %+v", got)
	}
	if te.Task.Status != StatusFailed || err.Error() != "task task-1 failed: upstream refused (code -32000)" {
		t.Errorf("%v (%s)", err, te.Task.Status)
	}
}

// TestIsErrorIsAResult: a tool-level error completes the task and comes
// back as a result with IsError, not as a Go error.
func TestIsErrorIsAResult(t *testing.T) {
	bad := text("not found")
	bad.IsError = true
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{PollIntervalMs: 1}, {Result: bad}}}}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	res, err := c.Call(context.Background(), "job", nil)
	if err != nil || !res.IsError || textOf(t, res) != "not found" {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestUnknownTask: -32602 on a task the client knows (one that expired
// while it was polled, or an id given to Resume) is ErrTaskUnknown.
func TestUnknownTask(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"job": {Steps: []faketasks.Step{{Polls: 1000, PollIntervalMs: 1}}}},
		&faketasks.Options{Fault: func(r faketasks.Request) *faketasks.Fault {
			if r.Method == "tasks/get" && r.N == 3 {
				return &faketasks.Fault{Status: 400, RPCError: &jsonrpc.Error{Code: -32602, Message: "unknown taskId: task-1"}}
			}
			return nil
		}})
	defer srv.Close()
	c, _ := newClient(srv)
	_, err := c.Call(context.Background(), "job", nil)
	var te *TaskError
	if !errors.Is(err, ErrTaskUnknown) || !errors.As(err, &te) || te.Task.ID != "task-1" || te.Task.Status != StatusWorking {
		t.Fatalf("err %v, want ErrTaskUnknown with the last known state", err)
	}
	if !strings.Contains(err.Error(), "task expired or unknown") {
		t.Errorf("message %q", err)
	}
	_, err = c.Resume(context.Background(), "no-such-task")
	if !errors.Is(err, ErrTaskUnknown) {
		t.Fatalf("resume: %v", err)
	}
	if _, err := c.Get(context.Background(), "no-such-task"); !errors.Is(err, ErrTaskUnknown) {
		t.Fatalf("get: %v", err)
	}
}

// TestStartAndResume: Start returns the handle without polling (or a sync
// result); Resume, later and from another client, gets the task's result.
func TestStartAndResume(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{
		"job":   {Steps: []faketasks.Step{{Message: "m", PollIntervalMs: 1}, {Result: text("done")}}},
		"greet": {Sync: text("hi")},
	}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	ctx := context.Background()
	var seen []Task
	task, res, err := c.Start(ctx, "job", nil, OnStatus(func(tk Task) { seen = append(seen, tk) }))
	if err != nil || res != nil || task == nil || task.ID != "task-1" || task.Status != StatusWorking || task.StatusMessage != "m" {
		t.Fatalf("start: %+v %v %v", task, res, err)
	}
	if task.PollInterval != ms(1) || task.TTL != time.Hour || task.CreatedAt.IsZero() {
		t.Errorf("handle %+v", task)
	}
	if len(seen) != 1 || len(srv.Requests("tasks/get")) != 0 {
		t.Errorf("start polled or did not report the handle: %v", seen)
	}
	task, res, err = c.Start(ctx, "greet", nil)
	if err != nil || task != nil || textOf(t, res) != "hi" {
		t.Fatalf("start greet: %v %v %v", task, res, err)
	}
	other, _ := newClient(srv)
	res, err = other.Resume(ctx, "task-1")
	if err != nil || textOf(t, res) != "done" {
		t.Fatalf("resume: %v %v", res, err)
	}
}

// TestMRTRRound: a tools/call answered input_required (before any task
// exists) is answered through the same handler and retried with the
// responses and the echoed requestState.
func TestMRTRRound(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"hello": {
		Before: map[string]*mcp.ElicitParams{"user_name": {Mode: "form", Message: "What is your name?"}},
		Steps: []faketasks.Step{{ResultFunc: func(a map[string]json.RawMessage) *mcp.CallToolResult {
			return text(string(a["user_name"]))
		}}},
	}}, &faketasks.Options{PollIntervalMs: 1})
	defer srv.Close()
	c, _ := newClient(srv)
	res, err := c.Call(context.Background(), "hello", nil, OnElicit(func(_ context.Context, _ *InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Alice"}}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != `{"action":"accept","content":{"name":"Alice"}}` {
		t.Errorf("result %s", got)
	}
	calls := srv.Requests("tools/call")
	if len(calls) != 2 {
		t.Fatalf("%d tools/call", len(calls))
	}
	var state string
	if err := calls[1].Param("requestState", &state); err != nil || state != "state-1" {
		t.Errorf("requestState %q (%v)", state, err)
	}
	// Without a handler the round cannot be answered.
	if _, err := c.Call(context.Background(), "hello", nil); !errors.Is(err, ErrInputRequired) {
		t.Errorf("err %v, want ErrInputRequired", err)
	}
}

// TestListToolsPaginates: ListTools follows nextCursor to the last page.
func TestListToolsPaginates(t *testing.T) {
	tools := map[string]faketasks.Tool{}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		tools[n] = faketasks.Tool{Sync: text(n)}
	}
	srv := faketasks.New(tools, &faketasks.Options{PageSize: 2})
	defer srv.Close()
	c, _ := newClient(srv)
	got, err := c.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range got {
		names = append(names, tl.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c", "d", "e"}) || len(srv.Requests("tools/list")) != 3 {
		t.Errorf("tools %v in %d pages", names, len(srv.Requests("tools/list")))
	}
}

// TestHTTPErrorsAreNotRetried: a 401 without a JSON-RPC body is an
// HTTPError, returned at once with its header.
func TestHTTPErrorsAreNotRetried(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"greet": {Sync: text("hi")}},
		&faketasks.Options{Fault: func(faketasks.Request) *faketasks.Fault {
			return &faketasks.Fault{Status: http.StatusUnauthorized, Body: "no token"}
		}})
	defer srv.Close()
	c, _ := newClient(srv)
	_, err := c.ListTools(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 401 || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("err %v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests", n)
	}
}

// TestParamHeaders: a tools/call refused with -32020 because the tool
// mirrors arguments into Mcp-Param-* headers (SEP-2243) is sent again with
// the headers its input schema in tools/list asks for, values encoded as
// the SEP says.
func TestParamHeaders(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		"level":  map[string]any{"type": "integer", "x-mcp-header": "Level"},
		"opts": map[string]any{"type": "object", "properties": map[string]any{
			"dry": map[string]any{"type": "boolean", "x-mcp-header": "Dry"},
		}},
		"note": map[string]any{"type": "string"},
	}}
	srv := faketasks.New(map[string]faketasks.Tool{"deploy": {InputSchema: schema, Sync: text("ok")}},
		&faketasks.Options{Fault: func(r faketasks.Request) *faketasks.Fault {
			if r.Method == "tools/call" && r.Header.Get("Mcp-Param-Region") == "" {
				return &faketasks.Fault{Status: 400, RPCError: &jsonrpc.Error{Code: -32020, Message: "header mismatch: missing Mcp-Param-Region header"}}
			}
			return nil
		}})
	defer srv.Close()
	c, _ := newClient(srv)
	res, err := c.Call(context.Background(), "deploy", map[string]any{
		"region": "  zürich", "level": 3, "opts": map[string]any{"dry": true}, "note": "x"})
	if err != nil || textOf(t, res) != "ok" {
		t.Fatalf("%v %v", res, err)
	}
	calls := srv.Requests("tools/call")
	if len(calls) != 2 || len(srv.Requests("tools/list")) != 1 {
		t.Fatalf("%d tools/call, %d tools/list", len(calls), len(srv.Requests("tools/list")))
	}
	h := calls[1].Header
	for k, want := range map[string]string{
		"Mcp-Param-Region": "=?base64?ICB6w7xyaWNo?=", "Mcp-Param-Level": "3", "Mcp-Param-Dry": "true", "Mcp-Param-Note": "",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// A -32020 for a tool without annotations is returned as it is.
	srv2 := faketasks.New(map[string]faketasks.Tool{"plain": {Sync: text("ok")}},
		&faketasks.Options{Fault: func(r faketasks.Request) *faketasks.Fault {
			if r.Method == "tools/call" {
				return &faketasks.Fault{Status: 400, RPCError: &jsonrpc.Error{Code: -32020, Message: "header mismatch"}}
			}
			return nil
		}})
	defer srv2.Close()
	c2, _ := newClient(srv2)
	if _, err := c2.Call(context.Background(), "plain", nil); !isHeaderMismatch(err) || len(srv2.Requests("tools/call")) != 1 {
		t.Errorf("err %v after %d calls", err, len(srv2.Requests("tools/call")))
	}
}

// TestHeaderValueEncoding: SEP-2243 header forms of primitive values.
func TestHeaderValueEncoding(t *testing.T) {
	for in, want := range map[string]string{
		`"plain"`: "plain", `"é"`: "=?base64?w6k=?=", `" pad"`: "=?base64?IHBhZA==?=", `"=?base64?x?="`: "=?base64?PT9iYXNlNjQ/eD89?=",
		`42`: "42", `-7`: "-7", `true`: "true", `false`: "false", `""`: "",
	} {
		if got, ok := headerValue(json.RawMessage(in)); !ok || got != want {
			t.Errorf("headerValue(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{`1.5`, `{"a":1}`, `[1]`, `9007199254740993`} {
		if got, ok := headerValue(json.RawMessage(in)); ok {
			t.Errorf("headerValue(%s) = %q, want none", in, got)
		}
	}
}

// TestBadNameIsNotRetried: a tool name that cannot go into a header is an
// error at once, not a transient failure.
func TestBadNameIsNotRetried(t *testing.T) {
	srv := faketasks.New(nil, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	if _, err := c.Call(context.Background(), "bad\nname", nil); err == nil || !strings.Contains(err.Error(), "Mcp-Name") {
		t.Fatalf("err %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// A server with too many streams open refuses subscriptions/listen with
// HTTP 429: the client polls, and tries to listen again after a poll (not
// only on its first call, as after a server that has no streams).
func TestBusyStreamsArePolledThenRetried(t *testing.T) {
	tool := faketasks.Tool{Steps: []faketasks.Step{{PollIntervalMs: 5}, {Result: text("done")}}}
	srv := faketasks.New(map[string]faketasks.Tool{"job": tool}, &faketasks.Options{Fault: func(r faketasks.Request) *faketasks.Fault {
		if r.Method == "subscriptions/listen" {
			return &faketasks.Fault{Status: http.StatusTooManyRequests, RPCError: &jsonrpc.Error{Code: -32028, Message: "too many open streams"}}
		}
		return nil
	}})
	defer srv.Close()
	c, _ := newClient(srv)
	for range 2 {
		if _, err := c.Call(context.Background(), "job", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.Requests("subscriptions/listen")); n < 3 {
		t.Errorf("subscriptions/listen sent %d times, want it tried again after each refusal", n)
	}
}

// A server without task streams refuses subscriptions/listen (here -32601,
// HTTP 404): the client polls instead, and does not ask again.
func TestCallFallsBackToPolling(t *testing.T) {
	tool := faketasks.Tool{Steps: []faketasks.Step{{PollIntervalMs: 5}, {Result: text("done")}}}
	srv := faketasks.New(map[string]faketasks.Tool{"job": tool}, nil)
	defer srv.Close()
	c, _ := newClient(srv)
	for range 2 {
		if _, err := c.Call(context.Background(), "job", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(srv.Requests("subscriptions/listen")); n != 1 {
		t.Errorf("subscriptions/listen sent %d times, want once", n)
	}
	if n := len(srv.Requests("tasks/get")); n < 2 {
		t.Errorf("tasks/get sent %d times, want the tasks polled", n)
	}
	c, _ = newClient(srv, WithPolling())
	if _, err := c.Call(context.Background(), "job", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests("subscriptions/listen")); n != 1 {
		t.Errorf("WithPolling: subscriptions/listen sent again")
	}
}

// TestUnhealableErrorsAreNotRetried: what no retry can change fails at the
// first attempt: a URL without an http(s) scheme, and TLS spoken to a
// plain HTTP server.
func TestUnhealableErrorsAreNotRetried(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"greet": {Sync: text("hi")}}, nil)
	defer srv.Close()
	for _, url := range []string{strings.TrimPrefix(srv.URL, "http://"), "localhost:8080/mcp", "ftp://localhost/mcp", strings.Replace(srv.URL, "http://", "https://", 1)} {
		c, rec := newClient(srv)
		c.url = url
		_, err := c.ListTools(context.Background())
		if err == nil || strings.Contains(err.Error(), "gave up") || len(rec.all()) != 0 {
			t.Errorf("%s: err %v after %d retries, want one attempt", url, err, len(rec.all()))
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestRetryAttempts: RetryPolicy.Attempts bounds the attempts, whatever
// time GiveUpAfter leaves, and the error counts them.
func TestRetryAttempts(t *testing.T) {
	srv := faketasks.New(map[string]faketasks.Tool{"greet": {Sync: text("hi")}},
		&faketasks.Options{Fault: func(faketasks.Request) *faketasks.Fault {
			return &faketasks.Fault{Status: http.StatusServiceUnavailable}
		}})
	defer srv.Close()
	c, _ := newClient(srv, WithRetry(RetryPolicy{Initial: ms(1), Max: ms(2), Attempts: 3}))
	_, err := c.ListTools(context.Background())
	if err == nil || !strings.HasSuffix(err.Error(), "(gave up after 3 attempts)") {
		t.Errorf("err %v, want one that gave up after 3 attempts", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}
