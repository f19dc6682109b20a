// Package sqsqueue is the [tasks.Queue] on Amazon SQS, the event source of
// the AWS Lambda worker function. It is the only package of mcptasks that
// links the AWS SDK's SQS client; only the Lambda entry points import it.
//
// [tasks.Queue]: https://pkg.go.dev/github.com/mcptasks/mcptasks/pkg/tasks#Queue
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/mcptasks/mcptasks/pkg/queue"
)

// MaxDelay is the longest per-message delay Amazon SQS accepts
// (DelaySeconds 900). Longer waits are chained by the worker: the message
// arrives early, the task is still asleep, and the worker enqueues it again.
const MaxDelay = 15 * time.Minute

// Sender is the part of *sqs.Client the adapter uses.
type Sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Options configures an SQS queue. The zero value is a standard queue.
type Options struct {
	// FIFO marks a FIFO queue (its URL ends in ".fifo"). Messages then carry
	// a MessageGroupId (the task id: one task's messages stay in order,
	// different tasks run in parallel) and a MessageDeduplicationId (the
	// task id and the due time), and no DelaySeconds, which FIFO queues
	// refuse per message: a message due later is sent at once, a worker that
	// finds the task still asleep enqueues it again under the same
	// deduplication id (which SQS drops for five minutes), and the sweeper
	// wakes the task when it is due. Standard queues get neither id: SQS
	// rejects a deduplication id there, and duplicates are harmless.
	FIFO bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Queue is a [tasks.Queue] on Amazon SQS, the event source of the Lambda worker.
// Delivery, redelivery (visibility timeout) and the dead-letter queue are
// SQS's; a standard queue may deliver a message more than once, and two
// enqueues of one id are two messages, both harmless to the worker.
type Queue struct {
	c   Sender
	url string
	o   Options
}

// New returns a queue that sends to the SQS queue at queueURL through c
// (an *sqs.Client).
func New(c Sender, queueURL string, opts *Options) *Queue {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Queue{c: c, url: queueURL, o: o}
}

// IsFIFOURL reports whether an SQS queue URL names a FIFO queue.
func IsFIFOURL(u string) bool { return strings.HasSuffix(u, ".fifo") }

// Enqueue implements tasks.Queue: one SendMessage whose DelaySeconds is the time
// until notBefore rounded up to whole seconds (so it is never early), at
// most 900.
func (q *Queue) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	if err := queue.CheckTaskID(taskID); err != nil {
		return err
	}
	now := q.o.Now()
	in := &sqs.SendMessageInput{
		QueueUrl:    aws.String(q.url),
		MessageBody: aws.String(string(queue.EncodeMessage(taskID))),
	}
	if q.o.FIFO {
		due := notBefore
		if due.IsZero() {
			due = now
		}
		in.MessageGroupId = aws.String(taskID)
		in.MessageDeduplicationId = aws.String(taskID + "." + strconv.FormatInt(due.UnixMilli(), 10))
	} else if d := notBefore.Sub(now); !notBefore.IsZero() && d > 0 {
		secs := int64((d + time.Second - 1) / time.Second)
		in.DelaySeconds = int32(min(secs, int64(MaxDelay/time.Second)))
	}
	if _, err := q.c.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("queue: sqs send %s: %w", taskID, err)
	}
	return nil
}

// MaxDelay implements tasks.Queue: 15 minutes, SQS's limit (a FIFO queue holds
// no per-message delay at all, see Options.FIFO).
func (q *Queue) MaxDelay() time.Duration { return MaxDelay }

// NewClient returns an SQS client configured from the environment AWS
// Lambda gives every function: the region from AWS_REGION (or
// AWS_DEFAULT_REGION), the function role's credentials from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, and an
// endpoint override from AWS_ENDPOINT_URL_SQS (or AWS_ENDPOINT_URL).
//
// It deliberately does not load the AWS SDK's full configuration chain
// (shared config files, SSO, STS, IMDS), which would double the size of
// every Lambda bootstrap for sources a function never uses. Elsewhere,
// build a client with config.LoadDefaultConfig and pass it to [New].
func NewClient(getenv func(string) string) (*sqs.Client, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	region := first("AWS_REGION", "AWS_DEFAULT_REGION")
	key, secret := first("AWS_ACCESS_KEY_ID"), first("AWS_SECRET_ACCESS_KEY")
	switch {
	case region == "":
		return nil, errors.New("sqs: AWS_REGION is not set (Lambda sets it; elsewhere set it or pass a client built with the AWS SDK's config.LoadDefaultConfig)")
	case key == "" || secret == "":
		return nil, errors.New("sqs: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set (Lambda sets them from the function's role; elsewhere pass a client built with the AWS SDK's config.LoadDefaultConfig)")
	}
	o := sqs.Options{
		Region:      region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(key, secret, first("AWS_SESSION_TOKEN"))),
		Retryer:     retry.NewStandard(),
	}
	if ep := first("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"); ep != "" {
		o.BaseEndpoint = aws.String(ep)
	}
	return sqs.New(o), nil
}
