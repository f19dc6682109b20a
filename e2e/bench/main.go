// Command bench measures the cost of durability side by side, in one run on
// one machine, against real mcptasks processes over loopback HTTP: a plain
// synchronous tools/call (the protocol floor), task creation, tasks/get
// polling and tasks/update on the embedded Redis, on a real redis-server
// and on PostgreSQL (the Postgres store and queue, on a throwaway server),
// worker throughput with one and two worker processes, and the end-to-end
// latency of a one-step task. It prints a Markdown table and writes the
// same numbers as JSON.
//
//	go run ./e2e/bench [-duration 5s] [-clients 32] [-json bench.json] [-workers-only] \
//		[-worker-rounds 3] [-worker-tasks 600] [-old label=PATH ...] [-peer name=URL ...] \
//		[-peer-task-tool slow_compute] [-peer-task-args '{"seconds":3600}']
//	go run ./e2e/bench -get-rounds 3 -peer name=URL [-duration 5s]
//	go run ./e2e/bench -cluster 1,3,6 [-cluster-rounds 3] [-cluster-workers 2] [-worker-tasks 600] [-duration 5s]
//
// -old label=PATH (repeatable) measures a prebuilt mcptasks binary of an
// earlier version beside this tree's, on its own fresh redis-server, in
// every redis-server row; -workers-only runs only the worker rows and the
// Redis cost per task. The worker rows run -worker-rounds times, the
// variants taking turns, and report the median round with the CPU each
// step cost the worker processes and redis-server. The raw net/http floor
// row is this driver serving a fixed tasks/get answer from a process of
// its own.
//
// -cluster 1,3,6 runs only the Redis Cluster scaling rows (cluster.go):
// worker steps/s and the task-creating tools/call rate on clusters of
// each size started on this machine, the sizes taking turns in each of
// -cluster-rounds rounds, with each master's share of the commands (INFO
// commandstats) and CPU; it writes bench-results/cluster.json.
//
// -get-rounds N runs only the tasks/get polling rows, ours on
// redis-server and each -peer's, N rounds with the order alternating
// (getrounds.go), and reports each round's ratio.
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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
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
	var olds oldFlag
	flag.Var(&olds, "old", "label=PATH of a prebuilt mcptasks binary of an earlier version (repeatable): its redis-server rows run in the same run, labelled \"(label)\"")
	workersOnly := flag.Bool("workers-only", false, "run only the worker rows and the Redis cost per task (a quick check)")
	workerRounds := flag.Int("worker-rounds", 3, "rounds of the worker rows (each variant in turn); a row reports the median round")
	workerTasks := flag.Int("worker-tasks", 600, "10-step tasks per worker row")
	var peerPIDs pidFlag
	flag.Var(&peerPIDs, "peer-pid", "name=PID of a -peer's process, so that -get-rounds reports the CPU it spent per request (repeatable)")
	getWorking := flag.Bool("get-working", false, "-get-rounds: also poll a working task of ours (as the peer's row does), beside the task waiting for input")
	getRounds := flag.Int("get-rounds", 0, "run only the tasks/get polling rows, ours (redis-server) and each -peer's, this many rounds with the order alternating (see getrounds.go)")
	clusterSizes := flag.String("cluster", "", "run only the Redis Cluster scaling rows, for these master counts (comma-separated, e.g. 1,3,6; see cluster.go)")
	clusterRounds := flag.Int("cluster-rounds", 3, "rounds of the -cluster rows (the sizes taking turns in each)")
	clusterWorkers := flag.Int("cluster-workers", 2, "worker processes in the -cluster rows")
	floorServe := flag.String("floor-serve", "", "internal: serve the raw net/http floor on this address (the driver starts itself with it)")
	flag.Parse()
	if *floorServe != "" {
		serveFloor(*floorServe)
		return
	}
	log.SetFlags(0)
	var args map[string]any
	if err := json.Unmarshal([]byte(*taskArgs), &args); err != nil || args == nil {
		log.Fatalf("-peer-task-args must be a JSON object: %q", *taskArgs)
	}
	for i := range peers {
		peers[i].TaskTool, peers[i].TaskArgs = *taskTool, args
	}
	if *workerRounds < 1 || *workerTasks < 1 {
		log.Fatal("-worker-rounds and -worker-tasks must be at least 1")
	}
	if *getRounds > 0 {
		if *jsonOut == "bench-results/bench.json" {
			*jsonOut = "bench-results/get-rounds.json"
		}
		if err := runGetRounds(*getRounds, *clients, *duration, peers, peerPIDs, *getWorking, *jsonOut); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *clusterSizes != "" {
		sizes, err := parseSizes(*clusterSizes)
		if err != nil {
			log.Fatal(err)
		}
		if *jsonOut == "bench-results/bench.json" {
			*jsonOut = "bench-results/cluster.json"
		}
		if err := clusterMain(sizes, *clusterRounds, *clusterWorkers, *workerTasks, *clients, *duration, *jsonOut); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*duration, *clients, *jsonOut, peers, olds, *workersOnly, *workerRounds, *workerTasks); err != nil {
		log.Fatal(err)
	}
}

