package client

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// ProtocolVersion is the MCP protocol revision the client speaks.
const ProtocolVersion = "2026-07-28"

// ExtensionID is the capability key of the tasks extension (SEP-2663). The
// client declares it on every request.
const ExtensionID = "io.modelcontextprotocol/tasks"

// Defaults of the options.
const (
	// DefaultPollFloor and DefaultPollCeiling bound the server's
	// pollIntervalMs (see [WithPollInterval]).
	DefaultPollFloor   = 100 * time.Millisecond
	DefaultPollCeiling = time.Minute
	// DefaultPollInterval is used when the server suggests none.
	DefaultPollInterval = time.Second
	// DefaultRequestTimeout is the deadline of each HTTP request.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultCancelWait bounds how long a cancelled call keeps polling for
	// the task's terminal status (see [CancelWait]).
	DefaultCancelWait = 30 * time.Second
)

// Client calls tools on one MCP endpoint. It holds no connection state (the
// protocol is stateless) and is safe for concurrent use.
type Client struct {
	url        string
	http       *http.Client
	token      func(context.Context) (string, error)
	header     http.Header
	log        *slog.Logger
	info       clientInfo
	pollFloor  time.Duration
	pollCeil   time.Duration
	reqTimeout time.Duration
	retry      RetryPolicy
	maxBody    int64
	nextID     atomic.Int64
	// noListen: poll, never listen (WithPolling, or the server refused a
	// task stream).
	noListen atomic.Bool

	// sleep waits for d or until ctx ends; tests replace it to record the
	// waits the client chooses.
	sleep func(ctx context.Context, d time.Duration) error
	// jitter returns a float in [0, 1); tests pin it.
	jitter func() float64
}

type clientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Option configures a [Client].
type Option func(*Client)

// New returns a client of the MCP endpoint at url (the full URL, such as
// http://127.0.0.1:8080/mcp).
func New(url string, opts ...Option) *Client {
	c := &Client{
		url:        url,
		http:       http.DefaultClient,
		header:     http.Header{},
		log:        slog.New(slog.DiscardHandler),
		info:       clientInfo{Name: "mcptasks-client", Version: "0.1.0"},
		pollFloor:  DefaultPollFloor,
		pollCeil:   DefaultPollCeiling,
		reqTimeout: DefaultRequestTimeout,
		retry:      RetryPolicy{}.withDefaults(),
		maxBody:    64 << 20,
		sleep:      sleepCtx,
		jitter:     randFloat,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithToken sends token as a bearer token (Authorization: Bearer token) on
// every request.
func WithToken(token string) Option {
	return WithTokenSource(func(context.Context) (string, error) { return token, nil })
}

// WithTokenSource calls src before every request for the bearer token to
// send, so that a token may be refreshed between the polls of a long task.
// An error from src fails that request (it is not retried).
func WithTokenSource(src func(ctx context.Context) (string, error)) Option {
	return func(c *Client) { c.token = src }
}

// WithHTTPClient sends the requests through hc (default
// http.DefaultClient). Deadlines come from the client's own options and the
// caller's context; hc's Timeout, if set, applies as well.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithHeader adds an HTTP header to every request. The protocol headers
// (Mcp-Protocol-Version, Mcp-Method, Mcp-Name, Content-Type, Accept) and
// Authorization from [WithToken] are always set by the client and take
// precedence.
func WithHeader(key, value string) Option {
	return func(c *Client) { c.header.Add(key, value) }
}

// WithLogger logs the client's requests, retries and task transitions to
// log (at Debug, and retries at Warn). The default discards them.
func WithLogger(log *slog.Logger) Option {
	return func(c *Client) {
		if log != nil {
			c.log = log
		}
	}
}

// WithPollInterval bounds the interval between two tasks/get of a task:
// the server's pollIntervalMs is used as given when it lies within
// [floor, ceiling], and clamped otherwise. A zero bound keeps its default
// ([DefaultPollFloor], [DefaultPollCeiling]).
func WithPollInterval(floor, ceiling time.Duration) Option {
	return func(c *Client) {
		if floor > 0 {
			c.pollFloor = floor
		}
		if ceiling > 0 {
			c.pollCeil = ceiling
		}
		if c.pollCeil < c.pollFloor {
			c.pollCeil = c.pollFloor
		}
	}
}

// WithRequestTimeout is the deadline of each HTTP request (default
// [DefaultRequestTimeout]). A tools/call of a synchronous tool runs within
// one request, so it must cover the longest one.
func WithRequestTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.reqTimeout = d
		}
	}
}

// WithRetry sets how transient failures are retried (see [RetryPolicy]).
func WithRetry(p RetryPolicy) Option {
	return func(c *Client) { c.retry = p.withDefaults() }
}

// WithClientInfo is the name and version the client reports in each
// request's _meta (default "mcptasks-client").
func WithClientInfo(name, version string) Option {
	return func(c *Client) { c.info = clientInfo{Name: name, Version: version} }
}

// RetryPolicy is the jittered exponential backoff applied to transient
// failures: network errors, a request's own deadline, HTTP 5xx, 408 and
// 429, and JSON-RPC -32603. What cannot heal is never retried: a URL that
// is not http:// or https:// ([BadURLError]), a TLS handshake with a
// plain HTTP server or an untrusted certificate, any other 4xx. The zero
// value means the defaults.
type RetryPolicy struct {
	// Attempts, when positive, bounds the attempts of one request (the
	// first one included), whatever GiveUpAfter allows: the error then says
	// "gave up after Attempts attempts".
	Attempts int
	// Initial is the first wait (default 250ms); each retry doubles it up
	// to Max (default 5s). Each wait is drawn at random from its upper half
	// (jitter), so that clients that failed together do not retry together.
	Initial, Max time.Duration
	// GiveUpAfter is how long consecutive failures are retried before the
	// last one is returned (default 2 minutes).
	GiveUpAfter time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Initial <= 0 {
		p.Initial = 250 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 5 * time.Second
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	if p.GiveUpAfter <= 0 {
		p.GiveUpAfter = 2 * time.Minute
	}
	return p
}

// backoff is the wait before retry number attempt (1-based): Initial·2^(n-1)
// capped at Max, drawn from its upper half.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.retry.Initial
	for i := 1; i < attempt && d < c.retry.Max; i++ {
		d *= 2
	}
	d = min(d, c.retry.Max)
	return d/2 + time.Duration(c.jitter()*float64(d/2))
}

// pollWait is the wait before the next tasks/get given the server's
// suggestion.
func (c *Client) pollWait(suggested time.Duration) time.Duration {
	if suggested <= 0 {
		suggested = DefaultPollInterval
	}
	return min(max(suggested, c.pollFloor), c.pollCeil)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
