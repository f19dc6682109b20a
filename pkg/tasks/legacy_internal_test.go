package tasks

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// deadlineStore fails every read with the deadline, as rueidis does for a
// read whose context's deadline has passed.
type deadlineStore struct{ driver.Store }

func (deadlineStore) Get(context.Context, string, string) (*driver.Task, error) {
	return nil, fmt.Errorf("redisstore: get: %w", context.DeadlineExceeded)
}

// pastDeadline is a context whose deadline has passed but whose timer has
// not fired yet: Err is still nil.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A held 2025-11-25 tasks/result whose last read fails at the budget's end
// ends as the budget's end (the client resumes the stream), not as an
// unavailable store, even when the store client saw the deadline pass an
// instant before the context did (a CI failure of
// TestStreamsEndWithinBudget).
func TestWatchReadFailingAtTheDeadline(t *testing.T) {
	rc := testredis.Client(t, "redis-server")
	s := New(&mcp.Implementation{Name: "t", Version: "1"}, nil, deadlineStore{redisstore.New(rc, nil)},
		redisqueue.New(rc, nil), &Options{Anonymous: true})
	_, err := s.watchTask(pastDeadline{context.Background()}, "anonymous", driver.NewID(), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("watch with the budget over: %v, want the deadline", err)
	}
	// Before the deadline, the same failure is the store's.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.watchTask(ctx, "anonymous", driver.NewID(), nil); errors.Is(err, context.DeadlineExceeded) || err == nil {
		t.Fatalf("watch within the budget: %v, want the store unavailable", err)
	}
}
