package tasks

// The legacy layer: clients on protocol revisions before 2026-07-28, which
// the go-sdk serves through its stateless handler, and which this layer
// completes where the go-sdk cannot serve them statelessly or does not know
// the methods. For every such request it:
//
//   - issues, at initialize, an Mcp-Session-Id that carries what later
//     requests need of the client's capabilities (elicitation), sealed, so
//     any instance reads it back (the go-sdk ignores the header when
//     stateless);
//   - on LegacyProtocolVersion (2025-11-25), speaks that revision's tasks
//     utility from the same store as the 2026-07-28 extension (package tasks,
//     legacy.go): task-augmented tools/call (params.task), tasks/get,
//     tasks/result, tasks/list, tasks/cancel, and input rounds carried as
//     elicitation/create requests on the tasks/result stream, whose
//     answers (POSTed JSON-RPC responses, on any instance) become the
//     task's input;
//   - runs tools/call of task tools without params.task inline, within the
//     invocation's budget, with elicitation when the client declared it
//     (the run becomes a task for its input rounds);
//   - answers an unknown method with a JSON-RPC -32601 body (the go-sdk
//     answers older revisions with HTTP 400 text/plain).
//
// Requests on 2026-07-28 pass through untouched, and no 2026-07-28 shape is
// ever sent on this path. Errors go in-band (HTTP 200), as older revisions
// carry them.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// inputIDPrefix starts the JSON-RPC id of an elicitation/create request
// the server sends for a task's input request; the rest names the task and
// the input key, so the answer is routed on any instance.
const inputIDPrefix = "mcptasks-input."

// resumeRetryMs is the SSE retry hint of a tasks/result stream closed at the
// end of its budget: the client reconnects after it.
const resumeRetryMs = 500

// legacy is the legacy layer in front of next.
type legacy struct {
	ts   *Server
	next http.Handler
	lim  *limits
}

func (l *legacy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		if tok := r.Header.Get("Last-Event-ID"); tok != "" {
			if res, ok := l.ts.openLegacyResume(tok); ok {
				l.hold(r.Context(), w, r, res.RequestID, res.TaskID, false)
				return
			}
		}
		l.next.ServeHTTP(w, r)
		return
	}
	version := strings.TrimSpace(r.Header.Get("MCP-Protocol-Version"))
	if r.Method != http.MethodPost || version >= ProtocolVersion {
		l.next.ServeHTTP(w, r)
		return
	}
	body, err := peekBody(r)
	if err != nil {
		bodyError(w, err)
		return
	}
	top, ok := object(body)
	if !ok || len(body) > maxPeek {
		l.next.ServeHTTP(w, r)
		return
	}
	method, hasMethod, mok := str(top, "method")
	if !mok {
		l.next.ServeHTTP(w, r)
		return
	}
	if !hasMethod {
		if l.serveAnswer(w, r, top) {
			return
		}
		l.next.ServeHTTP(w, r)
		return
	}
	id, isCall := sdkID(top)
	params, _ := object(top["params"])
	switch {
	case !legacyTransportOK(r.Header):
		// The go-sdk refuses it (415 or 400), as for any request.
	case method == "initialize":
		if v, _, _ := str(params, "protocolVersion"); v != "" && v < ProtocolVersion {
			if sid, err := l.ts.legacySessionID(top["params"]); err == nil {
				w.Header().Set("Mcp-Session-Id", sid)
			}
		}
	case !isCall || version == "":
		// A request without the header names no revision the go-sdk
		// would not: it is the go-sdk's to answer.
	case method == "tools/call":
		if l.serveCall(w, r, id, params, version) {
			return
		}
	case strings.HasPrefix(method, "tasks/"):
		l.serveTasks(w, r, id, method, params, version)
		return
	}
	if !isCall {
		l.next.ServeHTTP(w, r)
		return
	}
	nf := &notFoundWriter{ResponseWriter: w, method: method}
	l.next.ServeHTTP(nf, r)
	nf.finish(id)
}

// legacyTransportOK reports whether a POST passes the go-sdk's transport
// checks of Content-Type and Accept (mcp/streamable.go serveStateless):
// only then does this layer answer it itself.
func legacyTransportOK(h http.Header) bool {
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := accepts(h)
	return jsonOK && streamOK
}

// principal is the request's principal, as the other paths take it.
func (l *legacy) principal(r *http.Request) string {
	return l.ts.principalOf(r.Context(), &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header})
}

