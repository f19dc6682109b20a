package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// authEnv is the environment of a deployment with auth on (development
// HS256 tokens minted by `mcptasks token`).
var authEnv = []string{
	"MCPTASKS_AUTH_ISSUER=https://issuer.mcptasks.test",
	"MCPTASKS_AUTH_AUDIENCE=https://mcp.mcptasks.test/mcp",
	"MCPTASKS_AUTH_HS256_SECRET=0123456789abcdef0123456789abcdef-e2e",
}

// answeredWithin is how soon after its tasks/update is acknowledged a
// client that follows the poll advice must see an answered input round's
// outcome.
const answeredWithin = 2 * time.Second

// requesterScenario is what e2e/tsclient2/exttasks.mjs reports of one
// task it ran through the requester.
type requesterScenario struct {
	TaskID string `json:"taskId"`
	Status string `json:"status"`
	Text   string `json:"text"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	// For a task with an input round: what the input handler was asked,
	// when the tasks/update was acknowledged, how long after that the
	// outcome was seen, and the tasks/get sent in between.
	Asked []struct {
		Key     string   `json:"key"`
		Message string   `json:"message"`
		Fields  []string `json:"fields"`
	} `json:"asked"`
	AckAt               int64 `json:"ackAt"`
	AnsweredToOutcomeMs int64 `json:"answeredToOutcomeMs"`
	GetsAfterAck        int   `json:"getsAfterAck"`
	// For the listened task: the notifications/tasks the stream carried.
	Notifications []struct {
		Status string `json:"status"`
	} `json:"notifications"`
}

// TestExtTasksRequester runs the official tasks requester,
// @modelcontextprotocol/ext-tasks 0.2.2 on the TypeScript SDK 2.4.0 Client
// (e2e/tsclient2/exttasks.mjs, pinned), against the split shape (endpoint
// and worker processes on a real redis-server) with auth on, on protocol
// revision 2026-07-28, with the host's raw dispatch the requester needs
// there: a task to completion, an input round answered through the
// requester's input handler, cancel, a failed task, an input round
// followed over subscriptions/listen (notifications handed to the
// requester), and stoppable_batch's "stop" offer. The script checks each
// outcome as the requester reports it; this test reads the same tasks back
// on the server, and measures how soon after its tasks/update
// acknowledgement the requester, following the poll advice (or listening),
// sees an answered round's outcome, the offer's included: at most
// answeredWithin.
func TestExtTasksRequester(t *testing.T) {
	t.Parallel()
	env := append([]string{"REDIS_URL=" + testredis.Start(t)}, authEnv...)
	api := start(t, env, "serve", "--no-worker")
	start(t, env, "worker")
	tok := mint(t, env, "alice")

	out := runNode(t, tsClient2Dir, "exttasks.mjs", 4*time.Minute, "MCP_URL=http://"+api.addr+"/mcp", "TOKEN="+tok)
	var report struct {
		Scenarios map[string]requesterScenario `json:"scenarios"`
		Errors    []string                     `json:"errors"`
		Wire      []struct {
			Method string `json:"method"`
			TaskID string `json:"taskId"`
		} `json:"wire"`
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	if len(report.Errors) > 0 {
		t.Errorf("the requester reported errors: %q", report.Errors)
	}

	// What the requester saw is what the server holds.
	alice := newClient(api.addr, true)
	alice.Header = http.Header{"Authorization": {"Bearer " + tok}}
	for name, want := range map[string]struct{ status, result string }{
		"complete": {"completed", `computed \"exttasks\" in 2s`},
		"input":    {"completed", "deleted report.txt"},
		"cancel":   {"cancelled", ""},
		"failed":   {"failed", ""},
		"listen":   {"completed", "deleted listened.txt"},
		"offer":    {"completed", "stopped early"},
	} {
		sc, ok := report.Scenarios[name]
		if !ok || sc.Status != want.status {
			t.Errorf("%s: the requester saw %+v, want %s", name, sc, want.status)
			continue
		}
		got := alice.WaitFor(t, sc.TaskID, 30*time.Second, terminal)
		if got.Status != want.status || !strings.Contains(string(got.Result), want.result) {
			t.Errorf("%s: task %s on the server: %+v, result %s; want %s with %q", name, sc.TaskID, got, got.Result, want.status, want.result)
		}
	}
	if e := report.Scenarios["failed"].Error; e == nil || e.Code != -32602 || e.Message != "steps must be between 1 and 100" {
		t.Errorf("failed task: the requester saw error %+v", e)
	}

	// The input handler was asked what the tools ask, once per round.
	for name, want := range map[string]struct{ key, message, field string }{
		"input":  {"confirm", "Delete report.txt?", "confirm"},
		"listen": {"confirm", "Delete listened.txt?", "confirm"},
		"offer":  {"stop", "Stop after the part in flight?", "stop"},
	} {
		asked := report.Scenarios[name].Asked
		if len(asked) != 1 || asked[0].Key != want.key || asked[0].Message != want.message || !slices.Equal(asked[0].Fields, []string{want.field}) {
			t.Errorf("%s: the input handler was asked %+v, want %q once", name, asked, want.message)
		}
	}

	// The listened task: its notifications reached the requester, which
	// needed no tasks/get after its answer.
	listened := report.Scenarios["listen"]
	if !slices.ContainsFunc(listened.Notifications, func(n struct {
		Status string `json:"status"`
	}) bool {
		return n.Status == "completed"
	}) || listened.GetsAfterAck != 0 {
		t.Errorf("listen: notifications %+v, %d tasks/get after the answer", listened.Notifications, listened.GetsAfterAck)
	}

	// Measured: an answered input round's outcome, seen by a requester
	// that follows the poll advice (and by one that listens).
	for _, name := range []string{"input", "offer", "listen"} {
		sc := report.Scenarios[name]
		t.Logf("%s: outcome seen %d ms after the tasks/update acknowledgement (%d tasks/get after it)", name, sc.AnsweredToOutcomeMs, sc.GetsAfterAck)
		if time.Duration(sc.AnsweredToOutcomeMs)*time.Millisecond > answeredWithin {
			t.Errorf("%s: the requester saw the answered round's outcome %d ms after its tasks/update was acknowledged, want at most %v", name, sc.AnsweredToOutcomeMs, answeredWithin)
		}
	}
}
