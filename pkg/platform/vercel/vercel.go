// Package vercel serves a [tasks.App] as Vercel Go functions: the MCP
// endpoint, the QStash-pushed worker and the cron sweeper, as plain
// net/http handlers.
//
// Each api/<name>/index.go of a deployment is one statement:
//
//	package handler
//
//	import (
//		"net/http"
//
//		"example.com/transcode/tools"
//		"github.com/mcptasks/mcptasks/pkg/platform/vercel"
//	)
//
//	func Handler(w http.ResponseWriter, r *http.Request) { vercel.For(tools.App).MCP(w, r) }
//
// (Worker and Cron for api/worker and api/cron). [For] returns the
// process's handlers, whose bundle is built from the environment on the
// first request and reused by every later request of the instance,
// concurrent ones included; a failed build is retried on the next request.
//
// A Vercel deployment runs with MCPTASKS_QUEUE=qstash: a task created by
// the MCP function is published to QStash, which POSTs it, signed, to the
// worker function; the worker verifies the signature against the raw body
// and advances the task by one step within the function's maxDuration
// minus a safety margin. Vercel Cron calls the sweeper with the
// CRON_SECRET bearer token. The functions link the QStash adapter and no
// AWS SDK.
package vercel

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/platform"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/qstash"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// MaxWorkerBody bounds the body of a worker delivery (a message is a task
// id in a few bytes of JSON).
const MaxWorkerBody = 64 << 10

// Functions are the handlers of a Vercel deployment over one bundle.
type Functions struct {
	bundle func() (*bundle.Bundle, error)
}

// process holds the handlers [For] returned, by app. It is package-level
// state because it must be: Vercel calls a plain function per request, and
// the bundle (Redis client, JWKS cache, queue client) must outlive it. It
// holds one entry per app a process serves (one, in practice), so it does
// not grow.
var process struct {
	mu sync.Mutex
	m  map[*tasks.App]*Functions
}

// For returns the handlers serving apps in this process, made on the first
// call and shared by every later one (calls are told apart by their first
// app). With several apps, MCPTASKS_APP selects one by name (the first when
// unset).
func For(apps ...*tasks.App) *Functions {
	var key *tasks.App
	if len(apps) > 0 {
		key = apps[0]
	}
	process.mu.Lock()
	defer process.mu.Unlock()
	if f := process.m[key]; f != nil {
		return f
	}
	if process.m == nil {
		process.m = map[*tasks.App]*Functions{}
	}
	f := New(apps)
	process.m[key] = f
	return f
}

// New returns handlers whose bundle is built from the environment
// (os.Getenv) on first use, for the app MCPTASKS_APP selects among apps.
// Most deployments call [For] instead, which keeps one per process.
func New(apps []*tasks.App, opts ...bundle.Option) *Functions {
	p := platform.NewProcess(apps, nil, nil, append([]bundle.Option{WithQStash(nil)}, opts...)...).ExpectQueue(bundle.QueueQStash)
	return &Functions{bundle: p.Bundle}
}

// FromBundle returns handlers serving an already built bundle (tests, other
// hosts).
func FromBundle(b *bundle.Bundle) *Functions {
	return &Functions{bundle: func() (*bundle.Bundle, error) { return b, nil }}
}

// WithQStash makes a bundle able to publish to Upstash QStash
// (MCPTASKS_QUEUE=qstash), through hc (nil: a client with a 10 s timeout).
func WithQStash(hc *http.Client) bundle.Option {
	return bundle.WithQueue(bundle.QueueQStash, func(_ context.Context, cfg bundle.Config) (driver.Queue, error) {
		qo := &qstash.Options{
			BaseURL:    cfg.QStash.URL,
			Retries:    cfg.QStash.Retries,
			HTTPClient: hc,
		}
		if cfg.QStash.BypassSecret != "" {
			qo.Forward = map[string]string{"x-vercel-protection-bypass": cfg.QStash.BypassSecret}
		}
		return qstash.New(cfg.QStash.Token, cfg.QStash.WorkerURL, qo)
	})
}

