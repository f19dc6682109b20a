package tasks

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Limits and defaults.
const (
	// MaxTTL caps a task's TTL ([driver.MaxTTL]).
	MaxTTL = driver.MaxTTL
	// DefaultLease is Options.Lease's default: a worker that dies mid-step
	// is replaced 7 to 10 seconds later (the lease is renewed every 3.3 s).
	DefaultLease = 10 * time.Second
	// DefaultPath is the path the MCP endpoint is served on.
	DefaultPath = "/mcp"
	// DefaultMaxBodyBytes bounds a request body when Options.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 1 << 20
	// Defaults of the bounds of [Options].
	DefaultMaxRequests            = 256
	DefaultMaxStreams             = 1024
	DefaultMaxStreamsPerPrincipal = 32
	// DefaultConcurrency is how many branches of a parallel step run at
	// once unless [Concurrency] says otherwise.
	DefaultConcurrency = 16
	// MaxBranches bounds the branches of one parallel step ([All]).
	MaxBranches = driver.MaxBranches
	// WebhookTolerance bounds how far from now the webhook-timestamp of a
	// signed callback request may lie (see [WebhookSecret]).
	WebhookTolerance = 5 * time.Minute
)

// Support says whether a tool may, or must, run as a task.
type Support int

const (
	// Optional tools run as a task for a client that declares the tasks
	// extension on the request, and inline otherwise.
	Optional Support = iota
	// Required tools only run as tasks: a client that does not declare the
	// extension gets -32021 (missing required client capability).
	Required
)

