// Package faketasks is a scripted, in-memory MCP server with the tasks
// extension (SEP-2663, protocol revision 2026-07-28) for the tests and
// examples of package client. Each task follows a script of steps, one
// tasks/get at a time; every request is recorded, and faults (HTTP errors,
// JSON-RPC errors, dropped connections) can be injected.
//
// It is a test double of the wire, not a server: package client is tested
// against the real server by the e2e tests.
package faketasks

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a tool of the fake server.
type Tool struct {
	// InputSchema is listed by tools/list (default {"type":"object"}).
	InputSchema any
	// Sync, when set, answers tools/call at once.
	Sync *mcp.CallToolResult
	// Before are MRTR input requests: the first tools/call answers
	// input_required with them, and a retry that answers them all creates
	// the task.
	Before map[string]*mcp.ElicitParams
	// Steps is the script of the task a tools/call creates.
	Steps []Step
}

// Step is one stage of a task's script.
type Step struct {
	// Message is the statusMessage while on this step.
	Message string
	// Polls is how many tasks/get show this step before the task moves on
	// (default 1). Input and terminal steps ignore it.
	Polls int
	// PollIntervalMs is the pollIntervalMs announced while on this step
	// (default Options.PollIntervalMs).
	PollIntervalMs int64
	// Ask parks the task in input_required until every key is answered.
	Ask map[string]*mcp.ElicitParams
	// Stale keeps answered keys listed in inputRequests until the step
	// ends, like a server whose reads lag its writes.
	Stale bool
	// Result completes the task; ResultFunc computes the result from the
	// answers so far.
	Result     *mcp.CallToolResult
	ResultFunc func(answers map[string]json.RawMessage) *mcp.CallToolResult
	// Error fails the task.
	Error *jsonrpc.Error
	// IgnoreCancel makes a tasks/cancel on this step a no-op: the task
	// goes on (cancellation is cooperative).
	IgnoreCancel bool
}

func (s *Step) terminal() bool { return s.Result != nil || s.ResultFunc != nil || s.Error != nil }

// Fault replaces the answer to one request.
type Fault struct {
	// Hangup closes the connection without an answer.
	Hangup bool
	// Status is the HTTP status (default 200 with RPCError, 500 without).
	Status int
	// Body is the body of a plain HTTP error.
	Body string
	// RPCError answers with this JSON-RPC error.
	RPCError *jsonrpc.Error
}

// Options configure a Server.
type Options struct {
	// SSE answers with text/event-stream (a notification event, then the
	// response) instead of a JSON body.
	SSE bool
	// PollIntervalMs is announced by default (default 1000).
	PollIntervalMs int64
	// Fault is consulted before each request is handled (serially, under
	// the server's lock); a non-nil Fault replaces the answer. The request
	// is recorded either way.
	Fault func(r Request) *Fault
	// PageSize paginates tools/list (default: one page).
	PageSize int
}

// Request is a recorded request.
type Request struct {
	At     time.Time
	Method string
	Header http.Header
	// Params are the request's params, _meta included.
	Params map[string]json.RawMessage
	// N counts the requests of this method so far, this one included.
	N int
}

// Param decodes the request's param key into v.
func (r Request) Param(key string, v any) error { return json.Unmarshal(r.Params[key], v) }

// Server is the fake server. Its URL is the endpoint.
type Server struct {
	URL  string
	srv  *httptest.Server
	opts Options

	mu     sync.Mutex
	tools  map[string]Tool
	tasks  map[string]*task
	log    []Request
	counts map[string]int
}

type task struct {
	id      string
	tool    Tool
	step    int
	polls   int
	status  string
	answers map[string]json.RawMessage
	created time.Time
	updates []map[string]json.RawMessage
}

