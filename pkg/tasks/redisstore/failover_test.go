package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// failoverIDs returns n new task ids whose keys and due-index shard are
// all served by master (want true) or all by other masters (want false).
func failoverIDs(t *testing.T, cl *testredis.Cluster, s *Store, master *testredis.Node, want bool, n int) []string {
	t.Helper()
	var ids []string
	for len(ids) < n {
		id := driver.NewID()
		onTask, onShard := cl.MasterOf(t, "{"+id+"}") == master, cl.MasterOf(t, s.dueKey(id)) == master
		if onTask == want && onShard == want {
			ids = append(ids, id)
		}
	}
	return ids
}

// While one master of a 3-master cluster is killed and replaced, creations
// of tasks on the other masters keep succeeding: a creation writes to its
// own task's master only (its keys and its due-index shard).
//
// The failover tests run one after the other (not in parallel): each
// starts a cluster of six servers.
func TestFailoverCreatesElsewhere(t *testing.T) {
	cl := testredis.StartCluster(t, 3, 1)
	c := cl.Client(t)
	s := New(c, &Options{Prefix: uniquePrefix(), Shards: 12})
	victim := cl.Masters(t)[1]
	elsewhere := failoverIDs(t, cl, s, victim, false, 30)
	there := failoverIDs(t, cl, s, victim, true, 10)
	create := func(id string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "t", TTL: time.Hour, Now: time.Now()})
		return err
	}
	cl.Kill(t, victim)
	failedThere := 0
	for i, id := range elsewhere {
		if err := create(id); err != nil {
			t.Errorf("creation %d of a task on a live master failed during the failover: %v", i, err)
		}
		if i < len(there) && create(there[i]) != nil {
			failedThere++
		}
	}
	// The failover was under way: the killed master's tasks were refused.
	if failedThere == 0 {
		t.Errorf("no creation on the killed master failed: the failover was not under way")
	}
	cl.WaitPromoted(t, "{"+there[0]+"}", victim)
	t.Logf("during the failover: %d of %d creations elsewhere succeeded, %d of %d on the killed master failed",
		len(elsewhere), len(elsewhere), failedThere, len(there))
}

// With Options.Wait = 1, a failover that loses the master's last writes
// (its replica was stopped before them) loses nothing a caller was told is
// done: no handle, no terminal status, no journaled step. Without it, the
// same failover loses all three: the test shows what Wait buys.
func TestFailoverWithWait(t *testing.T) {
	for _, wait := range []int{0, 1} {
		t.Run(fmt.Sprintf("wait=%d", wait), func(t *testing.T) {
			lost := failover(t, wait)
			if wait > 0 && lost.any() {
				t.Fatalf("with Wait=%d a failover lost what callers were told is done: %+v", wait, lost)
			}
			if lost.orphans > 0 {
				t.Fatalf("with Wait=%d a failover left %d live tasks out of the due index", wait, lost.orphans)
			}
			if wait == 0 && (lost.handles == 0 || lost.terminal == 0 || lost.steps == 0) {
				t.Fatalf("without Wait the failover lost only %+v: the lag was not forced", lost)
			}
			t.Logf("wait=%d: lost %+v", wait, lost)
		})
	}
}

// losses counts what a failover lost: handles given out, terminal
// statuses reported, steps journaled; and live tasks left without a due
// entry (which nothing would ever run again).
type losses struct{ handles, terminal, steps, orphans int }

func (l losses) any() bool { return l.handles+l.terminal+l.steps+l.orphans > 0 }