// Options configures a Server. The zero value of every field is a sane
// default.
type Options struct {
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// TTL is how long a task stays readable after creation (default 1h,
	// capped at MaxTTL).
	TTL time.Duration
	// PollInterval is the tasks/get interval advised while a task works
	// (default 1s); PollMin and PollMax bound every advice (defaults 500ms,
	// or PollInterval if smaller, and 60s, or PollInterval if larger). The
	// advice is derived from the task: see Server.pollAdvice.
	PollInterval time.Duration
	PollMin      time.Duration
	PollMax      time.Duration
	// MaxDuration is the platform's limit for one worker invocation
	// (default 60s). SafetyMargin is kept free of step work at its end for
	// the final writes (default 10% of MaxDuration, at least 1s).
	MaxDuration  time.Duration
	SafetyMargin time.Duration
	// Lease is how long a worker's claim on a task lasts unless renewed
	// (default DefaultLease). With a store that renews leases
	// ([driver.LeaseRenewer]) the worker renews it every third of Lease while a step
	// runs (with the step's CancelPoll) and before each new step, so that a
	// worker that dies loses the task, and the task is delivered again,
	// within Lease; a step that ends before the first renewal costs nothing
	// more. The step budget (MaxDuration) is independent of it. A Lease of
	// at least MaxDuration plus SafetyMargin, or a store that cannot renew,
	// makes the claim last the whole invocation. Leases are stamped by each
	// worker's clock: the clocks of a deployment's processes must agree
	// well within a third of Lease, or a live lease may look expired to
	// another worker (which then runs the step too; fencing still refuses
	// the first worker's writes).
	Lease time.Duration
	// StepsPerInvocation is how many new Do steps one invocation may run
	// (default 1: one step per invocation). More steps run only while the
	// budget lasts.
	StepsPerInvocation int
	// MinStepTime: a new step does not start with less budget than this
	// left (default 1s or half the budget, whichever is smaller).
	MinStepTime time.Duration
	// CancelPoll is how often a running step checks for tasks/cancel
	// (default 250ms); the same poll renews the step's lease when a renewal
	// is due (see Lease). AbandonGrace is how long a step whose context ended
	// is waited for before it is abandoned (default 1s). An abandoned step's
	// goroutine runs on until its closure returns (Go cannot stop it), and
	// its result is never journaled; a step that ignores its context may
	// therefore overlap its own retry.
	CancelPoll   time.Duration
	AbandonGrace time.Duration
	// MaxResultBytes bounds a stored result and each journaled step result
	// (default 1 MiB); a step whose result is larger fails without retries.
	MaxResultBytes int
	// principalOf returns the verified identity behind a request ("" if
	// none). The default takes the go-sdk TokenInfo's UserID.
	Principal func(ctx context.Context, extra *mcp.RequestExtra) string
	// Anonymous lets requests without a principal use tasks, all under one
	// shared principal: task ids are then the only capability. For local
	// development only.
	Anonymous bool
	// StateSecret keys the sealing (AES-256-GCM) of the requestState of
	// inline input rounds; it must be the same on every instance. Empty
	// means a random per-process key (one-instance deployments only).
	StateSecret []byte
	// DisableLeanPath sends every request through the go-sdk: the endpoint
	// (NewHandler) then never answers tasks/* and task-creating
	// tools/call requests on its lean path, at a cost in their throughput.
	// The lean path also turns itself off, without this switch, wherever the
	// go-sdk's configuration would answer differently: see
	// Server.leanPathDisabled.
	DisableLeanPath bool
	// StateTTL bounds how long a requestState stays valid (default 10m).
	StateTTL time.Duration
	// MaxLiveTasks limits how many live (created, not yet terminal, not
	// expired) tasks one principal may have; 0 means no limit. A
	// task-creating tools/call over the limit answers CodeTooManyTasks and
	// creates nothing. The Store enforces it atomically (see
	// [driver.NewTask].MaxLive). Under Anonymous every caller shares one principal,
	// so the limit then applies to the whole server.
	MaxLiveTasks int
	// ReadCache is how many tasks a Server keeps its last read of, to
	// answer a tasks/get without the store while nothing can have changed
	// the task (asleep until a set time, waiting for input, finished): it
	// watches each kept task's announcements ([driver.Watcher]), which
	// drop the read. Zero (the default) keeps none; the bundle sets it
	// for a Redis store (MCPTASKS_READ_CACHE). A store that is not a
	// Watcher keeps none.
	ReadCache int
	// StoreTimeout bounds the store work of one request (tasks/get,
	// tasks/update, tasks/cancel, and the create and enqueue of a
	// task-creating tools/call), so that an unreachable or frozen Redis
	// gets an answer (-32603 "task store unavailable", with a retry hint)
	// well inside the platform's limit instead of holding the request.
	// Default 5s.
	StoreTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// TracerProvider makes the spans of requests, worker invocations,
	// steps, enqueues and sweeps (see [Telemetry]); nil means no tracing,
	// at no cost on the hot paths.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the engine's metrics (see [Telemetry]); nil
	// means none.
	MeterProvider metric.MeterProvider
	// Jobs configures the async-jobs fallback, which serves task tools to
	// clients that do not declare the tasks extension (see [JobOptions]);
	// the zero value serves it.
	Jobs JobOptions
	// PublicURL is the public base URL of the MCP function (scheme and
	// host, such as https://app.example.com), under which callback URLs
	// are formed (CallbackPath; see [Callback]). Callbacks are made by
	// workers, which serve no request to take a host from: without it
	// Callback returns ErrNoPublicURL. The bundle sets it from
	// MCPTASKS_PUBLIC_URL.
	PublicURL string
}

// anonymousPrincipal owns every task when Options.Anonymous is set.
const anonymousPrincipal = "anonymous"

