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
// process's bundle during the Lambda init phase (so the Redis dial happens
// there, once per sandbox, reused by every warm invocation), close it on
// SIGTERM, and start the runtime loop. With several apps, MCPTASKS_APP
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

// StartMCP runs the MCP Function URL binary (cmd/lambda/mcp).
func StartMCP(apps ...*tasks.App) {
	b := mustBundle(apps)
	lambdaurl.Start(b.Handler, lambda.WithEnableSIGTERM(b.Close))
}

// StartWorker runs the SQS worker binary (cmd/lambda/worker).
func StartWorker(apps ...*tasks.App) {
	b := mustBundle(apps)
	lambda.StartWithOptions(WorkerHandler(b), lambda.WithEnableSIGTERM(b.Close))
}

// StartSweep runs the scheduled sweeper binary (cmd/lambda/sweep).
func StartSweep(apps ...*tasks.App) {
	b := mustBundle(apps)
	lambda.StartWithOptions(SweepHandler(b), lambda.WithEnableSIGTERM(b.Close))
}

// WithSQS makes a bundle able to send to Amazon SQS (MCPTASKS_QUEUE=sqs)
// through c: an [sqsqueue.Client] (from [sqsqueue.NewClientWith] for
// credentials from another source than the environment) or any
// [sqsqueue.Sender]. nil builds a client from the AWS environment
// ([sqsqueue.NewClient]) when the queue is first built.
func WithSQS(c sqsqueue.Sender) bundle.Option {
	return bundle.WithQueue(bundle.QueueSQS, func(ctx context.Context, cfg bundle.Config) (tasks.Queue, error) {
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

// mustBundle builds the process's bundle during the init phase, logging
// JSON (the template's LogFormat) at MCPTASKS_LOG_LEVEL. A failure ends the
// process: Lambda reports an init error and retries with a fresh sandbox.
func mustBundle(apps []*tasks.App) *bundle.Bundle {
	b, err := platform.NewProcess(apps, nil, platform.JSONLogger, WithSQS(nil)).ExpectQueue(bundle.QueueSQS).Bundle()
	if err != nil {
		os.Exit(1) // the builder logged why
	}
	return b
}
