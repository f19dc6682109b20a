package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// SQSMaxDelay is the longest per-message delay Amazon SQS accepts
// (DelaySeconds 900). Longer waits are chained by the worker: the message
// arrives early, the task is still asleep, and the worker enqueues it again.
const SQSMaxDelay = 15 * time.Minute

// SQSSender is the part of *sqs.Client the adapter uses.
type SQSSender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SQSOptions configures an SQS queue. The zero value is a standard queue.
type SQSOptions struct {
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

// SQS is a [Queue] on Amazon SQS, the event source of the Lambda worker.
// Delivery, redelivery (visibility timeout) and the dead-letter queue are
// SQS's; a standard queue may deliver a message more than once, and two
// enqueues of one id are two messages, both harmless to the worker.
type SQS struct {
	c   SQSSender
	url string
	o   SQSOptions
}

var _ Queue = (*SQS)(nil)

// NewSQS returns a queue that sends to the SQS queue at queueURL through c
// (an *sqs.Client).
func NewSQS(c SQSSender, queueURL string, opts *SQSOptions) *SQS {
	var o SQSOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &SQS{c: c, url: queueURL, o: o}
}

// IsFIFOQueueURL reports whether an SQS queue URL names a FIFO queue.
func IsFIFOQueueURL(u string) bool { return strings.HasSuffix(u, ".fifo") }

// Enqueue implements Queue: one SendMessage whose DelaySeconds is the time
// until notBefore rounded up to whole seconds (so it is never early), at
// most 900.
func (q *SQS) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	if err := checkTaskID(taskID); err != nil {
		return err
	}
	now := q.o.Now()
	in := &sqs.SendMessageInput{
		QueueUrl:    aws.String(q.url),
		MessageBody: aws.String(string(EncodeMessage(taskID))),
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
		in.DelaySeconds = int32(min(secs, int64(SQSMaxDelay/time.Second)))
	}
	if _, err := q.c.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("queue: sqs send %s: %w", taskID, err)
	}
	return nil
}

// MaxDelay implements Queue: 15 minutes, SQS's limit (a FIFO queue holds
// no per-message delay at all, see SQSOptions.FIFO).
func (q *SQS) MaxDelay() time.Duration { return SQSMaxDelay }
