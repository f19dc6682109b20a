// Package awslambda serves a [tasks.App] as AWS Lambda functions: each
// cmd/lambda/<function>/main.go of a deployment is one statement,
//
//	func main() { awslambda.StartMCP(tools.App) }
//
// ([StartWorker], [StartSweep] for the others). The handler functions are
// exported so that tests can call them with real aws-lambda-go/events
// payloads:
//
//   - [MCPHandler]: the MCP endpoint behind a Function URL (InvokeMode
//     RESPONSE_STREAM), through aws-lambda-go's lambdaurl adapter.
//   - [WorkerHandler]: the SQS event source's handler; it advances each
//     record's task by one step and reports exactly the records that must
//     be redelivered in BatchItemFailures (ReportBatchItemFailures).
//   - [SweepHandler]: the scheduled sweeper.
//
// The Start functions are the binaries' whole main: they build the
// process's bundle once per sandbox (the Redis dial, reused by every warm
// invocation) — on an on-demand cold start while the runtime client
// fetches the first event, in the init phase when the sandbox is
// initialised ahead of its events —, close it on SIGTERM, and start the
// runtime loop. With several apps, MCPTASKS_APP
// selects one by name. The binaries link the SQS adapter and neither the
// QStash adapter nor the embedded Redis.
package awslambda

import (
	"context"
	"net/http"
	"os"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/platform"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/sqsqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// MCPHandler returns the Function URL handler serving b's MCP endpoint and
// protected resource metadata.
func MCPHandler(b *bundle.Bundle) func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	return lambdaurl.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.Handler.ServeHTTP(w, r)
		b.FlushTelemetry(r.Context()) // the sandbox may be frozen once it returns
	}))
}

// WorkerHandler returns the SQS handler: every record's task is advanced
// by one step, the records of one batch concurrently (so a batch takes as
// long as its slowest step, within the function's timeout, which the
// template sets to MCPTASKS_MAX_DURATION). A record whose Advance fails
// (the store failed) is listed in BatchItemFailures, and only it: SQS
// redelivers it after the visibility timeout and, after maxReceiveCount
// tries, moves it to the dead-letter queue. A record that is not a message
// of this system is listed too, so it ends in the dead-letter queue where
// someone can look at it. The error is always nil: an error would fail the
// whole batch.
func WorkerHandler(b *bundle.Bundle) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	log := b.Log()
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		failed := make([]bool, len(ev.Records))
		var wg sync.WaitGroup
		for i, rec := range ev.Records {
			id, err := queue.DecodeMessage([]byte(rec.Body))
			if err != nil {
				log.Error("undecodable SQS message; leaving it to the dead-letter queue", "messageId", rec.MessageId, "err", err)
				failed[i] = true
				continue
			}
			var tp string
			if a, ok := rec.MessageAttributes["traceparent"]; ok && a.StringValue != nil {
				tp = *a.StringValue
			}
			wg.Go(func() {
				// Advance keeps its step within MaxDuration minus the
				// safety margin; ctx carries the invocation's deadline
				// (and the enqueuer's trace context, if any).
				failed[i] = b.Advance(queue.WithTraceParent(ctx, tp), id) != nil
			})
		}
		wg.Wait()
		b.FlushTelemetry(ctx)
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for i, f := range failed {
			if f {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			}
		}
		return resp, nil
	}
}

// SweepHandler returns the scheduled sweeper: one sweep per EventBridge
// "Scheduled Event", whose counts are the invocation's result.
func SweepHandler(b *bundle.Bundle) func(context.Context, events.CloudWatchEvent) (tasks.SweepResult, error) {
	return func(ctx context.Context, _ events.CloudWatchEvent) (tasks.SweepResult, error) {
		defer b.FlushTelemetry(ctx)
		return b.Sweep(ctx)
	}
}

// StartMCP runs the MCP Function URL binary (cmd/lambda/mcp). While the
// bundle cannot be built a request is answered 500.
func StartMCP(apps ...*tasks.App) {
	serve(apps, MCPHandler, unavailable)
}