func (o *Options) fill() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TTL <= 0 {
		o.TTL = time.Hour
	}
	o.TTL = min(o.TTL, MaxTTL)
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.PollMin <= 0 {
		o.PollMin = min(500*time.Millisecond, o.PollInterval)
	}
	if o.PollMax <= 0 {
		o.PollMax = max(60*time.Second, o.PollInterval)
	}
	o.PollMax = max(o.PollMax, o.PollMin)
	if o.MaxDuration <= 0 {
		o.MaxDuration = 60 * time.Second
	}
	if o.SafetyMargin <= 0 {
		o.SafetyMargin = max(o.MaxDuration/10, time.Second)
	}
	if o.SafetyMargin >= o.MaxDuration {
		o.SafetyMargin = o.MaxDuration / 2
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.StepsPerInvocation <= 0 {
		o.StepsPerInvocation = 1
	}
	if o.MinStepTime <= 0 {
		o.MinStepTime = min(time.Second, (o.MaxDuration-o.SafetyMargin)/2)
	}
	if o.StoreTimeout <= 0 {
		o.StoreTimeout = 5 * time.Second
	}
	if o.CancelPoll <= 0 {
		o.CancelPoll = 250 * time.Millisecond
	}
	if o.AbandonGrace <= 0 {
		o.AbandonGrace = time.Second
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = 1 << 20
	}
	if o.StateTTL <= 0 {
		o.StateTTL = 10 * time.Minute
	}
	o.MaxLiveTasks = max(o.MaxLiveTasks, 0)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Jobs.fill()
	if len(o.StateSecret) == 0 {
		o.StateSecret = make([]byte, 32)
		_, _ = rand.Read(o.StateSecret)
	}
}

// Server is an MCP server with the tasks extension: it owns the go-sdk
// server, the registry of task tools, and the store and queue they use.
type Server struct {
	mcp   *mcp.Server
	store driver.Store
	queue driver.Queue
	// dispatch: the store enqueues in its own transitions (Dispatcher).
	dispatch bool
	// storeDirect, queueDirect: the store, the queue honour their
	// contexts' deadlines (DeadlineHonourer), so a request calls them
	// directly (see await).
	storeDirect, queueDirect bool
	// tramps are lent to workers' runs, whose handlers run inside them (see
	// trampolines).
	tramps *trampolines

	opts  Options
	log   *slog.Logger
	tools map[string]*tool
	impl  *mcp.Implementation
	// jobTools registers the async-jobs companion tools, once, with the
	// first task tool; waits counts the status calls waiting now.
	jobTools sync.Once
	waits    waiting
	// sdkConfig is why the go-sdk's configuration rules out the lean path
	// ("" when it does not); see LeanPathDisabled.
	sdkConfig string
	// chain identifies the go-sdk server's receiving handler right after New
	// installed the tasks middleware (see chainOf).
	chain uintptr
	tel   telemetry
	// cache answers tasks/get from the last read (nil: Options.ReadCache
	// is 0 or the store is no Watcher); see readcache.go.
	cache *readCache
}

// New returns a Server whose go-sdk server is built from impl and mcpOpts
// (nil for defaults), with the tasks extension advertised and its methods
// installed. Register tools with [AddTool] (task tools) or directly on
// [Server.MCP] (ordinary tools) before serving.
func New(impl *mcp.Implementation, mcpOpts *mcp.ServerOptions, store driver.Store, q driver.Queue, opts *Options) *Server {
	var so mcp.ServerOptions
	if mcpOpts != nil {
		so = *mcpOpts
	}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	if so.Capabilities != nil {
		c := *so.Capabilities
		caps = &c
	}
	caps.AddExtension(ExtensionID, nil)
	so.Capabilities = caps
	s := &Server{mcp: mcp.NewServer(impl, &so), store: store, queue: q, tools: make(map[string]*tool), impl: impl, tramps: newTrampolines()}
	if d, ok := store.(driver.Dispatcher); ok && d.Dispatches() {
		s.dispatch = true
	}
	s.storeDirect, s.queueDirect = honoursDeadline(store), honoursDeadline(q)
	if opts != nil {
		s.opts = *opts
	}
	s.opts.fill()
	s.log = s.opts.Logger
	if w, ok := store.(driver.Watcher); ok && s.opts.ReadCache > 0 {
		s.cache = newReadCache(w, s.opts.ReadCache, s.now)
	}
	s.tel = newTelemetry(s.opts.TracerProvider, s.opts.MeterProvider)
	s.mcp.AddReceivingMiddleware(s.middleware, s.legacyMiddleware)
	s.chain, _ = chainOf(s.mcp)
	s.sdkConfig = leanVersionConflict(so.SupportedProtocolVersions)
	for _, m := range []string{methodGet, methodCancel} {
		if err := mcp.AddReceivingCustomMethod(s.mcp, m, unreachable[*getParams]); err != nil {
			panic(err) // only if the SDK gains these methods
		}
	}
	if err := mcp.AddReceivingCustomMethod(s.mcp, methodUpdate, unreachable[*updateParams]); err != nil {
		panic(err)
	}
	return s
}

