package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The async-jobs fallback: how a client that does not declare the tasks
// extension on a request (most hosts do not, and the extension is opt-in
// per request) still gets the long work durability exists for. A task tool
// it calls runs inline when it can finish within the call; when it cannot
// (it sleeps or waits past the invocation's budget, asks for input the
// client cannot give within the call, or is registered with [Background]),
// the call creates the same durable task and answers at
// once with an ordinary CallToolResult: text written for a model that says
// what started and which tool to call next, the task id in
// structuredContent (when the tool declares no output schema), and the
// related-task _meta. Companion tools, listed whenever the app has task
// tools, let any host follow the job with plain tools/call requests:
//
//   - task_status {taskId, waitSeconds?}: waits a bounded time for the job
//     to change, then tells where it stands; once it has completed, it
//     answers exactly the tool's own result; while it waits for input, it
//     shows each open request with its fields;
//   - task_answer {taskId, key, action?, content?}: answers an open input
//     request, checked against its schema like any answer;
//   - task_cancel {taskId}: cancels the job.
//
// They bind to the caller's principal like tasks/*: another principal's
// job answers exactly like an unknown one. The job is a task like any
// other (the same store, workers, TTL, audit and telemetry; tasks/get
// reads it); a client that declares the extension keeps getting tasks.
// [JobOptions] turns the fallback off or renames the tools; [InlineOnly]
// keeps one tool out of it. A [Required] tool is not served by it: the
// extension has a request that cannot be served without a task answered
// -32021.

// JobOptions configures the async-jobs fallback (see [Options].Jobs). The
// zero value serves it under the default tool names.
type JobOptions struct {
	// Disable turns the fallback off: a client without the extension gets
	// a task tool inline, and a call that cannot finish inline is refused
	// (-32021 naming the extension on 2026-07-28). No companion tools are
	// listed.
	Disable bool
	// StatusTool, AnswerTool and CancelTool name the companion tools
	// (defaults "task_status", "task_answer" and "task_cancel").
	StatusTool, AnswerTool, CancelTool string
	// MaxWait bounds how long one status call waits for the job to change
	// (default 25s); it never waits past the invocation's budget.
	MaxWait time.Duration
	// MaxWaitsPerPrincipal bounds the status calls of one principal that
	// wait at once in a process (default 4): a status call past it answers
	// at once, so that one principal's waits never hold the requests
	// others need.
	MaxWaitsPerPrincipal int
}

func (o *JobOptions) fill() {
	if o.StatusTool == "" {
		o.StatusTool = "task_status"
	}
	if o.AnswerTool == "" {
		o.AnswerTool = "task_answer"
	}
	if o.CancelTool == "" {
		o.CancelTool = "task_cancel"
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 25 * time.Second
	}
	if o.MaxWaitsPerPrincipal <= 0 {
		o.MaxWaitsPerPrincipal = 4
	}
}

// waiting counts the status calls that wait now, per principal: per
// process state, as bounded as the requests a process serves at once.
type waiting struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more wait of owner, unless owner already has max; it
// returns the release of the wait.
func (w *waiting) take(owner string, max int) (release func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[owner] >= max {
		return nil, false
	}
	if w.n == nil {
		w.n = map[string]int{}
	}
	w.n[owner]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.n[owner]--; w.n[owner] <= 0 {
			delete(w.n, owner)
		}
	}, true
}

// Background makes a task tool run as a background job for every client
// that does not declare the tasks extension, without trying to finish it
// within the call first: for work that is always long.
func Background() ToolOption { return func(t *tool) { t.background = true } }

// InlineOnly keeps a task tool out of the async-jobs fallback: a client
// without the extension gets it inline only, and a call that cannot finish
// within its budget is refused.
func InlineOnly() ToolOption { return func(t *tool) { t.inlineOnly = true } }

// jobsFor reports whether the async-jobs fallback serves t.
func (s *Server) jobsFor(t *tool) bool { return !s.opts.Jobs.Disable && !t.inlineOnly }

// needsTaskError is the refusal of a 2026-07-28 call that cannot be served
// without a task (the fallback being off): -32021 naming the extension,
// with what the call could not do.
func needsTaskError(tool, why string) error {
	err := missingCapability().(*jsonrpc.Error)
	err.Message = fmt.Sprintf("tool %s cannot finish within this call: %s; call it as a task (declare the %s extension)", tool, why, ExtensionID)
	return err
}

