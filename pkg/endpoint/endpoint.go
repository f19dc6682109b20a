// Package endpoint builds the one [http.Handler] that serves an MCP server
// over the stateless Streamable HTTP transport of protocol revision
// 2026-07-28.
//
// The same handler is served by every platform adapter: the local net/http
// shim in cmd/mcptasks, the Vercel functions under api/ and the Lambda entry
// points under cmd/lambda. It owns transport concerns only (routing, Origin
// validation, body limits, health); MCP semantics live in the go-sdk and in
// package tasks.
package endpoint

import (
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultPath is the path the MCP endpoint is served on.
const DefaultPath = "/mcp"

// DefaultMaxBodyBytes bounds a request body when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// Options configures [New]. The zero value is a sane default.
type Options struct {
	// Logger receives request-level warnings. Nil means slog.Default().
	Logger *slog.Logger
	// Path is where the MCP endpoint is mounted; empty means DefaultPath.
	Path string
	// AllowedOrigins lists browser origins (scheme://host[:port]) that may
	// call the endpoint in addition to same-host and loopback origins.
	AllowedOrigins []string
	// MaxBodyBytes bounds the request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// JSONResponse answers with application/json instead of an SSE stream.
	// SSE (the default) is required for progress notifications.
	JSONResponse bool
	// Wrap, when set, wraps the MCP handler (after Origin validation). The
	// tasks extension uses it to check routing headers of tasks/* requests.
	Wrap func(http.Handler) http.Handler
	// Extra mounts additional routes (for example OAuth protected resource
	// metadata) on the same mux.
	Extra map[string]http.Handler
}

// New returns the handler serving srv at opts.Path, plus GET /healthz.
func New(srv *mcp.Server, opts *Options) http.Handler {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Path == "" {
		o.Path = DefaultPath
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{
			Stateless:                    true,
			JSONResponse:                 o.JSONResponse,
			Logger:                       o.Logger,
			MaxRequestBodyBytes:          o.MaxBodyBytes,
			PropagateRequestCancellation: true,
		})
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	// The body limit holds for the wrapping layers too (the tasks layer
	// reads tasks/* bodies itself), not only for the go-sdk handler.
	h = limitBody(h, o.MaxBodyBytes)
	h = checkOrigin(h, o.AllowedOrigins, o.Logger)

	mux := http.NewServeMux()
	mux.Handle(o.Path, h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	for p, eh := range o.Extra {
		mux.Handle(p, eh)
	}
	return mux
}

func limitBody(next http.Handler, limit int64) http.Handler {
	if limit <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}

// checkOrigin rejects, with 403, requests whose Origin header names a site
// other than the server itself, a loopback address, or an allowed origin.
// This is the DNS-rebinding protection the MCP transport spec requires; the
// go-sdk handler adds its own Host check for loopback listeners.
func checkOrigin(next http.Handler, allowed []string, log *slog.Logger) http.Handler {
	allow := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		allow[strings.TrimRight(strings.ToLower(a), "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || originOK(origin, r.Host, allow) {
			next.ServeHTTP(w, r)
			return
		}
		log.Warn("rejected request from a foreign origin", "origin", origin, "host", r.Host)
		http.Error(w, "Forbidden: invalid Origin header", http.StatusForbidden)
	})
}

func originOK(origin, host string, allow map[string]bool) bool {
	o := strings.ToLower(origin)
	if allow[o] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	h := u.Hostname()
	if h == "localhost" {
		return isLoopbackHost(host)
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return isLoopbackHost(host)
	}
	return false
}

// isLoopbackHost reports whether a Host header names a loopback address, so
// that a loopback page may talk to a loopback server on another port.
func isLoopbackHost(host string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