// pidFlag collects -peer-pid name=PID values.
type pidFlag map[string]int

func (f *pidFlag) String() string { return fmt.Sprint(map[string]int(*f)) }

func (f *pidFlag) Set(v string) error {
	name, pid, ok := strings.Cut(v, "=")
	n, err := strconv.Atoi(pid)
	if !ok || name == "" || err != nil || n <= 0 {
		return fmt.Errorf("want name=PID, got %q", v)
	}
	if *f == nil {
		*f = pidFlag{}
	}
	(*f)[name] = n
	return nil
}

// oldFlag collects -old label=PATH values.
type oldFlag []struct{ label, path string }

func (f *oldFlag) String() string {
	var s []string
	for _, o := range *f {
		s = append(s, o.label+"="+o.path)
	}
	return strings.Join(s, ",")
}

func (f *oldFlag) Set(v string) error {
	label, path, ok := strings.Cut(v, "=")
	if !ok || label == "" || path == "" {
		return fmt.Errorf("want label=PATH, got %q", v)
	}
	*f = append(*f, struct{ label, path string }{label, path})
	return nil
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
	Scenario  string  `json:"scenario"`
	Store     string  `json:"store"`
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	PerSec    float64 `json:"perSec"`
	Unit      string  `json:"unit"`
	P50Ms     float64 `json:"p50Ms,omitempty"`
	P99Ms     float64 `json:"p99Ms,omitempty"`
	CmdsPerOp float64 `json:"redisCommandsPerOp,omitempty"`
	// Worker rows: the CPU per step of the worker processes together and
	// of redis-server, and each round's steps/s.
	WorkerCPUUs float64   `json:"workerCpuUsPerOp,omitempty"`
	RedisCPUUs  float64   `json:"redisCpuUsPerOp,omitempty"`
	Rounds      []float64 `json:"rounds,omitempty"`
	RSSMiB      float64   `json:"rssMiB,omitempty"`
	VsBaseline  float64   `json:"vsBaseline,omitempty"`
	VsRaw       float64   `json:"vsRawFloor,omitempty"`
}

// Cost is what one completed 1-step task costs Redis: its create, its step,
// its completion and one tasks/get, measured over many.
type Cost struct {
	Variant string `json:"variant"`
	// Store is "postgres" for a PostgreSQL cost (see pgCostPerTask), else
	// empty (Redis).
	Store string `json:"store,omitempty"`
	Tasks int    `json:"tasks"`
	// Commands is the number of commands redis-server processed per task
	// (INFO commandstats: the commands inside scripts count, as do the
	// scripts themselves), and ByCommand the same per command name.
	Commands  float64            `json:"commandsPerTask"`
	ByCommand map[string]float64 `json:"byCommand"`
	// UsedMemory is the growth of used_memory per completed task, and
	// KeyBytes the MEMORY USAGE of one completed task's keys.
	UsedMemory float64 `json:"usedMemoryPerTask"`
	KeyBytes   int64   `json:"keyBytes"`
	// AllKeys is the number of keys in Redis after the tasks completed,
	// and AllKeyBytes their MEMORY USAGE summed, per task.
	AllKeys     int64            `json:"allKeys"`
	AllKeyBytes float64          `json:"allKeyBytesPerTask"`
	Keys        map[string]int64 `json:"keys"`
}

