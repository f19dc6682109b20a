// Package dashboard serves the operator's web page of a deployment's
// tasks (mcptasks dashboard, and mcptasks serve --dashboard on the
// embedded store): the tasks of every principal, newest first, filtered by
// status, tool, principal and creation time, with counts by status; a
// task's page with its record and the timeline mcptasks inspect builds,
// drawn on a time axis; live updates as tasks move (the store's pub/sub,
// driver.Watcher, the channel the listen stream uses); and the operator
// actions that exist on the wire: cancel, and answer an input request
// through a form built from its schema.
//
// It reads the store directly, like inspect, and acts through the tasks
// server's own operations (tasks.Server.CancelTask, UpdateTask) on behalf
// of the task's owner: an answer is checked against its request's schema
// like every answer, and refused with the same message. Every action is
// audit-logged (tasks.AuditMessage, event operator_cancel or
// operator_answer, with the owner, the task, the operator "dashboard" and
// the remote address) before the server's own records of it.
//
// It is an operator's tool: it shows every principal's tasks, arguments,
// answers and results, and acts on any of them. [Listen] binds a loopback
// address unless a token is configured; with a token, every request must
// carry it (Authorization: Bearer, or the cookie a first ?token= visit
// sets), compared in constant time. Without one, requests must name a
// loopback host (a page of another site that resolves its name to
// 127.0.0.1 gets nothing), and every action must come from the
// dashboard's own pages (Origin and Sec-Fetch-Site are checked).
//
// The pages are rendered on the server (html/template) with a small
// script and style sheet embedded in the binary: no CDN, no build step.
package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/inspect"
)

// DefaultAddr is where the dashboard listens unless told otherwise.
const DefaultAddr = "127.0.0.1:8090"

// Environment variables of the dashboard (mcptasks dashboard, and serve
// --dashboard).
const (
	EnvToken = "MCPTASKS_DASHBOARD_TOKEN"
	EnvAddr  = "MCPTASKS_DASHBOARD_ADDR"
)

// Store is what the dashboard reads: a store that lists every task
// (inspect.Lister) and shows a task's whole record (inspect.Store), as
// both stores of this module (redisstore, pgstore) do. A store that is
// also a driver.Watcher updates the pages as tasks move (Redis pub/sub,
// PostgreSQL LISTEN/NOTIFY); another is polled.
type Store interface {
	inspect.Lister
	inspect.Store
	Peek(ctx context.Context, id string) (*driver.Task, error)
}

// Options configures a [Handler]. The zero value is a sane default.
type Options struct {
	// Token, when set, is required on every request (see the package doc).
	Token string
	// Logger receives the audit records and errors (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Poll is how often the live updates look for new tasks (and, on a
	// store that is not a driver.Watcher, for changes); zero means 1s.
	Poll time.Duration
	// StreamFor bounds one live-update stream; the page reconnects. Zero
	// means 5 minutes.
	StreamFor time.Duration
}

// Handler is the dashboard's http.Handler.
type Handler struct {
	srv       *tasks.Server
	store     Store
	watch     driver.Watcher // nil: polled
	token     [32]byte       // SHA-256 of Options.Token
	secure    bool           // a token is configured
	log       *slog.Logger
	now       func() time.Time
	poll      time.Duration
	streamFor time.Duration
	tmpl      *template.Template
	mux       *http.ServeMux
}

//go:embed templates.html
var templatesHTML string

//go:embed static
var static embed.FS

// New returns the dashboard of srv's store, acting through srv. The store
// must implement [Store].
func New(srv *tasks.Server, opts *Options) (*Handler, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	st, ok := srv.Store().(Store)
	if !ok {
		return nil, fmt.Errorf("dashboard: the store (%T) cannot list every task and show its record", srv.Store())
	}
	h := &Handler{srv: srv, store: st, log: o.Logger, now: o.Now, poll: o.Poll, streamFor: o.StreamFor}
	h.watch, _ = srv.Store().(driver.Watcher)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.poll <= 0 {
		h.poll = time.Second
	}
	if h.streamFor <= 0 {
		h.streamFor = 5 * time.Minute
	}
	if o.Token != "" {
		h.token, h.secure = sha256.Sum256([]byte(o.Token)), true
	}
	var err error
	h.tmpl, err = template.New("").Funcs(template.FuncMap{
		"has": func(list []string, v string) bool { return slices.Contains(list, v) },
		"pct": func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) },
	}).Parse(templatesHTML)
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	files, _ := fs.Sub(static, "static")
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET /{$}", h.list)
	h.mux.HandleFunc("GET /tasks/{id}", h.task)
	h.mux.HandleFunc("POST /tasks/{id}/cancel", h.cancel)
	h.mux.HandleFunc("POST /tasks/{id}/answer", h.answer)
	h.mux.HandleFunc("GET /events", h.events)
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(files)))
	return h, nil
}

