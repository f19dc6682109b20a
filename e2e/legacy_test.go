package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// TestTypeScriptSDKOn20251125 runs the real TypeScript SDK 1.x client
// (e2e/tsclient/legacy.mjs, pinned) against the split shape (endpoint and
// worker processes on a real redis-server) with auth on and two
// principals, on protocol revision 2025-11-25: the tasks utility
// (callToolStream with a task, its status updates and result; an input
// round through elicitation; listTasks per principal; cancelTask;
// getTaskResult, also of a task that outlasts an invocation's budget),
// inline calls (elicitation declared or not: without it the call becomes a
// background job, as does a 70 s sleep, answered at once)
// and -32601 for an unknown method. The script checks what the client
// sees; this test then reads the same tasks on 2026-07-28.
func TestTypeScriptSDKOn20251125(t *testing.T) {
	env := []string{
		"REDIS_URL=" + testredis.Start(t),
		"MCPTASKS_AUTH_ISSUER=https://issuer.mcptasks.test",
		"MCPTASKS_AUTH_AUDIENCE=https://mcp.mcptasks.test/mcp",
		"MCPTASKS_AUTH_HS256_SECRET=0123456789abcdef0123456789abcdef-e2e",
		"MCPTASKS_STATE_SECRET=0123456789abcdef0123456789abcdef-legacy",
		// A budget of 4s, so that a 7 s task outlasts one held tasks/result.
		"MCPTASKS_MAX_DURATION=5s",
	}
	api := start(t, env, "serve", "--no-worker")
	start(t, env, "worker")
	tokA, tokB := mint(t, env, "alice"), mint(t, env, "bob")

	out := runNode(t, tsClientDir, "legacy.mjs", 3*time.Minute,
		"MCP_URL=http://"+api.addr+"/mcp", "TOKEN_A="+tokA, "TOKEN_B="+tokB, "LONG_SECONDS=7")
	var report struct {
		ComputeTask string `json:"computeTask"`
		ConfirmTask string `json:"confirmTask"`
		HeldTask    string `json:"heldTask"`
		AskJob      string `json:"noElicitationJob"`
		LongJob     struct {
			TaskID string `json:"taskId"`
			Ms     int    `json:"ms"`
		} `json:"longJob"`
	}
	if err := json.Unmarshal(out, &report); err != nil || report.ComputeTask == "" || report.HeldTask == "" {
		t.Fatalf("report %s: %v", out, err)
	}

	// The same tasks, created under 2025-11-25, read on 2026-07-28 by the
	// same principal, and unknown to another.
	alice, bob := newClient(api.addr, true), newClient(api.addr, true)
	alice.Header = http.Header{"Authorization": {"Bearer " + tokA}}
	bob.Header = http.Header{"Authorization": {"Bearer " + tokB}}
	for id, want := range map[string]string{report.ComputeTask: `computed \"legacy\"`, report.ConfirmTask: "deleted report.txt", report.HeldTask: `computed \"long\"`} {
		got := alice.Get(t, id)
		if got.Status != "completed" || !strings.Contains(string(got.Result), want) {
			t.Errorf("2026-07-28 tasks/get of %s: %+v, result %s; want completed with %q", id, got, got.Result, want)
		}
		if r := bob.Call(t, "tasks/get", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != -32602 {
			t.Errorf("bob's 2026-07-28 tasks/get of alice's task %s: %+v", id, r)
		}
	}
	// The 70 s inline call and the input round without elicitation went on
	// as background jobs, which are tasks of their caller: bob's asks for
	// confirmation, alice's sleeps.
	if got := alice.Get(t, report.LongJob.TaskID); got.Status != "working" {
		t.Errorf("the 70 s job: %+v", got)
	}
	if got := bob.WaitFor(t, report.AskJob, 10*time.Second, func(tk task) bool { return tk.Status != "working" }); got.Status != "input_required" {
		t.Errorf("the job without elicitation: %+v", got)
	}
	if !strings.Contains(api.Log(), "call continues as a background job") {
		t.Errorf("the endpoint did not log the jobs:\n%s", api.Log())
	}
}
