// Command scale measures how the cost of mcptasks grows with the number of
// live tasks: it fills one redis-server with 1k, 10k, 100k and 1M live
// tasks (the mix of fill.go: sleeping, waiting for input, awaiting a
// callback, of several principals), and at each size measures, against
// real `mcptasks serve --no-worker` and `mcptasks worker` processes over
// loopback HTTP:
//
//   - tasks/get of random live tasks and tools/call creating tasks: rate,
//     p50 and p99 (-clients keep-alive clients for -duration);
//   - tasks/list (2025-11-25) of one principal's tasks, first page;
//   - worker steps/s (10-step batch_report tasks on one worker process),
//     with the CPU per step of the worker and of redis-server;
//   - the sweeper: one sweep (as the cron runs it, in this process) when
//     nothing is due, and one with -due (500) entries due: commands (INFO
//     commandstats) and wall time;
//   - used_memory per live task, and MEMORY USAGE per kind of key;
//   - what -streams concurrent subscriptions/listen streams cost the
//     endpoint's process and redis-server.
//
// The tasks are filled through the store's own transitions (Create, and a
// worker's Claim and Commit that park it as the example handlers do),
// from many goroutines at once, and checked first against tasks the real
// processes made: the same keys, encodings, fields and index entries.
//
// The machine's drift cannot pass for growth: a second deployment (its own
// redis-server and processes) stays at the smallest size for the whole
// run, and at every size each latency scenario runs on it and on the
// growing one in alternation (A, B, A, B: -rounds rounds), so every size
// has its own reference measured in the same minute. The table shows the
// growing deployment's figures, their growth from the smallest size, the
// largest size over the reference measured with it (the growth with the
// drift taken out), and the smallest size over the reference (two equal
// deployments: the noise).
//
//	go run ./e2e/scale [-sizes 1000,10000,100000,1000000] [-duration 3s] [-rounds 2] \
//		[-clients 32] [-streams 1000] [-mix 5,3,2] [-json bench-results/scale.json] [-bin PATH]
//	go run ./e2e/scale -memory-only [-probe idle|steps|list] ...   # memory (and a diagnostic) only
//
// A before/after comparison runs the drivers of two trees in turns (see
// scripts/bench-scale-ab). scripts/bench --scale runs it after the usual
// benchmarks.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/redis/rueidis"
	"log"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/auth"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// The principals are shaped as an Auth0 tenant's (an issuer URL and an
// "auth0|..." subject): 71 bytes each, as Okta's and Entra ID's are longer
// than 64 too.
const (
	issuer   = "https://mcptasks-demo.eu.auth0.com/"
	audience = "https://mcp.mcptasks.test/mcp"
	secret   = "0123456789abcdef0123456789abcdef-scale"
	taskTTL  = 24 * time.Hour
)

type config struct {
	sizes       []int
	duration    time.Duration
	rounds      int
	clients     int
	streams     int
	principals  int
	workerTasks int
	fillers     int
	dueEntries  int
	jsonOut     string
	bin         string
	memoryOnly  bool
	storeFill   int
	probe       string
}

func main() {
	var cfg config
	sizes := flag.String("sizes", "1000,10000,100000,1000000", "live task counts, ascending")
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "how long each load scenario runs")
	flag.IntVar(&cfg.rounds, "rounds", 2, "rounds of each scenario at each size, alternating with the reference deployment")
	flag.IntVar(&cfg.clients, "clients", 32, "concurrent clients per load scenario")
	flag.IntVar(&cfg.streams, "streams", 1000, "concurrent subscriptions/listen streams")
	flag.IntVar(&cfg.principals, "principals", 10, "principals owning the tasks")
	flag.IntVar(&cfg.workerTasks, "worker-tasks", 150, "10-step tasks per worker measurement")
	flag.IntVar(&cfg.fillers, "fillers", 64, "goroutines filling Redis")
	flag.IntVar(&cfg.storeFill, "store-fill", 20000, "live tasks written through the store; the rest are copies of them (see fleet.clone)")
	flag.IntVar(&cfg.dueEntries, "due", 500, "due-index entries of a sweep with work")
	flag.StringVar(&cfg.jsonOut, "json", "bench-results/scale.json", "where to write the results as JSON (with -memory-only, default bench-results/scale-memory.json)")
	flag.StringVar(&cfg.bin, "bin", "", "a prebuilt mcptasks binary (default: build ./cmd/mcptasks)")
	flag.BoolVar(&cfg.memoryOnly, "memory-only", false, "fill the sizes and measure memory and the fill's Redis commands only (a quick check)")
	flag.StringVar(&cfg.probe, "probe", "", "with -memory-only, at the last size: idle (redis-server's CPU with nothing to do), steps or list (its time per worker step or tasks/list page by command, against the reference), get (the one-client tasks/get tail, with redis-server's latency monitor)")
	tableFlag := flag.String("table", "", "a JSON report of an earlier run: print its table and exit")
	compareFlag := flag.String("compare", "", "label=file,...: print the runs of two variants side by side (scripts/bench-scale-ab) and exit")
	mixFlag := flag.String("mix", "5,3,2", "tasks sleeping, waiting for input and awaiting a callback in every sum of them")
	flag.Parse()
	if *tableFlag != "" {
		b, err := os.ReadFile(*tableFlag)
		if err != nil {
			log.Fatal(err)
		}
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			log.Fatal(err)
		}
		printTable(&rep)
		return
	}
	if *compareFlag != "" {
		if err := compare(*compareFlag); err != nil {
			log.Fatal(err)
		}
		return
	}
	if m := strings.Split(*mixFlag, ","); len(m) == int(nKinds) {
		for k, v := range m {
			mix[k], _ = strconv.Atoi(strings.TrimSpace(v))
		}
	} else {
		log.Fatalf("-mix: want %d weights", nKinds)
	}
	log.SetFlags(log.Ltime)
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 100 {
			log.Fatalf("-sizes: %q is not a count of at least 100", s)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	if !slices.IsSorted(cfg.sizes) || cfg.rounds < 1 || cfg.principals < 1 {
		log.Fatal("-sizes must ascend; -rounds and -principals must be at least 1")
	}
	if cfg.memoryOnly {
		// A quick check must not overwrite the full run's results.
		set := false
		flag.Visit(func(f *flag.Flag) { set = set || f.Name == "json" })
		if !set {
			cfg.jsonOut = "bench-results/scale-memory.json"
		}
	}
	if err := run(cfg); err != nil {
		log.Fatal(err)
	}
}