// New starts a fake server with tools; Close stops it.
func New(tools map[string]Tool, opts *Options) *Server {
	s := &Server{tools: tools, tasks: map[string]*task{}, counts: map[string]int{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.PollIntervalMs == 0 {
		s.opts.PollIntervalMs = 1000
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/mcp"
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the requests received so far, in order; with methods,
// only those of these methods.
func (s *Server) Requests(methods ...string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.log {
		if len(methods) == 0 || slices.Contains(methods, r.Method) {
			out = append(out, r)
		}
	}
	return out
}

// Updates returns the inputResponses of each tasks/update the task id
// received, in order.
func (s *Server) Updates(id string) []map[string]json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tasks[id]; t != nil {
		return slices.Clone(t.updates)
	}
	return nil
}

// Status returns the current status of the task id ("" if unknown).
func (s *Server) Status(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tasks[id]; t != nil {
		return t.status
	}
	return ""
}

// Forget drops the task id, as a server does when its TTL passes.
func (s *Server) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, id)
}

type rpcRequest struct {
	ID     json.RawMessage            `json:"id"`
	Method string                     `json:"method"`
	Params map[string]json.RawMessage `json:"params"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	var req rpcRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.counts[req.Method]++
	rec := Request{At: time.Now(), Method: req.Method, Header: r.Header.Clone(), Params: req.Params, N: s.counts[req.Method]}
	s.log = append(s.log, rec)
	var fault *Fault
	if s.opts.Fault != nil {
		fault = s.opts.Fault(rec)
	}
	var result any
	var rpcErr *jsonrpc.Error
	if fault == nil {
		result, rpcErr = s.handle(req)
	}
	s.mu.Unlock()

	switch {
	case fault != nil && fault.Hangup:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("faketasks: cannot hijack")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case fault != nil && fault.RPCError == nil:
		status := fault.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		fmt.Fprint(w, fault.Body)
		return
	case fault != nil:
		rpcErr = fault.RPCError
	}
	status := http.StatusOK
	msg := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	if rpcErr != nil {
		msg["error"] = rpcErr
		if fault != nil && fault.Status != 0 {
			status = fault.Status
		} else if fault == nil {
			status = http.StatusBadRequest
		}
	} else {
		msg["result"] = result
	}
	body, _ := json.Marshal(msg)
	if s.opts.SSE && status == http.StatusOK {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		fmt.Fprint(w, ": a comment\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\n")
		fmt.Fprint(w, "data: \"params\":{\"level\":\"info\",\"data\":\"hello\"}}\n\n")
		fmt.Fprintf(w, "event: message\nid: 1\ndata: %s\n\n", body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func invalid(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// handle answers req; s.mu is held.
func (s *Server) handle(req rpcRequest) (any, *jsonrpc.Error) {
	var taskID string
	if raw, ok := req.Params["taskId"]; ok {
		_ = json.Unmarshal(raw, &taskID)
	}
	switch req.Method {
	case "tools/list":
		return s.list(req)
	case "tools/call":
		return s.call(req)
	case "tasks/get":
		t := s.tasks[taskID]
		if t == nil {
			return nil, invalid("unknown taskId: %s", taskID)
		}
		return s.get(t), nil
	case "tasks/update":
		t := s.tasks[taskID]
		if t == nil {
			return nil, invalid("unknown taskId: %s", taskID)
		}
		var resp map[string]json.RawMessage
		_ = json.Unmarshal(req.Params["inputResponses"], &resp)
		t.updates = append(t.updates, resp)
		if st := &t.tool.Steps[t.step]; st.Ask != nil {
			for k, v := range resp {
				if _, asked := st.Ask[k]; asked {
					if _, done := t.answers[k]; !done {
						t.answers[k] = v
					}
				}
			}
		}
		return map[string]any{"resultType": "complete"}, nil
	case "tasks/cancel":
		t := s.tasks[taskID]
		if t == nil {
			return nil, invalid("unknown taskId: %s", taskID)
		}
		if !terminal(t.status) && !t.tool.Steps[t.step].IgnoreCancel {
			t.status = "cancelled"
		}
		return map[string]any{"resultType": "complete"}, nil
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "unsupported " + req.Method}
	}
}

func (s *Server) list(req rpcRequest) (any, *jsonrpc.Error) {
	names := slices.Sorted(maps.Keys(s.tools))
	start := 0
	if raw, ok := req.Params["cursor"]; ok {
		var c string
		_ = json.Unmarshal(raw, &c)
		_, _ = fmt.Sscanf(c, "page-%d", &start)
	}
	end := len(names)
	if n := s.opts.PageSize; n > 0 && start+n < end {
		end = start + n
	}
	tools := []map[string]any{}
	for _, n := range names[start:end] {
		schema := s.tools[n].InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		tools = append(tools, map[string]any{"name": n, "inputSchema": schema})
	}
	res := map[string]any{"resultType": "complete", "tools": tools}
	if end < len(names) {
		res["nextCursor"] = fmt.Sprintf("page-%d", end)
	}
	return res, nil
}

func (s *Server) call(req rpcRequest) (any, *jsonrpc.Error) {
	var name string
	_ = json.Unmarshal(req.Params["name"], &name)
	tool, ok := s.tools[name]
	if !ok {
		return nil, invalid("unknown tool %q", name)
	}
	if tool.Sync != nil {
		return tool.Sync, nil
	}
	answers := map[string]json.RawMessage{}
	if len(tool.Before) > 0 {
		_ = json.Unmarshal(req.Params["inputResponses"], &answers)
		missing := map[string]any{}
		for k, p := range tool.Before {
			if _, ok := answers[k]; !ok {
				missing[k] = map[string]any{"method": "elicitation/create", "params": p}
			}
		}
		if len(missing) > 0 {
			return map[string]any{"resultType": "input_required", "inputRequests": missing, "requestState": "state-1"}, nil
		}
	}
	t := &task{id: fmt.Sprintf("task-%d", len(s.tasks)+1), tool: tool, status: "working", answers: answers, created: time.Now().UTC()}
	s.tasks[t.id] = t
	v := s.view(t, s.pollInterval(t))
	v["resultType"] = "task"
	return v, nil
}

func (s *Server) pollInterval(t *task) int64 {
	if n := t.tool.Steps[t.step].PollIntervalMs; n > 0 {
		return n
	}
	return s.opts.PollIntervalMs
}

// get advances t by its script and returns its tasks/get view.
func (s *Server) get(t *task) map[string]any {
	for !terminal(t.status) {
		st := &t.tool.Steps[t.step]
		if st.terminal() {
			if st.Error != nil {
				t.status = "failed"
			} else {
				t.status = "completed"
			}
			break
		}
		if st.Ask != nil {
			if s.pending(t, st) == 0 {
				t.step++
				continue
			}
			t.status = "input_required"
			break
		}
		t.status = "working"
		t.polls++
		if t.polls > max(1, st.Polls) {
			t.step, t.polls = t.step+1, 0
			continue
		}
		break
	}
	v := s.view(t, s.pollInterval(t))
	v["resultType"] = "complete"
	st := &t.tool.Steps[t.step]
	switch t.status {
	case "completed":
		r := st.Result
		if st.ResultFunc != nil {
			r = st.ResultFunc(t.answers)
		}
		v["result"] = r
	case "failed":
		v["error"] = st.Error
	case "input_required":
		reqs := map[string]any{}
		for k, p := range st.Ask {
			if _, done := t.answers[k]; !done || st.Stale {
				reqs[k] = map[string]any{"method": "elicitation/create", "params": p}
			}
		}
		v["inputRequests"] = reqs
	}
	return v
}

func (s *Server) pending(t *task, st *Step) int {
	n := 0
	for k := range st.Ask {
		if _, done := t.answers[k]; !done {
			n++
		}
	}
	return n
}

func (s *Server) view(t *task, poll int64) map[string]any {
	ts := t.created.Format("2006-01-02T15:04:05.000Z07:00")
	return map[string]any{
		"taskId": t.id, "status": t.status, "statusMessage": t.tool.Steps[t.step].Message,
		"createdAt": ts, "lastUpdatedAt": ts, "ttlMs": 3600000, "pollIntervalMs": poll,
	}
}

func terminal(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }
