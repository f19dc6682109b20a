// Command bench measures the cost of durability side by side, in one run on
// one machine, against real mcptasks processes over loopback HTTP: a plain
// synchronous tools/call (the protocol floor), task creation, tasks/get
// polling and tasks/update on the embedded Redis and on a real
// redis-server, worker throughput with one and two worker processes, and
// the end-to-end latency of a one-step task. It prints a Markdown table and
// writes the same numbers as JSON.
//
//	go run ./e2e/bench [-duration 5s] [-clients 32] [-json bench.json] \
//		[-peer name=URL ...] [-peer-task-tool slow_compute] [-peer-task-args '{"seconds":3600}']
//
// -peer name=URL (repeatable, or comma-separated) also measures an external
// MCP endpoint that speaks the 2026-07-28 wire with the tasks extension, in
// the same run, with the same driver and client count: the sync tools/call
// of greet (the peer must offer a greet tool taking {"name"}) and tasks/get
// polling of one working task, which it creates with one tools/call of
// -peer-task-tool with -peer-task-args (a JSON object; the tool must answer
// with a CreateTaskResult whose task stays working while it is polled). The
// peer's rows carry store "peer: <name>"; the driver neither starts nor stops
// the peer, so its RSS and Redis columns stay empty. The defaults fit the
// tasks-v2 example of panyam/mcpkit.
//
// scripts/bench runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "how long each load scenario runs")
	clients := flag.Int("clients", 32, "concurrent clients per load scenario")
	jsonOut := flag.String("json", "bench-results/bench.json", "where to write the results as JSON")
	var peers peerFlag
	flag.Var(&peers, "peer", "name=URL of an external MCP endpoint to measure alongside (repeatable or comma-separated)")
	taskTool := flag.String("peer-task-tool", "slow_compute", "tool that creates a long-running task on each peer")
	taskArgs := flag.String("peer-task-args", `{"seconds":3600}`, "arguments of -peer-task-tool, a JSON object")
	flag.Parse()
	log.SetFlags(0)
	var args map[string]any
	if err := json.Unmarshal([]byte(*taskArgs), &args); err != nil || args == nil {
		log.Fatalf("-peer-task-args must be a JSON object: %q", *taskArgs)
	}
	for i := range peers {
		peers[i].TaskTool, peers[i].TaskArgs = *taskTool, args
	}
	if err := run(*duration, *clients, *jsonOut, peers); err != nil {
		log.Fatal(err)
	}
}

// Peer is an external MCP endpoint measured alongside ours.
type Peer struct {
	Name     string         `json:"name"`
	URL      string         `json:"url"`
	TaskTool string         `json:"taskTool"`
	TaskArgs map[string]any `json:"taskArgs"`
}

// peerFlag collects -peer name=URL values.
type peerFlag []Peer

func (f *peerFlag) String() string {
	var s []string
	for _, p := range *f {
		s = append(s, p.Name+"="+p.URL)
	}
	return strings.Join(s, ",")
}

func (f *peerFlag) Set(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		name, url, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" || !strings.HasPrefix(url, "http") {
			return fmt.Errorf("want name=URL, got %q", item)
		}
		*f = append(*f, Peer{Name: name, URL: url})
	}
	return nil
}

// Row is one measured scenario.
type Row struct {
	Scenario   string  `json:"scenario"`
	Store      string  `json:"store"`
	Ops        int64   `json:"ops"`
	Errors     int64   `json:"errors"`
	PerSec     float64 `json:"perSec"`
	Unit       string  `json:"unit"`
	P50Ms      float64 `json:"p50Ms,omitempty"`
	P99Ms      float64 `json:"p99Ms,omitempty"`
	CmdsPerOp  float64 `json:"redisCommandsPerOp,omitempty"`
	RSSMiB     float64 `json:"rssMiB,omitempty"`
	VsBaseline float64 `json:"vsBaseline,omitempty"`
}

