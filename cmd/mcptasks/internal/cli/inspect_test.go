package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

var update = flag.Bool("update", false, "rewrite testdata/inspect.* and the inspect excerpt of docs/operations.md from this run")

// fakeClock is the engine's clock in the inspect fixture: every time the
// store records comes from it, so the timeline is the same on every run.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// nopQueue drops messages: the fixture calls Advance itself.
type nopQueue struct{}

func (nopQueue) Enqueue(context.Context, string, time.Time) error { return nil }
func (nopQueue) MaxDelay() time.Duration                          { return 0 }

// testStore returns a store on a real redis-server or PostgreSQL (kind:
// bundle.StoreRedis or bundle.StorePostgres), under a key prefix or in a
// schema of its own, and the environment that points the operator's
// commands at it.
func testStore(t *testing.T, kind string) (driver.Store, map[string]string) {
	t.Helper()
	switch kind {
	case bundle.StoreRedis:
		url := testredis.Start(t)
		opt, err := bundle.RedisOptions(url)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		prefix := "t-" + driver.NewID()[:8] + ":"
		return redisstore.New(rc, &redisstore.Options{Prefix: prefix}), map[string]string{EnvRedisURL: url, EnvKeyPrefix: prefix}
	case bundle.StorePostgres:
		url := testpg.Start(t)
		schema := testpg.Schema(t, url)
		ps := pgstore.New(testpg.Pool(t, url), &pgstore.Options{Schema: schema})
		t.Cleanup(ps.Close)
		return ps, map[string]string{EnvDatabaseURL: url, EnvPGSchema: schema}
	}
	t.Fatalf("no store %q", kind)
	return nil, nil
}

// inspectFixture runs a send_report task on a real redis-server or
// PostgreSQL (kind: bundle.StoreRedis or bundle.StorePostgres), with the
// engine on a fake clock, through every kind of history inspect shows (a
// step that fails and is retried, a sleep, an input round, a final step
// whose first worker is lost, completion), and returns the environment that points inspect at it, the
// task id, and what the output must be normalised by: the retry's time has
// ±20% jitter, which the fixture checks and then replaces by its nominal
// value.
func inspectFixture(t *testing.T, kind string) (vars map[string]string, id string, normalise func(string) string) {
	store, vars := testStore(t, kind)

	// The store expires tasks by its own clock: the fake one starts today
	// (at 09:30 UTC), and the output's dates are normalised to the
	// fixture's.
	t0 := time.Now().UTC().Truncate(24 * time.Hour).Add(9*time.Hour + 30*time.Minute)
	clk := &fakeClock{t: t0}
	const owner = "https://issuer.example|alice"
	srv := tasks.New(&mcp.Implementation{Name: "fixture", Version: "1"}, nil, store, nopQueue{},
		&tasks.Options{Now: clk.now, TTL: 24 * time.Hour, Principal: func(context.Context, *mcp.RequestExtra) string { return owner }})
	type args struct {
		To string `json:"to"`
	}
	type confirm struct {
		Send bool `json:"send"`
	}
	var failed atomic.Bool
	tasks.AddTool(srv, &mcp.Tool{Name: "send_report"}, tasks.Required,
		func(ctx context.Context, s *tasks.Step, in args) (*mcp.CallToolResult, error) {
			rows, err := tasks.Do(s, "fetch", func(context.Context) (int, error) {
				clk.add(40 * time.Millisecond)
				if failed.CompareAndSwap(false, true) {
					return 0, errors.New("upstream answered 503")
				}
				return 3, nil
			}, tasks.Backoff(time.Second, time.Second))
			if err != nil {
				return nil, err
			}
			if err := s.Sleep("cool-off", 5*time.Second); err != nil {
				return nil, err
			}
			ok, err := tasks.Elicit[confirm](s, "confirm", "Send the report to "+in.To+"?")
			if err != nil || !ok.Accepted() || !ok.Content.Send {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not sent"}}}, err
			}
			sent, err := tasks.Do(s, "send", func(context.Context) (string, error) {
				clk.add(15 * time.Millisecond)
				return "msg-42", nil
			})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("sent %d rows to %s as %s", rows, in.To, sent)}}}, nil
		})

	ctx := t.Context()
	// The tool's calls go over the wire, as a client's.
	ts := httptest.NewServer(tasks.NewHandler(srv, nil))
	t.Cleanup(ts.Close)
	c := mcptest.NewClient(strings.TrimPrefix(ts.URL, "http://"), true)
	var created mcptest.Task
	c.Call(t, "tools/call", map[string]any{"name": "send_report", "arguments": map[string]any{"to": "ada@example.com"}}).Decode(t, &created)
	id = created.TaskID
	advance := func(at time.Duration, want driver.Status) {
		t.Helper()
		clk.set(t0.Add(at))
		r, err := srv.Advance(ctx, id)
		if err != nil || r.Status != want || r.Skipped {
			t.Fatalf("Advance at +%s: %+v, %v; want %s", at, r, err, want)
		}
	}
	advance(100*time.Millisecond, driver.StatusWorking) // fetch fails, retry in ~1s
	tk, err := store.Peek(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	failedAt := t0.Add(140 * time.Millisecond)
	if d := tk.WakeAt.Sub(failedAt); d < 800*time.Millisecond || d > 1200*time.Millisecond {
		t.Fatalf("retry due %s after the failure, want 1s±20%%", d)
	}
	retryAt, nominal := tk.WakeAt, failedAt.Add(time.Second)
	advance(1500*time.Millisecond, driver.StatusWorking)       // fetch succeeds, sleep 5s
	advance(6600*time.Millisecond, driver.StatusInputRequired) // asks to confirm
	clk.set(t0.Add(9 * time.Second))
	c.Call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		"confirm": map[string]any{"action": "accept", "content": map[string]any{"send": true}}}}).Decode(t, &struct{}{})
	// A worker claims the task to send and dies (SIGKILL): it writes
	// nothing, and its lease runs out 10s later, when the task is delivered
	// again.
	if _, err := store.Claim(ctx, id, t0.Add(9100*time.Millisecond), tasks.DefaultLease); err != nil {
		t.Fatal(err)
	}
	advance(19200*time.Millisecond, driver.StatusCompleted) // send, done

	const fixedID = "Qm9vay1rZWVwaW5nIGlkIQ"
	normalise = func(s string) string {
		s = strings.ReplaceAll(s, id, fixedID)
		// The retry's time first, whole (JSON drops trailing zeros).
		s = strings.ReplaceAll(s, retryAt.Format(time.RFC3339Nano), nominal.Format(time.RFC3339Nano))
		s = strings.ReplaceAll(s, retryAt.Format(clockLayout), nominal.Format(clockLayout))
		for d, fixed := range map[time.Time]string{t0: "2026-07-28", t0.Add(24 * time.Hour): "2026-07-29"} {
			s = strings.ReplaceAll(s, d.Format(time.DateOnly), fixed)
		}
		return s
	}
	return vars, id, normalise
}

