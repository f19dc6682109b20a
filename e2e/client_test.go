package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientEnv paces the servers of the client tests: a quick poll interval,
// sweeper and lease, so that every scenario takes a second or so.
var clientEnv = []string{
	"MCPTASKS_POLL_INTERVAL=100ms",
	"MCPTASKS_SWEEP_INTERVAL=300ms",
	"MCPTASKS_MAX_DURATION=4s",
	"MCPTASKS_WORKERS=2",
}

// clientServer is the real server in one shape, serving one app.
type clientServer struct {
	shape   string // see startClientServer
	url     string
	api     *proc
	workers []*proc
	env     []string
	app     string
}

// startClientServer runs `mcptasks serve --app app` in shape "embedded"
// (endpoint, workers and sweeper in one process on the embedded Redis),
// "split" (`serve --no-worker` and a `worker` process on a real
// redis-server), "cluster" (split, on a Redis Cluster) or "postgres"
// (split, on PostgreSQL: the Postgres store and queue).
func startClientServer(t *testing.T, shape, app string, env ...string) *clientServer {
	t.Helper()
	s := &clientServer{shape: shape, app: app, env: append(slices.Clone(clientEnv), env...)}
	switch shape {
	case "embedded":
		s.api = start(t, s.env, "serve", "--app", app)
	case "split", "cluster", "postgres":
		kind := map[string]string{"split": "redis-server", "cluster": "cluster", "postgres": "postgres"}[shape]
		s.env = append(s.env, storeEnv(t, kind)...)
		s.api = start(t, s.env, "serve", "--no-worker", "--app", app)
		s.addWorker(t)
	default:
		t.Fatalf("unknown shape %q", shape)
	}
	s.url = "http://" + s.api.addr + "/mcp"
	return s
}

// addWorker starts one more worker process (split shape).
func (s *clientServer) addWorker(t *testing.T) *proc {
	w := start(t, s.env, "worker", "--app", s.app)
	s.workers = append(s.workers, w)
	return w
}

// logs is what every process of the server wrote so far.
func (s *clientServer) logs() string {
	var b strings.Builder
	b.WriteString(s.api.Log())
	for _, w := range s.workers {
		b.WriteString(w.Log())
	}
	return b.String()
}

// wireLog records the JSON-RPC requests a client sends, as a transport.
type wireLog struct {
	mu   sync.Mutex
	reqs []wireReq
}

type wireReq struct {
	method string
	header http.Header
	params map[string]json.RawMessage
}

func (l *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	var msg struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &msg)
	l.mu.Lock()
	l.reqs = append(l.reqs, wireReq{method: msg.Method, header: r.Header.Clone(), params: msg.Params})
	l.mu.Unlock()
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(r2)
}

func (l *wireLog) of(method string) []wireReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []wireReq
	for _, r := range l.reqs {
		if r.method == method {
			out = append(out, r)
		}
	}
	return out
}

// newTaskClient is a client of s that records its requests and polls at
// the server's pace.
func newTaskClient(s *clientServer, opts ...client.Option) (*client.Client, *wireLog) {
	l := &wireLog{}
	return client.New(s.url, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: l}),
		client.WithRetry(client.RetryPolicy{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond, GiveUpAfter: time.Minute})}, opts...)...), l
}

