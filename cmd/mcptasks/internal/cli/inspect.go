package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

// Inspect is the inspect command (cmd/mcptasks lists it with the others).
var Inspect = command("inspect", "a task's record and journal as a timeline, read from the store: inspect TASKID [--json]", (*env).inspect)

const inspectUsage = `
Usage: mcptasks inspect TASKID [--json] [--timeout 10s]

Reads one task straight from the store the deployment uses, chosen as the
deployment chooses it (MCPTASKS_STORE, REDIS_URL, DATABASE_URL): Redis at
REDIS_URL under MCPTASKS_KEY_PREFIX, or PostgreSQL at DATABASE_URL in the
schema MCPTASKS_PG_SCHEMA. It prints the task's record and its history as a
timeline: each step with its attempts, durations and errors, sleeps with their
wake times, input requests and when they were answered, offers, cancellation
requests, workers lost while they ran a step (their lease ran out, and the
task was delivered again), and the outcome (or, for a live task, what it
waits for now). --json prints the same as one JSON object, for scripts.

It is an operator's tool: it shows any principal's task, arguments, answers
and result to whoever can read the store, and has no MCP counterpart.
Exit status: 0 shown, 1 no such task (never created, expired, or under
another key prefix or schema) or the store unreachable, 2 bad command line.`

func (e *env) inspect(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcptasks inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the record and timeline as one JSON object")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on the store after this long")
	pos, err := e.parse(fs, inspectUsage, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return local.Usagef("inspect needs a TASKID")
	case len(pos) > 1:
		return unexpected("inspect", pos[1])
	case *timeout <= 0:
		return local.Usagef("inspect: --timeout must be positive")
	}
	id := pos[0]
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := e.openStore(ctx, "inspect")
	if err != nil {
		return deadline("inspect", *timeout, err)
	}
	defer st.close()
	rec, err := st.Inspect(ctx, id)
	if errors.Is(err, tasks.ErrNotFound) {
		return fmt.Errorf("inspect: no task %q under %s (never created, expired, or another %s)", id, st.where, st.what)
	}
	if err != nil {
		return deadline("inspect", *timeout, err)
	}
	in := newInspection(rec, time.Now())
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	in.render(e.stdout)
	return nil
}