// cannotAsk is the refusal of a call whose tool asks for input the client
// cannot give within the call (the fallback being off): on 2026-07-28,
// -32021 naming the capabilities the requests need; on older revisions
// -32600.
func cannotAsk(tool string, asked map[string]json.RawMessage, modern bool) error {
	need := map[string]any{}
	for _, req := range asked {
		switch requestMethod(req) {
		case "elicitation/create":
			need["elicitation"] = map[string]any{}
		case "sampling/createMessage":
			need["sampling"] = map[string]any{}
		case "roots/list":
			need["roots"] = map[string]any{}
		}
	}
	msg := fmt.Sprintf("tool %s asks for input (%s) that this client cannot give within the call; declare %s, or call it as a task",
		tool, strings.Join(slices.Sorted(maps.Keys(asked)), ", "), strings.Join(slices.Sorted(maps.Keys(need)), ", "))
	if !modern {
		return &jsonrpc.Error{Code: CodeInvalidRequest, Message: msg}
	}
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": need})
	return &jsonrpc.Error{Code: CodeMissingCapabilities, Message: msg, Data: data}
}

func requestMethod(req json.RawMessage) string {
	var r struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(req, &r)
	return r.Method
}

// canAnswer reports whether a client with caps answers every request of
// asked over MRTR within the call.
func canAnswer(caps *mcp.ClientCapabilities, asked map[string]json.RawMessage) bool {
	if caps == nil {
		return false
	}
	for _, req := range asked {
		switch requestMethod(req) {
		case "elicitation/create":
			if caps.Elicitation == nil {
				return false
			}
		case "sampling/createMessage":
			//lint:ignore SA1019 deprecated, still valid on 2026-07-28, and what a sampling request needs
			if caps.Sampling == nil {
				return false
			}
		case "roots/list":
			//lint:ignore SA1019 deprecated, still valid on 2026-07-28, and what a roots request needs
			if caps.RootsV2 == nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// startJob creates the task of a call that continues as a background job
// (journal and responses: the steps the call took inline) and answers the
// call with the job's handle, for a model to follow with the companion
// tools. why says why it did not finish inline; asked are the input
// requests it waits for, if that is why.
func (s *Server) startJob(ctx context.Context, t *tool, owner string, args json.RawMessage,
	journal []driver.Entry, responses map[string]json.RawMessage, why string, asked map[string]json.RawMessage) (*mcp.CallToolResult, error) {
	res, err := s.create(ctx, creation{tool: t, owner: owner, args: args, journal: journal, responses: responses})
	if err != nil {
		return nil, err
	}
	c, ok := res.(*createTaskResult)
	if !ok { // an argument error: a tool error already
		r, _ := res.(*mcp.CallToolResult)
		return r, nil
	}
	s.log.Info("call continues as a background job", "tool", t.name, "task", c.TaskID, "reason", why)
	o := s.opts.Jobs
	var b strings.Builder
	fmt.Fprintf(&b, "%s continues as background job %s, because %s. ", t.name, c.TaskID, why)
	if len(asked) > 0 {
		b.WriteString("It waits for an answer:")
		for _, k := range slices.Sorted(maps.Keys(asked)) {
			writeQuestion(&b, k, question(asked[k]), o.AnswerTool, c.TaskID)
		}
		fmt.Fprintf(&b, "\n\nThen call %s with {\"taskId\": %q} to follow the job. ", o.StatusTool, c.TaskID)
	} else {
		fmt.Fprintf(&b, "Call %s with {\"taskId\": %q} to follow it: it waits up to %ds for news and returns the tool's result once the job is done. ",
			o.StatusTool, c.TaskID, int(s.statusWait().Seconds()))
	}
	fmt.Fprintf(&b, "%s with the same taskId stops it.", o.CancelTool)
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
	if !t.outputSchema {
		out.StructuredContent = jobState{TaskID: c.TaskID, Tool: t.name, Status: c.Status, StatusMessage: c.StatusMessage,
			PollIntervalMs: c.PollIntervalMs}
	}
	out.Meta = relatedTask(c.TaskID)
	return out, nil
}

func relatedTask(id string) mcp.Meta {
	return mcp.Meta{RelatedTaskMetaKey: map[string]string{"taskId": id}}
}

// statusWait is how long a status call waits for news at most.
func (s *Server) statusWait() time.Duration { return min(s.opts.Jobs.MaxWait, s.holdBudget()) }

// jobState is the structuredContent of a job's handle and of the
// companion tools' answers while it has not completed.
type jobState struct {
	TaskID         string                  `json:"taskId"`
	Tool           string                  `json:"tool,omitempty"`
	Status         driver.Status           `json:"status"`
	StatusMessage  string                  `json:"statusMessage,omitempty"`
	PollIntervalMs int64                   `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]openQuestion `json:"inputRequests,omitempty"`
	Error          *driver.ErrorObject     `json:"error,omitempty"`
}

// openQuestion is an open input request as a model reads it.
type openQuestion struct {
	Method          string          `json:"method"`
	Message         string          `json:"message,omitempty"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
}

// The companion tools' arguments.
type (
	statusArgs struct {
		TaskID      string `json:"taskId"`
		WaitSeconds *int   `json:"waitSeconds,omitempty"`
	}
	answerArgs struct {
		TaskID  string          `json:"taskId"`
		Key     string          `json:"key"`
		Action  string          `json:"action,omitempty"`
		Content json.RawMessage `json:"content,omitempty"`
	}
	cancelArgs struct {
		TaskID string `json:"taskId"`
	}
)

func taskIDSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: "the job's taskId, as the call that started it returned"}
}

// addJobTools registers the companion tools on the go-sdk server.
func (s *Server) addJobTools() {
	o := s.opts.Jobs
	obj := func(props map[string]*jsonschema.Schema, required ...string) *jsonschema.Schema {
		return &jsonschema.Schema{Type: "object", Properties: props, Required: required}
	}
	maxWait := float64(int(s.statusWait().Seconds()))
	s.mcp.AddTool(&mcp.Tool{Name: o.StatusTool, Title: "Background job status",
		Description: "Reports on a background job that a tool started: where it stands, its result once it has completed, " +
			"and the questions it waits for. It waits up to waitSeconds (default and at most " + strconv.Itoa(int(maxWait)) +
			") for the job to change before it answers, so call it again when the job is still working.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: obj(map[string]*jsonschema.Schema{
			"taskId": taskIDSchema(),
			"waitSeconds": {Type: "integer", Minimum: jsonschema.Ptr(0.0), Maximum: &maxWait,
				Description: "how long to wait for the job to change before answering (0: answer at once)"},
		}, "taskId"),
	}, s.statusTool)
	s.mcp.AddTool(&mcp.Tool{Name: o.AnswerTool, Title: "Answer a background job",
		Description: "Answers a question that a background job waits for (" + o.StatusTool + " shows its key and the fields it wants). " +
			"action is accept (with content, an object with the fields asked for), decline or cancel.",
		InputSchema: obj(map[string]*jsonschema.Schema{
			"taskId":  taskIDSchema(),
			"key":     {Type: "string", Description: "the question's key, as " + o.StatusTool + " lists it"},
			"action":  {Type: "string", Enum: []any{"accept", "decline", "cancel"}, Description: "accept (the default), decline or cancel"},
			"content": {Type: "object", Description: "the answer's fields, for accept"},
		}, "taskId", "key"),
	}, s.answerTool)
	s.mcp.AddTool(&mcp.Tool{Name: o.CancelTool, Title: "Cancel a background job",
		Description: "Cancels a background job that a tool started. A job that has already ended stays as it is.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: jsonschema.Ptr(true), IdempotentHint: true},
		InputSchema: obj(map[string]*jsonschema.Schema{"taskId": taskIDSchema()}, "taskId"),
	}, s.cancelTool)
}

