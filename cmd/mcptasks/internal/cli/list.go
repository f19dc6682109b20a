package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

// Tasks is the tasks command (cmd/mcptasks lists it with the others).
var Tasks = command("tasks", "list the tasks of every principal, newest first, read from the store: tasks [--status S] [--tool T] [--owner P] [--since 1h] [--json]", (*env).listTasks)

const tasksUsage = `
Usage: mcptasks tasks [--status S[,S...]] [--tool T] [--owner P] [--since WHEN] [--until WHEN] [--limit 50] [--json]

Lists the tasks of every principal, newest first, straight from the store
the deployment uses, chosen as the deployment chooses it (MCPTASKS_STORE,
REDIS_URL, DATABASE_URL): Redis at REDIS_URL (MCPTASKS_KEY_PREFIX and
MCPTASKS_REDIS_SHARDS when it sets them), or PostgreSQL at DATABASE_URL in
the schema MCPTASKS_PG_SCHEMA; with the counts by status of those shown.
The filters combine: --status takes working, input_required, completed,
failed, cancelled (several separated by commas); WHEN is a time
(2026-07-28T09:30:00Z, 2026-07-28 09:30, 2026-07-28) or a duration before
now (90m, 2h, 7d). --json prints the tasks as a JSON array. The Redis
store indexes the newest 10,000 tasks it created (see pkg/tasks/redisstore),
the Postgres store lists every unexpired task; mcptasks inspect TASKID
shows one in full.

It is an operator's tool, like inspect: it shows every principal's tasks
to whoever can read the store. Exit status: 0 listed (possibly nothing),
1 the store unreachable, 2 bad command line.`

// taskRow is one task of tasks --json.
type taskRow struct {
	TaskID        string        `json:"taskId"`
	Tool          string        `json:"tool"`
	Owner         string        `json:"owner"`
	Status        driver.Status `json:"status"`
	StatusMessage string        `json:"statusMessage,omitempty"`
	CreatedAt     time.Time     `json:"createdAt"`
	UpdatedAt     time.Time     `json:"lastUpdatedAt"`
	ExpiresAt     time.Time     `json:"expiresAt"`
}

func (e *env) listTasks(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcptasks tasks", flag.ContinueOnError)
	status := fs.String("status", "", "only tasks in these states, comma-separated")
	tool := fs.String("tool", "", "only the tasks of this tool")
	owner := fs.String("owner", "", "only the tasks of this principal")
	since := fs.String("since", "", "only tasks created at or after WHEN (a time, or a duration before now)")
	until := fs.String("until", "", "only tasks created before WHEN")
	limit := fs.Int("limit", 50, "show at most this many tasks")
	asJSON := fs.Bool("json", false, "print the tasks as a JSON array")
	timeout := fs.Duration("timeout", 10*time.Second, "give up on the store after this long")
	pos, err := e.parse(fs, tasksUsage, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return unexpected("tasks", pos[0])
	}
	now := e.now()
	f := &inspect.Filter{Tool: *tool, Owner: *owner}
	if f.Statuses, err = ParseStatuses(*status); err != nil {
		return local.Usagef("tasks: --status: %v", err)
	}
	if f.Since, err = ParseWhen(*since, now); err != nil {
		return local.Usagef("tasks: --since: %v", err)
	}
	if f.Until, err = ParseWhen(*until, now); err != nil {
		return local.Usagef("tasks: --until: %v", err)
	}
	switch {
	case *limit <= 0:
		return local.Usagef("tasks: --limit must be positive")
	case *timeout <= 0:
		return local.Usagef("tasks: --timeout must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := e.openStore(ctx, "tasks")
	if err != nil {
		return deadline("tasks", *timeout, err)
	}
	defer st.close()
	ts, more, err := ListTasks(ctx, st, f, *limit, now)
	if err != nil {
		return deadline("tasks", *timeout, err)
	}
	if *asJSON {
		rows := make([]taskRow, len(ts))
		for i, t := range ts {
			rows[i] = taskRow{TaskID: t.ID, Tool: t.Tool, Owner: t.Owner, Status: t.Status, StatusMessage: t.StatusMessage,
				CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, ExpiresAt: t.ExpiresAt()}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(ts) == 0 {
		fmt.Fprintln(e.stdout, "no tasks")
		return nil
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tSTATUS\tTOOL\tOWNER\tTASK\tMESSAGE")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.CreatedAt.Local().Format("2006-01-02 15:04:05"), t.Status, t.Tool, t.Owner, t.ID, clip(t.StatusMessage, 40))
	}
	_ = tw.Flush()
	for line := range strings.Lines(b.String()) {
		fmt.Fprintln(e.stdout, strings.TrimRight(line, " \n"))
	}
	counts := CountByStatus(ts)
	var parts []string
	for _, st := range AllStatuses {
		if n := counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	fmt.Fprintf(e.stdout, "\n%d task(s): %s\n", len(ts), strings.Join(parts, ", "))
	if more {
		fmt.Fprintf(e.stdout, "older tasks may be left: raise --limit, or narrow with --since/--until\n")
	}
	return nil
}

// AllStatuses are the task states, in the order the commands show them.
var AllStatuses = []driver.Status{driver.StatusWorking, driver.StatusInputRequired, driver.StatusCompleted, driver.StatusFailed, driver.StatusCancelled}

// ParseStatuses parses a comma-separated list of task states ("" is none).
func ParseStatuses(v string) ([]driver.Status, error) {
	var out []driver.Status
	for _, w := range strings.Split(v, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		st := driver.Status(w)
		if !validStatus(st) {
			return nil, fmt.Errorf("%q is not a task status (want working, input_required, completed, failed or cancelled)", w)
		}
		out = append(out, st)
	}
	return out, nil
}

func validStatus(st driver.Status) bool {
	for _, s := range AllStatuses {
		if s == st {
			return true
		}
	}
	return false
}

// ParseWhen parses a point in time: RFC 3339, "2006-01-02 15:04[:05]"
// or "2006-01-02" in local time, or a duration before now ("90m", "2h",
// "7d"). "" is the zero time.
func ParseWhen(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a time (2026-07-28T09:30:00Z, 2026-07-28 09:30, 2026-07-28) nor a duration before now (90m, 2h, 7d)", v)
}

// ListTasks returns up to limit tasks that f selects, newest first, and
// whether older ones may be left.
func ListTasks(ctx context.Context, l inspect.Lister, f *inspect.Filter, limit int, now time.Time) ([]*driver.Task, bool, error) {
	var out []*driver.Task
	cursor := ""
	for len(out) < limit {
		ts, next, err := l.ListAll(ctx, f, cursor, limit-len(out), now)
		if err != nil {
			return nil, false, err
		}
		out = append(out, ts...)
		if next == "" {
			return out, false, nil
		}
		cursor = next
	}
	return out, true, nil
}

// CountByStatus counts ts by status.
func CountByStatus(ts []*driver.Task) map[driver.Status]int {
	m := map[driver.Status]int{}
	for _, t := range ts {
		m[t.Status]++
	}
	return m
}
