package tasks

// The task stream: a subscriptions/listen (SEP-2575) whose
// params.notifications names taskIds (SEP-2663) is served here, in front of
// the go-sdk, which knows no task subscriptions (its
// NotificationSubscriptions has no taskIds). Every other listen (list
// changes, resource updates) goes on to the go-sdk unchanged, which serves
// it as it always has. A listen that names taskIds is answered with one SSE
// stream:
//
//  1. notifications/subscriptions/acknowledged, its
//     _meta["io.modelcontextprotocol/subscriptionId"] the request's id and
//     its notifications.taskIds the requested ids of tasks the caller owns
//     (an unknown id and someone else's task are left out alike). Other
//     kinds asked for in the same request are not acknowledged: a client
//     listens for them on a listen of their own.
//  2. notifications/tasks with each accepted task's state at once, then at
//     each change, the task as tasks/get shows it (result, error or
//     inputRequests inline, pollIntervalMs), under the same subscription id.
//     Nothing else (no notifications/progress or notifications/message).
//  3. The listen result ({resultType:"complete"} with the subscription id)
//     when every accepted task is terminal, or before the platform's time
//     limit (Server.ListenLimit, counted from the request's arrival:
//     the subscription's setup and a store read in flight are within it),
//     or when the store's subscription is lost: the client listens again
//     for tasks still live.
//
// A stream counts against the endpoint's stream bounds (limits.go): past
// them the listen is answered at once with CodeTooManyStreams (HTTP 429,
// Retry-After), and the client polls meanwhile.
//
// A request that does not declare the tasks extension gets -32021 (HTTP
// 400), as the extension requires. Transport checks are the lean path's
// (transportOK, parseMeta); a request they would not pass goes to the
// go-sdk, which answers it.

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listenPath serves task subscriptions in front of next.
type listenPath struct {
	ts                  *Server
	next                http.Handler
	localhostProtection bool
	lim                 *limits
}

// listenRequest is a subscriptions/listen that names taskIds.
type listenRequest struct {
	id        json.RawMessage
	taskIDs   []string
	extension bool
	// bad: taskIds is not an array of strings.
	bad bool
}

func (l *listenPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || strings.TrimSpace(r.Header.Get("Mcp-Method")) != methodListen || !transportOK(r, l.localhostProtection) {
		l.next.ServeHTTP(w, r)
		return
	}
	body, err := peekBody(r)
	if err != nil {
		bodyError(w, err)
		return
	}
	req, ok := parseListen(body)
	if !ok || len(body) > maxPeek {
		l.next.ServeHTTP(w, r)
		return
	}
	switch {
	case !req.extension:
		writeRPC(w, req.id, nil, missingCapability())
		return
	case req.bad:
		writeRPC(w, req.id, nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "subscriptions/listen: notifications.taskIds must be an array of strings"})
		return
	}
	owner := l.ts.principalOf(r.Context(), &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header})
	release, err := l.lim.stream(r, owner)
	if err != nil {
		retryAfter(w)
		writeRPC(w, req.id, nil, err)
		return
	}
	defer release()
	// The whole stream, its setup included, within the limit from the
	// request's arrival.
	ctx, cancel := budget(r, l.ts.listenLimit())
	defer cancel()
	tl, err := l.ts.listen(ctx, owner, req.taskIDs)
	if err != nil {
		writeRPC(w, req.id, nil, err)
		return
	}
	defer tl.Close()
	rc := http.NewResponseController(w)
	// A write the client does not take ends at the platform's limit; a
	// server-wide WriteTimeout must not cut the stream before.
	_ = rc.SetWriteDeadline(arrivedAt(r).Add(l.ts.Options().MaxDuration))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	subID := map[string]any{metaKeySubscriptionID: req.id}
	accepted := tl.Accepted
	if accepted == nil {
		accepted = []string{}
	}
	if writeSSE(w, rc, notification{JSONRPC: "2.0", Method: methodAcknowledged, Params: ackParams{Meta: subID, Notifications: ackNotifications{TaskIDs: accepted}}}) != nil {
		return
	}
	if tl.Run(ctx, func(d *detailedTask) error {
		return writeSSE(w, rc, notification{JSONRPC: "2.0", Method: methodTaskStatus, Params: taskParams{
			Meta: subID, wireTaskFields: d.wireTaskFields, Result: d.Result, Error: d.Error, InputRequests: d.InputRequests}})
	}) != nil {
		return // the client went away
	}
	meta := map[string]any{metaKeySubscriptionID: req.id, "io.modelcontextprotocol/serverInfo": l.ts.implementation()}
	_ = writeSSE(w, rc, struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  listenResult    `json:"result"`
	}{"2.0", req.id, listenResult{Meta: meta, ResultType: "complete"}})
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type ackParams struct {
	Meta          map[string]any   `json:"_meta"`
	Notifications ackNotifications `json:"notifications"`
}

type ackNotifications struct {
	TaskIDs []string `json:"taskIds"`
}

// taskParams are the params of notifications/tasks: the task as tasks/get
// shows it (without the result's resultType), and the subscription id.
type taskParams struct {
	Meta map[string]any `json:"_meta"`
	wireTaskFields
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         *driver.ErrorObject        `json:"error,omitempty"`
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

type listenResult struct {
	Meta       map[string]any `json:"_meta"`
	ResultType string         `json:"resultType"`
}

// writeSSE writes v as one SSE message event and flushes it.
func writeSSE(w http.ResponseWriter, rc *http.ResponseController, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(b)+len("event: message\ndata: \n\n"))
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	// A writer that cannot flush writes through (aws-lambda-go's lambdaurl
	// streams each Write through a pipe).
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// parseListen decodes a subscriptions/listen request and reports whether it
// is one for this layer: a call with an id, a 2026-07-28 _meta the go-sdk
// accepts, and params.notifications naming taskIds. Anything else is left
// to the go-sdk.
func parseListen(body []byte) (*listenRequest, bool) {
	if tooDeep(body, maxDepth) {
		return nil, false
	}
	top, ok := object(body)
	if !ok {
		return nil, false
	}
	if v, _, ok := str(top, "jsonrpc"); !ok || v != "2.0" {
		return nil, false
	}
	if v, _, ok := str(top, "method"); !ok || v != methodListen {
		return nil, false
	}
	id, ok := sdkID(top)
	if !ok {
		return nil, false
	}
	params, ok := object(top["params"])
	if !ok {
		return nil, false
	}
	notes, ok := object(params["notifications"])
	if !ok {
		return nil, false
	}
	raw, named := notes["taskIds"]
	if !named {
		return nil, false
	}
	req := &listenRequest{id: id}
	if req.extension, ok = parseMeta(params); !ok {
		return nil, false
	}
	if json.Unmarshal(raw, &req.taskIDs) != nil || len(raw) == 0 || raw[0] != '[' {
		req.bad = true
	}
	return req, true
}
