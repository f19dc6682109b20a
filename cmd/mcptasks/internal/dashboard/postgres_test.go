package dashboard

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// taskRows matches the rows of the list page.
var taskRows = regexp.MustCompile(`<tr data-task="([^"]+)" data-status="([^"]+)">`)

// The dashboard of a deployment on PostgreSQL (DATABASE_URL), over HTTP:
// the list newest first with its filters, a task's page, live updates
// announced by the store (LISTEN/NOTIFY, not a poll) as a task moves, and
// the operator's answer and cancel, acting on the Postgres store.
func TestDashboardOnPostgres(t *testing.T) {
	dbURL := testpg.Start(t)
	d := deploy(t, "", map[string]string{"DATABASE_URL": dbURL, "MCPTASKS_PG_SCHEMA": testpg.Schema(t, dbURL)})
	store := d.b.Tasks.Store()
	if _, ok := store.(driver.Watcher); !ok {
		t.Fatalf("the bundle's store on DATABASE_URL is %T, not a driver.Watcher", store)
	}
	quick := d.create(t, "iss|carol", "quick", `{}`)
	other := d.create(t, "iss|bob", "release", `{"version":"0.9"}`)
	id := d.create(t, "iss|alice", "release", `{"version":"1.0"}`)

	client := &http.Client{Timeout: 20 * time.Second}
	get := func(path string) string {
		t.Helper()
		resp, err := client.Get(d.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		return string(body)
	}
	rows := func(path string) []string {
		t.Helper()
		var ids []string
		for _, m := range taskRows.FindAllStringSubmatch(get(path), -1) {
			ids = append(ids, m[1]+" "+m[2])
		}
		return ids
	}
	waitStatus := func(id string, want driver.Status) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			tk, err := store.Peek(t.Context(), id)
			if err == nil && tk.Status == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %v (%v) after 20s, want %s", id, tk, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	waitStatus(quick, driver.StatusCompleted)
	got := rows("/")
	var order []string
	for _, r := range got {
		order = append(order, strings.Fields(r)[0])
	}
	if want := []string{id, other, quick}; !slices.Equal(order, want) {
		t.Errorf("list %v, want newest first %v", got, want)
	}
	if got := rows("/?owner=" + url.QueryEscape("iss|bob")); len(got) != 1 || !strings.HasPrefix(got[0], other+" ") {
		t.Errorf("list of iss|bob = %v, want only %s", got, other)
	}
	if got := rows("/?status=completed"); !slices.Equal(got, []string{quick + " completed"}) {
		t.Errorf("list of the completed = %v, want only %s", got, quick)
	}
	if got := rows("/?tool=quick&since=1h"); !slices.Equal(got, []string{quick + " completed"}) {
		t.Errorf("list of quick since 1h = %v, want only %s", got, quick)
	}
	if page := get("/tasks/" + quick); !strings.Contains(page, `data-event="step"`) || !strings.Contains(page, "done quickly") {
		t.Errorf("the completed task's page lacks its step or result:\n%s", page)
	}

	// Live updates for a page of two tasks: announced by the store, since
	// the dashboard polls only a store that is not a driver.Watcher.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/events?ids="+id+","+other, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- data
			}
		}
	}()
	waitEvent := func(want string) {
		t.Helper()
		for {
			select {
			case got, ok := <-events:
				if !ok {
					t.Fatalf("the event stream ended before a change of %s", want)
				}
				if got == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no change of %s announced", want)
			}
		}
	}
	waitStatus(id, driver.StatusInputRequired)

	// The operator answers from the task's page; the task completes.
	post := func(path string, form url.Values) {
		t.Helper()
		noRedirect := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.PostForm(d.url+path, form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %s, want a redirect to the task's page\n%s", path, resp.Status, body)
		}
	}
	post("/tasks/"+id+"/answer", url.Values{"key": {"approval"}, "action": {"accept"}, "f.approve": {"true"}, "f.note": {"pg"}, "f.copies": {"2"}})
	waitEvent(id)
	waitStatus(id, driver.StatusCompleted)
	if page := get("/tasks/" + id); !strings.Contains(page, "published 2 copies (pg)") || !strings.Contains(page, `data-event="answered"`) {
		t.Errorf("the answered task's page lacks its answer or result:\n%s", page)
	}
	post("/tasks/"+other+"/cancel", nil)
	waitStatus(other, driver.StatusCancelled)
	waitEvent(other)
	if got := rows("/?status=cancelled"); !slices.Equal(got, []string{other + " cancelled"}) {
		t.Errorf("list of the cancelled = %v, want only %s", got, other)
	}
}
