package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolVersion is the revision the lean path serves.
const protocolVersion = "2026-07-28"

// HTTPHandler wraps the go-sdk streamable handler next with the tasks
// extension's HTTP layer:
//
//   - it checks that tasks/get, tasks/update and tasks/cancel carry an
//     Mcp-Name equal to params.taskId (see [CheckRoutingHeaders]);
//   - it answers well-formed tasks/* requests on a lean path that parses
//     the body once, instead of the go-sdk's several decodes.
//
// tasks/get is the dominant traffic of a tasks server (clients poll it).
// The lean path accepts a request only when every transport check the
// go-sdk makes would pass (POST, JSON content type, an Accept of JSON and
// SSE, loopback Host on a loopback listener, MCP-Protocol-Version and
// _meta.protocolVersion both 2026-07-28, _meta.clientCapabilities present,
// a single JSON-RPC call whose method equals Mcp-Method); anything else goes
// to the go-sdk, which produces its canonical error. Past those checks the
// lean path and the go-sdk path run the same code (capability gate, then
// principal and lookup) and answer the same JSON-RPC result or error, as
// JSON. go-sdk receiving middleware does not see requests answered here:
// set Options.DisableLeanPath when you add receiving middleware that must
// see tasks/* and task-creating tools/call requests.
func (s *Server) HTTPHandler(next http.Handler) http.Handler {
	checked := CheckRoutingHeaders(next)
	if s.opts.DisableLeanPath {
		return checked
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := strings.TrimSpace(r.Header.Get("Mcp-Method"))
		if r.Method != http.MethodPost || !leanMethod(method) || !s.transportOK(r) {
			checked.ServeHTTP(w, r)
			return
		}
		body, err := peekBody(r)
		if err != nil {
			bodyError(w, err)
			return
		}
		req, ok := parseLean(body, method)
		if !ok || len(body) > maxHeaderCheckBody {
			checked.ServeHTTP(w, r)
			return
		}
		if method == "tools/call" {
			s.serveLeanCall(w, r, req, checked)
			return
		}
		if text := nameMismatch(r.Header, method, req.Params.TaskID); text != "" {
			writeRPC(w, req.ID, nil, &jsonrpc.Error{Code: CodeHeaderMismatch, Message: text})
			return
		}
		res, err := s.serveLean(r.Context(), r, method, req)
		writeRPC(w, req.ID, s.withServerInfo(res), err)
	})
}

// httpPrincipal is the principal of a request answered on the lean path,
// taken as the go-sdk path takes it (from the token the auth middleware put
// in the context).
func (s *Server) httpPrincipal(r *http.Request) string {
	return s.principal(r.Context(), &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header})
}

func leanMethod(m string) bool {
	return m == MethodGet || m == MethodUpdate || m == MethodCancel || m == "tools/call"
}

// serveLeanCall creates a task for a tools/call of a task tool from a client
// that declares the extension, when nothing about the call needs the
// go-sdk: the tool takes no Mcp-Param headers and gathers no input first,
// the call carries no MRTR state and no Mcp-Param headers, and its Mcp-Name
// is exact. Everything else goes to the go-sdk (and its middleware).
func (s *Server) serveLeanCall(w http.ResponseWriter, r *http.Request, req *leanRequest, sdk http.Handler) {
	p := req.Params
	t := s.tools[p.Name]
	if t == nil || !t.lean || !req.declaresTasks() || p.InputResponses != nil || p.RequestState != nil ||
		r.Header.Get("Mcp-Name") != p.Name || len(r.Header.Values("Mcp-Name")) != 1 || hasParamHeaders(r.Header) {
		sdk.ServeHTTP(w, r)
		return
	}
	owner := s.httpPrincipal(r)
	res, err := s.create(r.Context(), t, owner, p.Arguments, nil)
	writeRPC(w, req.ID, s.withServerInfo(middlewareCallResult(res)), err)
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
	ID     json.RawMessage
	Params *leanParams
	// tasks reports whether clientCapabilities.extensions names the tasks
	// extension (read by exact member names, as the go-sdk reads them).
	tasks bool
}

// leanParams are the params the lean path reads.
type leanParams struct {
	TaskID         string
	InputResponses map[string]json.RawMessage
	Name           string
	Arguments      json.RawMessage
	RequestState   json.RawMessage
	Meta           map[string]json.RawMessage
}

// capabilitiesV2 is the client capabilities of the 2026-07-28 _meta, as the
// go-sdk decodes them (its own type is unexported).
type capabilitiesV2 struct {
	mcp.ClientCapabilities
	//lint:ignore SA1019 decoded exactly as the go-sdk decodes it (roots is deprecated, still valid)
	Roots *mcp.RootCapabilities `json:"roots,omitempty"`
}

func (r *leanRequest) declaresTasks() bool { return r.tasks }

// object decodes a JSON object keeping its keys exactly as written: the
// go-sdk matches field names case-sensitively, unlike encoding/json's
// struct decoding, and the lean path must read what the go-sdk reads.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}

