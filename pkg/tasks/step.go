package tasks

import (
	"context"
	"encoding/json"
	"errors"
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
// (or the inline call) fails with a message that states the rule. To run
// work concurrently, run it inside one Do closure and journal the combined
// result.
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
	if s.r.enter("Step.Status", "") != nil {
		return
	}
	s.r.statusFresh = s.r.cursor >= len(s.r.journal)
	if s.r.statusMsg != msg {
		s.r.statusMsg = msg
		s.r.statusDirty = true
	}
}

// DoOption configures a [Do] step.
type DoOption func(*doOptions)

type doOptions struct {
	attempts   int
	base, max  time.Duration
	timeout    time.Duration
	jitterFrac float64
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

// Timeout bounds one attempt of the step. The attempt's context also ends at
// the invocation's deadline and when the task is cancelled.
func Timeout(d time.Duration) DoOption { return func(o *doOptions) { o.timeout = d } }

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
func Do[T any](s *Step, name string, fn func(ctx context.Context) (T, error), opts ...DoOption) (T, error) {
	var zero T
	o := doOptions{attempts: 3, base: time.Second, max: time.Minute, jitterFrac: 0.2}
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
func (s *Step) Sleep(name string, d time.Duration) error {
	return s.r.sleep(name, func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil parks the task until t.
func (s *Step) SleepUntil(name string, t time.Time) error {
	return s.r.sleep(name, func(time.Time) time.Time { return t })
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

// ErrInputTimeout is returned by Input when its deadline passed first.
var ErrInputTimeout = errors.New("input deadline passed before the requests were answered")

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
		return zero, fmt.Errorf("elicit %q: decoding the response: %w", name, err)
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
