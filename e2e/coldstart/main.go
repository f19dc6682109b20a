// Command coldstart measures the cold start of each AWS Lambda bootstrap
// (cmd/lambda/mcp, worker, sweep) under a local Lambda Runtime API with a
// real redis-server: the time from starting the process to the Runtime
// API receiving its answer to the first invocation, which includes the Go
// runtime's start, building the bundle and dialing Redis. Each bootstrap
// is built as SAM builds it (static, -tags lambda.norpc, stripped), for
// this machine's architecture so that it runs here, and started -n times.
//
//	go run ./e2e/coldstart [-n 20] [-json bench-results/coldstart.json]
//
// The first invocations are: a Function URL event carrying server/discover
// (mcp), an SQS record for a task id that does not exist (worker: it claims
// in Redis and skips), and a scheduled event (sweep: one Due read).
// scripts/bench runs it; it prints a Markdown table.
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

	"github.com/mcptasks/mcptasks/internal/lambdart"
	"github.com/mcptasks/mcptasks/internal/mcptest"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

func main() {
	n := flag.Int("n", 20, "starts per bootstrap")
	jsonOut := flag.String("json", "bench-results/coldstart.json", "where to write the results as JSON")
	flag.Parse()
	log.SetFlags(0)
	rows, err := run(context.Background(), *n)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nLambda cold starts: %s/%s, %d starts each, process start → first invocation answered (incl. the Redis dial)\n\n", runtime.GOOS, runtime.GOARCH, *n)
	fmt.Println("| bootstrap | size | p50 ms | p99 ms | max ms |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %.2f MB | %.2f | %.2f | %.2f |\n", r.Function, float64(r.Bytes)/1e6, r.P50Ms, r.P99Ms, r.MaxMs)
	}
	if err := os.MkdirAll(filepath.Dir(*jsonOut), 0o755); err != nil {
		log.Fatal(err)
	}
	b, _ := json.MarshalIndent(rows, "", "  ")
	if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
		log.Fatal(err)
	}
}

// Row is one bootstrap's cold starts.
type Row struct {
	Function string  `json:"function"`
	Bytes    int64   `json:"bytes"`
	Starts   int     `json:"starts"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
}

func run(ctx context.Context, n int) ([]Row, error) {
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
	var rows []Row
	for _, fn := range []string{"mcp", "worker", "sweep"} {
		bin := filepath.Join(dir, fn)
		build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/lambda/"+fn)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %w\n%s", fn, err, out)
		}
		st, err := os.Stat(bin)
		if err != nil {
			return nil, err
		}
		var took []time.Duration
		for i := range n {
			d, err := coldStart(ctx, bin, fn, redisURL, i)
			if err != nil {
				return nil, fmt.Errorf("%s start %d: %w", fn, i, err)
			}
			took = append(took, d)
		}
		slices.Sort(took)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		rows = append(rows, Row{Function: fn, Bytes: st.Size(), Starts: n,
			P50Ms: ms(took[len(took)/2]), P99Ms: ms(took[(len(took)*99)/100]), MaxMs: ms(took[len(took)-1])})
	}
	return rows, nil
}

// coldStart starts bin under a fresh Runtime API with its first event
// already queued, and returns how long until the answer arrived.
func coldStart(ctx context.Context, bin, fn, redisURL string, i int) (time.Duration, error) {
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
	case "mcp":
		body, hdr := mcptest.NewClient("unused", false).Envelope("server/discover", nil)
		headers := map[string]string{}
		for k, v := range hdr {
			headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		return json.Marshal(lambdart.FunctionURLEvent(body, headers))
	case "worker":
		return json.Marshal(map[string]any{"Records": []map[string]any{
			lambdart.SQSRecord("m-1", string(queue.EncodeMessage(tasks.NewID())), "coldstart")}})
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
