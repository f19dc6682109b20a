package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
)

// cliEnv paces the servers of the CLI tests: a quick poll interval, so
// that a task of one second takes about one second.
var cliEnv = []string{
	"MCPTASKS_POLL_INTERVAL=100ms",
	"MCPTASKS_SWEEP_INTERVAL=300ms",
	"MCPTASKS_WORKERS=2",
}

// cliProcessEnv is the environment of an mcptasks command run by a test:
// MCPTASKS_URL set to url, no token, and no second of sleep at exit from
// the race detector (a command line exits at once).
func cliProcessEnv(url string) []string {
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return append(os.Environ(), "MCPTASKS_URL="+url, "MCPTASKS_TOKEN=", "GORACE="+gorace)
}

// cliServer runs `mcptasks serve --app app` and returns its MCP URL.
func cliServer(t *testing.T, app string) string {
	t.Helper()
	return "http://" + start(t, cliEnv, "serve", "--app", app).addr + "/mcp"
}

// cliRun is the outcome of one mcptasks command run without a terminal.
type cliRun struct {
	stdout, stderr string
	code           int
}

// runCLI runs `mcptasks args...` against url (MCPTASKS_URL) with stdin and
// no terminal, and waits for it.
func runCLI(t *testing.T, url, stdin string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = cliProcessEnv(url)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliRun{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("mcptasks %v: %v", args, err)
	}
	return r
}

// expect fails the test unless r exited with code and its stdout holds
// each of want.
func (r cliRun) expect(t *testing.T, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout lacks %q:\nstdout:\n%s\nstderr:\n%s", w, r.stdout, r.stderr)
		}
	}
}

