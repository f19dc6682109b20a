package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Step is the handle a task handler uses to take durable steps. A handler is
// straight-line Go; every invocation reruns it from the top, and each step
// whose outcome is already journaled returns that outcome without running
// again. Steps are identified by name and order: both must be the same on
// every run of the same task.
//
// A Step is used by one goroutine: the handler's. Its methods unwind the
// handler (with a panic the engine recovers) when the task must park, so a
// handler must not recover panics around Step calls. Calling a Step method
// (other than Context and TaskID) from another goroutine, or from inside a
// Do closure, is a programming error the engine detects without crashing
// the process: that call returns an error wrapping [ErrWrongGoroutine] and
// does nothing, the handler is unwound at its next Step call, and the task
// (or the inline call) fails with a message that states the rule. (A call
// made while the handler replays what an earlier invocation journaled, a
// replayed step or a status set between replayed steps, is not checked, to
// keep replays cheap: it returns the journaled outcome, as the handler's
// own call would, and the goroutine's first call that does more is
// caught.) To
// run work concurrently, run it inside one Do closure and journal the
// combined result.
type Step struct {
	r *run
}

// Context returns the invocation's context: it carries the invocation's
// deadline and the caller's values.
func (s *Step) Context() context.Context { return s.r.ctx }

// TaskID returns the task's id ("" when the handler runs inline).
func (s *Step) TaskID() string { return s.r.taskID }

// Status sets the task's status message, visible on tasks/get from the
// next durable write (at the latest when the next step starts). A message
// set after the task's last step (such as "done" before returning) stays
// on the finished task; an earlier one is cleared when the task ends.
func (s *Step) Status(msg string) {
	r := s.r
	if r.tryReplay() {
		// Between replayed steps: not checked, like the replays around
		// it (see guard).
		replaying := r.replaying()
		if replaying {
			r.setStatus(msg)
		}
		r.leave()
		if replaying {
			return
		}
	}
	if r.enter("Step.Status", "") != nil {
		return
	}
	defer r.leave()
	r.setStatus(msg)
}

// DoOption configures a [Do] step.
type DoOption func(*doOptions)

type doOptions struct {
	attempts   int
	base, max  time.Duration
	timeout    time.Duration
	jitterFrac float64
	// concurrency bounds the branches of All in flight (Concurrency);
	// secret is a callback's signing secret (WebhookSecret).
	concurrency int
	secret      string
}

// Retries sets how many times a failing step is retried after its first
// attempt (default 2, so 3 attempts in all). Every attempt is charged when
// the step is claimed, so a step whose process keeps crashing also runs out.
func Retries(n int) DoOption { return func(o *doOptions) { o.attempts = n + 1 } }

// Backoff sets the exponential backoff between attempts: base doubling per
// attempt up to max, with ±20% jitter (default 1s up to 1m).
func Backoff(base, max time.Duration) DoOption {
	return func(o *doOptions) { o.base, o.max = base, max }
}

// Timeout bounds one attempt of the step (0: no bound but the
// invocation's). The attempt's context also ends at the invocation's
// deadline and when the task is cancelled. Given to [All], it bounds one
// attempt of each branch; to [Callback] and [AwaitSignal], it is how long
// the wait lasts.
func Timeout(d time.Duration) DoOption { return func(o *doOptions) { o.timeout = d } }

// StepDefaults sets a tool's step policy: opts apply to every [Do] of the
// tool's handler, before the step's own options, so a step overrides only
// what it sets itself. For example, a tool registered with
//
//	tasks.StepDefaults(tasks.Retries(5), tasks.Timeout(30*time.Second))
//
// retries each step five times with a 30s bound per attempt, and a step
// given tasks.Retries(0) runs once, still bounded by 30s.
func StepDefaults(opts ...DoOption) ToolOption {
	return func(t *tool) { t.stepDefaults = append(t.stepDefaults, opts...) }
}

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that a Do step fails at once, without retries.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// StepError is the error a Do step returns, live or replayed, once it has
// failed for good.
type StepError struct {
	Step    string
	Message string
}

func (e *StepError) Error() string { return fmt.Sprintf("step %q failed: %s", e.Step, e.Message) }

