package tasks_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/tools/txtar"
)

// The differential harness: one tasks server, served by a ForTasks endpoint
// with the lean path and by one without it (every request through the
// go-sdk), on a deterministic store, so that the two answers to a request
// can be compared byte for byte.

// fixed is the clock of the harness.
var fixed = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

// taskID pads name to a valid task id (driver.ValidID).
func taskID(name string) string { return name + strings.Repeat("A", 22-len(name)) }

// The tasks of the fake store, one per status, plus one of another
// principal and one whose reads fail.
var (
	idWorking   = taskID("working")
	idInput     = taskID("input")
	idCompleted = taskID("completed")
	idFailed    = taskID("failed")
	idCancelled = taskID("cancelled")
	idAlices    = taskID("alices")
	idBroken    = taskID("broken")
	idCreated   = taskID("created")
)

// fakeStore is a store whose answers depend only on the request: it never
// changes, so that the same request gets the same answer on both paths, in
// any order. The engine's store contract is tested elsewhere (storetest on
// a real Redis); what is compared here is the HTTP layer.
type fakeStore struct {
	driver.Store // the worker's methods: never called by the endpoint
	tasks        map[string]*driver.Task
}

func newFakeStore() *fakeStore {
	mk := func(id, owner string, st driver.Status) *driver.Task {
		return &driver.Task{ID: id, Owner: owner, Tool: "job", Status: st, CreatedAt: fixed, UpdatedAt: fixed.Add(time.Second),
			TTL: time.Hour, PollInterval: time.Second}
	}
	s := &fakeStore{tasks: map[string]*driver.Task{}}
	w := mk(idWorking, "anonymous", driver.StatusWorking)
	w.StatusMessage = "fetching <a> & \"b\" \u2028 é"
	in := mk(idInput, "anonymous", driver.StatusInputRequired)
	in.InputRequests = map[string]json.RawMessage{"confirm": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Go <on>?","requestedSchema":{"type":"object"}}}`)}
	done := mk(idCompleted, "anonymous", driver.StatusCompleted)
	done.Result = json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"<b>&amp; \u2028 é"}]}`)
	failed := mk(idFailed, "anonymous", driver.StatusFailed)
	failed.Error = &driver.ErrorObject{Code: -32000, Message: "upstream <refused> & gone", Data: json.RawMessage(`{"why":"<x>"}`)}
	for _, t := range []*driver.Task{w, in, done, failed, mk(idCancelled, "anonymous", driver.StatusCancelled),
		mk(idAlices, "alice", driver.StatusWorking), mk(idBroken, "anonymous", driver.StatusWorking)} {
		s.tasks[t.ID] = t
	}
	return s
}

func (s *fakeStore) lookup(owner, id string) (*driver.Task, error) {
	t := s.tasks[id]
	if t == nil || t.Owner != owner {
		return nil, driver.ErrNotFound
	}
	if id == idBroken {
		return nil, fmt.Errorf("redis: connection refused")
	}
	return t, nil
}

func (s *fakeStore) Get(_ context.Context, owner, id string) (*driver.Task, error) {
	return s.lookup(owner, id)
}

func (s *fakeStore) Outstanding(_ context.Context, owner, id string, _ time.Time) (map[string]json.RawMessage, error) {
	t, err := s.lookup(owner, id)
	if err != nil {
		return nil, err
	}
	return t.InputRequests, nil
}

func (s *fakeStore) Update(_ context.Context, owner, id string, responses map[string]json.RawMessage, _ time.Time) (bool, error) {
	t, err := s.lookup(owner, id)
	if err != nil {
		return false, err
	}
	_, answered := responses["confirm"]
	return t.Status == driver.StatusInputRequired && answered, nil
}

func (s *fakeStore) Cancel(_ context.Context, owner, id string, _ time.Time) (driver.Status, bool, error) {
	t, err := s.lookup(owner, id)
	if err != nil {
		return "", false, err
	}
	if t.Status.Terminal() {
		return t.Status, false, nil
	}
	return driver.StatusCancelled, true, nil
}

// Create answers with the same task every time; an argument "many" plays
// a principal over its live-task limit.
func (s *fakeStore) Create(_ context.Context, nt *driver.NewTask) (*driver.Task, error) {
	if bytes.Contains(nt.Args, []byte(`"many"`)) {
		return nil, driver.ErrTooManyTasks
	}
	return &driver.Task{ID: idCreated, Owner: nt.Owner, Tool: nt.Tool, Args: nt.Args, Status: driver.StatusWorking,
		CreatedAt: nt.Now, UpdatedAt: nt.Now, TTL: nt.TTL, PollInterval: nt.PollInterval}, nil
}

type nopQueue struct{}

func (nopQueue) Enqueue(context.Context, string, time.Time) error { return nil }
func (nopQueue) MaxDelay() time.Duration                          { return 0 }

// diffServer is a tasks server with its two endpoints (and the go-sdk
// alone, without the routing check), in SSE and in JSON response mode.
type diffServer struct {
	srv             *tasks.Server
	lean, sdk, bare [2]http.Handler // [0] SSE, [1] JSONResponse
}

// registerFuzzTools registers a task tool of each kind the lean path
// distinguishes, and an ordinary tool.
func registerFuzzTools(s *tasks.Server) {
	type jobArgs struct {
		End string `json:"end,omitempty"`
		N   int    `json:"n,omitempty"`
	}
	body := func(ctx context.Context, st *tasks.Step, in jobArgs) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran <" + in.End + ">"}}}, nil
	}
	tasks.AddTool(s, &mcp.Tool{Name: "job", Description: "optional task"}, tasks.Optional, body)
	tasks.AddTool(s, &mcp.Tool{Name: "must", Description: "required task"}, tasks.Required, body)
	tasks.AddTool(s, &mcp.Tool{Name: "first", Description: "input first"}, tasks.Optional, body, tasks.GatherInputFirst())
	tasks.AddTool(s, &mcp.Tool{Name: "hdr", Description: "param header", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, in struct {
			Region string `json:"region"`
		}) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Region}}}, nil
		})
	mcp.AddTool(s.MCP(), &mcp.Tool{Name: "plain", Description: "ordinary"}, func(ctx context.Context, _ *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "plain"}}}, struct{}{}, nil
	})
}

func newDiffServer(tb testing.TB, mcpOpts *mcp.ServerOptions, opts tasks.Options) *diffServer {
	tb.Helper()
	quiet := slog.New(slog.DiscardHandler)
	var so mcp.ServerOptions
	if mcpOpts != nil {
		so = *mcpOpts
	}
	so.Logger = quiet
	opts.Logger, opts.Anonymous, opts.Now = quiet, true, func() time.Time { return fixed }
	if opts.MaxDuration == 0 {
		// A 2025-11-25 tasks/result of a running task holds its request
		// for the budget: keep it short for the fuzzer.
		opts.MaxDuration = 2 * time.Second
	}
	opts.Principal = func(_ context.Context, extra *mcp.RequestExtra) string {
		if extra != nil && extra.Header != nil {
			return extra.Header.Get("X-Principal")
		}
		return ""
	}
	d := &diffServer{srv: tasks.New(&mcp.Implementation{Name: "fuzz <&>", Version: "1"}, &so, newFakeStore(), nopQueue{}, &opts)}
	registerFuzzTools(d.srv)
	for i, js := range []bool{false, true} {
		d.lean[i] = tasks.NewHandler(d.srv, &tasks.HandlerOptions{Logger: quiet, JSONResponse: js})
		d.sdk[i] = tasks.NewHandler(d.srv, &tasks.HandlerOptions{Logger: quiet, JSONResponse: js, DisableLeanPath: true})
		d.bare[i] = tasks.NewSDKHandler(d.srv.MCP(), &tasks.HandlerOptions{Logger: quiet, JSONResponse: js})
	}
	return d
}

// exchange is one request of the harness: a body and its headers, sent to
// a server listening on loopback.
type exchange struct {
	body []byte
	hdr  http.Header
	host string
}

// exchangeAnswer is what a client sees of a response: the status, the content
// type, and the JSON-RPC message (an SSE stream's single message event).
type exchangeAnswer struct {
	status int
	ctype  string
	msg    []byte
}

func (a exchangeAnswer) String() string {
	return fmt.Sprintf("HTTP %d %s %s", a.status, a.ctype, a.msg)
}

func (x exchange) send(h http.Handler) exchangeAnswer {
	r := httptest.NewRequest(http.MethodPost, "http://"+x.host+"/mcp", bytes.NewReader(x.body))
	r.Host = x.host
	r.Header = x.hdr.Clone()
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := exchangeAnswer{status: w.Code, ctype: w.Header().Get("Content-Type"), msg: w.Body.Bytes()}
	if strings.HasPrefix(a.ctype, "text/event-stream") {
		a.msg = sseMessages(w.Body.Bytes())
	}
	return a
}

// sseMessages returns the data of an SSE stream's message events, one per
// line.
func sseMessages(stream []byte) []byte {
	var out []byte
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 4<<20)
	flush := func() {
		if data != nil {
			out = append(out, strings.Join(data, "\n")...)
			out = append(out, '\n')
		}
		data = nil
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	flush()
	return bytes.TrimSuffix(out, []byte("\n"))
}

// rpcID returns the id member of a JSON-RPC message, or nil.
func rpcID(msg []byte) (json.RawMessage, string) {
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return nil, ""
	}
	code := ""
	if m.Error != nil {
		code = fmt.Sprint(m.Error.Code)
	}
	return m.ID, code
}

// check sends x through both endpoints (mode 0: SSE, 1: JSON responses)
// and reports how their answers differ ("" when they do not). The answers
// must be the same byte for byte, except that the lean path answers JSON
// where the go-sdk may stream SSE (both are the transport's), so the
// message inside is compared. Where the routing check answers -32020, the
// go-sdk alone, given the right Mcp-Name, must answer with the same id.
func (d *diffServer) check(x exchange, mode int) string {
	lean, sdk := x.send(d.lean[mode]), x.send(d.sdk[mode])
	if mode == 1 && lean.ctype != sdk.ctype {
		return fmt.Sprintf("content type: lean %q, go-sdk %q", lean.ctype, sdk.ctype)
	}
	if lean.status != sdk.status || !bytes.Equal(lean.msg, sdk.msg) {
		return fmt.Sprintf("\nlean:   %s\ngo-sdk: %s", lean, sdk)
	}
	id, code := rpcID(sdk.msg)
	if code != fmt.Sprint(tasks.CodeHeaderMismatch) {
		return ""
	}
	var top struct {
		Params struct {
			TaskID *string `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(x.body, &top) != nil || top.Params.TaskID == nil {
		return ""
	}
	fixedName := exchange{body: x.body, hdr: x.hdr.Clone(), host: x.host}
	fixedName.hdr.Set("Mcp-Name", *top.Params.TaskID)
	bare := fixedName.send(d.bare[mode])
	if bareID, bareCode := rpcID(bare.msg); bareCode != "" || bareID != nil {
		if !bytes.Equal(bareID, id) {
			return fmt.Sprintf("routing check answered id %s; the go-sdk answers id %s (%s)", id, bareID, bare)
		}
	}
	return ""
}

