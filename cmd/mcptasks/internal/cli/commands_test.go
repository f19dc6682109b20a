package cli

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/auth"
	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/examples/conformance"
	"github.com/mcptasks/mcptasks/pkg/platform/local/localtest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func check(t *testing.T, r *run, code int, stdout ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d (err %v), want %d\nstdout:\n%s\nstderr:\n%s", r.code, r.err, code, r.out, r.errb)
	}
	for _, s := range stdout {
		if !strings.Contains(r.out.String(), s) {
			t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", s, r.out, r.errb)
		}
	}
}

// The commands against the example tools, without a terminal: results on
// stdout, one plain line per status on stderr, answers read from stdin.
func TestCLIExamples(t *testing.T) {
	url := localtest.Serve(t, examples.App)
	ctx := t.Context()

	t.Run("sync", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "greet", "name=Ada")
		check(t, r, 0)
		if r.out.String() != "Hello, Ada!\n" || r.errb.String() != "" {
			t.Errorf("stdout %q, stderr %q", r.out, r.errb)
		}
	})
	t.Run("task", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "slow_compute", "seconds=1", "label=x")
		check(t, r, 0, `computed "x" in 1s`)
		e := r.errb.String()
		for _, want := range []string{"task ", "working: computing for 1s", "completed: done"} {
			if !strings.Contains(e, want) {
				t.Errorf("stderr lacks %q:\n%s", want, e)
			}
		}
		if strings.ContainsAny(e, "\r\x1b") {
			t.Errorf("plain progress has terminal controls: %q", e)
		}
	})
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "batch_report", "--output", "json", "--json", `{"steps": 2}`)
		check(t, r, 0)
		var res struct {
			Content []struct{ Type, Text string }
		}
		if err := json.Unmarshal([]byte(r.out.String()), &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != "processed 2 parts, checksum 5" {
			t.Errorf("stdout %s (%v)", r.out, err)
		}
	})
	t.Run("detach", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "slow_compute", "seconds=1", "--detach")
		check(t, r, 0)
		id := strings.TrimSpace(r.out.String())
		if id == "" || strings.ContainsAny(id, " \n") {
			t.Fatalf("--detach printed %q", r.out)
		}
		g := newRun(url, nil).exec(ctx, "task", "get", id)
		check(t, g, 0, `"taskId": "`+id+`"`, `"ttlMs": `)
		w := newRun(url, nil).exec(ctx, "task", "watch", id)
		check(t, w, 0, "computed")
	})
	t.Run("prompt", func(t *testing.T) {
		t.Parallel()
		// The default action (answer), a refused value, then yes.
		r := newRun(url, strings.NewReader("\nmaybe\ny\n")).exec(ctx, "call", "confirm_delete", "filename=notes.txt")
		check(t, r, 0, "deleted notes.txt")
		for _, want := range []string{"? Delete notes.txt?", "answer, decline or cancel?", "confirm — delete the file? [y/n]: maybe\n", "✗ answer y or n"} {
			if !strings.Contains(r.errb.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.errb)
			}
		}
	})
	t.Run("decline", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, strings.NewReader("d\n")).exec(ctx, "call", "confirm_delete", "filename=notes.txt")
		check(t, r, 0, "kept notes.txt")
	})
	t.Run("answer", func(t *testing.T) {
		t.Parallel()
		// No stdin: the call leaves the task waiting and says how to go on.
		r := newRun(url, nil).exec(ctx, "call", "confirm_delete", "filename=a.txt")
		check(t, r, 1)
		if !strings.Contains(r.err.Error(), "mcptasks task answer") {
			t.Errorf("error %v", r.err)
		}
		id := taskID(t, r.errb.String())
		bad := newRun(url, nil).exec(ctx, "task", "answer", id, "nope=yes")
		check(t, bad, 1)
		bad = newRun(url, nil).exec(ctx, "task", "answer", id, "confirm=maybe")
		check(t, bad, 2)
		a := newRun(url, nil).exec(ctx, "task", "answer", id, "confirm=yes")
		check(t, a, 0, "answered confirm; task "+id)
		w := newRun(url, nil).exec(ctx, "task", "watch", id)
		check(t, w, 0, "deleted a.txt")
	})
	t.Run("answer-json", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "confirm_delete", "filename=b.txt", "--detach")
		id := strings.TrimSpace(r.out.String())
		waitStatus(t, url, id, client.StatusInputRequired)
		a := newRun(url, nil).exec(ctx, "task", "answer", id, "--json", `{"confirm": {"action": "accept", "content": {"confirm": false}}}`)
		check(t, a, 0, "answered confirm")
		w := newRun(url, nil).exec(ctx, "task", "watch", id)
		check(t, w, 0, "kept b.txt")
	})
	t.Run("answer-prompt", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "confirm_delete", "filename=c.txt", "--detach")
		id := strings.TrimSpace(r.out.String())
		waitStatus(t, url, id, client.StatusInputRequired)
		a := newRun(url, strings.NewReader("a\nyes\n")).exec(ctx, "task", "answer", id)
		check(t, a, 0, "answered confirm")
	})
	t.Run("interrupt", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.exec(ctx, "call", "slow_compute", "seconds=60")
		}()
		r.errb.waitFor(t, "working")
		r.sig <- os.Interrupt
		<-done
		check(t, r, 130)
		if !strings.Contains(r.errb.String(), "s  cancelled") || !strings.Contains(r.errb.String(), "mcptasks: task "+taskID(t, r.errb.String())+" cancelled") {
			t.Errorf("stderr:\n%s", r.errb)
		}
		if st := getStatus(t, url, taskID(t, r.errb.String())); st != client.StatusCancelled {
			t.Errorf("the task is %s, want cancelled", st)
		}
	})
	t.Run("watch-interrupt", func(t *testing.T) {
		t.Parallel()
		d := newRun(url, nil).exec(ctx, "call", "slow_compute", "seconds=60", "--detach")
		check(t, d, 0)
		id := strings.TrimSpace(d.out.String())
		r := newRun(url, nil)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.exec(ctx, "task", "watch", id)
		}()
		r.errb.waitFor(t, "working")
		r.sig <- os.Interrupt
		<-done
		check(t, r, 130)
		if !strings.Contains(r.errb.String(), "stopped waiting for task "+id) {
			t.Errorf("stderr:\n%s", r.errb)
		}
		if st := getStatus(t, url, id); st != client.StatusWorking {
			t.Errorf("the watched task is %s, want working", st)
		}
		c := newRun(url, nil).exec(ctx, "task", "cancel", id)
		check(t, c, 0, "task "+id+": cancelled")
	})
	t.Run("tools", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "tools")
		check(t, r, 0, "NAME", "greet", "name:string", "slow_compute", "seconds:integer [label:string]")
		j := newRun(url, nil).exec(ctx, "tools", "--output", "json")
		var tools []struct{ Name string }
		if err := json.Unmarshal([]byte(j.out.String()), &tools); err != nil {
			t.Fatalf("tools --output json: %s (%v)", j.out, err)
		}
		var names []string
		for _, tl := range tools {
			names = append(names, tl.Name)
		}
		for _, want := range []string{"batch_report", "confirm_delete", "greet", "slow_compute"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools --output json lists %v, without %s", names, want)
			}
		}
	})
	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"call"}, 2, "call needs a TOOL"},
			{[]string{"call", "greet", "--output", "yaml"}, 2, "--output is text or json"},
			{[]string{"call", "greet", "--bogus"}, 2, "unknown flag --bogus"},
			{[]string{"call", "greet", "--output"}, 2, "flag needs an argument"},
			{[]string{"task", "get", "x", "--bogus"}, 2, "unknown flag --bogus"},
			{[]string{"call", "slow_compute", "seconds=soon"}, 2, `"soon" is not an integer`},
			{[]string{"call", "nope", "x=1"}, 1, `no tool "nope"`},
			{[]string{"task"}, 2, "needs a subcommand"},
			{[]string{"task", "frob", "x"}, 2, "unknown subcommand"},
			{[]string{"task", "get"}, 2, "needs a TASKID"},
			{[]string{"task", "get", "a", "b"}, 2, "unexpected argument"},
			{[]string{"task", "get", "no-such-task"}, 1, "task expired or unknown"},
			{[]string{"tools", "extra"}, 2, "unexpected argument"},
		} {
			r := newRun(url, nil).exec(ctx, tc.args...)
			if r.code != tc.code || r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("%v: exit %d, err %v; want %d, %q", tc.args, r.code, r.err, tc.code, tc.want)
			}
		}
	})
	t.Run("help", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"call", "--help"}, {"call", "-h"}, {"task", "--help"}, {"task", "watch", "--help"}, {"task", "answer", "-h"}, {"tools", "--help"}} {
			r := newRun(url, nil).exec(ctx, args...)
			check(t, r, 0, "Usage: mcptasks "+args[0])
			if args[0] != "task" || len(args) > 2 {
				check(t, r, 0, "-url", "MCPTASKS_URL", "-token", "MCPTASKS_TOKEN")
			}
		}
	})
}

