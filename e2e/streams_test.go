package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// streamEnd is how a long-lived request (a task stream or a held
// 2025-11-25 tasks/result) went: its HTTP status and Retry-After, the data
// of its first event (or its JSON body), its last SSE fields, and when it
// ended.
type streamEnd struct {
	status     int
	retryAfter string
	first      string
	last       string
	err        error
	ended      time.Time
}

// longRequest sends body with hdr and reads the answer to its end; acked
// (when not nil) is closed once the answer's first event (or body) is in.
func longRequest(ctx context.Context, hc *http.Client, url string, hdr http.Header, body []byte, acked chan<- struct{}) streamEnd {
	var e streamEnd
	once := sync.Once{}
	ack := func() {
		if acked != nil {
			once.Do(func() { close(acked) })
		}
	}
	defer ack()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header = hdr
	resp, err := hc.Do(req)
	if err != nil {
		e.err, e.ended = err, time.Now()
		return e
	}
	defer resp.Body.Close()
	e.status, e.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		e.first, e.ended = string(raw), time.Now()
		return e
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if e.first != "" {
				ack()
			}
			continue
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" && e.first == "" {
			e.first = d
		}
		e.last = line
	}
	e.err, e.ended = sc.Err(), time.Now()
	return e
}

// listenRequest is a subscriptions/listen of c for the task ids.
func listenRequest(c *mcptest.Client, ids ...string) ([]byte, http.Header) {
	return c.Envelope("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}})
}

// resultRequest is a 2025-11-25 tasks/result for the task id, with c's
// headers (its authorization).
func resultRequest(c *mcptest.Client, id string) ([]byte, http.Header) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/result", "params": map[string]any{"taskId": id}})
	hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Mcp-Protocol-Version": {"2025-11-25"}}
	for k, v := range c.Header {
		hdr[k] = v
	}
	return body, hdr
}

// manyConns is an HTTP client for hundreds of concurrent streams.
func manyConns() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
}