// deadline wraps err, the failure of the command cmd within its
// --timeout, saying when the store did not answer in time.
func deadline(cmd string, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: the store did not answer within %s: %w", cmd, timeout, err)
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// inspection is what inspect prints: the task's record and its timeline.
type inspection struct {
	TaskID            string                     `json:"taskId"`
	Tool              string                     `json:"tool"`
	Owner             string                     `json:"owner"`
	Status            driver.Status              `json:"status"`
	StatusMessage     string                     `json:"statusMessage,omitempty"`
	CreatedAt         time.Time                  `json:"createdAt"`
	UpdatedAt         time.Time                  `json:"lastUpdatedAt"`
	ExpiresAt         time.Time                  `json:"expiresAt"`
	Arguments         json.RawMessage            `json:"arguments,omitempty"`
	Result            json.RawMessage            `json:"result,omitempty"`
	Error             *driver.ErrorObject        `json:"error,omitempty"`
	InputRequests     map[string]json.RawMessage `json:"inputRequests,omitempty"`
	WakeAt            time.Time                  `json:"wakeAt,omitzero"`
	LeaseUntil        time.Time                  `json:"leaseUntil,omitzero"`
	CancelRequestedAt time.Time                  `json:"cancelRequestedAt,omitzero"`
	// Attempts is the attempt counter of the next step (live tasks).
	Attempts int `json:"attempts,omitempty"`
	// Claims is how many times a worker took the task (live tasks).
	Claims int64 `json:"claims,omitempty"`
	// Awaiting is the event the task waits for (a callback, a signal, a
	// parallel step's join).
	Awaiting string `json:"awaiting,omitempty"`
	// Forks are its parallel steps and their branches.
	Forks    []inspect.Fork `json:"forks,omitempty"`
	Timeline []event        `json:"timeline"`
	// now is when the record was read: a lease that ended before it was
	// lost with its worker.
	now time.Time
}

// event is one line of the timeline.
type event struct {
	At time.Time `json:"at,omitzero"`
	// Event is created, step, attempt_failed, worker_lost (At: when its
	// lease ran out, Until: when the task was claimed again), sleep, woke,
	// input, answered, offer, withdrawn, checked, callback (Until: when
	// its URL expires), await (a signal's wait, until Until), event (what
	// a callback or signal brought, or "timeout" in Error), fork (a
	// parallel step started), branch (one of its branches finished), join,
	// cancel_requested, or the terminal status.
	Event      string          `json:"event"`
	Name       string          `json:"name,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	DurationMs int64           `json:"durationMs,omitempty"`
	Until      time.Time       `json:"until,omitzero"`
	Keys       []string        `json:"keys,omitempty"`
	Error      string          `json:"error,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
}

func newInspection(rec *inspect.Record, now time.Time) *inspection {
	t := rec.Task
	in := &inspection{
		now:    now,
		TaskID: t.ID, Tool: t.Tool, Owner: t.Owner, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, ExpiresAt: t.ExpiresAt(),
		Arguments: t.Args, Result: t.Result, Error: t.Error, InputRequests: t.InputRequests,
		WakeAt: t.WakeAt, LeaseUntil: t.LeaseUntil, CancelRequestedAt: rec.CancelRequestedAt,
		Claims: rec.Claims, Awaiting: t.Awaiting, Forks: rec.Forks,
	}
	if !t.Status.Terminal() {
		in.Attempts = rec.Attempts
	}
	in.Timeline = timeline(rec)
	return in
}

// timeline orders the task's history by time: its creation, the journal
// (entries written before this history was recorded take the time of the
// one before), the answers to its input requests, a cancellation request
// and the outcome.
func timeline(rec *inspect.Record) []event {
	t := rec.Task
	evs := []event{{At: t.CreatedAt, Event: "created"}}
	for _, e := range rec.Journal {
		ev := event{At: e.At, Name: e.Name, Attempt: e.Attempt, DurationMs: e.Took.Milliseconds(), Error: e.Err}
		switch e.Kind {
		case driver.KindDo:
			ev.Event, ev.Value = "step", e.Value
		case driver.KindAttempt:
			ev.Event, ev.Until = "attempt_failed", e.Until
		case driver.KindLost:
			ev.Event, ev.Until = "worker_lost", e.Until
		case driver.KindSleep:
			ev.Event, ev.Until = "sleep", e.Until
		case driver.KindWoke:
			ev.Event = "woke"
		case driver.KindInput:
			ev.Event, ev.Until, ev.Keys = "input", e.Until, e.Keys
		case driver.KindOffer:
			ev.Event = "offer"
		case driver.KindWithdraw:
			ev.Event = "withdrawn"
		case driver.KindCheck:
			ev.Event = "checked"
		case driver.KindCallback:
			ev.Event, ev.Until = "callback", e.Until
		case driver.KindAwait:
			ev.Event, ev.Until = "await", e.Until
		case driver.KindEvent:
			ev.Event, ev.Value = "event", e.Value
		case driver.KindFork:
			ev.Event, ev.Value = "fork", e.Value
		case driver.KindJoin:
			ev.Event, ev.Value = "join", e.Value
		default:
			ev.Event = string(e.Kind)
		}
		evs = append(evs, ev)
	}
	for prev, i := t.CreatedAt, 0; i < len(evs); i++ {
		if evs[i].At.IsZero() {
			evs[i].At = prev
		}
		prev = evs[i].At
	}
	for _, f := range rec.Forks {
		for i, b := range f.Branch {
			if b.FinishedAt.IsZero() {
				continue
			}
			evs = append(evs, event{At: b.FinishedAt, Event: "branch", Name: fmt.Sprintf("%s[%d]", f.Name, i),
				Attempt: b.Attempts, DurationMs: b.Took.Milliseconds(), Error: b.Err, Value: b.Value})
		}
	}
	keys := make([]string, 0, len(rec.AnsweredAt))
	for k := range rec.AnsweredAt {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		evs = append(evs, event{At: rec.AnsweredAt[k], Event: "answered", Name: k})
	}
	if !rec.CancelRequestedAt.IsZero() {
		evs = append(evs, event{At: rec.CancelRequestedAt, Event: "cancel_requested"})
	}
	if t.Status.Terminal() {
		end := event{At: t.UpdatedAt, Event: string(t.Status)}
		if t.Error != nil {
			end.Error = t.Error.Message
		}
		end.Value = t.Result
		evs = append(evs, end)
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.At.Compare(b.At) })
	return evs
}

const (
	stampLayout = "2006-01-02 15:04:05.000 MST"
	clockLayout = "15:04:05.000"
)

