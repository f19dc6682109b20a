package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// tasks lists every principal's tasks from the deployment's store, Redis
// or PostgreSQL, newest first, filtered by its flags, as a table with
// counts by status or as JSON; bad flags are usage errors, a missing store
// URL is said, and a Postgres schema not created yet holds no tasks.
func TestTasksCommand(t *testing.T) {
	for _, kind := range []string{bundle.StoreRedis, bundle.StorePostgres} {
		t.Run(kind, func(t *testing.T) { testTasksCommand(t, kind) })
	}
}

func testTasksCommand(t *testing.T, kind string) {
	store, vars := testStore(t, kind)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	var ids []string
	for i, c := range []struct{ owner, tool string }{{"iss|alice", "send_report"}, {"iss|bob", "transcode"}, {"iss|alice", "transcode"}} {
		id := driver.NewID()
		if _, err := store.Create(ctx, &driver.NewTask{ID: id, Owner: c.owner, Tool: c.tool, Args: json.RawMessage(`{}`),
			TTL: time.Hour, Now: now.Add(time.Duration(i-3) * time.Hour / 10)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, _, err := store.Cancel(ctx, "iss|bob", ids[1], now); err != nil {
		t.Fatal(err)
	}
	cmd := func(args ...string) *run {
		r := newRun("", nil)
		r.e.now = func() time.Time { return now }
		r.e.getenv = func(k string) string { return vars[k] }
		return r.exec(ctx, append([]string{"tasks"}, args...)...)
	}

	r := cmd()
	out := r.out.String()
	if r.code != 0 || !strings.Contains(out, "3 task(s): working 2, cancelled 1") {
		t.Fatalf("tasks: exit %d, output:\n%s%s", r.code, out, r.errb.String())
	}
	if a, b, c := strings.Index(out, ids[2]), strings.Index(out, ids[1]), strings.Index(out, ids[0]); a < 0 || b < a || c < b {
		t.Errorf("tasks not newest first:\n%s", out)
	}
	t.Logf("mcptasks tasks:\n%s", out)

	r = cmd("--owner", "iss|alice", "--tool", "transcode", "--json")
	var rows []taskRow
	if err := json.Unmarshal([]byte(r.out.String()), &rows); err != nil || r.code != 0 {
		t.Fatalf("tasks --json: exit %d, %v:\n%s", r.code, err, r.out.String())
	}
	if len(rows) != 1 || rows[0].TaskID != ids[2] || rows[0].Owner != "iss|alice" || rows[0].Status != driver.StatusWorking || rows[0].CreatedAt.IsZero() {
		t.Errorf("tasks --owner --tool --json = %+v, want only %s", rows, ids[2])
	}
	r = cmd("--status", "cancelled", "--json")
	if err := json.Unmarshal([]byte(r.out.String()), &rows); err != nil || len(rows) != 1 || rows[0].TaskID != ids[1] {
		t.Errorf("tasks --status cancelled = %s (%v), want only %s", r.out.String(), err, ids[1])
	}
	r = cmd("--since", "15m", "--limit", "1")
	if out := r.out.String(); !strings.Contains(out, ids[2]) || strings.Contains(out, ids[1]) || !strings.Contains(out, "older tasks may be left") {
		t.Errorf("tasks --since 15m --limit 1:\n%s", out)
	}
	// As the README shows it.
	r = cmd("--status", "input_required", "--since", "2h")
	if r.code != 0 || strings.TrimSpace(r.out.String()) != "no tasks" {
		t.Errorf("tasks --status input_required --since 2h: exit %d, output %q", r.code, r.out.String())
	}
	if r = cmd("--status", "done"); r.code != 2 || !strings.Contains(r.err.Error(), `"done" is not a task status`) {
		t.Errorf("tasks --status done: exit %d, %v", r.code, r.err)
	}
	if r = cmd("--since", "yesterday"); r.code != 2 || !strings.Contains(r.err.Error(), "duration before now") {
		t.Errorf("tasks --since yesterday: exit %d, %v", r.code, r.err)
	}
	r = newRun("", nil).exec(ctx, "tasks")
	if r.code != 1 || !strings.Contains(r.err.Error(), "set REDIS_URL to its Redis, or DATABASE_URL to its PostgreSQL") {
		t.Errorf("tasks without REDIS_URL or DATABASE_URL: exit %d, %v", r.code, r.err)
	}
	if kind == bundle.StorePostgres {
		vars[EnvPGSchema] = "nothing_here"
		if r = cmd(); r.code != 0 || strings.TrimSpace(r.out.String()) != "no tasks" {
			t.Errorf("tasks in a schema not created yet: exit %d, output %q, %v", r.code, r.out.String(), r.err)
		}
	}
}