// untilStatus polls the task until it reaches status (within 20s).
func untilStatus(t *testing.T, url, id string, status client.Status) *client.Task {
	t.Helper()
	c := client.New(url)
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, err := c.Get(t.Context(), id)
		if err != nil {
			t.Fatalf("tasks/get %s: %v", id, err)
		}
		if task.Status == status {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s after 20s, want %s", id, task.Status, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The CLI without a terminal, against a real server process: plain
// progress lines, --output json, --detach, task get/watch/cancel/answer,
// answers from a piped stdin, tools, help and usage errors.
func TestCLIPlain(t *testing.T) {
	url := cliServer(t, "examples")

	t.Run("call", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, url, "", "call", "slow_compute", "seconds=1", "label=plain")
		r.expect(t, 0, `computed "plain" in 1s`)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "task ") ||
			!strings.Contains(r.stderr, "working: computing for 1s") || !strings.HasSuffix(lines[len(lines)-1], "completed: done") {
			t.Errorf("progress lines:\n%s", r.stderr)
		}
		if strings.ContainsAny(r.stderr, "\r\x1b") {
			t.Errorf("terminal controls without a terminal: %q", r.stderr)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, url, "", "call", "--output", "json", "batch_report", "steps=3")
		r.expect(t, 0)
		var res struct {
			ResultType string `json:"resultType"`
			Content    []struct {
				Type, Text string
			} `json:"content"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != "processed 3 parts, checksum 14" {
			t.Errorf("--output json: %v\n%s", err, r.stdout)
		}
	})
	t.Run("detach-get-cancel", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, url, "", "call", "slow_compute", "seconds=600", "--detach")
		r.expect(t, 0)
		id := strings.TrimSpace(r.stdout)
		if id == "" || strings.ContainsAny(id, " \n") || r.stderr != "" {
			t.Fatalf("--detach: stdout %q, stderr %q", r.stdout, r.stderr)
		}
		g := runCLI(t, url, "", "task", "get", id)
		g.expect(t, 0)
		var got struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
			TTLMs  int64  `json:"ttlMs"`
		}
		if err := json.Unmarshal([]byte(g.stdout), &got); err != nil || got.TaskID != id || got.Status != "working" || got.TTLMs <= 0 {
			t.Errorf("task get: %v\n%s", err, g.stdout)
		}
		runCLI(t, url, "", "task", "cancel", id).expect(t, 0, "task "+id+": cancelled")
		w := runCLI(t, url, "", "task", "watch", id)
		w.expect(t, 1)
		if !strings.Contains(w.stderr, "the task was cancelled") {
			t.Errorf("watch of a cancelled task: %s", w.stderr)
		}
	})
	t.Run("answer", func(t *testing.T) {
		t.Parallel()
		id := strings.TrimSpace(runCLI(t, url, "", "call", "confirm_delete", "filename=report.txt", "--detach").stdout)
		untilStatus(t, url, id, client.StatusInputRequired)
		runCLI(t, url, "", "task", "answer", id, "confirm=yes").expect(t, 0, "answered confirm; task "+id)
		runCLI(t, url, "", "task", "watch", id).expect(t, 0, "deleted report.txt")
	})
	t.Run("piped-answers", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, url, "\nno\n", "call", "confirm_delete", "filename=draft.txt")
		r.expect(t, 0, "kept draft.txt")
		if !strings.Contains(r.stderr, "? Delete draft.txt?") || !strings.Contains(r.stderr, "[y/n]: no\n") {
			t.Errorf("prompts:\n%s", r.stderr)
		}
		// A closed stdin leaves the task waiting and says how to answer it.
		r = runCLI(t, url, "", "call", "confirm_delete", "filename=draft.txt")
		r.expect(t, 1)
		if !strings.Contains(r.stderr, "answer it with: mcptasks task answer ") {
			t.Errorf("stderr:\n%s", r.stderr)
		}
	})
	t.Run("tools", func(t *testing.T) {
		t.Parallel()
		runCLI(t, url, "", "tools").expect(t, 0, "NAME", "slow_compute", "seconds:integer [label:string]", "Greets someone")
	})
	t.Run("help-and-usage", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"call", "--help"}, {"task", "--help"}, {"task", "answer", "--help"}, {"tools", "-h"}} {
			r := runCLI(t, url, "", args...)
			r.expect(t, 0, "Usage: mcptasks "+args[0])
		}
		for _, args := range [][]string{{"call"}, {"call", "greet", "--output", "xml"}, {"task", "get"}, {"task", "frob", "x"}} {
			r := runCLI(t, url, "", args...)
			r.expect(t, 2)
			if !strings.Contains(r.stderr, "Run 'mcptasks help' for usage.") {
				t.Errorf("%v: stderr %q", args, r.stderr)
			}
		}
	})
}

// The messages of a newcomer's first mistakes, from the real binary
// against a real server process: a missing argument is named with its
// type before any call (exit 2, the tool never ran, nothing on stdout);
// TLS to the plain HTTP server and a URL without a scheme fail at once
// with what to use instead; a 404 suggests the /mcp path; a server that is
// not there is named in the terms of the command run, after three
// attempts in every command; a wrong answer shape is refused with the
// shape expected.
func TestCLIChecksBeforeCalling(t *testing.T) {
	url := cliServer(t, "examples")
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	expectErr := func(t *testing.T, r cliRun, code int, want ...string) {
		t.Helper()
		r.expect(t, code)
		if r.stdout != "" {
			t.Errorf("stdout %q, want nothing", r.stdout)
		}
		for _, w := range want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
			}
		}
		for _, u := range []string{"reported an error", "tools/list", "tasks/get", "Post \""} {
			if strings.Contains(r.stderr, u) {
				t.Errorf("stderr holds %q:\n%s", u, r.stderr)
			}
		}
	}
	t.Run("missing-argument", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, url, "", "call", "slow_compute", "label=x")
		expectErr(t, r, 2, "mcptasks: call slow_compute: missing argument seconds (integer)\nusage: mcptasks call slow_compute seconds=<integer> [label=<string>]\n")
	})
	t.Run("https-to-http", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, "https://"+host+"/mcp", "", "call", "greet", "name=Ada")
		expectErr(t, r, 1, "mcptasks: call greet: the server at https://"+host+"/mcp speaks plain HTTP, not HTTPS: use --url http://"+host+"/mcp\n")
	})
	t.Run("no-scheme", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, host+"/mcp", "", "call", "greet", "name=Ada")
		expectErr(t, r, 2, "mcptasks: call greet: --url "+host+"/mcp has no scheme: did you mean http://"+host+"/mcp?\n")
	})
	t.Run("404", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, "http://"+host, "", "tools")
		expectErr(t, r, 1, "mcptasks: tools: no MCP endpoint at http://"+host+" (HTTP 404): mcptasks serves MCP at the path /mcp; try --url http://"+host+"/mcp\n")
	})
	t.Run("not-there", func(t *testing.T) {
		t.Parallel()
		closed := "http://" + freeAddr(t) + "/mcp"
		for _, args := range [][]string{{"call", "greet", "name=Ada"}, {"tools"}, {"task", "get", "an-id"}, {"task", "watch", "an-id"}} {
			name := args[0]
			if len(args) > 2 {
				name += " " + args[1]
			}
			r := runCLI(t, closed, "", args...)
			expectErr(t, r, 1, "mcptasks: "+name+": cannot connect to "+closed+": connection refused (gave up after 3 attempts)\n")
		}
	})
	t.Run("answer-shape", func(t *testing.T) {
		t.Parallel()
		id := strings.TrimSpace(runCLI(t, url, "", "call", "confirm_delete", "filename=a.txt", "--detach").stdout)
		untilStatus(t, url, id, client.StatusInputRequired)
		r := runCLI(t, url, "", "task", "answer", id, "--json", `{"confirm": {"confirm": true}}`)
		expectErr(t, r, 2, `mcptasks: task answer: confirm: {"confirm":true} has no action; the answer to this elicitation is {"action":"accept","content":{"confirm":<boolean>}}, {"action":"decline"} or {"action":"cancel"} (or confirm=<boolean>: the value of confirm)`)
		if tk := untilStatus(t, url, id, client.StatusInputRequired); tk.InputRequests["confirm"] == nil {
			t.Errorf("the refused answer changed the task: %+v", tk)
		}
	})
}