// Report is the whole run.
type Report struct {
	When                  string  `json:"when"`
	GoVersion             string  `json:"goVersion"`
	CPUs                  int     `json:"cpus"`
	Clients               int     `json:"clients"`
	Duration              string  `json:"duration"`
	Rows                  []Row   `json:"rows"`
	BytesPerCompletedTask float64 `json:"redisBytesPerCompletedTask"`
	Peers                 []Peer  `json:"peers,omitempty"`
}

func run(duration time.Duration, clients int, jsonOut string, peers []Peer) error {
	dir, err := os.MkdirTemp("", "mcptasks-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "mcptasks")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mcptasks")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building cmd/mcptasks: %w", err)
	}
	rep := &Report{When: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Clients: clients, Duration: duration.String(), Peers: peers}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	start := func(env []string, args ...string) (*proc, error) {
		p, err := startProc(bin, env, args...)
		if err == nil {
			procs = append(procs, p)
		}
		return p, err
	}

	// Each phase starts from fresh processes (and a fresh redis-server), so
	// that no backlog of an earlier scenario's tasks skews the next one.
	stopAll := func() {
		for _, p := range procs {
			p.stop()
		}
		procs = nil
	}
	split := func(workers int) (*proc, *redisProc, error) {
		rs, err := startRedis(dir)
		if err != nil {
			return nil, nil, err
		}
		procs = append(procs, rs.proc)
		env := []string{"REDIS_URL=" + rs.url}
		api, err := start(env, "serve", "--no-worker")
		if err != nil {
			return nil, nil, err
		}
		for range workers {
			if _, err := start(env, "worker"); err != nil {
				return nil, nil, err
			}
		}
		return api, rs, nil
	}

	// Embedded store, one process: the floor, then the task operations.
	emb, err := start(nil, "serve")
	if err != nil {
		return err
	}
	baseline := load(emb.url, clients, duration, "tools/call", greetCall)
	baseline.Scenario, baseline.Store = "sync tools/call (greet): protocol floor", "none"
	baseline.RSSMiB = emb.rssMiB()
	rep.Rows = append(rep.Rows, baseline)
	rep.Rows = append(rep.Rows, taskScenarios(emb, nil, clients, duration, "embedded")...)
	stopAll()

	// Real redis-server, endpoint and worker in separate processes.
	api, rs, err := split(1)
	if err != nil {
		return err
	}
	rep.Rows = append(rep.Rows, taskScenarios(api, rs, clients, duration, "redis-server")...)
	stopAll()

	// External peers, while none of our processes run.
	for _, peer := range peers {
		rows, err := peerScenarios(peer, clients, duration)
		if err != nil {
			return fmt.Errorf("peer %s: %w", peer.Name, err)
		}
		rep.Rows = append(rep.Rows, rows...)
	}

	// Worker throughput and end-to-end latency, each on a fresh deployment.
	if emb, err = start(nil, "serve"); err != nil {
		return err
	}
	rep.Rows = append(rep.Rows, throughput(emb, "embedded, in-process workers", 200), e2eLatency(emb, "embedded", 100))
	stopAll()
	for _, workers := range []int{1, 2} {
		api, rs, err := split(workers)
		if err != nil {
			return err
		}
		if workers == 1 {
			rep.BytesPerCompletedTask = bytesPerTask(api, rs, 200)
		}
		rep.Rows = append(rep.Rows, throughput(api, fmt.Sprintf("redis-server, %d worker process(es)", workers), 200))
		if workers == 1 {
			rep.Rows = append(rep.Rows, e2eLatency(api, "redis-server", 100))
		}
		stopAll()
	}

	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Unit == "req/s" && baseline.PerSec > 0 {
			r.VsBaseline = r.PerSec / baseline.PerSec
		}
	}
	printTable(rep)
	if err := os.MkdirAll(filepath.Dir(jsonOut), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(jsonOut, b, 0o644)
}

