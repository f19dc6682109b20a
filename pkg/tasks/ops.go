package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
)

// The task operations, transport-neutral. Both ways a request reaches the
// server call them once the request is decoded and its capability gate has
// passed (a client that does not declare the extension on the request gets
// missingCapability first): the receiving middleware on the go-sdk
// server, and the lean HTTP path of the handler (lean.go). Each returns the
// result to send (with resultType, without _meta: the transport adds
// serverInfo) or a JSON-RPC error (*jsonrpc.Error) carrying the code the
// transport maps to its HTTP status. An id the server never issued (see
// [driver.ValidID]) is unknown without a store call, and every store call is
// bounded by Options.StoreTimeout.

// getTask answers tasks/get for the principal owner: a detailedTask
// with the task's result, error or input requests inline, or -32602 for a
// task that does not exist or that owner does not own (the two are
// indistinguishable).
func (s *Server) getTask(ctx context.Context, owner, id string) (_ mcp.Result, err error) {
	ctx, span := s.requestSpan(ctx, methodGet, "", id)
	defer func() { endSpan(span, err) }()
	t, err := s.lookup(ctx, owner, id, methodGet)
	if err != nil {
		return nil, err
	}
	if span != nil {
		span.SetAttributes(AttrTool.String(t.Tool), AttrTaskStatus.String(string(t.Status)))
	}
	return newDetailedTask(s.advised(t)), nil
}

// cancelTask answers tasks/cancel for owner: an ack once cancellation is
// requested (a parked task becomes cancelled at once, a running one at its
// next step boundary; a terminal task stays as it is), or -32602 as for
// getTask.
func (s *Server) cancelTask(ctx context.Context, owner, id string) (mcp.Result, error) {
	if _, err := s.requestCancel(ctx, owner, id); err != nil {
		return nil, err
	}
	return &ack{ResultType: "complete"}, nil
}

