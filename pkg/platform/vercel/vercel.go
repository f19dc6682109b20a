// Package vercel is what the Vercel Go functions under api/ call: the MCP
// endpoint, the QStash-pushed worker and the cron sweeper, as plain
// net/http handlers over one bundle.
//
// Each api/<name>/index.go is a one-line Handler calling [MCP], [Worker] or
// [Cron], which serve the process's bundle (platform.Default, built from
// the environment on the first request and reused by every later request
// of the instance, concurrent ones included). [New] builds the same
// handlers over a given bundle, for tests and other hosts.
//
// A Vercel deployment runs with MCPTASKS_QUEUE=qstash: a task created by
// the MCP function is published to QStash, which POSTs it, signed, to the
// worker function; the worker verifies the signature against the raw body
// and advances the task by one step within the function's maxDuration
// minus a safety margin. Vercel Cron calls the sweeper with the
// CRON_SECRET bearer token.
package vercel

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/platform"
	"github.com/mcptasks/mcptasks/pkg/queue"
)

// MaxWorkerBody bounds the body of a worker delivery (a message is a task
// id in a few bytes of JSON).
const MaxWorkerBody = 64 << 10

// Functions are the handlers of a Vercel deployment over one bundle.
type Functions struct {
	b      *bundle.Bundle
	verify *queue.QStashVerifier
	log    *slog.Logger
}

// New returns the handlers serving b, logging through b's logger.
func New(b *bundle.Bundle) *Functions {
	return &Functions{b: b, verify: b.QStashVerifier(), log: b.Log()}
}

// MCP serves the MCP endpoint and the protected resource metadata. Vercel
// rewrites /mcp and /.well-known/oauth-protected-resource[/...] to
// /api/mcp and hands the function the original path; a direct call to
// /api/mcp is served as /mcp.
func (f *Functions) MCP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/api/mcp"); ok && (rest == "" || rest == "/") {
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/mcp", ""
		r = r2
	}
	f.b.Handler.ServeHTTP(w, r)
}

// Worker handles one QStash delivery: it verifies Upstash-Signature over
// the raw body (401 when it does not hold, and nothing else happens), then
// advances the task by one step. It answers 200 when the message is done
// with (QStash drops it) and 500 when the store failed (QStash retries).
func (f *Functions) Worker(w http.ResponseWriter, r *http.Request) {
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
	if err := f.verify.Verify(r.Header.Get("Upstash-Signature"), body); err != nil {
		f.log.Warn("rejected a worker call without a valid QStash signature", "err", err)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid or missing Upstash-Signature"})
		return
	}
	id, err := queue.DecodeMessage(body)
	if err != nil {
		// Signed by QStash but not ours: a retry cannot fix it.
		f.log.Error("dropping an undecodable QStash message", "err", err)
		writeJSON(w, http.StatusOK, map[string]string{"dropped": err.Error()})
		return
	}
	// The step budget (MaxDuration minus the safety margin) is enforced by
	// Advance; this deadline is the function's own limit, which Vercel
	// enforces anyway, so that the final writes never outlive it.
	ctx, cancel := context.WithTimeout(r.Context(), f.b.Config.MaxDuration)
	defer cancel()
	res, err := f.b.Tasks.Advance(ctx, id)
	if err != nil {
		f.log.Warn("advancing task failed; QStash will redeliver", "task", id, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "advancing the task failed"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"taskId": id, "status": res.Status, "steps": res.Steps, "skipped": res.Reason})
}

// Cron runs one sweep. Vercel Cron calls it with "Authorization: Bearer
// <CRON_SECRET>"; without CRON_SECRET configured it refuses every call
// (fail closed: the sweeper is not a public endpoint).
func (f *Functions) Cron(w http.ResponseWriter, r *http.Request) {
	secret := f.b.Config.CronSecret
	if secret == "" {
		f.log.Error("the sweeper endpoint needs CRON_SECRET; refusing the call")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "CRON_SECRET is not configured"})
		return
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	res, err := f.b.Sweep(r.Context())
	if err != nil {
		f.log.Error("sweep failed", "err", err)
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

// functions returns the process's handlers, or answers 500 when the bundle
// cannot be built (the error is logged by platform.Default).
func functions(w http.ResponseWriter) (*Functions, bool) {
	b, err := platform.Default()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server misconfigured or store unreachable"})
		return nil, false
	}
	return New(b), true
}

// MCP serves the MCP endpoint of the process's bundle (api/mcp).
func MCP(w http.ResponseWriter, r *http.Request) {
	if f, ok := functions(w); ok {
		f.MCP(w, r)
	}
}

// Worker handles a QStash delivery with the process's bundle (api/worker).
func Worker(w http.ResponseWriter, r *http.Request) {
	if f, ok := functions(w); ok {
		f.Worker(w, r)
	}
}

// Cron runs the sweeper of the process's bundle (api/cron).
func Cron(w http.ResponseWriter, r *http.Request) {
	if f, ok := functions(w); ok {
		f.Cron(w, r)
	}
}
