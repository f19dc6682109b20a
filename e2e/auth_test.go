package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// mint runs `mcptasks token` to get a development token for sub.
func mint(t *testing.T, env []string, sub string) string {
	t.Helper()
	cmd := exec.Command(binPath, "token", "--sub", sub)
	cmd.Env = append(cmd.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcptasks token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestPrincipalBinding: with auth on, a task is visible only to the
// principal that created it; another principal gets the same -32602 as for
// an unknown task on tasks/get, tasks/update and tasks/cancel, and the task
// is unaffected.
func TestPrincipalBinding(t *testing.T) {
	env := []string{
		"MCPTASKS_AUTH_ISSUER=https://issuer.mcptasks.test",
		"MCPTASKS_AUTH_AUDIENCE=https://mcp.mcptasks.test/mcp",
		"MCPTASKS_AUTH_HS256_SECRET=0123456789abcdef0123456789abcdef-e2e",
	}
	p := start(t, env)
	alice, bob := newClient(p.addr, true), newClient(p.addr, true)
	alice.Header = http.Header{"Authorization": {"Bearer " + mint(t, env, "alice")}}
	bob.Header = http.Header{"Authorization": {"Bearer " + mint(t, env, "bob")}}

	var created task
	alice.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}}).Decode(t, &created)
	if created.TaskID == "" {
		t.Fatal("alice could not create a task")
	}
	unknown := bob.Call(t, "tasks/get", map[string]any{"taskId": "no-such-task"})
	for _, m := range []struct {
		method string
		params map[string]any
	}{
		{"tasks/get", map[string]any{"taskId": created.TaskID}},
		{"tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{"x": map[string]any{"action": "decline"}}}},
		{"tasks/cancel", map[string]any{"taskId": created.TaskID}},
	} {
		r := bob.Call(t, m.method, m.params)
		if r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("bob %s on alice's task: %+v", m.method, r)
		}
		if strings.ReplaceAll(r.Error.Message, created.TaskID, "ID") != strings.ReplaceAll(unknown.Error.Message, "no-such-task", "ID") || r.HTTP != unknown.HTTP {
			t.Errorf("bob %s: %q (HTTP %d) differs from an unknown task's %q (HTTP %d)", m.method, r.Error.Message, r.HTTP, unknown.Error.Message, unknown.HTTP)
		}
	}
	if got := alice.Get(t, created.TaskID); got.Status != "working" {
		t.Fatalf("alice's task after bob's attempts: %q, want working", got.Status)
	}
	// Alice can still cancel it (at once when it is parked in its sleep,
	// at the end of its first step when that is in flight).
	alice.Call(t, "tasks/cancel", map[string]any{"taskId": created.TaskID})
	if got := alice.WaitFor(t, created.TaskID, 30*time.Second, terminal); got.Status != "cancelled" {
		t.Fatalf("alice's cancel: %q", got.Status)
	}

	// No token: 401 with a challenge naming the protected resource metadata,
	// which is served.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": map[string]any{}})
	req, _ := http.NewRequest("POST", "http://"+p.addr+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	challenge := resp.Header.Get("WWW-Authenticate")
	if resp.StatusCode != 401 || !strings.Contains(challenge, `resource_metadata="`) {
		t.Fatalf("no token: HTTP %d, WWW-Authenticate %q", resp.StatusCode, challenge)
	}
	url := challenge[strings.Index(challenge, `resource_metadata="`)+len(`resource_metadata="`):]
	url = url[:strings.Index(url, `"`)]
	path := url[strings.Index(url, "/.well-known/"):]
	mresp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	var meta struct {
		Resource string `json:"resource"`
	}
	if err := json.NewDecoder(mresp.Body).Decode(&meta); err != nil || mresp.StatusCode != 200 || meta.Resource != "https://mcp.mcptasks.test/mcp" {
		t.Fatalf("metadata at %s: HTTP %d resource %q (%v)", path, mresp.StatusCode, meta.Resource, err)
	}
}
