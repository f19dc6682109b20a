package tasks

// The lean path: tasks/get, tasks/update, tasks/cancel and task-creating
// tools/call answered with one parse of the body, instead of the go-sdk's
// several decodes (tasks/get is the dominant traffic of a tasks server:
// clients poll it). It serves a request only when it knows, for certain,
// the answer the go-sdk would give, and gives exactly that answer, byte for
// byte (FuzzLeanPath checks it); anything else goes to the go-sdk,
// unchanged. It mirrors these behaviours of go-sdk v1.8.0
// (AuditedSDKVersion; paths are in github.com/modelcontextprotocol/go-sdk):
//
//  1. POST only, Content-Type application/json by its base media type
//     (mcp/streamable.go serveStateless, baseMediaType).
//  2. Accept parsing: both application/json and text/event-stream, by
//     comma-separated base media types, with application/*, text/* and
//     */* (mcp/streamable.go streamableAccepts).
//  3. Loopback check: on a loopback listener, a Host that is not loopback
//     is refused, unless StreamableHTTPOptions.DisableLocalhostProtection
//     (mcp/streamable.go ServeHTTP, internal/util IsLoopback).
//  4. Last-Event-ID on a POST is refused (mcp/streamable.go servePOST).
//  5. Protocol version: the MCP-Protocol-Version header and
//     _meta["io.modelcontextprotocol/protocolVersion"] both 2026-07-28
//     (mcp/streamable.go servePOST; mcp/shared.go validateRequestMeta), a
//     version the server supports (mcp/server.go handle: -32022 otherwise;
//     Server.LeanPathDisabled turns the lean path off then).
//  6. Nesting depth: bodies nested deeper than 1000 are malformed
//     (internal/json checkMaxDepth).
//  7. One JSON-RPC call, not a batch, not a notification, "jsonrpc":"2.0",
//     whose method equals the Mcp-Method header (mcp/transport.go
//     readBatch; mcp/streamable_headers.go validateMcpHeaders), and for
//     tools/call whose params.name equals the one Mcp-Name header, for a
//     tool without Mcp-Param headers (validateParamHeaders).
//  8. Member names match exactly, not case-insensitively (internal/json
//     NewDecoder: DontMatchCaseInsensitiveStructFields).
//  9. Id normalisation: the go-sdk reads a numeric id as a float64 and
//     answers with its int64 (internal/jsonrpc2 MakeID), and re-encodes a
//     string id; only ids it echoes byte for byte are served here (sdkID,
//     used by the routing check, mirrors the rewrite).
//  10. _meta decoding: clientCapabilities required and decodable as the
//     go-sdk's clientCapabilitiesV2, clientInfo decodable as an
//     Implementation when present (mcp/shared.go validateRequestMeta,
//     decodeMetaValue); the tasks extension is found by its exact key.
//  11. serverInfo: every result carries the server's Implementation in
//     _meta["io.modelcontextprotocol/serverInfo"] (mcp/server.go
//     annotateServerInfo).
//  12. resultType: results carry it as the go-sdk sets it; tool-level
//     results of a task tool are shaped as the receiving middleware
//     returns them (Server.CreateTask).
//  13. Error to HTTP status: -32601 is 404; -32602, -32020, -32021 and
//     -32022 are 400; other errors 200 (mcp/streamable.go
//     extractErrorStatus, writeJSONRPCError).
//  14. Encoding: the response is encoded without HTML escaping, without a
//     trailing newline, members in the go-sdk's order (internal/jsonrpc2
//     jsonMarshal, wireCombined).
//
// Past those checks both paths call the same task operations
// (Server.GetTask, UpdateTask, CancelTask, CreateTask), after the
// same capability gate. Receiving middleware on the go-sdk server does not
// see requests answered here; Server.LeanPathDisabled reports it, and
// ForTasks then leaves the lean path out.

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcptasks/mcptasks/pkg/tasks/internal/jsonscan"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// leanPath is the lean path in front of next, the routing check and the
// go-sdk handler.
type leanPath struct {
	ts   *Server
	next http.Handler
	// localhostProtection is the go-sdk handler's DNS-rebinding check
	// (StreamableHTTPOptions.DisableLocalhostProtection unset).
	localhostProtection bool
	// meta remembers the verdicts on the _meta of recent requests.
	meta metaCache
}

func (l *leanPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Header.Get("Mcp-Method")
	if r.Method != http.MethodPost || !leanMethod(method) || !l.transportOK(r) {
		l.next.ServeHTTP(w, r)
		return
	}
	body, err := peekBody(r)
	if err != nil {
		bodyError(w, err)
		return
	}
	req, ok := parseLean(body, method, &l.meta)
	if !ok || len(body) > maxPeek {
		l.next.ServeHTTP(w, r)
		return
	}
	if method == "tools/call" {
		l.serveCall(w, r, req)
		return
	}
	if text := nameMismatch(r.Header, method, req.taskID); text != "" {
		writeRPC(w, req.id, nil, &jsonrpc.Error{Code: CodeHeaderMismatch, Message: text})
		return
	}
	res, err := l.serveTasks(r, method, req)
	writeRPC(w, req.id, l.withServerInfo(res), err)
}

