// Command coldstart measures the cold start of each AWS Lambda bootstrap
// (cmd/lambda/mcp, worker, sweep) under a local Lambda Runtime API with a
// real redis-server: the time from starting the process to the Runtime
// API receiving its answer to the first invocation, which includes the Go
// runtime's start, building the bundle and dialing Redis. Each bootstrap
// is built as SAM builds it (static, -tags lambda.norpc, stripped), for
// this machine's architecture so that it runs here, and started -n times;
// the bootstraps take turns, so that a change in the machine's load falls
// on all of them alike.
//
//	go run ./e2e/coldstart [-n 20] [-json bench-results/coldstart.json] [-old name=DIR]...
//
// Beside them it measures the floor (e2e/coldstart/floor: a Function URL
// function built the same way that answers a fixed result, no Redis, no
// MCP server), reports each bootstrap's start over the floor's in the same
// round, and the MCP bootstrap with tracing on (e2e/coldstart/traced).
// -old name=DIR adds the bootstraps built from another checkout (an
// older commit) for a before/after in one run.
//
// The first invocations are: a Function URL event carrying server/discover
// (mcp, floor), an SQS record for a task id that does not exist (worker:
// it claims in Redis and skips), and a scheduled event (sweep: one Due
// read). scripts/bench runs it; it prints a Markdown table.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/lambdart"
	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

func main() {
	n := flag.Int("n", 20, "starts per bootstrap")
	jsonOut := flag.String("json", "bench-results/coldstart.json", "where to write the results as JSON")
	var olds oldFlags
	flag.Var(&olds, "old", "`name=DIR`: also measure the bootstraps built from the checkout in DIR (an older commit), interleaved with the new ones (repeatable)")
	flag.Parse()
	log.SetFlags(0)
	rows, err := run(context.Background(), *n, olds)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nLambda cold starts: %s/%s, %d starts each (interleaved), process start → first invocation answered (incl. the Redis dial)\n\n", runtime.GOOS, runtime.GOARCH, *n)
	fmt.Println("| bootstrap | size | p50 ms | p99 ms | max ms | over the floor, p50 ms |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %.2f MB | %.2f | %.2f | %.2f | %.2f |\n", r.Name(), float64(r.Bytes)/1e6, r.P50Ms, r.P99Ms, r.MaxMs, r.OverFloorP50Ms)
	}
	if err := os.MkdirAll(filepath.Dir(*jsonOut), 0o755); err != nil {
		log.Fatal(err)
	}
	b, _ := json.MarshalIndent(rows, "", "  ")
	if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
		log.Fatal(err)
	}
}

// oldFlags are the -old name=DIR flags.
type oldFlags []oldBuild

type oldBuild struct{ name, dir string }

func (o *oldFlags) String() string { return fmt.Sprint(*o) }

func (o *oldFlags) Set(v string) error {
	name, dir, ok := strings.Cut(v, "=")
	if !ok || name == "" || dir == "" {
		return errors.New("want name=DIR")
	}
	*o = append(*o, oldBuild{name, dir})
	return nil
}

// Row is one bootstrap's cold starts.
type Row struct {
	// Function is the bootstrap: floor, mcp, worker or sweep.
	Function string `json:"function"`
	// Variant is "" for this checkout's build, "traced" for the MCP
	// bootstrap with OpenTelemetry's exporters on, or an -old name.
	Variant string  `json:"variant,omitempty"`
	Bytes   int64   `json:"bytes"`
	Starts  int     `json:"starts"`
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	// OverFloorP50Ms is the median, over the rounds, of this bootstrap's
	// start minus the floor's start in the same round.
	OverFloorP50Ms float64 `json:"overFloorP50Ms"`
}

// Name is the row's label.
func (r Row) Name() string {
	if r.Variant == "" {
		return r.Function
	}
	return r.Function + " (" + r.Variant + ")"
}

// bootstrap is one binary to measure.
type bootstrap struct {
	fn, variant string
	dir, pkg    string   // built from pkg in the checkout dir ("" = this one)
	env         []string // added to its environment
	bin         string
	bytes       int64
}

// bootstraps are what one run measures: the floor, the three functions,
// the MCP bootstrap with tracing on, and the three functions of each -old
// checkout.
func bootstraps(olds []oldBuild) []*bootstrap {
	bs := []*bootstrap{
		{fn: "floor", pkg: "./e2e/coldstart/floor"},
		{fn: "mcp", pkg: "./cmd/lambda/mcp"},
		{fn: "worker", pkg: "./cmd/lambda/worker"},
		{fn: "sweep", pkg: "./cmd/lambda/sweep"},
		{fn: "mcp", variant: "traced", pkg: "./e2e/coldstart/traced", env: []string{
			"OTEL_TRACES_EXPORTER=otlp", "OTEL_METRICS_EXPORTER=none",
			// Spans are batched; nothing listens here and the process
			// ends before the batch would be sent.
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9",
		}},
	}
	for _, o := range olds {
		for _, fn := range []string{"mcp", "worker", "sweep"} {
			bs = append(bs, &bootstrap{fn: fn, variant: o.name, dir: o.dir, pkg: "./cmd/lambda/" + fn})
		}
	}
	return bs
}

