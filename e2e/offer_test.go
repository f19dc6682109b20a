package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// waitLog waits until p's log shows the closure of task id's step running.
func waitLog(t *testing.T, p *proc, id, step string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for stepRuns(id, p.Log())[step] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s never started:\n%s", step, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKillWorkerAfterCheckInput runs the endpoint and a worker as separate
// processes on a real redis-server. The client answers stoppable_batch's
// "stop" offer while part-2 runs (the task stays working); the next check
// finds it and the job goes on to its summary, during which the worker is
// killed with SIGKILL. A new worker replays the handler: the checks before
// part-1 and part-2 still find nothing (although the answer is in the store
// by then), the one before part-3 still finds the answer, so the task ends
// stopped after part 2, having run neither part 3 nor any part twice.
func TestKillWorkerAfterCheckInput(t *testing.T) {
	env := []string{
		"REDIS_URL=" + testredis.Start(t),
		"MCPTASKS_MAX_DURATION=4s",
		"MCPTASKS_SWEEP_INTERVAL=300ms",
		"MCPTASKS_WORKERS=2",
	}
	api := start(t, env, "serve", "--no-worker")
	w1 := start(t, env, "worker")
	c := newClient(api.addr, true)

	var created task
	c.Call(t, "tools/call", map[string]any{"name": "stoppable_batch", "arguments": map[string]any{"parts": 6, "partMillis": 1500}}).Decode(t, &created)
	id := created.TaskID
	if id == "" {
		t.Fatalf("no task created")
	}
	waitLog(t, w1, id, "part-2")
	r := c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"stop": map[string]any{"action": "accept", "content": map[string]any{"stop": true}}}})
	if r.Error != nil {
		t.Fatalf("tasks/update: %+v", r.Error)
	}
	if tk := c.Get(t, id); tk.Status != "working" || len(tk.InputRequests) != 0 {
		t.Fatalf("answered while a step runs: %+v, want working", tk)
	}
	waitLog(t, w1, id, "summary")
	w1.Kill()
	killedLog := w1.Log()

	w2 := start(t, env, "worker")
	done := c.WaitFor(t, id, 60*time.Second, terminal)
	if done.Status != "completed" || !strings.Contains(string(done.Result), "processed 2 of 6 parts, checksum 5; stopped early") {
		t.Fatalf("final task %+v result %s", done, done.Result)
	}
	runs := stepRuns(id, killedLog, w2.Log())
	want := map[string]int{"part-1": 1, "part-2": 1, "summary": 2} // the summary was running when its worker died
	for i := 3; i <= 6; i++ {
		want[fmt.Sprintf("part-%d", i)] = 0
	}
	for step, n := range want {
		if runs[step] != n {
			t.Errorf("%s ran %d times, want %d (all: %v)", step, runs[step], n, runs)
		}
	}
}

// TestOfferWakesSleepAcrossProcesses: a task pausing for ten minutes with
// its offer outstanding is input_required with the offer in inputRequests;
// the answer, taken by the endpoint process, wakes it through the queue and
// the worker process finishes it at once.
func TestOfferWakesSleepAcrossProcesses(t *testing.T) {
	env := []string{"REDIS_URL=" + testredis.Start(t), "MCPTASKS_SWEEP_INTERVAL=300ms"}
	api := start(t, env, "serve", "--no-worker")
	start(t, env, "worker")
	c := newClient(api.addr, true)

	var created task
	c.Call(t, "tools/call", map[string]any{"name": "stoppable_batch", "arguments": map[string]any{"parts": 3, "pauseMillis": 600000}}).Decode(t, &created)
	id := created.TaskID
	sleeping := c.WaitFor(t, id, 30*time.Second, func(tk task) bool { return tk.Status != "working" })
	if sleeping.Status != "input_required" || sleeping.InputRequests["stop"] == nil || len(sleeping.InputRequests) != 1 {
		t.Fatalf("pausing task: %+v, want input_required with the stop offer", sleeping)
	}
	answered := time.Now()
	c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"stop": map[string]any{"action": "accept", "content": map[string]any{"stop": true}}}})
	done := c.WaitFor(t, id, 30*time.Second, terminal)
	if done.Status != "completed" || !strings.Contains(string(done.Result), "processed 1 of 3 parts, checksum 1; stopped early") {
		t.Fatalf("final task %+v result %s", done, done.Result)
	}
	t.Logf("the answer ended a ten-minute pause; the task completed %v later", time.Since(answered).Round(time.Millisecond))
}