// serveCall serves a tools/call of a task tool: with params.task (on
// 2025-11-25) it creates a task; without, it runs the tool inline. It
// reports false for anything else (an ordinary tool), which the go-sdk
// serves.
func (l *legacy) serveCall(w http.ResponseWriter, r *http.Request, id json.RawMessage, params map[string]json.RawMessage, version string) bool {
	name, _, ok := str(params, "name")
	if !ok || name == "" {
		return false
	}
	_, isTask := l.ts.taskTool(name)
	taskParam, augmented := object(params["task"])
	augmented = augmented && version == LegacyProtocolVersion
	if !isTask {
		if augmented {
			writeLegacy(w, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tool " + name + " does not run as a task"})
			return true
		}
		return false
	}
	owner := l.principal(r)
	if augmented {
		var ttl time.Duration
		if raw, ok := taskParam["ttl"]; ok && string(raw) != "null" {
			var ms float64
			if json.Unmarshal(raw, &ms) != nil || ms < 0 {
				writeLegacy(w, id, nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "params.task.ttl must be a non-negative number of milliseconds"})
				return true
			}
			ttl = millis(ms, MaxTTL)
		}
		res, err := l.ts.legacyCreateTask(r.Context(), owner, name, params["arguments"], ttl)
		writeLegacy(w, id, res, err)
		return true
	}
	elicitation, _ := l.ts.openLegacySession(r.Header.Get("Mcp-Session-Id"))
	// One budget for the whole call, from its arrival: the inline run,
	// then any hold.
	ctx, cancel := budget(r, l.ts.holdBudget())
	defer cancel()
	out := l.ts.callLegacyInline(ctx, owner, name, params["arguments"], elicitation)
	if out.TaskID == "" {
		writeLegacy(w, id, out.Result, out.Err)
		return true
	}
	l.hold(ctx, w, r, id, out.TaskID, true)
	return true
}

// millis converts a client's count of milliseconds to a duration, at most
// limit: a count whose duration would overflow (18446744073710 ms is 585
// years) is limit, not what the multiplication wraps to.
func millis(ms float64, limit time.Duration) time.Duration {
	if ms >= float64(limit/time.Millisecond) {
		return limit
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// serveTasks serves the tasks utility of 2025-11-25 (and answers -32601
// for tasks/* on other older revisions, which have none).
func (l *legacy) serveTasks(w http.ResponseWriter, r *http.Request, id json.RawMessage, method string, params map[string]json.RawMessage, version string) {
	known := method == methodGet || method == methodCancel || method == methodResult ||
		(method == methodList && l.ts.listEnabled())
	if version != LegacyProtocolVersion || !known {
		writeLegacy(w, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%q unsupported", method)})
		return
	}
	owner := l.principal(r)
	if method == methodList {
		cursor, _, ok := str(params, "cursor")
		if !ok {
			writeLegacy(w, id, nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "params.cursor must be a string"})
			return
		}
		res, err := l.ts.legacyListTasks(r.Context(), owner, cursor)
		writeLegacy(w, id, res, err)
		return
	}
	taskID, _, ok := str(params, "taskId")
	if !ok || taskID == "" {
		writeLegacy(w, id, nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "params.taskId is required"})
		return
	}
	switch method {
	case methodGet:
		res, err := l.ts.legacyGetTask(r.Context(), owner, taskID)
		writeLegacy(w, id, res, err)
	case methodCancel:
		res, err := l.ts.legacyCancelTask(r.Context(), owner, taskID)
		writeLegacy(w, id, res, err)
	default:
		l.hold(r.Context(), w, r, id, taskID, false)
	}
}

// hold answers a request whose answer is the outcome of a task
// (tasks/result, or an inline call that became a task for its input rounds)
// on an SSE stream: it sends each input request of the task as a request to
// the client, and the task's outcome once it is terminal, within the
// invocation's budget (ctx's deadline, at most the hold budget from the
// request's arrival; a store read in flight at its end is cut short). A
// tasks/result still waiting at the budget's end closes its stream with a
// resumption id (the client resumes it with GET and Last-Event-ID, on any
// instance); an inline call is refused then, or at once when the task
// sleeps past the budget. A tasks/result counts against the endpoint's
// stream bounds (limits.go): past them it is answered at once with
// CodeTooManyStreams and Retry-After.
func (l *legacy) hold(ctx context.Context, w http.ResponseWriter, r *http.Request, id json.RawMessage, taskID string, inline bool) {
	owner := l.principal(r)
	if !inline {
		release, err := l.lim.stream(r, owner)
		if err != nil {
			retryAfter(w)
			writeLegacy(w, id, nil, err)
			return
		}
		defer release()
	}
	ctx, cancel := context.WithDeadline(ctx, arrivedAt(r).Add(l.ts.holdBudget()))
	defer cancel()
	deadline, _ := ctx.Deadline()
	s := newSSE(w)
	// A write the client does not take ends at the platform's limit.
	_ = s.rc.SetWriteDeadline(arrivedAt(r).Add(l.ts.Options().MaxDuration))
	if !inline {
		tok, err := l.ts.legacyResumeToken(legacyResume{TaskID: taskID, RequestID: id})
		if err == nil {
			s.prime(tok)
		}
	}
	sent := map[string]bool{}
	var refusal string
	t, err := l.ts.watchTask(ctx, owner, taskID, func(t *driver.Task) bool {
		keys := make([]string, 0, len(t.InputRequests))
		for k := range t.InputRequests {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !sent[k] {
				sent[k] = true
				s.message(inputRequest(t.ID, k, t.InputRequests[k], !inline))
			}
		}
		if inline && t.Status == driver.StatusWorking && t.WakeAt.After(deadline) {
			refusal = "it sleeps until " + t.WakeAt.UTC().Format(time.RFC3339)
			return true
		}
		return false
	})
	switch {
	case t != nil && t.Status.Terminal():
		res, err := legacyOutcome(t, !inline)
		s.message(response(id, res, err))
	case refusal != "":
		res, err := l.ts.refuseHeld(r.Context(), owner, t, refusal)
		s.message(response(id, res, err))
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil && !inline:
		s.retry(resumeRetryMs) // the stream ends; the client resumes it
	case t != nil && errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		res, err := l.ts.refuseHeld(r.Context(), owner, t, "it was still "+string(t.Status)+" at the budget's end")
		s.message(response(id, res, err))
	case r.Context().Err() == nil:
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			err = &jsonrpc.Error{Code: CodeInternalError, Message: "task store unavailable; retry shortly"}
		}
		s.message(response(id, nil, err))
	}
}