// deployment is one redis-server with its endpoint process, its worker
// process (while measuring), an in-process bundle on the same
// configuration (the sweeper's cron, and the store the fill writes
// through) and the live tasks filled into it.
type deployment struct {
	name    string
	bin     string
	dir     string
	env     []string
	redis   *redisServer
	api     *proc
	apiAddr string
	worker  *proc
	bundle  *bundle.Bundle
	prefix  string
	owners  []string
	tokens  []string
	// creators are the principals whose tokens the measurements that
	// create tasks use (tools/call, the worker's tasks): not the fleet's.
	creators   []string
	fleet      *fleet
	filler     *filler
	baseMemory int64
	// created are the tasks the measurements made, purged after each size.
	created []string
}

func newDeployment(ctx context.Context, name, bin, dir string, principals, streams int) (*deployment, error) {
	d := &deployment{name: name, bin: bin, dir: dir, prefix: "mcptasks:"}
	var err error
	if d.redis, err = startRedis(dir); err != nil {
		return nil, err
	}
	d.apiAddr = freeAddr()
	d.env = []string{
		"REDIS_URL=redis://" + d.redis.addr,
		"MCPTASKS_AUTH_ISSUER=" + issuer, "MCPTASKS_AUTH_AUDIENCE=" + audience, "MCPTASKS_AUTH_HS256_SECRET=" + secret,
		"MCPTASKS_TASK_TTL=" + taskTTL.String(),
		// The processes never sweep: this driver runs the sweeps it measures.
		// The wake horizon is a deployment's (which the long interval would
		// have raised to 10 days).
		"MCPTASKS_SWEEP_INTERVAL=24h", "MCPTASKS_WAKE_HORIZON=1h",
		"MCPTASKS_PUBLIC_URL=http://" + d.apiAddr,
		"MCPTASKS_MAX_STREAMS=" + strconv.Itoa(streams+64),
		"MCPTASKS_MAX_STREAMS_PER_PRINCIPAL=" + strconv.Itoa(streams/principals+16),
		"MCPTASKS_LOG_LEVEL=ERROR",
		// The store's path at every size: a read cache answers repeated
		// reads of one task from memory, and would measure how often the
		// random reads repeat (often among 1k tasks, seldom among 1M),
		// not how the store grows.
		"MCPTASKS_READ_CACHE=0",
	}
	if d.api, err = startProc(bin, d.env, d.apiAddr, "serve", "--no-worker"); err != nil {
		d.close()
		return nil, err
	}
	envMap := map[string]string{}
	for _, kv := range d.env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	bcfg, err := bundle.FromEnv(func(k string) string { return envMap[k] })
	if err != nil {
		d.close()
		return nil, err
	}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if d.bundle, err = bundle.New(ctx, bcfg, lg, examples.App); err != nil {
		d.close()
		return nil, err
	}
	for i := range principals {
		sub := fmt.Sprintf("auth0|6650f1c2a9b8d7e6f5a4%04x", i)
		tok, err := auth.MintDevToken([]byte(secret), issuer, audience, sub, 24*time.Hour, nil)
		if err != nil {
			d.close()
			return nil, err
		}
		d.owners = append(d.owners, auth.Principal(issuer, sub, ""))
		d.tokens = append(d.tokens, tok)
		ctok, err := auth.MintDevToken([]byte(secret), issuer, audience, fmt.Sprintf("auth0|6650f1c2a9b8d7e6f5a4c%03x", i), 24*time.Hour, nil)
		if err != nil {
			d.close()
			return nil, err
		}
		d.creators = append(d.creators, ctok)
	}
	o := d.bundle.Tasks.Options()
	q, ok := d.bundle.Queue.(*redisqueue.Queue)
	if !ok {
		d.close()
		return nil, fmt.Errorf("the bundle's queue is a %T, not the Redis queue", d.bundle.Queue)
	}
	d.filler = &filler{store: d.bundle.Tasks.Store(), queue: q, visibility: bcfg.Visibility, ttl: taskTTL, poll: o.PollInterval, lease: o.Lease}
	d.fleet = newFleet(d.owners)
	return d, nil
}