func leanMethod(m string) bool {
	return m == methodGet || m == methodUpdate || m == methodCancel || m == "tools/call"
}

// principal is the principal of a request, taken as the go-sdk path takes
// it: from the token the authentication layer put in the context, and the
// request's headers.
func (l *leanPath) principal(r *http.Request) string {
	return l.ts.principalOf(r.Context(), &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header})
}

// serveTasks answers tasks/get, tasks/update or tasks/cancel: capability
// gate, then principal, then the operation.
func (l *leanPath) serveTasks(r *http.Request, method string, req *leanRequest) (mcp.Result, error) {
	if !req.extension {
		return nil, missingCapability()
	}
	owner := l.principal(r)
	switch method {
	case methodGet:
		return l.ts.getTask(r.Context(), owner, req.taskID)
	case methodCancel:
		return l.ts.cancelTask(r.Context(), owner, req.taskID)
	default:
		return l.ts.updateTask(r.Context(), owner, req.taskID, req.inputResponses)
	}
}

// serveCall creates a task for a tools/call of a task tool from a client
// that declares the extension, when nothing about the call needs the
// go-sdk: the tool takes no Mcp-Param headers and gathers no input first,
// the call carries no MRTR state and no Mcp-Param headers, and its Mcp-Name
// is exact. Everything else goes to the go-sdk.
func (l *leanPath) serveCall(w http.ResponseWriter, r *http.Request, req *leanRequest) {
	info, ok := l.ts.taskTool(req.name)
	if ok && req.inputResponses != nil {
		if err := answerShapes(req.inputResponses); err != nil {
			writeRPC(w, req.id, nil, err)
			return
		}
	}
	if !ok || info.GatherInputFirst || info.ParamHeaders || !req.extension || req.mrtr ||
		len(r.Header.Values("Mcp-Name")) != 1 || r.Header.Get("Mcp-Name") != req.name || hasParamHeaders(r.Header) {
		l.next.ServeHTTP(w, r)
		return
	}
	res, err := l.ts.createFor(r.Context(), l.principal(r), req.name, req.arguments)
	writeRPC(w, req.id, l.withServerInfo(res), err)
}

func hasParamHeaders(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "mcp-param-") {
			return true
		}
	}
	return false
}

// leanRequest is a request decoded once.
type leanRequest struct {
	id             json.RawMessage
	taskID         string
	inputResponses map[string]json.RawMessage
	name           string
	arguments      json.RawMessage
	// mrtr: the call carries inputResponses or requestState (an MRTR
	// retry, which the go-sdk's middleware handles).
	mrtr bool
	// extension: clientCapabilities.extensions names the tasks extension.
	extension bool
}

// capabilitiesV2 is the client capabilities of the 2026-07-28 _meta, as the
// go-sdk decodes them (its own type is unexported).
type capabilitiesV2 struct {
	mcp.ClientCapabilities
	//lint:ignore SA1019 decoded exactly as the go-sdk decodes it (roots is deprecated, still valid)
	Roots *mcp.RootCapabilities `json:"roots,omitempty"`
}

// object decodes a JSON object keeping its keys exactly as written: the
// go-sdk matches member names case-sensitively, unlike encoding/json's
// struct decoding, and the lean path must read what the go-sdk reads. It
// gives what json.Unmarshal into a map[string]json.RawMessage gives (a
// later member replaces an earlier one of the same name), without its
// second pass and copies: every value is a slice of raw.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, false
	}
	return members(raw), true
}

// members splits raw, a valid JSON object, into its members: each value's
// bytes as written, under its decoded key.
func members(raw []byte) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, 8)
	i := skipSpace(raw, 1)
	if raw[i] == '}' {
		return m
	}
	for {
		end := jsonscan.StringEnd(raw, i)
		key := decodeString(raw[i:end])
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the colon
		vend := jsonscan.ValueEnd(raw, i)
		m[key] = raw[i:vend:vend]
		i = skipSpace(raw, vend)
		if raw[i] != ',' {
			return m // the closing brace
		}
		i = skipSpace(raw, i+1)
	}
}

// decodeString decodes the valid JSON string literal q as encoding/json
// does: escapes resolved, invalid UTF-8 replaced. The member names of
// every request come without allocating.
func decodeString(q []byte) string {
	body := q[1 : len(q)-1]
	if k, ok := knownString(body); ok {
		return k
	}
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	var s string
	_ = json.Unmarshal(q, &s) // valid: it cannot fail
	return s
}