// fuzzEnvelope is a request as the conformance client sends it.
func fuzzEnvelope(method string, id any, params map[string]any, caps map[string]any) exchange {
	body, h := mcptest.Request(method, id, params, caps, "fuzz")
	return exchange{body: body, hdr: h, host: "127.0.0.1:8080"}
}

var withExt = map[string]any{"extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}

// seeds are the differential cases of package tasks (TestLeanPathMatchesSDK
// and TestLeanPathMatchesSDKRaw, on the fake store's tasks) and the golden
// wire transcripts' requests.
func seeds(tb testing.TB) []exchange {
	tb.Helper()
	var xs []exchange
	none := map[string]any{}
	for _, id := range []string{idWorking, idInput, idCompleted, idFailed, idCancelled, idAlices, idBroken, "nope", "queue", ""} {
		xs = append(xs,
			fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": id}, withExt),
			fuzzEnvelope("tasks/get", "a<b>&", map[string]any{"taskId": id}, none),
			fuzzEnvelope("tasks/cancel", 2, map[string]any{"taskId": id}, withExt),
			fuzzEnvelope("tasks/update", 3, map[string]any{"taskId": id, "inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}}, withExt),
			fuzzEnvelope("tasks/update", 4, map[string]any{"taskId": id, "inputResponses": map[string]any{"zz": map[string]any{"action": "decline"}}}, withExt))
	}
	for _, tool := range []string{"job", "must", "first", "hdr", "plain", "nope"} {
		for _, caps := range []map[string]any{withExt, none} {
			xs = append(xs,
				fuzzEnvelope("tools/call", 7, map[string]any{"name": tool, "arguments": map[string]any{"end": "x<y>"}}, caps),
				fuzzEnvelope("tools/call", 8, map[string]any{"name": tool, "arguments": map[string]any{"end": "many"}}, caps),
				fuzzEnvelope("tools/call", 9, map[string]any{"name": tool, "arguments": []any{1}}, caps),
				fuzzEnvelope("tools/call", 10, map[string]any{"name": tool, "arguments": map[string]any{"n": "NaN"}}, caps))
		}
	}
	xs = append(xs,
		fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking, "_meta": map[string]any{"io.modelcontextprotocol/clientInfo": "not an object"}}, withExt),
		fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking, "_meta": map[string]any{"io.modelcontextprotocol/clientInfo": nil}}, withExt),
		fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking}, map[string]any{"sampling": "yes", "extensions": map[string]any{tasks.ExtensionID: map[string]any{}}}),
		fuzzEnvelope("tasks/get", 1, map[string]any{"TaskId": idWorking}, withExt),
		fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking, "TASKID": "other"}, withExt),
		fuzzEnvelope("tools/call", 1, map[string]any{"Name": "job", "arguments": map[string]any{}}, withExt),
		fuzzEnvelope("tools/call", 1, map[string]any{"name": "job", "arguments": map[string]any{}, "_meta": map[string]any{"io.modelcontextprotocol/clientInfo": 7}}, withExt),
		fuzzEnvelope("tasks/result", 1, map[string]any{"taskId": idWorking}, withExt),
		fuzzEnvelope("tasks/list", 1, nil, withExt),
		fuzzEnvelope("server/discover", 1, nil, withExt),
	)
	meta := func(caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	}
	ext := `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	raw := func(method, name, body string, extra ...string) exchange {
		x := fuzzEnvelope(method, 1, nil, withExt)
		x.body = []byte(body)
		x.hdr.Set("Mcp-Name", name)
		for i := 0; i+1 < len(extra); i += 2 {
			x.hdr.Set(extra[i], extra[i+1])
		}
		return x
	}
	get := func(id, caps string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/get","params":{"taskId":"` + idWorking + `",` + meta(caps) + `}}`
	}
	xs = append(xs,
		raw("tasks/get", idWorking, get("1", `{"Extensions":{"io.modelcontextprotocol/tasks":{}}}`)),
		raw("tasks/get", idWorking, get("1", `{"extensions":{"io.modelcontextprotocol/tasks":{}},"extensions":{}}`)),
		raw("tasks/get", idWorking, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"other","taskId":"`+idWorking+`",`+meta(ext)+`}}`),
		raw("tasks/get", idWorking, get("123456789012345678", ext)),
		raw("tasks/get", idWorking, get("-0", ext)),
		raw("tasks/get", idWorking, get("1.5", ext)),
		raw("tasks/get", "other", get("1.5", ext)),
		raw("tasks/get", idWorking, get(`"\u0041"`, ext)),
		raw("tasks/get", "other", get(`"\u0041<>"`, ext)),
		raw("tasks/get", idWorking, get(`"\ud800"`, ext)),
		raw("tasks/get", "other", get(`[1,2]`, ext)),
		raw("tasks/get", "other", get(`{"a":1}`, ext)),
		raw("tasks/get", "other", get(`true`, ext)),
		raw("tasks/get", "other", get(`null`, ext)),
		raw("tasks/get", idWorking, get("1", ext), "Last-Event-ID", "7"),
		raw("tasks/get", idWorking, get("1", ext), "MCP-Protocol-Version", "2025-11-25"),
		raw("tasks/get", idWorking, get("1", ext), "Accept", "application/*;q=0.5, text/*"),
		raw("tasks/get", idWorking, get("1", ext), "Accept", "application/json"),
		raw("tasks/get", idWorking, get("1", ext), "Content-Type", "application/json; charset=utf-8"),
		raw("tasks/get", idWorking, get("1", ext), "Content-Type", "text/plain"),
		raw("tasks/get", idWorking, get("1", ext), "Mcp-Method", "tasks/cancel"),
		raw("tasks/update", idWorking, `{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"`+idWorking+`","inputResponses":{"k":`+deep+`},`+meta(ext)+`}}`),
		raw("tools/call", "job", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{"x":`+deep+`},`+meta(ext)+`}}`),
		raw("tools/call", "must", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"must","arguments":{},`+meta(`{"Extensions":{"io.modelcontextprotocol/tasks":{}}}`)+`}}`),
		raw("tools/call", "hdr", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hdr","arguments":{"region":"eu"},`+meta(ext)+`}}`, "Mcp-Param-Region", "eu"),
		raw("tools/call", "job", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{},"requestState":"x",`+meta(ext)+`}}`),
		raw("tasks/get", "\uFFFD", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"\ud800",`+meta(ext)+`}}`),
		raw("tasks/get", "\uFFFD", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"`+"\xff"+`",`+meta(ext)+`}}`),
		raw("tasks/get", idWorking, `{"jsonrpc":"2.0","id":1,"id":"2","method":"tasks/get","params":{"taskId":"`+idWorking+`",`+meta(ext)+`}}`),
		raw("tasks/get", idWorking, `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","method":"tasks/get","params":{"taskId":"`+idWorking+`",`+meta(ext)+`}}`),
		raw("tasks/get", idWorking, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"`+idWorking+`",`+meta(ext)+`,"_meta":{}}}`),
		raw("tasks/get", idWorking, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"`+idWorking+`",`+meta(`{"extensions":{"io.modelcontextprotocol/tasks":{}},"Roots":{"listChanged":"x"}}`)+`}}`),
		raw("tasks/get", idWorking, `[`+get("1", ext)+`]`),
		raw("tasks/get", idWorking, `{"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"`+idWorking+`",`+meta(ext)+`}}`),
	)
	alice := fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idAlices}, withExt)
	alice.hdr.Set("X-Principal", "alice")
	foreign := fuzzEnvelope("tasks/get", 1, map[string]any{"taskId": idWorking}, withExt)
	foreign.host = "evil.example:8080"
	xs = append(xs, alice, foreign)
	return append(xs, transcriptSeeds(tb)...)
}