// grow fills the deployment up to n live tasks: through the store up to
// -store-fill, then copies of those.
func (d *deployment) grow(ctx context.Context, n int, cfg config) error {
	progress := func(done int) { log.Printf("%s: filled %d", d.name, done) }
	if d.fleet.n < cfg.storeFill {
		if err := d.fleet.fill(ctx, d.filler, min(n, cfg.storeFill), cfg.fillers, progress); err != nil {
			return err
		}
	}
	if n <= d.fleet.n {
		return nil
	}
	first := d.fleet.templates == nil
	zs := d.indexes()
	if err := d.fleet.clone(ctx, d.redis, d.prefix, zs, n, 4, redisstore.DefaultMaxListed, redisstore.DefaultMaxIndexed, progress); err != nil {
		return err
	}
	if !first {
		return nil
	}
	// A copy sits in Redis as its template does.
	for k, c := range d.fleet.copies {
		if c[0] == "" {
			continue
		}
		tmpl, cp := d.redis.shapeOf(ctx, d.prefix, c[0], taskTTL, zs), d.redis.shapeOf(ctx, d.prefix, c[1], taskTTL, zs)
		if diffs := fidelity(tmpl, cp); len(diffs) > 0 {
			return fmt.Errorf("a copy of a %s task differs from its template: %v; MEMORY USAGE %v, copy %v", kindNames[k], diffs, tmpl.bytes, cp.bytes)
		}
		if !maps.Equal(tmpl.bytes, cp.bytes) {
			// A hash in the hash table encoding is restored with its table
			// sized for its fields at once, and may take a size class
			// more or less than the original: say so (-store-fill up to the
			// largest size avoids copies).
			log.Printf("fidelity: a copy of a %s task takes other memory than its template: MEMORY USAGE %v, copy %v", kindNames[k], tmpl.bytes, cp.bytes)
			continue
		}
		log.Printf("fidelity: a copy of a %s task sits in Redis as its template: MEMORY USAGE %v", kindNames[k], cp.bytes)
	}
	return nil
}

func (d *deployment) startWorker() error {
	if d.worker != nil {
		return nil
	}
	w, err := startProc(d.bin, d.env, "", "worker")
	d.worker = w
	return err
}

func (d *deployment) stopWorker() {
	d.worker.stop()
	d.worker = nil
}

func (d *deployment) close() {
	d.worker.stop()
	d.api.stop()
	if d.bundle != nil {
		d.bundle.Close()
	}
	if d.redis != nil {
		d.redis.close()
	}
}

// purge deletes what the measurements created.
func (d *deployment) purge(ctx context.Context) {
	d.drained(ctx)
	d.redis.purge(ctx, d.prefix, d.created, d.indexes())
	d.created = nil
}

// checkFidelity makes one task of each kind through the real processes
// (HTTP, then the worker process) and one through the fill, compares how
// they sit in Redis, and deletes both.
func (d *deployment) checkFidelity(ctx context.Context) error {
	if err := d.startWorker(); err != nil {
		return err
	}
	c := newClient(d.api.url, d.tokens[0])
	var specs [nKinds]spec
	var reals [nKinds]string
	for k := range nKinds {
		specs[k] = specFor(k, int(k), d.owners[0])
		s := specs[k]
		var t struct {
			TaskID string `json:"taskId"`
		}
		if err := c.call("tools/call", map[string]any{"name": s.tool, "arguments": s.args}, s.tool, &t); err != nil {
			return fmt.Errorf("fidelity: %s: %w", s.tool, err)
		}
		reals[k] = t.TaskID
		// Parked once the worker released it after its first claim.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			// (No lease: "0", or from the format of 2026-12-03 no field.)
			h, _ := d.redis.c.Do(ctx, d.redis.c.B().Hmget().Key(d.prefix+"{"+t.TaskID+"}").Field("gen", "lease").Build()).ToArray()
			if len(h) == 2 {
				gen, _ := h[0].ToString()
				lease, err := h[1].ToString()
				if gen == "1" && (lease == "0" || rueidis.IsRedisNil(err)) {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("fidelity: %s task %s did not park", s.tool, t.TaskID)
			}
		}
	}
	// The fill claims its tasks itself: no worker may take them.
	d.stopWorker()
	var problems []string
	for k := range nKinds {
		id, err := d.filler.one(ctx, specs[k])
		if err != nil {
			return fmt.Errorf("fidelity: filling %s: %w", specs[k].tool, err)
		}
		zs := d.indexes()
		real, filled := d.redis.shapeOf(ctx, d.prefix, reals[k], taskTTL, zs), d.redis.shapeOf(ctx, d.prefix, id, taskTTL, zs)
		for _, diff := range fidelity(real, filled) {
			problems = append(problems, kindNames[k]+": "+diff)
			if os.Getenv("SCALE_DEBUG") != "" {
				for _, x := range []string{reals[k], id} {
					l, _ := d.redis.c.Do(ctx, d.redis.c.B().Lrange().Key(d.prefix+"{"+x+"}:j").Start(0).Stop(-1).Build()).AsStrSlice()
					dbg, _ := d.redis.c.Do(ctx, d.redis.c.B().DebugObject().Key(d.prefix+"{"+x+"}:j").Build()).ToString()
					log.Printf("DEBUG %s %q %s", x, l, dbg)
				}
			}
		}
		log.Printf("fidelity %s: keys %v, MEMORY USAGE %v (real) %v (filled), indexed in %v", kindNames[k], real.keys, real.bytes, filled.bytes, real.scores)
		d.created = append(d.created, reals[k], id)
	}
	d.purge(ctx)
	if len(problems) > 0 {
		return errors.New("filled tasks differ from real ones:\n" + strings.Join(problems, "\n"))
	}
	return nil
}