func resultText(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if r == nil {
		t.Fatal("no result")
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// statuses collects what OnStatus reports.
type statuses struct {
	mu   sync.Mutex
	seen []client.Task
}

func (s *statuses) opt() client.CallOption {
	return client.OnStatus(func(tk client.Task) {
		s.mu.Lock()
		s.seen = append(s.seen, tk)
		s.mu.Unlock()
	})
}

func (s *statuses) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, tk := range s.seen {
		out = append(out, string(tk.Status)+"/"+tk.StatusMessage)
	}
	return out
}

// TestClientAgainstServer drives pkg/client against the real server
// process in every shape, with the example app and the conformance
// fixtures: sync and task results, tool errors and failed tasks, input
// rounds, cancellation of a sleeping task and of a running step, and
// unknown and expired tasks.
func TestClientAgainstServer(t *testing.T) {
	for _, shape := range []string{"embedded", "split", "cluster", "postgres"} {
		t.Run(shape, func(t *testing.T) {
			t.Parallel()
			ex := startClientServer(t, shape, "examples")
			// Short-lived tasks on the conformance fixtures, for the expiry
			// scenario; every other scenario there ends well within it.
			conf := startClientServer(t, shape, "conformance", "MCPTASKS_TASK_TTL=5s")
			clientScenarios(t, ex, conf)
		})
	}
}

func clientScenarios(t *testing.T, ex, conf *clientServer) {
	t.Run("sync result", func(t *testing.T) {
		t.Parallel()
		c, wire := newTaskClient(ex)
		var st statuses
		res, err := c.Call(context.Background(), "greet", map[string]any{"name": "Ada"}, st.opt())
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); got != "Hello, Ada!" {
			t.Errorf("result %q", got)
		}
		if len(st.list()) != 0 || len(wire.of("tasks/get")) != 0 {
			t.Errorf("a sync tool became a task: %v", st.list())
		}
	})

	t.Run("task result", func(t *testing.T) {
		t.Parallel()
		c, wire := newTaskClient(ex, client.WithPolling()) // the polls' wire (TestClientListens: the stream's)
		var st statuses
		res, err := c.Call(context.Background(), "slow_compute", map[string]any{"seconds": 1, "label": "e2e"}, st.opt())
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); !strings.HasPrefix(got, `computed "e2e" in 1s`) {
			t.Errorf("result %q", got)
		}
		seen := st.list()
		// "done" is set after the last step: it stays on the finished task.
		if !slices.Contains(seen, "working/computing for 1s") || seen[len(seen)-1] != "completed/done" {
			t.Errorf("statuses %v", seen)
		}
		gets := wire.of("tasks/get")
		if len(gets) < 2 || gets[0].header.Get("Mcp-Name") == "" {
			t.Fatalf("%d tasks/get", len(gets))
		}
		var id string
		_ = json.Unmarshal(gets[0].params["taskId"], &id)
		if gets[0].header.Get("Mcp-Name") != id {
			t.Errorf("Mcp-Name %q, taskId %q", gets[0].header.Get("Mcp-Name"), id)
		}
	})

	t.Run("batch result", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(ex)
		var st statuses
		res, err := c.Call(context.Background(), "batch_report", map[string]any{"steps": 3, "stepMillis": 50}, st.opt())
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); got != "processed 3 parts, checksum 14" {
			t.Errorf("result %q", got)
		}
		if !slices.Contains(st.list(), "working/processing part 1 of 3") {
			t.Logf("statuses %v (the first part may pass between two polls)", st.list())
		}
	})

	t.Run("isError stays a result", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(conf)
		res, err := c.Call(context.Background(), "failing_job", nil)
		if err != nil {
			t.Fatalf("err %v, want a result with isError", err)
		}
		if got := resultText(t, res); !res.IsError || !strings.Contains(got, "the input batch is corrupt") {
			t.Errorf("result %q isError=%v", got, res.IsError)
		}
	})

	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(conf)
		_, err := c.Call(context.Background(), "protocol_error_job", nil)
		var te *client.TaskError
		var rpc *jsonrpc.Error
		if !errors.As(err, &te) || !errors.As(err, &rpc) {
			t.Fatalf("err %v, want a TaskError with a JSON-RPC error", err)
		}
		if te.Task.Status != client.StatusFailed || rpc.Code != jsonrpc.CodeInternalError || !strings.Contains(rpc.Message, "unusable payload") {
			t.Errorf("task %s, error %d %q", te.Task.Status, rpc.Code, rpc.Message)
		}
	})

	t.Run("two inputs in two updates", func(t *testing.T) {
		t.Parallel()
		c, wire := newTaskClient(conf)
		var mu sync.Mutex
		var asked []string
		res, err := c.Call(context.Background(), "multi_input", nil, client.AnswerEach(),
			client.OnElicit(func(_ context.Context, req *client.InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, req.Key)
				mu.Unlock()
				if p.Message == "" || p.RequestedSchema == nil {
					return nil, fmt.Errorf("elicitation without message or schema: %+v", p)
				}
				if req.Key == "project_name" {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "apollo"}}, nil
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); got != `project "apollo" (action accept), launch true (action accept)` {
			t.Errorf("result %q", got)
		}
		if !slices.Equal(asked, []string{"launch", "project_name"}) {
			t.Errorf("asked %v, want each key once", asked)
		}
		updates := wire.of("tasks/update")
		if len(updates) != 2 {
			t.Fatalf("%d tasks/update, want 2", len(updates))
		}
		for i, key := range []string{"launch", "project_name"} {
			var resp map[string]json.RawMessage
			_ = json.Unmarshal(updates[i].params["inputResponses"], &resp)
			if _, ok := resp[key]; !ok || len(resp) != 1 {
				t.Errorf("update %d answers %v, want %s alone", i, slices.Collect(maps.Keys(resp)), key)
			}
		}
	})

	t.Run("two inputs in one update", func(t *testing.T) {
		t.Parallel()
		c, wire := newTaskClient(conf)
		res, err := c.Call(context.Background(), "multi_input", nil,
			client.OnInput(func(_ context.Context, req *client.InputRequest) (any, error) {
				if req.Key == "launch" {
					return map[string]any{"action": "accept", "content": map[string]any{"confirm": false}}, nil
				}
				return map[string]any{"action": "accept", "content": map[string]any{"name": "gemini"}}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); got != `project "gemini" (action accept), launch false (action accept)` {
			t.Errorf("result %q", got)
		}
		if n := len(wire.of("tasks/update")); n != 1 {
			t.Errorf("%d tasks/update, want 1", n)
		}
	})

	t.Run("decline", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(ex)
		var st statuses
		res, err := c.Call(context.Background(), "confirm_delete", map[string]any{"filename": "notes.txt"}, st.opt(),
			client.OnElicit(func(_ context.Context, _ *client.InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				if p.Message != "Delete notes.txt?" {
					return nil, fmt.Errorf("message %q", p.Message)
				}
				return &mcp.ElicitResult{Action: "decline"}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); got != "kept notes.txt" {
			t.Errorf("result %q", got)
		}
		if !slices.Contains(st.list(), "input_required/waiting for confirmation") {
			t.Errorf("statuses %v", st.list())
		}
	})

	t.Run("cancel a sleeping task", func(t *testing.T) {
		t.Parallel()
		c, wire := newTaskClient(ex)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		began := time.Now()
		// Cancel once the task is into its 60s sleep: its first step (the
		// start time) is journaled a moment after it is created.
		_, err := c.Call(ctx, "slow_compute", map[string]any{"seconds": 60}, client.OnStatus(func(tk client.Task) {
			if tk.Status == client.StatusWorking {
				time.AfterFunc(time.Second, cancel)
			}
		}))
		var te *client.TaskError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &te) {
			t.Fatalf("err %v, want a TaskError wrapping context.Canceled", err)
		}
		if te.Task.Status != client.StatusCancelled {
			t.Errorf("final status %s, want cancelled", te.Task.Status)
		}
		if n := len(wire.of("tasks/cancel")); n != 1 {
			t.Errorf("%d tasks/cancel", n)
		}
		if d := time.Since(began); d > 30*time.Second {
			t.Errorf("took %v: the 60s sleep was not cut short", d)
		}
	})

	t.Run("cancel a running step", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(ex)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		began := time.Now()
		var once sync.Once
		_, err := c.Call(ctx, "batch_report", map[string]any{"steps": 2, "stepMillis": 30000}, client.OnStatus(func(tk client.Task) {
			if tk.StatusMessage == "processing part 1 of 2" {
				// The 30s step runs now (its status is set just before it).
				once.Do(func() { time.AfterFunc(500*time.Millisecond, cancel) })
			}
		}))
		var te *client.TaskError
		if !errors.Is(err, context.Canceled) || !errors.As(err, &te) {
			t.Fatalf("err %v, want a TaskError wrapping context.Canceled", err)
		}
		if te.Task.Status != client.StatusCancelled {
			t.Errorf("final status %s, want cancelled", te.Task.Status)
		}
		if d := time.Since(began); d > 20*time.Second {
			t.Errorf("took %v: the running 30s step was not interrupted", d)
		}
		if runs := stepRuns(te.Task.ID, ex.logs()); runs["part-1"] != 1 || runs["part-2"] != 0 {
			t.Errorf("steps run %v, want part-1 (interrupted) alone", runs)
		}
	})

	t.Run("unknown task", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(ex)
		_, err := c.Resume(context.Background(), "no-such-task")
		if !errors.Is(err, client.ErrTaskUnknown) {
			t.Fatalf("err %v, want ErrTaskUnknown", err)
		}
		var rpc *jsonrpc.Error
		if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("err %v, want the -32602 inside", err)
		}
	})

	// (Not on the cluster: expiry is the store's, checked there by the
	// redisstore suite, and this scenario holds one of the few parallel
	// test slots for a minute.)
	if conf.shape != "cluster" {
		t.Run("expired task", func(t *testing.T) {
			t.Parallel()
			c, _ := newTaskClient(conf)
			// The conformance server keeps tasks 5s: a 60s computation expires
			// while the client polls it.
			_, err := c.Call(context.Background(), "slow_compute", map[string]any{"seconds": 60, "label": "expiring"})
			var te *client.TaskError
			if !errors.Is(err, client.ErrTaskUnknown) || !errors.As(err, &te) {
				t.Fatalf("err %v, want ErrTaskUnknown", err)
			}
			if te.Task == nil || te.Task.ID == "" || te.Task.Status != client.StatusWorking || te.Task.TTL != 5*time.Second {
				t.Errorf("last known task %+v", te.Task)
			}
		})
	}

	t.Run("start, detach and resume", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(ex)
		ctx := context.Background()
		task, res, err := c.Start(ctx, "slow_compute", map[string]any{"seconds": 1, "label": "later"})
		if err != nil || res != nil || task == nil || task.Status != client.StatusWorking {
			t.Fatalf("start: %+v %v %v", task, res, err)
		}
		got, err := c.Get(ctx, task.ID)
		if err != nil || got.ID != task.ID {
			t.Fatalf("get: %+v %v", got, err)
		}
		other, _ := newTaskClient(ex)
		res, err = other.Resume(ctx, task.ID)
		if err != nil || !strings.HasPrefix(resultText(t, res), `computed "later"`) {
			t.Fatalf("resume: %v %v", res, err)
		}
	})

	t.Run("list tools", func(t *testing.T) {
		t.Parallel()
		c, _ := newTaskClient(conf)
		tools, err := c.ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		for _, want := range []string{"greet", "multi_input", "failing_job", "test_tool_with_task"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools %v lack %s", names, want)
			}
		}
	})

	t.Run("Mcp-Param headers", func(t *testing.T) {
		t.Parallel()
		c, wire := newTaskClient(conf)
		res, err := c.Call(context.Background(), "test_x_mcp_header", map[string]any{"region": "eu-west-1", "level": 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); got != "region=eu-west-1 level=2" {
			t.Errorf("result %q", got)
		}
		calls := wire.of("tools/call")
		if got := calls[len(calls)-1].header.Get("Mcp-Param-Region"); got != "eu-west-1" {
			t.Errorf("Mcp-Param-Region %q", got)
		}
	})

	t.Run("MRTR round before the task", func(t *testing.T) {
		t.Parallel()
		c, wire := newTaskClient(conf)
		res, err := c.Call(context.Background(), "test_tool_with_task", nil,
			client.OnElicit(func(_ context.Context, req *client.InputRequest, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Alice"}}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(t, res); !strings.Contains(got, "Hello, Alice!") {
			t.Errorf("result %q", got)
		}
		if n := len(wire.of("tools/call")); n != 2 {
			t.Errorf("%d tools/call, want 2 (the MRTR round, then the task)", n)
		}
	})
}

// TestClientWorkerKilled kills the worker process (SIGKILL) in the middle
// of a task's step on the split shape and starts another: the client keeps
// polling through it and gets the result.
func TestClientWorkerKilled(t *testing.T) {
	t.Parallel()
	s := startClientServer(t, "split", "examples")
	c, _ := newTaskClient(s)
	ids := make(chan string, 1)
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var once sync.Once
		res, err := c.Call(context.Background(), "batch_report", map[string]any{"steps": 4, "stepMillis": 700},
			client.OnStatus(func(tk client.Task) { once.Do(func() { ids <- tk.ID }) }))
		done <- outcome{res, err}
	}()
	var id string
	select {
	case id = <-ids:
	case o := <-done:
		t.Fatalf("the call ended before its task was created: %v", o.err)
	}
	w1 := s.workers[0]
	deadline := time.Now().Add(30 * time.Second)
	for stepRuns(id, w1.Log())["part-2"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("part-2 never started:\n%s", w1.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w1.Kill()
	s.addWorker(t)
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("call: %v\n%s", o.err, s.logs())
		}
		if got := resultText(t, o.res); got != "processed 4 parts, checksum 30" {
			t.Errorf("result %q", got)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no result 60s after the kill:\n%s", s.logs())
	}
}

// forwarder is a TCP relay in front of the endpoint, so that a restarted
// server process (on a new port) stays at the client's URL; with no
// backend it drops every connection, as a server that is down does.
type forwarder struct {
	ln      net.Listener
	mu      sync.Mutex
	backend string
}

func startForwarder(t *testing.T) *forwarder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			backend := f.backend
			f.mu.Unlock()
			up, err := net.Dial("tcp", backend)
			if backend == "" || err != nil {
				conn.Close()
				continue
			}
			go func() {
				_, _ = io.Copy(up, conn)
				up.Close()
			}()
			go func() {
				_, _ = io.Copy(conn, up)
				conn.Close()
			}()
		}
	}()
	return f
}