// transcriptSeeds are the requests of the golden wire transcripts of
// package tasks, their $TASK being the fake store's input_required task.
func transcriptSeeds(tb testing.TB) []exchange {
	tb.Helper()
	var xs []exchange
	for _, f := range transcriptFiles(tb) {
		ar, err := txtar.ParseFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for i, sec := range ar.Files {
			if sec.Name != "client" {
				continue
			}
			req, err := parseRequest(sec.Data, idInput)
			if err != nil {
				tb.Fatalf("%s section %d: %v", f, i, err)
			}
			caps := withExt
			if req.Caps != nil && len(req.Caps) == 0 {
				caps = map[string]any{}
			}
			x := fuzzEnvelope(req.Method, i+1, req.Params, caps) // request ids number the sections from 1
			for k, v := range req.Headers {
				x.hdr.Set(k, v)
			}
			xs = append(xs, x)
		}
	}
	return xs
}

// Flags of a fuzzed exchange, beyond its body and headers.
const (
	flagJSONMode    = 1 << iota // the endpoints answer application/json, not SSE
	flagParamHeader             // an Mcp-Param-Region header
	flagAlice                   // the principal is "alice" (X-Principal)
	flagForeignHost             // Host is not loopback, on a loopback listener
	flagLastEventID             // a Last-Event-ID header
	flagOldProtocol             // MCP-Protocol-Version 2025-11-25
	flagNoProtocol              // no MCP-Protocol-Version
	flagTwoNames                // a second Mcp-Name header
)

