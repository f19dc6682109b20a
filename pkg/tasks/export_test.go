package tasks

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Exports for the external tests (package tasks_test) of what the HTTP
// handler and the engine use between themselves: the tests drive the
// operations directly, without the wire, and diff the handler against the
// go-sdk alone.

const AuditedSDKVersion = auditedSDKVersion

var NewSDKHandler = newSDKHandler

type (
	CreateTaskResult       = createTaskResult
	DetailedTask           = detailedTask
	LegacyCreateTaskResult = legacyCreateTaskResult
	LegacyListTasksResult  = legacyListTasksResult
)

func (s *Server) GetTask(ctx context.Context, owner, id string) (mcp.Result, error) {
	return s.getTask(ctx, owner, id)
}

func (s *Server) CancelTask(ctx context.Context, owner, id string) (mcp.Result, error) {
	return s.cancelTask(ctx, owner, id)
}

func (s *Server) UpdateTask(ctx context.Context, owner, id string, responses map[string]json.RawMessage) (mcp.Result, error) {
	return s.updateTask(ctx, owner, id, responses)
}

func (s *Server) CreateTask(ctx context.Context, owner, tool string, args json.RawMessage) (mcp.Result, error) {
	return s.createFor(ctx, owner, tool, args)
}

func (s *Server) LeanPathDisabled() string { return s.leanPathDisabled() }

func (s *Server) LegacyCreateTask(ctx context.Context, owner, tool string, args json.RawMessage, ttl time.Duration) (mcp.Result, error) {
	return s.legacyCreateTask(ctx, owner, tool, args, ttl)
}

func (s *Server) LegacyListTasks(ctx context.Context, owner, cursor string) (mcp.Result, error) {
	return s.legacyListTasks(ctx, owner, cursor)
}

func (s *Server) WatchTask(ctx context.Context, owner, id string, each func(*driver.Task) bool) (*driver.Task, error) {
	return s.watchTask(ctx, owner, id, each)
}

func (s *Server) Listen(ctx context.Context, owner string, ids []string) (*taskListen, error) {
	return s.listen(ctx, owner, ids)
}

func (s *Server) ListenLimit() time.Duration { return s.listenLimit() }

func (s *Server) PollAdvice(t *driver.Task, now time.Time) time.Duration {
	return s.pollAdvice(t, now)
}

func LegacyOutcome(t *driver.Task, related bool) (mcp.Result, error) {
	return legacyOutcome(t, related)
}

// Method names of the wire.
const (
	MethodListen       = methodListen
	MethodAcknowledged = methodAcknowledged
	MethodTaskStatus   = methodTaskStatus
)
