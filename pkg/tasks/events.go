package tasks

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Events: a task that waits on the world. A callback ([Callback],
// [AwaitCallback]) is a URL that a system outside the deployment POSTs to
// once; a signal ([AwaitSignal], [Server.Signal]) is a named event that
// the tool author's own Go code sends. Either way the task waits without
// any invocation (status working, [driver.Task.Awaiting] set), and the event's
// delivery resumes it through the queue. See the package documentation,
// "Waiting on the world".

// timedOut is the Err of a KindEvent entry whose wait timed out.
const timedOut = "timeout"

// tokenBytes is the size of a callback URL's token: 256 bits from
// crypto/rand, at least the 128 a capability needs.
const tokenBytes = 32

// newToken returns a fresh callback token (base64url).
func newToken() string {
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// validToken reports whether tok has the form of a token newToken issues.
func validToken(tok string) bool {
	if len(tok) != base64.RawURLEncoding.EncodedLen(tokenBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(tok)
	return err == nil
}

// proofOf is the proof of a token: what the store compares.
func proofOf(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// WebhookSecret makes a [Callback] verify every request by its Standard
// Webhooks signature (the webhook-id, webhook-timestamp and
// webhook-signature headers: an HMAC-SHA256 of "id.timestamp.body" under
// the secret, "v1," and base64), within five minutes of its timestamp.
// secret is the sender's signing secret as it gives it ("whsec_" and
// base64; a string that is not base64 is used as it is). A request
// without a valid signature is refused (401) and the callback stays open.
// It applies to Callback only.
func WebhookSecret(secret string) DoOption { return func(o *doOptions) { o.secret = secret } }

// CallbackURL is a callback made by [Callback]: the URL to hand to the
// system that will call back, and when its wait ends.
type CallbackURL[T any] struct {
	// Name is the callback's step name.
	Name string
	// URL takes one POST of a JSON body that fits T, until Until.
	URL string
	// Until is when the wait ends: the URL answers 404 from then on.
	Until time.Time
}

// Callback makes the callback name: a URL, single-use and unguessable,
// that takes one POST of a JSON body (application/json, at most
// Options.MaxResultBytes) fitting T's JSON schema, until the wait ends.
// Hand cb.URL to the system that will call back (inside a [Do] step, so
// that it is handed out once), then wait for it with [AwaitCallback].
// The URL works from the moment Callback returns: a request that arrives
// before the task waits is kept for it.
//
// [Timeout] sets how long the wait lasts (default: the task's whole life);
// [WebhookSecret] makes the URL verify a Standard Webhooks signature. No
// other option applies, and the tool's StepDefaults do not. The URL is
// formed from Options.PublicURL (MCPTASKS_PUBLIC_URL), which a worker needs:
// without it Callback returns [ErrNoPublicURL].
//
// The URL answers 202 when it took the body; 404 when it is unknown,
// used, expired or another task's (indistinguishably: a second POST after
// one was taken gets 404 and changes nothing); 400, 413 or 415 for a body
// that is not JSON fitting T, too large or of another content type (the
// callback stays open); 401 for a bad signature.
//
// A callback needs a task: inline (a client without the tasks extension)
// the call goes on as a task when the async-jobs fallback serves it, and
// is refused otherwise.
func Callback[T any](s *Step, name string, opts ...DoOption) (*CallbackURL[T], error) {
	o := waitOpts(opts)
	schema, err := payloadSchema[T]()
	if err != nil {
		return nil, fmt.Errorf("callback %q: %w", name, err)
	}
	tok, until, err := s.r.callback(name, o, schema)
	if err != nil {
		return nil, err
	}
	cb := &CallbackURL[T]{Name: name, Until: until}
	if base := s.r.publicURL(); base != "" {
		cb.URL = strings.TrimRight(base, "/") + CallbackPath + s.r.taskID + "/" + tok
	}
	return cb, nil
}

// AwaitCallback waits for the callback cb (made by [Callback] in the same
// task) and returns the body its URL took, decoded into T. The task waits
// without any invocation (status working) until the request arrives, and
// resumes through the queue within moments of it; when the wait ends
// first, AwaitCallback returns [ErrCallbackTimeout], and the handler goes
// on as it chooses. Like every step, its outcome is journaled: a replay
// returns the same.
func AwaitCallback[T any](s *Step, cb *CallbackURL[T]) (T, error) {
	var zero T
	if cb == nil {
		return zero, errors.New("tasks.AwaitCallback: nil callback")
	}
	raw, err := s.r.awaitCallback(cb.Name)
	if errors.Is(err, errWaitTimedOut) {
		return zero, fmt.Errorf("callback %q: %w", cb.Name, ErrCallbackTimeout)
	}
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, fmt.Errorf("callback %q: %w: %s", cb.Name, ErrInvalidPayload, jsonError(err))
	}
	return v, nil
}

// AwaitSignal waits for the signal name, which the tool author's own code
// sends with [Server.Signal] (from another tool, a cron, a queue
// consumer), and returns its payload decoded into T. The task waits
// without any invocation (status working) and resumes through the queue
// when the signal arrives. A signal sent before the task waits for it is
// kept for it (at most one per name), so a handler may start the work
// that will signal and await the signal afterwards without a race.
// [Timeout] sets how long the wait lasts (default: the task's whole life);
// when it ends first, AwaitSignal returns [ErrSignalTimeout]. A payload
// that does not fit T's JSON schema (a signal kept before the wait, which
// could not be checked when it was sent) is an error wrapping
// [ErrInvalidPayload]. Inline, AwaitSignal needs a task, as [Callback]
// does.
func AwaitSignal[T any](s *Step, name string, opts ...DoOption) (T, error) {
	var zero T
	o := waitOpts(opts)
	schema, err := payloadSchema[T]()
	if err != nil {
		return zero, fmt.Errorf("signal %q: %w", name, err)
	}
	raw, err := s.r.awaitSignal(name, o, schema)
	if errors.Is(err, errWaitTimedOut) {
		return zero, fmt.Errorf("signal %q: %w", name, ErrSignalTimeout)
	}
	if err != nil {
		return zero, err
	}
	checked, msg := checkPayload(schema, raw)
	if msg != "" {
		return zero, fmt.Errorf("signal %q: %w: %s", name, ErrInvalidPayload, msg)
	}
	var v T
	if err := json.Unmarshal(checked, &v); err != nil {
		return zero, fmt.Errorf("signal %q: %w: %s", name, ErrInvalidPayload, jsonError(err))
	}
	return v, nil
}

// Signal delivers the signal name with payload (encoded as JSON) to the
// task taskID, for its [AwaitSignal]: it resumes the task if it waits for
// it, and keeps it for the task otherwise. It is for the tool author's
// own code (another tool, a cron, a queue consumer): there is no principal
// check, the task id is the address. It returns an error wrapping
// ErrNotFound for a task that does not exist (or expired),
// [ErrEventClosed] when the task takes no more of that signal (one was
// delivered already, its wait timed out, or the task ended: a repeated
// delivery is thus harmless), [ErrInvalidPayload] for a payload that does
// not fit the type the task awaits (checked when the task waits already)
// or is larger than Options.MaxResultBytes, and [ErrEventsUnsupported] on a
// store that is not a [driver.EventStore]. Every call is bounded by
// Options.StoreTimeout.
func (s *Server) Signal(ctx context.Context, taskID, name string, payload any) error {
	es, ok := s.store.(driver.EventStore)
	if !ok {
		return ErrEventsUnsupported
	}
	if name == "" {
		return errors.New("tasks.Signal: empty signal name")
	}
	if !driver.ValidID(taskID) {
		return fmt.Errorf("signal %q to task %s: %w", name, taskID, driver.ErrNotFound)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("signal %q: %w: %v", name, ErrInvalidPayload, err)
	}
	if limit := s.opts.MaxResultBytes; limit > 0 && len(raw) > limit {
		return fmt.Errorf("signal %q: %w: %d bytes, over the %d byte limit", name, ErrInvalidPayload, len(raw), limit)
	}
	if depth(raw) > maxAnswerDepth {
		return fmt.Errorf("signal %q: %w: nested deeper than %d levels", name, ErrInvalidPayload, maxAnswerDepth)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	wait, err := await(ctx, s.storeDirect, func(ctx context.Context) (*driver.EventWait, error) {
		return es.Waiting(ctx, taskID, name, "", s.now())
	})
	if err != nil {
		return fmt.Errorf("signal %q to task %s: %w", name, taskID, err)
	}
	if wait != nil {
		if wait.Kind != driver.EventSignal {
			return fmt.Errorf("signal %q to task %s: %w", name, taskID, driver.ErrEventClosed)
		}
		checked, msg := checkPayload(wait.Schema, raw)
		if msg != "" {
			return fmt.Errorf("signal %q: %w: %s", name, ErrInvalidPayload, msg)
		}
		raw = checked
	}
	return s.deliver(ctx, es, taskID, &driver.Delivery{Name: name, Payload: raw}, "signal")
}

// deliver hands d to the store and enqueues the task when it resumed it.
func (s *Server) deliver(ctx context.Context, es driver.EventStore, id string, d *driver.Delivery, kind string) error {
	d.Now = s.now()
	resumed, err := await(ctx, s.storeDirect, func(ctx context.Context) (bool, error) { return es.Deliver(ctx, id, d) })
	s.forgetRead(id)
	if err != nil {
		if !errors.Is(err, driver.ErrNotFound) && !errors.Is(err, driver.ErrEventClosed) {
			s.storeFailed(ctx, "deliver")
		}
		return fmt.Errorf("%s %q to task %s: %w", kind, d.Name, id, err)
	}
	s.log.Info("event delivered", "task", id, "kind", kind, "event", d.Name, "resumed", resumed)
	if resumed && !s.dispatch {
		if err := s.enqueueNow(ctx, id); err != nil {
			s.log.Warn("enqueue after an event failed; the sweeper will recover the task", "task", id, "err", err)
		}
	}
	return nil
}

// waitOpts reads the options of a wait (Callback, AwaitSignal): the
// tool's step defaults do not apply.
func waitOpts(opts []DoOption) doOptions {
	var o doOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// payloadSchema is the JSON schema of T as an event's payload (nil for
// json.RawMessage and interfaces: any JSON value).
func payloadSchema[T any]() (json.RawMessage, error) {
	t := reflect.TypeFor[T]()
	if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface {
		return nil, nil
	}
	schema, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, fmt.Errorf("inferring the payload's schema: %w", err)
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("encoding the payload's schema: %w", err)
	}
	return b, nil
}

// checkPayload checks the JSON value raw against schema (nil: anything)
// and returns it as it is to be stored (an object with the schema's
// defaults applied), or what is wrong with it.
func checkPayload(schema, raw json.RawMessage) (json.RawMessage, string) {
	if depth(raw) > maxAnswerDepth {
		return nil, fmt.Sprintf("the payload is nested deeper than %d levels", maxAnswerDepth)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, "the payload is not JSON: " + jsonError(err)
	}
	if len(schema) == 0 {
		return raw, ""
	}
	var sc jsonschema.Schema
	if err := json.Unmarshal(schema, &sc); err != nil {
		return nil, "the payload's schema cannot be read"
	}
	resolved, err := sc.Resolve(nil)
	if err != nil {
		return nil, "the payload's schema cannot be resolved: " + err.Error()
	}
	if m, ok := v.(map[string]any); ok {
		if msg := validateResolved(&sc, resolved, &m, "payload"); msg != "" {
			return nil, msg
		}
		b, err := json.Marshal(m) // with the schema's defaults applied
		if err != nil {
			return nil, "the payload cannot be encoded"
		}
		return b, ""
	}
	if err := resolved.Validate(v); err != nil {
		return nil, "payload: " + strings.TrimPrefix(err.Error(), "validating root: ")
	}
	return raw, ""
}

// errWaitTimedOut is how the run reports a wait that timed out; the
// public functions wrap their own sentinel.
var errWaitTimedOut = errors.New("wait timed out")

// publicURL is the base of the run's callback URLs ("" outside a worker).
func (r *run) publicURL() string {
	if r.w == nil {
		return ""
	}
	return r.w.s.opts.PublicURL
}

// waitEnd is when a wait of timeout that starts now ends: at the latest
// the task's expiry, to the millisecond (as stores keep it).
func (r *run) waitEnd(timeout time.Duration) time.Time {
	end := r.claim.Task.ExpiresAt()
	if at := r.now().Add(timeout); timeout > 0 && at.Before(end) {
		end = at
	}
	return end.Truncate(time.Millisecond).UTC()
}

// eventStore returns the store's EventStore side, or an error saying the
// step cannot run on it.
func (r *run) eventStore(what, name string) error {
	if _, ok := r.w.s.store.(driver.EventStore); !ok {
		return fmt.Errorf("%s %q: %w", what, name, ErrEventsUnsupported)
	}
	return nil
}

// callback makes the callback name (see Callback) or replays it: its
// token and the end of its wait.
func (r *run) callback(name string, o doOptions, schema json.RawMessage) (string, time.Time, error) {
	if e, ok := r.replayed(name, driver.KindCallback); ok {
		return tokenIn(e), e.Until, nil
	}
	if err := r.enter("tasks.Callback", name); err != nil {
		return "", time.Time{}, err
	}
	defer r.leave()
	if e, ok := r.next(name, driver.KindCallback); ok {
		return tokenIn(*e), e.Until, nil
	}
	switch r.mode {
	case modePreflight:
		panic(suspend{kind: suspendNeedTask})
	case modeInline:
		return "", time.Time{}, r.needTask(fmt.Sprintf("its step %q waits for a callback", name))
	}
	if err := r.eventStore("callback", name); err != nil {
		return "", time.Time{}, err
	}
	if r.publicURL() == "" {
		return "", time.Time{}, fmt.Errorf("callback %q: %w", name, ErrNoPublicURL)
	}
	tok := newToken()
	until := r.waitEnd(o.timeout)
	v, _ := json.Marshal(map[string]string{"t": tok})
	r.appendEntry(driver.Entry{Name: name, Kind: driver.KindCallback, Value: v, Until: until})
	r.opens = append(r.opens, driver.EventWait{Name: name, Kind: driver.EventCallback, Proof: proofOf(tok), Secret: o.secret, Schema: schema, Until: until})
	// Written now: the URL takes its request from the moment the handler
	// has it, wherever the handler hands it out.
	r.w.commitKeep(r, &driver.Change{})
	return tok, until, nil
}

// tokenIn returns the token a KindCallback entry holds.
func tokenIn(e driver.Entry) string {
	var v struct {
		T string `json:"t"`
	}
	_ = json.Unmarshal(e.Value, &v)
	return v.T
}

// awaitCallback waits for the callback name, made earlier in the task.
func (r *run) awaitCallback(name string) (json.RawMessage, error) {
	if err := r.enter("tasks.AwaitCallback", name); err != nil {
		return nil, err
	}
	defer r.leave()
	var made *driver.Entry
	for i := range r.journal[:r.cursor] {
		if e := &r.journal[i]; e.Kind == driver.KindCallback && e.Name == name {
			made = e
		}
	}
	if made == nil {
		panic(nondeterminism{fmt.Sprintf("tasks.AwaitCallback(%q): the task made no callback of that name before (see tasks.Callback)", name)})
	}
	return r.awaitEvent(name, made.Until)
}

// awaitSignal opens the wait for the signal name (or replays it) and
// waits for it.
func (r *run) awaitSignal(name string, o doOptions, schema json.RawMessage) (json.RawMessage, error) {
	if err := r.enter("tasks.AwaitSignal", name); err != nil {
		return nil, err
	}
	defer r.leave()
	var until time.Time
	if e, ok := r.next(name, driver.KindAwait); ok {
		until = e.Until
	} else {
		switch r.mode {
		case modePreflight:
			panic(suspend{kind: suspendNeedTask})
		case modeInline:
			return nil, r.needTask(fmt.Sprintf("its step %q waits for a signal", name))
		}
		if err := r.eventStore("signal", name); err != nil {
			return nil, err
		}
		until = r.waitEnd(o.timeout)
		r.appendEntry(driver.Entry{Name: name, Kind: driver.KindAwait, Until: until})
		r.opens = append(r.opens, driver.EventWait{Name: name, Kind: driver.EventSignal, Schema: schema, Until: until})
	}
	return r.awaitEvent(name, until)
}

// awaitEvent returns the outcome of the wait for the event name, which
// ends at until: journaled, or decided now (the event is in what the
// claim read, or the wait ended before the claim), or the run parks until
// the event or until.
func (r *run) awaitEvent(name string, until time.Time) (json.RawMessage, error) {
	if e, ok := r.event(name, driver.KindEvent); ok {
		return eventOutcome(e)
	}
	if r.replaying() {
		r.mismatch(&r.journal[r.cursor], name, driver.KindEvent)
	}
	for i := range r.journal {
		if e := &r.journal[i]; e.Kind == driver.KindEvent && e.Name == name {
			panic(nondeterminism{fmt.Sprintf("the event %q was awaited twice; a callback or signal is awaited once", name)})
		}
	}
	switch r.mode {
	case modePreflight:
		panic(suspend{kind: suspendNeedTask})
	case modeInline:
		return nil, r.needTask(fmt.Sprintf("it waits for the event %q", name))
	case modeBranch:
		r.strayBranch(name, driver.KindEvent)
	}
	if v, ok := r.events[name]; ok {
		r.appendEntry(driver.Entry{Name: name, Kind: driver.KindEvent, Value: v})
		return v, nil
	}
	if !r.claimed.Before(until) {
		// The claim closed the wait: nothing can arrive any more.
		r.appendEntry(driver.Entry{Name: name, Kind: driver.KindEvent, Err: timedOut})
		return nil, errWaitTimedOut
	}
	panic(suspend{kind: suspendAwait, await: name, at: until})
}

// eventOutcome is what a journaled KindEvent entry returns.
func eventOutcome(e *driver.Entry) (json.RawMessage, error) {
	switch e.Err {
	case "":
		return e.Value, nil
	case timedOut:
		return nil, errWaitTimedOut
	}
	return nil, fmt.Errorf("event %q: %s", e.Name, e.Err)
}