// render prints in as text.
func (in *inspection) render(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "task\t%s\n", in.TaskID)
	fmt.Fprintf(tw, "tool\t%s\n", in.Tool)
	fmt.Fprintf(tw, "owner\t%s\n", in.Owner)
	status := string(in.Status)
	if in.StatusMessage != "" {
		status += ": " + in.StatusMessage
	}
	fmt.Fprintf(tw, "status\t%s (since %s)\n", status, in.UpdatedAt.Format(stampLayout))
	fmt.Fprintf(tw, "created\t%s, expires %s\n", in.CreatedAt.Format(stampLayout), in.ExpiresAt.Format(stampLayout))
	if len(in.Arguments) > 0 {
		fmt.Fprintf(tw, "arguments\t%s\n", clip(string(in.Arguments), 100))
	}
	if in.Claims > 0 {
		fmt.Fprintf(tw, "claims\t%d\n", in.Claims)
	}
	_ = tw.Flush()

	fmt.Fprintln(w, "\ntimeline")
	var b strings.Builder
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, ev := range in.Timeline {
		fmt.Fprintf(tw, "  %s\t+%s\t%s\t%s\n", ev.At.Format(clockLayout), ev.At.Sub(in.CreatedAt), in.what(ev), in.detail(ev))
	}
	_ = tw.Flush()
	for line := range strings.Lines(b.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	in.renderForks(w)
	if now := in.waiting(); now != "" {
		fmt.Fprintf(w, "\nnow: %s\n", now)
	}
}

// renderForks prints the branches of the task's parallel steps that have
// not finished (the finished ones are in the timeline).
func (in *inspection) renderForks(w io.Writer) {
	for _, f := range in.Forks {
		if f.Finished == f.Branches {
			continue
		}
		fmt.Fprintf(w, "\nparallel step %s: %d of %d branches finished, %d started, %d at once\n", f.Name, f.Finished, f.Branches, f.Dispatched, f.Concurrency)
		for i, b := range f.Branch {
			switch b.State {
			case "done", "failed", "pending":
				continue
			}
			line := fmt.Sprintf("  [%d] %s, attempt %d", i, b.State, b.Attempts)
			switch b.State {
			case "running":
				line += ", lease until " + b.LeaseUntil.Format(clockLayout)
			case "retrying":
				line += ", retry at " + b.RetryAt.Format(clockLayout)
			}
			if b.LastErr != "" {
				line += ": last error: " + clip(b.LastErr, 60)
			}
			if b.Lost > 0 {
				line += fmt.Sprintf(" (%d worker(s) lost)", b.Lost)
			}
			fmt.Fprintln(w, line)
		}
	}
}

// what names an event in the timeline.
func (in *inspection) what(ev event) string {
	switch ev.Event {
	case "step", "attempt_failed":
		return "step " + ev.Name
	case "worker_lost":
		if ev.Name == "" {
			return "worker lost"
		}
		return "step " + ev.Name
	case "answered":
		return "  answered " + ev.Name
	case "branch":
		return "  branch " + ev.Name
	case "fork":
		return "parallel " + ev.Name
	case "woke":
		return "sleep " + ev.Name
	case "cancel_requested":
		return "cancel requested"
	case "created", "completed", "failed", "cancelled":
		return ev.Event
	}
	return ev.Event + " " + ev.Name
}