// run builds every bootstrap and starts each n times, one of each in
// turn, so that a change in the machine's load falls on all of them alike.
func run(ctx context.Context, n int, olds []oldBuild) ([]Row, error) {
	dir, err := os.MkdirTemp("", "mcptasks-coldstart")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	redisURL, stopRedis, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	defer stopRedis()
	bs := bootstraps(olds)
	for i, b := range bs {
		b.bin = filepath.Join(dir, fmt.Sprintf("bootstrap-%d-%s", i, b.fn))
		build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", b.bin, b.pkg)
		build.Dir = b.dir
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s in %q: %w\n%s", b.pkg, b.dir, err, out)
		}
		st, err := os.Stat(b.bin)
		if err != nil {
			return nil, err
		}
		b.bytes = st.Size()
	}
	took := make([][]time.Duration, len(bs))
	for i := range n {
		for j, b := range bs {
			d, err := coldStart(ctx, b, redisURL, i)
			if err != nil {
				return nil, fmt.Errorf("%s start %d: %w", b.fn, i, err)
			}
			took[j] = append(took[j], d)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var rows []Row
	for j, b := range bs {
		over := make([]time.Duration, n)
		for i := range n {
			over[i] = took[j][i] - took[0][i]
		}
		slices.Sort(over)
		t := slices.Sorted(slices.Values(took[j]))
		rows = append(rows, Row{Function: b.fn, Variant: b.variant, Bytes: b.bytes, Starts: n,
			P50Ms: ms(t[n/2]), P99Ms: ms(t[(n*99)/100]), MaxMs: ms(t[n-1]), OverFloorP50Ms: ms(over[n/2])})
	}
	return rows, nil
}

// coldStart starts bin under a fresh Runtime API with its first event
// already queued, and returns how long until the answer arrived.
func coldStart(ctx context.Context, b *bootstrap, redisURL string, i int) (time.Duration, error) {
	bin, fn := b.bin, b.fn
	api, err := lambdart.Start()
	if err != nil {
		return 0, err
	}
	defer api.Close()
	event, err := firstEvent(fn)
	if err != nil {
		return 0, err
	}
	id := fmt.Sprintf("inv-%s-%d", fn, i)
	api.Queue(id, event)
	cmd := exec.Command(bin)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_RUNTIME_API=" + api.Addr,
		"AWS_LAMBDA_FUNCTION_NAME=mcptasks-" + fn,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024",
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDCOLDSTART",
		"AWS_SECRET_ACCESS_KEY=coldstart",
		"REDIS_URL=" + redisURL,
		"MCPTASKS_QUEUE=sqs",
		// Never called by these invocations; a closed port if it were.
		"MCPTASKS_SQS_QUEUE_URL=http://127.0.0.1:9/000000000000/mcptasks-tasks",
		"MCPTASKS_LOG_LEVEL=WARN",
	}
	cmd.Env = append(cmd.Env, b.env...)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := api.Wait(wctx)
	if err != nil {
		return 0, fmt.Errorf("%w\n%s", err, logs.String())
	}
	if res.Kind != "response" || res.ID != id {
		return 0, fmt.Errorf("the function posted %s for %q: %s\n%s", res.Kind, res.ID, res.Body, logs.String())
	}
	return res.At.Sub(start), nil
}

// firstEvent is the first invocation's event for fn.
func firstEvent(fn string) ([]byte, error) {
	switch fn {
	case "mcp", "floor":
		body, hdr := mcptest.NewClient("unused", false).Envelope("server/discover", nil)
		headers := map[string]string{}
		for k, v := range hdr {
			headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		return json.Marshal(lambdart.FunctionURLEvent(body, headers))
	case "worker":
		return json.Marshal(map[string]any{"Records": []map[string]any{
			lambdart.SQSRecord("m-1", string(queue.EncodeMessage(driver.NewID())), "coldstart")}})
	case "sweep":
		return json.Marshal(lambdart.ScheduledEvent())
	}
	return nil, errors.New("unknown function " + fn)
}

// startRedis runs a redis-server on a free port for the measurement.
func startRedis(dir string) (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting redis-server (apt-get install -y redis-server): %w", err)
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			c.Close()
			return "redis://127.0.0.1:" + port, stop, nil
		}
	}
	stop()
	return "", nil, errors.New("redis-server did not start")
}
