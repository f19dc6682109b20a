// Package lambdart is a local AWS Lambda Runtime API: the HTTP interface a
// provided.al2023 bootstrap talks to at AWS_LAMBDA_RUNTIME_API. It hands
// out queued invocations on GET /2018-06-01/runtime/invocation/next and
// collects what the function posts back, so that tests and benchmarks can
// run the real bootstrap binaries outside AWS.
package lambdart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Result is what a function posted for one invocation.
type Result struct {
	ID          string
	Kind        string // "response", "error" or "init/error"
	Body        []byte
	ContentType string
	At          time.Time // when the post arrived
}

// API is a running Runtime API. Its zero value is not usable; call Start.
type API struct {
	// Addr is host:port, as AWS_LAMBDA_RUNTIME_API holds it.
	Addr    string
	pending chan invocation
	results chan Result
	srv     *http.Server
	stop    chan struct{}
}

type invocation struct {
	id      string
	payload []byte
}

// Start serves a Runtime API on a free loopback port until Close.
func Start() (*API, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lambdart: %w", err)
	}
	a := &API{Addr: ln.Addr().String(), pending: make(chan invocation, 16), results: make(chan Result, 16), stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", func(w http.ResponseWriter, r *http.Request) {
		select {
		case inv := <-a.pending:
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(60*time.Second).UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:mcptasks")
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(inv.payload)
		case <-r.Context().Done():
		case <-a.stop:
		}
	})
	result := func(kind string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			res := Result{ID: r.PathValue("id"), Kind: kind, Body: body, ContentType: r.Header.Get("Content-Type"), At: time.Now()}
			select {
			case a.results <- res:
			case <-a.stop:
			}
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"status":"OK"}`))
		}
	}
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", result("response"))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", result("error"))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", result("init/error"))
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// Queue queues an invocation with the given id and JSON event; the
// function receives it on its next "next".
func (a *API) Queue(id string, event []byte) { a.pending <- invocation{id: id, payload: event} }

// Wait returns the next result the function posts, or an error when ctx
// ends first.
func (a *API) Wait(ctx context.Context) (Result, error) {
	select {
	case res := <-a.results:
		return res, nil
	case <-ctx.Done():
		return Result{}, fmt.Errorf("lambdart: no result: %w", ctx.Err())
	}
}

// Invoke queues an event and waits for the function's response to it; an
// error posted for it, or one for another invocation, is an error.
func (a *API) Invoke(ctx context.Context, id string, event []byte) (Result, error) {
	a.Queue(id, event)
	res, err := a.Wait(ctx)
	if err != nil {
		return res, err
	}
	if res.Kind != "response" || res.ID != id {
		return res, fmt.Errorf("lambdart: invocation %s: the function posted %s for %q: %s", id, res.Kind, res.ID, res.Body)
	}
	return res, nil
}

// Close stops the API: pending "next" calls return empty.
func (a *API) Close() error {
	close(a.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("lambdart: %w", err)
	}
	return nil
}

// FunctionURLEvent is a Lambda Function URL (payload 2.0) event for a POST
// of body to /mcp with the given headers (lower-case names).
func FunctionURLEvent(body []byte, headers map[string]string) map[string]any {
	h := map[string]string{"host": "abcdefghij.lambda-url.us-east-1.on.aws"}
	for k, v := range headers {
		h[k] = v
	}
	return map[string]any{
		"version": "2.0", "rawPath": "/mcp", "rawQueryString": "", "headers": h,
		"requestContext": map[string]any{
			"accountId": "anonymous", "apiId": "abcdefghij", "domainName": "abcdefghij.lambda-url.us-east-1.on.aws",
			"domainPrefix": "abcdefghij", "requestId": "r-1", "routeKey": "$default", "stage": "$default",
			"http": map[string]any{"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7", "userAgent": "lambdart"},
			"time": "30/Nov/2026:12:00:00 +0000", "timeEpoch": 1796040000000,
		},
		"body": string(body), "isBase64Encoded": false,
	}
}

// SQSRecord is one record of an SQS event: the message messageID with the
// given body, delivered for the first time; sqsID makes its receipt
// handle.
func SQSRecord(messageID, body, sqsID string) map[string]any {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	return map[string]any{
		"messageId":     messageID,
		"receiptHandle": "AQEB" + sqsID,
		"body":          body,
		"attributes": map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    now,
			"SenderId":                         "AROAEXAMPLE:mcptasks-McpFunction",
			"ApproximateFirstReceiveTimestamp": now,
		},
		"messageAttributes": map[string]any{},
		"md5OfBody":         "",
		"eventSource":       "aws:sqs",
		"eventSourceARN":    "arn:aws:sqs:us-east-1:000000000000:mcptasks-tasks",
		"awsRegion":         "us-east-1",
	}
}

// ScheduledEvent is an EventBridge scheduled event (the sweeper's trigger).
func ScheduledEvent() map[string]any {
	return map[string]any{"version": "0", "id": "e-1", "detail-type": "Scheduled Event", "source": "aws.events",
		"account": "000000000000", "time": time.Now().UTC().Format(time.RFC3339), "region": "us-east-1",
		"resources": []string{"arn:aws:events:us-east-1:000000000000:rule/mcptasks-sweep"}, "detail": map[string]any{}}
}
