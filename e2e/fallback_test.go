package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
)

// TestTypeScriptClientsFallback runs real TypeScript clients that do not
// declare the tasks extension against the split shape (endpoint and worker
// processes on a real redis-server) with auth on and two principals: the
// SDK 2.4.0 Client in both its version modes (2026-07-28 pinned, and its
// default 2025-11-25 initialize) and the SDK 1.32.2 client on 2025-11-25
// without params.task. Each, through ordinary tools/call alone
// (e2e/fallback.mjs): follows a job longer than one invocation to its
// result with task_status, starts a 600 s slow_compute and cancels it with
// task_cancel, answers confirm_delete's input with task_answer (an invalid
// answer first, refused with isError while the job keeps waiting), and
// finds another principal's handle answered exactly like an unknown one.
// The jobs are the same durable tasks as extension tasks: this test reads
// them back on 2026-07-28 with the extension.
func TestTypeScriptClientsFallback(t *testing.T) {
	t.Parallel()
	env := append([]string{
		"REDIS_URL=" + testredis.Start(t),
		// A budget of about 4 s, that an 8 s slow_compute outlasts.
		"MCPTASKS_MAX_DURATION=5s",
	}, authEnv...)
	api := start(t, env, "serve", "--no-worker")
	start(t, env, "worker")
	tokA, tokB := mint(t, env, "alice"), mint(t, env, "bob")
	alice := newClient(api.addr, true)
	alice.Header = http.Header{"Authorization": {"Bearer " + tokA}}

	for _, c := range []struct{ name, dir, version string }{
		{"sdk-2.4.0/2026-07-28", tsClient2Dir, "2026-07-28"},
		{"sdk-2.4.0/2025-11-25", tsClient2Dir, "2025-11-25"},
		{"sdk-1.32.2/2025-11-25", tsClientDir, "2025-11-25"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := runNode(t, c.dir, "fallback.mjs", 3*time.Minute, "MCP_URL=http://"+api.addr+"/mcp",
				"TOKEN_A="+tokA, "TOKEN_B="+tokB, "LONG_SECONDS=8", "VERSION="+c.version)
			type job struct {
				TaskID  string `json:"taskId"`
				StartMs int64  `json:"startMs"`
			}
			var report struct {
				ProtocolVersion string `json:"protocolVersion"`
				Long            job    `json:"long"`
				Cancelled       job    `json:"cancelled"`
				Confirm         struct {
					job
					InvalidAnswer string `json:"invalidAnswer"`
				} `json:"confirm"`
			}
			if err := json.Unmarshal(out, &report); err != nil || report.ProtocolVersion != c.version {
				t.Fatalf("report %s: %v", out, err)
			}
			t.Logf("handles answered in %d ms (8 s job), %d ms (600 s job); an invalid answer: %q",
				report.Long.StartMs, report.Cancelled.StartMs, report.Confirm.InvalidAnswer)
			for id, want := range map[string]struct{ status, result string }{
				report.Long.TaskID:      {"completed", `computed \"fallback\" in 8s`},
				report.Cancelled.TaskID: {"cancelled", ""},
				report.Confirm.TaskID:   {"completed", "deleted fallback.txt"},
			} {
				got := alice.WaitFor(t, id, 30*time.Second, terminal)
				if got.Status != want.status || !strings.Contains(string(got.Result), want.result) {
					t.Errorf("job %s read as a task: %+v, result %s; want %s with %q", id, got, got.Result, want.status, want.result)
				}
			}
		})
	}
}