// result is one size's measurements; the slices hold one value per
// round, on the growing deployment (Big) and the reference (Ref).
type result struct {
	Size        int        `json:"size"`
	FillSeconds float64    `json:"fillSeconds"`
	Memory      memory     `json:"memory"`
	Get         pair[rate] `json:"tasksGet"`
	Create      pair[rate] `json:"toolsCall"`
	List        pair[rate] `json:"tasksList"`
	// One client at a time: the service time, without queueing.
	Get1    pair[rate] `json:"tasksGet1"`
	Create1 pair[rate] `json:"toolsCall1"`
	List1   pair[rate] `json:"tasksList1"`
	// Steps: steps/s, worker CPU µs/step, redis-server CPU µs/step.
	Steps     pair[[3]float64] `json:"workerSteps"`
	SweepIdle pair[sweepCost]  `json:"sweepIdle"`
	SweepDue  pair[sweepCost]  `json:"sweepDue"`
	Streams   streams          `json:"streams"`
}

type pair[T any] struct {
	Big []T `json:"big"`
	Ref []T `json:"ref"`
}

// Report is the whole run.
type Report struct {
	When       string   `json:"when"`
	GoVersion  string   `json:"goVersion"`
	CPUs       int      `json:"cpus"`
	Machine    string   `json:"machine"`
	Command    string   `json:"command"`
	WallTime   string   `json:"wallTime"`
	RefSize    int      `json:"refSize"`
	Clients    int      `json:"clients"`
	Rounds     int      `json:"rounds"`
	Duration   string   `json:"duration"`
	Principals int      `json:"principals"`
	Results    []result `json:"results"`
}

