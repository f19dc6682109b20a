package vercel_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/rueidis"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcptasks/mcptasks/internal/testkit/fakeqstash"
	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/spantest"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/auth"
	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/platform/vercel"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

const (
	issuer     = "https://issuer.example.com"
	cronSecret = "cron-secret-0123456789abcdef"
	hsSecret   = "0123456789abcdef0123456789abcdef-hs256"
)

// deployment is a Vercel deployment in a test: the three functions behind
// one HTTP server routed as vercel.json routes them, a real redis-server,
// and a local QStash.
type deployment struct {
	url    string // the deployment's origin
	qstash *fakeqstash.Server
	redis  rueidis.Client
	client *mcptest.Client // an authenticated MCP client declaring the tasks extension
}

func deploy(t *testing.T) *deployment {
	t.Helper()
	return deployApp(t, examples.App)
}

// deployApp is deploy serving app.
func deployApp(t *testing.T, app *tasks.App) *deployment {
	t.Helper()
	redisURL := testredis.Start(t)
	qs := fakeqstash.Start(t)
	var fns *vercel.Functions
	// Vercel's routing: rewrites keep the original path; /api/<name> is the
	// function's own path.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/mcp" || p == "/api/mcp" || strings.HasPrefix(p, auth.WellKnownPath):
			fns.MCP(w, r)
		case p == "/api/worker":
			fns.Worker(w, r)
		case p == "/api/cron":
			fns.Cron(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	vars := map[string]string{
		"REDIS_URL":                  redisURL,
		"MCPTASKS_QUEUE":             "qstash",
		"QSTASH_URL":                 qs.URL,
		"QSTASH_TOKEN":               qs.Token,
		"QSTASH_CURRENT_SIGNING_KEY": qs.CurrentKey,
		"QSTASH_NEXT_SIGNING_KEY":    qs.NextKey,
		"MCPTASKS_QSTASH_WORKER_URL": srv.URL + "/api/worker",
		"CRON_SECRET":                cronSecret,
		"MCPTASKS_AUTH_ISSUER":       issuer,
		"MCPTASKS_AUTH_AUDIENCE":     srv.URL + "/mcp",
		"MCPTASKS_AUTH_HS256_SECRET": hsSecret,
	}
	cfg, err := bundle.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	b, err := bundle.New(t.Context(), cfg, slog.New(slog.NewTextHandler(t.Output(), nil)), app, vercel.WithQStash(nil))
	if err != nil {
		t.Fatalf("bundle.New: %v", err)
	}
	t.Cleanup(b.Close)
	fns = vercel.FromBundle(b)

	opt, _ := rueidis.ParseURL(redisURL)
	opt.DisableCache = true
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("redis: %v", err)
	}
	t.Cleanup(rc.Close)

	tok, err := auth.MintDevToken([]byte(hsSecret), issuer, srv.URL+"/mcp", "alice", time.Hour, nil)
	if err != nil {
		t.Fatalf("minting a token: %v", err)
	}
	c := mcptest.NewClient(strings.TrimPrefix(srv.URL, "http://"), true)
	c.Header = http.Header{"Authorization": {"Bearer " + tok}}
	return &deployment{url: srv.URL, qstash: qs, redis: rc, client: c}
}

// snapshot is everything Redis holds about a task, to prove that a
// rejected call changed nothing.
func (d *deployment) snapshot(t *testing.T, id string) string {
	t.Helper()
	base := "mcptasks:{" + id + "}"
	rec, err := d.redis.Do(t.Context(), d.redis.B().Hgetall().Key(base).Build()).AsStrMap()
	if err != nil {
		t.Fatalf("HGETALL: %v", err)
	}
	j, err := d.redis.Do(t.Context(), d.redis.B().Lrange().Key(base+":j").Start(0).Stop(-1).Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("LRANGE: %v", err)
	}
	b, _ := json.Marshal(map[string]any{"task": rec, "journal": j})
	return string(b)
}

func (d *deployment) journalLen(t *testing.T, id string) int64 {
	t.Helper()
	rec, err := redisstore.New(d.redis, nil).Inspect(t.Context(), id)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return int64(len(rec.Journal))
}