// detail describes an event in the timeline.
func (in *inspection) detail(ev event) string {
	took := time.Duration(ev.DurationMs) * time.Millisecond
	switch ev.Event {
	case "created":
		return clip(string(in.Arguments), 60)
	case "step":
		attempt := ""
		if ev.Attempt > 0 {
			attempt = fmt.Sprintf(", attempt %d", ev.Attempt)
		}
		if ev.Error != "" {
			return fmt.Sprintf("failed after %s%s: %s", took, attempt, ev.Error)
		}
		return fmt.Sprintf("done in %s%s: %s", took, attempt, clip(string(ev.Value), 50))
	case "attempt_failed":
		return fmt.Sprintf("attempt %d failed after %s: %s; retry at %s", ev.Attempt, took, ev.Error, ev.Until.Format(clockLayout))
	case "worker_lost":
		attempt := ""
		if ev.Attempt > 0 {
			attempt = fmt.Sprintf("attempt %d: ", ev.Attempt)
		}
		return fmt.Sprintf("%sworker lost at %s (its lease ran out), re-delivered at %s", attempt, ev.At.Format(clockLayout), ev.Until.Format(clockLayout))
	case "sleep":
		return fmt.Sprintf("until %s (%s)", ev.Until.Format(clockLayout), ev.Until.Sub(ev.At).Round(time.Millisecond))
	case "woke":
		return "cut short by an answer to an offer"
	case "input":
		s := "asked for " + strings.Join(ev.Keys, ", ")
		if !ev.Until.IsZero() {
			s += ", deadline " + ev.Until.Format(clockLayout)
		}
		return s
	case "checked":
		return "found the answer " + clip(string(ev.Value), 50)
	case "callback":
		return "URL open until " + ev.Until.Format(stampLayout)
	case "await":
		return "waits for the signal until " + ev.Until.Format(stampLayout)
	case "event":
		if ev.Error != "" {
			return ev.Error
		}
		return "arrived: " + clip(string(ev.Value), 50)
	case "fork":
		var spec struct{ N, C int }
		_ = json.Unmarshal(ev.Value, &spec)
		return fmt.Sprintf("%d branches, %d at once", spec.N, spec.C)
	case "branch":
		if ev.Error != "" {
			return fmt.Sprintf("failed after %s, attempt %d: %s", took, ev.Attempt, ev.Error)
		}
		return fmt.Sprintf("done in %s, attempt %d: %s", took, ev.Attempt, clip(string(ev.Value), 50))
	case "join":
		if ev.Error != "" {
			return "failed: " + ev.Error
		}
		var jv struct {
			V []json.RawMessage
			E map[string]string
		}
		_ = json.Unmarshal(ev.Value, &jv)
		return fmt.Sprintf("%d branches joined, %d failed", len(jv.V), len(jv.E))
	case "completed":
		return "result: " + resultText(ev.Value)
	case "failed":
		return "error: " + ev.Error
	}
	return ""
}

// waiting says what a live task waits for now ("" for an ended one).
func (in *inspection) waiting() string {
	if in.Status.Terminal() {
		return ""
	}
	var parts []string
	switch {
	case in.LeaseUntil.IsZero():
	case in.LeaseUntil.After(in.now):
		parts = append(parts, "a worker holds it until "+in.LeaseUntil.Format(stampLayout))
	default:
		parts = append(parts, "its worker was lost: its lease ran out at "+in.LeaseUntil.Format(stampLayout)+
			", and the next worker to get it takes it over")
	}
	wake := in.WakeAt
	if in.Awaiting != "" {
		what := "the event " + in.Awaiting + " (a callback or a signal) until " + wake.Format(stampLayout)
		for _, f := range in.Forks {
			if f.Name == in.Awaiting {
				what = "the branches of its parallel step " + f.Name
			}
		}
		parts = append(parts, "waits, with no worker, for "+what)
		wake = time.Time{}
	}
	if len(in.InputRequests) > 0 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range in.InputRequests {
				if !yield(k) {
					return
				}
			}
		})
		parts = append(parts, "waits for input "+strings.Join(keys, ", "))
	}
	if !wake.IsZero() {
		parts = append(parts, "due at "+wake.Format(stampLayout))
	}
	if in.Attempts > 0 {
		parts = append(parts, fmt.Sprintf("its next step has been claimed %d time(s)", in.Attempts))
	}
	if len(parts) == 0 {
		return string(in.Status)
	}
	return string(in.Status) + ": " + strings.Join(parts, "; ")
}

// resultText is a CallToolResult's text content, or else its JSON, clipped.
func resultText(raw json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(raw, &r) == nil {
		var texts []string
		for _, c := range r.Content {
			if c.Type == "text" {
				texts = append(texts, c.Text)
			}
		}
		if len(texts) > 0 {
			s := clip(strings.Join(texts, " "), 60)
			if r.IsError {
				s += " (isError)"
			}
			return s
		}
	}
	return clip(string(raw), 60)
}

// clip shortens s to n runes, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Timeline is a task's record and history as inspect shows them: the
// dashboard draws the same (cmd/mcptasks/internal/dashboard). Its JSON is
// what inspect --json prints.
type Timeline = inspection

// TimelineEvent is one event of a [Timeline].
type TimelineEvent = event

// NewTimeline builds the record and timeline of rec at now, as inspect
// does.
func NewTimeline(rec *inspect.Record, now time.Time) *Timeline { return newInspection(rec, now) }

// Describe names ev and describes it, as inspect prints it.
func (in *inspection) Describe(ev event) (what, detail string) {
	return strings.TrimSpace(in.what(ev)), in.detail(ev)
}

// Waiting says what a live task waits for now ("" for an ended one).
func (in *inspection) Waiting() string { return in.waiting() }