// get returns the bundle, or answers 500 when it cannot be built (the
// error is logged by the builder).
func (f *Functions) get(w http.ResponseWriter) (*bundle.Bundle, bool) {
	b, err := f.bundle()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server misconfigured or store unreachable"})
		return nil, false
	}
	return b, true
}

// MCP serves the MCP endpoint and the protected resource metadata. Vercel
// rewrites /mcp and /.well-known/oauth-protected-resource[/...] to
// /api/mcp and hands the function the original path; a direct call to
// /api/mcp is served as /mcp.
func (f *Functions) MCP(w http.ResponseWriter, r *http.Request) {
	b, ok := f.get(w)
	if !ok {
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, "/api/mcp"); ok && (rest == "" || rest == "/") {
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/mcp", ""
		r = r2
	}
	b.Handler.ServeHTTP(w, r)
	b.FlushTelemetry(r.Context()) // the function may be frozen once it returns
}

// Worker handles one QStash delivery: it verifies Upstash-Signature over
// the raw body (401 when it does not hold, and nothing else happens), then
// advances the task by one step. It answers 200 when the message is done
// with (QStash drops it) and 500 when the store failed (QStash retries).
func (f *Functions) Worker(w http.ResponseWriter, r *http.Request) {
	b, ok := f.get(w)
	if !ok {
		return
	}
	log := b.Log()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "POST only"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxWorkerBody+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "reading the body failed"})
		return
	}
	if len(body) > MaxWorkerBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "body too large"})
		return
	}
	if err := verifier(b.Config).Verify(r.Header.Get("Upstash-Signature"), body); err != nil {
		log.Warn("rejected a worker call without a valid QStash signature", "err", err)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid or missing Upstash-Signature"})
		return
	}
	id, err := queue.DecodeMessage(body)
	if err != nil {
		// Signed by QStash but not ours: a retry cannot fix it.
		log.Error("dropping an undecodable QStash message", "err", err)
		writeJSON(w, http.StatusOK, map[string]string{"dropped": err.Error()})
		return
	}
	// The step budget (MaxDuration minus the safety margin) is enforced by
	// Advance; this deadline is the function's own limit, which Vercel
	// enforces anyway, so that the final writes never outlive it.
	ctx, cancel := context.WithTimeout(r.Context(), b.Config.MaxDuration)
	defer cancel()
	defer b.FlushTelemetry(ctx)
	// QStash forwards the enqueuer's trace context (see queue.TraceParent).
	res, err := b.Tasks.Advance(queue.WithTraceParent(ctx, r.Header.Get("Traceparent")), id)
	if err != nil {
		log.Warn("advancing task failed; QStash will redeliver", "task", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "advancing the task failed"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"taskId": id, "status": res.Status, "steps": res.Steps, "skipped": res.Reason})
}

// Cron runs one sweep. Vercel Cron calls it with "Authorization: Bearer
// <CRON_SECRET>"; without CRON_SECRET configured it refuses every call
// (fail closed: the sweeper is not a public endpoint).
func (f *Functions) Cron(w http.ResponseWriter, r *http.Request) {
	b, ok := f.get(w)
	if !ok {
		return
	}
	log := b.Log()
	secret := b.Config.CronSecret
	if secret == "" {
		log.Error("the sweeper endpoint needs CRON_SECRET; refusing the call")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "CRON_SECRET is not configured"})
		return
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	res, err := b.Sweep(r.Context())
	b.FlushTelemetry(r.Context())
	if err != nil {
		log.Error("sweep failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "sweep failed"})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// verifier returns the verifier of QStash deliveries to the deployment's
// worker endpoint.
func verifier(cfg bundle.Config) *qstash.Verifier {
	return &qstash.Verifier{
		CurrentKey: cfg.QStash.CurrentSigningKey,
		NextKey:    cfg.QStash.NextSigningKey,
		URL:        cfg.QStash.WorkerURL,
	}
}