func run(cfg config) error {
	t0 := time.Now()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "mcptasks-scale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := cfg.bin
	if bin == "" {
		bin = filepath.Join(dir, "mcptasks")
		build := exec.Command("go", "build", "-o", bin, "./cmd/mcptasks")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building cmd/mcptasks: %w", err)
		}
	}
	var deps []*deployment
	defer func() {
		for _, d := range deps {
			d.close()
		}
	}()
	for _, name := range []string{"ref", "big"} {
		sub := filepath.Join(dir, name)
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		d, err := newDeployment(ctx, name, bin, sub, cfg.principals, cfg.streams)
		if err != nil {
			return fmt.Errorf("%s deployment: %w", name, err)
		}
		deps = append(deps, d)
	}
	ref, big := deps[0], deps[1]
	if err := big.checkFidelity(ctx); err != nil {
		return err
	}
	log.Print("fidelity: the filled tasks sit in Redis as the real ones do")
	for _, d := range deps {
		d.baseMemory = d.redis.usedMemory()
	}
	if err := ref.grow(ctx, cfg.sizes[0], cfg); err != nil {
		return err
	}
	rep := &Report{When: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Machine: machine(), Command: "go run ./e2e/scale " + strings.Join(os.Args[1:], " "), RefSize: cfg.sizes[0], Principals: cfg.principals,
		Clients: cfg.clients, Rounds: cfg.rounds, Duration: cfg.duration.String()}
	for _, size := range cfg.sizes {
		res := result{Size: size}
		cpu0 := big.redis.redisCPU()
		f0 := time.Now()
		if err := big.grow(ctx, size, cfg); err != nil {
			return err
		}
		res.FillSeconds = time.Since(f0).Seconds()
		if cfg.memoryOnly {
			res.Memory = big.memoryOf(ctx, 200)
			log.Printf("size %d: redis-server CPU %.0f µs per filled task", size, (big.redis.redisCPU()-cpu0)*1e6/float64(size-prevSize(cfg.sizes, size)))
			log.Printf("size %d: filled in %.1fs; %.0f bytes of used_memory per live task; MEMORY USAGE per task %v; tables %.0f + %.0f per task; %d keys",
				size, res.FillSeconds, res.Memory.PerTask, roundMap(res.Memory.ByKey), res.Memory.MainDict, res.Memory.Expires, res.Memory.Keys)
			rep.Results = append(rep.Results, res)
			continue
		}
		log.Printf("size %d: filled in %.1fs (%.0f tasks/s)", size, res.FillSeconds, float64(size-prevSize(cfg.sizes, size))/res.FillSeconds)
		time.Sleep(time.Second)
		res.Memory = big.memoryOf(ctx, 50)
		log.Printf("size %d: %.0f bytes of used_memory per live task", size, res.Memory.PerTask)
		for _, d := range deps {
			if err := d.startWorker(); err != nil {
				return err
			}
		}
		time.Sleep(500 * time.Millisecond)
		// Each scenario in rounds, the deployments taking turns (the order
		// rotating), so both see the same moment of the machine.
		turns := func(f func(d *deployment, isBig bool)) {
			for r := range cfg.rounds {
				order := []*deployment{ref, big}
				if r%2 == 1 {
					order = []*deployment{big, ref}
				}
				for _, d := range order {
					f(d, d == big)
				}
			}
		}
		turns(func(d *deployment, isBig bool) {
			addTo(&res.SweepIdle, isBig, d.sweep(ctx, 0))
			addTo(&res.SweepDue, isBig, d.sweep(ctx, cfg.dueEntries))
		})
		// One client first in each turn (as tools/call does): its rows are
		// the service time without queueing, which right after the
		// deployment was saturated measured the recovery from that too
		// (the one-client tasks/get p99 at 1M: 1.59-1.71× the reference
		// measured after 32 clients, 1.0× alone; BENCHMARKS.md, "Scale").
		turns(func(d *deployment, isBig bool) {
			addTo(&res.Get1, isBig, d.gets(1, cfg.duration/2))
			addTo(&res.Get, isBig, d.gets(cfg.clients, cfg.duration))
		})
		turns(func(d *deployment, isBig bool) {
			addTo(&res.List1, isBig, d.lists(1, cfg.duration/2))
			addTo(&res.List, isBig, d.lists(cfg.clients/4, cfg.duration))
		})
		turns(func(d *deployment, isBig bool) {
			s, w, r := d.workerSteps(cfg.workerTasks)
			addTo(&res.Steps, isBig, [3]float64{s, w, r})
		})
		turns(func(d *deployment, isBig bool) {
			addTo(&res.Create1, isBig, d.creates(1, cfg.duration/2))
			addTo(&res.Create, isBig, d.creates(cfg.clients, cfg.duration))
			d.drained(ctx)
		})
		res.Streams = big.listen(cfg.streams, 3*time.Second)
		for _, d := range deps {
			d.purge(ctx)
			d.stopWorker()
		}
		rep.Results = append(rep.Results, res)
		printSize(res)
	}
	rep.WallTime = time.Since(t0).Round(time.Second).String()
	if cfg.memoryOnly {
		switch cfg.probe {
		case "idle":
			idleProbe(big)
		case "steps":
			stepProbe(ctx, ref, big)
		case "list":
			listProbe(ref, big)
		case "get":
			getProbe(ref, big)
		}
	} else {
		printTable(rep)
	}
	if err := os.MkdirAll(filepath.Dir(cfg.jsonOut), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	return os.WriteFile(cfg.jsonOut, b, 0o644)
}

func prevSize(sizes []int, size int) int {
	i := slices.Index(sizes, size)
	if i == 0 {
		return 0
	}
	return sizes[i-1]
}

func addTo[T any](p *pair[T], isBig bool, v T) {
	if isBig {
		p.Big = append(p.Big, v)
	} else {
		p.Ref = append(p.Ref, v)
	}
}

// machine describes the CPU and memory.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			kb, _ := strconv.ParseFloat(f[1], 64)
			mem = fmt.Sprintf("%.0f GiB", kb/1024/1024)
		}
	}
	out, _ := exec.Command("redis-server", "--version").Output()
	rv := ""
	if f := strings.Fields(string(out)); len(f) >= 3 {
		rv = "redis-server " + strings.TrimPrefix(f[2], "v=")
	}
	return fmt.Sprintf("%d cores (%s), %s, %s, %s", runtime.NumCPU(), model, mem, runtime.Version(), rv)
}

// median returns the median of f over vs.
func median[T any](vs []T, f func(T) float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	x := make([]float64, len(vs))
	for i, v := range vs {
		x[i] = f(v)
	}
	slices.Sort(x)
	if len(x)%2 == 0 {
		return (x[len(x)/2-1] + x[len(x)/2]) / 2
	}
	return x[len(x)/2]
}

func printSize(r result) {
	g := func(p pair[rate], f func(rate) float64) (float64, float64) { return median(p.Big, f), median(p.Ref, f) }
	perSec := func(r rate) float64 { return r.PerSec }
	p50 := func(r rate) float64 { return r.P50Ms }
	p99 := func(r rate) float64 { return r.P99Ms }
	log.Printf("size %d:", r.Size)
	for _, s := range []struct {
		name string
		p    pair[rate]
	}{{"tasks/get", r.Get}, {"tools/call", r.Create}, {"tasks/list", r.List}, {"get 1", r.Get1}, {"create 1", r.Create1}, {"list 1", r.List1}} {
		b1, r1 := g(s.p, perSec)
		b2, r2 := g(s.p, p50)
		b3, r3 := g(s.p, p99)
		log.Printf("  %-10s %6.0f/s p50 %.2f p99 %.2f ms (ref %6.0f/s p50 %.2f p99 %.2f); items %v / %v", s.name, b1, b2, b3, r1, r2, r3,
			median(s.p.Big, func(v rate) float64 { return v.Items }), median(s.p.Ref, func(v rate) float64 { return v.Items }))
	}
	log.Printf("  worker     %6.0f steps/s (ref %.0f)", median(r.Steps.Big, func(v [3]float64) float64 { return v[0] }), median(r.Steps.Ref, func(v [3]float64) float64 { return v[0] }))
	cmds := func(s sweepCost) float64 { return s.Commands }
	wall := func(s sweepCost) float64 { return s.WallMs }
	log.Printf("  sweep idle %.0f cmds %.2f ms; with %d due %.0f cmds %.1f ms (ref %.0f cmds %.1f ms)", median(r.SweepIdle.Big, cmds), median(r.SweepIdle.Big, wall),
		r.SweepDue.Big[0].Examined, median(r.SweepDue.Big, cmds), median(r.SweepDue.Big, wall), median(r.SweepDue.Ref, cmds), median(r.SweepDue.Ref, wall))
	log.Printf("  memory     %.0f B/task, by key %v", r.Memory.PerTask, roundMap(r.Memory.ByKey))
	log.Printf("  streams    %+v", r.Streams)
}