func (f *forwarder) route(addr string) {
	f.mu.Lock()
	f.backend = addr
	f.mu.Unlock()
}

// TestClientAPIRestart kills the endpoint process (SIGKILL) while the
// client polls a task on the split shape, and starts another a second
// later: the client retries through the outage (its log shows the retries)
// and gets the result, which the worker process computed meanwhile.
func TestClientAPIRestart(t *testing.T) {
	t.Parallel()
	s := startClientServer(t, "split", "examples")
	fwd := startForwarder(t)
	fwd.route(s.api.addr)
	var logBuf lockedBuffer
	c := client.New("http://"+fwd.ln.Addr().String()+"/mcp",
		client.WithLogger(slog.New(slog.NewTextHandler(&logBuf, nil))),
		client.WithRetry(client.RetryPolicy{Initial: 100 * time.Millisecond, Max: 400 * time.Millisecond, GiveUpAfter: 30 * time.Second}))
	created := make(chan struct{})
	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var once sync.Once
		res, err := c.Call(context.Background(), "slow_compute", map[string]any{"seconds": 2, "label": "outage"},
			client.OnStatus(func(client.Task) { once.Do(func() { close(created) }) }))
		done <- outcome{res, err}
	}()
	select {
	case <-created:
	case o := <-done:
		t.Fatalf("the call ended before its task was created: %v", o.err)
	}
	fwd.route("")
	s.api.Kill()
	time.Sleep(time.Second)
	api := start(t, s.env, "serve", "--no-worker", "--app", s.app)
	fwd.route(api.addr)
	o := <-done
	if o.err != nil {
		t.Fatalf("call: %v\n%s", o.err, s.logs())
	}
	if got := resultText(t, o.res); !strings.HasPrefix(got, `computed "outage" in 2s`) {
		t.Errorf("result %q", got)
	}
	if !strings.Contains(logBuf.String(), "retrying") {
		t.Errorf("the client never retried:\n%s", logBuf.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