// MCP returns the underlying go-sdk server, for ordinary tools, prompts and
// resources.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Store returns the task store.
func (s *Server) Store() driver.Store { return s.store }

// Options returns the effective options.
func (s *Server) Options() Options { return s.opts }

func (s *Server) now() time.Time { return s.opts.Now() }

// unreachable is the registered handler of the tasks methods; the receiving
// middleware answers them before dispatch, so it only runs if the
// middleware was bypassed.
func unreachable[P any](context.Context, *mcp.ServerSession, P) (*ack, error) {
	return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "tasks method dispatched without the tasks middleware"}
}

// Handler is a task tool's body: straight-line Go over durable steps.
type Handler[In any] func(ctx context.Context, s *Step, in In) (*mcp.CallToolResult, error)

// ToolOption configures a task tool.
type ToolOption func(*tool)

// GatherInputFirst makes input steps that come before the handler's first
// other step run synchronously over MRTR (InputRequiredResult rounds) before
// the task is created, as SEP-2663 recommends for tools that need input up
// front. The task then starts with those answers journaled.
func GatherInputFirst() ToolOption { return func(t *tool) { t.inputFirst = true } }

type tool struct {
	name       string
	support    Support
	inputFirst bool
	// background, inlineOnly: the tool's place in the async-jobs fallback
	// (Background, InlineOnly); outputSchema: it declares one, so a job's
	// handle carries no structuredContent (it would not match).
	background, inlineOnly, outputSchema bool
	// paramHeaders reports whether the input schema maps a property to an
	// Mcp-Param header (x-mcp-header), which the go-sdk validates; decided
	// on first use (it encodes the schema: work a cold start that never
	// serves the tool need not do).
	paramHeaders func() bool
	// schema is the input schema; resolved returns it resolved (see
	// AddTool).
	schema   *jsonschema.Schema
	resolved func() (*jsonschema.Resolved, error)
	// stepDefaults is the tool's step policy (StepDefaults).
	stepDefaults []DoOption
	// bind decodes raw arguments and returns the handler closed over them.
	bind func(args json.RawMessage) func(context.Context, *Step) (*mcp.CallToolResult, error)
}

// AddTool registers a task tool. Its input schema is inferred from In when
// t.InputSchema is nil. The tool is also registered on the go-sdk server, so
// it is listed and, for clients without the extension, callable inline.
func AddTool[In any](s *Server, t *mcp.Tool, support Support, h Handler[In], opts ...ToolOption) {
	tt := *t
	inferred := tt.InputSchema == nil
	if inferred {
		schema, err := jsonschema.For[In](nil)
		if err != nil {
			panic(fmt.Sprintf("tasks.AddTool %q: inferring the input schema: %v", t.Name, err))
		}
		tt.InputSchema = schema
	}
	var schema *jsonschema.Schema
	switch v := tt.InputSchema.(type) {
	case *jsonschema.Schema:
		schema = v
	default:
		b, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(b, &schema)
		}
		if err != nil {
			panic(fmt.Sprintf("tasks.AddTool %q: input schema: %v", t.Name, err))
		}
	}
	entry := newTool(tt.Name, support, schema, inferred)
	entry.outputSchema = tt.OutputSchema != nil
	for _, o := range opts {
		o(entry)
	}
	entry.bind = func(args json.RawMessage) func(context.Context, *Step) (*mcp.CallToolResult, error) {
		return func(ctx context.Context, st *Step) (*mcp.CallToolResult, error) {
			var in In
			if len(args) > 0 && string(args) != "null" {
				if err := json.Unmarshal(args, &in); err != nil {
					return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "decoding arguments: " + jsonError(err)}
				}
			}
			return h(ctx, st, in)
		}
	}
	s.tools[tt.Name] = entry
	// The middleware answers every call of a task tool; the handler only
	// lists it.
	s.mcp.AddTool(&tt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "task tool " + entry.name + " called without the tasks middleware"}
	})
	if !s.opts.Jobs.Disable {
		s.jobTools.Do(s.addJobTools)
	}
}