// failover runs tasks on one master, stops its replica, carries on (the
// writes the replica misses), kills the master, lets the replica take
// over, and counts what callers were told was done but is gone.
func failover(t *testing.T, wait int) losses {
	cl := testredis.StartCluster(t, 3, 1)
	c := cl.Client(t)
	s := New(c, &Options{Prefix: uniquePrefix(), Shards: 12, Wait: wait, WaitTimeout: 300 * time.Millisecond})
	victim := cl.Masters(t)[0]
	replica := cl.ReplicasOf(t, victim)[0]
	ids := failoverIDs(t, cl, s, victim, true, 6)
	ctx := t.Context()
	now := time.Now()
	handles := map[string]bool{}   // creations that returned a handle
	completed := map[string]bool{} // commits that reported the task completed
	journaled := map[string]int{}  // steps whose commit returned nil, by task
	create := func(id string) {
		if _, err := s.Create(ctx, &driver.NewTask{ID: id, Owner: "alice", Tool: "t", TTL: time.Hour, Now: now}); err == nil {
			handles[id] = true
		} else if !errors.Is(err, ErrNotReplicated) {
			t.Fatalf("Create: %v", err)
		}
	}
	step := func(id string, complete bool) {
		cl, err := s.Claim(ctx, id, now, time.Minute)
		if err != nil || cl.Gen == 0 {
			t.Fatalf("Claim %s: %v", id, err)
		}
		ch := &driver.Change{Now: now, Release: true, Append: []driver.Entry{{Name: fmt.Sprint("step", len(cl.Journal)), Kind: driver.KindDo, Value: json.RawMessage(`1`)}}}
		if complete {
			ch = &driver.Change{Now: now, Complete: json.RawMessage(`{"content":[]}`)}
		}
		switch err := s.Commit(ctx, cl, ch); {
		case err == nil && complete:
			completed[id] = true
		case err == nil:
			journaled[id]++
		case !errors.Is(err, ErrNotReplicated):
			t.Fatalf("Commit %s: %v", id, err)
		}
	}
	// Replicated: three tasks with a step each, one completed.
	for _, id := range ids[:3] {
		create(id)
		step(id, false)
	}
	step(ids[0], true)
	// The replica stops; the master carries on alone.
	cl.Pause(t, replica)
	// A stopped replica's kernel still takes in what the master sends,
	// up to its socket buffers: a large write fills them, so the writes
	// after it wait in the master's output buffer, and die with it.
	ballast := s.prefix + "{" + ids[0] + "}:ballast"
	if err := c.Do(ctx, c.B().Set().Key(ballast).Value(strings.Repeat("x", 32<<20)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[3:] {
		create(id)
	}
	step(ids[1], false)
	step(ids[2], true)
	cl.Kill(t, victim)
	cl.Resume(t, replica)
	cl.WaitPromoted(t, "{"+ids[0]+"}", victim)

	var l losses
	for _, id := range ids {
		rec, err := inspectRetrying(t, s, id)
		if err != nil || rec.Task.Status.Terminal() {
			continue
		}
		if _, err := c.Do(ctx, c.B().Zscore().Key(s.dueKey(id)).Member(id).Build()).AsFloat64(); err != nil {
			l.orphans++
		}
	}
	for id := range handles {
		rec, err := inspectRetrying(t, s, id)
		if errors.Is(err, driver.ErrNotFound) {
			l.handles++
			continue
		}
		if err != nil {
			t.Fatalf("Inspect %s after the failover: %v", id, err)
		}
		if completed[id] && rec.Task.Status != driver.StatusCompleted {
			l.terminal++
		}
		if n := steps(rec); n < journaled[id] {
			l.steps += journaled[id] - n
		}
	}
	return l
}

// inspectRetrying reads a task once the client has caught up with the new
// topology.
func inspectRetrying(t *testing.T, s *Store, id string) (*Record, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		rec, err := s.Inspect(ctx, id)
		cancel()
		if err == nil || errors.Is(err, driver.ErrNotFound) || time.Now().After(deadline) {
			return rec, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// steps counts a record's journaled Do steps.
func steps(rec *Record) int {
	n := 0
	for _, e := range rec.Journal {
		if e.Kind == driver.KindDo {
			n++
		}
	}
	return n
}