// jobArgs decodes a companion tool's arguments; a failure is the tool
// error to answer with.
func jobArgs[T any](req *mcp.CallToolRequest, v *T) *mcp.CallToolResult {
	raw := req.Params.Arguments
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return toolErrorResult(errors.New("invalid arguments: " + jsonError(err)))
	}
	return nil
}

// jobError is a companion tool's tool error for err, a task operation's
// JSON-RPC error (unknown task, store unavailable).
func jobError(err error) *mcp.CallToolResult {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return toolErrorResult(errors.New(we.Message))
	}
	return toolErrorResult(err)
}

func (s *Server) statusTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a statusArgs
	if bad := jobArgs(req, &a); bad != nil {
		return bad, nil
	}
	owner := s.principal(ctx, req.GetExtra())
	t, err := s.lookup(ctx, owner, a.TaskID, s.opts.Jobs.StatusTool)
	if err != nil {
		return jobError(err), nil
	}
	wait := s.statusWait()
	if a.WaitSeconds != nil {
		wait = min(max(time.Duration(*a.WaitSeconds)*time.Second, 0), wait)
	}
	if t.Status == driver.StatusWorking && wait > 0 {
		if release, ok := s.waits.take(owner, s.opts.Jobs.MaxWaitsPerPrincipal); ok {
			if nt, err := s.waitForChange(ctx, owner, t, wait); err == nil {
				t = nt
			}
			release()
		}
	}
	return s.jobAnswer(t), nil
}

