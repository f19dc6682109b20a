package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Meta keys of a 2026-07-28 request.
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities    = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
)

// HTTPError is an HTTP answer without a JSON-RPC response in it, such as a
// 502 from a proxy or a 401 from an authorization layer.
type HTTPError struct {
	// StatusCode is the HTTP status, such as 401 or 502.
	StatusCode int
	// Body is the start of the answer's body, for the message.
	Body string
	// Header is the answer's header (e.g. WWW-Authenticate on a 401).
	Header http.Header
}

// Error describes the answer: its status and the start of its body.
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if b := strings.TrimSpace(e.Body); b != "" {
		msg += ": " + b
	}
	return msg
}

// call is one JSON-RPC request.
type call struct {
	method string
	// name goes into the Mcp-Name header (tool name or task id); empty for
	// methods without one.
	name   string
	params map[string]any
	// header holds extra headers (Mcp-Param-*).
	header map[string]string
	// elicit declares the elicitation capability (the caller can answer
	// input requests).
	elicit bool
}

// rpcResponse is the part of a JSON-RPC response the client reads.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// attemptError is a failed attempt and whether retrying it is safe and
// useful.
type attemptError struct {
	err error
	// transient: the failure may go away by itself.
	transient bool
	// unsent: the server cannot have acted on the request.
	unsent bool
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// do sends cl and decodes its result into out, retrying transient failures
// by the client's RetryPolicy. With idempotent false, only failures where
// the server cannot have acted on the request are retried.
func (c *Client) do(ctx context.Context, cl call, idempotent bool, out any) error {
	var first time.Time
	for attempt := 1; ; attempt++ {
		raw, err := c.once(ctx, cl)
		if err == nil {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("%s: decoding the result: %w", cl.method, err)
			}
			return nil
		}
		var ae *attemptError
		if !errors.As(err, &ae) || ctx.Err() != nil {
			return err
		}
		if !ae.transient || (!idempotent && !ae.unsent) {
			return ae.err
		}
		if first.IsZero() {
			first = time.Now()
		}
		wait := c.backoff(attempt)
		if (c.retry.Attempts > 0 && attempt >= c.retry.Attempts) || time.Since(first)+wait > c.retry.GiveUpAfter {
			return fmt.Errorf("%w (gave up after %d attempts)", ae.err, attempt)
		}
		c.log.WarnContext(ctx, "mcp request failed; retrying", "method", cl.method, "name", cl.name,
			"attempt", attempt, "wait", wait, "err", ae.err)
		if err := c.sleep(ctx, wait); err != nil {
			return fmt.Errorf("%s: %w (while retrying after: %w)", cl.method, err, ae.err)
		}
	}
}

// once sends cl once, under the client's request deadline.
func (c *Client) once(ctx context.Context, cl call) (json.RawMessage, error) {
	if !validHeaderValue(cl.name) {
		return nil, fmt.Errorf("%s: %q cannot be sent in the Mcp-Name header", cl.method, cl.name)
	}
	id := c.nextID.Add(1)
	body, err := c.envelope(id, cl)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.reqTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cl.method, err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" || req.URL.Host == "" {
		return nil, fmt.Errorf("%s: %w", cl.method, &BadURLError{URL: c.url})
	}
	for k, v := range c.header {
		req.Header[k] = append([]string(nil), v...)
	}
	if c.token != nil {
		tok, err := c.token(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: getting the bearer token: %w", cl.method, err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range cl.header {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ProtocolVersion)
	req.Header.Set("Mcp-Method", cl.method)
	if cl.name != "" {
		req.Header.Set("Mcp-Name", cl.name)
	} else {
		req.Header.Del("Mcp-Name")
	}
	c.log.DebugContext(ctx, "mcp request", "method", cl.method, "name", cl.name, "id", id)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", cl.method, context.Cause(ctx))
		}
		// A request deadline of our own, a refused connection, a reset: the
		// next attempt may well succeed. Only a failure to connect proves
		// that the server never saw the request. A TLS handshake that
		// cannot succeed (a plain HTTP server, a certificate this client
		// does not trust) fails the same way every time.
		return nil, &attemptError{err: fmt.Errorf("%s: %w", cl.method, err), transient: !tlsMismatch(err), unsent: dialFailed(err)}
	}
	defer resp.Body.Close()
	msg, err := c.readResponse(resp, id)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", cl.method, context.Cause(ctx))
		}
		var he *HTTPError
		if errors.As(err, &he) {
			return nil, &attemptError{err: fmt.Errorf("%s: %w", cl.method, err),
				transient: retryableStatus(he.StatusCode), unsent: he.StatusCode == http.StatusServiceUnavailable || he.StatusCode == http.StatusTooManyRequests}
		}
		// A body cut short, or a stream that ended before the response.
		return nil, &attemptError{err: fmt.Errorf("%s: %w", cl.method, err), transient: true}
	}
	if msg.Error != nil {
		err := fmt.Errorf("%s: %w", cl.method, msg.Error)
		if msg.Error.Code == jsonrpc.CodeInternalError || retryableStatus(resp.StatusCode) {
			return nil, &attemptError{err: err, transient: true,
				unsent: resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests}
		}
		return nil, err
	}
	if msg.Result == nil {
		return nil, fmt.Errorf("%s: the response has neither result nor error", cl.method)
	}
	return msg.Result, nil
}