// Do runs fn as the journaled step name and returns its result. Once the
// result is journaled fn never runs again for this task; fn may run more
// than once only if an attempt failed or the process died before its result
// was journaled, so it should be idempotent. T must survive a JSON round
// trip.
//
// The step's policy (retries, backoff, timeout) is the engine's default,
// then the tool's [StepDefaults], then opts: each option overrides only
// what it sets.
func Do[T any](s *Step, name string, fn func(ctx context.Context) (T, error), opts ...DoOption) (T, error) {
	var zero T
	o := doOptions{attempts: 3, base: time.Second, max: time.Minute, jitterFrac: 0.2}
	for _, opt := range s.r.stepDefaults {
		opt(&o)
	}
	for _, opt := range opts {
		opt(&o)
	}
	raw, err := s.r.do(name, o, func(ctx context.Context) (json.RawMessage, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, Permanent(fmt.Errorf("encoding the result of step %q: %w", name, err))
		}
		if limit := s.r.maxValue; limit > 0 && len(b) > limit {
			return nil, Permanent(fmt.Errorf("the result of step %q is %d bytes, over the %d byte limit (Options.MaxResultBytes)", name, len(b), limit))
		}
		return b, nil
	})
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, fmt.Errorf("decoding the journaled result of step %q: %w", name, err)
	}
	return v, nil
}

