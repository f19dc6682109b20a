package awslambda_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/rueidis"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcptasks/mcptasks/internal/testkit/fakesqs"
	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/spantest"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// env is one test's deployment: a real redis-server, a local SQS endpoint,
// and the bundle an "sqs" Lambda function builds.
type env struct {
	b     *bundle.Bundle
	sqs   *fakesqs.Server
	queue string
	redis rueidis.Client
}

func setup(t *testing.T, vars map[string]string) *env {
	t.Helper()
	return setupWith(t, vars, func(fs *fakesqs.Server) bundle.Option { return awslambda.WithSQS(fs.Client()) })
}

// setupWith is setup with the SQS option withSQS returns.
func setupWith(t *testing.T, vars map[string]string, withSQS func(*fakesqs.Server) bundle.Option) *env {
	t.Helper()
	return setupApp(t, vars, withSQS, examples.App)
}

// setupApp is setupWith serving app.
func setupApp(t *testing.T, vars map[string]string, withSQS func(*fakesqs.Server) bundle.Option, app *tasks.App) *env {
	t.Helper()
	redisURL := testredis.Start(t)
	fs := fakesqs.Start(t)
	qurl := fs.CreateQueue("mcptasks-tasks")
	all := map[string]string{
		"REDIS_URL":              redisURL,
		"MCPTASKS_QUEUE":         "sqs",
		"MCPTASKS_SQS_QUEUE_URL": qurl,
	}
	for k, v := range vars {
		all[k] = v
	}
	cfg, err := bundle.FromEnv(func(k string) string { return all[k] })
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	b, err := bundle.New(t.Context(), cfg, log, app, withSQS(fs))
	if err != nil {
		t.Fatalf("bundle.New: %v", err)
	}
	t.Cleanup(b.Close)
	opt, _ := rueidis.ParseURL(redisURL)
	opt.DisableCache = true
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("redis: %v", err)
	}
	t.Cleanup(rc.Close)
	return &env{b: b, sqs: fs, queue: qurl, redis: rc}
}

// functionURLRequest is a Function URL invocation payload as Lambda sends
// it (payload format 2.0, lowercase header names).
func functionURLRequest(t *testing.T, body []byte, hdr map[string][]string) *events.LambdaFunctionURLRequest {
	t.Helper()
	headers := map[string]string{
		"host":            "abcdefghij.lambda-url.us-east-1.on.aws",
		"user-agent":      "mcp-client/1.0",
		"x-forwarded-for": "203.0.113.7",
	}
	for k, v := range hdr {
		headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	payload := map[string]any{
		"version":        "2.0",
		"rawPath":        "/mcp",
		"rawQueryString": "",
		"headers":        headers,
		"requestContext": map[string]any{
			"accountId":    "anonymous",
			"apiId":        "abcdefghij",
			"domainName":   "abcdefghij.lambda-url.us-east-1.on.aws",
			"domainPrefix": "abcdefghij",
			"http": map[string]any{
				"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1",
				"sourceIp": "203.0.113.7", "userAgent": "mcp-client/1.0",
			},
			"requestId": "c0ffee00-0000-4000-8000-000000000001",
			"routeKey":  "$default",
			"stage":     "$default",
			"time":      "30/Nov/2026:12:00:00 +0000",
			"timeEpoch": 1796040000000,
		},
		"body":            string(body),
		"isBase64Encoded": false,
	}
	raw, _ := json.Marshal(payload)
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatalf("decoding the Function URL payload: %v", err)
	}
	return &req
}

