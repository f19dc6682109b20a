package e2e

import (
	"encoding/json"
	"fmt"
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

	"github.com/mcptasks/mcptasks/internal/fakesqs"
	"github.com/mcptasks/mcptasks/internal/mcptest"
	"github.com/mcptasks/mcptasks/internal/testredis"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// runtimeAPI is a local Lambda Runtime API (the interface a provided.al2023
// bootstrap talks to, at AWS_LAMBDA_RUNTIME_API): it hands out queued
// invocations on GET /2018-06-01/runtime/invocation/next and collects what
// the function posts to .../invocation/{id}/response or .../error. When
// nothing is queued, "next" blocks, as the real one does between events.
type runtimeAPI struct {
	addr    string // host:port, as AWS_LAMBDA_RUNTIME_API holds it
	pending chan invocation
	results chan invocationResult
	stop    chan struct{}
}

type invocation struct {
	id      string
	payload []byte
}

type invocationResult struct {
	id    string
	kind  string // "response", "error" or "init/error"
	body  []byte
	ctype string
}

func startRuntimeAPI(t *testing.T) *runtimeAPI {
	t.Helper()
	rt := &runtimeAPI{pending: make(chan invocation, 8), results: make(chan invocationResult, 8), stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		select {
		case inv := <-rt.pending:
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", fmt.Sprint(time.Now().Add(60*time.Second).UnixMilli()))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:mcptasks-WorkerFunction")
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(inv.payload)
		case <-r.Context().Done():
		case <-rt.stop:
		}
	})
	result := func(kind string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			rt.results <- invocationResult{id: r.PathValue("id"), kind: kind, body: body, ctype: r.Header.Get("Content-Type")}
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"status":"OK"}`))
		}
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", result("response"))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", result("error"))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", result("init/error"))
	srv := httptest.NewServer(mux)
	var once sync.Once
	t.Cleanup(srv.Close)
	t.Cleanup(func() { once.Do(func() { close(rt.stop) }) })
	rt.addr = strings.TrimPrefix(srv.URL, "http://")
	return rt
}

// invoke queues an event and waits for the function's answer to it.
func (rt *runtimeAPI) invoke(t *testing.T, id string, event any, exited <-chan struct{}, log func() string) invocationResult {
	t.Helper()
	payload, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	rt.pending <- invocation{id: id, payload: payload}
	select {
	case res := <-rt.results:
		if res.kind != "response" || res.id != id {
			t.Fatalf("invocation %s: the function posted %s for %q: %s\nlog:\n%s", id, res.kind, res.id, res.body, log())
		}
		return res
	case <-exited:
		t.Fatalf("the bootstrap exited during invocation %s:\n%s", id, log())
	case <-time.After(30 * time.Second):
		t.Fatalf("invocation %s: no answer within 30s\nlog:\n%s", id, log())
	}
	return invocationResult{}
}

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
	poisoned := tasks.NewID() // a valid id whose key holds the wrong type
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
	rt, exited, log := fn.rt, fn.exited, fn.log

	event := map[string]any{"Records": []map[string]any{
		sqsRecord("m-task", first.Body, first.ID),
		sqsRecord("m-poison", string(queue.EncodeMessage(poisoned)), "poison"),
	}}
	res := rt.invoke(t, "inv-1", event, exited, log)
	var out struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(res.body, &out); err != nil {
		t.Fatalf("response %q: %v", res.body, err)
	}
	if len(out.BatchItemFailures) != 1 || out.BatchItemFailures[0].ItemIdentifier != "m-poison" {
		t.Errorf("response %s, want exactly m-poison in batchItemFailures", res.body)
	}

	n, err := rc.Do(t.Context(), rc.B().Llen().Key("mcptasks:{"+ct.TaskID+"}:j").Build()).AsInt64()
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
	res = rt.invoke(t, "inv-2", map[string]any{"Records": []map[string]any{sqsRecord("m-next", next.Body, next.ID)}}, exited, log)
	if string(res.body) != `{"batchItemFailures":[]}` {
		t.Errorf("second response %s, want no failures", res.body)
	}
	if tk := c.Get(t, ct.TaskID); tk.Status != "completed" {
		t.Errorf("after the second invocation: %+v, want completed\nlog:\n%s", tk, log())
	}
}

// bootstrap is a Lambda function binary running under a local Runtime API.
type bootstrap struct {
	rt     *runtimeAPI
	exited chan struct{}
	log    func() string
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
	rt := startRuntimeAPI(t)
	fn := exec.Command(bin)
	fn.Env = append(append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"AWS_LAMBDA_RUNTIME_API=" + rt.addr,
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
	headers := map[string]string{"host": "abcdefghij.lambda-url.us-east-1.on.aws"}
	for k, v := range hdr {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	event := map[string]any{
		"version": "2.0", "rawPath": "/mcp", "rawQueryString": "", "headers": headers,
		"requestContext": map[string]any{
			"accountId": "anonymous", "apiId": "abcdefghij", "domainName": "abcdefghij.lambda-url.us-east-1.on.aws",
			"domainPrefix": "abcdefghij", "requestId": "r-1", "routeKey": "$default", "stage": "$default",
			"http": map[string]any{"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7", "userAgent": "e2e"},
			"time": "30/Nov/2026:12:00:00 +0000", "timeEpoch": 1796040000000,
		},
		"body": string(body), "isBase64Encoded": false,
	}
	res := fn.rt.invoke(t, "inv-mcp", event, fn.exited, fn.log)
	if res.ctype != "application/vnd.awslambda.http-integration-response" {
		t.Errorf("response content type %q, want Lambda's HTTP integration response", res.ctype)
	}
	prelude, payload, ok := strings.Cut(string(res.body), "\x00\x00\x00\x00\x00\x00\x00\x00")
	if !ok {
		t.Fatalf("response %q has no prelude separator", res.body)
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
}

// sqsRecord is one record of an SQS event as the event source mapping
// delivers it.
func sqsRecord(messageID, body, sqsID string) map[string]any {
	return map[string]any{
		"messageId":     messageID,
		"receiptHandle": "AQEB" + sqsID,
		"body":          body,
		"attributes": map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    fmt.Sprint(time.Now().UnixMilli()),
			"SenderId":                         "AROAEXAMPLE:mcptasks-McpFunction",
			"ApproximateFirstReceiveTimestamp": fmt.Sprint(time.Now().UnixMilli()),
		},
		"messageAttributes": map[string]any{},
		"md5OfBody":         "",
		"eventSource":       "aws:sqs",
		"eventSourceARN":    "arn:aws:sqs:us-east-1:000000000000:mcptasks-tasks",
		"awsRegion":         "us-east-1",
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
