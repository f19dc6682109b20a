package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/redis/rueidis"
)

// replicated starts a primary and a replica of it and returns a client of
// the primary and the replica's process.
func replicated(t *testing.T) (rueidis.Client, *testredis.Server) {
	t.Helper()
	primary := testredis.StartServer(t)
	replica := testredis.StartReplica(t, primary)
	return testredis.Connect(t, primary.URL), replica
}

// With Options.Wait, every transition a caller relies on is acknowledged
// by the replicas or refused with ErrNotReplicated; a refused creation
// leaves no task behind.
func TestWaitForReplicas(t *testing.T) {
	ctx := context.Background()
	c, replica := replicated(t)
	for _, dispatch := range []bool{false, true} {
		name := "plain"
		if dispatch {
			name = "dispatch"
		}
		t.Run(name, func(t *testing.T) {
			prefix := uniquePrefix()
			o := &Options{Prefix: prefix, Wait: 1, WaitTimeout: time.Second}
			if dispatch {
				o.Queue = redisqueue.New(c, &redisqueue.Options{Key: prefix + "{queue}"})
			}
			s := New(c, o)
			now := time.Now()
			create := func() (string, error) {
				nt := &driver.NewTask{ID: driver.NewID(), Owner: "alice", Tool: "t", TTL: time.Hour, Now: now, Listed: true}
				_, err := s.Create(ctx, nt)
				return nt.ID, err
			}
			// Replica up: everything is acknowledged.
			id, err := create()
			if err != nil {
				t.Fatalf("Create with a replica up: %v", err)
			}
			cl, err := s.Claim(ctx, id, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, cl, &driver.Change{Now: now, Park: map[string]json.RawMessage{"a": json.RawMessage(`{}`)}}); err != nil {
				t.Fatalf("Commit with a replica up: %v", err)
			}

			id2, err := create()
			if err != nil {
				t.Fatal(err)
			}
			cl2, err := s.Claim(ctx, id2, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}

			// Replica stopped: writes are refused, and say why.
			if err := replica.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := true
			defer func() {
				if stopped {
					_ = replica.Process.Signal(syscall.SIGCONT)
				}
			}()
			lost, err := create()
			if !errors.Is(err, ErrNotReplicated) {
				t.Fatalf("Create with the replica stopped: %v, want ErrNotReplicated", err)
			}
			if _, err := s.Peek(ctx, lost); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("a refused creation left its task behind: %v", err)
			}
			if _, err := s.Update(ctx, "alice", id, map[string]json.RawMessage{"a": json.RawMessage(`1`)}, now); !errors.Is(err, ErrNotReplicated) {
				t.Fatalf("Update with the replica stopped: %v, want ErrNotReplicated", err)
			}
			if _, _, err := s.Cancel(ctx, "alice", id, now); !errors.Is(err, ErrNotReplicated) {
				t.Fatalf("Cancel with the replica stopped: %v, want ErrNotReplicated", err)
			}
			err = s.Commit(ctx, cl2, &driver.Change{Now: now, Complete: json.RawMessage(`{"content":[]}`)})
			if !errors.Is(err, ErrNotReplicated) {
				t.Fatalf("Commit with the replica stopped: %v, want ErrNotReplicated", err)
			}
			// The ending was not acknowledged, so the task keeps its due
			// entry: the sweeper still looks at it. (A dispatching store
			// drops the entry in the commit's own script: a failover that
			// loses the one loses the other.)
			if due, err := s.Due(ctx, now.Add(time.Hour), 1000); !dispatch && (err != nil || !hasDue(due, id2)) {
				t.Fatalf("a task whose ending was refused left the due index (%v)", err)
			}
			// A read is not refused, and an unknown task is still unknown.
			if _, err := s.Get(ctx, "alice", id); err != nil {
				t.Fatalf("Get with the replica stopped: %v", err)
			}
			if _, _, err := s.Cancel(ctx, "alice", driver.NewID(), now); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("Cancel of an unknown task: %v, want ErrNotFound", err)
			}

			// Replica back: writes are acknowledged again.
			_ = replica.Process.Signal(syscall.SIGCONT)
			stopped = false
			id3, err := create()
			if err != nil {
				t.Fatalf("Create with the replica back: %v", err)
			}
			cl, err = s.Claim(ctx, id3, now, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Commit(ctx, cl, &driver.Change{Now: now, Complete: json.RawMessage(`{"content":[]}`)}); err != nil {
				t.Fatalf("Commit with the replica back: %v", err)
			}
		})
	}
}

func hasDue(due []driver.DueTask, id string) bool {
	for _, d := range due {
		if d.ID == id {
			return true
		}
	}
	return false
}