// knownString returns the member names and values every request holds as
// constants: the comparison of a []byte converted in place does not
// allocate, a conversion to a new string would.
func knownString(b []byte) (string, bool) {
	switch string(b) {
	case "jsonrpc":
		return "jsonrpc", true
	case "id":
		return "id", true
	case "method":
		return "method", true
	case "params":
		return "params", true
	case "_meta":
		return "_meta", true
	case "taskId":
		return "taskId", true
	case "name":
		return "name", true
	case "arguments":
		return "arguments", true
	case "inputResponses":
		return "inputResponses", true
	case "requestState":
		return "requestState", true
	case "2.0":
		return "2.0", true
	case "tasks/get":
		return "tasks/get", true
	case "tasks/update":
		return "tasks/update", true
	case "tasks/cancel":
		return "tasks/cancel", true
	case "tools/call":
		return "tools/call", true
	}
	return "", false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// str decodes an optional JSON string member; ok is false when it is present
// but not a string.
func str(m map[string]json.RawMessage, key string) (v string, present, ok bool) {
	raw, present := m[key]
	if !present {
		return "", false, true
	}
	if len(raw) < 2 || raw[0] != '"' {
		return "", true, false
	}
	return decodeString(raw), true, true
}

// parseLean decodes body and reports whether the lean path may serve it:
// a call (not a notification) of method with an id the go-sdk echoes
// unchanged, whose _meta is what the go-sdk accepts for 2026-07-28
// (protocolVersion exactly that, clientCapabilities and, if present,
// clientInfo decodable as the go-sdk decodes them). Anything else is left
// to the go-sdk.
func parseLean(body []byte, method string, mc *metaCache) (*leanRequest, bool) {
	if tooDeep(body, maxDepth) {
		return nil, false // the go-sdk refuses it as malformed
	}
	top, ok := object(body)
	if !ok {
		return nil, false
	}
	if v, _, ok := str(top, "jsonrpc"); !ok || v != "2.0" {
		return nil, false
	}
	if v, _, ok := str(top, "method"); !ok || v != method {
		return nil, false
	}
	id, ok := plainID(top)
	if !ok {
		return nil, false // a notification, or an id the go-sdk rewrites or refuses
	}
	params, ok := object(top["params"])
	if !ok {
		return nil, false
	}
	req := &leanRequest{id: id, arguments: params["arguments"]}
	_, hasState := params["requestState"]
	raw, hasResponses := params["inputResponses"]
	req.mrtr = hasState || hasResponses
	if req.taskID, _, ok = str(params, "taskId"); !ok {
		return nil, false
	}
	if req.name, _, ok = str(params, "name"); !ok {
		return nil, false
	}
	if hasResponses {
		if req.inputResponses, ok = object(raw); !ok {
			return nil, false
		}
	}
	if req.extension, ok = mc.parse(params); !ok {
		return nil, false
	}
	switch method {
	case "tools/call":
		return req, req.name != ""
	case methodUpdate:
		if req.inputResponses == nil {
			return nil, false
		}
	}
	return req, req.taskID != ""
}

// parseMeta checks params._meta as the go-sdk does for 2026-07-28
// (protocolVersion exactly that, clientCapabilities and, if present,
// clientInfo decodable as the go-sdk decodes them) and reports whether the
// capabilities declare the tasks extension.
func parseMeta(params map[string]json.RawMessage) (extension, ok bool) {
	meta, ok := object(params["_meta"])
	if !ok {
		return false, false
	}
	if v, _, ok := str(meta, "io.modelcontextprotocol/protocolVersion"); !ok || v != ProtocolVersion {
		return false, false
	}
	// clientCapabilities must decode as the go-sdk decodes it (else the
	// go-sdk answers -32602); the extension is then looked up by exact
	// member names, as the go-sdk's decoder matches them.
	caps := meta["io.modelcontextprotocol/clientCapabilities"]
	var typed capabilitiesV2
	if len(caps) == 0 || string(caps) == "null" || json.Unmarshal(caps, &typed) != nil {
		return false, false
	}
	capsObj, ok := object(caps)
	if !ok {
		return false, false
	}
	if ext, has := capsObj["extensions"]; has && string(ext) != "null" {
		extObj, ok := object(ext)
		if !ok {
			return false, false
		}
		_, extension = extObj[ExtensionID]
	}
	if info, has := meta["io.modelcontextprotocol/clientInfo"]; has {
		var impl mcp.Implementation
		if string(info) == "null" || json.Unmarshal(info, &impl) != nil {
			return false, false
		}
	}
	return extension, true
}

// maxDepth is the nesting the go-sdk's JSON decoder accepts.
const maxDepth = 1000

// tooDeep reports whether objects and arrays in b nest deeper than max.
func tooDeep(b []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > max {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// transportOK reports whether the go-sdk's transport checks would pass.
func (l *leanPath) transportOK(r *http.Request) bool { return transportOK(r, l.localhostProtection) }

// transportOK reports whether the go-sdk's transport checks would pass for
// a POST to a handler with or without localhost protection.
func transportOK(r *http.Request, localhostProtection bool) bool {
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		return false // the go-sdk refuses it on a POST
	}
	if r.Header.Get("MCP-Protocol-Version") != ProtocolVersion {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := accepts(r.Header)
	if !jsonOK || !streamOK {
		return false
	}
	if localhostProtection {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && localLoopback(la) && !isLoopback(r.Host) {
			return false
		}
	}
	return true
}

// localLoopback is isLoopback(la.String()), without formatting a TCP
// address to parse it back.
func localLoopback(la net.Addr) bool {
	if ta, ok := la.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	return isLoopback(la.String())
}

// isLoopback is the go-sdk's loopback test of an address or Host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// withServerInfo adds the server's identity to a result's _meta, as the
// go-sdk does on every result.
func (l *leanPath) withServerInfo(res mcp.Result) mcp.Result {
	if res == nil {
		return nil
	}
	m := res.GetMeta()
	if m == nil {
		m = map[string]any{}
	}
	if _, ok := m["io.modelcontextprotocol/serverInfo"]; !ok {
		m["io.modelcontextprotocol/serverInfo"] = l.ts.implementation()
	}
	res.SetMeta(m)
	return res
}

// integerID reports whether id is an integer the go-sdk echoes unchanged:
// 0, or an optional minus and 1 to 15 digits without a leading zero (it
// reads numbers as float64: larger ones, or -0, it would rewrite). A
// function, not a regular expression: nothing to compile when the process
// starts.
func integerID(id []byte) bool {
	if string(id) == "0" {
		return true
	}
	if len(id) > 0 && id[0] == '-' {
		id = id[1:]
	}
	if len(id) == 0 || len(id) > 15 || id[0] < '1' || id[0] > '9' {
		return false
	}
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// plainID returns the request's id when the go-sdk echoes it byte for
// byte: an integer it reads exactly, or a string of printable ASCII without
// escapes (the go-sdk decodes and re-encodes a string id, which rewrites
// escapes and other characters). Anything else (absent, null, fractional,
// escaped, array, object, boolean) is left to the go-sdk.
func plainID(top map[string]json.RawMessage) (json.RawMessage, bool) {
	id := top["id"]
	if len(id) == 0 {
		return nil, false
	}
	if id[0] != '"' {
		return id, integerID(id)
	}
	if len(id) < 2 || id[len(id)-1] != '"' {
		return nil, false
	}
	for _, c := range id[1 : len(id)-1] {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return nil, false
		}
	}
	return id, true
}

// sdkID returns the id the go-sdk v1.8.0 answers a request with
// (jsonrpc2.MakeID): a string as it is, a number truncated to an integer.
// ok is false for a notification (no id, or null), and for an id the
// go-sdk refuses as a parse error (array, object, boolean): the go-sdk
// answers those itself.
func sdkID(top map[string]json.RawMessage) (json.RawMessage, bool) {
	if id, ok := plainID(top); ok {
		return id, true
	}
	raw := bytes.TrimSpace(top["id"])
	if len(raw) == 0 {
		return nil, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		b, err := marshal(s)
		return b, err == nil
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil, false
	}
	return json.RawMessage(strconv.FormatInt(int64(f), 10)), true
}

// marshal encodes v as the go-sdk encodes its messages: without HTML
// escaping, without a trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeRPC writes a JSON-RPC response with the HTTP status the 2026-07-28
// transport gives its error codes.
func writeRPC(w http.ResponseWriter, id json.RawMessage, res mcp.Result, err error) {
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			we = &jsonrpc.Error{Code: CodeInternalError, Message: err.Error()}
		}
		status := http.StatusOK
		switch we.Code {
		case jsonrpc.CodeMethodNotFound:
			status = http.StatusNotFound
		case CodeInvalidParams, CodeHeaderMismatch, CodeMissingCapabilities, mcp.CodeUnsupportedProtocolVersion:
			status = http.StatusBadRequest
		case CodeTooManyStreams:
			status = http.StatusTooManyRequests
		}
		b, _ := marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *jsonrpc.Error  `json:"error"`
		}{"2.0", id, we})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	b, err := marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  mcp.Result      `json:"result"`
	}{"2.0", id, res})
	if err != nil {
		writeRPC(w, id, nil, &jsonrpc.Error{Code: CodeInternalError, Message: "encoding the result: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// accepts reports whether h's Accept headers take JSON and an event
// stream, as the go-sdk reads them (media ranges and wildcards included).
func accepts(h http.Header) (jsonOK, streamOK bool) {
	for _, v := range h.Values("Accept") {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}
