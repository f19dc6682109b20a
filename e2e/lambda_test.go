package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/fakesqs"
	"github.com/mcptasks/mcptasks/internal/testkit/lambdart"
	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// TestLambdaWorkerBootstrap builds the Lambda worker the way SAM does
// (-tags lambda.norpc, a static bootstrap; host OS and architecture so it
// runs here), runs it under a local Runtime API with a real redis-server
// and a local SQS endpoint, and feeds it an SQS event: the task advances in
// Redis, its next step is sent to SQS by the binary, and the poisoned record
// of the batch, only it, comes back in batchItemFailures.
func TestLambdaWorkerBootstrap(t *testing.T) {
	t.Parallel()
	redisURL := testredis.Start(t)
	sqsSrv := fakesqs.Start(t)
	queueURL := sqsSrv.CreateQueue("mcptasks-tasks")

	// The MCP function's part, in process: create a real task, which sends
	// its first message to SQS.
	vars := map[string]string{"REDIS_URL": redisURL, "MCPTASKS_QUEUE": "sqs", "MCPTASKS_SQS_QUEUE_URL": queueURL}
	cfg, err := bundle.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), examples.App, awslambda.WithSQS(sqsSrv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	mcpSrv := httptest.NewServer(b.Handler)
	t.Cleanup(mcpSrv.Close)
	c := mcptest.NewClient(strings.TrimPrefix(mcpSrv.URL, "http://"), true)
	var ct task
	c.Call(t, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 2}}).Decode(t, &ct)
	first, ok := sqsSrv.WaitFor(5*time.Second, func(m fakesqs.Message) bool { return strings.Contains(m.Body, ct.TaskID) })
	if !ok {
		t.Fatal("the new task was not sent to SQS")
	}

	opt, _ := rueidis.ParseURL(redisURL)
	opt.DisableCache = true
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	poisoned := driver.NewID() // a valid id whose key holds the wrong type
	if err := rc.Do(t.Context(), rc.B().Set().Key("mcptasks:{"+poisoned+"}").Value("not a hash").Build()).Error(); err != nil {
		t.Fatal(err)
	}

	// The function.
	fn := startBootstrap(t, "worker", []string{
		"REDIS_URL=" + redisURL,
		"MCPTASKS_QUEUE=sqs",
		"MCPTASKS_SQS_QUEUE_URL=" + queueURL,
		"MCPTASKS_MAX_DURATION=60s",
	}, sqsSrv)
	log := fn.log

	event := map[string]any{"Records": []map[string]any{
		lambdart.SQSRecord("m-task", first.Body, first.ID),
		lambdart.SQSRecord("m-poison", string(queue.EncodeMessage(poisoned)), "poison"),
	}}
	res := fn.invoke(t, "inv-1", event)
	var out struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(res.Body, &out); err != nil {
		t.Fatalf("response %q: %v", res.Body, err)
	}
	if len(out.BatchItemFailures) != 1 || out.BatchItemFailures[0].ItemIdentifier != "m-poison" {
		t.Errorf("response %s, want exactly m-poison in batchItemFailures", res.Body)
	}

	var n int
	rec, err := redisstore.New(rc, nil).Inspect(t.Context(), ct.TaskID)
	if err == nil {
		n = len(rec.Journal)
	}
	if err != nil || n != 1 {
		t.Errorf("journal of the task in Redis: %d entries (%v), want 1: the step ran\nlog:\n%s", n, err, log())
	}
	if tk := c.Get(t, ct.TaskID); tk.Status != "working" || !strings.Contains(tk.StatusMessage, "part 2 of 2") {
		t.Errorf("tasks/get after the invocation: %+v, want working on part 2", tk)
	}
	next, ok := sqsSrv.WaitFor(5*time.Second, func(m fakesqs.Message) bool {
		return m.ID != first.ID && strings.Contains(m.Body, ct.TaskID)
	})
	if !ok {
		t.Errorf("the bootstrap did not send the next step to SQS\nlog:\n%s", log())
	}

	// A second invocation of the same warm sandbox finishes the task.
	res = fn.invoke(t, "inv-2", map[string]any{"Records": []map[string]any{lambdart.SQSRecord("m-next", next.Body, next.ID)}})
	if string(res.Body) != `{"batchItemFailures":[]}` {
		t.Errorf("second response %s, want no failures", res.Body)
	}
	if tk := c.Get(t, ct.TaskID); tk.Status != "completed" {
		t.Errorf("after the second invocation: %+v, want completed\nlog:\n%s", tk, log())
	}
}

// bootstrap is a Lambda function binary running under a local Runtime API.
type bootstrap struct {
	rt     *lambdart.API
	exited chan struct{}
	log    func() string
}

// invoke sends the function an event and returns its response; the
// function's exit, an error posted or no answer within 30s fail the test.
func (b *bootstrap) invoke(t *testing.T, id string, event any) lambdart.Result {
	t.Helper()
	payload, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-b.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, err := b.rt.Invoke(ctx, id, payload)
	if err != nil {
		select {
		case <-b.exited:
			t.Fatalf("the bootstrap exited during invocation %s:\n%s", id, b.log())
		default:
		}
		t.Fatalf("%v\nlog:\n%s", err, b.log())
	}
	return res
}

