package tasks

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacyMiddleware gives initialize and tools/list answers the dialect the
// client negotiated: a client on a revision before ProtocolVersion is never
// offered the 2026-07-28 extension (it could not use it), and a client on
// LegacyProtocolVersion is offered that revision's tasks utility instead
// (capabilities.tasks, and execution.taskSupport on each task tool).
func (s *Server) legacyMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil || res == nil {
			return res, err
		}
		switch method {
		case "initialize":
			if ir, ok := res.(*mcp.InitializeResult); ok && ir.ProtocolVersion < ProtocolVersion {
				return s.legacyInitialize(ir), nil
			}
		case "tools/list":
			ss, ok := req.GetSession().(*mcp.ServerSession)
			if ok && ss.InitializeParams() != nil && ss.InitializeParams().ProtocolVersion == LegacyProtocolVersion {
				if lr, ok := res.(*mcp.ListToolsResult); ok {
					return uncached{s.legacyTools(lr)}, nil
				}
			}
		}
		if _, ok := res.(mcp.CacheableResult); ok && olderRevision(req) {
			return uncached{res}, nil
		}
		return res, nil
	}
}

// olderRevision reports whether req comes from a client on a revision
// before ProtocolVersion (or one that names none).
func olderRevision(req mcp.Request) bool {
	v, ok := req.(interface{ ProtocolVersion() string })
	return ok && v.ProtocolVersion() < ProtocolVersion
}

// uncached is a result without the 2026-07-28 cache fields (ttlMs,
// cacheScope), which the go-sdk sets on list results of every revision:
// older revisions have no such fields.
type uncached struct{ mcp.Result }

// MarshalJSON encodes the result without ttlMs and cacheScope.
func (u uncached) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(u.Result)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return b, nil
	}
	delete(m, "ttlMs")
	delete(m, "cacheScope")
	return json.Marshal(m)
}

// legacyCapabilities are the server capabilities of a 2025-11-25 session:
// the go-sdk's, without the 2026-07-28 extension, plus tasks.
type legacyCapabilities struct {
	*mcp.ServerCapabilities
	Tasks *legacyTasksCapability `json:"tasks,omitempty"`
}

// legacyTasksCapability is 2025-11-25's capabilities.tasks.
type legacyTasksCapability struct {
	List     *struct{} `json:"list,omitempty"`
	Cancel   *struct{} `json:"cancel,omitempty"`
	Requests struct {
		Tools struct {
			Call struct{} `json:"call"`
		} `json:"tools"`
	} `json:"requests"`
}

// legacyInitializeResult is an InitializeResult with legacyCapabilities.
type legacyInitializeResult struct {
	*mcp.InitializeResult
	Capabilities any `json:"capabilities"`
}

func (s *Server) legacyInitialize(ir *mcp.InitializeResult) mcp.Result {
	caps := &mcp.ServerCapabilities{}
	if ir.Capabilities != nil {
		c := *ir.Capabilities
		caps = &c
	}
	if len(caps.Extensions) > 0 {
		caps.Extensions = maps.Clone(caps.Extensions)
		delete(caps.Extensions, ExtensionID)
		if len(caps.Extensions) == 0 {
			caps.Extensions = nil
		}
	}
	if ir.ProtocolVersion != LegacyProtocolVersion {
		out := *ir
		out.Capabilities = caps
		return &out
	}
	tc := &legacyTasksCapability{Cancel: &struct{}{}}
	if s.listEnabled() {
		tc.List = &struct{}{}
	}
	return &legacyInitializeResult{InitializeResult: ir, Capabilities: legacyCapabilities{ServerCapabilities: caps, Tasks: tc}}
}

// legacyTool is a tool as 2025-11-25 lists it, with execution.taskSupport.
type legacyTool struct {
	*mcp.Tool
	Execution *legacyExecution `json:"execution,omitempty"`
}

type legacyExecution struct {
	TaskSupport string `json:"taskSupport"`
}

// legacyListToolsResult is a tools/list result whose task tools say how
// they run as tasks.
type legacyListToolsResult struct {
	*mcp.ListToolsResult
	Tools []legacyTool `json:"tools"`
}

func (s *Server) legacyTools(lr *mcp.ListToolsResult) mcp.Result {
	out := &legacyListToolsResult{ListToolsResult: lr, Tools: make([]legacyTool, 0, len(lr.Tools))}
	for _, t := range lr.Tools {
		lt := legacyTool{Tool: t}
		if tt := s.tools[t.Name]; tt != nil {
			support := "optional"
			if tt.support == Required {
				support = "required"
			}
			lt.Execution = &legacyExecution{TaskSupport: support}
		}
		out.Tools = append(out.Tools, lt)
	}
	return out
}

// legacyElicitation reports whether 2025-11-25 initialize params, as JSON,
// declare the elicitation capability (form mode: an empty object, or one
// with "form").
func legacyElicitation(raw json.RawMessage) bool {
	var p struct {
		Capabilities struct {
			Elicitation *struct {
				Form *json.RawMessage `json:"form"`
				URL  *json.RawMessage `json:"url"`
			} `json:"elicitation"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// legacySession is what a session id issued at a pre-2026 initialize
// carries: the client capabilities the server needs later, since that
// revision states them once, in initialize, and a stateless server keeps
// nothing between requests.
type legacySession struct {
	Kind        string `json:"k"` // "session"
	Elicitation bool   `json:"e,omitempty"`
}

// legacySessionID returns the Mcp-Session-Id to answer a pre-2026
// initialize with, given its params as JSON: sealed like requestState
// (under Options.StateSecret, so any instance opens it), unique, and
// carrying whether the client declared elicitation.
func (s *Server) legacySessionID(initializeParams json.RawMessage) (string, error) {
	b, err := json.Marshal(legacySession{Kind: "session", Elicitation: legacyElicitation(initializeParams)})
	if err != nil {
		return "", err
	}
	return s.seal(b)
}

// openLegacySession reads a session id from LegacySessionID: ok is false
// for one this server (or a server with the same StateSecret) did not
// issue.
func (s *Server) openLegacySession(id string) (elicitation, ok bool) {
	b, err := s.unseal(id)
	if err != nil {
		return false, false
	}
	var ls legacySession
	if json.Unmarshal(b, &ls) != nil || ls.Kind != "session" {
		return false, false
	}
	return ls.Elicitation, true
}

// legacyResume is what a held tasks/result needs to go on after its
// stream closed at the end of an invocation's budget: the client resumes
// it (GET with Last-Event-ID) on any instance.
type legacyResume struct {
	TaskID    string          `json:"t"`
	RequestID json.RawMessage `json:"r"`
}

// legacyResumeToken seals r as an SSE event id.
func (s *Server) legacyResumeToken(r legacyResume) (string, error) {
	b, err := json.Marshal(struct {
		Kind string `json:"k"`
		legacyResume
	}{"resume", r})
	if err != nil {
		return "", err
	}
	return s.seal(b)
}

// openLegacyResume reads a token from LegacyResumeToken.
func (s *Server) openLegacyResume(tok string) (legacyResume, bool) {
	b, err := s.unseal(tok)
	if err != nil {
		return legacyResume{}, false
	}
	var v struct {
		Kind string `json:"k"`
		legacyResume
	}
	if json.Unmarshal(b, &v) != nil || v.Kind != "resume" || !driver.ValidID(v.TaskID) || len(v.RequestID) == 0 {
		return legacyResume{}, false
	}
	return v.legacyResume, true
}
