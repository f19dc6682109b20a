package costmodel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/fakeqstash"
	"github.com/mcptasks/mcptasks/internal/testkit/fakesqs"
	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
	"github.com/mcptasks/mcptasks/pkg/platform/vercel"
	"github.com/mcptasks/mcptasks/pkg/queue/qstash"
	"github.com/mcptasks/mcptasks/pkg/queue/sqsqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// The reference workload: a task of five steps — a Do, a ten-minute
// Sleep, a Do, one input round (Elicit), a Do — whose client either polls
// tasks/get as pollIntervalMs advises, or listens (subscriptions/listen,
// listening again whenever a stream ends at its time limit). The user
// answers the input request thinkTime after the client sees it.
const (
	sleepFor  = 10 * time.Minute
	thinkTime = time.Minute
	// delivery is how long after a message is due the queue delivers it
	// (as BenchmarkPollCost assumes).
	delivery = 100 * time.Millisecond
	// maxDuration is MCPTASKS_MAX_DURATION of the repository's template.yaml
	// and vercel.json (60 s): a listen stream lasts it less the safety
	// margin (10%), 54 s.
	maxDuration = 60 * time.Second
	// resync is how often a listen stream re-reads its tasks in real time
	// (pkg/tasks listenResync), whatever it was told.
	resync = 10 * time.Second
)

type noArgs struct{}

// Confirm is the answer the workload's input round asks for.
type Confirm struct {
	OK bool `json:"ok" jsonschema:"send it?"`
}

func register(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "reference", Description: "the cost model's reference workload"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			data, err := tasks.Do(st, "fetch", func(context.Context) (string, error) { return "fetched", nil })
			if err != nil {
				return nil, err
			}
			if err := st.Sleep("cool-off", sleepFor); err != nil {
				return nil, err
			}
			n, err := tasks.Do(st, "process", func(context.Context) (int, error) { return len(data), nil })
			if err != nil {
				return nil, err
			}
			ok, err := tasks.Elicit[Confirm](st, "confirm", "Send the report?")
			if err != nil {
				return nil, err
			}
			sent, err := tasks.Do(st, "send", func(context.Context) (bool, error) { return ok.Accepted() && ok.Content.OK, nil })
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("processed %d, sent %v", n, sent)}}}, nil
		})
}

var app = &tasks.App{Name: "costmodel", Register: register}

