package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/browsertest"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Approval is what the release tool asks for.
type Approval struct {
	Approve bool   `json:"approve" jsonschema:"approve the release"`
	Note    string `json:"note,omitempty" jsonschema:"a note for the log"`
	Copies  int    `json:"copies" jsonschema:"how many copies to publish"`
}

// testApp has the tools the dashboard's tests drive: release (a step, a
// sleep, an input round, a last step) and quick (one step).
var testApp = &tasks.App{Name: "dashboard-test", Register: func(s *tasks.Server) {
	type releaseArgs struct {
		Version string `json:"version"`
	}
	tasks.AddTool(s, &mcp.Tool{Name: "release", Description: "Builds, cools off, asks, publishes."}, tasks.Required,
		func(ctx context.Context, st *tasks.Step, in releaseArgs) (*mcp.CallToolResult, error) {
			built, err := tasks.Do(st, "build", func(ctx context.Context) (string, error) {
				time.Sleep(100 * time.Millisecond)
				return "built " + in.Version, nil
			})
			if err != nil {
				return nil, err
			}
			st.Status("cooling off")
			if err := st.Sleep("cool-off", 2*time.Second); err != nil {
				return nil, err
			}
			st.Status("waiting for approval")
			ans, err := tasks.Elicit[Approval](st, "approval", "Publish "+in.Version+"?")
			if err != nil {
				return nil, err
			}
			if !ans.Accepted() || !ans.Content.Approve {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not approved"}}}, nil
			}
			msg, err := tasks.Do(st, "publish", func(ctx context.Context) (string, error) {
				return fmt.Sprintf("%s: published %d copies (%s)", built, ans.Content.Copies, ans.Content.Note), nil
			})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
		})
	tasks.AddTool(s, &mcp.Tool{Name: "quick", Description: "One step."}, tasks.Required,
		func(ctx context.Context, st *tasks.Step, in struct{}) (*mcp.CallToolResult, error) {
			v, err := tasks.Do(st, "only", func(ctx context.Context) (string, error) { return "done quickly", nil })
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}, nil
		})
}}

// syncBuffer is a bytes.Buffer for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// deployment is testApp served as `mcptasks serve --dashboard` serves it:
// the bundle on the store env names (nil: the embedded Redis), its
// workers and sweeper, and the dashboard of its tasks server on a
// loopback port.
type deployment struct {
	b    *bundle.Bundle
	url  string // the dashboard's
	logs *syncBuffer
}

