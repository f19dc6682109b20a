package tasks

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// requestState is what an inline run carries between MRTR rounds. It is
// sealed with AES-256-GCM under a key derived from Options.StateSecret
// (authenticated and encrypted: step outcomes may hold data the client
// must not read), expires, and is bound to the tool, the principal and the
// arguments, so a client can neither read nor forge step outcomes nor
// replay the state elsewhere.
type requestState struct {
	Tool      string                     `json:"t"`
	Owner     string                     `json:"o"`
	ArgsHash  string                     `json:"a"`
	Expires   int64                      `json:"x"`
	Journal   []driver.Entry             `json:"j,omitempty"`
	Responses map[string]json.RawMessage `json:"r,omitempty"`
}

func argsHash(args json.RawMessage) string {
	h := sha256.Sum256(args)
	return hex.EncodeToString(h[:16])
}

// stateCipher returns the AEAD sealing requestState.
func (s *Server) stateCipher() (cipher.AEAD, error) {
	key := sha256.Sum256(append([]byte("mcptasks requestState v1\x00"), s.opts.StateSecret...))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (s *Server) signState(st *requestState) (string, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encoding requestState: %w", err)
	}
	return s.seal(b)
}

// seal encrypts and authenticates b under the state key, base64url.
func (s *Server) seal(b []byte) (string, error) {
	aead, err := s.stateCipher()
	if err != nil {
		return "", fmt.Errorf("sealing requestState: %w", err)
	}
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, b, nil)), nil
}

// unseal opens what seal sealed.
func (s *Server) unseal(raw string) ([]byte, error) {
	sealed, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return nil, errBadState
	}
	aead, err := s.stateCipher()
	if err != nil || len(sealed) < aead.NonceSize() {
		return nil, errBadState
	}
	b, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], nil)
	if err != nil {
		return nil, errBadState
	}
	return b, nil
}

var errBadState = &jsonrpc.Error{Code: CodeInvalidParams, Message: "invalid requestState"}

func (s *Server) openState(raw, tool, owner string, args json.RawMessage) (*requestState, error) {
	b, err := s.unseal(raw)
	if err != nil {
		return nil, errBadState
	}
	var st requestState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, errBadState
	}
	if st.Tool != tool || st.Owner != owner || st.ArgsHash != argsHash(args) {
		return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "requestState does not belong to this call"}
	}
	if s.now().UnixMilli() > st.Expires {
		return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: "requestState expired; start the call again"}
	}
	return &st, nil
}

// startSync prepares a synchronous (inline or preflight) run of t for req.
func (s *Server) startSync(ctx context.Context, req *mcp.CallToolRequest, t *tool, m mode, owner string, args json.RawMessage) (*run, error) {
	r := &run{ctx: ctx, mode: m, now: s.now, responses: map[string]json.RawMessage{}, maxValue: s.opts.MaxResultBytes,
		log: s.log, tool: t.name, stepDefaults: t.stepDefaults}
	if req.Params.RequestState != "" {
		st, err := s.openState(req.Params.RequestState, t.name, owner, args)
		if err != nil {
			return nil, err
		}
		r.journal = st.Journal
		for k, v := range st.Responses {
			r.responses[k] = v
		}
	}
	given := make(map[string]json.RawMessage, len(req.Params.InputResponses))
	for k, v := range req.Params.InputResponses {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, &jsonrpc.Error{Code: CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%q] cannot be encoded", k)}
		}
		given[k] = b
	}
	// Answers to what the journal asked are checked against those
	// requests; the rest are unsolicited, never used (see answered).
	checked, bad := checkAnswers(r.asked(), given)
	if bad != nil {
		return nil, bad.rpc()
	}
	maps.Copy(r.responses, given)
	maps.Copy(r.responses, checked)
	return r, nil
}

// asked returns the input requests the journal's input steps made (key ->
// request).
func (r *run) asked() map[string]json.RawMessage {
	asked := map[string]json.RawMessage{}
	for _, e := range r.journal {
		if e.Kind != driver.KindInput {
			continue
		}
		var reqs map[string]json.RawMessage
		if json.Unmarshal(e.Value, &reqs) == nil {
			maps.Copy(asked, reqs)
		}
	}
	return asked
}

// inputRequired renders a suspended synchronous run as an
// InputRequiredResult whose requestState resumes it.
func (s *Server) inputRequired(r *run, t *tool, owner string, args json.RawMessage, asked map[string]json.RawMessage) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(asked)
	if err != nil {
		return nil, err
	}
	var reqs mcp.InputRequestMap
	if err := json.Unmarshal(b, &reqs); err != nil {
		return nil, &jsonrpc.Error{Code: CodeInternalError, Message: fmt.Sprintf("input request not expressible over MRTR: %v", err)}
	}
	state, err := s.signState(&requestState{Tool: t.name, Owner: owner, ArgsHash: argsHash(args),
		Expires: s.now().Add(s.opts.StateTTL).UnixMilli(), Journal: r.journal, Responses: r.answered()})
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}, nil
}

