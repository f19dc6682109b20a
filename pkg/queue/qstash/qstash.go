// Package qstash is the [driver.Queue] on Upstash QStash, which pushes each
// message over HTTPS to the Vercel worker function, and the [Verifier] of
// the Upstash-Signature those deliveries carry. Only the Vercel entry points
// import it.
//
// [driver.Queue]: https://pkg.go.dev/github.com/mcptasks/mcptasks/pkg/tasks/driver#Queue
package qstash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcptasks/mcptasks/pkg/queue"
)

// DefaultURL is QStash's API base URL (QSTASH_URL overrides it, e.g.
// for a regional endpoint).
const DefaultURL = "https://qstash.upstash.io"

// DefaultMaxDelay is the longest delay of QStash's free plan (paid
// plans allow longer); longer waits are chained by the worker.
const DefaultMaxDelay = 7 * 24 * time.Hour

// Options configures a QStash queue.
type Options struct {
	// BaseURL is the QStash API (default DefaultURL).
	BaseURL string
	// Retries is QStash's delivery retry count (Upstash-Retries); 0 keeps
	// the plan's default.
	Retries int
	// Forward are headers QStash adds to its delivery (sent as
	// Upstash-Forward-<name>), e.g. x-vercel-protection-bypass.
	Forward map[string]string
	// MaxDelay is the longest delay QStash is asked for (default
	// DefaultMaxDelay).
	MaxDelay time.Duration
	// HTTPClient sends the publish requests (default: a client with a 10s
	// timeout).
	HTTPClient *http.Client
	// Attempts is how many times a publish that failed with a network
	// error, a 429 or a 5xx is tried (default 3). Every attempt carries the
	// same deduplication id, so a retry of a publish that did reach QStash
	// is dropped by QStash.
	Attempts int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Queue is a [driver.Queue] on Upstash QStash, which pushes each message to the
// worker function over HTTPS, signed (see [Verifier]), and retries
// it until the worker answers 2xx. It has no Defer method (see driver.Queue; a published
// message cannot be moved): a worker that renews its lease publishes a
// delayed message due at each renewed lease's end (each has a
// deduplication id of its own), and if it dies the last one hands the task
// to another worker when the lease runs out. A worker killed mid-request
// also fails QStash's delivery, which QStash retries after its backoff.
type Queue struct {
	token, destination string
	o                  Options
}

// New returns a QStash queue that publishes with token (QSTASH_TOKEN) to
// destination, the public URL QStash delivers messages to: the worker
// function, e.g. https://app.vercel.app/api/worker, which is also the
// "sub" of the signature the worker verifies. opts may be nil.
func New(token, destination string, opts *Options) (*Queue, error) {
	if token == "" {
		return nil, errors.New("queue: qstash: a token is required")
	}
	if !strings.HasPrefix(destination, "https://") && !strings.HasPrefix(destination, "http://") {
		return nil, fmt.Errorf("queue: qstash: destination %q must be an absolute http(s) URL", destination)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultURL
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Queue{token: token, destination: destination, o: o}, nil
}

// Enqueue implements driver.Queue: one publish to the destination, with
// Upstash-Not-Before set to notBefore rounded up to whole seconds when it
// is in the future, and Upstash-Deduplication-Id set to the task id and the
// due time in milliseconds (QStash keeps deduplication ids for 90 days, so
// the time is part of the id: every distinct wake-up is a distinct
// message).
func (q *Queue) Enqueue(ctx context.Context, taskID string, notBefore time.Time) error {
	if err := queue.CheckTaskID(taskID); err != nil {
		return err
	}
	now := q.o.Now()
	due := notBefore
	if due.IsZero() || due.Before(now) {
		due = now
	}
	body := queue.EncodeMessage(taskID)
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+q.token)
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Upstash-Deduplication-Id", taskID+"."+strconv.FormatInt(due.UnixMilli(), 10))
	if due.After(now) {
		secs := due.Unix()
		if due.Nanosecond() > 0 {
			secs++ // never before notBefore
		}
		hdr.Set("Upstash-Not-Before", strconv.FormatInt(secs, 10))
	}
	if q.o.Retries > 0 {
		hdr.Set("Upstash-Retries", strconv.Itoa(q.o.Retries))
	}
	for k, v := range q.o.Forward {
		hdr.Set("Upstash-Forward-"+k, v)
	}
	if tp := queue.TraceParent(ctx); tp != "" {
		// Delivered to the worker as Traceparent (see queue.TraceParent).
		hdr.Set("Upstash-Forward-Traceparent", tp)
	}
	// QStash takes the destination verbatim after /v2/publish/.
	endpoint := q.o.BaseURL + "/v2/publish/" + q.destination
	var err error
	for attempt := 1; attempt <= q.o.Attempts; attempt++ {
		var retry bool
		retry, err = q.publish(ctx, endpoint, hdr, body)
		if err == nil || !retry || attempt == q.o.Attempts {
			break
		}
		t := time.NewTimer(time.Duration(attempt*attempt) * 100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("queue: qstash publish %s: %w (after %v)", taskID, ctx.Err(), err)
		case <-t.C:
		}
	}
	if err != nil {
		return fmt.Errorf("queue: qstash publish %s: %w", taskID, err)
	}
	return nil
}

// publish sends one publish request; retry reports whether a failure is
// worth another attempt.
func (q *Queue) publish(ctx context.Context, endpoint string, hdr http.Header, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header = hdr.Clone()
	resp, err := q.o.HTTPClient.Do(req)
	if err != nil {
		return ctx.Err() == nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	msg := strings.TrimSpace(string(raw))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
		fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
}

// MaxDelay implements driver.Queue.
func (q *Queue) MaxDelay() time.Duration { return q.o.MaxDelay }

// Verifier checks the Upstash-Signature header of a QStash delivery:
// an HS256 JWT signed with the current or the next signing key, issued by
// "Upstash", whose "sub" is the exact destination URL and whose "body"
// claim is the base64url SHA-256 of the raw request body.
type Verifier struct {
	// CurrentKey and NextKey are the signing keys
	// (QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY). At least one
	// is required; QStash signs with either during a key rotation.
	CurrentKey, NextKey string
	// URL is the destination URL the messages were published to; the
	// token's "sub" must equal it.
	URL string
	// Leeway is the clock skew tolerated on exp and nbf (default 5s).
	Leeway time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ErrSignature is wrapped by every verification failure.
var ErrSignature = errors.New("invalid QStash signature")

// claims are the claims of an Upstash-Signature token.
type claims struct {
	Body string `json:"body"`
	jwt.RegisteredClaims
}

// Verify checks signature (the Upstash-Signature header) against the raw
// body. It returns nil only for a delivery QStash made to URL with exactly
// this body, within the token's lifetime.
func (v *Verifier) Verify(signature string, body []byte) error {
	if signature == "" {
		return fmt.Errorf("%w: no Upstash-Signature header", ErrSignature)
	}
	if v.URL == "" {
		return fmt.Errorf("%w: no destination URL configured", ErrSignature)
	}
	keys := make([]string, 0, 2)
	for _, k := range []string{v.CurrentKey, v.NextKey} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no signing key configured", ErrSignature)
	}
	leeway := v.Leeway
	if leeway <= 0 {
		leeway = 5 * time.Second
	}
	now := v.Now
	if now == nil {
		now = time.Now
	}
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{"HS256"}),
		jwt.WithIssuer("Upstash"),
		jwt.WithSubject(v.URL),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
	)
	sum := sha256.Sum256(body)
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	var errs []error
	for _, k := range keys {
		var c claims
		_, err := p.ParseWithClaims(signature, &c, func(*jwt.Token) (any, error) { return []byte(k), nil })
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// QStash pads the claim ("=") in some versions: compare unpadded,
		// in either base64url or standard alphabet.
		got := strings.TrimRight(c.Body, "=")
		got = strings.NewReplacer("+", "-", "/", "_").Replace(got)
		if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return fmt.Errorf("%w: body hash does not match the request body", ErrSignature)
		}
		return nil
	}
	return fmt.Errorf("%w: %w", ErrSignature, errors.Join(errs...))
}