// The commands against the conformance fixtures: several input requests
// at once, an input round before the task exists, a failed task and a
// tool error.
func TestCLIConformance(t *testing.T) {
	url := localtest.Serve(t, conformance.App)
	ctx := t.Context()
	t.Run("multi_input", func(t *testing.T) {
		t.Parallel()
		// launch (a boolean) then project_name (a string), in key order.
		r := newRun(url, strings.NewReader("\ny\n\nApollo\n")).exec(ctx, "call", "multi_input")
		check(t, r, 0, `project "Apollo" (action accept), launch true (action accept)`)
	})
	t.Run("mrtr", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, strings.NewReader("\nAlice\n")).exec(ctx, "call", "test_tool_with_task")
		check(t, r, 0, "Hello, Alice!")
	})
	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "protocol_error_job", "--output", "json")
		check(t, r, 1, `"code": -32603`)
		if !strings.Contains(r.err.Error(), "failed: upstream answered with an unusable payload") {
			t.Errorf("error %v", r.err)
		}
	})
	t.Run("isError", func(t *testing.T) {
		t.Parallel()
		r := newRun(url, nil).exec(ctx, "call", "failing_job")
		check(t, r, 1, "the job failed")
		if !strings.Contains(r.err.Error(), "failing_job reported an error") {
			t.Errorf("error %v", r.err)
		}
	})
}