// newTool returns the registry entry of the tool name with the input
// schema, outside AddTool so that its code is not repeated for every In. A
// schema given by the caller is resolved now, so that a bad one fails here;
// one inferred from In is resolved on the first call that validates
// arguments, and whether a schema maps Mcp-Param headers is decided on
// first use (resolving and encoding every tool's schema is work a cold
// start that never serves the tool need not do).
func newTool(name string, support Support, schema *jsonschema.Schema, inferred bool) *tool {
	resolve := sync.OnceValues(func() (*jsonschema.Resolved, error) { return schema.Resolve(nil) })
	if !inferred {
		if _, err := resolve(); err != nil {
			panic(fmt.Sprintf("tasks.AddTool %q: resolving the input schema: %v", name, err))
		}
	}
	return &tool{name: name, support: support, schema: schema, resolved: resolve,
		paramHeaders: sync.OnceValue(func() bool { return usesParamHeaders(schema) })}
}

// missingCapability is the -32021 error naming the tasks extension.
func missingCapability() error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{
		"extensions": map[string]any{ExtensionID: map[string]any{}},
	}})
	return &jsonrpc.Error{Code: CodeMissingCapabilities,
		Message: "this request requires the client capability extensions[\"" + ExtensionID + "\"]", Data: data}
}

// tooManyTasks is the error of a creation over Options.MaxLiveTasks.
func tooManyTasks(limit int) error {
	data, _ := json.Marshal(map[string]int{"maxLiveTasks": limit})
	return &jsonrpc.Error{Code: CodeTooManyTasks, Data: data, Message: fmt.Sprintf(
		"too many live tasks: this principal already has %d tasks that have not ended, the limit; "+
			"wait for one to end, or cancel one, and call again", limit)}
}

func errUnknownTask(id string) error {
	return &jsonrpc.Error{Code: CodeInvalidParams, Message: "unknown taskId: " + id}
}

func declaresTasks(caps *mcp.ClientCapabilities) bool {
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[ExtensionID]
	return ok
}

// principal returns the caller's principal, or "" when there is none.
func (s *Server) principal(ctx context.Context, extra *mcp.RequestExtra) string {
	var p string
	if s.opts.Principal != nil {
		p = s.opts.Principal(ctx, extra)
	} else if extra != nil && extra.TokenInfo != nil {
		p = extra.TokenInfo.UserID
	}
	if p == "" && s.opts.Anonymous {
		p = anonymousPrincipal
	}
	return p
}

// enqueue hands the task to the queue for at, capped at the queue's delay
// limit: an early wake-up finds the task still sleeping and re-enqueues it,
// which chains long sleeps.
func (s *Server) enqueue(ctx context.Context, id string, at time.Time) (err error) {
	if md := s.queue.MaxDelay(); md > 0 {
		if limit := s.now().Add(md); at.After(limit) {
			at = limit
		}
	}
	ctx, span := s.enqueueSpan(ctx, id, at)
	defer func() { endSpan(span, err) }()
	if err := s.queue.Enqueue(ctx, id, at); err != nil {
		return fmt.Errorf("enqueue %s: %w", id, err)
	}
	return nil
}

// enqueueNow is enqueue on a request's path: its answer does not wait past
// ctx's deadline (see await). Workers and the sweeper call enqueue.
func (s *Server) enqueueNow(ctx context.Context, id string) error {
	_, err := await(ctx, s.queueDirect, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.enqueue(ctx, id, time.Time{}) })
	return err
}