// str decodes an optional JSON string member; ok is false when it is present
// but not a string.
func str(m map[string]json.RawMessage, key string) (v string, present, ok bool) {
	raw, present := m[key]
	if !present {
		return "", false, true
	}
	return v, true, json.Unmarshal(raw, &v) == nil && raw[0] == '"'
}

// integerID matches the integer ids the go-sdk echoes unchanged (it reads
// numbers as float64: larger ones, or -0, it would rewrite).
var integerID = regexp.MustCompile(`^(0|-?[1-9][0-9]{0,14})$`)

// parseLean decodes body and reports whether the lean path may serve it:
// a call (not a notification) of method with a string or integer id whose
// _meta is what the go-sdk accepts for 2026-07-28 (protocolVersion exactly
// that, clientCapabilities and, if present, clientInfo decodable as the
// go-sdk decodes them). Anything else is left to the go-sdk.
func parseLean(body []byte, method string) (*leanRequest, bool) {
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
		return nil, false // a notification, or a null/odd id: the go-sdk answers it
	}
	req := &leanRequest{ID: id}
	params, ok := object(top["params"])
	if !ok {
		return nil, false
	}
	p := &leanParams{Arguments: params["arguments"], RequestState: params["requestState"]}
	req.Params = p
	if p.TaskID, _, ok = str(params, "taskId"); !ok {
		return nil, false
	}
	if p.Name, _, ok = str(params, "name"); !ok {
		return nil, false
	}
	if raw, has := params["inputResponses"]; has {
		if p.InputResponses, ok = object(raw); !ok {
			return nil, false
		}
	}
	if p.Meta, ok = object(params["_meta"]); !ok {
		return nil, false
	}
	if v, _, ok := str(p.Meta, "io.modelcontextprotocol/protocolVersion"); !ok || v != protocolVersion {
		return nil, false
	}
	// clientCapabilities must decode as the go-sdk decodes it (else the
	// go-sdk answers -32602); the extension is then looked up by exact
	// member names, as the go-sdk's decoder matches them.
	caps := p.Meta["io.modelcontextprotocol/clientCapabilities"]
	var typed capabilitiesV2
	if len(caps) == 0 || string(caps) == "null" || json.Unmarshal(caps, &typed) != nil {
		return nil, false
	}
	capsObj, ok := object(caps)
	if !ok {
		return nil, false
	}
	if ext, has := capsObj["extensions"]; has && string(ext) != "null" {
		extObj, ok := object(ext)
		if !ok {
			return nil, false
		}
		_, req.tasks = extObj[ExtensionID]
	}
	if info, has := p.Meta["io.modelcontextprotocol/clientInfo"]; has {
		var impl mcp.Implementation
		if string(info) == "null" || json.Unmarshal(info, &impl) != nil {
			return nil, false
		}
	}
	switch method {
	case "tools/call":
		return req, p.Name != ""
	case MethodUpdate:
		if p.InputResponses == nil {
			return nil, false
		}
	}
	return req, p.TaskID != ""
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
func (s *Server) transportOK(r *http.Request) bool {
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		return false // the go-sdk refuses it on a POST
	}
	if r.Header.Get("MCP-Protocol-Version") != protocolVersion {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := false, false
	for _, v := range r.Header.Values("Accept") {
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
	if !jsonOK || !streamOK {
		return false
	}
	// DNS-rebinding protection, as the go-sdk applies it.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil && isLoopback(la.String()) && !isLoopback(r.Host) {
		return false
	}
	return true
}

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

func (s *Server) serveLean(ctx context.Context, r *http.Request, method string, req *leanRequest) (mcp.Result, error) {
	if !req.declaresTasks() {
		return nil, missingCapability()
	}
	owner := s.httpPrincipal(r)
	id := req.Params.TaskID
	switch method {
	case MethodGet:
		return s.get(ctx, owner, id)
	case MethodCancel:
		return s.cancel(ctx, owner, id)
	default:
		return s.update(ctx, owner, id, req.Params.InputResponses)
	}
}

// withServerInfo adds the server's identity to a result's _meta, as the
// go-sdk does on every result.
func (s *Server) withServerInfo(res mcp.Result) mcp.Result {
	if res == nil {
		return nil
	}
	m := res.GetMeta()
	if m == nil {
		m = map[string]any{}
	}
	m["io.modelcontextprotocol/serverInfo"] = s.impl
	res.SetMeta(m)
	return res
}

// plainID returns the request's id when it is one the go-sdk echoes
// unchanged: a JSON string or integer. Anything else (absent, null,
// fractional, array, object, boolean) is left to the go-sdk to answer.
func plainID(top map[string]json.RawMessage) (json.RawMessage, bool) {
	id := top["id"]
	if len(id) == 0 || (id[0] != '"' && !integerID.Match(id)) {
		return nil, false
	}
	if id[0] == '"' {
		if _, _, ok := str(top, "id"); !ok {
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
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return nil, false
	}
	return json.RawMessage(strconv.FormatInt(int64(f), 10)), true
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
		}
		b, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *jsonrpc.Error  `json:"error"`
		}{"2.0", id, we})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(b)
		return
	}
	b, err := json.Marshal(struct {
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
