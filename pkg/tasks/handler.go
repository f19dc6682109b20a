package tasks

import (
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
)

// Options configures [New] and [ForTasks]. The zero value is a sane
// default.
type HandlerOptions struct {
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
	// Authenticate, when set, verifies the caller and puts its identity in
	// the request context (as a go-sdk auth.TokenInfo, where
	// auth.TokenInfoFromContext finds it), or answers the request itself
	// (401). It runs after the Origin check and the body limit, before the
	// tasks layer and the go-sdk.
	Authenticate func(http.Handler) http.Handler
	// DisableLeanPath sends every request of a ForTasks endpoint through the
	// go-sdk, for this endpoint only (Options.DisableLeanPath does it
	// for every endpoint of a server).
	DisableLeanPath bool
	// Extra mounts additional routes (for example OAuth protected resource
	// metadata) on the same mux.
	Extra map[string]http.Handler
	// MaxRequests bounds the requests served at once by this process; 0
	// means DefaultMaxRequests, a negative value no bound. A request past
	// it is answered at once: HTTP 503 with Retry-After and a JSON-RPC
	// error. An admitted stream (below) gives its request slot back.
	MaxRequests int
	// MaxStreams bounds the long-lived requests open at once in this
	// process, apart from MaxRequests: task streams (subscriptions/listen)
	// and held 2025-11-25 tasks/result. MaxStreamsPerPrincipal bounds those
	// of one principal. 0 means DefaultMaxStreams and
	// DefaultMaxStreamsPerPrincipal, a negative value no bound. A stream
	// past either is answered at once with CodeTooManyStreams and a retry
	// hint (see limits.go).
	MaxStreams             int
	MaxStreamsPerPrincipal int
}

func (o *HandlerOptions) defaults() HandlerOptions {
	var c HandlerOptions
	if o != nil {
		c = *o
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return c
}

// sdkOptions are the options of the go-sdk handler. The lean path reads
// the ones that change the go-sdk's transport checks from here.
func (o *HandlerOptions) sdkOptions() *mcp.StreamableHTTPOptions {
	return &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		JSONResponse:                 o.JSONResponse,
		Logger:                       o.Logger,
		MaxRequestBodyBytes:          o.MaxBodyBytes,
		PropagateRequestCancellation: true,
	}
}

// newSDKHandler returns the handler serving the go-sdk server srv at
// opts.Path (NewHandler's composition without the tasks layer; unknown
// methods of older revisions answer -32601 too), plus GET /healthz.
func newSDKHandler(srv *mcp.Server, opts *HandlerOptions) http.Handler {
	o := opts.defaults()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, o.sdkOptions())
	return o.mount(unknownMethods(sdk), newLimits(&o))
}