// publishesFor returns QStash publishes carrying task id.
func (d *deployment) publishesFor(id string) []fakeqstash.Publish {
	var out []fakeqstash.Publish
	for _, p := range d.qstash.Published() {
		if got, err := queue.DecodeMessage(p.Body); err == nil && got == id {
			out = append(out, p)
		}
	}
	return out
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The whole Vercel flow: MCP POST creates a task and publishes it to
// QStash; QStash's signed delivery to the worker advances one step and
// publishes the next; forged, misaddressed or replayed-onto-another-body
// deliveries get 401 and change nothing; the cron sweeps with its secret.
func TestVercelFunctions(t *testing.T) {
	t.Parallel()
	d := deploy(t)

	var ct mcptest.Task
	d.client.Call(t, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 3}}).Decode(t, &ct)
	if ct.ResultType != "task" || ct.Status != "working" {
		t.Fatalf("tools/call = %+v, want a working task", ct)
	}
	id := ct.TaskID
	pubs := d.publishesFor(id)
	if len(pubs) != 1 {
		t.Fatalf("%d QStash publishes for the new task, want 1", len(pubs))
	}
	if pubs[0].Destination != d.url+"/api/worker" {
		t.Errorf("published to %q, want the worker URL", pubs[0].Destination)
	}

	t.Run("RejectedDeliveriesChangeNothing", func(t *testing.T) {
		p := pubs[0]
		before := d.snapshot(t, id)
		forged := func(mod func(r *http.Request)) *http.Request {
			r := d.qstash.Deliver(t, p)
			mod(r)
			return r
		}
		sum := func(body string) jwt.MapClaims {
			return jwt.MapClaims{"iss": "Upstash", "sub": d.url + "/api/worker", "exp": time.Now().Add(time.Minute).Unix(),
				"nbf": time.Now().Unix(), "iat": time.Now().Unix(), "body": hashOf(body)}
		}
		cases := []struct {
			name string
			req  *http.Request
		}{
			{"no signature", forged(func(r *http.Request) { r.Header.Del("Upstash-Signature") })},
			{"bad signature (unknown key)", forged(func(r *http.Request) {
				r.Header.Set("Upstash-Signature", fakeqstash.Sign(t, "not-a-qstash-key", p.Destination, p.Body, time.Now()))
			})},
			{"tampered token", forged(func(r *http.Request) {
				s := r.Header.Get("Upstash-Signature")
				r.Header.Set("Upstash-Signature", s[:len(s)-2]+flip(s[len(s)-2:]))
			})},
			{"wrong sub", forged(func(r *http.Request) {
				r.Header.Set("Upstash-Signature", fakeqstash.Sign(t, d.qstash.CurrentKey, "https://other.example.com/api/worker", p.Body, time.Now()))
			})},
			{"stale body hash", forged(func(r *http.Request) {
				// A genuine signature, replayed onto another body.
				other := string(queue.EncodeMessage("some-other-task-id-012345"))
				c := sum(other)
				r.Header.Set("Upstash-Signature", fakeqstash.SignClaims(t, d.qstash.CurrentKey, c))
			})},
			{"expired", forged(func(r *http.Request) {
				c := sum(string(p.Body))
				c["exp"] = time.Now().Add(-time.Hour).Unix()
				r.Header.Set("Upstash-Signature", fakeqstash.SignClaims(t, d.qstash.CurrentKey, c))
			})},
		}
		for _, c := range cases {
			if status, body := do(t, c.req); status != http.StatusUnauthorized {
				t.Errorf("%s: HTTP %d %s, want 401", c.name, status, body)
			}
		}
		if after := d.snapshot(t, id); after != before {
			t.Errorf("a rejected delivery changed the task:\nbefore %s\nafter  %s", before, after)
		}
		if n := len(d.publishesFor(id)); n != 1 {
			t.Errorf("%d publishes after rejected deliveries, want still 1", n)
		}
		get, _ := http.NewRequest(http.MethodGet, d.url+"/api/worker", nil)
		if status, _ := do(t, get); status != http.StatusMethodNotAllowed {
			t.Errorf("GET /api/worker: HTTP %d, want 405", status)
		}
	})

	t.Run("SignedDeliveryAdvancesOneStep", func(t *testing.T) {
		status, body := do(t, d.qstash.Deliver(t, pubs[0]))
		if status != http.StatusOK {
			t.Fatalf("worker: HTTP %d %s", status, body)
		}
		if n := d.journalLen(t, id); n != 1 {
			t.Fatalf("journal has %d entries, want 1", n)
		}
		next := d.publishesFor(id)
		if len(next) != 2 {
			t.Fatalf("%d publishes, want 2 (the next step)", len(next))
		}
		// The next step's delivery, signed with QStash's next key (during a
		// key rotation), is accepted as well.
		req := d.qstash.Deliver(t, next[1])
		req.Header.Set("Upstash-Signature", fakeqstash.Sign(t, d.qstash.NextKey, next[1].Destination, next[1].Body, time.Now()))
		if status, body := do(t, req); status != http.StatusOK {
			t.Fatalf("worker (next key): HTTP %d %s", status, body)
		}
		if n := d.journalLen(t, id); n != 2 {
			t.Errorf("journal has %d entries after the second delivery, want 2", n)
		}
		tk := d.client.Get(t, id)
		if tk.Status != "working" || !strings.Contains(tk.StatusMessage, "part 3 of 3") {
			t.Errorf("tasks/get = %+v, want working on part 3", tk)
		}
	})

	t.Run("MCPRoutes", func(t *testing.T) {
		// A direct call to the function path is the MCP endpoint too.
		c := &mcptest.Client{URL: d.url + "/api/mcp", Caps: d.client.Caps, Header: d.client.Header}
		if r := c.Call(t, "server/discover", nil); r.HTTP != 200 || r.Error != nil {
			t.Errorf("server/discover on /api/mcp: HTTP %d %+v", r.HTTP, r.Error)
		}
		// The protected resource metadata, through the rewrite.
		status, body := do(t, mustReq(t, http.MethodGet, d.url+auth.WellKnownPath+"/mcp", nil))
		if status != 200 || !strings.Contains(body, `"resource":"`+d.url+`/mcp"`) {
			t.Errorf("PRM: HTTP %d %s", status, body)
		}
		// Without a token: 401 with the challenge.
		resp, err := http.Post(d.url+"/mcp", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Errorf("unauthenticated MCP POST: HTTP %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	})

	t.Run("Cron", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer wrong", "Basic " + cronSecret, cronSecret} {
			r := mustReq(t, http.MethodGet, d.url+"/api/cron", nil)
			if auth != "" {
				r.Header.Set("Authorization", auth)
			}
			if status, _ := do(t, r); status != http.StatusUnauthorized {
				t.Errorf("cron with Authorization %q: HTTP %d, want 401", auth, status)
			}
		}
		r := mustReq(t, http.MethodGet, d.url+"/api/cron", nil)
		r.Header.Set("Authorization", "Bearer "+cronSecret)
		r.Header.Set("User-Agent", "vercel-cron/1.0")
		status, body := do(t, r)
		var res map[string]int
		if status != 200 || json.Unmarshal([]byte(body), &res) != nil {
			t.Fatalf("cron: HTTP %d %s", status, body)
		}
		if _, ok := res["Examined"]; !ok {
			t.Errorf("cron answered %s, want the sweep's counts", body)
		}
	})
}

// A deployment without CRON_SECRET refuses cron calls (fail closed).
func TestCronWithoutSecretRefuses(t *testing.T) {
	t.Parallel()
	redisURL := testredis.Start(t)
	vars := map[string]string{"REDIS_URL": redisURL}
	cfg, err := bundle.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.New(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), examples.App, vercel.WithQStash(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/api/cron", nil)
	r.Header.Set("Authorization", "Bearer ")
	vercel.FromBundle(b).Cron(rec, r)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("cron without CRON_SECRET: HTTP %d, want 503", rec.Code)
	}
}

func mustReq(t *testing.T, method, url string, body []byte) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// hashOf is the "body" claim QStash puts in a signature for body.
func hashOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return base64.URLEncoding.EncodeToString(sum[:])
}

