package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcptasks/mcptasks/pkg/client"
)

// redrawEvery is the pace of the live line (spinner and elapsed time).
const redrawEvery = 100 * time.Millisecond

// eraseLine returns the cursor to the start of the line and clears it.
const eraseLine = "\r\x1b[2K"

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// progress shows where a call stands on w (stderr). Live, it is one line
// redrawn in place: a spinner, the status, the status message and the time
// elapsed. Otherwise it writes one plain line per change.
type progress struct {
	w     io.Writer
	live  bool
	width func() int // columns of the terminal, 0 if unknown
	now   func() time.Time
	start time.Time

	mu      sync.Mutex
	taskID  string
	status  string // what the live line shows: a task status or "calling TOOL"
	message string
	frame   int
	drawn   bool // the live line is on the screen
	paused  bool
	stopped bool
	tick    *time.Ticker
	done    chan struct{}
}

func newProgress(e *env) *progress {
	live, _ := e.terminal(e.stderr)
	p := &progress{w: e.stderr, live: live, now: e.now, start: e.now()}
	p.width = func() int {
		_, w := e.terminal(e.stderr)
		return w
	}
	return p
}

// begin shows what the command is doing before a task exists (live only).
func (p *progress) begin(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = what
	if !p.live || p.tick != nil {
		return
	}
	p.tick = time.NewTicker(redrawEvery)
	p.done = make(chan struct{})
	go p.loop(p.tick, p.done)
	p.drawLocked()
}

func (p *progress) loop(t *time.Ticker, done chan struct{}) {
	for {
		select {
		case <-t.C:
			p.mu.Lock()
			p.frame++
			p.drawLocked()
			p.mu.Unlock()
		case <-done:
			return
		}
	}
}

// update reports t's new state: its first state names the task, a
// terminal one ends the live line with a permanent one.
func (p *progress) update(t client.Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.taskID != t.ID {
		p.taskID = t.ID
		p.lineLocked("task " + clean(t.ID, false))
	}
	p.status, p.message = clean(string(t.Status), false), clean(t.StatusMessage, false)
	switch {
	case !p.live:
		p.lineLocked(fmt.Sprintf("%7s  %s", p.elapsedLocked(), p.describeLocked()))
		return
	case t.Status.Terminal():
		p.lineLocked(fmt.Sprintf("%s %s  %s", statusMark(t.Status), p.describeLocked(), p.elapsedLocked()))
		return
	}
	p.drawLocked()
}

// note writes a line of information above the live line.
func (p *progress) note(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lineLocked(fmt.Sprintf(format, args...))
}

// pause clears the live line and stops redrawing it (while the user is
// asked something); resume draws it again.
func (p *progress) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	p.paused = true
}

func (p *progress) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	p.drawLocked()
}

// stop clears the live line for good.
func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tick != nil {
		p.tick.Stop()
		close(p.done)
		p.tick = nil
	}
	p.clearLocked()
	p.stopped = true
}

// lineLocked writes a permanent line, keeping the live line below it.
func (p *progress) lineLocked(s string) {
	if p.stopped {
		return
	}
	p.clearLocked()
	fmt.Fprintln(p.w, s)
	if !p.paused {
		p.drawLocked()
	}
}

func (p *progress) clearLocked() {
	if p.drawn {
		io.WriteString(p.w, eraseLine)
		p.drawn = false
	}
}

func (p *progress) drawLocked() {
	if !p.live || p.paused || p.stopped || p.status == "" || client.Status(p.status).Terminal() {
		return
	}
	s := fmt.Sprintf("%s %s  %s", spinner[p.frame%len(spinner)], p.describeLocked(), p.elapsedLocked())
	if w := p.width(); w > 1 {
		s = truncate(s, w-1)
	}
	io.WriteString(p.w, eraseLine+s)
	p.drawn = true
}

func (p *progress) describeLocked() string {
	if p.message == "" {
		return p.status
	}
	return p.status + ": " + p.message
}

func (p *progress) elapsedLocked() string {
	return fmt.Sprintf("%.1fs", p.now().Sub(p.start).Seconds())
}

func statusMark(s client.Status) string {
	switch s {
	case client.StatusCompleted:
		return "✓"
	case client.StatusFailed:
		return "✗"
	case client.StatusCancelled:
		return "⊘"
	}
	return "·"
}

// truncate cuts s to n runes, ending with "…" when it cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}