// clock is the simulated clock every part of the deployment reads.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// to moves the clock to t (never back).
func (c *clock) to(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// invocation is one function invocation.
type invocation struct {
	fn     string // "mcp" or "worker"
	method string // the MCP method, or "step"
	dur    time.Duration
}

// meter records the invocations of one deployment.
type meter struct {
	mu  sync.Mutex
	inv []invocation
}

func (m *meter) add(fn, method string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inv = append(m.inv, invocation{fn, method, d})
}

func (m *meter) take() []invocation {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.inv
	m.inv = nil
	return out
}

// message is a queue message the deployment sent: due is when the queue
// delivers it (on the simulated clock), deliver invokes the worker with it.
type message struct {
	due     time.Time
	deliver func()
}

// deployment is one platform's functions over one bundle.
type deployment struct {
	platform string
	b        *bundle.Bundle
	mcpURL   string
	clock    *clock
	meter    *meter
	// pending returns the messages sent since its last call.
	pending func() []message
}

// start makes a deployment of platform ("aws": the Lambda MCP function
// and the SQS worker handler; "vercel": the Vercel MCP and worker
// functions with QStash) on redisURL.
func start(t *testing.T, platform, redisURL string, c *clock) *deployment {
	t.Helper()
	d := &deployment{platform: platform, clock: c, meter: &meter{}}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	vars := map[string]string{"REDIS_URL": redisURL, "MCPTASKS_MAX_DURATION": maxDuration.String()}
	var opts []bundle.Option
	opts = append(opts, bundle.WithClock(c.Now))
	var mux *http.ServeMux
	var vercelURL string
	switch platform {
	case "aws":
		fs := fakesqs.Start(t)
		qurl := fs.CreateQueue("mcptasks-tasks")
		vars["MCPTASKS_QUEUE"], vars["MCPTASKS_SQS_QUEUE_URL"] = "sqs", qurl
		opts = append(opts, bundle.WithQueue(bundle.QueueSQS, func(context.Context, bundle.Config) (driver.Queue, error) {
			return sqsqueue.New(fs.Client(), qurl, &sqsqueue.Options{Now: c.Now}), nil
		}), bundle.WithRedisClientOptions(bundle.ForOneRequestAtATime))
		seen := 0
		d.pending = func() []message {
			all := fs.Messages()
			var out []message
			for _, m := range all[seen:] {
				rec := events.SQSMessage{MessageId: m.ID, Body: m.Body}
				out = append(out, message{due: c.Now().Add(time.Duration(m.DelaySeconds) * time.Second), deliver: func() {
					began := time.Now()
					resp, err := awslambda.WorkerHandler(d.b)(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
					d.meter.add("worker", "step", time.Since(began))
					if err != nil || len(resp.BatchItemFailures) > 0 {
						t.Errorf("worker invocation: %v, failures %v", err, resp.BatchItemFailures)
					}
				}})
			}
			seen = len(all)
			return out
		}
	case "vercel":
		qs := fakeqstash.Start(t)
		mux = http.NewServeMux()
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		vercelURL = srv.URL
		worker := srv.URL + "/api/worker"
		vars["MCPTASKS_QUEUE"] = "qstash"
		vars["QSTASH_URL"], vars["QSTASH_TOKEN"] = qs.URL, qs.Token
		vars["QSTASH_CURRENT_SIGNING_KEY"], vars["QSTASH_NEXT_SIGNING_KEY"] = qs.CurrentKey, qs.NextKey
		vars["MCPTASKS_QSTASH_WORKER_URL"] = worker
		opts = append(opts, bundle.WithQueue(bundle.QueueQStash, func(_ context.Context, cfg bundle.Config) (driver.Queue, error) {
			return qstash.New(cfg.QStash.Token, cfg.QStash.WorkerURL, &qstash.Options{BaseURL: cfg.QStash.URL, Now: c.Now})
		}))
		seen := 0
		d.pending = func() []message {
			all := qs.Published()
			var out []message
			for _, p := range all[seen:] {
				if p.Duplicate {
					continue
				}
				due := c.Now()
				if nb := p.Header.Get("Upstash-Not-Before"); nb != "" {
					secs, err := strconv.ParseInt(nb, 10, 64)
					if err != nil {
						t.Fatalf("Upstash-Not-Before %q: %v", nb, err)
					}
					due = time.Unix(secs, 0)
				}
				out = append(out, message{due: due, deliver: func() {
					resp, err := http.DefaultClient.Do(qs.Deliver(t, p))
					if err != nil {
						t.Fatalf("QStash delivery: %v", err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("worker function: HTTP %d %s", resp.StatusCode, body)
					}
				}})
			}
			seen = len(all)
			return out
		}
	default:
		t.Fatalf("unknown platform %q", platform)
	}
	cfg, err := bundle.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	b, err := bundle.New(t.Context(), cfg, log, app, opts...)
	if err != nil {
		t.Fatalf("bundle.New: %v", err)
	}
	t.Cleanup(b.Close)
	d.b = b
	// The MCP function: one HTTP request is one invocation, timed on the
	// server side (a stream from its arrival to its end).
	timed := func(fn string, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			began := time.Now()
			h(w, r)
			d.meter.add(fn, r.Header.Get("Mcp-Method"), time.Since(began))
		}
	}
	if platform == "vercel" {
		fns := vercel.FromBundle(b)
		mux.HandleFunc("/mcp", timed("mcp", fns.MCP))
		mux.HandleFunc("/api/worker", func(w http.ResponseWriter, r *http.Request) {
			began := time.Now()
			fns.Worker(w, r)
			d.meter.add("worker", "step", time.Since(began))
		})
		d.mcpURL = vercelURL + "/mcp"
	} else {
		srv := httptest.NewServer(timed("mcp", b.Handler.ServeHTTP))
		t.Cleanup(srv.Close)
		d.mcpURL = srv.URL + "/mcp"
	}
	return d
}

// stats reads a redis-server's counters over a raw RESP2 connection,
// keeping count of the bytes its own INFO requests and replies add to the
// server's byte counters, so that they can be taken out.
type stats struct {
	conn net.Conn
	br   *bufio.Reader
	// overheadIn, overheadOut are the bytes of this reader's own requests
	// and replies so far.
	overheadIn, overheadOut int64
}

// snapshot is one reading of the counters.
type snapshot struct {
	calls      map[string]int64
	usec       map[string]int64
	in, out    int64
	overIn     int64
	overOut    int64
	usedMemory int64
}

func newStats(t *testing.T, redisURL string) *stats {
	t.Helper()
	addr := strings.TrimPrefix(redisURL, "redis://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dialing %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &stats{conn: conn, br: bufio.NewReader(conn)}
}

func (s *stats) read(t *testing.T) snapshot {
	t.Helper()
	// The counters the server reports exclude this INFO's own reply (it is
	// written after the text is made) but include every earlier one.
	snap := snapshot{overIn: s.overheadIn, overOut: s.overheadOut, calls: map[string]int64{}, usec: map[string]int64{}}
	req := "INFO commandstats stats memory\r\n"
	if _, err := io.WriteString(s.conn, req); err != nil {
		t.Fatal(err)
	}
	head, err := s.br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		t.Fatalf("INFO: %q %v", head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	body := make([]byte, n+2)
	if _, err := io.ReadFull(s.br, body); err != nil {
		t.Fatal(err)
	}
	// The server counts this request when it reads it, before it answers.
	snap.overIn += int64(len(req))
	s.overheadIn += int64(len(req))
	s.overheadOut += int64(len(head) + len(body))
	for _, line := range strings.Split(string(body[:n]), "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			name := strings.TrimPrefix(k, "cmdstat_")
			for _, f := range strings.Split(v, ",") {
				fk, fv, _ := strings.Cut(f, "=")
				x, _ := strconv.ParseInt(fv, 10, 64)
				switch fk {
				case "calls":
					snap.calls[name] = x
				case "usec":
					snap.usec[name] = x
				}
			}
		case k == "total_net_input_bytes":
			snap.in, _ = strconv.ParseInt(v, 10, 64)
		case k == "total_net_output_bytes":
			snap.out, _ = strconv.ParseInt(v, 10, 64)
		case k == "used_memory":
			snap.usedMemory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return snap
}

// settle waits until the server has processed nothing but INFO for quiet
// (at most 10 s) and returns the reading then.
func (s *stats) settle(t *testing.T, quiet time.Duration) snapshot {
	t.Helper()
	last, since := s.read(t), time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(quiet / 5)
		now := s.read(t)
		if commands(last, now, nil) > 0 {
			last, since = now, time.Now()
		}
		if time.Since(since) >= quiet || time.Now().After(deadline) {
			return now
		}
	}
}

// commands is how many commands (but INFO) the server ran between two
// readings, by name into by when by is not nil.
func commands(a, b snapshot, by map[string]int64) int64 {
	var n int64
	for name, c := range b.calls {
		if name == "info" {
			continue
		}
		if d := c - a.calls[name]; d > 0 {
			n += d
			if by != nil {
				by[name] += d
			}
		}
	}
	return n
}

// usage is what one task cost.
type usage struct {
	inv      []invocation
	messages int
	// commands by name (INFO commandstats: a script's inner commands
	// count), top-level the commands clients sent (scripts once).
	byCommand map[string]int64
	commands  int64
	in, out   int64 // bytes into and out of redis-server
	usec      int64 // redis-server's time in commands (commandstats usec)
	// streams are the listen streams the client opened, streamSec the
	// simulated seconds they were open in all.
	streams   int
	streamSec float64
	// resyncs is how many periodic re-reads the streams would have made in
	// real time (one per full 10 s of each stream).
	resyncs int
	// life is the task's life on the simulated clock, from tools/call to
	// the client seeing it completed.
	life time.Duration
}

// monitor counts the commands clients send to a redis-server (MONITOR:
// a script's inner commands are shown with the source "lua" and left
// out), by name, but the INFO and MONITOR of the measurement itself.
type monitor struct {
	conn net.Conn
	mu   sync.Mutex
	by   map[string]int64
	done chan struct{}
}

func startMonitor(t *testing.T, redisURL string) *monitor {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(redisURL, "redis://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "MONITOR\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	m := &monitor{conn: conn, by: map[string]int64{}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			// +1700000000.123456 [0 127.0.0.1:5555] "evalsha" "..." ...
			_, rest, ok := strings.Cut(line, "[")
			if !ok {
				continue
			}
			src, rest, _ := strings.Cut(rest, "]")
			if strings.HasSuffix(src, " lua") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
			name = strings.ToLower(strings.Trim(name, `"`))
			if name == "info" || name == "monitor" {
				continue
			}
			m.mu.Lock()
			m.by[name]++
			m.mu.Unlock()
		}
	}()
	return m
}

// stop ends the monitor and returns its counts.
func (m *monitor) stop() map[string]int64 {
	m.conn.Close()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.by
}

// runTask runs one task of the reference workload on d for a client in
// mode "poll" or "listen" and returns what it cost.
func runTask(t *testing.T, d *deployment, st *stats, mode string) usage {
	t.Helper()
	c := mcptest.NewClient(strings.TrimPrefix(strings.TrimSuffix(d.mcpURL, "/mcp"), "http://"), true)
	before := st.settle(t, 100*time.Millisecond)
	d.meter.take()
	start := d.clock.Now()
	var u usage
	var queued []message
	collect := func() {
		for _, m := range d.pending() {
			u.messages++
			m.due = m.due.Add(delivery)
			queued = append(queued, m)
		}
	}
	var created mcptest.Task
	c.Call(t, "tools/call", map[string]any{"name": "reference", "arguments": map[string]any{}}).Decode(t, &created)
	if created.ResultType != "task" {
		t.Fatalf("tools/call: %+v, want a task", created)
	}
	id := created.TaskID
	collect()

	var ls *listener
	var answerAt time.Time // when the user answers (zero: not asked yet)
	answered := false
	nextPoll := start.Add(time.Duration(created.PollIntervalMs) * time.Millisecond)
	streamEnd := time.Time{}
	if mode == "listen" {
		ls = listen(t, c, id)
		ls.opened = start
		u.streams++
		streamEnd = start.Add(maxDuration - max(maxDuration/10, time.Second))
		ls.waitFor(t, "working")
	}
	// quiesce waits until what a transition set off (a stream's re-read)
	// is done, so that each step's commands are counted in this task.
	quiesce := func() {
		if mode == "listen" {
			st.settle(t, 50*time.Millisecond)
			ls.settle(30 * time.Millisecond)
		}
	}
	done := false
	for !done {
		// The next event: a queued delivery, the user's answer, or the
		// client's next tasks/get (poll) or the stream's end (listen).
		slices.SortStableFunc(queued, func(a, b message) int { return a.due.Compare(b.due) })
		next, kind := time.Time{}, ""
		consider := func(at time.Time, k string) {
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next, kind = at, k
			}
		}
		if len(queued) > 0 {
			consider(queued[0].due, "deliver")
		}
		if !answered {
			consider(answerAt, "answer")
		}
		if mode == "poll" && (answerAt.IsZero() || answered) {
			consider(nextPoll, "poll")
		}
		if mode == "listen" {
			consider(streamEnd, "relisten")
		}
		if next.IsZero() {
			t.Fatalf("task %s: nothing left to happen (mode %s)", id, mode)
		}
		d.clock.to(next)
		switch kind {
		case "deliver":
			m := queued[0]
			queued = queued[1:]
			m.deliver()
			collect()
			quiesce()
		case "answer":
			var tk mcptest.Task
			c.Call(t, "tasks/update", map[string]any{"taskId": id,
				"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}}).Decode(t, &tk)
			answered = true
			collect()
			quiesce()
			if mode == "poll" {
				nextPoll = d.clock.Now().Add(time.Duration(tk.PollIntervalMs) * time.Millisecond)
				if tk.PollIntervalMs == 0 {
					nextPoll = d.clock.Now().Add(time.Second)
				}
			}
		case "poll":
			tk := c.Get(t, id)
			switch {
			case tk.Status == "completed":
				done = true
			case mcptest.Terminal(tk):
				t.Fatalf("task %s ended %s: %s", id, tk.Status, tk.Error)
			case tk.Status == "input_required" && answerAt.IsZero():
				answerAt = d.clock.Now().Add(thinkTime)
			}
			nextPoll = d.clock.Now().Add(time.Duration(tk.PollIntervalMs) * time.Millisecond)
		case "relisten":
			u.streamSec += streamEnd.Sub(ls.opened).Seconds()
			u.resyncs += int(streamEnd.Sub(ls.opened) / resync)
			ls.close()
			ls = listen(t, c, id)
			ls.opened = d.clock.Now()
			u.streams++
			streamEnd = d.clock.Now().Add(maxDuration - max(maxDuration/10, time.Second))
			ls.waitFor(t, "")
		}
		if mode == "listen" && kind != "relisten" {
			// What the stream has seen so far.
			for _, s := range ls.statuses() {
				if s == "input_required" && answerAt.IsZero() {
					answerAt = d.clock.Now().Add(thinkTime)
				}
				if s == "completed" {
					done = true
				}
			}
		}
	}
	if ls != nil {
		u.streamSec += d.clock.Now().Sub(ls.opened).Seconds()
		u.resyncs += int(d.clock.Now().Sub(ls.opened) / resync)
		ls.waitEnd(t)
	}
	u.life = d.clock.Now().Sub(start)
	after := st.settle(t, 100*time.Millisecond)
	u.inv = d.meter.take()
	u.byCommand = map[string]int64{}
	u.commands = commands(before, after, u.byCommand)
	// The byte counters include this reader's own INFO traffic between the
	// two readings: take it out.
	u.in = after.in - before.in - (after.overIn - before.overIn)
	u.out = after.out - before.out - (after.overOut - before.overOut)
	for name, x := range after.usec {
		if name != "info" {
			u.usec += x - before.usec[name]
		}
	}
	if len(queued) > 0 {
		t.Errorf("task %s: %d messages still queued after it completed", id, len(queued))
	}
	return u
}

// listener is one subscriptions/listen stream of a client.
type listener struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   []string // "ack", then each notification's status
	ended  chan struct{}
	opened time.Time
}

func listen(t *testing.T, c *mcptest.Client, id string) *listener {
	t.Helper()
	body, hdr := c.Envelope("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", c.URL, bytes.NewReader(body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("subscriptions/listen: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("subscriptions/listen: HTTP %d %s", resp.StatusCode, b)
	}
	l := &listener{cancel: cancel, ended: make(chan struct{})}
	go func() {
		defer close(l.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
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
			l.mu.Lock()
			switch m.Method {
			case "notifications/subscriptions/acknowledged":
				l.seen = append(l.seen, "ack")
			case "notifications/tasks":
				l.seen = append(l.seen, m.Params.Status)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *listener) statuses() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// waitFor waits until the stream carried a notification of status (any
// notification when status is empty).
func (l *listener) waitFor(t *testing.T, status string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range l.statuses() {
			if s != "ack" && (status == "" || s == status) {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("listen stream: no %q notification within 10s (saw %v)", status, l.statuses())
}

// settle waits until the stream has carried nothing new for quiet.
func (l *listener) settle(quiet time.Duration) {
	n, since := len(l.statuses()), time.Now()
	for time.Since(since) < quiet {
		time.Sleep(quiet / 5)
		if m := len(l.statuses()); m != n {
			n, since = m, time.Now()
		}
	}
}

func (l *listener) close() {
	l.cancel()
	<-l.ended
}

// waitEnd waits for the stream to end by itself (its tasks are terminal).
func (l *listener) waitEnd(t *testing.T) {
	t.Helper()
	select {
	case <-l.ended:
	case <-time.After(10 * time.Second):
		t.Errorf("listen stream did not end within 10s of its task's completion")
		l.cancel()
	}
}

// summary is the mean of several tasks' usage.
type summary struct {
	platform, mode                   string
	tasks                            int
	mcp, worker                      float64 // invocations per task
	byMethod                         map[string]float64
	mcpMs, workerMs                  float64 // mean duration per invocation (streams excluded)
	mcpP99Ms, workerP99Ms            float64
	messages                         float64
	commands, topLevel               float64
	byCommand, sentByCommand         map[string]float64
	in, out                          float64
	usecPerTask                      float64
	streams, streamSec               float64
	lifeSec                          float64
	resyncReads                      float64
	resyncCommands, resyncTopLevel   float64
	resyncInBytes, resyncOutBytes    float64
	pollGetCommands, pollGetTopLevel float64
	pollGetInBytes, pollGetOutBytes  float64
	sweepMs, sweepCommands           float64
}

func summarize(platform, mode string, us []usage) summary {
	s := summary{platform: platform, mode: mode, tasks: len(us), byMethod: map[string]float64{}, byCommand: map[string]float64{}}
	n := float64(len(us))
	var mcpD, workerD []time.Duration
	for _, u := range us {
		for _, iv := range u.inv {
			if iv.fn == "worker" {
				s.worker++
				workerD = append(workerD, iv.dur)
				continue
			}
			s.mcp++
			s.byMethod[iv.method]++
			if iv.method != "subscriptions/listen" {
				mcpD = append(mcpD, iv.dur)
			}
		}
		s.messages += float64(u.messages)
		s.commands += float64(u.commands)
		for k, v := range u.byCommand {
			s.byCommand[k] += float64(v)
		}
		s.in += float64(u.in)
		s.out += float64(u.out)
		s.usecPerTask += float64(u.usec)
		s.streams += float64(u.streams)
		s.resyncReads += float64(u.resyncs)
		s.streamSec += u.streamSec
		s.lifeSec += u.life.Seconds()
	}
	s.mcp /= n
	s.worker /= n
	for k := range s.byMethod {
		s.byMethod[k] /= n
	}
	for k := range s.byCommand {
		s.byCommand[k] /= n
	}
	s.messages /= n
	s.commands /= n
	s.in /= n
	s.out /= n
	s.usecPerTask /= n
	s.streams /= n
	s.resyncReads /= n
	s.streamSec /= n
	s.lifeSec /= n
	s.mcpMs, s.mcpP99Ms = meanP99(mcpD)
	s.workerMs, s.workerP99Ms = meanP99(workerD)
	return s
}

func meanP99(ds []time.Duration) (float64, float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / 1000 / float64(len(ds)), float64(ds[len(ds)*99/100].Microseconds()) / 1000
}

// getCost measures what one tasks/get of a parked task costs Redis (the
// same read a listen stream's periodic re-read makes): commands, the
// commands clients send, and bytes.
func getCost(t *testing.T, d *deployment, st *stats, redisURL, id string, n int) (cmds, top, in, out float64) {
	t.Helper()
	c := mcptest.NewClient(strings.TrimPrefix(strings.TrimSuffix(d.mcpURL, "/mcp"), "http://"), true)
	before := st.settle(t, 50*time.Millisecond)
	for range n {
		c.Get(t, id)
	}
	after := st.settle(t, 50*time.Millisecond)
	total := commands(before, after, nil)
	mon := startMonitor(t, redisURL)
	for range n {
		c.Get(t, id)
	}
	st.settle(t, 50*time.Millisecond)
	var tl int64
	for _, x := range mon.stop() {
		tl += x
	}
	d.meter.take()
	return float64(total) / float64(n), float64(tl) / float64(n),
		float64(after.in-before.in-(after.overIn-before.overIn)) / float64(n),
		float64(after.out-before.out-(after.overOut-before.overOut)) / float64(n)
}

// TestCostModel runs the reference workload (see register) on both
// platforms for both kinds of client and prints what a task costs:
// invocations, queue messages, Redis commands and bytes, durations. It
// also checks the counts that do not depend on timing, so that a change
// that costs a task another invocation or message fails here.
// MCPTASKS_COST_TASKS sets the tasks per row (default 1, which is enough
// for the counts; BENCHMARKS.md used 10).
func TestCostModel(t *testing.T) {
	if testing.Short() {
		t.Skip("the cost model runs four deployments (-short)")
	}
	n := 1
	if v := os.Getenv("MCPTASKS_COST_TASKS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("MCPTASKS_COST_TASKS=%q: want a positive number", v)
		}
	}
	var rows []summary
	for _, platform := range []string{"aws", "vercel"} {
		for _, mode := range []string{"poll", "listen"} {
			srv := testredis.StartServer(t)
			st := newStats(t, srv.URL)
			c := &clock{t: time.Now().Truncate(time.Second)}
			d := start(t, platform, srv.URL, c)
			// Warm up: the scripts load, connections open.
			runTask(t, d, st, mode)
			var us []usage
			for range n {
				us = append(us, runTask(t, d, st, mode))
			}
			s := summarize(platform, mode, us)
			// The commands clients sent (scripts once), by MONITOR in one
			// more task: MONITOR's own output would count in the bytes.
			mon := startMonitor(t, srv.URL)
			runTask(t, d, st, mode)
			s.sentByCommand = map[string]float64{}
			for name, x := range mon.stop() {
				s.sentByCommand[name] = float64(x)
				s.topLevel += float64(x)
			}
			// The stream's periodic re-reads happen in real time, which the
			// simulated run does not pass: each costs what a tasks/get of a
			// parked task costs Redis, counted here on a parked task.
			parked := parkedTask(t, d)
			s.pollGetCommands, s.pollGetTopLevel, s.pollGetInBytes, s.pollGetOutBytes = getCost(t, d, st, srv.URL, parked, 50)
			if mode == "listen" {
				s.resyncCommands = s.resyncReads * s.pollGetCommands
				s.resyncTopLevel = s.resyncReads * s.pollGetTopLevel
				s.resyncInBytes = s.resyncReads * s.pollGetInBytes
				s.resyncOutBytes = s.resyncReads * s.pollGetOutBytes
			}
			// One sweep with nothing due (the scheduled sweeper's fixed cost).
			b0 := st.settle(t, 50*time.Millisecond)
			began := time.Now()
			if _, err := d.b.Sweep(t.Context()); err != nil {
				t.Fatal(err)
			}
			s.sweepMs = float64(time.Since(began).Microseconds()) / 1000
			s.sweepCommands = float64(commands(b0, st.settle(t, 50*time.Millisecond), nil))
			rows = append(rows, s)
			checkCounts(t, s)
		}
	}
	printRows(t, rows)
}

// parkedTask creates a task and runs it to its ten-minute sleep.
func parkedTask(t *testing.T, d *deployment) string {
	t.Helper()
	c := mcptest.NewClient(strings.TrimPrefix(strings.TrimSuffix(d.mcpURL, "/mcp"), "http://"), true)
	var created mcptest.Task
	c.Call(t, "tools/call", map[string]any{"name": "reference", "arguments": map[string]any{}}).Decode(t, &created)
	for _, m := range d.pending() {
		if m.due.After(d.clock.Now()) {
			continue
		}
		m.deliver()
	}
	for _, m := range d.pending() {
		if !m.due.After(d.clock.Now()) {
			m.deliver()
		}
	}
	d.meter.take()
	return created.TaskID
}

// checkCounts holds the counts that do not depend on timing.
func checkCounts(t *testing.T, s summary) {
	t.Helper()
	// Worker invocations: fetch and the sleep's park; the wake, process
	// and the park for input; the resume, send and the completion. (A
	// parking call ends the invocation of the step before it.)
	if s.worker != 3 {
		t.Errorf("%s/%s: %.2f worker invocations per task, want 3", s.platform, s.mode, s.worker)
	}
	if s.messages != s.worker {
		t.Errorf("%s/%s: %.2f queue messages per task for %.2f worker invocations", s.platform, s.mode, s.messages, s.worker)
	}
	if got := s.byMethod["tools/call"]; got != 1 {
		t.Errorf("%s/%s: %.2f tools/call per task, want 1", s.platform, s.mode, got)
	}
	if got := s.byMethod["tasks/update"]; got != 1 {
		t.Errorf("%s/%s: %.2f tasks/update per task, want 1", s.platform, s.mode, got)
	}
	if s.mode == "listen" && s.byMethod["tasks/get"] != 0 {
		t.Errorf("%s/listen: %.2f tasks/get per task, want none", s.platform, s.byMethod["tasks/get"])
	}
}

func printRows(t *testing.T, rows []summary) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nReference workload: Do, Sleep %v, Do, Elicit (answered %v after the client sees it), Do; delivery %v after due; MCPTASKS_MAX_DURATION %v\n\n",
		sleepFor, thinkTime, delivery, maxDuration)
	fmt.Fprintln(&b, "| platform | client | tasks | MCP invocations / task (by method) | worker invocations / task | queue messages / task | MCP ms mean / p99 (streams excluded) | worker ms mean / p99 | listen streams / task, open s | Redis commands / task (sent by clients) | Redis bytes in / out per task | redis-server µs / task | task life (s, simulated) |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rows {
		var methods []string
		for _, k := range slices.Sorted(maps.Keys(s.byMethod)) {
			methods = append(methods, fmt.Sprintf("%s %.2f", k, s.byMethod[k]))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f (%s) | %.2f | %.2f | %.2f / %.2f | %.2f / %.2f | %.2f, %.0f | %.1f (%.1f) | %.0f / %.0f | %.0f | %.1f |\n",
			s.platform, s.mode, s.tasks, s.mcp, strings.Join(methods, ", "), s.worker, s.messages, s.mcpMs, s.mcpP99Ms, s.workerMs, s.workerP99Ms,
			s.streams, s.streamSec, s.commands, s.topLevel, s.in, s.out, s.usecPerTask, s.lifeSec)
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Listen streams re-read their tasks every 10 s of real time, which the simulated run does not pass; per task, added to the counts above:")
	for _, s := range rows {
		if s.mode != "listen" {
			continue
		}
		fmt.Fprintf(&b, "- %s: %.1f re-reads (one per full 10 s of each stream; %.0f s of streams), each as a tasks/get of a parked task: %.1f commands (%.1f sent), %.0f / %.0f bytes → %.1f commands (%.1f sent), %.0f / %.0f bytes\n",
			s.platform, s.resyncReads, s.streamSec, s.pollGetCommands, s.pollGetTopLevel, s.pollGetInBytes, s.pollGetOutBytes,
			s.resyncCommands, s.resyncTopLevel, s.resyncInBytes, s.resyncOutBytes)
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Redis commands per task by name (INFO commandstats):")
	for _, s := range rows {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(s.byCommand)) {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, s.byCommand[k]))
		}
		fmt.Fprintf(&b, "- %s/%s: %s\n", s.platform, s.mode, strings.Join(parts, ", "))
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "Commands clients sent per task (MONITOR, one task; a script once):")
	for _, s := range rows {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(s.sentByCommand)) {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, s.sentByCommand[k]))
		}
		fmt.Fprintf(&b, "- %s/%s: %s\n", s.platform, s.mode, strings.Join(parts, ", "))
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "A sweep with nothing due (the scheduled sweeper's fixed cost, not per task):")
	for _, s := range rows {
		fmt.Fprintf(&b, "- %s/%s: %.0f Redis commands, %.2f ms\n", s.platform, s.mode, s.sweepCommands, s.sweepMs)
	}
	dollars(&b, rows)
	t.Log(b.String())
}

// Public prices (US East; see BENCHMARKS.md for the sources and their
// dates). They turn the measured counts into dollars per 1,000 tasks.
const (
	lambdaPerRequest  = 0.20 / 1e6    // AWS Lambda, per request
	lambdaPerGBs      = 0.0000133334  // AWS Lambda arm64, per GB-second (first 7.5 billion GB-s a month)
	lambdaMemoryGB    = 0.5           // template.yaml MemorySize 512
	sqsPerRequest     = 0.40 / 1e6    // Amazon SQS standard queue, per request (64 KB chunk)
	sqsPerMessage     = 3             // SendMessage, then the event source's ReceiveMessage and DeleteMessage, unbatched
	ecacheValkeyECPU  = 0.0023 / 1e6  // ElastiCache Serverless for Valkey, per ECPU
	vercelPerInvoke   = 0.60 / 1e6    // Vercel Functions (Fluid), per invocation beyond the plan's
	vercelCPUPerHour  = 0.128         // Active CPU, iad1
	vercelGBHour      = 0.0106        // Provisioned memory, iad1
	vercelMemoryGB    = 2             // the default function size (Standard: 1 vCPU, 2 GB)
	qstashPerMessage  = 1.0 / 100_000 // QStash pay as you go
	upstashPerCommand = 0.20 / 100_000
)

// dollars prints what 1,000 tasks cost on each platform from the
// measured counts and durations, beside one long invocation that sleeps.
func dollars(b *strings.Builder, rows []summary) {
	fmt.Fprintf(b, "\n$ per 1,000 tasks (durations as measured on this machine, each rounded up to 1 ms on Lambda; listen streams billed for their whole time open):\n\n")
	fmt.Fprintln(b, "| platform | client | invocations | compute | queue | Redis | total | one invocation sleeping through the task instead |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|---|---|")
	for _, s := range rows {
		nonStream := s.mcp - s.byMethod["subscriptions/listen"]
		invocations := s.mcp + s.worker
		var inv, compute, q, redis, long float64
		switch s.platform {
		case "aws":
			inv = invocations * lambdaPerRequest
			billedMs := nonStream*ceilMs(s.mcpMs) + s.worker*ceilMs(s.workerMs) + s.streamSec*1000
			compute = billedMs / 1000 * lambdaMemoryGB * lambdaPerGBs
			q = s.messages * sqsPerMessage * sqsPerRequest
			// ECPUs: one per command (a script's inner commands included)
			// plus one per KB transferred, a generous reading of the
			// unpublished formula.
			ecpu := s.commands + s.resyncCommands + (s.in+s.out+s.resyncInBytes+s.resyncOutBytes)/1024
			redis = ecpu * ecacheValkeyECPU
			long = lambdaPerRequest + s.lifeSec*lambdaMemoryGB*lambdaPerGBs
		case "vercel":
			inv = invocations * vercelPerInvoke
			// Active CPU at most the wall time of each short invocation;
			// a stream is active for its set-up and each re-read.
			cpuMs := nonStream*s.mcpMs + s.worker*s.workerMs + (s.streams+s.resyncReads)*s.mcpMs
			memMs := nonStream*s.mcpMs + s.worker*s.workerMs + s.streamSec*1000
			compute = cpuMs/3.6e6*vercelCPUPerHour + memMs/3.6e6*vercelMemoryGB*vercelGBHour
			q = s.messages * qstashPerMessage
			redis = (s.topLevel + s.resyncTopLevel) * upstashPerCommand
			long = vercelPerInvoke + s.lifeSec/3600*vercelMemoryGB*vercelGBHour
		}
		total := inv + compute + q + redis
		fmt.Fprintf(b, "| %s | %s | $%.4f | $%.4f | $%.4f | $%.4f | **$%.4f** | $%.2f (%.0f s) |\n", s.platform, s.mode,
			1000*inv, 1000*compute, 1000*q, 1000*redis, 1000*total, 1000*long, s.lifeSec)
	}
}

func ceilMs(ms float64) float64 { return float64(int64(ms + 0.999999)) }