// cookieName holds the token in the browser once a ?token= visit set it.
const cookieName = "mcptasks_dashboard"

// ServeHTTP implements http.Handler: the checks of the package doc, then
// the pages.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin") // no-referrer would make a form's Origin "null"
	hd.Set("Cache-Control", "no-store")
	if h.secure {
		if tok := r.URL.Query().Get("token"); tok != "" {
			if !h.tokenOK(tok) {
				http.Error(w, "wrong token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if !h.tokenOK(requestToken(r)) {
			hd.Set("WWW-Authenticate", `Bearer realm="mcptasks dashboard"`)
			http.Error(w, "this dashboard needs its token: open it with ?token=..., or send Authorization: Bearer", http.StatusUnauthorized)
			return
		}
	} else if !loopbackHost(r.Host) {
		http.Error(w, "this dashboard answers only requests to a loopback host (127.0.0.1, localhost, [::1]); configure a token to serve it elsewhere", http.StatusForbidden)
		return
	}
	if r.Method == http.MethodPost && !sameOrigin(r) {
		http.Error(w, "actions are taken from the dashboard's own pages only", http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// tokenOK compares tok with the token in constant time (of their hashes,
// so the length leaks nothing either).
func (h *Handler) tokenOK(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return tok != "" && subtle.ConstantTimeCompare(sum[:], h.token[:]) == 1
}

// requestToken is the token a request carries: a bearer token or the
// cookie.
func requestToken(r *http.Request) string {
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return c.Value
	}
	return ""
}

// sameOrigin reports whether a state-changing request comes from the
// dashboard's own pages: no cross-site fetch metadata, and an Origin (when
// the browser sends one) of the request's own host.
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// loopbackHost reports whether the Host header names a loopback address.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return isLoopback(strings.Trim(host, "[]"))
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrNotLoopback is Listen's refusal of an address that is not loopback
// without a token.
var ErrNotLoopback = errors.New("the dashboard shows every principal's tasks and acts on them: it listens on a loopback address (127.0.0.1, localhost, [::1]) unless a token is configured (" + EnvToken + ")")

// Listen listens on addr for the dashboard: a loopback address, or any
// address when token is set.
func Listen(addr, token string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard address %q: %w", addr, err)
	}
	if token == "" && !isLoopback(strings.Trim(host, "[]")) {
		return nil, fmt.Errorf("dashboard address %q: %w", addr, ErrNotLoopback)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends, then stops (the live-update streams
// end with it).
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
	}
	cancel()
	shut, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer stop()
	_ = srv.Shutdown(shut)
	return nil
}

// region is a part of a page that live updates replace when its content
// changed: Key is a hash of HTML.
type region struct {
	HTML template.HTML
	Key  string
}

// render executes the template name with data into a region.
func (h *Handler) region(name string, data any) (region, error) {
	var b bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return region{}, err
	}
	f := fnv.New64a()
	f.Write(b.Bytes())
	return region{HTML: template.HTML(b.String()), Key: strconv.FormatUint(f.Sum64(), 36)}, nil
}

// page writes the template name with data.
func (h *Handler) page(w http.ResponseWriter, status int, name string, data any) {
	var b bytes.Buffer
	if err := h.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		h.log.Error("dashboard: rendering", "page", name, "err", err)
		http.Error(w, "rendering failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail answers an error page.
func (h *Handler) fail(w http.ResponseWriter, status int, msg string) {
	h.page(w, status, "error", map[string]any{"Title": http.StatusText(status), "Message": msg})
}