// waitForChange waits up to wait for owner's task t to change what a
// client sees of it (status, message, update time), and returns it as it
// stands then. It listens for the task's transitions when the store
// announces them, else it reads the task every second.
func (s *Server) waitForChange(ctx context.Context, owner string, t *driver.Task, wait time.Duration) (*driver.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	changed := func(nt *driver.Task) bool {
		return nt.Status != t.Status || nt.StatusMessage != t.StatusMessage || !nt.UpdatedAt.Equal(t.UpdatedAt)
	}
	w, ok := s.store.(driver.Watcher)
	if !ok {
		nt, err := s.watch(ctx, owner, t.ID, s.opts.Jobs.StatusTool, time.Second, changed)
		if nt == nil {
			return t, err
		}
		return nt, nil
	}
	kick := make(chan struct{}, 1)
	sub, err := w.Watch(ctx, []string{t.ID}, func(string) {
		s.forgetRead(t.ID) // before anyone reads on this news (see readcache.go)
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return t, err
	}
	select {
	case <-sub.Ready:
	case <-ctx.Done():
		return t, nil
	}
	for {
		// Read after the subscription is in place: a change made before
		// it is seen here, one made after it is announced.
		nt, err := s.lookup(context.WithoutCancel(ctx), owner, t.ID, s.opts.Jobs.StatusTool)
		if err != nil {
			return t, err
		}
		if changed(nt) || nt.Status.Terminal() {
			return nt, nil
		}
		select {
		case <-kick:
		case <-sub.Done:
			return nt, nil
		case <-ctx.Done():
			return nt, nil
		}
	}
}

// jobAnswer renders where the job t stands, for a model: its own result
// once completed, else its state and what to do next.
func (s *Server) jobAnswer(t *driver.Task) *mcp.CallToolResult {
	o := s.opts.Jobs
	id := t.ID
	st := jobState{TaskID: id, Tool: t.Tool, Status: t.Status, StatusMessage: t.StatusMessage}
	var b strings.Builder
	out := &mcp.CallToolResult{}
	switch t.Status {
	case driver.StatusCompleted:
		// The stored result carries the resultType of 2026-07-28: left out,
		// the go-sdk gives the answer the shape of the request's revision.
		var res mcp.CallToolResult
		if err := json.Unmarshal(withoutResultType(t.Result), &res); err == nil {
			res.Meta = relatedTask(id)
			if res.Content == nil {
				res.Content = []mcp.Content{}
			}
			return &res
		}
		fmt.Fprintf(&b, "Job %s (%s) has completed, but its result cannot be read.", id, t.Tool)
		out.IsError = true
	case driver.StatusFailed:
		st.Error = t.Error
		msg := "it failed"
		if t.Error != nil {
			msg = t.Error.Message
		}
		fmt.Fprintf(&b, "Job %s (%s) failed: %s", id, t.Tool, msg)
		out.IsError = true
	case driver.StatusCancelled:
		fmt.Fprintf(&b, "Job %s (%s) was cancelled.", id, t.Tool)
	case driver.StatusInputRequired:
		st.InputRequests = map[string]openQuestion{}
		fmt.Fprintf(&b, "Job %s (%s) waits for an answer", id, t.Tool)
		if t.StatusMessage != "" {
			fmt.Fprintf(&b, " (%s)", t.StatusMessage)
		}
		b.WriteString(".")
		for _, k := range slices.Sorted(maps.Keys(t.InputRequests)) {
			q := question(t.InputRequests[k])
			st.InputRequests[k] = q
			writeQuestion(&b, k, q, o.AnswerTool, id)
		}
		if len(t.InputRequests) == 0 {
			fmt.Fprintf(&b, " Call %s again in a moment.", o.StatusTool)
		}
	default:
		advice := s.pollAdvice(t, s.now())
		st.PollIntervalMs = advice.Milliseconds()
		fmt.Fprintf(&b, "Job %s (%s) is still working", id, t.Tool)
		if t.StatusMessage != "" {
			fmt.Fprintf(&b, ": %s", t.StatusMessage)
		}
		b.WriteString(".")
		if !t.WakeAt.IsZero() && t.WakeAt.After(s.now()) {
			fmt.Fprintf(&b, " It sleeps until %s (in %s).", t.WakeAt.UTC().Format(time.RFC3339), t.WakeAt.Sub(s.now()).Round(time.Second))
		}
		fmt.Fprintf(&b, " Call %s with {\"taskId\": %q} again to follow it (%s with the same taskId stops it).", o.StatusTool, id, o.CancelTool)
	}
	out.Content = []mcp.Content{&mcp.TextContent{Text: b.String()}}
	out.StructuredContent = st
	out.Meta = relatedTask(id)
	return out
}

// question reads a stored input request.
func question(req json.RawMessage) openQuestion {
	var r struct {
		Method string `json:"method"`
		Params struct {
			Message         string          `json:"message"`
			RequestedSchema json.RawMessage `json:"requestedSchema"`
			URL             string          `json:"url"`
		} `json:"params"`
	}
	_ = json.Unmarshal(req, &r)
	return openQuestion{Method: r.Method, Message: r.Params.Message, RequestedSchema: r.Params.RequestedSchema, URL: r.Params.URL}
}

// writeQuestion renders the open request key for a model: its message,
// the fields it wants, and the answer tool's call.
func writeQuestion(b *strings.Builder, key string, q openQuestion, answerTool, id string) {
	fmt.Fprintf(b, "\n\nQuestion %q", key)
	if q.Message != "" {
		fmt.Fprintf(b, ": %s", q.Message)
	}
	switch q.Method {
	case "elicitation/create":
	default:
		fmt.Fprintf(b, "\n(a %s request, which %s cannot answer; cancel the job or answer it from a client that declares the tasks extension)", q.Method, answerTool)
		return
	}
	if q.URL != "" {
		fmt.Fprintf(b, "\nThe user is to open %s; once done, call %s with {\"taskId\": %q, \"key\": %q, \"action\": \"accept\"}.", q.URL, answerTool, id, key)
		return
	}
	var schema jsonschema.Schema
	example := map[string]any{}
	if len(q.RequestedSchema) > 0 && json.Unmarshal(q.RequestedSchema, &schema) == nil && len(schema.Properties) > 0 {
		b.WriteString("\nFields:")
		for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
			p := schema.Properties[name]
			fmt.Fprintf(b, "\n- %s: %s", name, wants(p))
			if slices.Contains(schema.Required, name) {
				b.WriteString(", required")
			}
			if p != nil && p.Description != "" {
				fmt.Fprintf(b, " (%s)", p.Description)
			}
			if p != nil && p.Title != "" && p.Description == "" {
				fmt.Fprintf(b, " (%s)", p.Title)
			}
			example[name] = exampleValue(p)
		}
	}
	call, _ := json.Marshal(map[string]any{"taskId": id, "key": key, "action": "accept", "content": example})
	fmt.Fprintf(b, "\nAnswer with %s %s (or \"action\": \"decline\" to refuse).", answerTool, call)
}