// inspectRun runs inspect with REDIS_URL and MCPTASKS_KEY_PREFIX set.
func inspectRun(ctx context.Context, url, prefix string, args ...string) *run {
	return inspectIn(ctx, map[string]string{EnvRedisURL: url, EnvKeyPrefix: prefix}, args...)
}

// inspectIn runs inspect in the environment vars.
func inspectIn(ctx context.Context, vars map[string]string, args ...string) *run {
	r := newRun("", nil)
	r.e.getenv = func(k string) string { return vars[k] }
	return r.exec(ctx, append([]string{"inspect"}, args...)...)
}

// golden compares got with testdata/name, or rewrites it under -update
// when write is set.
func golden(t *testing.T, name, got string, write bool) {
	t.Helper()
	path := "testdata/" + name
	if *update && write {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestInspect -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -run TestInspect -update rewrites it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// docs/operations.md shows the inspect excerpt between these markers, in a
// text block.
const (
	docInspectStart = "<!-- inspect excerpt: cmd/mcptasks/internal/cli/testdata/inspect.txt -->\n```text\n"
	docInspectEnd   = "```\n<!-- end of inspect excerpt -->"
)

// mcptasks inspect on a task that retried a failing step, slept, waited
// for input, lost a worker and completed: the timeline (text and JSON) is
// the golden one, and docs/operations.md shows the text verbatim. The same history
// on the Postgres store shows the same, byte for byte.
func TestInspect(t *testing.T) {
	t.Run("redis", func(t *testing.T) { testInspect(t, bundle.StoreRedis) })
	t.Run("postgres", func(t *testing.T) { testInspect(t, bundle.StorePostgres) })
}

func testInspect(t *testing.T, kind string) {
	vars, id, normalise := inspectFixture(t, kind)
	ctx := t.Context()

	r := inspectIn(ctx, vars, id)
	check(t, r, 0)
	text := normalise(r.out.String())
	golden(t, "inspect.txt", text, kind == bundle.StoreRedis)

	r = inspectIn(ctx, vars, "--json", id)
	check(t, r, 0)
	var in inspection
	if err := json.Unmarshal([]byte(r.out.String()), &in); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r.out)
	}
	var kinds []string
	for _, ev := range in.Timeline {
		kinds = append(kinds, ev.Event+" "+ev.Name)
	}
	want := "created |attempt_failed fetch|step fetch|sleep cool-off|input confirm|answered confirm|worker_lost send|step send|completed "
	if got := strings.Join(kinds, "|"); got != want {
		t.Errorf("timeline events\n got %s\nwant %s", got, want)
	}
	if in.Status != driver.StatusCompleted || in.Timeline[1].Error != "upstream answered 503" ||
		in.Timeline[2].Attempt != 2 || in.Timeline[2].DurationMs != 40 {
		t.Errorf("record: %+v", in)
	}
	golden(t, "inspect.json", normalise(r.out.String()), kind == bundle.StoreRedis)

	const doc = "../../../../docs/operations.md"
	page, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(page), docInspectStart)
	end := strings.Index(string(page), docInspectEnd)
	if start < 0 || end < start {
		t.Fatalf("docs/operations.md lacks the inspect excerpt markers %q ... %q", docInspectStart, docInspectEnd)
	}
	excerpt := string(page[start+len(docInspectStart) : end])
	if *update && kind == bundle.StoreRedis {
		fresh := string(page[:start+len(docInspectStart)]) + text + string(page[end:])
		if err := os.WriteFile(doc, []byte(fresh), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if excerpt != text {
		t.Errorf("docs/operations.md's inspect excerpt differs from this run (go test -run TestInspect -update rewrites it):\n%s", excerpt)
	}
}

// inspect's errors: an unknown task, a missing REDIS_URL, an unreachable
// Redis within --timeout, and the command line.
func TestInspectErrors(t *testing.T) {
	url := testredis.Start(t)
	ctx := t.Context()

	r := inspectRun(ctx, url, "inspect-none:", driver.NewID())
	check(t, r, 1)
	if r.err == nil || !strings.Contains(r.err.Error(), "no task") {
		t.Errorf("unknown task: %v", r.err)
	}
	r = inspectRun(ctx, url, "", "not-an-id")
	check(t, r, 1)

	r = inspectRun(ctx, "", "", driver.NewID())
	check(t, r, 1)
	if r.err == nil || !strings.Contains(r.err.Error(), "REDIS_URL") {
		t.Errorf("no REDIS_URL: %v", r.err)
	}

	// A port nothing listens on: refused at once, or the deadline.
	r = inspectRun(ctx, "redis://127.0.0.1:1", "", "--timeout", "500ms", driver.NewID())
	check(t, r, 1)
	if r.err == nil || !strings.Contains(r.err.Error(), "Redis") {
		t.Errorf("unreachable Redis: %v", r.err)
	}

	check(t, inspectRun(ctx, url, ""), 2)
	check(t, inspectRun(ctx, url, "", "a", "b"), 2)
	r = inspectRun(ctx, url, "", "--help")
	check(t, r, 0, "Usage: mcptasks inspect TASKID", "--json")
}

// A live task whose lease ran out shows that its worker was lost, and one
// under a live lease the worker holding it.
func TestInspectLease(t *testing.T) {
	now := time.Date(2026, 7, 28, 9, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		lease time.Time
		want  string
	}{
		{now.Add(5 * time.Second), "a worker holds it until 2026-07-28 09:30:05.000 UTC"},
		{now.Add(-5 * time.Second), "its worker was lost: its lease ran out at 2026-07-28 09:29:55.000 UTC"},
	} {
		rec := &inspect.Record{Task: &driver.Task{ID: "x", Status: driver.StatusWorking, CreatedAt: now.Add(-time.Minute),
			UpdatedAt: now.Add(-30 * time.Second), TTL: time.Hour, LeaseUntil: tc.lease}}
		var b strings.Builder
		newInspection(rec, now).render(&b)
		if !strings.Contains(b.String(), "now: working: "+tc.want) {
			t.Errorf("lease until %v: output lacks %q:\n%s", tc.lease, tc.want, b.String())
		}
	}
}

// inspect on the Postgres store: a schema that does not exist (yet), or a
// task that does not, is no task; MCPTASKS_STORE=postgres without
// DATABASE_URL names it; an unreachable database fails within --timeout.
func TestInspectPostgresErrors(t *testing.T) {
	url := testpg.Start(t)
	ctx := t.Context()
	r := inspectIn(ctx, map[string]string{EnvDatabaseURL: url, EnvPGSchema: testpg.Schema(t, url)}, driver.NewID())
	check(t, r, 1)
	if r.err == nil || !strings.Contains(r.err.Error(), "no task") || !strings.Contains(r.err.Error(), "MCPTASKS_PG_SCHEMA") {
		t.Errorf("a missing schema: %v", r.err)
	}
	r = inspectIn(ctx, map[string]string{EnvStore: "postgres", EnvRedisURL: "redis://127.0.0.1:1"}, driver.NewID())
	check(t, r, 1)
	if r.err == nil || !strings.Contains(r.err.Error(), "DATABASE_URL") {
		t.Errorf("MCPTASKS_STORE=postgres without DATABASE_URL: %v", r.err)
	}
	r = inspectIn(ctx, map[string]string{EnvDatabaseURL: "postgres://postgres@127.0.0.1:1/x?sslmode=disable"}, "--timeout", "500ms", driver.NewID())
	check(t, r, 1)
	if r.err == nil {
		t.Error("an unreachable database: no error")
	}
}

// inspect shows a task's callback and its parallel step: the callback's
// URL, what came, the step's branches as they finish (in the timeline)
// and those still running or retrying (after it), and what the task
// awaits.
func TestInspectWorld(t *testing.T) {
	url := testredis.Start(t)
	opt, err := bundle.RedisOptions(url)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	prefix := "inspect-" + driver.NewID()[:8] + ":"
	store := redisstore.New(rc, &redisstore.Options{Prefix: prefix})
	srv := tasks.New(&mcp.Implementation{Name: "fixture", Version: "1"}, nil, store, nopQueue{},
		&tasks.Options{Anonymous: true, PublicURL: "https://mcp.example.com"})
	type out struct {
		Output string `json:"output"`
	}
	tokens := make(chan string, 1)
	tasks.AddTool(srv, &mcp.Tool{Name: "world"}, tasks.Required,
		func(ctx context.Context, s *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			cb, err := tasks.Callback[out](s, "transcoded", tasks.Timeout(time.Hour))
			if err != nil {
				return nil, err
			}
			if _, err := tasks.Do(s, "submit", func(context.Context) (bool, error) { tokens <- cb.URL; return true, nil }); err != nil {
				return nil, err
			}
			if _, err := tasks.AwaitCallback(s, cb); err != nil {
				return nil, err
			}
			_, err = tasks.All(s, "index", []int{0, 1, 2}, func(ctx context.Context, i int) (int, error) {
				if i == 2 {
					return 0, errors.New("disk full")
				}
				return i * 10, nil
			}, tasks.Concurrency(2), tasks.Backoff(time.Hour, time.Hour))
			return nil, err
		})
	ctx := t.Context()
	ts := httptest.NewServer(tasks.NewHandler(srv, nil))
	t.Cleanup(ts.Close)
	c := mcptest.NewClient(strings.TrimPrefix(ts.URL, "http://"), true)
	var created mcptest.Task
	c.Call(t, "tools/call", map[string]any{"name": "world"}).Decode(t, &created)
	id := created.TaskID
	advance := func(qid string) {
		t.Helper()
		if _, err := srv.Advance(ctx, qid); err != nil {
			t.Fatal(err)
		}
	}
	advance(id) // the callback, submit, awaits
	u := <-tokens
	resp, err := ts.Client().Post(ts.URL+u[len("https://mcp.example.com"):], "application/json", strings.NewReader(`{"output":"s3://x"}`))
	if err != nil || resp.StatusCode != 202 {
		t.Fatalf("callback: %v %v", resp, err)
	}
	resp.Body.Close()
	advance(id)                        // the event, the fork
	advance(driver.BranchID(id, 1, 0)) // done
	advance(driver.BranchID(id, 1, 1)) // done: branch 2 starts
	advance(driver.BranchID(id, 1, 2)) // fails, retried in an hour
	rec, err := store.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	newInspection(rec, time.Now()).render(&b)
	got := b.String()
	for _, want := range []string{
		"callback transcoded", "URL open until",
		"event transcoded", `arrived: {"output":"s3://x"}`,
		"parallel index", "3 branches, 2 at once",
		"  branch index[0]", "done in", ": 0",
		"  branch index[1]", ": 10",
		"parallel step index: 2 of 3 branches finished, 3 started, 2 at once",
		"[2] retrying, attempt 1, retry at", "last error: disk full",
		"now: working: waits, with no worker, for the branches of its parallel step index",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, got)
		}
	}
}