// flip changes the last characters of a token's signature.
func flip(s string) string {
	if s == "AA" {
		return "BB"
	}
	return "AA"
}

// With telemetry, the MCP function's tools/call span is the root of the
// task's trace and its QStash publish forwards the enqueue's trace context
// (Upstash-Forward-Traceparent, delivered as Traceparent); the worker
// function's invocation joins that trace under the root and links to the
// enqueue.
func TestTraceAcrossFunctions(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	app := *examples.App
	app.Telemetry = func(context.Context) (*tasks.Telemetry, error) {
		return &tasks.Telemetry{TracerProvider: tp, ForceFlush: tp.ForceFlush}, nil
	}
	d := deployApp(t, &app)
	var ct mcptest.Task
	d.client.Call(t, "tools/call", map[string]any{"name": "batch_report", "arguments": map[string]any{"steps": 2}}).Decode(t, &ct)
	pubs := d.publishesFor(ct.TaskID)
	if len(pubs) != 1 || pubs[0].Header.Get("Upstash-Forward-Traceparent") == "" {
		t.Fatalf("publishes %+v, want one forwarding a traceparent", pubs)
	}
	req := d.qstash.Deliver(t, pubs[0])
	if status, body := do(t, req); status != http.StatusOK {
		t.Fatalf("worker: HTTP %d %s", status, body)
	}
	spantest.CarriedTrace(t, rec.Ended(), "batch_report")
}