// invokeMCP calls the MCP Lambda handler with a Function URL event for
// method and returns the JSON-RPC response.
func invokeMCP(t *testing.T, e *env, c *mcptest.Client, method string, params map[string]any) *mcptest.Response {
	t.Helper()
	body, hdr := c.Envelope(method, params)
	resp, err := awslambda.MCPHandler(e.b)(t.Context(), functionURLRequest(t, body, hdr))
	if err != nil {
		t.Fatalf("MCP handler: %v", err)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the streamed response: %v", err)
	}
	r, err := mcptest.Parse(resp.StatusCode, resp.Headers["Content-Type"], raw)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

// createTask calls batch_report through the MCP handler and returns the
// task id.
func createTask(t *testing.T, e *env, steps int) string {
	t.Helper()
	c := &mcptest.Client{Caps: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	var ct mcptest.Task
	invokeMCP(t, e, c, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": steps}}).Decode(t, &ct)
	if ct.ResultType != "task" || ct.TaskID == "" {
		t.Fatalf("tools/call = %+v, want a CreateTaskResult", ct)
	}
	return ct.TaskID
}

func journalLen(t *testing.T, e *env, id string) int64 {
	t.Helper()
	rec, err := redisstore.New(e.redis, nil).Inspect(context.Background(), id)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return int64(len(rec.Journal))
}

// sqsMessagesFor returns the messages sent to the queue for task id.
func sqsMessagesFor(e *env, id string) []fakesqs.Message {
	var out []fakesqs.Message
	for _, m := range e.sqs.Messages() {
		if got, err := queue.DecodeMessage([]byte(m.Body)); err == nil && got == id && m.QueueURL == e.queue {
			out = append(out, m)
		}
	}
	return out
}

// A Function URL request reaches the MCP server: server/discover answers,
// and a task tool call creates a task and sends it to SQS.
func TestMCPFunctionURL(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	c := &mcptest.Client{Caps: map[string]any{}}
	r := invokeMCP(t, e, c, "server/discover", nil)
	if r.HTTP != 200 {
		t.Fatalf("server/discover: HTTP %d", r.HTTP)
	}
	var disc struct {
		Meta struct {
			ServerInfo struct {
				Name string `json:"name"`
			} `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
		SupportedVersions []string `json:"supportedVersions"`
		Capabilities      struct {
			Extensions map[string]any `json:"extensions"`
		} `json:"capabilities"`
	}
	r.Decode(t, &disc)
	if disc.Meta.ServerInfo.Name != examples.App.Name {
		t.Errorf("serverInfo name = %q, want %q", disc.Meta.ServerInfo.Name, examples.App.Name)
	}
	if !slices.Contains(disc.SupportedVersions, "2026-07-28") {
		t.Errorf("supportedVersions = %v, want 2026-07-28 among them", disc.SupportedVersions)
	}
	if _, ok := disc.Capabilities.Extensions["io.modelcontextprotocol/tasks"]; !ok {
		t.Errorf("capabilities.extensions = %v, want the tasks extension", disc.Capabilities.Extensions)
	}

	id := createTask(t, e, 2)
	msgs := sqsMessagesFor(e, id)
	if len(msgs) != 1 || msgs[0].DelaySeconds != 0 {
		t.Fatalf("SQS messages for the new task: %+v, want one due now", msgs)
	}
}

// WithSQS(nil) builds its client from the function's environment: the
// region, the role's temporary credentials and the endpoint override
// (here, the local endpoint, which verifies the request's signature).
func TestWithSQSFromTheEnvironment(t *testing.T) {
	e := setupWith(t, nil, func(fs *fakesqs.Server) bundle.Option {
		for _, kv := range fs.Env() {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		return awslambda.WithSQS(nil)
	})
	id := createTask(t, e, 1)
	if msgs := sqsMessagesFor(e, id); len(msgs) != 1 {
		t.Fatalf("SQS messages for the new task: %+v, want one", msgs)
	}
}

// Without a region, WithSQS(nil) fails the bundle with an error naming
// AWS_REGION.
func TestWithSQSNeedsARegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	vars := map[string]string{"REDIS_URL": testredis.Start(t), "MCPTASKS_QUEUE": "sqs", "MCPTASKS_SQS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/000000000000/q"}
	cfg, err := bundle.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.New(t.Context(), cfg, slog.New(slog.DiscardHandler), examples.App, awslambda.WithSQS(nil))
	if err == nil {
		b.Close()
		t.Fatal("bundle.New without AWS_REGION succeeded")
	}
	if !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("bundle.New: %v, want an error naming AWS_REGION", err)
	}
}

// sqsEvent builds an SQS event as the event source mapping delivers it.
func sqsEvent(t *testing.T, bodies map[string]string) events.SQSEvent {
	t.Helper()
	var recs []map[string]any
	for id, body := range bodies {
		recs = append(recs, map[string]any{
			"messageId":     id,
			"receiptHandle": "AQEB" + id,
			"body":          body,
			"attributes": map[string]string{
				"ApproximateReceiveCount":          "1",
				"SentTimestamp":                    "1796040000000",
				"SenderId":                         "AROAEXAMPLE:mcp",
				"ApproximateFirstReceiveTimestamp": "1796040000001",
			},
			"messageAttributes": map[string]any{},
			"md5OfBody":         "",
			"eventSource":       "aws:sqs",
			"eventSourceARN":    "arn:aws:sqs:us-east-1:000000000000:mcptasks-tasks",
			"awsRegion":         "us-east-1",
		})
	}
	raw, _ := json.Marshal(map[string]any{"Records": recs})
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("decoding the SQS event: %v", err)
	}
	return ev
}

// One batch: a real task, a poisoned one (its Redis key has the wrong type,
// so the claim script fails), an unknown task and a message that is not
// ours. Exactly the poisoned and the foreign message are reported failed;
// the real task advanced one step and its next step went to SQS.
func TestWorkerPartialBatchFailure(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	good := createTask(t, e, 3)
	goodBody := sqsMessagesFor(e, good)[0].Body
	poisoned := driver.NewID() // a valid id whose key holds the wrong type
	if err := e.redis.Do(t.Context(), e.redis.B().Set().Key("mcptasks:{"+poisoned+"}").Value("not a hash").Build()).Error(); err != nil {
		t.Fatalf("poisoning: %v", err)
	}
	ev := sqsEvent(t, map[string]string{
		"m-good":    goodBody,
		"m-poison":  string(queue.EncodeMessage(poisoned)),
		"m-unknown": string(queue.EncodeMessage("no-such-task-0123456789")),
		"m-foreign": `{"hello":"world"}`,
	})
	resp, err := awslambda.WorkerHandler(e.b)(t.Context(), ev)
	if err != nil {
		t.Fatalf("worker returned an error (it would fail the whole batch): %v", err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if fmt.Sprint(sortStrings(failed)) != "[m-foreign m-poison]" {
		t.Errorf("BatchItemFailures = %v, want exactly [m-foreign m-poison]", failed)
	}
	if n := journalLen(t, e, good); n != 1 {
		t.Errorf("journal of the good task has %d entries, want 1 (one step)", n)
	}
	if msgs := sqsMessagesFor(e, good); len(msgs) != 2 {
		t.Errorf("SQS messages for the good task: %d, want 2 (creation, next step)", len(msgs))
	}

	// The response is what Lambda reads.
	raw, _ := json.Marshal(resp)
	if !strings.HasPrefix(string(raw), `{"batchItemFailures":[{"itemIdentifier":"m-`) {
		t.Errorf("response JSON %s", raw)
	}

	// A clean batch answers an empty list, not null.
	resp, err = awslambda.WorkerHandler(e.b)(t.Context(), sqsEvent(t, map[string]string{"m-again": goodBody}))
	if err != nil || resp.BatchItemFailures == nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("clean batch: %+v, %v; want an empty failure list", resp, err)
	}
	if n := journalLen(t, e, good); n != 2 {
		t.Errorf("journal after the second delivery: %d entries, want 2", n)
	}
}

// A scheduled event runs the sweeper: a task whose message was lost (here:
// created, never delivered) is sent to SQS again once its grace passed.
func TestSweepScheduledEvent(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{"MCPTASKS_MAX_DURATION": "2s"}) // enqueue grace 1s
	id := createTask(t, e, 1)
	time.Sleep(1100 * time.Millisecond)
	var ev events.CloudWatchEvent
	scheduled := `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event",
		"source":"aws.events","account":"000000000000","time":"2026-11-30T12:00:00Z","region":"us-east-1",
		"resources":["arn:aws:events:us-east-1:000000000000:rule/mcptasks-EveryMinute"],"detail":{}}`
	if err := json.Unmarshal([]byte(scheduled), &ev); err != nil {
		t.Fatalf("decoding the scheduled event: %v", err)
	}
	res, err := awslambda.SweepHandler(e.b)(t.Context(), ev)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if res.Enqueued != 1 {
		t.Errorf("sweep result %+v, want 1 enqueued", res)
	}
	if msgs := sqsMessagesFor(e, id); len(msgs) != 2 {
		t.Errorf("SQS messages for the task: %d, want 2 (creation, sweeper)", len(msgs))
	}
}

func sortStrings(s []string) []string {
	slices.Sort(s)
	return s
}

// With telemetry, the MCP function's tools/call span is the root of the
// task's trace and its SQS message carries the enqueue's trace context as
// the "traceparent" message attribute; the worker function's invocation
// joins that trace under the root and links to the enqueue. Each function
// flushes its spans before it returns.
func TestTraceAcrossFunctions(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var flushes atomic.Int32
	app := *examples.App
	app.Telemetry = func(context.Context) (*tasks.Telemetry, error) {
		return &tasks.Telemetry{TracerProvider: tp, ForceFlush: func(ctx context.Context) error {
			flushes.Add(1)
			return tp.ForceFlush(ctx)
		}}, nil
	}
	e := setupApp(t, nil, func(fs *fakesqs.Server) bundle.Option { return awslambda.WithSQS(fs.Client()) }, &app)
	id := createTask(t, e, 2)
	if flushes.Load() == 0 {
		t.Error("the MCP function did not flush its spans")
	}
	msgs := sqsMessagesFor(e, id)
	if len(msgs) != 1 || msgs[0].Attributes["traceparent"] == "" {
		t.Fatalf("SQS messages %+v, want one with a traceparent attribute", msgs)
	}
	carried := msgs[0].Attributes["traceparent"]
	ev := sqsEvent(t, map[string]string{"m1": msgs[0].Body})
	ev.Records[0].MessageAttributes = map[string]events.SQSMessageAttribute{"traceparent": {DataType: "String", StringValue: &carried}}
	before := flushes.Load()
	if resp, err := awslambda.WorkerHandler(e.b)(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("worker: %+v, %v", resp, err)
	}
	if flushes.Load() == before {
		t.Error("the worker function did not flush its spans")
	}
	enqueue := spantest.CarriedTrace(t, rec.Ended(), "batch_report")
	if got := "00-" + enqueue.SpanContext().TraceID().String() + "-" + enqueue.SpanContext().SpanID().String() + "-01"; got != carried {
		t.Errorf("message attribute %s, want the enqueue span's context %s", carried, got)
	}
}

// A task stream (subscriptions/listen for a task id) is streamed through
// the Function URL (RESPONSE_STREAM): the acknowledgement and the task's
// state arrive while the invocation still runs, the completion that a
// worker invocation commits arrives on the same stream, and the stream
// ends with the listen result.
func TestMCPFunctionURLTaskStream(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	id := createTask(t, e, 1)
	c := &mcptest.Client{Caps: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	body, hdr := c.Envelope("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	resp, err := awslambda.MCPHandler(e.b)(t.Context(), functionURLRequest(t, body, hdr))
	if err != nil {
		t.Fatalf("MCP handler: %v", err)
	}
	if ct := resp.Headers["Content-Type"]; ct != "text/event-stream" || resp.StatusCode != 200 {
		t.Fatalf("listen: HTTP %d %q, want a 200 event stream", resp.StatusCode, ct)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- data
			}
		}
	}()
	read := func(want string) string {
		t.Helper()
		select {
		case l := <-lines:
			if !strings.Contains(l, want) {
				t.Fatalf("stream: %s, want %s", l, want)
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("stream: nothing within 30s, want %s", want)
			return ""
		}
	}
	read(`"taskIds":["` + id + `"]`)
	read(`"status":"working"`)
	// The invocation is still streaming: now a worker invocation runs the step.
	for _, m := range sqsMessagesFor(e, id) {
		if _, err := awslambda.WorkerHandler(e.b)(t.Context(), sqsEvent(t, map[string]string{"m": m.Body})); err != nil {
			t.Fatal(err)
		}
	}
	for l := read(`"status":`); !strings.Contains(l, `"status":"completed"`); l = read(`"status":`) {
		if !strings.Contains(l, `"status":"working"`) { // a new status message of the running step
			t.Fatalf("stream: %s, want working, then completed", l)
		}
	}
	read(`"resultType":"complete"`)
	if l, open := <-lines; open {
		t.Fatalf("stream went on after its result: %s", l)
	}
}