// envelope is the JSON-RPC body of cl with the request _meta.
func (c *Client) envelope(id int64, cl call) ([]byte, error) {
	caps := map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}
	if cl.elicit {
		caps["elicitation"] = map[string]any{"form": map[string]any{}}
	}
	params := make(map[string]any, len(cl.params)+1)
	for k, v := range cl.params {
		params[k] = v
	}
	params["_meta"] = map[string]any{
		metaProtocolVersion: ProtocolVersion,
		metaCapabilities:    caps,
		metaClientInfo:      c.info,
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": cl.method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the request: %w", cl.method, err)
	}
	return b, nil
}

// readResponse reads the JSON-RPC response with id from resp: a JSON body,
// or the event of a text/event-stream that carries it (other messages on the
// stream, such as notifications, are skipped).
func (c *Client) readResponse(resp *http.Response, id int64) (*rpcResponse, error) {
	body := io.LimitReader(resp.Body, c.maxBody)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if ct == "text/event-stream" && resp.StatusCode/100 == 2 {
		return readSSE(body, id)
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer (HTTP %d): %w", resp.StatusCode, err)
	}
	var msg rpcResponse
	if ct == "application/json" || (len(raw) > 0 && resp.StatusCode/100 != 2) {
		if json.Unmarshal(raw, &msg) == nil && (msg.Result != nil || msg.Error != nil) {
			if got := strings.TrimSpace(string(msg.ID)); got != fmt.Sprint(id) && got != "null" {
				return nil, fmt.Errorf("the answer is to request %s, not %d", got, id)
			}
			return &msg, nil
		}
	}
	if resp.StatusCode/100 != 2 || ct != "application/json" {
		return nil, &HTTPError{StatusCode: resp.StatusCode, Body: snippet(raw), Header: resp.Header}
	}
	return nil, fmt.Errorf("undecodable answer (HTTP %d): %q", resp.StatusCode, snippet(raw))
}

// readSSE reads server-sent events until the one whose data is the
// response to id.
func readSSE(r io.Reader, id int64) (*rpcResponse, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var data strings.Builder
	want := fmt.Sprint(id)
	dispatch := func() *rpcResponse {
		defer data.Reset()
		if data.Len() == 0 {
			return nil
		}
		var msg rpcResponse
		if json.Unmarshal([]byte(data.String()), &msg) != nil || msg.Method != "" {
			return nil // not a response (a notification or request), or not JSON
		}
		if strings.TrimSpace(string(msg.ID)) != want || (msg.Result == nil && msg.Error == nil) {
			return nil
		}
		return &msg
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if msg := dispatch(); msg != nil {
				return msg, nil
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		if field != "data" {
			continue // event, id, retry, comments
		}
		if data.Len() > 0 {
			data.WriteByte('\n')
		}
		data.WriteString(strings.TrimPrefix(value, " "))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the event stream: %w", err)
	}
	if msg := dispatch(); msg != nil {
		return msg, nil
	}
	return nil, errors.New("the event stream ended without the response")
}

func retryableStatus(code int) bool {
	return code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout
}

// BadURLError is the error of a request to a URL that is not an absolute
// http or https URL (such as one without a scheme, "127.0.0.1:8080/mcp").
type BadURLError struct {
	URL string
}

func (e *BadURLError) Error() string {
	return fmt.Sprintf("%q is not an http:// or https:// URL", e.URL)
}

// tlsMismatch reports whether err is a TLS handshake that no retry can
// complete: the server answered in plain HTTP, or its certificate does not
// verify.
func tlsMismatch(err error) bool {
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	return errors.Is(err, http.ErrSchemeMismatch) || errors.As(err, &cv) || errors.As(err, &rh)
}

// dialFailed reports whether err is a failure to connect, before any byte
// of the request was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func snippet(b []byte) string {
	const n = 512
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func randFloat() float64 { return rand.Float64() }