// TestStreamsCannotStarveOthers: one principal opening 300 task streams at
// once gets MCPTASKS_MAX_STREAMS_PER_PRINCIPAL (32) of them and -32028 with
// a retry hint for the rest, while another principal's 70 concurrent
// tasks/get and tools/call are all served (`serve --no-worker` on a real
// redis-server, HS256 auth, MCPTASKS_MAX_REQUESTS=128).
func TestStreamsCannotStarveOthers(t *testing.T) {
	t.Parallel()
	env := append(redisEnv(t, "redis-server"),
		// Half the default, so that without a pool of their own alice's
		// streams would take every slot at this machine's scale too.
		"MCPTASKS_MAX_REQUESTS=128",
		"MCPTASKS_MAX_DURATION=10s",
		"MCPTASKS_AUTH_ISSUER=https://issuer.mcptasks.test",
		"MCPTASKS_AUTH_AUDIENCE=https://mcp.mcptasks.test/mcp",
		"MCPTASKS_AUTH_HS256_SECRET=0123456789abcdef0123456789abcdef-e2e",
	)
	api := start(t, env, "serve", "--no-worker")
	alice, bob := newClient(api.addr, true), newClient(api.addr, true)
	alice.Header = http.Header{"Authorization": {"Bearer " + mint(t, env, "alice")}}
	bob.Header = http.Header{"Authorization": {"Bearer " + mint(t, env, "bob")}}
	var hers task
	var his struct {
		task
		header http.Header
	}
	alice.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 600}}).Decode(t, &hers)
	bob.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 600}}).Decode(t, &his.task)
	his.header = bob.Header

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := manyConns()
	const flood = 300
	ends := make([]streamEnd, flood)
	var wg sync.WaitGroup
	acks := make([]chan struct{}, flood)
	for i := range flood {
		acks[i] = make(chan struct{})
		body, hdr := listenRequest(alice, hers.TaskID) // a client makes one request at a time
		wg.Go(func() { ends[i] = longRequest(ctx, hc, alice.URL, hdr, body, acks[i]) })
	}
	for _, a := range acks { // every listen acknowledged or refused
		<-a
	}
	// With alice's streams open: every request of bob's is served.
	var served sync.WaitGroup
	failures := make(chan string, 100)
	for i := range 70 {
		bob := newClient(api.addr, true) // one client each: a client makes one request at a time
		bob.Header = his.header
		served.Go(func() {
			var r *mcptest.Response
			if i < 50 {
				r = bob.Call(t, "tasks/get", map[string]any{"taskId": his.TaskID})
			} else {
				r = bob.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 600}})
			}
			if r.HTTP != http.StatusOK || r.Error != nil {
				failures <- fmt.Sprintf("HTTP %d %+v", r.HTTP, r.Error)
			}
		})
	}
	served.Wait()
	close(failures)
	var failed []string
	for f := range failures {
		failed = append(failed, f)
	}
	cancel() // alice's streams end
	wg.Wait()
	open, refused := 0, 0
	for _, e := range ends {
		var m struct {
			Method string `json:"method"`
			Error  *struct {
				Code int64 `json:"code"`
				Data struct {
					RetryAfterMs int64 `json:"retryAfterMs"`
				} `json:"data"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(e.first), &m)
		switch {
		case e.status == http.StatusOK && m.Method == "notifications/subscriptions/acknowledged":
			open++
		case e.status == http.StatusTooManyRequests && m.Error != nil && m.Error.Code == -32028 && m.Error.Data.RetryAfterMs > 0 && e.retryAfter != "":
			refused++
		default:
			t.Errorf("a listen of alice's: HTTP %d Retry-After %q %s (%v)", e.status, e.retryAfter, e.first, e.err)
		}
	}
	t.Logf("alice's %d listens: %d open, %d refused; bob's 50 tasks/get and 20 tools/call meanwhile: %d not served", flood, open, refused, len(failed))
	if len(failed) > 0 {
		t.Errorf("bob's requests while alice holds %d streams: %d of 70 not served, e.g. %s", open, len(failed), failed[0])
	}
	if open != 32 || refused != flood-32 {
		t.Errorf("alice's listens: %d open and %d refused, want 32 and %d", open, refused, flood-32)
	}
}

// heapprobe is the e2e/heapprobe binary, built once.
var heapprobe = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(binPath), "heapprobe")
	out, err := exec.Command("go", "build", "-race", "-o", bin, "./heapprobe").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building e2e/heapprobe: %v\n%s", err, out)
	}
	return bin, nil
})

// probe reads the live heap and the goroutines of a heapprobe process.
func probe(t *testing.T, addr string) (heap, goroutines uint64) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ HeapBytes, Goroutines uint64 }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.HeapBytes, m.Goroutines
}

// TestEndedStreamsFreeTheirResources: 300 task streams open at once in one
// `serve --no-worker` process on a real redis-server cost it one Redis
// connection, not one each, and 60 s after they ended the process holds
// at most 3 Redis connections more than before them (the subscriber's was
// given back, and closed as idle) and a live heap within 20 MB of its
// baseline.
func TestEndedStreamsFreeTheirResources(t *testing.T) {
	if testing.Short() {
		t.Skip("watches a process for 60s after its streams end")
	}
	t.Parallel()
	bin, err := heapprobe()
	if err != nil {
		t.Fatal(err)
	}
	rs := testredis.StartServer(t)
	admin := testredis.Connect(t, rs.URL)
	probeAddr := freeAddr(t)
	env := []string{"REDIS_URL=" + rs.URL, "MCPTASKS_MAX_DURATION=4s", "MCPTASKS_MAX_STREAMS_PER_PRINCIPAL=1000", "HEAPPROBE_ADDR=" + probeAddr}
	api := startBinary(t, bin, env, "serve", "--no-worker")
	c := newClient(api.addr, true)
	var tk task
	c.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 600}}).Decode(t, &tk)
	// The process's Redis connections as a busy server has them: concurrent
	// reads dial every pipelined connection.
	var warm sync.WaitGroup
	for range 32 {
		c := newClient(api.addr, true)
		warm.Go(func() { c.Call(t, "tasks/get", map[string]any{"taskId": tk.TaskID}) })
	}
	warm.Wait()
	// INFO clients counts the admin's own connection too; so does each
	// reading, alike.
	connsBefore := testredis.ConnectedClients(t, admin)
	heapBefore, gBefore := probe(t, probeAddr)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hc := manyConns()
	const n = 300
	ends := make([]streamEnd, n)
	acks := make([]chan struct{}, n)
	var wg sync.WaitGroup
	for i := range n {
		acks[i] = make(chan struct{})
		body, hdr := listenRequest(c, tk.TaskID)
		wg.Go(func() { ends[i] = longRequest(ctx, hc, c.URL, hdr, body, acks[i]) })
	}
	for _, a := range acks {
		<-a
	}
	connsDuring := testredis.ConnectedClients(t, admin)
	heapDuring, gDuring := probe(t, probeAddr)
	wg.Wait() // every stream ends by itself, within MCPTASKS_MAX_DURATION
	bad := 0
	for _, e := range ends {
		if e.status != http.StatusOK || !strings.Contains(e.last, `"resultType":"complete"`) {
			if bad++; bad == 1 {
				t.Errorf("a stream: HTTP %d, %s, ended with %q (%v)", e.status, e.first, e.last, e.err)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d streams did not end with their result", bad, n)
	}
	hc.CloseIdleConnections()
	time.Sleep(60 * time.Second)
	connsAfter := testredis.ConnectedClients(t, admin)
	heapAfter, gAfter := probe(t, probeAddr)
	const mb = 1 << 20
	t.Logf("Redis connections of the server: %d before, %d with %d streams open, %d 60 s after they ended; live heap %.1f MB, %.1f MB, %.1f MB; goroutines %d, %d, %d",
		connsBefore-1, connsDuring-1, n, connsAfter-1, float64(heapBefore)/mb, float64(heapDuring)/mb, float64(heapAfter)/mb, gBefore, gDuring, gAfter)
	if connsDuring > connsBefore+3 {
		t.Errorf("%d streams open hold %d Redis connections more than before, want at most 3", n, connsDuring-connsBefore)
	}
	if connsAfter > connsBefore+3 {
		t.Errorf("60 s after %d streams ended the process holds %d Redis connections more than before, want at most 3", n, connsAfter-connsBefore)
	}
	if heapAfter > heapBefore+20*mb {
		t.Errorf("60 s after %d streams ended the live heap is %.1f MB, %.1f MB above its baseline, want at most 20", n, float64(heapAfter)/mb, float64(heapAfter-heapBefore)/mb)
	}
}

// TestStreamsEndWithinBudget: with Redis paused (SIGSTOP) while task streams
// and held 2025-11-25 tasks/result are set up, and again while a store read
// is in flight at their budget's end, none outlives MCPTASKS_MAX_DURATION
// (3s) counted from when it was sent by more than 250 ms, and each closes
// cleanly with its resume point: a listen with its result, a tasks/result
// with its retry field (the client resumes it with Last-Event-ID).
func TestStreamsEndWithinBudget(t *testing.T) {
	t.Parallel()
	rs := testredis.StartServer(t)
	const maxDuration = 3 * time.Second
	env := []string{"REDIS_URL=" + rs.URL, "MCPTASKS_MAX_DURATION=" + maxDuration.String()}
	api := start(t, env, "serve", "--no-worker")
	c := newClient(api.addr, true)
	var tk task
	c.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 600}}).Decode(t, &tk)
	paused := false
	pause := func(on bool) {
		t.Helper()
		sig := syscall.SIGCONT
		if on {
			sig = syscall.SIGSTOP
		}
		if err := rs.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		paused = on
	}
	t.Cleanup(func() {
		if paused {
			pause(false)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// run sends a listen and a tasks/result at once, with what happens to
	// Redis meanwhile, and checks how each ended.
	run := func(phase string, meanwhile func()) {
		t.Helper()
		type sent struct {
			what string
			at   time.Time
			end  streamEnd
		}
		reqs := []*sent{{what: "listen"}, {what: "tasks/result"}}
		var wg sync.WaitGroup
		for _, r := range reqs {
			body, hdr := listenRequest(c, tk.TaskID)
			if r.what == "tasks/result" {
				body, hdr = resultRequest(c, tk.TaskID)
			}
			r.at = time.Now()
			wg.Go(func() { r.end = longRequest(ctx, http.DefaultClient, c.URL, hdr, body, nil) })
		}
		meanwhile()
		wg.Wait()
		for _, r := range reqs {
			took := r.end.ended.Sub(r.at)
			t.Logf("%s, %s: ended after %v with %q", phase, r.what, took.Round(time.Millisecond), r.end.last)
			if took > maxDuration+250*time.Millisecond {
				t.Errorf("%s, %s: ended %v after it was sent, past MCPTASKS_MAX_DURATION (%v) by more than 250 ms", phase, r.what, took.Round(time.Millisecond), maxDuration)
			}
			resume := `"resultType":"complete"`
			if r.what == "tasks/result" {
				resume = "retry: "
			}
			if r.end.status != http.StatusOK || !strings.Contains(r.end.last, resume) {
				t.Errorf("%s, %s: HTTP %d, ended with %q, want its resume point (%s) (%v)", phase, r.what, r.end.status, r.end.last, resume, r.end.err)
			}
		}
	}
	run("Redis paused during setup", func() {
		pause(true)
		time.Sleep(1500 * time.Millisecond)
		pause(false)
	})
	// The streams' budget ends 2s after they arrive (3s less the 1s
	// safety margin): Redis pauses just before, while a tasks/result reads
	// the task every 200 ms, and stays paused well past MAX_DURATION.
	run("Redis paused during a read at the budget's end", func() {
		time.Sleep(1800 * time.Millisecond)
		pause(true)
		time.Sleep(2700 * time.Millisecond)
		pause(false)
	})
}