func roundMap(m map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = int(v + 0.5)
	}
	return out
}

// row is one line of the scale table: a metric's value at each size.
type row struct {
	name string
	big  []float64
	ref  []float64 // nil: no reference (measured on the growing deployment only)
	f    string
}

func printTable(rep *Report) {
	rs := rep.Results
	col := func(f func(result) float64) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = f(r)
		}
		return out
	}
	rateRows := func(name string, get func(result) pair[rate]) []row {
		m := func(f func(rate) float64, big bool) func(result) float64 {
			return func(r result) float64 {
				if big {
					return median(get(r).Big, f)
				}
				return median(get(r).Ref, f)
			}
		}
		perSec := func(r rate) float64 { return r.PerSec }
		p50 := func(r rate) float64 { return r.P50Ms }
		p99 := func(r rate) float64 { return r.P99Ms }
		return []row{
			{name + " rate (req/s)", col(m(perSec, true)), col(m(perSec, false)), "%.0f"},
			{name + " p50 (ms)", col(m(p50, true)), col(m(p50, false)), "%.2f"},
			{name + " p99 (ms)", col(m(p99, true)), col(m(p99, false)), "%.2f"},
		}
	}
	sw := func(get func(result) pair[sweepCost], f func(sweepCost) float64, big bool) func(result) float64 {
		return func(r result) float64 {
			if big {
				return median(get(r).Big, f)
			}
			return median(get(r).Ref, f)
		}
	}
	st := func(i int, big bool) func(result) float64 {
		return func(r result) float64 {
			if big {
				return median(r.Steps.Big, func(v [3]float64) float64 { return v[i] })
			}
			return median(r.Steps.Ref, func(v [3]float64) float64 { return v[i] })
		}
	}
	cmds := func(s sweepCost) float64 { return s.Commands }
	wall := func(s sweepCost) float64 { return s.WallMs }
	idle := func(r result) pair[sweepCost] { return r.SweepIdle }
	due := func(r result) pair[sweepCost] { return r.SweepDue }
	var rows []row
	latRows := func(name string, get func(result) pair[rate]) []row {
		return rateRows(name, get)[1:]
	}
	rows = append(rows, rateRows(fmt.Sprintf("tasks/get, %d clients", rep.Clients), func(r result) pair[rate] { return r.Get })...)
	rows = append(rows, latRows("tasks/get, 1 client", func(r result) pair[rate] { return r.Get1 })...)
	rows = append(rows, rateRows(fmt.Sprintf("tools/call creating a task, %d clients", rep.Clients), func(r result) pair[rate] { return r.Create })...)
	rows = append(rows, latRows("tools/call creating a task, 1 client", func(r result) pair[rate] { return r.Create1 })...)
	rows = append(rows, rateRows(fmt.Sprintf("tasks/list first page, %d clients", rep.Clients/4), func(r result) pair[rate] { return r.List })...)
	rows = append(rows, latRows("tasks/list first page, 1 client", func(r result) pair[rate] { return r.List1 })...)
	rows = append(rows, row{"— tasks in a first page", col(func(r result) float64 { return median(r.List.Big, func(v rate) float64 { return v.Items }) }),
		col(func(r result) float64 { return median(r.List.Ref, func(v rate) float64 { return v.Items }) }), "%.1f"})
	rows = append(rows,
		row{"worker steps/s", col(st(0, true)), col(st(0, false)), "%.0f"},
		row{"worker CPU per step (µs)", col(st(1, true)), col(st(1, false)), "%.0f"},
		row{"redis-server CPU per step (µs)", col(st(2, true)), col(st(2, false)), "%.0f"},
		row{"idle sweep: commands", col(sw(idle, cmds, true)), col(sw(idle, cmds, false)), "%.0f"},
		row{"idle sweep: wall (ms)", col(sw(idle, wall, true)), col(sw(idle, wall, false)), "%.2f"},
		row{fmt.Sprintf("sweep of %d due entries: commands", rs[0].SweepDue.Big[0].Examined), col(sw(due, cmds, true)), col(sw(due, cmds, false)), "%.0f"},
		row{fmt.Sprintf("sweep of %d due entries: wall (ms)", rs[0].SweepDue.Big[0].Examined), col(sw(due, wall, true)), col(sw(due, wall, false)), "%.1f"},
		row{"used_memory per live task (B)", col(func(r result) float64 { return r.Memory.PerTask }), nil, "%.0f"},
	)
	var keyNames []string
	for k := range rs[len(rs)-1].Memory.ByKey {
		keyNames = append(keyNames, k)
	}
	slices.SortFunc(keyNames, func(a, b string) int {
		return cmp.Compare(rs[len(rs)-1].Memory.ByKey[b], rs[len(rs)-1].Memory.ByKey[a])
	})
	for _, k := range keyNames {
		rows = append(rows, row{"— MEMORY USAGE per task: " + k, col(func(r result) float64 { return r.Memory.ByKey[k] }), nil, "%.0f"})
	}
	rows = append(rows,
		row{"— keyspace tables per task (main + expires)", col(func(r result) float64 { return r.Memory.MainDict + r.Memory.Expires }), nil, "%.0f"},
		row{fmt.Sprintf("%d listen streams: seconds to open", rs[0].Streams.N), col(func(r result) float64 { return r.Streams.OpenSeconds }), nil, "%.2f"},
		row{"— endpoint RSS while open, over before (MiB)", col(func(r result) float64 { return r.Streams.RSSOpenMiB - r.Streams.RSSBeforeMiB }), nil, "%.1f"},
		row{"— endpoint CPU while open and idle (ms/s)", col(func(r result) float64 { return r.Streams.ServerCPUMsPerSec }), nil, "%.1f"},
		row{"— redis-server CPU while open (ms/s)", col(func(r result) float64 { return r.Streams.RedisCPUMsPerSec }), nil, "%.1f"},
		row{"— Redis connections added", col(func(r result) float64 { return float64(r.Streams.RedisClients) }), nil, "%.0f"},
		row{"— Redis used_memory added (KiB)", col(func(r result) float64 { return float64(r.Streams.RedisBytes) / 1024 }), nil, "%.0f"},
		row{"— a cancel's notification to its stream (ms)", col(func(r result) float64 { return r.Streams.NotifyMs }), nil, "%.1f"},
		row{"fill rate (tasks/s, through the store)", col(func(r result) float64 {
			return float64(r.Size-prevSize(sizesOf(rs), r.Size)) / r.FillSeconds
		}), nil, "%.0f"},
	)
	fmt.Printf("\nmcptasks scale: %s, %s, %d principals, reference deployment at %d live tasks\n%s\n\n", rep.When, rep.Machine, rep.Principals, rep.RefSize, rep.Command)
	head := "| metric |"
	sep := "|---|"
	for _, r := range rs {
		head += " " + humanSize(r.Size) + " |"
		sep += "---|"
	}
	last := humanSize(rs[len(rs)-1].Size) + "/" + humanSize(rs[0].Size)
	head += " growth " + last + " | " + humanSize(rs[len(rs)-1].Size) + " ÷ reference ¹ | " + humanSize(rs[0].Size) + " ÷ reference ² |"
	sep += "---|---|---|"
	fmt.Println(head)
	fmt.Println(sep)
	for _, r := range rows {
		line := "| " + r.name + " |"
		for _, v := range r.big {
			line += " " + fmt.Sprintf(r.f, v) + " |"
		}
		n := len(r.big) - 1
		line += " " + fmtRatio(r.big[n], r.big[0]) + " |"
		if r.ref != nil && r.ref[0] > 0 && r.ref[n] > 0 {
			line += " " + fmtRatio(r.big[n], r.ref[n]) + " | " + fmtRatio(r.big[0], r.ref[0]) + " |"
		} else {
			line += " – | – |"
		}
		fmt.Println(line)
	}
	fmt.Printf("\n¹ at %s, the growing deployment's value over the reference deployment's (%s live tasks), the two measured in turns in the same minutes (A, B, A, B; medians of %d rounds): the growth from %s with the machine's drift taken out.\n"+
		"² the same at %s, where both hold %s tasks: how far two equal deployments differ on this machine (the noise of the column before).\nWall time of the run: %s.\n",
		humanSize(rs[len(rs)-1].Size), humanSize(rep.RefSize), rep.Rounds, humanSize(rep.RefSize), humanSize(rs[0].Size), humanSize(rs[0].Size), rep.WallTime)
}