// taskScenarios measures creation, polling and input delivery on one store.
func taskScenarios(p *proc, rs *redisProc, clients int, d time.Duration, store string) []Row {
	var rows []Row
	cmds := func() int64 {
		if rs == nil {
			return 0
		}
		return rs.commands()
	}
	measure := func(name, method string, gen func(int64) (map[string]any, string)) Row {
		before := cmds()
		r := load(p.url, clients, d, method, gen)
		if rs != nil && r.Ops > 0 {
			r.CmdsPerOp = float64(cmds()-before) / float64(r.Ops)
		}
		r.Scenario, r.Store, r.RSSMiB = name, store, p.rssMiB()
		return r
	}
	// Poll one parked task (input_required): the dominant traffic.
	c := &client{url: p.url}
	var parked struct {
		TaskID string `json:"taskId"`
	}
	if err := c.call("tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "x"}}, "confirm_delete", &parked); err != nil {
		log.Fatalf("creating the polled task: %v", err)
	}
	rows = append(rows, measure("tasks/get polling", "tasks/get", func(int64) (map[string]any, string) {
		return map[string]any{"taskId": parked.TaskID}, parked.TaskID
	}))
	// tasks/update: each op answers a freshly parked task.
	ids := make(chan string, 1<<16)
	for range 3000 {
		var t struct {
			TaskID string `json:"taskId"`
		}
		if err := c.call("tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "y"}}, "confirm_delete", &t); err != nil {
			log.Fatalf("creating tasks to update: %v", err)
		}
		ids <- t.TaskID
	}
	waitParked(c, ids)
	rows = append(rows, measure("tasks/update delivering an input response", "tasks/update", func(int64) (map[string]any, string) {
		select {
		case id := <-ids:
			return map[string]any{"taskId": id, "inputResponses": map[string]any{"confirm": map[string]any{"action": "decline"}}}, id
		default:
			return nil, ""
		}
	}))
	// Task creation last: every created task starts a worker step, and that
	// backlog would weigh on the scenarios after it.
	rows = append(rows, measure("tools/call creating a task", "tools/call", func(int64) (map[string]any, string) {
		return map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 3600}}, "slow_compute"
	}))
	return rows
}

// peerScenarios measures an external endpoint: the sync tools/call floor and
// tasks/get polling of one working task, as for our stores.
func peerScenarios(peer Peer, clients int, d time.Duration) ([]Row, error) {
	store := "peer: " + peer.Name
	c := &client{url: peer.URL}
	params, name := greetCall(0)
	if err := c.call("tools/call", params, name, nil); err != nil {
		return nil, fmt.Errorf("tools/call greet: %w", err)
	}
	floor := load(peer.URL, clients, d, "tools/call", greetCall)
	floor.Scenario, floor.Store = "sync tools/call (greet): protocol floor", store

	var task struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	if err := c.call("tools/call", map[string]any{"name": peer.TaskTool, "arguments": peer.TaskArgs}, peer.TaskTool, &task); err != nil {
		return nil, fmt.Errorf("creating the polled task with %s: %w", peer.TaskTool, err)
	}
	if task.TaskID == "" {
		return nil, fmt.Errorf("%s answered no taskId (no CreateTaskResult)", peer.TaskTool)
	}
	if err := c.call("tasks/get", map[string]any{"taskId": task.TaskID}, task.TaskID, &task); err != nil {
		return nil, fmt.Errorf("tasks/get %s: %w", task.TaskID, err)
	}
	if task.Status != "working" {
		return nil, fmt.Errorf("task %s is %q, not working", task.TaskID, task.Status)
	}
	poll := load(peer.URL, clients, d, "tasks/get", func(int64) (map[string]any, string) {
		return map[string]any{"taskId": task.TaskID}, task.TaskID
	})
	poll.Scenario, poll.Store = "tasks/get polling", store
	return []Row{floor, poll}, nil
}