// inputRequest is the JSON-RPC request that asks the client for a task's
// input key: the stored request's method and params, related to the task.
func inputRequest(taskID, key string, stored json.RawMessage, related bool) any {
	var req struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(stored, &req)
	if req.Params == nil {
		req.Params = map[string]json.RawMessage{}
	}
	if related {
		var meta map[string]any
		if m, ok := req.Params["_meta"]; ok {
			_ = json.Unmarshal(m, &meta)
		}
		if meta == nil {
			meta = map[string]any{}
		}
		meta[RelatedTaskMetaKey] = map[string]string{"taskId": taskID}
		b, _ := json.Marshal(meta)
		req.Params["_meta"] = b
	}
	return map[string]any{"jsonrpc": "2.0", "id": inputID(taskID, key), "method": req.Method, "params": req.Params}
}

// inputID names a task's input key as a JSON-RPC id.
func inputID(taskID, key string) string {
	return inputIDPrefix + taskID + "." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// parseInputID reads an id from inputID.
func parseInputID(id string) (taskID, key string, ok bool) {
	rest, ok := strings.CutPrefix(id, inputIDPrefix)
	if !ok {
		return "", "", false
	}
	taskID, enc, ok := strings.Cut(rest, ".")
	if !ok || !driver.ValidID(taskID) {
		return "", "", false
	}
	k, err := base64.RawURLEncoding.DecodeString(enc)
	return taskID, string(k), err == nil && len(k) > 0
}

// serveAnswer takes the client's JSON-RPC response to an input request
// (inputID): its result becomes the task's input under that key (an error
// response counts as a cancelled elicitation), as tasks/update delivers
// it, and the response is acknowledged with 202. It reports false for a
// response it does not know, which the go-sdk gets.
func (l *legacy) serveAnswer(w http.ResponseWriter, r *http.Request, top map[string]json.RawMessage) bool {
	idStr, _, ok := str(top, "id")
	if !ok {
		return false
	}
	taskID, key, ok := parseInputID(idStr)
	if !ok {
		return false
	}
	answer, hasResult := top["result"]
	if !hasResult {
		answer = json.RawMessage(`{"action":"cancel"}`)
	}
	if _, err := l.ts.updateTask(r.Context(), l.principal(r), taskID, map[string]json.RawMessage{key: answer}); err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) && we.Code == CodeInvalidParams && strings.HasPrefix(we.Message, "unknown taskId") {
			// Unknown or foreign task: nothing to deliver to, as for a
			// response to a request the server never sent.
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		if errors.As(err, &we) && we.Code == CodeInvalidParams {
			// An answer its request refuses: nothing of it is kept, and
			// the task waits on. The transport's refusal of a response it
			// cannot accept is an HTTP error, with a JSON-RPC error
			// without id in the body.
			b, _ := marshal(struct {
				JSONRPC string         `json:"jsonrpc"`
				Error   *jsonrpc.Error `json:"error"`
			}{"2.0", we})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(b)
			return true
		}
		http.Error(w, "delivering the answer failed; send it again", http.StatusServiceUnavailable)
		return true
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// response is a JSON-RPC response message.
func response(id json.RawMessage, res mcp.Result, err error) any {
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			we = &jsonrpc.Error{Code: CodeInternalError, Message: err.Error()}
		}
		return struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *jsonrpc.Error  `json:"error"`
		}{"2.0", id, we}
	}
	return struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  mcp.Result      `json:"result"`
	}{"2.0", id, res}
}