// Sleep parks the task for d. Durably, the task is released and woken
// through the queue (delays beyond the queue's limit are chained); inline, it
// really sleeps.
//
// A sleep is cut short by an answer to an outstanding offer (see
// [Step.Offer]): Sleep then returns [ErrWoken], at once if the answer was
// already there when the handler reached the sleep, and the handler finds
// the answer with [Step.CheckInput]. A tool that makes no offers never
// sees ErrWoken. Whether a sleep was cut short is journaled: a replay
// returns the same.
func (s *Step) Sleep(name string, d time.Duration) error {
	return s.r.sleep(name, func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil parks the task until t. Like [Step.Sleep], it returns
// [ErrWoken] when an answer to an offer cut it short.
func (s *Step) SleepUntil(name string, t time.Time) error {
	return s.r.sleep(name, func(time.Time) time.Time { return t })
}

// Offer puts up a standing input request under the input key name (unique
// over the task's life, like Input's keys) and returns at once: the task
// goes on working, and the handler asks with [Step.CheckInput], at the
// points it chooses, whether the client answered. The offer stands until it
// is answered, withdrawn ([Step.Withdraw]) or the task ends.
//
// On the wire, while the task is parked (in a [Step.Sleep], or waiting
// for [Step.Input] or [Elicit]) with an offer outstanding, it is
// input_required and the offer's request is among its inputRequests,
// beside any it waits for; while a step runs it stays working. tasks/update
// takes the answer in any status (the task need not be parked), and the
// request leaves inputRequests at once. An answer cuts a sleep short (it
// returns [ErrWoken]); it never ends a wait for Input, which waits for its
// own keys.
//
// Inline (a client without the tasks extension), offers are not shown to
// the client and never answered: CheckInput reports nothing.
func (s *Step) Offer(name string, req InputRequest) error {
	b, err := json.Marshal(markStanding(req))
	if err != nil {
		return fmt.Errorf("offer %q: encoding the request: %w", name, err)
	}
	return s.r.offer(name, b)
}

// markStanding returns req with params._meta[MetaStanding] = true.
func markStanding(req InputRequest) InputRequest {
	params := map[string]any{}
	if req.Params != nil {
		b, err := json.Marshal(req.Params)
		if err != nil || json.Unmarshal(b, &params) != nil || params == nil {
			return req // not an object: left as it is
		}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[MetaStanding] = true
	params["_meta"] = meta
	req.Params = params
	return req
}

// CheckInput returns the answer to the offer name if the client answered
// it: once, at the first check that finds it (later checks report false).
// It never blocks. The answers it sees are those that arrived before the
// current worker invocation began. What a check found is journaled where
// it happened, so a replay of the handler gets the same outcome at the
// same point, even when the answer reached the store meanwhile. Checking
// a name the task never offered fails the task; checking a withdrawn
// offer reports false.
func (s *Step) CheckInput(name string) (json.RawMessage, bool) {
	return s.r.checkInput(name)
}

// Withdraw takes the offer name down: it leaves inputRequests, an answer
// sent later is ignored like one to an unknown key, and CheckInput reports
// false for it from here on. Withdrawing a withdrawn offer does nothing;
// withdrawing a name the task never offered fails the task.
func (s *Step) Withdraw(name string) { s.r.withdraw(name) }

// OfferElicit offers an elicitation of a value of type T (its JSON schema
// is inferred from T) under the input key name: [Step.Offer] with an
// elicitation/create request. Check it with [CheckElicit].
func OfferElicit[T any](s *Step, name, message string) error {
	schema, err := jsonschema.For[T](nil)
	if err != nil {
		return fmt.Errorf("offer %q: inferring schema: %w", name, err)
	}
	return s.Offer(name, InputRequest{
		Method: "elicitation/create",
		Params: &mcp.ElicitParams{Mode: "form", Message: message, RequestedSchema: schema},
	})
}

// CheckElicit is [Step.CheckInput] for an offer made by [OfferElicit]: it
// decodes the answer, when there is one.
func CheckElicit[T any](s *Step, name string) (ElicitResult[T], bool, error) {
	var r ElicitResult[T]
	b, ok := s.CheckInput(name)
	if !ok {
		return r, false, nil
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, true, fmt.Errorf("check %q: the answer does not fit the offer's type: %s", name, jsonError(err))
	}
	return r, true, nil
}

// InputRequest is one MRTR request the server asks the client to fulfil,
// such as elicitation/create or sampling/createMessage.
type InputRequest struct {
	Method string `json:"method"`
	Params any    `json:"params,omitempty"`
}

// InputOption configures an [Input] step.
type InputOption func(*inputOptions)

type inputOptions struct {
	any      bool
	deadline time.Duration
}

// WaitAny resumes the task as soon as one of the requests is answered; the
// others are withdrawn. By default the step waits for all of them.
func WaitAny() InputOption { return func(o *inputOptions) { o.any = true } }

// Deadline gives up waiting after d: the step then returns ErrInputTimeout
// with whatever was answered.
func Deadline(d time.Duration) InputOption { return func(o *inputOptions) { o.deadline = d } }

// Input asks the client for input and waits: the task parks in
// input_required with the requests as its inputRequests (keys must be unique
// over the task's life). It returns the responses by key.
func (s *Step) Input(name string, requests map[string]InputRequest, opts ...InputOption) (map[string]json.RawMessage, error) {
	var o inputOptions
	for _, opt := range opts {
		opt(&o)
	}
	raw := make(map[string]json.RawMessage, len(requests))
	for k, r := range requests {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encoding input request %q: %w", k, err)
		}
		raw[k] = b
	}
	return s.r.input(name, raw, o)
}

// ElicitResult is the client's answer to an elicitation.
type ElicitResult[T any] struct {
	// Action is "accept", "decline" or "cancel".
	Action string `json:"action"`
	// Content is the accepted content (zero unless Action is "accept").
	Content T `json:"content"`
}

// Accepted reports whether the user accepted.
func (r ElicitResult[T]) Accepted() bool { return r.Action == "accept" }

// Elicit asks the user, through the client, for a value of type T (its JSON
// schema is inferred from T) under the input key name.
func Elicit[T any](s *Step, name, message string, opts ...InputOption) (ElicitResult[T], error) {
	var zero ElicitResult[T]
	schema, err := jsonschema.For[T](nil)
	if err != nil {
		return zero, fmt.Errorf("elicit %q: inferring schema: %w", name, err)
	}
	resp, err := s.Input(name, map[string]InputRequest{name: {
		Method: "elicitation/create",
		Params: &mcp.ElicitParams{Mode: "form", Message: message, RequestedSchema: schema},
	}}, opts...)
	if err != nil {
		return zero, err
	}
	var r ElicitResult[T]
	if err := json.Unmarshal(resp[name], &r); err != nil {
		return zero, fmt.Errorf("elicit %q: the answer does not fit the requested type: %s", name, jsonError(err))
	}
	return r, nil
}

func (o doOptions) backoff(attempt int) time.Duration {
	d := o.base
	for i := 1; i < attempt && d < o.max; i++ {
		d *= 2
	}
	d = min(d, o.max)
	j := 1 + o.jitterFrac*(2*rand.Float64()-1)
	return time.Duration(float64(d) * j)
}