// exampleValue is a placeholder of what prop accepts, for the example
// answer call.
func exampleValue(prop *jsonschema.Schema) any {
	if prop == nil {
		return "..."
	}
	if len(prop.Enum) > 0 {
		return prop.Enum[0]
	}
	if prop.Default != nil {
		var v any
		if json.Unmarshal(prop.Default, &v) == nil {
			return v
		}
	}
	switch prop.Type {
	case "boolean":
		return true
	case "integer", "number":
		return 0
	}
	return "..."
}

func (s *Server) answerTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a answerArgs
	if bad := jobArgs(req, &a); bad != nil {
		return bad, nil
	}
	if a.Key == "" {
		return toolErrorResult(errors.New("invalid arguments: key is required (the question's key, as " + s.opts.Jobs.StatusTool + " lists it)")), nil
	}
	if a.Action == "" {
		a.Action = "accept"
	}
	ans := map[string]json.RawMessage{"action": json.RawMessage(strconv.Quote(a.Action))}
	if len(a.Content) > 0 && string(a.Content) != "null" {
		ans["content"] = a.Content
	}
	raw, _ := json.Marshal(ans)
	owner := s.principal(ctx, req.GetExtra())
	// The question must be open: an answer to anything else would be
	// ignored, and the model should hear so.
	t, err := s.lookup(ctx, owner, a.TaskID, s.opts.Jobs.AnswerTool)
	if err != nil {
		return jobError(err), nil
	}
	open, t, err := s.openQuestions(ctx, owner, a.Key, t)
	if err != nil {
		return jobError(err), nil
	}
	if _, ok := open[a.Key]; !ok {
		keys := strings.Join(slices.Sorted(maps.Keys(open)), ", ")
		if keys == "" {
			keys = "none"
		}
		return toolErrorResult(fmt.Errorf("job %s (%s, %s) has no open question %q (open: %s); call %s to see where it stands",
			t.ID, t.Tool, t.Status, a.Key, keys, s.opts.Jobs.StatusTool)), nil
	}
	if _, err := s.updateTask(ctx, owner, a.TaskID, map[string]json.RawMessage{a.Key: raw}); err != nil {
		return jobError(err), nil
	}
	// The answer usually resumes the job: give the model its next state,
	// after a short wait for the worker to take it.
	nt, err := s.lookup(ctx, owner, a.TaskID, s.opts.Jobs.AnswerTool)
	if err == nil && nt.Status == driver.StatusWorking {
		if w, err := s.waitForChange(ctx, owner, nt, min(2*time.Second, s.statusWait())); err == nil {
			nt = w
		}
	}
	if err != nil || nt == nil {
		nt = t
	}
	res := s.jobAnswer(nt)
	if tc, ok := res.Content[0].(*mcp.TextContent); ok && nt.Status != driver.StatusCompleted {
		tc.Text = fmt.Sprintf("Answer to %q recorded. ", a.Key) + tc.Text
	}
	return res, nil
}