// startBootstrap builds cmd/lambda/<name> the way SAM does (-tags
// lambda.norpc, static; host OS and architecture so that it runs here) and
// starts it under a fresh Runtime API with env (plus the AWS settings that
// point it at sqsSrv and nowhere else).
func startBootstrap(t *testing.T, name string, env []string, sqsSrv *fakesqs.Server) *bootstrap {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", bin, "../cmd/lambda/"+name)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the %s bootstrap: %v\n%s", name, err, out)
	}
	rt, err := lambdart.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	fn := exec.Command(bin)
	fn.Env = append(append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"AWS_LAMBDA_RUNTIME_API=" + rt.Addr,
		"AWS_LAMBDA_FUNCTION_NAME=mcptasks-" + name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		"MCPTASKS_LOG_LEVEL=DEBUG",
	}, env...), sqsSrv.Env()...)
	var logMu sync.Mutex
	var logBuf strings.Builder
	fn.Stdout, fn.Stderr = lockedWriter{&logMu, &logBuf}, lockedWriter{&logMu, &logBuf}
	b := &bootstrap{rt: rt, exited: make(chan struct{}), log: func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return logBuf.String()
	}}
	if err := fn.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = fn.Wait(); close(b.exited) }()
	t.Cleanup(func() {
		_ = fn.Process.Kill()
		<-b.exited
	})
	return b
}

// TestLambdaMCPBootstrap runs the MCP function's bootstrap under the local
// Runtime API and invokes it with a Function URL event: the response is
// streamed in Lambda's HTTP integration format (a JSON prelude with the
// status and headers, eight NUL bytes, then the body) and carries the
// server/discover result.
func TestLambdaMCPBootstrap(t *testing.T) {
	t.Parallel()
	redisURL := testredis.Start(t)
	sqsSrv := fakesqs.Start(t)
	fn := startBootstrap(t, "mcp", []string{
		"REDIS_URL=" + redisURL,
		"MCPTASKS_QUEUE=sqs",
		"MCPTASKS_SQS_QUEUE_URL=" + sqsSrv.CreateQueue("mcptasks-tasks"),
	}, sqsSrv)
	c := newClient("unused", false)
	body, hdr := c.Envelope("server/discover", nil)
	headers := map[string]string{}
	for k, v := range hdr {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	event := lambdart.FunctionURLEvent(body, headers)
	res := fn.invoke(t, "inv-mcp", event)
	if res.ContentType != "application/vnd.awslambda.http-integration-response" {
		t.Errorf("response content type %q, want Lambda's HTTP integration response", res.ContentType)
	}
	prelude, payload, ok := strings.Cut(string(res.Body), "\x00\x00\x00\x00\x00\x00\x00\x00")
	if !ok {
		t.Fatalf("response %q has no prelude separator", res.Body)
	}
	var meta struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
	}
	if err := json.Unmarshal([]byte(prelude), &meta); err != nil || meta.StatusCode != 200 {
		t.Fatalf("prelude %q: %v, want status 200", prelude, err)
	}
	r, err := mcptest.Parse(meta.StatusCode, meta.Headers["Content-Type"], []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	if r.Error != nil || !strings.Contains(string(r.Result), `"io.modelcontextprotocol/tasks"`) {
		t.Errorf("server/discover through the MCP bootstrap: %s %+v", r.Result, r.Error)
	}

	// The Function URL serves callback URLs too: a body of the wrong type
	// gets the callback handler's 415 (checked before the URL is).
	cb := lambdart.FunctionURLEvent([]byte("not json"), map[string]string{"content-type": "text/plain"})
	path := tasks.CallbackPath + driver.NewID() + "/" + strings.Repeat("A", 43)
	cb["rawPath"] = path
	cb["requestContext"].(map[string]any)["http"].(map[string]any)["path"] = path
	res = fn.invoke(t, "inv-callback", cb)
	prelude, _, _ = strings.Cut(string(res.Body), "\x00\x00\x00\x00\x00\x00\x00\x00")
	if err := json.Unmarshal([]byte(prelude), &meta); err != nil || meta.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a callback POST through the Function URL: prelude %q (%v), want status 415", prelude, err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// On an on-demand cold start the MCP bootstrap builds its bundle while it
// fetches the first event; when Redis cannot be reached the process stays
// up and answers each invocation 500 (trying again each time) instead of
// ending at init.
func TestLambdaMCPBootstrapWithoutRedis(t *testing.T) {
	t.Parallel()
	sqsSrv := fakesqs.Start(t)
	fn := startBootstrap(t, "mcp", []string{
		"REDIS_URL=redis://127.0.0.1:1", // nothing listens there
		"MCPTASKS_QUEUE=sqs",
		"MCPTASKS_SQS_QUEUE_URL=" + sqsSrv.CreateQueue("mcptasks-tasks"),
		"AWS_LAMBDA_INITIALIZATION_TYPE=on-demand",
	}, sqsSrv)
	body, hdr := newClient("unused", false).Envelope("server/discover", nil)
	headers := map[string]string{}
	for k, v := range hdr {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	for _, id := range []string{"inv-1", "inv-2"} {
		res := fn.invoke(t, id, lambdart.FunctionURLEvent(body, headers))
		prelude, payload, ok := strings.Cut(string(res.Body), "\x00\x00\x00\x00\x00\x00\x00\x00")
		if !ok || !strings.Contains(prelude, `"statusCode":500`) || !strings.Contains(payload, "store unreachable") {
			t.Errorf("%s: %q, want a 500 saying the store is unreachable\nlog:\n%s", id, res.Body, fn.log())
		}
	}
	if !strings.Contains(fn.log(), "building the mcptasks bundle failed") {
		t.Errorf("the failed builds were not logged:\n%s", fn.log())
	}
}
