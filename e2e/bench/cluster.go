package main

// The Cluster scaling rows (-cluster 1,3,6): worker steps/s and the rate of
// task-creating tools/call on a Redis Cluster of 1, 3 and 6 masters, all on
// this machine (so the same total CPU for every size), each size on a fresh
// cluster, deployment and workers, the sizes taking turns in each of
// -cluster-rounds rounds. Each master's commands come from INFO
// commandstats (reset before each phase), its CPU from INFO cpu.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/internal/slots"
)

// clusterProc is a Redis Cluster of redis-server processes on loopback.
type clusterProc struct {
	nodes []*redisProc
	// starts are the first slot of each node's range (nodes in order).
	starts []int
	url    string
}

// startCluster starts masters cluster-enabled redis-servers in dir and
// joins them: with 3 or more masters by `redis-cli --cluster create`, as an
// operator would (the slot layout the bundle's 12 shards assume), with one
// by CLUSTER ADDSLOTSRANGE 0 16383 (redis-cli refuses fewer than three).
func startCluster(dir string, masters int) (_ *clusterProc, err error) {
	c := &clusterProc{}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	for i := range masters {
		addr, bus := freeAddr(), freeAddr()
		_, port, _ := net.SplitHostPort(addr)
		_, busPort, _ := net.SplitHostPort(bus)
		// A directory of its own: a nodes.conf left by an earlier round
		// would make the node rejoin that round's cluster.
		nd, err := os.MkdirTemp(dir, fmt.Sprintf("cluster%d-node%d-", masters, i))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command("redis-server", "--port", port, "--cluster-port", busPort, "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "20000",
			"--save", "", "--appendonly", "no", "--dir", nd)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting redis-server: %w", err)
		}
		p := &proc{cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.done) }()
		r := &redisProc{proc: p, addr: addr, url: "redis://" + addr}
		c.nodes = append(c.nodes, r)
		ready := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := r.info(context.Background()); err == nil {
				ready = true
				break
			}
		}
		if !ready {
			return nil, errors.New("redis-server (cluster node) did not start")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if masters == 1 {
		if _, err := c.nodes[0].do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", strconv.Itoa(slots.Count-1)); err != nil {
			return nil, fmt.Errorf("CLUSTER ADDSLOTSRANGE: %w", err)
		}
	} else {
		args := []string{"--cluster", "create"}
		for _, n := range c.nodes {
			args = append(args, n.addr)
		}
		args = append(args, "--cluster-replicas", "0", "--cluster-yes")
		if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Whole when every node reports the cluster ok, every slot served and
	// every node known.
	for {
		whole := true
		for _, n := range c.nodes {
			v, err := n.do(ctx, "CLUSTER", "INFO")
			s, _ := v.(string)
			if err != nil || !strings.Contains(s, "cluster_state:ok") || !strings.Contains(s, "cluster_slots_ok:16384") ||
				!strings.Contains(s, fmt.Sprintf("cluster_known_nodes:%d\r", masters)) {
				whole = false
			}
		}
		if whole {
			break
		}
		if ctx.Err() != nil {
			return nil, errors.New("the cluster did not become whole within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Each node's slot range, from its own CLUSTER SLOTS (the same on all).
	v, err := c.nodes[0].do(ctx, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	c.starts = make([]int, masters)
	for i := range c.starts {
		c.starts[i] = -1
	}
	ranges, _ := v.([]any)
	for _, rg := range ranges {
		r, _ := rg.([]any)
		if len(r) < 3 {
			continue
		}
		start, _ := r[0].(int64)
		master, _ := r[2].([]any)
		if len(master) < 2 {
			continue
		}
		port, _ := master[1].(int64)
		for i, n := range c.nodes {
			if strings.HasSuffix(n.addr, ":"+strconv.FormatInt(port, 10)) && (c.starts[i] < 0 || int(start) < c.starts[i]) {
				c.starts[i] = int(start)
			}
		}
	}
	u := url.URL{Scheme: "redis", Host: c.nodes[0].addr}
	q := url.Values{}
	for _, n := range c.nodes[1:] {
		q.Add("addr", n.addr)
	}
	u.RawQuery = q.Encode()
	c.url = u.String()
	return c, nil
}

func (c *clusterProc) stop() {
	for _, n := range c.nodes {
		n.stop()
	}
}

// nodeOf returns the index of the node serving slot s (each node serves
// one contiguous range, as both layouts above make them).
func (c *clusterProc) nodeOf(s int) int {
	best := -1
	for i, st := range c.starts {
		if st <= s && (best < 0 || st > c.starts[best]) {
			best = i
		}
	}
	return best
}

// commands implements storeServer: the commands of every node.
func (c *clusterProc) commands() int64 {
	var t int64
	for _, n := range c.nodeCommands() {
		t += n
	}
	return t
}

// cpu implements storeServer: the CPU seconds of every node.
func (c *clusterProc) cpu() float64 {
	var t float64
	for _, n := range c.nodes {
		s := n.cpu()
		if s < 0 {
			return -1
		}
		t += s
	}
	return t
}

// nodeCommands returns each node's commands since its last reset (INFO
// commandstats), less the driver's INFO and CONFIG and the clients'
// connection set-up and topology reads (CLUSTER, HELLO, CLIENT).
func (c *clusterProc) nodeCommands() []int64 {
	out := make([]int64, len(c.nodes))
	for i, n := range c.nodes {
		for name, calls := range n.commandStats() {
			if name == "info" || name == "hello" || strings.HasPrefix(name, "config") ||
				strings.HasPrefix(name, "cluster") || strings.HasPrefix(name, "client") {
				continue
			}
			out[i] += calls
		}
	}
	return out
}

func (c *clusterProc) resetStats() {
	for _, n := range c.nodes {
		if _, err := n.do(context.Background(), "CONFIG", "RESETSTAT"); err != nil {
			log.Fatalf("CONFIG RESETSTAT: %v", err)
		}
	}
}

// busPublishes returns how many PUBLISH messages each node has received
// over the cluster bus so far (CLUSTER INFO
// cluster_stats_messages_publish_received): a PUBLISH on one master is
// broadcast to every other node.
func (c *clusterProc) busPublishes() []int64 {
	out := make([]int64, len(c.nodes))
	for i, n := range c.nodes {
		v, err := n.do(context.Background(), "CLUSTER", "INFO")
		if err != nil {
			log.Fatalf("CLUSTER INFO: %v", err)
		}
		s, _ := v.(string)
		for _, l := range strings.Split(s, "\r\n") {
			if x, ok := strings.CutPrefix(l, "cluster_stats_messages_publish_received:"); ok {
				out[i], _ = strconv.ParseInt(x, 10, 64)
			}
		}
	}
	return out
}

func (c *clusterProc) nodeCPU() []float64 {
	out := make([]float64, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.cpu()
	}
	return out
}

// ClusterPhase is what one phase (the worker run, or the creation load) of
// one round cost each master.
type ClusterPhase struct {
	// Rate is steps/s (worker phase) or tools/call per second (creation).
	Rate     float64 `json:"rate"`
	P50Ms    float64 `json:"p50Ms,omitempty"`
	P99Ms    float64 `json:"p99Ms,omitempty"`
	Ops      int64   `json:"ops"`
	Errors   int64   `json:"errors,omitempty"`
	Seconds  float64 `json:"seconds"`
	Commands []int64 `json:"commandsPerMaster"`
	// CPU is each master's CPU seconds in the phase; WorkerCPU the worker
	// processes' together, APICPU the endpoint process's.
	CPU       []float64 `json:"cpuSecondsPerMaster"`
	WorkerCPU float64   `json:"workerCpuSeconds"`
	APICPU    float64   `json:"apiCpuSeconds"`
	// TaskShare is each master's share of the phase's tasks (worker
	// phase only).
	TaskShare []float64 `json:"taskSharePerMaster,omitempty"`
	// BusPublishes is how many PUBLISH messages each master received over
	// the cluster bus in the phase.
	BusPublishes []int64 `json:"busPublishesReceivedPerMaster"`
}

// busiest is the largest share of the commands one master served.
func (p ClusterPhase) busiest() float64 {
	var total, top int64
	for _, n := range p.Commands {
		total += n
		top = max(top, n)
	}
	if total == 0 {
		return 0
	}
	return float64(top) / float64(total)
}

func (p ClusterPhase) total() int64 {
	var t int64
	for _, n := range p.Commands {
		t += n
	}
	return t
}

// ClusterRound is one size's measurement in one round.
type ClusterRound struct {
	Masters int          `json:"masters"`
	Round   int          `json:"round"`
	Workers ClusterPhase `json:"workers"`
	Create  ClusterPhase `json:"create"`
	// Bus is what a PUBLISH and an SPUBLISH to the first master cost the
	// others (clusters of 3 or more masters).
	Bus *BusProbe `json:"bus,omitempty"`
}

// BusProbe is the CPU that N PUBLISHes (and then N SPUBLISHes) sent to the
// first master cost it and the other masters, in µs per message.
type BusProbe struct {
	Messages        int     `json:"messages"`
	PublishOrigin   float64 `json:"publishOriginUs"`
	PublishOthers   float64 `json:"publishOthersUs"` // mean over the other masters
	SPublishOrigin  float64 `json:"spublishOriginUs"`
	SPublishOthers  float64 `json:"spublishOthersUs"`
	SetOrigin       float64 `json:"setOriginUs"` // a SET of a key of the first master, for scale
	IdleOthersPerMs float64 `json:"idleOthersUsPerMs"`
}

// busProbe sends n PUBLISHes, then n SPUBLISHes, then n SETs, of a
// channel (key) in the first master's slots, pipelined in batches over
// one connection, and reads every master's CPU around each.
func busProbe(cl *clusterProc, n int) (*BusProbe, error) {
	first := cl.nodes[0]
	name := ""
	for i := 0; name == ""; i++ {
		if k := fmt.Sprintf("busprobe%d", i); cl.nodeOf(slots.Slot(k)) == 0 {
			name = k
		}
	}
	conn, err := net.Dial("tcp", first.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	run := func(cmd ...string) (origin, others float64, err error) {
		cpu0 := cl.nodeCPU()
		var one bytes.Buffer
		fmt.Fprintf(&one, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&one, "$%d\r\n%s\r\n", len(a), a)
		}
		const batch = 100
		buf := bytes.Repeat(one.Bytes(), batch)
		for sent := 0; sent < n; sent += batch {
			if _, err := conn.Write(buf); err != nil {
				return 0, 0, err
			}
			for range batch {
				if _, err := readRESP(br); err != nil {
					return 0, 0, err
				}
			}
		}
		cpu1 := cl.nodeCPU()
		origin = (cpu1[0] - cpu0[0]) * 1e6 / float64(n)
		for i := 1; i < len(cpu1); i++ {
			others += (cpu1[i] - cpu0[i]) * 1e6 / float64(n) / float64(len(cpu1)-1)
		}
		return origin, others, nil
	}
	b := &BusProbe{Messages: n}
	c0, t0 := cl.nodeCPU(), time.Now()
	time.Sleep(time.Second)
	c1 := cl.nodeCPU()
	for i := 1; i < len(c1); i++ {
		b.IdleOthersPerMs += (c1[i] - c0[i]) * 1e6 / float64(time.Since(t0).Milliseconds()) / float64(len(c1)-1)
	}
	if b.PublishOrigin, b.PublishOthers, err = run("PUBLISH", name, "1764673200000"); err != nil {
		return nil, err
	}
	if b.SPublishOrigin, b.SPublishOthers, err = run("SPUBLISH", name, "1764673200000"); err != nil {
		return nil, err
	}
	if b.SetOrigin, _, err = run("SET", name, "1764673200000"); err != nil {
		return nil, err
	}
	return b, nil
}

// ClusterReport is the whole -cluster run.
type ClusterReport struct {
	When         string         `json:"when"`
	GoVersion    string         `json:"goVersion"`
	CPUs         int            `json:"cpus"`
	Clients      int            `json:"clients"`
	Duration     string         `json:"duration"`
	Tasks        int            `json:"tasksPerWorkerPhase"`
	WorkerProcs  int            `json:"workerProcesses"`
	Rounds       []ClusterRound `json:"rounds"`
	LoadAverages []string       `json:"loadAverages"`
}

// runCluster measures each size in sizes for rounds rounds, the sizes in
// turn (the first rotating), and prints the table.
func runCluster(bin, dir string, sizes []int, rounds, workerProcs, tasks, clients int, duration time.Duration, jsonOut string) error {
	rep := &ClusterReport{When: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Clients: clients, Duration: duration.String(), Tasks: tasks, WorkerProcs: workerProcs}
	for round := range rounds {
		for k := range sizes {
			masters := sizes[(k+round)%len(sizes)]
			rep.LoadAverages = append(rep.LoadAverages, fmt.Sprintf("round %d, %d masters: %s", round+1, masters, loadAverage()))
			r, err := clusterRound(bin, dir, masters, workerProcs, tasks, clients, duration)
			if err != nil {
				return fmt.Errorf("%d masters, round %d: %w", masters, round+1, err)
			}
			r.Round = round + 1
			rep.Rounds = append(rep.Rounds, r)
			log.Printf("cluster: round %d, %d masters: %.0f steps/s (busiest master %.1f%%), %.0f creates/s (busiest %.1f%%)",
				round+1, masters, r.Workers.Rate, 100*r.Workers.busiest(), r.Create.Rate, 100*r.Create.busiest())
		}
	}
	printCluster(rep, sizes)
	if err := os.MkdirAll(filepath.Dir(jsonOut), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(jsonOut, b, 0o644)
}

// clusterRound runs both phases on a fresh cluster of masters masters,
// with an endpoint process and workerProcs worker processes.
func clusterRound(bin, dir string, masters, workerProcs, tasks, clients int, duration time.Duration) (ClusterRound, error) {
	r := ClusterRound{Masters: masters}
	cl, err := startCluster(dir, masters)
	if err != nil {
		return r, err
	}
	defer cl.stop()
	var procs []*proc
	defer func() {
		for _, p := range slices.Backward(procs) {
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
	api, ws, err := deploy(bin, []string{"REDIS_URL=" + cl.url}, workerProcs, start)
	if err != nil {
		return r, err
	}
	// Warm up: the scripts load on every master, connections open.
	c := &client{url: api.url}
	for range 4 * masters {
		waitDone(c, createOneStep(c), 2*time.Millisecond)
	}

	phase := func(run func() (rate float64, ops int64, p50, p99 float64, errs int64)) ClusterPhase {
		cl.resetStats()
		cpu0, w0, a0, bus0 := cl.nodeCPU(), cpuSeconds(ws...), cpuSeconds(api), cl.busPublishes()
		t0 := time.Now()
		var p ClusterPhase
		p.Rate, p.Ops, p.P50Ms, p.P99Ms, p.Errors = run()
		p.Seconds = time.Since(t0).Seconds()
		p.Commands = cl.nodeCommands()
		cpu1 := cl.nodeCPU()
		for i := range cpu1 {
			p.CPU = append(p.CPU, cpu1[i]-cpu0[i])
		}
		p.WorkerCPU, p.APICPU = cpuSeconds(ws...)-w0, cpuSeconds(api)-a0
		for i, n := range cl.busPublishes() {
			p.BusPublishes = append(p.BusPublishes, n-bus0[i])
		}
		return p
	}

	// Worker throughput: tasks of 10 no-op steps, created then awaited.
	var ids []string
	r.Workers = phase(func() (float64, int64, float64, float64, int64) {
		row, got := throughputIDs(api, "cluster", tasks)
		ids = got
		return row.PerSec, row.Ops, 0, 0, 0
	})
	r.Workers.TaskShare = make([]float64, masters)
	for _, id := range ids {
		r.Workers.TaskShare[cl.nodeOf(slots.Slot("{"+id+"}"))] += 1 / float64(len(ids))
	}
	// The cost of a PUBLISH's broadcast over the cluster bus, alone.
	if masters >= 3 {
		if r.Bus, err = busProbe(cl, 100_000); err != nil {
			return r, fmt.Errorf("bus probe: %w", err)
		}
	}
	// Creation: task-creating tools/call from clients keep-alive clients,
	// the workers running each new task's first step.
	r.Create = phase(func() (float64, int64, float64, float64, int64) {
		row := load(api.url, clients, duration, "tools/call", func(int64) (map[string]any, string) {
			return map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 3600}}, "slow_compute"
		})
		return row.PerSec, row.Ops, row.P50Ms, row.P99Ms, row.Errors
	})
	return r, nil
}

// throughputIDs is throughput, also returning the tasks' ids.
func throughputIDs(p *proc, store string, tasks int) (Row, []string) {
	c := &client{url: p.url}
	start := time.Now()
	ids := make([]string, 0, tasks)
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
		PerSec: float64(10*tasks) / el.Seconds(), Unit: "steps/s"}, ids
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// printCluster prints the Cluster table: per size, the median round's
// rates with every round's, and what each master served.
func printCluster(rep *ClusterReport, sizes []int) {
	fmt.Printf("\nmcptasks Cluster scaling: %s, %s, %d CPUs; per round and size a fresh cluster, 1 endpoint process and %d worker processes (4 consumers each); worker phase %d tasks × 10 no-op steps; creation phase %d clients for %s\n\n",
		rep.When, rep.GoVersion, rep.CPUs, rep.WorkerProcs, rep.Tasks, rep.Clients, rep.Duration)
	fmt.Println("| masters | worker steps/s, median (rounds) | tools/call creating a task, req/s, median (rounds) | create p50 / p99 ms (median round) | Redis commands per step / per create | busiest master's share of commands, worker phase (rounds) | busiest master's share, creation phase (rounds) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, m := range sizes {
		var rs []ClusterRound
		for _, r := range rep.Rounds {
			if r.Masters == m {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		med := func(f func(ClusterRound) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		list := func(f func(ClusterRound) float64, format string) string {
			var s []string
			for _, r := range rs {
				s = append(s, fmt.Sprintf(format, f(r)))
			}
			return strings.Join(s, " ")
		}
		byCreate := slices.Clone(rs)
		slices.SortFunc(byCreate, func(a, b ClusterRound) int { return cmp.Compare(a.Create.Rate, b.Create.Rate) })
		mc := byCreate[len(byCreate)/2].Create
		fmt.Printf("| %d | %.0f (%s) | %.0f (%s) | %.2f / %.2f | %.1f / %.1f | %s | %s |\n", m,
			med(func(r ClusterRound) float64 { return r.Workers.Rate }), list(func(r ClusterRound) float64 { return r.Workers.Rate }, "%.0f"),
			med(func(r ClusterRound) float64 { return r.Create.Rate }), list(func(r ClusterRound) float64 { return r.Create.Rate }, "%.0f"),
			mc.P50Ms, mc.P99Ms,
			med(func(r ClusterRound) float64 { return float64(r.Workers.total()) / float64(r.Workers.Ops) }),
			med(func(r ClusterRound) float64 { return float64(r.Create.total()) / float64(max(r.Create.Ops, 1)) }),
			list(func(r ClusterRound) float64 { return 100 * r.Workers.busiest() }, "%.1f%%"),
			list(func(r ClusterRound) float64 { return 100 * r.Create.busiest() }, "%.1f%%"))
	}
	fmt.Println()
	fmt.Println("Per master, every round (worker phase: share of the tasks / share of the commands / commands per second / CPU µs per step; creation phase: share of the commands / commands per second):")
	fmt.Println()
	fmt.Println("| masters | round | worker phase, per master | redis CPU µs per step, all masters / workers / endpoint | PUBLISHes received over the bus per step, per master | creation phase, per master |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rep.Rounds {
		var wp, cp []string
		wt, ct := r.Workers.total(), r.Create.total()
		var redisCPU float64
		for i := range r.Workers.Commands {
			redisCPU += r.Workers.CPU[i]
			wp = append(wp, fmt.Sprintf("%.1f%% / %.1f%% / %.0f/s / %.0f µs", 100*r.Workers.TaskShare[i],
				100*float64(r.Workers.Commands[i])/float64(max(wt, 1)), float64(r.Workers.Commands[i])/r.Workers.Seconds,
				r.Workers.CPU[i]*1e6/float64(r.Workers.Ops)))
			cp = append(cp, fmt.Sprintf("%.1f%% / %.0f/s", 100*float64(r.Create.Commands[i])/float64(max(ct, 1)),
				float64(r.Create.Commands[i])/r.Create.Seconds))
		}
		var bus []string
		for _, n := range r.Workers.BusPublishes {
			bus = append(bus, fmt.Sprintf("%.2f", float64(n)/float64(r.Workers.Ops)))
		}
		fmt.Printf("| %d | %d | %s | %.0f / %.0f / %.0f | %s | %s |\n", r.Masters, r.Round, strings.Join(wp, "; "),
			redisCPU*1e6/float64(r.Workers.Ops), r.Workers.WorkerCPU*1e6/float64(r.Workers.Ops), r.Workers.APICPU*1e6/float64(r.Workers.Ops),
			strings.Join(bus, " "), strings.Join(cp, "; "))
	}
	fmt.Println()
	fmt.Println("The cluster bus alone: 100,000 PUBLISHes, then SPUBLISHes, then SETs of one key, pipelined to the first master (CPU µs per message):")
	fmt.Println()
	fmt.Println("| masters | round | PUBLISH: first master / each other master | SPUBLISH: first / each other | SET: first | idle CPU of each other master, µs per ms |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rep.Rounds {
		if b := r.Bus; b != nil {
			fmt.Printf("| %d | %d | %.1f / %.1f | %.1f / %.1f | %.1f | %.1f |\n", r.Masters, r.Round, b.PublishOrigin, b.PublishOthers, b.SPublishOrigin, b.SPublishOthers, b.SetOrigin, b.IdleOthersPerMs)
		}
	}
	fmt.Printf("\nload averages at each round's start: %s\n", strings.Join(rep.LoadAverages, "; "))
}

// parseSizes reads -cluster's comma-separated master counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n == 2 || n > 64 {
			return nil, fmt.Errorf("-cluster: want master counts of 1 or 3..64, comma-separated, got %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// clusterMain builds cmd/mcptasks and runs the -cluster rows.
func clusterMain(sizes []int, rounds, workerProcs, tasks, clients int, duration time.Duration, jsonOut string) error {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return errors.New("-cluster needs redis-cli (apt-get install -y redis-tools)")
	}
	dir, err := os.MkdirTemp("", "mcptasks-bench-cluster")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "mcptasks")
	if err := buildMCPTasks(bin); err != nil {
		return err
	}
	return runCluster(bin, dir, sizes, rounds, workerProcs, tasks, clients, duration, jsonOut)
}

// buildMCPTasks builds this tree's cmd/mcptasks into bin, with the build
// tags in MCPTASKS_BENCH_TAGS (e.g. "pprof": see cmd/mcptasks/pprof.go).
func buildMCPTasks(bin string) error {
	args := []string{"build", "-o", bin}
	if tags := os.Getenv("MCPTASKS_BENCH_TAGS"); tags != "" {
		args = append(args, "-tags", tags)
	}
	build := exec.Command("go", append(args, "./cmd/mcptasks")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building cmd/mcptasks: %w", err)
	}
	return nil
}