// callWithout answers a tools/call of the task tool t from a client that
// did not declare the extension on the request: the tool runs inline, and
// continues as a background job when it cannot finish within the call (see
// jobs.go), or the call is refused when the fallback does not serve it. On
// 2026-07-28 the answer has its wire shape (content never null, an
// InputRequiredResult without content); older revisions get the go-sdk's
// CallToolResult, which it renders for them.
func (s *Server) callWithout(ctx context.Context, req *mcp.CallToolRequest, t *tool) (mcp.Result, error) {
	modern := req.ProtocolVersion() >= ProtocolVersion
	res, err := s.callInline(ctx, req, t, modern)
	if err != nil || res == nil {
		return nil, err
	}
	if !modern {
		return res, nil
	}
	return middlewareCallResult(res), nil
}

// callInline runs a task tool within the request, for a client that did
// not declare the extension: steps run in-process, sleeps sleep, and input
// goes over MRTR rounds to a client on 2026-07-28 (modern) that declared
// the capabilities its requests need. What cannot finish within the call
// continues as a job, or is refused.
func (s *Server) callInline(ctx context.Context, req *mcp.CallToolRequest, t *tool, modern bool) (*mcp.CallToolResult, error) {
	args, bad := t.validateArgs(req.Params.Arguments)
	if bad != nil {
		return bad, nil
	}
	owner := s.principal(ctx, req.GetExtra())
	jobs := s.jobsFor(t)
	switch {
	case t.support == Required:
		// The extension's rule: a request the server cannot serve without
		// a task is answered -32021.
		return nil, missingCapability()
	case jobs && t.background:
		return s.startJob(ctx, t, owner, args, nil, nil, "it runs in the background", nil)
	}
	// An inline run answers within the invocation's budget, like a worker
	// step: what would outlast it continues as a job, or ends the call
	// with an error, never a hang.
	rctx, cancel := context.WithTimeout(ctx, s.holdBudget())
	defer cancel()
	r, err := s.startSync(rctx, req, t, modeInline, owner, args)
	if err != nil {
		return nil, err
	}
	r.jobs, r.minStep = jobs, s.opts.MinStepTime
	r.refuse = func(why string) error {
		if !modern {
			return &jsonrpc.Error{Code: CodeInternalError, Message: fmt.Sprintf("tool %s cannot finish within this call: %s; call it as a task instead", t.name, why)}
		}
		return needsTaskError(t.name, why)
	}
	out := execute(r, t.bind(args))
	switch {
	case out.susp != nil && out.susp.kind == suspendInput:
		if modern && canAnswer(req.ClientCapabilities(), out.susp.park) {
			return s.inputRequired(r, t, owner, args, out.susp.park)
		}
		if jobs {
			return s.startJob(ctx, t, owner, args, r.journal, r.answered(),
				"it asks for input that this client cannot give within the call", out.susp.park)
		}
		return nil, cannotAsk(t.name, out.susp.park, modern)
	case out.susp != nil && out.susp.kind == suspendNeedTask:
		return s.startJob(ctx, t, owner, args, r.journal, r.answered(), out.susp.why, nil)
	case out.susp != nil:
		return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "internal error: unexpected suspension of an inline run"}
	case out.failure != nil:
		return nil, &jsonrpc.Error{Code: out.failure.Code, Message: out.failure.Message}
	case out.err != nil:
		return nil, asWireError(out.err)
	}
	if out.result == nil {
		out.result = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	return out.result, nil
}

func asWireError(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we
	}
	return &jsonrpc.Error{Code: CodeInternalError, Message: err.Error()}
}

// preflight runs the input steps a GatherInputFirst tool takes before its
// first durable step. It returns either a result to send now (an
// InputRequiredResult, or the final result if the handler finished), or
// the journal and responses to create the task with.
func (s *Server) preflight(ctx context.Context, req *mcp.CallToolRequest, t *tool, owner string, args json.RawMessage) (mcp.Result, []driver.Entry, map[string]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.MaxDuration-s.opts.SafetyMargin)
	defer cancel()
	r, err := s.startSync(ctx, req, t, modePreflight, owner, args)
	if err != nil {
		return nil, nil, nil, err
	}
	out := execute(r, t.bind(args))
	switch {
	case out.susp != nil && out.susp.kind == suspendInput:
		res, err := s.inputRequired(r, t, owner, args, out.susp.park)
		return res, nil, nil, err
	case out.susp != nil && out.susp.kind == suspendNeedTask:
		// Only answers to what was asked: an unsolicited key must not
		// pre-answer an input step the task reaches later.
		return nil, r.journal, r.answered(), nil
	case out.susp != nil:
		return nil, nil, nil, &jsonrpc.Error{Code: CodeInternalError, Message: "internal error: unexpected suspension of a preflight run"}
	case out.failure != nil:
		return nil, nil, nil, &jsonrpc.Error{Code: out.failure.Code, Message: out.failure.Message}
	case out.err != nil:
		return nil, nil, nil, asWireError(out.err)
	}
	if out.result == nil {
		out.result = &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	return out.result, nil, nil, nil
}

// answered returns the responses to the keys the journal's input steps
// asked for.
func (r *run) answered() map[string]json.RawMessage {
	used := make(map[string]json.RawMessage)
	for _, e := range r.journal {
		for _, k := range e.Keys {
			if v, ok := r.responses[k]; ok {
				used[k] = v
			}
		}
	}
	return used
}
