package tasks_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stallingStore is a store whose Get ignores its context: it returns only
// once release is closed.
type stallingStore struct {
	driver.Store // HonoursDeadline is not promoted
	release      chan struct{}
}

func (s *stallingStore) Get(ctx context.Context, owner, id string) (*driver.Task, error) {
	<-s.release
	return s.Store.Get(context.WithoutCancel(ctx), owner, id)
}

// declaringStore is a stallingStore that (wrongly) declares it honours
// its context's deadline.
type declaringStore struct{ *stallingStore }

func (declaringStore) HonoursDeadline() bool { return true }

// A request's answer never waits past Options.StoreTimeout on a store that
// does not declare DeadlineHonourer, even one that ignores its context; a
// store that declares it is called directly, on the request's goroutine,
// and its own answer is the request's.
func TestStoreTimeoutAwait(t *testing.T) {
	rs := redisstore.New(newRedis(t, "redis-server"), &redisstore.Options{Prefix: "await" + driver.NewID() + ":"})
	ctx := context.Background()
	id := driver.NewID()
	now := time.Now()
	if _, err := rs.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "t", TTL: time.Hour, Now: now}); err != nil {
		t.Fatal(err)
	}
	const timeout = 50 * time.Millisecond
	serve := func(st driver.Store) *tasks.Server {
		return tasks.New(&mcp.Implementation{Name: "test", Version: "1"}, nil, st, nil,
			&tasks.Options{StoreTimeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	}
	get := func(srv *tasks.Server) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := srv.GetTask(ctx, "alice", id)
			done <- err
		}()
		return done
	}

	t.Run("undeclared", func(t *testing.T) {
		st := &stallingStore{Store: rs, release: make(chan struct{})}
		defer close(st.release)
		select {
		case err := <-get(serve(st)):
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != tasks.CodeInternalError {
				t.Fatalf("tasks/get on a stalled store: %v, want the store-unavailable error", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("tasks/get waited for a store that ignores its context")
		}
	})

	t.Run("declared", func(t *testing.T) {
		st := declaringStore{&stallingStore{Store: rs, release: make(chan struct{})}}
		done := get(serve(st))
		// Past the store timeout the request still waits for the store:
		// it was called directly.
		select {
		case err := <-done:
			t.Fatalf("tasks/get answered (%v) before the store returned", err)
		case <-time.After(4 * timeout):
		}
		close(st.release)
		if err := <-done; err != nil {
			t.Fatalf("tasks/get once the store returned: %v", err)
		}
	})
}