// Report is the whole run.
type Report struct {
	When      string `json:"when"`
	GoVersion string `json:"goVersion"`
	CPUs      int    `json:"cpus"`
	Clients   int    `json:"clients"`
	Duration  string `json:"duration"`
	Rows      []Row  `json:"rows"`
	Costs     []Cost `json:"costs"`
	Peers     []Peer `json:"peers,omitempty"`
}

func run(duration time.Duration, clients int, jsonOut string, peers []Peer, olds oldFlag, workersOnly bool, workerRounds, workerTasks int) error {
	dir, err := os.MkdirTemp("", "mcptasks-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "mcptasks")
	if err := buildMCPTasks(bin); err != nil {
		return err
	}
	// The variants measured on redis-server: this tree, and each -old.
	variants := []struct{ label, bin string }{{"", bin}}
	for _, o := range olds {
		abs, err := filepath.Abs(o.path)
		if err != nil {
			return err
		}
		variants = append(variants, struct{ label, bin string }{" (" + o.label + ")", abs})
	}
	rep := &Report{When: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Clients: clients, Duration: duration.String(), Peers: peers}
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	start := func(bin string, env []string, args ...string) (*proc, error) {
		p, err := startProc(bin, env, args...)
		if err == nil {
			procs = append(procs, p)
		}
		return p, err
	}

	// Each phase starts from fresh processes (and a fresh redis-server), so
	// that no backlog of an earlier scenario's tasks skews the next one.
	// servers are stopped after procs (a PostgreSQL server).
	var servers []func()
	defer func() {
		for _, stop := range servers {
			stop()
		}
	}()
	stopAll := func() {
		// Last started first: the workers and the endpoint before their
		// redis-server, so that they do not log its going away.
		for _, p := range slices.Backward(procs) {
			p.stop()
		}
		procs = nil
		for _, stop := range servers {
			stop()
		}
		servers = nil
	}
	split := func(bin string, workers int) (*proc, *redisProc, []*proc, error) {
		rs, err := startRedis(dir)
		if err != nil {
			return nil, nil, nil, err
		}
		procs = append(procs, rs.proc)
		api, ws, err := deploy(bin, []string{"REDIS_URL=" + rs.url}, workers, start)
		return api, rs, ws, err
	}
	// splitPG is split on a PostgreSQL server of its own: the Postgres
	// store and queue.
	splitPG := func(workers int) (*proc, *pgProc, []*proc, error) {
		pg, err := startPostgres()
		if err != nil {
			return nil, nil, nil, err
		}
		servers = append(servers, pg.close)
		api, ws, err := deploy(bin, []string{"MCPTASKS_STORE=postgres", "DATABASE_URL=" + pg.url}, workers, start)
		return api, pg, ws, err
	}

	var baseline, raw Row
	if !workersOnly {
		// Embedded store, one process: the floor, then the task operations.
		emb, err := start(bin, nil, "serve")
		if err != nil {
			return err
		}
		baseline = load(emb.url, clients, duration, "tools/call", greetCall)
		baseline.Scenario, baseline.Store = "sync tools/call (greet): protocol floor", "none"
		baseline.RSSMiB = emb.rssMiB()
		rep.Rows = append(rep.Rows, baseline)
		embRows, _ := taskScenarios(emb, nil, clients, duration, "embedded")
		rep.Rows = append(rep.Rows, embRows...)
		stopAll()

		// Real redis-server, endpoint and worker in separate processes. The
		// answer of the first tasks/get is what the raw floor serves.
		var answer []byte
		for _, v := range variants {
			api, rs, _, err := split(v.bin, 1)
			if err != nil {
				return err
			}
			rows, got := taskScenarios(api, rs, clients, duration, "redis-server"+v.label)
			if answer == nil {
				answer = got
			}
			rep.Rows = append(rep.Rows, rows...)
			stopAll()
		}
		// PostgreSQL, endpoint and worker in separate processes.
		api, pg, _, err := splitPG(1)
		if err != nil {
			return err
		}
		rows, _ := taskScenarios(api, pg, clients, duration, "postgres")
		rep.Rows = append(rep.Rows, rows...)
		stopAll()

		// The raw net/http floor: a handler in a process of its own that decodes
		// the JSON-RPC body and writes a fixed tasks/get answer of the same bytes.
		floor, err := startFloor(dir, answer)
		if err != nil {
			return err
		}
		procs = append(procs, floor)
		raw = load(floor.url, clients, duration, "tasks/get", func(int64) (map[string]any, string) {
			return map[string]any{"taskId": "fixed"}, "fixed"
		})
		raw.Scenario, raw.Store, raw.RSSMiB = "raw net/http floor: decode the body, write a fixed tasks/get answer", "none", floor.rssMiB()
		rep.Rows = append(rep.Rows, raw)
		stopAll()

		// External peers, while none of our processes run.
		for _, peer := range peers {
			rows, err := peerScenarios(peer, clients, duration)
			if err != nil {
				return fmt.Errorf("peer %s: %w", peer.Name, err)
			}
			rep.Rows = append(rep.Rows, rows...)
		}
	}

	// Worker throughput and end-to-end latency, each on a fresh deployment.
	if !workersOnly {
		emb, err := start(bin, nil, "serve")
		if err != nil {
			return err
		}
		rep.Rows = append(rep.Rows, throughput(emb, "embedded, in-process workers", 200), e2eLatency(emb, "embedded", 100))
		stopAll()
	}
	// The worker rows: -worker-rounds rounds, each variant in turn (the
	// order rotating), each with 1 and then 2 worker processes on a fresh
	// deployment; a row is the round with the median steps/s, with every
	// round's steps/s kept, and the CPU each step cost the worker processes
	// and redis-server (the medians), which a change in the machine's load
	// moves less than steps/s.
	samples := make(map[string][]Row)
	var order []string
	for round := range workerRounds {
		for k := range variants {
			v := variants[(k+round)%len(variants)]
			for _, workers := range []int{1, 2} {
				api, rs, ws, err := split(v.bin, workers)
				if err != nil {
					return err
				}
				if round == 0 && workers == 1 {
					cost := costPerTask(api, rs, 1000)
					cost.Variant = "redis-server" + v.label
					rep.Costs = append(rep.Costs, cost)
					rep.Rows = append(rep.Rows, e2eLatency(api, "redis-server"+v.label, 100))
				}
				store := fmt.Sprintf("redis-server, %d worker process(es)%s", workers, v.label)
				if _, ok := samples[store]; !ok {
					order = append(order, store)
				}
				samples[store] = append(samples[store], measuredThroughput(api, rs, ws, store, workerTasks))
				stopAll()
			}
		}
		// PostgreSQL's turn, in the same round.
		for _, workers := range []int{1, 2} {
			api, pg, ws, err := splitPG(workers)
			if err != nil {
				return err
			}
			if round == 0 && workers == 1 {
				rep.Costs = append(rep.Costs, pgCostPerTask(api, pg, 1000))
				rep.Rows = append(rep.Rows, e2eLatency(api, "postgres", 100))
			}
			store := fmt.Sprintf("postgres, %d worker process(es)", workers)
			if _, ok := samples[store]; !ok {
				order = append(order, store)
			}
			samples[store] = append(samples[store], measuredThroughput(api, pg, ws, store, workerTasks))
			stopAll()
		}
	}
	for _, store := range order {
		rep.Rows = append(rep.Rows, medianRow(samples[store]))
	}

	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.Unit == "req/s" && baseline.PerSec > 0 {
			r.VsBaseline = r.PerSec / baseline.PerSec
		}
		if r.Unit == "req/s" && raw.PerSec > 0 {
			r.VsRaw = r.PerSec / raw.PerSec
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
// It returns the rows and the raw result of one tasks/get of the polled task.
func taskScenarios(p *proc, rs storeServer, clients int, d time.Duration, store string) ([]Row, []byte) {
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
	var answer json.RawMessage
	if err := c.call("tasks/get", map[string]any{"taskId": parked.TaskID}, parked.TaskID, &answer); err != nil {
		log.Fatalf("reading the polled task: %v", err)
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
	return rows, answer
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
	row, _ := throughputIDs(p, store, tasks)
	row.RSSMiB = p.rssMiB()
	return row
}

// measuredThroughput is throughput on a split deployment, with the CPU
// time the worker processes and the store's server spent per step.
func measuredThroughput(api *proc, rs storeServer, workers []*proc, store string, tasks int) Row {
	w0, r0 := cpuSeconds(workers...), rs.cpu()
	row := throughput(api, store, tasks)
	w1, r1 := cpuSeconds(workers...), rs.cpu()
	if w0 >= 0 && w1 >= 0 {
		row.WorkerCPUUs = (w1 - w0) * 1e6 / float64(row.Ops)
	}
	if r0 >= 0 && r1 >= 0 {
		row.RedisCPUUs = (r1 - r0) * 1e6 / float64(row.Ops)
	}
	return row
}

// medianRow is the sample with the median rate, carrying every sample's
// rate and the median CPU per operation.
func medianRow(rows []Row) Row {
	byRate := slices.Clone(rows)
	slices.SortFunc(byRate, func(a, b Row) int { return cmp.Compare(a.PerSec, b.PerSec) })
	m := byRate[len(byRate)/2]
	med := func(f func(Row) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m.WorkerCPUUs = med(func(r Row) float64 { return r.WorkerCPUUs })
	m.RedisCPUUs = med(func(r Row) float64 { return r.RedisCPUUs })
	m.Rounds = nil
	for _, r := range rows {
		m.Rounds = append(m.Rounds, math.Round(r.PerSec))
	}
	return m
}

// cpuSeconds is the user and system CPU time the processes have used so
// far (/proc/PID/stat), or -1 if one cannot be read.
func cpuSeconds(ps ...*proc) float64 {
	var t float64
	for _, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 {
			return -1
		}
		// After the command's name: state is field 3, utime 14, stime 15.
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			return -1
		}
		u, err1 := strconv.ParseFloat(f[11], 64)
		s, err2 := strconv.ParseFloat(f[12], 64)
		if err1 != nil || err2 != nil {
			return -1
		}
		t += (u + s) / clockTicks
	}
	return t
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// redisCPUSeconds is redis-server's used_cpu_user + used_cpu_sys (INFO
// cpu), or -1.
func redisCPUSeconds(r *redisProc) float64 {
	info, err := r.info(context.Background(), "cpu")
	if err != nil {
		return -1
	}
	var t float64
	for _, l := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			t += f
		}
	}
	return t
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

// costPerTask completes n one-step tasks (create, one step, completed) and
// reads what they cost Redis: commands (INFO commandstats) and memory, per
// task, counting exactly one tasks/get per task: the polls that waited for
// completion beyond one per task are measured alone and subtracted.
func costPerTask(p *proc, rs *redisProc, n int) Cost {
	c := &client{url: p.url}
	// Warm up first: the scripts load, the server's dictionaries and the
	// connections' buffers grow, before anything is counted.
	warm := make([]string, 0, 20)
	for range cap(warm) {
		warm = append(warm, createOneStep(c))
	}
	for _, id := range warm {
		waitDone(c, id, 2*time.Millisecond)
	}
	stats0, mem0 := rs.commandStats(), rs.usedMemory()
	ids, gets := completeTasks(c, n)
	stats1, mem1 := rs.commandStats(), rs.usedMemory()
	for _, id := range ids {
		if err := c.call("tasks/get", map[string]any{"taskId": id}, id, nil); err != nil {
			log.Fatal(err)
		}
	}
	stats2 := rs.commandStats()
	extra := float64(gets - n)
	cost := Cost{Tasks: n, ByCommand: map[string]float64{}, UsedMemory: float64(mem1-mem0) / float64(n), Keys: map[string]int64{}}
	for name, v1 := range stats1 {
		if name == "info" {
			continue
		}
		perGet := float64(stats2[name]-v1) / float64(n)
		per := (float64(v1-stats0[name]) - extra*perGet) / float64(n)
		if per > 0.005 {
			cost.ByCommand[name] = per
			cost.Commands += per
		}
	}
	for _, key := range rs.keysOf(ids[n/2]) {
		b := rs.memoryUsage(key)
		cost.Keys[key] = b
		cost.KeyBytes += b
	}
	for _, key := range rs.keysMatching("*") {
		cost.AllKeys++
		cost.AllKeyBytes += float64(rs.memoryUsage(key)) / float64(n+len(warm))
	}
	return cost
}

// createOneStep creates a one-step task and returns its id.
func createOneStep(c *client) string {
	var t struct {
		TaskID string `json:"taskId"`
	}
	if err := c.call("tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 1}}, "batch_report", &t); err != nil {
		log.Fatal(err)
	}
	return t.TaskID
}

// completeTasks creates n one-step tasks, then polls each until it
// completed; it returns their ids and how many tasks/get it took.
func completeTasks(c *client, n int) (ids []string, gets int) {
	ids = make([]string, 0, n)
	for range n {
		ids = append(ids, createOneStep(c))
	}
	for _, id := range ids {
		for {
			var t struct {
				Status string `json:"status"`
			}
			gets++
			if err := c.call("tasks/get", map[string]any{"taskId": id}, id, &t); err != nil {
				log.Fatalf("polling %s: %v", id, err)
			}
			if t.Status == "completed" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return ids, gets
}

// startFloor starts this driver again as the raw net/http floor (see
// serveFloor), answering every request with answer as its result.
func startFloor(dir string, answer []byte) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "floor-answer.json")
	if err := os.WriteFile(file, answer, 0o644); err != nil {
		return nil, err
	}
	addr := freeAddr()
	cmd := exec.Command(self, "-floor-serve", addr)
	cmd.Env = append(os.Environ(), "BENCH_FLOOR_ANSWER="+file)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), url: "http://" + addr + "/mcp"}
	go func() { _ = cmd.Wait(); close(p.done) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return p, nil
		}
	}
	p.stop()
	return nil, errors.New("the raw floor did not start")
}