// requestCancel requests the cancellation of owner's task id, as
// cancelTask answers it, and returns the task's status after the request.
func (s *Server) requestCancel(ctx context.Context, owner, id string) (_ driver.Status, err error) {
	ctx, span := s.requestSpan(ctx, methodCancel, "", id)
	defer func() { endSpan(span, err) }()
	if !driver.ValidID(id) {
		return "", errUnknownTask(id)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	type cancelled struct {
		st    driver.Status
		ended bool
	}
	c, err := await(ctx, s.storeDirect, func(ctx context.Context) (cancelled, error) {
		st, ended, err := s.store.Cancel(ctx, owner, id, s.now())
		return cancelled{st, ended}, err
	})
	s.forgetRead(id)
	st, ended := c.st, c.ended
	if errors.Is(err, driver.ErrNotFound) {
		return "", errUnknownTask(id)
	}
	if st != "" {
		s.audit(ctx, AuditCancelRequested, owner, id, slog.String("status", string(st)))
	}
	if ended {
		s.audit(ctx, AuditTerminal, owner, id, slog.String("status", string(st)))
		s.countEnded(ctx, "", st)
	}
	if span != nil && st != "" {
		span.SetAttributes(AttrTaskStatus.String(string(st)))
	}
	if err != nil {
		s.log.Error("tasks/cancel failed", "task", id, "err", err)
		s.storeFailed(ctx, "cancel")
		return "", storeUnavailable()
	}
	return st, nil
}

// updateTask answers tasks/update for owner: it checks each response
// against the outstanding request it answers (see checkAnswer) and
// delivers them (keys the task does not take an answer for are ignored),
// enqueues the task when they resume it, and returns an ack; -32602
// for an invalid answer (nothing of the update is stored: the task waits
// on, unchanged) and as for GetTask.
func (s *Server) updateTask(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (_ mcp.Result, err error) {
	ctx, span := s.requestSpan(ctx, methodUpdate, "", id)
	defer func() { endSpan(span, err) }()
	if !driver.ValidID(id) {
		return nil, errUnknownTask(id)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	requests, err := await(ctx, s.storeDirect, func(ctx context.Context) (map[string]json.RawMessage, error) {
		return s.store.Outstanding(ctx, owner, id, s.now())
	})
	if errors.Is(err, driver.ErrNotFound) {
		return nil, errUnknownTask(id)
	}
	if err != nil {
		s.log.Error("tasks/update failed", "task", id, "err", err)
		s.storeFailed(ctx, "update")
		return nil, storeUnavailable()
	}
	responses, bad := checkAnswers(requests, responses)
	if bad != nil {
		s.log.Info("tasks/update refused an invalid answer", "task", id, "key", bad.key, "reason", bad.msg)
		return nil, bad.rpc()
	}
	if len(responses) == 0 {
		return &ack{ResultType: "complete"}, nil // nothing outstanding answered: nothing to store
	}
	resumed, err := await(ctx, s.storeDirect, func(ctx context.Context) (bool, error) {
		return s.store.Update(ctx, owner, id, responses, s.now())
	})
	s.forgetRead(id)
	if errors.Is(err, driver.ErrNotFound) {
		return nil, errUnknownTask(id)
	}
	if err == nil || resumed {
		s.audit(ctx, AuditInputAnswered, owner, id, auditKeys(responses), slog.Bool("resumed", resumed))
	}
	if span != nil {
		span.SetAttributes(attribute.Bool("mcptasks.task.resumed", resumed))
	}
	if err != nil {
		s.log.Error("tasks/update failed", "task", id, "err", err)
		s.storeFailed(ctx, "update")
		if !resumed {
			return nil, storeUnavailable()
		}
	}
	if resumed && !s.dispatch {
		if err := s.enqueueNow(ctx, id); err != nil {
			s.log.Warn("enqueue after tasks/update failed; the sweeper will recover the task", "task", id, "err", err)
		}
	}
	return &ack{ResultType: "complete"}, nil
}

// createFor answers a tools/call of the task tool named tool, from a
// client that declared the extension, for owner: it validates args against
// the tool's input schema (a failure is a tool error: a CallToolResult
// with isError, resultType "complete"), persists the task durably (tasks/get
// finds it from here on), enqueues it and returns its createTaskResult.
// A tool registered with [GatherInputFirst] runs its input rounds over the
// MCP request (MRTR) before the task exists, which only the go-sdk path
// can do: CreateTask answers -32603 for it, as for an unknown tool.
func (s *Server) createFor(ctx context.Context, owner, tool string, args json.RawMessage) (mcp.Result, error) {
	t := s.tools[tool]
	if t == nil || t.inputFirst {
		return nil, &jsonrpc.Error{Code: CodeInternalError, Message: "CreateTask: " + tool + " is not a task tool created without input rounds"}
	}
	res, err := s.create(ctx, creation{tool: t, owner: owner, args: args})
	return middlewareCallResult(res), err
}

// principalOf returns the verified principal behind a request ("" when there
// is none), as every task operation takes it: Options.Principal, or else
// the UserID of extra.TokenInfo; under Options.Anonymous, a request without
// one gets the shared anonymous principal.
func (s *Server) principalOf(ctx context.Context, extra *mcp.RequestExtra) string {
	return s.principal(ctx, extra)
}

// toolInfo describes a registered task tool.
type toolInfo struct {
	// Support says whether the tool may or must run as a task.
	Support Support
	// GatherInputFirst: the tool was registered with [GatherInputFirst].
	GatherInputFirst bool
	// ParamHeaders: its input schema maps a property to an Mcp-Param
	// header (x-mcp-header), which the go-sdk validates on tools/call.
	ParamHeaders bool
}

// taskTool describes the task tool registered under name; ok is false when
// there is none (an ordinary tool, or no tool).
func (s *Server) taskTool(name string) (info toolInfo, ok bool) {
	t := s.tools[name]
	if t == nil {
		return toolInfo{}, false
	}
	return toolInfo{Support: t.support, GatherInputFirst: t.inputFirst, ParamHeaders: t.paramHeaders()}, true
}

// implementation returns the server's identity, which every result carries
// in _meta["io.modelcontextprotocol/serverInfo"].
func (s *Server) implementation() *mcp.Implementation { return s.impl }

// storeUnavailable is the answer to a request whose store work failed or
// ran past Options.StoreTimeout. tasks/get, tasks/update and tasks/cancel
// are safe to repeat. A task-creating tools/call that timed out may still
// have created its task (Redis may apply the write after the answer left):
// a retry then starts a second one.
func storeUnavailable() error {
	return &jsonrpc.Error{Code: CodeInternalError, Message: "task store unavailable; retry shortly", Data: json.RawMessage(`{"retryAfterMs":1000}`)}
}

// lookup reads owner's task id within Options.StoreTimeout: -32602 when it
// is unknown or foreign, -32603 when the store fails.
func (s *Server) lookup(ctx context.Context, owner, id, method string) (*driver.Task, error) {
	if !driver.ValidID(id) {
		return nil, errUnknownTask(id)
	}
	var tok readToken
	if s.cache != nil && method == methodGet {
		var t *driver.Task
		if t, tok = s.cache.get(owner, id); t != nil {
			return t, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StoreTimeout)
	defer cancel()
	t, err := await(ctx, s.storeDirect, func(ctx context.Context) (*driver.Task, error) { return s.store.Get(ctx, owner, id) })
	if errors.Is(err, driver.ErrNotFound) {
		return nil, errUnknownTask(id)
	}
	if err != nil {
		s.log.Error(method+" failed", "task", id, "err", err)
		s.storeFailed(ctx, strings.TrimPrefix(method, "tasks/"))
		return nil, storeUnavailable()
	}
	if s.cache != nil && method == methodGet {
		s.cache.put(tok, t)
	}
	return t, nil
}

// forgetRead drops the read cache's copy of task id: after a write this
// process made to it, before the write is answered, and on news of a
// change, before anyone acts on it.
func (s *Server) forgetRead(id string) {
	if s.cache != nil {
		s.cache.forget(id)
	}
}

// CancelAs requests the cancellation of owner's task id, as owner's
// tasks/cancel does it: a parked or queued task is cancelled at once, a
// running one at its next step boundary. It is for server-side code that
// acts for the task's owner (an operator's dashboard, a tool of your
// own): the caller vouches for owner. An unknown task, or one owner does
// not own, is a -32602 error (*jsonrpc.Error), like an unavailable store
// is a -32603 one.
func (s *Server) CancelAs(ctx context.Context, owner, id string) error {
	_, err := s.cancelTask(ctx, owner, id)
	return err
}

// AnswerAs delivers responses to the input requests of owner's task id,
// as owner's tasks/update does it: each is checked against the request it
// answers (-32602 naming the field when it does not fit, and nothing is
// stored), answers to what the task does not wait for are ignored, and a
// task whose wait is over resumes. Like [Server.CancelAs], it is for
// server-side code that acts for the task's owner.
func (s *Server) AnswerAs(ctx context.Context, owner, id string, responses map[string]json.RawMessage) error {
	_, err := s.updateTask(ctx, owner, id, responses)
	return err
}