func (s *Server) cancelTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var a cancelArgs
	if bad := jobArgs(req, &a); bad != nil {
		return bad, nil
	}
	owner := s.principal(ctx, req.GetExtra())
	if _, err := s.cancelTask(ctx, owner, a.TaskID); err != nil {
		return jobError(err), nil
	}
	// A parked job is cancelled at once; a running step stops at its next
	// chance: wait a little for it.
	wctx, cancel := context.WithTimeout(ctx, min(legacyCancelWait, s.holdBudget()))
	defer cancel()
	t, err := s.watch(wctx, owner, a.TaskID, s.opts.Jobs.CancelTool, cancelPoll, nil)
	if t == nil {
		return jobError(err), nil
	}
	if t.Status == driver.StatusCompleted || t.Status == driver.StatusFailed {
		res := s.jobAnswer(t)
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			tc.Text = "The job ended before the cancellation reached it. " + tc.Text
		}
		return res, nil
	}
	st := jobState{TaskID: t.ID, Tool: t.Tool, Status: t.Status}
	text := fmt.Sprintf("Job %s (%s) is cancelled.", t.ID, t.Tool)
	if !t.Status.Terminal() {
		text = fmt.Sprintf("Job %s (%s): cancellation requested; the step in flight ends first (call %s to see it end).", t.ID, t.Tool, s.opts.Jobs.StatusTool)
	}
	s.log.Debug("job cancelled through the cancel tool", slog.String("task", t.ID))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: st, Meta: relatedTask(t.ID)}, nil
}

// withoutResultType returns the JSON object raw without its resultType.
func withoutResultType(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	delete(m, "resultType")
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// questionWait bounds how long an answer waits for its question to open:
// the job's handle shows the questions its call asked inline, which the
// task asks again, durably, once a worker has replayed it up to them.
const questionWait = 5 * time.Second

// openQuestions returns the open input requests of owner's task t (as
// lookup read it) and the task as last read. While key is not among them
// and the task is working, the question may not be open yet (a job's
// handle shows it before a worker parks the task on it): it reads again
// until it opens, the task leaves working, or questionWait (within the
// invocation's budget) has passed.
func (s *Server) openQuestions(ctx context.Context, owner, key string, t *driver.Task) (map[string]json.RawMessage, *driver.Task, error) {
	wctx, cancel := context.WithTimeout(ctx, min(questionWait, s.holdBudget()))
	defer cancel()
	for {
		ctx2, cancel2 := context.WithTimeout(ctx, s.opts.StoreTimeout)
		open, err := await(ctx2, s.storeDirect, func(ctx context.Context) (map[string]json.RawMessage, error) {
			return s.store.Outstanding(ctx, owner, t.ID, s.now())
		})
		cancel2()
		if err != nil {
			return nil, t, storeUnavailable()
		}
		if _, ok := open[key]; ok || t.Status != driver.StatusWorking {
			return open, t, nil
		}
		if sleepCtx(wctx, 100*time.Millisecond) != nil {
			return open, t, nil
		}
		if nt, err := s.read(ctx, owner, t.ID); err == nil {
			t = nt
		}
	}
}
