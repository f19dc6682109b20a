// Package sqsqueue is the [driver.Queue] on Amazon SQS, the event source of
// the AWS Lambda worker function; only the Lambda entry points import it.
//
// [Queue] turns an enqueue into one SQS SendMessage through a [Sender].
// The package's own [Client] is that sender: SendMessage over the SQS JSON
// protocol, signed with AWS Signature Version 4, retried with jittered
// backoff, on the standard library alone. It replaces the AWS SDK for Go,
// whose SQS client, credential chain and endpoint rules were 61 packages
// and 0.9 MB of every Lambda bootstrap for this one call; no binary of
// mcptasks links the SDK (its signer is only the tests' oracle).
// [NewClient] configures a Client from the environment Lambda gives every
// function; [NewClientWith] from a region and any credentials source.
//
// [driver.Queue]: https://pkg.go.dev/github.com/mcptasks/mcptasks/pkg/tasks/driver#Queue
package sqsqueue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/queue"
)

// MaxDelay is the longest per-message delay Amazon SQS accepts
// (DelaySeconds 900). Longer waits are chained by the worker: the message
// arrives early, the task is still asleep, and the worker enqueues it again.
const MaxDelay = 15 * time.Minute

// SendMessageInput is one SQS SendMessage request.
type SendMessageInput struct {
	// QueueURL is the queue's URL.
	QueueURL string
	// MessageBody is the message, at most 1 MiB.
	MessageBody string
	// DelaySeconds delays the delivery (0-900; standard queues only). Zero
	// sends no delay, so the queue's default delay applies.
	DelaySeconds int32
	// MessageGroupID and MessageDeduplicationID are a FIFO queue's ids.
	MessageGroupID         string
	MessageDeduplicationID string
	// TraceParent, when set, is sent as the String message attribute
	// "traceparent" (the enqueuer's trace context; see queue.TraceParent).
	TraceParent string
}

// SendMessageOutput is SendMessage's answer.
type SendMessageOutput struct {
	MessageID        string
	MD5OfMessageBody string
	// SequenceNumber is set for a FIFO queue.
	SequenceNumber string
}

// Sender sends a message to SQS: a [*Client], or a substitute in tests.
type Sender interface {
	SendMessage(ctx context.Context, in *SendMessageInput) (*SendMessageOutput, error)
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
	// wakes the task when it is due. So on a FIFO queue every sleep and
	// every retry backoff ends only when the sweeper next runs after it is
	// due (up to the sweep schedule plus the enqueue grace late), and so
	// does the repair of a worker that died mid-step (the message each
	// lease renewal sends for the lease's end, see driver.Queue on Defer, arrives
	// at once and is dropped): prefer a standard queue. Standard queues get neither id: SQS rejects a
	// deduplication id there, and duplicates are harmless.
	FIFO bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Queue is a [driver.Queue] on Amazon SQS, the event source of the Lambda worker.
// Delivery, redelivery (visibility timeout) and the dead-letter queue are
// SQS's; a standard queue may deliver a message more than once, and two
// enqueues of one id are two messages, both harmless to the worker. It is
// no Defer method (SQS cannot move a message; see driver.Queue): a worker that renews its
// lease sends a delayed message due at each renewed lease's end, and if it
// dies the last one hands the task to another worker when the lease runs
// out (the queue's visibility timeout, which Lambda needs longer than the
// function's, would take minutes).
type Queue struct {
	c   Sender
	url string
	o   Options
}

// New returns a queue that sends to the SQS queue at queueURL through c
// (a [*Client]).
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

// Enqueue implements driver.Queue: one SendMessage whose DelaySeconds is the time
// until notBefore rounded up to whole seconds (so it is never early), at
// most 900.
func (q *Queue) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	if err := queue.CheckTaskID(taskID); err != nil {
		return err
	}
	now := q.o.Now()
	in := &SendMessageInput{QueueURL: q.url, MessageBody: string(queue.EncodeMessage(taskID)), TraceParent: queue.TraceParent(ctx)}
	if q.o.FIFO {
		due := notBefore
		if due.IsZero() {
			due = now
		}
		in.MessageGroupID = taskID
		in.MessageDeduplicationID = taskID + "." + strconv.FormatInt(due.UnixMilli(), 10)
	} else if d := notBefore.Sub(now); !notBefore.IsZero() && d > 0 {
		secs := int64((d + time.Second - 1) / time.Second)
		in.DelaySeconds = int32(min(secs, int64(MaxDelay/time.Second)))
	}
	if _, err := q.c.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("queue: sqs send %s: %w", taskID, err)
	}
	return nil
}

// MaxDelay implements driver.Queue: 15 minutes, SQS's limit (a FIFO queue holds
// no per-message delay at all, see Options.FIFO).
func (q *Queue) MaxDelay() time.Duration { return MaxDelay }