func deploy(t *testing.T, token string, env map[string]string) *deployment {
	t.Helper()
	cfg, err := bundle.FromEnv(func(k string) string {
		if k == "MCPTASKS_SWEEP_EVERY" {
			return "1s"
		}
		return env[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	b, err := bundle.New(ctx, cfg, log, testApp, bundle.WithEmbeddedRedis(func() (bundle.EmbeddedRedis, error) { return embedredis.Start(nil) }))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { b.RunWorkers(ctx, 2) })
	wg.Go(func() { b.RunSweeper(ctx, time.Second) })
	h, err := New(b.Tasks, &Options{Token: token, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", token)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = Serve(ctx, ln, h, log) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		b.Close()
		if t.Failed() {
			t.Logf("the deployment's log:\n%s", logs.String())
		}
	})
	return &deployment{b: b, url: "http://" + ln.Addr().String(), logs: logs}
}

// create starts a task of tool for owner and returns its id: created in
// the store as a tools/call of owner's creates it, and handed to the queue
// (the deployment's store enqueues it itself when it dispatches).
func (d *deployment) create(t *testing.T, owner, tool, args string) string {
	t.Helper()
	store, now := d.b.Tasks.Store(), time.Now()
	tk, err := store.Create(t.Context(), &driver.NewTask{ID: driver.NewID(), Owner: owner, Tool: tool, Args: json.RawMessage(args),
		TTL: time.Hour, PollInterval: time.Second, Now: now, Listed: true})
	if err != nil {
		t.Fatal(err)
	}
	if disp, ok := store.(driver.Dispatcher); !ok || !disp.Dispatches() {
		if err := d.b.Queue.Enqueue(t.Context(), tk.ID, now); err != nil {
			t.Fatal(err)
		}
	}
	return tk.ID
}

// The dashboard in a real headless Chromium: the list (newest first,
// counts by status, filters by principal and by status), a task's page
// updated live as the task moves through a step, a sleep and an input
// round, the input answered through the page's form (a value the schema
// refuses first, then a valid one), the task completed with its result,
// another task cancelled from its page; every action audit-logged. A
// screenshot of the finished task's page is kept as the test's artefact.
func TestDashboardInBrowser(t *testing.T) {
	browser := browsertest.Start(t)
	d := deploy(t, "", nil)
	quick := d.create(t, "iss|carol", "quick", `{}`)
	other := d.create(t, "iss|bob", "release", `{"version":"0.9"}`)
	id := d.create(t, "iss|alice", "release", `{"version":"1.0"}`)

	page := browser.NewPage(t)
	page.Navigate(d.url + "/")
	page.WaitFor(`document.querySelectorAll("tr[data-task]").length === 3`, 10*time.Second)
	order := page.String(`[...document.querySelectorAll("tr[data-task]")].map(r => r.dataset.task).join(",")`)
	if want := strings.Join([]string{id, other, quick}, ","); order != want {
		t.Errorf("list order %s, want newest first %s", order, want)
	}
	page.WaitFor(`document.querySelector('[data-count="completed"] b').textContent === "1"`, 10*time.Second)
	if n := page.String(`document.querySelector("[data-total]").textContent`); n != "3" {
		t.Errorf("total count %s, want 3", n)
	}
	// A new task shows up on the open list without a reload.
	page.Eval(`window.marker = "same page"`)
	late := d.create(t, "iss|carol", "quick", `{}`)
	page.WaitFor(fmt.Sprintf(`document.querySelector('tr[data-task=%q]') !== null`, late), 10*time.Second)
	page.WaitFor(`window.marker === "same page"`, time.Second)

	// Filter by principal through the form, then by status through a count.
	page.Eval(`document.getElementById("f-owner").value = "iss|bob"; document.getElementById("apply").click()`)
	page.WaitFor(`location.search.includes("owner=iss%7Cbob") && document.readyState === "complete"`, 10*time.Second)
	page.WaitFor(fmt.Sprintf(`[...document.querySelectorAll("tr[data-task]")].map(r => r.dataset.task).join() === %q`, other), 10*time.Second)
	page.Navigate(d.url + "/")
	page.Eval(`document.querySelector('[data-count="completed"]').click()`)
	page.WaitFor(`location.search.includes("status=completed") && document.readyState === "complete"`, 10*time.Second)
	page.WaitFor(`[...document.querySelectorAll("tr[data-task]")].every(r => r.dataset.status === "completed") && document.querySelectorAll("tr[data-task]").length === 2`, 10*time.Second)

	// The task's page, live: the step, the sleep, then the input round.
	page.Navigate(d.url + "/tasks/" + id)
	page.Eval(`window.marker = "task page"`)
	page.WaitFor(`document.querySelector('tr[data-event="sleep"]') !== null`, 10*time.Second)
	page.WaitFor(`document.querySelector('tr[data-event="step"]') !== null`, time.Second)
	page.WaitFor(`document.getElementById("status").dataset.status === "input_required"`, 15*time.Second)
	page.WaitFor(`document.querySelector('form[data-key="approval"]') !== null && document.querySelector('tr[data-event="input"]') !== null`, 5*time.Second)
	if page.String(`window.marker`) != "task page" {
		t.Error("the task's page was reloaded instead of updated in place")
	}
	// A value the form refuses: the task keeps waiting, the page says why.
	page.Eval(`document.getElementById("f-approve").checked = true;
		document.getElementById("f-note").value = "ship it";
		document.getElementById("f-copies").value = "1.5";
		document.querySelector('form[data-key="approval"] button[value="accept"]').click()`)
	page.WaitFor(`document.getElementById("error") !== null && document.readyState === "complete"`, 10*time.Second)
	if msg := page.String(`document.getElementById("error").textContent`); !strings.Contains(msg, "copies") {
		t.Errorf("refused answer: the page says %q, want the field named", msg)
	}
	if st := page.String(`document.getElementById("status").dataset.status`); st != "input_required" {
		t.Errorf("after a refused answer the task is %s, want still input_required", st)
	}
	page.Eval(`document.getElementById("f-approve").checked = true;
		document.getElementById("f-note").value = "ship it";
		document.getElementById("f-copies").value = "3";
		document.querySelector('form[data-key="approval"] button[value="accept"]').click()`)
	page.WaitFor(`document.getElementById("flash") !== null && document.getElementById("flash").textContent.includes("answered approval")`, 10*time.Second)
	page.Eval(`window.marker = "answered"`)
	page.WaitFor(`document.getElementById("status").dataset.status === "completed"`, 15*time.Second)
	page.WaitFor(`document.getElementById("result") !== null && document.getElementById("result").textContent.includes("published 3 copies (ship it)")`, 5*time.Second)
	for _, ev := range []string{"created", "step", "sleep", "input", "answered", "completed"} {
		page.WaitFor(fmt.Sprintf(`document.querySelector('tr[data-event=%q]') !== null`, ev), time.Second)
	}
	if page.String(`window.marker`) != "answered" {
		t.Error("the task's page was reloaded instead of updated in place")
	}
	shot := filepath.Join(t.ArtifactDir(), "dashboard-task.png")
	page.Screenshot(shot)
	t.Logf("screenshot of the completed task's page: %s", shot)

	// Cancel the other task from its page.
	page.Navigate(d.url + "/tasks/" + other)
	page.WaitFor(`document.getElementById("cancel") !== null`, 10*time.Second)
	page.Eval(`document.getElementById("cancel").click()`)
	page.WaitFor(`document.getElementById("flash") !== null && document.readyState === "complete"`, 10*time.Second)
	page.WaitFor(`document.getElementById("status").dataset.status === "cancelled"`, 15*time.Second)
	list := browser.NewPage(t)
	list.Navigate(d.url + "/?status=cancelled")
	list.WaitFor(fmt.Sprintf(`document.querySelector('tr[data-task=%q][data-status="cancelled"]') !== null`, other), 10*time.Second)
	list.Screenshot(filepath.Join(t.ArtifactDir(), "dashboard-list.png"))

	logs := d.logs.String()
	for _, want := range []string{
		`msg="task audit" event=operator_answer principal=iss|alice task=` + id + ` operator=dashboard`,
		`msg="task audit" event=operator_cancel principal=iss|bob task=` + other + ` operator=dashboard`,
		`msg="task audit" event=input_answered principal=iss|alice task=` + id,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("audit log lacks %q; it has:\n%s", want, logs)
		}
	}
}

// The dashboard binds a loopback address unless a token is configured;
// with one, every request must carry it (a ?token= visit sets a cookie);
// without one, a request naming another host is refused (DNS rebinding),
// and an action from another site is refused either way.
func TestDashboardAccess(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		if ln, err := Listen(addr, ""); !errors.Is(err, ErrNotLoopback) {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("Listen(%s) without a token = %v, want ErrNotLoopback", addr, err)
		}
	}
	ln, err := Listen("0.0.0.0:0", "s3cret")
	if err != nil {
		t.Fatalf("Listen(0.0.0.0:0) with a token: %v", err)
	}
	ln.Close()

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
	do := func(method, url string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, url, nil)
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	open := deploy(t, "", nil)
	id := open.create(t, "iss|alice", "release", `{"version":"2"}`)
	if r := do("GET", open.url+"/", nil); r.StatusCode != 200 {
		t.Errorf("GET / on loopback: %s", r.Status)
	}
	if r := do("GET", open.url+"/", map[string]string{"Host": "evil.example:80"}); r.StatusCode != http.StatusForbidden {
		t.Errorf("GET / for Host evil.example: %s, want 403", r.Status)
	}
	for _, hdr := range []map[string]string{{"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}} {
		if r := do("POST", open.url+"/tasks/"+id+"/cancel", hdr); r.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site POST cancel (%v): %s, want 403", hdr, r.Status)
		}
	}
	if tk, err := open.b.Tasks.Store().Peek(t.Context(), id); err != nil || tk.Status.Terminal() {
		t.Errorf("after refused cross-site cancels the task is %v (%v), want live", tk, err)
	}

	locked := deploy(t, "s3cret", nil)
	for _, hdr := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"Cookie": cookieName + "=s3cre"}} {
		if r := do("GET", locked.url+"/", hdr); r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET / with %v: %s, want 401", hdr, r.Status)
		}
	}
	if r := do("GET", locked.url+"/events?ids=x", nil); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /events without the token: %s, want 401", r.Status)
	}
	if r := do("GET", locked.url+"/", map[string]string{"Authorization": "Bearer s3cret", "Host": "dash.example"}); r.StatusCode != 200 {
		t.Errorf("GET / with the bearer token: %s, want 200", r.Status)
	}
	r := do("GET", locked.url+"/?token=s3cret&status=working", nil)
	var cookie *http.Cookie
	for _, c := range r.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/?status=working" || cookie == nil || !cookie.HttpOnly {
		t.Fatalf("GET /?token=: %s, Location %q, cookie %+v; want a redirect without the token that sets an HttpOnly cookie", r.Status, r.Header.Get("Location"), cookie)
	}
	if r := do("GET", locked.url+"/", map[string]string{"Cookie": cookieName + "=" + cookie.Value}); r.StatusCode != 200 {
		t.Errorf("GET / with the cookie: %s, want 200", r.Status)
	}
}