// httpValue reports whether v can be a header value on the wire, and
// returns it as a server reads it (surrounding blanks removed).
func httpValue(v string) (string, bool) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return "", false
		}
	}
	return strings.Trim(v, " \t"), true
}

// FuzzLeanPath checks that the lean path answers every request exactly as
// the go-sdk path does: same HTTP status, same JSON-RPC message byte for
// byte (see diffServer.check). It is seeded with the differential cases and
// the golden transcripts; scripts/test runs it for a bounded time.
func FuzzLeanPath(f *testing.F) {
	for _, x := range seeds(f) {
		f.Add(x.body, x.hdr.Get("Mcp-Method"), x.hdr.Get("Mcp-Name"), x.hdr.Get("Accept"), x.hdr.Get("Content-Type"), flagsOf(x))
		f.Add(x.body, x.hdr.Get("Mcp-Method"), x.hdr.Get("Mcp-Name"), x.hdr.Get("Accept"), x.hdr.Get("Content-Type"), flagsOf(x)|flagJSONMode)
	}
	d := newDiffServer(f, nil, tasks.Options{})
	f.Fuzz(func(t *testing.T, body []byte, method, name, accept, ctype string, flags uint8) {
		x := exchange{body: body, hdr: http.Header{}, host: "127.0.0.1:8080"}
		for k, v := range map[string]string{"Mcp-Method": method, "Mcp-Name": name, "Accept": accept, "Content-Type": ctype} {
			v, ok := httpValue(v)
			if !ok {
				t.Skip("not a header value")
			}
			if v != "" || k == "Mcp-Name" && name != "" {
				x.hdr.Set(k, v)
			}
		}
		x.hdr.Set("MCP-Protocol-Version", "2026-07-28")
		switch {
		case flags&flagNoProtocol != 0:
			x.hdr.Del("MCP-Protocol-Version")
		case flags&flagOldProtocol != 0:
			x.hdr.Set("MCP-Protocol-Version", "2025-11-25")
		}
		if flags&flagAlice != 0 {
			x.hdr.Set("X-Principal", "alice")
		}
		if flags&flagForeignHost != 0 {
			x.host = "evil.example:8080"
		}
		if flags&flagLastEventID != 0 {
			x.hdr.Set("Last-Event-ID", "1")
		}
		if flags&flagParamHeader != 0 {
			x.hdr.Set("Mcp-Param-Region", "eu")
		}
		if flags&flagTwoNames != 0 {
			x.hdr.Add("Mcp-Name", "second")
		}
		if diff := d.check(x, int(flags&flagJSONMode)); diff != "" {
			t.Errorf("%s %q: %s", method, body, diff)
		}
	})
}

// flagsOf are the flags that reproduce a seed's headers.
func flagsOf(x exchange) uint8 {
	var f uint8
	if x.hdr.Get("X-Principal") == "alice" {
		f |= flagAlice
	}
	if x.host != "127.0.0.1:8080" {
		f |= flagForeignHost
	}
	if x.hdr.Get("Last-Event-ID") != "" {
		f |= flagLastEventID
	}
	if x.hdr.Get("Mcp-Param-Region") != "" {
		f |= flagParamHeader
	}
	switch x.hdr.Get("MCP-Protocol-Version") {
	case "":
		f |= flagNoProtocol
	case "2025-11-25":
		f |= flagOldProtocol
	}
	return f
}

// The harness compares: on the seeds, both paths agree, and the lean path
// does answer (the seeds it serves are answered without the go-sdk).
func TestLeanPathSeeds(t *testing.T) {
	d := newDiffServer(t, nil, tasks.Options{})
	for _, x := range seeds(t) {
		for mode := range 2 {
			if diff := d.check(x, mode); diff != "" {
				t.Errorf("%s %s: %s", x.hdr.Get("Mcp-Method"), x.body, diff)
			}
		}
	}
}
