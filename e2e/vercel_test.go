package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cronfn "github.com/mcptasks/mcptasks/api/cron"
	mcpfn "github.com/mcptasks/mcptasks/api/mcp"
	workerfn "github.com/mcptasks/mcptasks/api/worker"
	"github.com/mcptasks/mcptasks/internal/testkit/fakeqstash"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue"
)

// TestVercelEntryPoints calls the three api/ Handlers themselves, the way
// Vercel's runtime does (one process per function, configured through the
// environment; here one process serves all three, routed as vercel.json
// routes them), with real request shapes: an MCP POST, a QStash delivery
// (genuine, then forged), and a Vercel Cron call.
//
// It sets process environment variables, so it does not run in parallel;
// the per-process bundle it builds stays in this test binary afterwards,
// unused.
func TestVercelEntryPoints(t *testing.T) {
	redisURL := testredis.Start(t)
	qs := fakeqstash.Start(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/mcp" || strings.HasPrefix(p, "/callbacks/") || strings.HasPrefix(p, "/.well-known/oauth-protected-resource"):
			mcpfn.Handler(w, r)
		case p == "/api/worker":
			workerfn.Handler(w, r)
		case p == "/api/cron":
			cronfn.Handler(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{
		"REDIS_URL":                  redisURL,
		"MCPTASKS_QUEUE":             "qstash",
		"QSTASH_URL":                 qs.URL,
		"QSTASH_TOKEN":               qs.Token,
		"QSTASH_CURRENT_SIGNING_KEY": qs.CurrentKey,
		"QSTASH_NEXT_SIGNING_KEY":    qs.NextKey,
		"MCPTASKS_QSTASH_WORKER_URL": srv.URL + "/api/worker",
		"CRON_SECRET":                "cron-secret-for-the-e2e-test",
		"MCPTASKS_APP":               "examples",
	} {
		t.Setenv(k, v)
	}

	c := newClient(strings.TrimPrefix(srv.URL, "http://"), true)
	var ct task
	c.Call(t, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 2}}).Decode(t, &ct)
	if ct.ResultType != "task" {
		t.Fatalf("tools/call = %+v, want a task", ct)
	}
	pub, ok := qs.WaitFor(5*time.Second, func(p fakeqstash.Publish) bool {
		id, err := queue.DecodeMessage(p.Body)
		return err == nil && id == ct.TaskID
	})
	if !ok {
		t.Fatal("the MCP function did not publish the task to QStash")
	}

	// A forged delivery (signed with a key QStash does not have) is refused
	// and changes nothing.
	before := c.Get(t, ct.TaskID)
	forged := qs.Deliver(t, pub)
	forged.Header.Set("Upstash-Signature", fakeqstash.Sign(t, "attacker-key", pub.Destination, pub.Body, time.Now()))
	if status := send(t, forged); status != http.StatusUnauthorized {
		t.Errorf("forged delivery: HTTP %d, want 401", status)
	}
	if after := c.Get(t, ct.TaskID); after.LastUpdatedAt != before.LastUpdatedAt || after.StatusMessage != before.StatusMessage {
		t.Errorf("a forged delivery changed the task: before %+v, after %+v", before, after)
	}

	// QStash's genuine deliveries run the task to the end.
	for i := 0; i < 5; i++ {
		pubs := qs.Published()
		last := pubs[len(pubs)-1]
		if status := send(t, qs.Deliver(t, last)); status != http.StatusOK {
			t.Fatalf("delivery %d: HTTP %d", i, status)
		}
		if tk := c.Get(t, ct.TaskID); tk.Status == "completed" {
			break
		}
	}
	if tk := c.Get(t, ct.TaskID); tk.Status != "completed" || !strings.Contains(string(tk.Result), "processed 2 parts") {
		t.Fatalf("task after the deliveries: %+v, want completed", tk)
	}

	// A callback, routed to the MCP function as vercel.json's rewrite of
	// /callbacks/ does, under the public URL the QStash worker URL gives.
	service, jobs := jobService(t)
	c.Call(t, "tools/call", map[string]any{"name": "transcode", "arguments": map[string]any{"video": "v.mov", "service": service}}).Decode(t, &ct)
	deliverLast := func() {
		t.Helper()
		var last fakeqstash.Publish
		for _, p := range qs.Published() {
			if id, err := queue.DecodeMessage(p.Body); err == nil && id == ct.TaskID && !p.Duplicate {
				last = p
			}
		}
		if status := send(t, qs.Deliver(t, last)); status != http.StatusOK {
			t.Fatalf("delivery: HTTP %d", status)
		}
	}
	deliverLast()
	job := nextJob(t, jobs)
	if !strings.HasPrefix(job.CallbackURL, srv.URL+"/callbacks/"+ct.TaskID+"/") {
		t.Fatalf("callback URL %s, want it under %s", job.CallbackURL, srv.URL)
	}
	if status, body := postJSON(t, job.CallbackURL, `{"output":"s3://out/v.mp4"}`, nil); status != http.StatusAccepted {
		t.Fatalf("callback: %d %s", status, body)
	}
	deliverLast() // the MCP function published the resumed task
	if tk := c.Get(t, ct.TaskID); tk.Status != "completed" || !strings.Contains(string(tk.Result), "s3://out/v.mp4") {
		t.Fatalf("transcode task after the callback: %+v", tk)
	}

	cron, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/cron", nil)
	if status := send(t, cron); status != http.StatusUnauthorized {
		t.Errorf("cron without the secret: HTTP %d, want 401", status)
	}
	cron.Header.Set("Authorization", "Bearer cron-secret-for-the-e2e-test")
	if status := send(t, cron); status != http.StatusOK {
		t.Errorf("cron: HTTP %d, want 200", status)
	}
}

func send(t *testing.T, r *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.URL, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
