package examples_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// newServer serves the example tools on the embedded Redis, with workers
// driven by hand.
func newServer(t *testing.T) *tasks.Server {
	rc := testredis.Client(t, "embedded")
	srv := tasks.New(&mcp.Implementation{Name: "examples", Version: examples.Version}, nil,
		redisstore.New(rc, nil), redisqueue.New(rc, nil), &tasks.Options{Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
	examples.Register(srv)
	return srv
}

// run creates a stoppable_batch task; answer, if not nil, is sent after the
// first invocation. It returns the statuses the task went through (after
// each invocation) and its result's text.
func run(t *testing.T, srv *tasks.Server, args string, answer json.RawMessage) ([]driver.Status, string) {
	t.Helper()
	ctx := context.Background()
	task, err := srv.Store().Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "stoppable_batch",
		Args: json.RawMessage(args), TTL: time.Hour, PollInterval: time.Second, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var seen []driver.Status
	for i := 0; i < 50; i++ {
		res, err := srv.Advance(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, res.Status)
		if i == 0 && answer != nil {
			if _, err := srv.Store().Update(ctx, "alice", task.ID, map[string]json.RawMessage{"stop": answer}, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if res.Status.Terminal() {
			got, err := srv.Store().Get(ctx, "alice", task.ID)
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := json.Unmarshal(got.Result, &r); err != nil || len(r.Content) != 1 {
				t.Fatalf("task %s ended %s: %s %v", task.ID, got.Status, got.Result, got.Error)
			}
			return seen, r.Content[0].Text
		}
	}
	t.Fatalf("task %s did not end", task.ID)
	return nil, ""
}

// stoppable_batch stops after the part in flight when the user accepts its
// offer, runs to the end otherwise, and an answer cuts its pause short.
func TestStoppableBatch(t *testing.T) {
	srv := newServer(t)
	stop := json.RawMessage(`{"action":"accept","content":{"stop":true}}`)
	if _, got := run(t, srv, `{"parts":4}`, nil); got != "processed 4 of 4 parts, checksum 30" {
		t.Errorf("unanswered: %q", got)
	}
	if _, got := run(t, srv, `{"parts":4}`, stop); got != "processed 1 of 4 parts, checksum 1; stopped early" {
		t.Errorf("stopped after the first part: %q", got)
	}
	if _, got := run(t, srv, `{"parts":3}`, json.RawMessage(`{"action":"decline"}`)); got != "processed 3 of 3 parts, checksum 14" {
		t.Errorf("declined: %q", got)
	}
	// An hour's pause after part 1: the task sleeps in input_required (the
	// offer outstanding) until the answer wakes it.
	seen, got := run(t, srv, `{"parts":3,"pauseMillis":3600000}`, stop)
	if got != "processed 1 of 3 parts, checksum 1; stopped early" || len(seen) != 2 || seen[0] != driver.StatusInputRequired {
		t.Errorf("stopped in a pause: statuses %v, result %q; want [input_required completed]", seen, got)
	}
}

// A duration argument that would overflow a time.Duration fails the task
// with -32602 instead of wrapping to some other duration.
func TestDurationArgumentsBounded(t *testing.T) {
	srv := newServer(t)
	ctx := context.Background()
	for tool, args := range map[string]string{
		"slow_compute":    `{"seconds":9300000000}`,
		"batch_report":    `{"steps":1,"stepMillis":18446744073710}`,
		"stoppable_batch": `{"parts":2,"pauseMillis":18446744073710}`,
	} {
		task, err := srv.Store().Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: tool,
			Args: json.RawMessage(args), TTL: time.Hour, PollInterval: time.Second, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Advance(ctx, task.ID); err != nil {
			t.Fatal(err)
		}
		got, err := srv.Store().Get(ctx, "alice", task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != driver.StatusFailed || got.Error == nil || got.Error.Code != -32602 {
			t.Errorf("%s %s: %s %+v, want failed with -32602", tool, args, got.Status, got.Error)
		}
	}
}