// NewHandler returns the one [http.Handler] that serves the tasks server ts
// over the stateless Streamable HTTP transport of protocol revision
// 2026-07-28, at opts.Path, plus GET /healthz. Build it after registering
// tools and any receiving middleware: whether the lean path may run is
// decided here, once.
//
// The same handler is served by every platform adapter: the local net/http
// shim in cmd/mcptasks, the Vercel functions under api/ and the Lambda entry
// points under cmd/lambda. It owns transport concerns only; MCP semantics
// live in the go-sdk and in the Server.
//
// # Composition
//
// Every
// request first passes admission (limits.go): it takes one of
// HandlerOptions.MaxRequests slots, or is answered 503 at once. A request to the
// MCP path then passes these layers, in this order, each of which may
// answer it:
//
//  1. Origin: a browser Origin other than the server itself, a loopback
//     page or HandlerOptions.AllowedOrigins is refused (403), as the transport
//     spec requires against DNS rebinding.
//  2. Body limit: the body is cut at HandlerOptions.MaxBodyBytes (413), for every
//     layer below.
//  3. Authentication (HandlerOptions.Authenticate): verifies the caller and puts
//     its identity in the context, where both paths below take the
//     principal from.
//  4. The tasks layer, under an incoming W3C traceparent
//     header's context when the tasks server traces (its requests' spans
//     are then children of the caller's):
//     - the legacy layer (legacy.go) serves clients on revisions before
//     2026-07-28: the 2025-11-25 tasks utility from the same store, inline
//     task tools with elicitation, session ids carrying the client's
//     elicitation capability, and -32601 for unknown methods; requests on
//     2026-07-28 pass it untouched;
//     - task streams (listen.go): a subscriptions/listen that names
//     params.notifications.taskIds is answered here with an SSE stream of
//     notifications/tasks, when the task store announces its transitions
//     ([driver.Watcher]); every other listen goes on to the go-sdk. Task
//     streams and held 2025-11-25 tasks/result count in a pool of their
//     own (HandlerOptions.MaxStreams, MaxStreamsPerPrincipal), and end
//     within the platform's budget counted from the request's arrival;
//     - the lean path answers a well-formed tasks/get, tasks/update,
//     tasks/cancel or task-creating tools/call itself, parsing the body
//     once, with exactly the answer the go-sdk would give (it calls the
//     same operations as the go-sdk path). It mirrors
//     the go-sdk's transport checks, listed in lean.go, and is guarded:
//     it is off when the go-sdk in the build is not the audited version,
//     and wherever the server's configuration makes the go-sdk answer
//     differently (see Options.DisableLeanPath). Anything it does not
//     serve goes on, unchanged;
//     - the routing check: tasks/* requests must carry an Mcp-Name equal
//     to params.taskId (-32020), which the go-sdk checks only for its own
//     methods;
//  5. The go-sdk's streamable HTTP handler (stateless), whose receiving
//     middleware answers task tools and tasks/*.
//
// GET /healthz answers "ok", CallbackPath serves the callback URLs of a
// tasks server (see Callback), and HandlerOptions.Extra mounts further
// routes.
func NewHandler(ts *Server, opts *HandlerOptions) http.Handler {
	o := opts.defaults()
	so := o.sdkOptions()
	var h http.Handler = checkRouting(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ts.MCP() }, so))
	switch {
	case o.DisableLeanPath:
	case sdkDrift() != "":
		o.Logger.Warn("lean tasks path off: every request goes through the go-sdk", "reason", sdkDrift())
	case ts.leanPathDisabled() != "":
		o.Logger.Info("lean tasks path off: every request goes through the go-sdk", "reason", ts.leanPathDisabled())
	default:
		h = &leanPath{ts: ts, next: h, localhostProtection: !so.DisableLocalhostProtection}
	}
	lim := newLimits(&o)
	if _, ok := ts.Store().(driver.Watcher); ok {
		h = &listenPath{ts: ts, next: h, localhostProtection: !so.DisableLocalhostProtection, lim: lim}
	}
	h = &legacy{ts: ts, next: h, lim: lim}
	if ts.tracing() {
		h = traceContext(h)
	}
	// Callback URLs (Callback), outside authentication and the Origin
	// check: the URL is the capability.
	extra := map[string]http.Handler{CallbackPath: ts.callbackHandler()}
	maps.Copy(extra, o.Extra)
	o.Extra = extra
	return o.mount(h, lim)
}

// traceContext puts the remote span context of an incoming W3C traceparent
// header (and tracestate) in the request's context, where the tasks
// server's request spans take their parent from. It is mounted only when
// the server traces.
func traceContext(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" {
			r = r.WithContext(propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		next.ServeHTTP(w, r)
	})
}

// mount puts the layers every request passes before h (admission,
// authentication, body limit, Origin) around it and serves it at o.Path.
func (o *HandlerOptions) mount(h http.Handler, lim *limits) http.Handler {
	if o.Authenticate != nil {
		h = o.Authenticate(h)
	}
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
	return lim.admit(mux)
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