// StartWorker runs the SQS worker binary (cmd/lambda/worker). While the
// bundle cannot be built the invocation fails, and SQS redelivers its
// batch.
func StartWorker(apps ...*tasks.App) {
	serve(apps, WorkerHandler, nil)
}

// StartSweep runs the scheduled sweeper binary (cmd/lambda/sweep).
func StartSweep(apps ...*tasks.App) {
	serve(apps, SweepHandler, nil)
}

// serve runs the runtime loop: each invocation gets the process's bundle
// (see start) and is handled by handler's function for it. When the
// bundle cannot be built the invocation is answered by unbuilt, or fails
// with the build's error if unbuilt is nil.
func serve[In, Out any](apps []*tasks.App, handler func(*bundle.Bundle) func(context.Context, In) (Out, error), unbuilt func(context.Context, In) (Out, error)) {
	p := start(apps)
	lambda.StartHandlerFunc(func(ctx context.Context, in In) (Out, error) {
		b, err := p.Bundle()
		if err != nil {
			if unbuilt != nil {
				return unbuilt(ctx, in)
			}
			var zero Out
			return zero, err
		}
		return handler(b)(ctx, in)
	}, lambda.WithEnableSIGTERM(closer(p)))
}

// WithSQS makes a bundle able to send to Amazon SQS (MCPTASKS_QUEUE=sqs)
// through c: an [sqsqueue.Client] (from [sqsqueue.NewClientWith] for
// credentials from another source than the environment) or any
// [sqsqueue.Sender]. nil builds a client from the AWS environment
// ([sqsqueue.NewClient]) when the queue is first built.
func WithSQS(c sqsqueue.Sender) bundle.Option {
	return bundle.WithQueue(bundle.QueueSQS, func(ctx context.Context, cfg bundle.Config) (driver.Queue, error) {
		if c == nil {
			sc, err := sqsqueue.NewClient(nil)
			if err != nil {
				return nil, err
			}
			c = sc
		}
		return sqsqueue.New(c, cfg.SQS.QueueURL, &sqsqueue.Options{FIFO: cfg.SQS.FIFO}), nil
	})
}

// start returns the process's bundle, logging JSON (the template's
// LogFormat) at MCPTASKS_LOG_LEVEL, its Redis connections sized for one
// invocation at a time (a sandbox serves one; a worker's batch is at most
// 10 records), built at once or in the background as the sandbox's
// initialisation allows (aheadOfEvents).
func start(apps []*tasks.App) *platform.Process {
	p := platform.NewProcess(apps, nil, platform.JSONLogger, WithSQS(nil),
		bundle.WithRedisClientOptions(bundle.ForOneRequestAtATime)).ExpectQueue(bundle.QueueSQS)
	if aheadOfEvents(os.Getenv("AWS_LAMBDA_INITIALIZATION_TYPE")) {
		if _, err := p.Bundle(); err != nil {
			os.Exit(1) // the builder logged why; Lambda reports an init error
		}
		return p
	}
	p.Prepare()
	return p
}

// aheadOfEvents reports whether Lambda initialises this sandbox ahead of
// its first event (AWS_LAMBDA_INITIALIZATION_TYPE provisioned-concurrency,
// snap-start, or any other than on-demand), so that it may freeze the
// sandbox as soon as the runtime asks for an event: the bundle (the Redis
// dial) is then built during the init phase, before asking. On an
// on-demand cold start the event is already waiting, so the bundle is
// built in the background while the runtime client registers and fetches
// it (platform.Process.Prepare), and the invocation waits for the bundle:
// the dial overlaps with the runtime API's round trips instead of
// preceding them.
func aheadOfEvents(initType string) bool {
	return initType != "" && initType != "on-demand"
}

// closer closes the process's bundle at SIGTERM, if it was built.
func closer(p *platform.Process) func() {
	return func() {
		if b := p.Built(); b != nil {
			b.Close()
		}
	}
}

// unavailable answers a Function URL request when the bundle cannot be
// built: 500 with the same body as the Vercel functions (the builder
// logged why).
func unavailable(ctx context.Context, req *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	return lambdaurl.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":"server misconfigured or store unreachable"}` + "\n"))
	}))(ctx, req)
}
