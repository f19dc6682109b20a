package e2e

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/mcptasks/mcptasks/pkg/client"
)

// ptyProc is an mcptasks process on a pseudo-terminal: its stdin, stdout
// and stderr are the terminal, which is its controlling terminal, so that
// the terminal's interrupt character (Ctrl-C) sends it SIGINT.
type ptyProc struct {
	tty  *os.File
	mu   sync.Mutex
	out  strings.Builder
	read chan struct{} // closed when the terminal has no more output
	done chan struct{} // closed when the process has exited
	code int
}

func startPTY(t *testing.T, url string, args ...string) *ptyProc {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(cliProcessEnv(url), "TERM=xterm")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatalf("starting mcptasks on a pty: %v", err)
	}
	p := &ptyProc{tty: tty, read: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			p.mu.Lock()
			p.out.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return // EIO once the process has exited and closed the terminal
			}
		}
	}()
	go func() {
		defer close(p.done)
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.code = exit.ExitCode()
		} else if err != nil {
			p.code = -1
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		tty.Close()
		if t.Failed() {
			t.Logf("terminal output of mcptasks %v:\n%q", args, p.output())
		}
	})
	return p
}

func (p *ptyProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until the terminal has shown want (after the first n
// bytes, when n > 0).
func (p *ptyProc) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(p.output(), want) {
		select {
		case <-deadline:
			t.Fatalf("the terminal did not show %q within 30s", want)
		case <-p.done:
			if !strings.Contains(p.output(), want) {
				<-p.read
				if !strings.Contains(p.output(), want) {
					t.Fatalf("mcptasks exited (%d) without showing %q", p.code, want)
				}
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// typeIn writes s to the terminal as if typed.
func (p *ptyProc) typeIn(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(p.tty, s); err != nil {
		t.Fatalf("typing %q: %v", s, err)
	}
}

// wait waits for the process to exit and its output to be read, and
// returns its exit status.
func (p *ptyProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("mcptasks did not exit within 60s")
	}
	select {
	case <-p.read:
	case <-time.After(5 * time.Second):
	}
	return p.code
}

// taskIDIn finds the taskId in the "task ID" line of the progress.
func taskIDIn(t *testing.T, out string) string {
	t.Helper()
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r", "\n"), "\n") {
		l = strings.TrimPrefix(l, "\x1b[2K")
		if id, ok := strings.CutPrefix(l, "task "); ok && id != "" && !strings.Contains(id, " ") {
			return id
		}
	}
	t.Fatalf("no task line in %q", out)
	return ""
}

// redrawn is a progress line drawn over the previous one: carriage
// return, erase line, a spinner frame, the status and message, the time.
var redrawn = regexp.MustCompile(`\r\x1b\[2K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] working: computing for 2s  [0-9]+\.[0-9]s`)

// The CLI on a pseudo-terminal, against a real server process: the
// progress line is redrawn in place, a prompt is answered (after a refused
// value), Ctrl-C cancels the task, and Ctrl-C during watch only stops
// watching.
func TestCLITerminal(t *testing.T) {
	url := cliServer(t, "examples")

	t.Run("progress", func(t *testing.T) {
		t.Parallel()
		p := startPTY(t, url, "call", "slow_compute", "seconds=2", "label=tty")
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		out := p.output()
		if n := strings.Count(out, "\r\x1b[2K"); n < 10 {
			t.Errorf("the progress line was redrawn %d times in 2s, want 10 or more", n)
		}
		if !redrawn.MatchString(out) {
			t.Errorf("no progress line with a spinner, the status and the time elapsed")
		}
		for _, want := range []string{"✓ completed: done", `computed "tty" in 2s`} {
			if !strings.Contains(out, want) {
				t.Errorf("the terminal did not show %q", want)
			}
		}
	})
	t.Run("prompt", func(t *testing.T) {
		t.Parallel()
		p := startPTY(t, url, "call", "confirm_delete", "filename=notes.txt")
		p.waitFor(t, "answer, decline or cancel? [A/d/c]: ")
		p.typeIn(t, "\r")
		p.waitFor(t, "confirm — delete the file? [y/n]: ")
		p.typeIn(t, "perhaps\r")
		p.waitFor(t, "✗ answer y or n")
		p.typeIn(t, "y\r")
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		out := p.output()
		if !strings.Contains(out, "deleted notes.txt") || !strings.Contains(out, "? Delete notes.txt?") {
			t.Errorf("terminal output %q", out)
		}
	})
	t.Run("ctrl-c", func(t *testing.T) {
		t.Parallel()
		p := startPTY(t, url, "call", "slow_compute", "seconds=600")
		p.waitFor(t, "working: computing for 600s")
		p.typeIn(t, "\x03") // the terminal's interrupt character: SIGINT
		if code := p.wait(t); code != 130 {
			t.Errorf("exit %d after Ctrl-C, want 130", code)
		}
		out := p.output()
		id := taskIDIn(t, out)
		for _, want := range []string{"cancelling the task: Ctrl-C again to stop waiting", "⊘ cancelled", "mcptasks: task " + id + " cancelled"} {
			if !strings.Contains(out, want) {
				t.Errorf("the terminal did not show %q", want)
			}
		}
		if task := untilStatus(t, url, id, client.StatusCancelled); task.Status != client.StatusCancelled {
			t.Errorf("task %s is %s", id, task.Status)
		}
	})
	t.Run("ctrl-c-watch", func(t *testing.T) {
		t.Parallel()
		r := runCLI(t, url, "", "call", "slow_compute", "seconds=600", "--detach")
		id := strings.TrimSpace(r.stdout)
		p := startPTY(t, url, "task", "watch", id)
		p.waitFor(t, "working: computing for 600s")
		p.typeIn(t, "\x03")
		if code := p.wait(t); code != 130 {
			t.Errorf("exit %d after Ctrl-C, want 130", code)
		}
		if !strings.Contains(p.output(), "stopped waiting for task "+id+" (working)") {
			t.Errorf("terminal output %q", p.output())
		}
		task, err := client.New(url).Get(t.Context(), id)
		if err != nil || task.Status != client.StatusWorking {
			t.Errorf("after Ctrl-C in watch the task is %v (%v), want working", task, err)
		}
		_ = client.New(url).Cancel(t.Context(), id)
	})
}
