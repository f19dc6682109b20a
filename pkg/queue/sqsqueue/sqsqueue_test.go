package sqsqueue_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/mcptasks/mcptasks/internal/fakesqs"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/sqsqueue"
)

// TestSQS drives the SQS adapter through a real aws-sdk-go-v2 client
// against a local endpoint speaking the SQS JSON protocol, and checks what
// reaches the service.
func TestSQS(t *testing.T) {
	t.Parallel()
	srv := fakesqs.Start(t)
	client := srv.Client()
	std := srv.CreateQueue("tasks")
	fifo := srv.CreateQueue("tasks.fifo")
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	sent := func(t *testing.T, queueURL, id string) fakesqs.Message {
		t.Helper()
		var found []fakesqs.Message
		for _, m := range srv.Messages() {
			if m.QueueURL == queueURL && strings.Contains(m.Body, `"`+id+`"`) {
				found = append(found, m)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d messages for %s, want 1: %+v", len(found), id, found)
		}
		return found[0]
	}

	t.Run("MaxDelayIs15Minutes", func(t *testing.T) {
		if got := sqsqueue.New(client, std, nil).MaxDelay(); got != 15*time.Minute {
			t.Errorf("MaxDelay = %v, want 15m", got)
		}
	})

	t.Run("DelaySecondsRoundedUpAndCapped", func(t *testing.T) {
		q := sqsqueue.New(client, std, &sqsqueue.Options{Now: clock})
		cases := []struct {
			id   string
			at   time.Time
			want int32
		}{
			{"now-zero", time.Time{}, 0},
			{"past", now.Add(-time.Minute), 0},
			{"in-1500ms", now.Add(1500 * time.Millisecond), 2}, // never early
			{"in-10s", now.Add(10 * time.Second), 10},
			{"in-15m", now.Add(15 * time.Minute), 900},
			{"in-2h", now.Add(2 * time.Hour), 900}, // the worker chains the rest
		}
		for _, c := range cases {
			if err := q.Enqueue(t.Context(), c.id, c.at); err != nil {
				t.Fatalf("Enqueue(%s): %v", c.id, err)
			}
			m := sent(t, std, c.id)
			if m.DelaySeconds != c.want {
				t.Errorf("%s: DelaySeconds = %d, want %d", c.id, m.DelaySeconds, c.want)
			}
			if m.GroupID != "" || m.DedupID != "" {
				t.Errorf("%s: standard queue got group %q dedup %q, want neither", c.id, m.GroupID, m.DedupID)
			}
			got, err := queue.DecodeMessage([]byte(m.Body))
			if err != nil || got != c.id {
				t.Errorf("%s: body %q decodes to %q, %v", c.id, m.Body, got, err)
			}
		}
	})

	t.Run("FIFOCarriesGroupAndDedupIDsAndNoDelay", func(t *testing.T) {
		if !sqsqueue.IsFIFOURL(fifo) || sqsqueue.IsFIFOURL(std) {
			t.Fatalf("IsFIFOQueueURL wrong for %s / %s", fifo, std)
		}
		q := sqsqueue.New(client, fifo, &sqsqueue.Options{FIFO: true, Now: clock})
		at := now.Add(30 * time.Second)
		if err := q.Enqueue(t.Context(), "fifo-later", at); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if err := q.Enqueue(t.Context(), "fifo-now", time.Time{}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		later, nowMsg := sent(t, fifo, "fifo-later"), sent(t, fifo, "fifo-now")
		if later.DelaySeconds != 0 {
			t.Errorf("FIFO DelaySeconds = %d, want 0 (FIFO queues refuse per-message delays)", later.DelaySeconds)
		}
		if later.GroupID != "fifo-later" {
			t.Errorf("MessageGroupId = %q, want the task id", later.GroupID)
		}
		if want := "fifo-later." + strconv.FormatInt(at.UnixMilli(), 10); later.DedupID != want {
			t.Errorf("MessageDeduplicationId = %q, want %q", later.DedupID, want)
		}
		if want := "fifo-now." + strconv.FormatInt(now.UnixMilli(), 10); nowMsg.DedupID != want {
			t.Errorf("MessageDeduplicationId = %q, want %q", nowMsg.DedupID, want)
		}
	})

	t.Run("ServiceErrorsAreReturned", func(t *testing.T) {
		q := sqsqueue.New(client, srv.URL+"/000000000000/missing", nil)
		err := q.Enqueue(t.Context(), "x", time.Time{})
		var api smithy.APIError
		if !errors.As(err, &api) || !strings.Contains(api.ErrorCode(), "QueueDoesNotExist") && !strings.Contains(api.ErrorCode(), "NonExistentQueue") {
			t.Fatalf("Enqueue to a missing queue = %v, want the QueueDoesNotExist API error", err)
		}
	})

	t.Run("TransientFailuresAreRetriedBySDK", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		srv.FailNext(500, 503)
		if err := q.Enqueue(t.Context(), "flaky", time.Time{}); err != nil {
			t.Fatalf("Enqueue after two transient failures: %v", err)
		}
		sent(t, std, "flaky")
	})

	t.Run("BadTaskIDsAreRefusedLocally", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		before := len(srv.Messages())
		for _, id := range []string{"", "has space", strings.Repeat("x", queue.MaxTaskIDLen+1)} {
			if err := q.Enqueue(t.Context(), id, time.Time{}); err == nil {
				t.Errorf("Enqueue(%q) = nil, want an error", id)
			}
		}
		if n := len(srv.Messages()); n != before {
			t.Errorf("%d messages sent for refused ids", n-before)
		}
	})

	t.Run("ContextCancelled", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := q.Enqueue(ctx, "cancelled", time.Time{}); !errors.Is(err, context.Canceled) {
			t.Errorf("Enqueue with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

func TestMessageCodec(t *testing.T) {
	t.Parallel()
	id, err := queue.DecodeMessage(queue.EncodeMessage("abc-_DEF123"))
	if err != nil || id != "abc-_DEF123" {
		t.Fatalf("round trip = %q, %v", id, err)
	}
	for _, body := range []string{``, `{}`, `not json`, `{"taskId":""}`, `{"taskId":"a\nb"}`, `{"taskId":7}`} {
		if id, err := queue.DecodeMessage([]byte(body)); err == nil {
			t.Errorf("DecodeMessage(%q) = %q, want an error", body, id)
		}
	}
}