// waitParked waits until every queued task has parked for input.
func waitParked(c *client, ids chan string) {
	var all []string
	for len(ids) > 0 {
		all = append(all, <-ids)
	}
	for _, id := range all {
		for {
			var t struct {
				Status string `json:"status"`
			}
			if err := c.call("tasks/get", map[string]any{"taskId": id}, id, &t); err == nil && t.Status == "input_required" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		ids <- id
	}
}

func greetCall(int64) (map[string]any, string) {
	return map[string]any{"name": "greet", "arguments": map[string]any{"name": "bench"}}, "greet"
}

// load runs clients goroutines calling method for d and returns the rate
// and latency distribution. gen returns the params and Mcp-Name of the
// i-th call, or nil params when there is nothing left to do.
func load(url string, clients int, d time.Duration, method string, gen func(int64) (map[string]any, string)) Row {
	var (
		n, errs atomic.Int64
		mu      sync.Mutex
		lat     []time.Duration
		wg      sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			c := &client{url: url}
			var mine []time.Duration
			for time.Now().Before(deadline) {
				params, name := gen(n.Load())
				if params == nil {
					break
				}
				t0 := time.Now()
				err := c.call(method, params, name, nil)
				mine = append(mine, time.Since(t0))
				n.Add(1)
				if err != nil {
					errs.Add(1)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	r := Row{Ops: n.Load(), Errors: errs.Load(), PerSec: float64(n.Load()) / elapsed.Seconds(), Unit: "req/s"}
	if len(lat) > 0 {
		r.P50Ms = ms(lat[len(lat)/2])
		r.P99Ms = ms(lat[len(lat)*99/100])
	}
	return r
}

// throughput creates tasks of 10 no-op steps and measures steps/second
// until all completed.
func throughput(p *proc, store string, tasks int) Row {
	c := &client{url: p.url}
	start := time.Now()
	var ids []string
	for range tasks {
		var t struct {
			TaskID string `json:"taskId"`
		}
		if err := c.call("tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 10}}, "batch_report", &t); err != nil {
			log.Fatalf("throughput: %v", err)
		}
		ids = append(ids, t.TaskID)
	}
	for _, id := range ids {
		waitDone(c, id, 2*time.Millisecond)
	}
	el := time.Since(start)
	return Row{Scenario: "worker throughput, 10-step no-op workflow", Store: store, Ops: int64(10 * tasks),
		PerSec: float64(10*tasks) / el.Seconds(), Unit: "steps/s", RSSMiB: p.rssMiB()}
}

// e2eLatency measures tools/call → completed for a one-step task, one at a
// time, polling every millisecond.
func e2eLatency(p *proc, store string, n int) Row {
	c := &client{url: p.url}
	var lat []time.Duration
	for range n {
		t0 := time.Now()
		var t struct {
			TaskID string `json:"taskId"`
		}
		if err := c.call("tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 1}}, "batch_report", &t); err != nil {
			log.Fatalf("e2e latency: %v", err)
		}
		waitDone(c, t.TaskID, time.Millisecond)
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	return Row{Scenario: "tools/call → completed, 1-step task", Store: store, Ops: int64(n),
		PerSec: float64(n) / sum.Seconds(), Unit: "tasks/s (sequential)", P50Ms: ms(lat[n/2]), P99Ms: ms(lat[n*99/100])}
}

func waitDone(c *client, id string, every time.Duration) {
	for {
		var t struct {
			Status string `json:"status"`
		}
		if err := c.call("tasks/get", map[string]any{"taskId": id}, id, &t); err != nil {
			log.Fatalf("polling %s: %v", id, err)
		}
		switch t.Status {
		case "completed":
			return
		case "failed", "cancelled":
			log.Fatalf("task %s ended %s", id, t.Status)
		}
		time.Sleep(every)
	}
}

// bytesPerTask completes n one-step tasks and divides the growth of Redis
// used_memory by n.
func bytesPerTask(p *proc, rs *redisProc, n int) float64 {
	c := &client{url: p.url}
	before := rs.usedMemory()
	var ids []string
	for range n {
		var t struct {
			TaskID string `json:"taskId"`
		}
		if err := c.call("tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 1}}, "batch_report", &t); err != nil {
			log.Fatal(err)
		}
		ids = append(ids, t.TaskID)
	}
	for _, id := range ids {
		waitDone(c, id, 2*time.Millisecond)
	}
	return float64(rs.usedMemory()-before) / float64(n)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func printTable(rep *Report) {
	fmt.Printf("\nmcptasks benchmarks: %s, %s, %d CPUs, %d clients, %s per load scenario\n\n", rep.When, rep.GoVersion, rep.CPUs, rep.Clients, rep.Duration)
	fmt.Println("| scenario | store | rate | p50 ms | p99 ms | vs floor | Redis cmds/op ¹ | RSS MiB ² | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		opt := func(v float64, f string) string {
			if v == 0 {
				return "–"
			}
			return fmt.Sprintf(f, v)
		}
		fmt.Printf("| %s | %s | %.0f %s | %s | %s | %s | %s | %s | %d |\n", r.Scenario, r.Store, r.PerSec, r.Unit,
			opt(r.P50Ms, "%.2f"), opt(r.P99Ms, "%.2f"), opt(r.VsBaseline, "%.2f×"), opt(r.CmdsPerOp, "%.1f"), opt(r.RSSMiB, "%.0f"), r.Errors)
	}
	fmt.Printf("\n¹ commands redis-server processed per request during the scenario (INFO total_commands_processed), counting the commands inside scripts and the work the request set off in the workers; round trips per operation are in the Go benchmarks above.\n")
	fmt.Printf("² resident set of the process serving the endpoint (or running the workers), after the scenario.\n")
	for _, p := range rep.Peers {
		fmt.Printf("\npeer: %s is %s, measured by the same driver; it polls a working task from %s %s (ours poll an input_required task); \"vs floor\" is against our floor.\n",
			p.Name, p.URL, p.TaskTool, mustJSON(p.TaskArgs))
	}
	fmt.Printf("\nRedis memory per completed 1-step task (redis-server used_memory growth): %.0f bytes\n", rep.BytesPerCompletedTask)
}

// client is a minimal keep-alive client of the 2026-07-28 wire.
type client struct {
	url string
	id  int
}

var transport = &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}
var httpClient = &http.Client{Transport: transport, Timeout: 30 * time.Second}

func (c *client) call(method string, params map[string]any, name string, out any) error {
	c.id++
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, _ := http.NewRequest("POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if i := bytes.Index(raw, []byte("data: ")); i >= 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw = raw[i+6:]
		if j := bytes.IndexByte(raw, '\n'); j >= 0 {
			raw = raw[:j]
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return fmt.Errorf("HTTP %d: %q", resp.StatusCode, raw)
	}
	if msg.Error != nil {
		return fmt.Errorf("%s: %d %s", method, msg.Error.Code, msg.Error.Message)
	}
	if out != nil {
		return json.Unmarshal(msg.Result, out)
	}
	return nil
}

// proc is a running mcptasks process.
type proc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func startProc(bin string, env []string, args ...string) (*proc, error) {
	addr := ""
	if args[0] == "serve" {
		addr = freeAddr()
		args = append(args, "--addr", addr)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), append(env, "MCPTASKS_LOG_LEVEL=WARN")...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if addr == "" {
		return p, nil
	}
	p.url = "http://" + addr + "/mcp"
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return p, nil
		}
	}
	p.stop()
	return nil, errors.New("mcptasks did not start")
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// rssMiB reads the process's resident set size.
func (p *proc) rssMiB() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// redisProc is a redis-server for the run.
type redisProc struct {
	*proc
	addr string
	url  string
}

func startRedis(dir string) (*redisProc, error) {
	addr := freeAddr()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server (apt-get install -y redis-server): %w", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	r := &redisProc{proc: p, addr: addr, url: "redis://" + addr}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := r.info(context.Background()); err == nil {
			return r, nil
		}
	}
	return nil, errors.New("redis-server did not start")
}

// info runs INFO over a raw RESP connection (the driver needs no client).
func (r *redisProc) info(ctx context.Context) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("*1\r\n$4\r\nINFO\r\n")); err != nil {
		return "", err
	}
	br := bufio.NewReader(conn)
	head, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("INFO: %q %v", head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(br, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}

func (r *redisProc) field(name string) int64 {
	s, err := r.info(context.Background())
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// commands is the server's total commands processed (INFO itself counts
// one per call, negligible against thousands of requests).
func (r *redisProc) commands() int64   { return r.field("total_commands_processed") }
func (r *redisProc) usedMemory() int64 { return r.field("used_memory") }