// middleware answers tools/call for task tools with a task and serves the
// tasks/* methods, before the go-sdk dispatches them.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			ctr, ok := req.(*mcp.CallToolRequest)
			if !ok || ctr.Params == nil {
				break
			}
			t := s.tools[ctr.Params.Name]
			if t == nil {
				break
			}
			if !declaresTasks(ctr.ClientCapabilities()) {
				return s.callWithout(ctx, ctr, t)
			}
			owner := s.principal(ctx, ctr.GetExtra())
			if !t.inputFirst {
				return s.createFor(ctx, owner, t.name, ctr.Params.Arguments)
			}
			res, err := s.create(ctx, creation{tool: t, owner: owner, args: ctr.Params.Arguments,
				preflight: func(args json.RawMessage) (mcp.Result, []driver.Entry, map[string]json.RawMessage, error) {
					return s.preflight(ctx, ctr, t, owner, args)
				}})
			return middlewareCallResult(res), err
		case methodGet, methodCancel:
			r, ok := req.(*mcp.ServerRequest[*getParams])
			if !ok {
				break
			}
			// Without params there is no _meta, so no capability; and the
			// go-sdk's ClientCapabilities dereferences nil params of a
			// custom method (a panic that ends the process).
			if r.Params == nil || !declaresTasks(r.ClientCapabilities()) {
				return nil, missingCapability()
			}
			if r.Params.TaskID == "" {
				return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "params.taskId is required"}
			}
			owner := s.principal(ctx, r.GetExtra())
			if method == methodGet {
				return s.getTask(ctx, owner, r.Params.TaskID)
			}
			return s.cancelTask(ctx, owner, r.Params.TaskID)
		case methodUpdate:
			r, ok := req.(*mcp.ServerRequest[*updateParams])
			if !ok {
				break
			}
			if r.Params == nil || !declaresTasks(r.ClientCapabilities()) { // see above
				return nil, missingCapability()
			}
			if r.Params.TaskID == "" {
				return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "params.taskId is required"}
			}
			return s.updateTask(ctx, s.principal(ctx, r.GetExtra()), r.Params.TaskID, r.Params.InputResponses)
		}
		return next(ctx, method, req)
	}
}

// await runs f and returns its outcome, or ctx's error as soon as ctx is
// done even if f has not returned: a request's answer never waits past
// its deadline on a store that does not honour it promptly. f keeps
// running to its end in the background; an outcome it reaches after the
// deadline is dropped (see storeUnavailable). When direct (what f calls
// declared DeadlineHonourer), f runs on the caller's goroutine and its
// outcome is returned as is: it returns by the deadline itself.
func await[T any](ctx context.Context, direct bool, f func(context.Context) (T, error)) (T, error) {
	if direct {
		return f(ctx)
	}
	type outcome struct {
		v   T
		err error
	}
	ch := make(chan outcome, 1)
	go func() {
		v, err := f(ctx)
		ch <- outcome{v, err}
	}()
	select {
	case o := <-ch:
		return o.v, o.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// validateArgs applies defaults and validates raw arguments against the
// tool's schema. A failure is a tool error, as the go-sdk reports it.
func (t *tool) validateArgs(raw json.RawMessage) (json.RawMessage, *mcp.CallToolResult) {
	var v map[string]any
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, toolErrorResult(errors.New("invalid arguments: they must be a JSON object, got " + describe(raw)))
		}
	}
	if v == nil {
		v = map[string]any{}
	}
	resolved, err := t.resolved()
	if err != nil {
		return nil, toolErrorResult(fmt.Errorf("resolving the input schema: %v", err))
	}
	if msg := validateResolved(t.schema, resolved, &v, "arguments"); msg != "" {
		return nil, toolErrorResult(errors.New("invalid arguments: " + msg))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, toolErrorResult(err)
	}
	return b, nil
}

