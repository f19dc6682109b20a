package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/platform/local/localtest"
)

// On a terminal the progress is one line redrawn in place, cut to the
// terminal's width; permanent lines (the task id, notes, the final status)
// go above it.
func TestCLIProgressLive(t *testing.T) {
	e, _, errb := testEnv("", true)
	now := time.Unix(0, 0)
	e.now = func() time.Time { return now }
	e.terminal = func(any) (bool, int) { return true, 40 }
	p := newProgress(e)
	p.begin("calling slow_compute")
	p.update(client.Task{ID: "T1", Status: client.StatusWorking})
	now = now.Add(1500 * time.Millisecond)
	p.update(client.Task{ID: "T1", Status: client.StatusWorking, StatusMessage: "a very long status message that does not fit\x1b[2J"})
	p.note("a note")
	p.pause()
	p.resume()
	now = now.Add(time.Second)
	p.update(client.Task{ID: "T1", Status: client.StatusCompleted, StatusMessage: "done"})
	p.stop()
	out := errb.String()
	for _, want := range []string{
		eraseLine + "⠋ calling slow_compute  0.0s",
		eraseLine + "task T1\n",
		eraseLine + "⠋ working  0.0s",
		eraseLine + "⠋ working: a very long status message…",
		eraseLine + "a note\n",
		"✓ completed: done  2.5s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "\x1b[2J") {
		t.Errorf("the server's escape sequence reached the terminal: %q", out)
	}
	for _, l := range strings.Split(strings.ReplaceAll(out, eraseLine, "\n"), "\n") {
		if n := len([]rune(l)); n > 39 {
			t.Errorf("line of %d runes on a 40-column terminal: %q", n, l)
		}
	}
	if !strings.HasSuffix(out, "2.5s\n") {
		t.Errorf("output does not end with the final line: %q", out)
	}
}

// A call on a terminal redraws its line while the task runs.
func TestCLICallLive(t *testing.T) {
	url := localtest.Serve(t, examples.App)
	r := newRun(url, nil)
	r.e.terminal = func(any) (bool, int) { return true, 80 }
	r.exec(t.Context(), "call", "slow_compute", "seconds=1")
	check(t, r, 0, "computed")
	out := r.errb.String()
	if n := strings.Count(out, eraseLine); n < 5 {
		t.Errorf("%d redraws in 1s:\n%q", n, out)
	}
	if !strings.Contains(out, "✓ completed: done") {
		t.Errorf("no final line:\n%q", out)
	}
}