func sizesOf(rs []result) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.Size)
	}
	return out
}

func humanSize(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return strconv.Itoa(n/1000000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// idleProbe prints redis-server's CPU while nothing but the deployment's
// own processes run (-probe idle).
func idleProbe(d *deployment) {
	sample := func(what string) {
		for range 6 {
			c0, t0 := d.redis.redisCPU(), time.Now()
			time.Sleep(5 * time.Second)
			cs := d.redis.info("stats")
			log.Printf("idle probe, %s: redis-server CPU %.1f ms/s; ops/s %s, expired_keys %s, keyspace misses %s", what,
				(d.redis.redisCPU()-c0)*1000/time.Since(t0).Seconds(), cs["instantaneous_ops_per_sec"], cs["expired_keys"], cs["keyspace_misses"])
		}
	}
	sample("endpoint only")
	if err := d.startWorker(); err != nil {
		log.Print(err)
		return
	}
	sample("endpoint and a worker process")
}

// stepProbe prints where redis-server's time per worker step goes, on the
// reference and the growing deployment in turns (-probe steps).
func stepProbe(ctx context.Context, ref, big *deployment) {
	for _, d := range []*deployment{ref, big} {
		if err := d.startWorker(); err != nil {
			log.Print(err)
			return
		}
	}
	for r := range 3 {
		for _, d := range []*deployment{ref, big} {
			u0, c0 := d.redis.commandUsec(), d.redis.commandStats()
			sps, w, rc := d.workerSteps(150)
			u1, c1 := d.redis.commandUsec(), d.redis.commandStats()
			type cost struct {
				name        string
				us, perCall float64
			}
			var cs []cost
			for name, v := range u1 {
				if n := c1[name] - c0[name]; n > 0 {
					cs = append(cs, cost{name, float64(v-u0[name]) / 1500, float64(v-u0[name]) / float64(n)})
				}
			}
			slices.SortFunc(cs, func(a, b cost) int { return cmp.Compare(b.us, a.us) })
			var top []string
			for _, c := range cs[:min(10, len(cs))] {
				top = append(top, fmt.Sprintf("%s %.1fµs/step (%.2fµs/call)", c.name, c.us, c.perCall))
			}
			log.Printf("step probe %d %s (%d tasks): %.0f steps/s, CPU/step worker %.0f redis %.0f µs; %s", r, d.name, d.fleet.n, sps, w, rc, strings.Join(top, ", "))
			d.purge(ctx)
		}
	}
}

// listProbe prints where redis-server's time per tasks/list page goes, on
// the reference and the growing deployment in turns (-probe list).
func listProbe(ref, big *deployment) {
	for r := range 3 {
		for _, d := range []*deployment{ref, big} {
			u0, c0 := d.redis.commandUsec(), d.redis.commandStats()
			res := d.lists(1, 3*time.Second)
			u1, c1 := d.redis.commandUsec(), d.redis.commandStats()
			pages := float64(res.Ops)
			type cost struct {
				name        string
				us, perCall float64
			}
			var cs []cost
			for name, v := range u1 {
				if n := c1[name] - c0[name]; n > 0 {
					cs = append(cs, cost{name, float64(v-u0[name]) / pages, float64(v-u0[name]) / float64(n)})
				}
			}
			slices.SortFunc(cs, func(a, b cost) int { return cmp.Compare(b.us, a.us) })
			var top []string
			for _, c := range cs[:min(8, len(cs))] {
				top = append(top, fmt.Sprintf("%s %.0fµs/page (%.2fµs/call)", c.name, c.us, c.perCall))
			}
			log.Printf("list probe %d %s (%d tasks): p50 %.2f ms, %.1f tasks a page; %s", r, d.name, d.fleet.n, res.P50Ms, res.Items, strings.Join(top, ", "))
		}
	}
}

// getProbe measures tasks/get from one client, the reference and the big
// deployment in turns (4 rounds of 3 s without the worker processes, then
// 4 with them), with the 99.9th percentile and what redis-server's latency
// monitor saw (events of 1 ms or more: LATENCY LATEST) during each round.
func getProbe(ref, big *deployment) {
	ctx := context.Background()
	for r := range 8 {
		if r == 4 {
			for _, d := range []*deployment{ref, big} {
				if err := d.startWorker(); err != nil {
					log.Fatal(err)
				}
				defer d.stopWorker()
			}
			time.Sleep(500 * time.Millisecond)
		}
		for _, d := range []*deployment{ref, big} {
			c := d.redis.c
			_ = c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("latency-monitor-threshold", "1").Build()).Error()
			_ = c.Do(ctx, c.B().LatencyReset().Build()).Error()
			_ = c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "1000").Build()).Error()
			_ = c.Do(ctx, c.B().SlowlogReset().Build()).Error()
			res := d.gets(1, 3*time.Second)
			slow, _ := c.Do(ctx, c.B().SlowlogGet().Count(5).Build()).ToArray()
			var slowest []string
			for _, e := range slow {
				f, _ := e.ToArray()
				if len(f) >= 4 {
					us, _ := f[2].AsInt64()
					args, _ := f[3].AsStrSlice()
					if len(args) > 3 {
						args = args[:3]
					}
					slowest = append(slowest, fmt.Sprintf("%v %d µs", args, us))
				}
			}
			events, _ := c.Do(ctx, c.B().LatencyLatest().Build()).ToArray()
			var seen []string
			for _, e := range events {
				f, _ := e.ToArray()
				if len(f) >= 4 {
					name, _ := f[0].ToString()
					n, _ := f[3].AsInt64()
					seen = append(seen, fmt.Sprintf("%s max %d ms", name, n))
				}
			}
			log.Printf("get probe %d %s (%d tasks, worker %v): %d gets, p50 %.2f p99 %.2f p99.9 %.2f ms; redis latency events: %v; slowlog: %v",
				r, d.name, d.fleet.n, r >= 4, res.Ops, res.P50Ms, res.P99Ms, res.P999Ms, seen, slowest)
		}
	}
}