// taskID finds the id in the "task ID" line of a call's progress.
func taskID(t *testing.T, stderr string) string {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		if id, ok := strings.CutPrefix(l, "task "); ok && !strings.Contains(id, " ") {
			return id
		}
	}
	t.Fatalf("no task line in:\n%s", stderr)
	return ""
}

func getStatus(t *testing.T, url, id string) client.Status {
	t.Helper()
	task, err := client.New(url).Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return task.Status
}

func waitStatus(t *testing.T, url, id string, want client.Status) {
	t.Helper()
	_, err := client.New(url).Resume(t.Context(), id, client.OnStatus(func(task client.Task) {}), client.OnInput(func(ctx context.Context, req *client.InputRequest) (any, error) {
		return nil, io.EOF // stop at the first input request
	}))
	if st := getStatus(t, url, id); st != want {
		t.Fatalf("task %s is %s (%v), want %s", id, st, err, want)
	}
}

// --token and MCPTASKS_TOKEN are sent as a bearer token; a server that
// refuses the request is reported at once.
func TestCLIToken(t *testing.T) {
	const iss, aud, secret = "https://issuer.test", "https://mcp.test/mcp", "0123456789abcdef0123456789abcdef-cli"
	url := localtest.ServeWith(t, examples.App, localtest.Options{Env: map[string]string{
		auth.EnvIssuer: iss, auth.EnvAudience: aud, auth.EnvHS256Secret: secret,
	}})
	tok, err := auth.MintDevToken([]byte(secret), iss, aud, "alice", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	check(t, newRun(url, nil).exec(ctx, "call", "greet", "name=Ada", "--token", tok), 0, "Hello, Ada!")
	r := newRun(url, nil)
	getenv := r.e.getenv
	r.e.getenv = func(k string) string {
		if k == EnvToken {
			return tok
		}
		return getenv(k)
	}
	check(t, r.exec(ctx, "call", "slow_compute", "seconds=0"), 0, "computed")
	r = newRun(url, nil).exec(ctx, "tools")
	check(t, r, 1)
	if !strings.Contains(r.err.Error(), "HTTP 401") {
		t.Errorf("without a token: %v", r.err)
	}
}

// task cancel of a task whose step is running: the step does not stop at
// once (it ignores its context for a while), so the task ends cancelled a
// moment after tasks/cancel answers; the command waits for that, and
// prints the state it found when --wait passes first.
func TestCLICancelRunningStep(t *testing.T) {
	started := make(chan string, 4)
	release := make(chan struct{})
	app := &tasks.App{Name: "stubborn", Register: func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "stubborn", Description: "A step that stops late."}, tasks.Optional,
			func(_ context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
				if _, err := tasks.Do(st, "part", func(context.Context) (int, error) {
					started <- st.TaskID()
					<-release // ignores its context until the test lets it go
					return 1, nil
				}); err != nil {
					return nil, err
				}
				// Parked after the part: a step released before the cancel
				// arrives still leaves the task to cancel.
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, st.Sleep("rest", time.Hour)
			})
	}}
	url := localtest.Serve(t, app)
	ctx := t.Context()
	start := func() string {
		t.Helper()
		d := newRun(url, nil).exec(ctx, "call", "stubborn", "--detach")
		check(t, d, 0)
		id := strings.TrimSpace(d.out.String())
		select {
		case got := <-started:
			if got != id {
				t.Fatalf("step of %s started, want %s", got, id)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the step did not start")
		}
		return id
	}

	// --wait passes while the step runs: the state then, and a note.
	id := start()
	r := newRun(url, nil).exec(ctx, "task", "cancel", id, "--wait", "300ms")
	check(t, r, 0, "task "+id+": working")
	if !strings.Contains(r.errb.String(), "cancellation stays requested") {
		t.Errorf("stderr: %s", r.errb)
	}
	release <- struct{}{}
	waitStatus(t, url, id, client.StatusCancelled)

	// The default wait sees the step stop and the task end cancelled.
	id = start()
	go func() {
		time.Sleep(300 * time.Millisecond)
		release <- struct{}{}
	}()
	r = newRun(url, nil).exec(ctx, "task", "cancel", id)
	check(t, r, 0, "task "+id+": cancelled")
	if r.errb.String() != "" {
		t.Errorf("stderr: %s", r.errb)
	}

	bad := newRun(url, nil).exec(ctx, "task", "cancel", id, "--wait", "-1s")
	check(t, bad, 2)
}