// serveFloor is the raw net/http floor: the least an HTTP JSON-RPC server
// can do for a tasks/get, with no MCP library, no store and no checks
// beyond decoding the body. Its result is the bytes of one of our real
// tasks/get answers.
func serveFloor(addr string) {
	result, err := os.ReadFile(os.Getenv("BENCH_FLOOR_ANSWER"))
	if err != nil {
		log.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Method == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var b bytes.Buffer
		b.WriteString(`{"jsonrpc":"2.0","id":`)
		b.Write(req.ID)
		b.WriteString(`,"result":`)
		b.Write(result)
		b.WriteString("}")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b.Bytes())
	})
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func printTable(rep *Report) {
	fmt.Printf("\nmcptasks benchmarks: %s, %s, %d CPUs, %d clients, %s per load scenario\n\n", rep.When, rep.GoVersion, rep.CPUs, rep.Clients, rep.Duration)
	fmt.Println("| scenario | store | rate | p50 ms | p99 ms | vs floor | vs raw floor | store cmds/op ¹ | RSS MiB ² | errors | CPU µs/op, workers / store ³ | rounds ³ |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		opt := func(v float64, f string) string {
			if v == 0 {
				return "–"
			}
			return fmt.Sprintf(f, v)
		}
		cpu, rounds := "–", "–"
		if r.WorkerCPUUs > 0 || r.RedisCPUUs > 0 {
			cpu = fmt.Sprintf("%.0f / %.0f", r.WorkerCPUUs, r.RedisCPUUs)
		}
		if len(r.Rounds) > 0 {
			rounds = strings.Trim(fmt.Sprint(r.Rounds), "[]")
		}
		fmt.Printf("| %s | %s | %.0f %s | %s | %s | %s | %s | %s | %s | %d | %s | %s |\n", r.Scenario, r.Store, r.PerSec, r.Unit,
			opt(r.P50Ms, "%.2f"), opt(r.P99Ms, "%.2f"), opt(r.VsBaseline, "%.2f×"), opt(r.VsRaw*100, "%.0f%%"), opt(r.CmdsPerOp, "%.1f"), opt(r.RSSMiB, "%.0f"), r.Errors, cpu, rounds)
	}
	fmt.Printf("\n¹ commands redis-server processed per request during the scenario (INFO total_commands_processed), counting the commands inside scripts and the work the request set off in the workers; on postgres, the statements the server ran per request (pg_stat_statements; each is one round trip), likewise; round trips per operation are in the Go benchmarks above.\n")
	fmt.Printf("² resident set of the process serving the endpoint (or running the workers), after the scenario.\n")
	fmt.Printf("³ worker rows: the CPU time the worker processes together and redis-server (or every postgres process) spent per step, and each round's steps/s; the row is the round with the median steps/s, its CPU the rounds' medians.\n")
	for _, p := range rep.Peers {
		fmt.Printf("\npeer: %s is %s, measured by the same driver; it polls a working task from %s %s (ours poll an input_required task); \"vs floor\" is against our floor.\n",
			p.Name, p.URL, p.TaskTool, mustJSON(p.TaskArgs))
	}
	for _, c := range rep.Costs {
		if c.Store == "postgres" {
			printPGCost(c)
			continue
		}
		fmt.Printf("\nRedis cost of a completed 1-step task on %s (create, one step, completed, one tasks/get; mean of %d):\n", c.Variant, c.Tasks)
		fmt.Printf("- %.1f commands (INFO commandstats):", c.Commands)
		names := make([]string, 0, len(c.ByCommand))
		for k := range c.ByCommand {
			names = append(names, k)
		}
		slices.SortFunc(names, func(a, b string) int {
			if c.ByCommand[a] != c.ByCommand[b] {
				if c.ByCommand[a] > c.ByCommand[b] {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, k := range names {
			fmt.Printf(" %s %.2f", k, c.ByCommand[k])
		}
		fmt.Printf("\n- used_memory growth %.0f bytes per task; MEMORY USAGE of one completed task's keys %d bytes %v; all %d keys in Redis afterwards: %.0f bytes per task\n",
			c.UsedMemory, c.KeyBytes, c.Keys, c.AllKeys, c.AllKeyBytes)
	}
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

// do runs one command over a raw RESP connection (the driver needs no
// client) and returns its reply: a string, an int64, nil, or a []any.
func (r *redisProc) do(ctx context.Context, args ...string) (any, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var req bytes.Buffer
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write(req.Bytes()); err != nil {
		return nil, err
	}
	return readRESP(bufio.NewReader(conn))
}

func readRESP(br *bufio.Reader) (any, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty RESP line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		out := make([]any, 0, max(n, 0))
		for range n {
			v, err := readRESP(br)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected RESP %q", line)
}

func (r *redisProc) info(ctx context.Context, section ...string) (string, error) {
	v, err := r.do(ctx, append([]string{"INFO"}, section...)...)
	if err != nil {
		return "", err
	}
	s, _ := v.(string)
	return s, nil
}

// commandStats returns the calls of each command (INFO commandstats).
func (r *redisProc) commandStats() map[string]int64 {
	s, err := r.info(context.Background(), "commandstats")
	if err != nil {
		log.Fatalf("INFO commandstats: %v", err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		out[name], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}

// keysOf lists the keys whose name holds the task id's hash tag.
func (r *redisProc) keysOf(id string) []string { return r.keysMatching("*{" + id + "}*") }

// keysMatching lists the keys matching a SCAN pattern.
func (r *redisProc) keysMatching(pattern string) []string {
	var keys []string
	cursor := "0"
	for {
		v, err := r.do(context.Background(), "SCAN", cursor, "MATCH", pattern, "COUNT", "1000")
		if err != nil {
			log.Fatalf("SCAN: %v", err)
		}
		arr, _ := v.([]any)
		if len(arr) != 2 {
			log.Fatalf("SCAN: unexpected reply %v", v)
		}
		cursor, _ = arr[0].(string)
		batch, _ := arr[1].([]any)
		for _, k := range batch {
			keys = append(keys, k.(string))
		}
		if cursor == "0" {
			slices.Sort(keys)
			return keys
		}
	}
}

// memoryUsage is MEMORY USAGE of key (with every nested value sampled).
func (r *redisProc) memoryUsage(key string) int64 {
	v, err := r.do(context.Background(), "MEMORY", "USAGE", key, "SAMPLES", "0")
	if err != nil {
		log.Fatalf("MEMORY USAGE: %v", err)
	}
	n, _ := v.(int64)
	return n
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

// cpu is redis-server's CPU seconds so far, or -1.
func (r *redisProc) cpu() float64 { return redisCPUSeconds(r) }

// storeServer is the server of a store under measurement: redis-server or
// PostgreSQL.
type storeServer interface {
	// commands is how many commands (Redis) or statements (PostgreSQL) the
	// server has processed so far.
	commands() int64
	// cpu is the CPU seconds the server has used so far, or -1.
	cpu() float64
}

// deploy starts the split shape of bin in env: `serve --no-worker` and
// workers `worker` processes.
func deploy(bin string, env []string, workers int, start func(string, []string, ...string) (*proc, error)) (*proc, []*proc, error) {
	api, err := start(bin, env, "serve", "--no-worker")
	if err != nil {
		return nil, nil, err
	}
	var ws []*proc
	for range workers {
		w, err := start(bin, env, "worker")
		if err != nil {
			return nil, nil, err
		}
		ws = append(ws, w)
	}
	return api, ws, nil
}