// writeLegacy writes a JSON-RPC response as older revisions carry it:
// application/json, HTTP 200, errors in-band.
func writeLegacy(w http.ResponseWriter, id json.RawMessage, res mcp.Result, err error) {
	b, merr := marshal(response(id, res, err))
	if merr != nil {
		b, _ = marshal(response(id, nil, &jsonrpc.Error{Code: CodeInternalError, Message: "encoding the result: " + merr.Error()}))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// sse writes one response's Server-Sent Events.
type sse struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

func (s *sse) write(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(b)
	_ = s.rc.Flush()
}

// prime sends an event that only carries an id, which the client resumes
// the stream from.
func (s *sse) prime(id string) { s.write([]byte("id: " + id + "\ndata: \n\n")) }

// retry tells the client how long to wait before it resumes.
func (s *sse) retry(ms int) { s.write([]byte("retry: " + strconv.Itoa(ms) + "\n\n")) }

// message sends a JSON-RPC message.
func (s *sse) message(v any) {
	b, err := marshal(v)
	if err != nil {
		return
	}
	var buf bytes.Buffer
	buf.WriteString("event: message\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	s.write(buf.Bytes())
}

// unknownMethods gives a plain go-sdk server (New) the -32601 answer to
// unknown methods of older revisions that the legacy layer gives a tasks
// server.
func unknownMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || strings.TrimSpace(r.Header.Get("MCP-Protocol-Version")) >= ProtocolVersion {
			next.ServeHTTP(w, r)
			return
		}
		body, err := peekBody(r)
		if err != nil {
			bodyError(w, err)
			return
		}
		top, ok := object(body)
		method, _, mok := str(top, "method")
		id, isCall := sdkID(top)
		if !ok || !mok || !isCall || len(body) > maxPeek {
			next.ServeHTTP(w, r)
			return
		}
		nf := &notFoundWriter{ResponseWriter: w, method: method}
		next.ServeHTTP(nf, r)
		nf.finish(id)
	})
}

// notFoundWriter passes the go-sdk's answer through, except its HTTP 400
// text/plain refusal of a method it does not know, which becomes the
// JSON-RPC -32601 error older revisions carry in-band.
type notFoundWriter struct {
	http.ResponseWriter
	method    string
	intercept bool
	buf       bytes.Buffer
}

func (n *notFoundWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && strings.HasPrefix(n.Header().Get("Content-Type"), "text/plain") {
		n.intercept = true
		return
	}
	n.ResponseWriter.WriteHeader(code)
}

func (n *notFoundWriter) Write(b []byte) (int, error) {
	if n.intercept {
		return n.buf.Write(b)
	}
	return n.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (n *notFoundWriter) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// finish writes what was held back.
func (n *notFoundWriter) finish(id json.RawMessage) {
	if !n.intercept {
		return
	}
	if strings.Contains(n.buf.String(), strconv.Quote(n.method)+" unsupported") {
		n.Header().Del("X-Content-Type-Options")
		writeLegacy(n.ResponseWriter, id, nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found: " + n.method})
		return
	}
	n.ResponseWriter.WriteHeader(http.StatusBadRequest)
	_, _ = n.ResponseWriter.Write(n.buf.Bytes())
}
