package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

var stepRun = regexp.MustCompile(`msg="running step" task=(\S+) step=(\S+)`)

// stepRuns counts, per step name, how often task id's step closures ran
// according to the logs.
func stepRuns(id string, logs ...string) map[string]int {
	n := map[string]int{}
	for _, l := range logs {
		for _, m := range stepRun.FindAllStringSubmatch(l, -1) {
			if m[1] == id {
				n[m[2]]++
			}
		}
	}
	return n
}

// TestKillWorkerMidStep runs the endpoint and a worker as separate processes
// on a real redis-server and on PostgreSQL, kills the worker with SIGKILL
// in the middle of a step, starts a new worker, and checks that the task
// completes with no journaled step run again.
func TestKillWorkerMidStep(t *testing.T) {
	for _, kind := range []string{"redis-server", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testKillWorkerMidStep(t, kind)
		})
	}
}

func testKillWorkerMidStep(t *testing.T, kind string) {
	env := append(storeEnv(t, kind),
		"MCPTASKS_MAX_DURATION=4s",
		"MCPTASKS_SWEEP_INTERVAL=300ms",
		"MCPTASKS_WORKERS=2",
	)
	api := start(t, env, "serve", "--no-worker")
	w1 := start(t, env, "worker")
	c := newClient(api.addr, true)

	var created task
	c.Call(t, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 5, "stepMillis": 700}}).Decode(t, &created)
	if created.TaskID == "" {
		t.Fatalf("no task created")
	}
	// Kill the worker while part-2 runs: its log shows part-2 started.
	deadline := time.Now().Add(30 * time.Second)
	for stepRuns(created.TaskID, w1.Log())["part-2"] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("part-2 never started:\n%s", w1.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w1.Kill()
	killedLog := w1.Log()
	before := stepRuns(created.TaskID, killedLog)

	w2 := start(t, env, "worker")
	done := c.WaitFor(t, created.TaskID, 60*time.Second, terminal)
	if done.Status != "completed" || !strings.Contains(string(done.Result), "checksum 55") {
		t.Fatalf("final task %+v result %s", done, done.Result)
	}
	runs := stepRuns(created.TaskID, killedLog, w2.Log())
	for i := 1; i <= 5; i++ {
		part := fmt.Sprintf("part-%d", i)
		want := 1
		if before[part] > 0 && before[fmt.Sprintf("part-%d", i+1)] == 0 {
			// The part that was running when the worker died may run again:
			// its result had not been journaled.
			want = 2
		}
		if runs[part] != want {
			t.Errorf("%s ran %d times, want %d (before the kill: %v; all: %v)", part, runs[part], want, before, runs)
		}
	}
}

// TestTwoWorkersOneTask runs two worker processes against one store (a
// redis-server, a Redis Cluster, PostgreSQL): every step of a task runs
// exactly once although both consume the queue.
func TestTwoWorkersOneTask(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testTwoWorkersOneTask(t, kind)
		})
	}
}

func testTwoWorkersOneTask(t *testing.T, kind string) {
	env := append(storeEnv(t, kind), "MCPTASKS_WORKERS=3")
	api := start(t, env, "serve", "--no-worker")
	w1 := start(t, env, "worker")
	w2 := start(t, env, "worker")
	c := newClient(api.addr, true)
	var ids []string
	for range 4 {
		var created task
		c.Call(t, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 4, "stepMillis": 20}}).Decode(t, &created)
		ids = append(ids, created.TaskID)
	}
	for _, id := range ids {
		if done := c.WaitFor(t, id, 60*time.Second, terminal); done.Status != "completed" {
			t.Fatalf("task %s ended %s", id, done.Status)
		}
		runs := stepRuns(id, w1.Log(), w2.Log())
		for i := 1; i <= 4; i++ {
			if n := runs[fmt.Sprintf("part-%d", i)]; n != 1 {
				t.Errorf("task %s part-%d ran %d times, want 1 (%v)", id, i, n, runs)
			}
		}
	}
}
