package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// inputWait is how long TestPollAdviceWhileWaitingForInput leaves a task
// in input_required, and maxInputWaitGets the most tasks/get a client that
// follows the poll advice may send meanwhile.
const (
	inputWait        = 60 * time.Second
	maxInputWaitGets = 15
)

// TestPollAdviceWhileWaitingForInput measures what a task waiting on a
// person costs: a client follows the pollIntervalMs of every answer (it
// sends tasks/get, waits the advice, and again) while a confirm_delete
// task sits a full minute in input_required, on the split shape (endpoint
// and worker processes on a real redis-server) with the default poll
// settings. The tasks/get it sends in that minute are at most
// maxInputWaitGets; the task is still waiting at its end, and the answer
// completes it.
func TestPollAdviceWhileWaitingForInput(t *testing.T) {
	if testing.Short() {
		t.Skip("leaves a task a minute in input_required")
	}
	t.Parallel()
	env := []string{"REDIS_URL=" + testredis.Start(t)}
	api := start(t, env, "serve", "--no-worker")
	start(t, env, "worker")
	c := newClient(api.addr, true)

	var created task
	c.Call(t, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "wait.txt"}}).Decode(t, &created)
	if created.TaskID == "" {
		t.Fatalf("no task created: %+v", created)
	}
	advice := time.Duration(created.PollIntervalMs) * time.Millisecond
	var since time.Time // when the task entered input_required
	var gets int
	var advices []time.Duration
	for {
		if since.IsZero() && advice > inputWait {
			t.Fatalf("a working task advised a poll after %v", advice)
		}
		next := time.Now().Add(advice)
		if !since.IsZero() && next.After(since.Add(inputWait)) {
			break
		}
		time.Sleep(time.Until(next))
		tk := c.Get(t, created.TaskID)
		advice = time.Duration(tk.PollIntervalMs) * time.Millisecond
		switch {
		case tk.Status == "input_required" && since.IsZero():
			at, err := time.Parse(time.RFC3339Nano, tk.LastUpdatedAt)
			if err != nil {
				t.Fatalf("lastUpdatedAt %q: %v", tk.LastUpdatedAt, err)
			}
			since = at
			fallthrough
		case tk.Status == "input_required":
			gets++
			advices = append(advices, advice)
		case tk.Status != "working":
			t.Fatalf("task %+v before any answer", tk)
		}
	}
	t.Logf("a task %v in input_required cost %d tasks/get (advised intervals %v)", inputWait, gets, advices)
	if gets > maxInputWaitGets {
		t.Errorf("a client following the poll advice sent %d tasks/get while the task sat %v in input_required, want at most %d", gets, inputWait, maxInputWaitGets)
	}

	// The task did sit there the whole time, and the answer completes it.
	time.Sleep(time.Until(since.Add(inputWait)))
	if tk := c.Get(t, created.TaskID); tk.Status != "input_required" {
		t.Fatalf("after %v waiting for input: %+v", inputWait, tk)
	}
	c.Call(t, "tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{
		"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}).Decode(t, &struct{}{})
	if done := c.WaitFor(t, created.TaskID, 30*time.Second, terminal); done.Status != "completed" || !strings.Contains(string(done.Result), "deleted wait.txt") {
		t.Fatalf("after the answer: %+v, result %s", done, done.Result)
	}
}