func toolErrorResult(err error) *mcp.CallToolResult {
	var r mcp.CallToolResult
	r.SetError(err)
	return &r
}

// creation is what varies between the calls that create a task.
type creation struct {
	tool  *tool
	owner string
	// args are the arguments as the client sent them: create validates
	// them (and applies the schema's defaults).
	args json.RawMessage
	// ttl is the task's lifetime; zero means Options.TTL.
	ttl time.Duration
	// journal and responses seed the task with steps the request took
	// already (a call that continues as a job, an inline call that goes on
	// as a task for its input rounds).
	journal   []driver.Entry
	responses map[string]json.RawMessage
	// preflight, for a GatherInputFirst tool, runs its input rounds on the
	// validated arguments before the task exists: it returns the answer to
	// give instead of a task (an input round, the result of a run that
	// finished, an error), or else the journal and responses the task
	// starts with.
	preflight func(args json.RawMessage) (mcp.Result, []driver.Entry, map[string]json.RawMessage, error)
}

// create answers a call that creates a task: it validates the arguments
// (a failure is a tool error, returned as the result), requires a
// principal, runs c.preflight, persists the task (durably: tasks/get finds
// it from here on), enqueues it unless the store dispatched it, and
// returns the handle.
func (s *Server) create(ctx context.Context, c creation) (_ mcp.Result, err error) {
	ctx, span := s.requestSpan(ctx, "tools/call", c.tool.name, "")
	defer func() { endSpan(span, err) }()
	args, bad := c.tool.validateArgs(c.args)
	if bad != nil {
		return bad, nil
	}
	if c.owner == "" {
		return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "tasks require an authenticated principal"}
	}
	journal, responses := c.journal, c.responses
	if c.preflight != nil {
		var res mcp.Result
		res, journal, responses, err = c.preflight(args)
		if res != nil || err != nil {
			return res, err
		}
	}
	ttl := c.ttl
	if ttl == 0 {
		ttl = s.opts.TTL
	}
	nt := &driver.NewTask{ID: driver.NewID(), Owner: c.owner, Tool: c.tool.name, Args: args,
		TTL: ttl, PollInterval: s.opts.PollInterval, MaxLive: s.opts.MaxLiveTasks,
		Journal: journal, Responses: responses, Listed: s.listEnabled()}
	nt.Now = s.now()
	if s.tel.tracer != nil { // ctx holds the tools/call span
		nt.TraceParent = traceParent(ctx)
		trace.SpanFromContext(ctx).SetAttributes(AttrTaskID.String(nt.ID))
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	task, err := await(ctx, s.storeDirect, func(ctx context.Context) (*driver.Task, error) { return s.store.Create(ctx, nt) })
	if errors.Is(err, driver.ErrTooManyTasks) {
		return nil, tooManyTasks(nt.MaxLive)
	}
	if err != nil {
		s.log.Error("creating a task failed", "tool", c.tool.name, "err", err)
		s.storeFailed(ctx, "create")
		return nil, storeUnavailable()
	}
	s.audit(ctx, AuditCreated, c.owner, task.ID, slog.String("tool", c.tool.name))
	if s.tel.created != nil {
		s.tel.created.Add(ctx, 1, metric.WithAttributes(AttrTool.String(c.tool.name)))
	}
	if s.dispatch {
		return newCreateTaskResult(task), nil // enqueued by the create itself
	}
	if err := s.enqueueNow(ctx, task.ID); err != nil {
		s.log.Warn("enqueue after create failed; the sweeper will recover the task", "task", task.ID, "err", err)
	}
	return newCreateTaskResult(s.advised(task)), nil
}

// usesParamHeaders reports whether a tool's input schema maps a property to
// an Mcp-Param header (x-mcp-header), which the go-sdk validates.
func usesParamHeaders(schema *jsonschema.Schema) bool {
	b, err := json.Marshal(schema)
	return err != nil || strings.Contains(string(b), `"x-mcp-header"`)
}
