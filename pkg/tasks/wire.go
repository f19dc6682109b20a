package tasks

import (
	"encoding/json"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
)

// Names: the wire's identifiers and error codes (what a client sees), and
// those of the engine's telemetry and audit records (see the package doc,
// "Telemetry" and "Audit log").
const (
	// ExtensionID is the capability key of the tasks extension (SEP-2663).
	ExtensionID = "io.modelcontextprotocol/tasks"
	// ProtocolVersion is the MCP revision the tasks extension is served on.
	ProtocolVersion = "2026-07-28"
	// LegacyProtocolVersion is the protocol revision whose tasks utility the
	// legacy dialect speaks.
	LegacyProtocolVersion = "2025-11-25"
	// RelatedTaskMetaKey is the _meta key that relates a 2025-11-25 message to
	// a task ({"taskId": id}).
	RelatedTaskMetaKey = "io.modelcontextprotocol/related-task"
	// MetaStanding is the params._meta key, set to true, that marks an entry
	// of inputRequests as a standing offer ([Step.Offer]): the task does not
	// wait for it, so a client may leave it unanswered and keep polling (the
	// tasks extension itself has no such notion).
	MetaStanding = "dev.mcptasks/standing"
	// CallbackPath is the path under which the MCP function serves callback
	// URLs (see [Callback]): Options.PublicURL + CallbackPath + taskId + "/" +
	// token. Every platform routes it to the MCP function: the local server
	// and a Lambda Function URL serve every path, Vercel needs the rewrite of
	// /callbacks/:path* to /api/mcp in vercel.json.
	CallbackPath = "/callbacks/"
	// Error codes used by the extension.
	CodeHeaderMismatch      = mcp.CodeHeaderMismatch                    // -32020
	CodeMissingCapabilities = mcp.CodeMissingRequiredClientCapabilities // -32021
	CodeInvalidParams       = -32602
	CodeInternalError       = -32603
	// CodeTooManyTasks answers a task-creating tools/call whose principal
	// has Options.MaxLiveTasks live tasks already (an implementation-defined
	// server error; data carries {"maxLiveTasks": n}).
	CodeTooManyTasks = -32029
	// CodeInvalidRequest is JSON-RPC's invalid request error: the legacy
	// dialect's answer to an inline call that needs input the client did not
	// declare it can give (elicitation).
	CodeInvalidRequest = jsonrpc.CodeInvalidRequest
	// CodeTooManyStreams answers a task stream (subscriptions/listen) or a
	// held 2025-11-25 tasks/result past Options.MaxStreamsPerPrincipal or
	// Options.MaxStreams (an implementation-defined server error). Its data
	// carries {"retryAfterMs": n, "maxStreams": m}, and the HTTP answer a
	// Retry-After header: the client polls tasks/get meanwhile, or opens the
	// stream again later.
	CodeTooManyStreams = -32028

	// ScopeName is the instrumentation scope of the engine's spans and
	// metrics.
	ScopeName = "github.com/mcptasks/mcptasks/pkg/tasks"
	// Attribute keys of the engine's spans and metrics. Where the OpenTelemetry
	// semantic conventions name a thing (the MCP method, the tool, the error
	// type) their name is used; the rest are this project's own.
	AttrMCPMethod   = attribute.Key("mcp.method.name")
	AttrTool        = attribute.Key("gen_ai.tool.name")
	AttrErrorType   = attribute.Key("error.type")
	AttrTaskID      = attribute.Key("mcptasks.task.id")
	AttrTaskStatus  = attribute.Key("mcptasks.task.status")
	AttrStep        = attribute.Key("mcptasks.step.name")
	AttrStepAttempt = attribute.Key("mcptasks.step.attempt")
	// AttrStepOutcome is ok, error (failed for good) or retry.
	AttrStepOutcome = attribute.Key("mcptasks.step.outcome")
	AttrStoreOp     = attribute.Key("mcptasks.store.operation")
	// Metric names. Units follow the semantic conventions (seconds, {task}).
	MetricTasksCreated    = "mcptasks.tasks.created"
	MetricTasksEnded      = "mcptasks.tasks.ended"
	MetricStepDuration    = "mcptasks.step.duration"
	MetricStepAttempts    = "mcptasks.step.attempts"
	MetricQueueLag        = "mcptasks.queue.lag"
	MetricSweepRecoveries = "mcptasks.sweep.recoveries"
	MetricStoreErrors     = "mcptasks.store.errors"
	// AuditMessage is the message of every audit record the server logs (see
	// the package doc, "Audit log").
	AuditMessage = "task audit"
	// Audit events: the value of the "event" attribute of an audit record.
	// AuditCreated: a task was durably created (its handle is about to be
	// returned).
	AuditCreated = "created"
	// AuditInputRequested: the task parked in input_required, asking for
	// the input keys in "keys".
	AuditInputRequested = "input_requested"
	// AuditInputAnswered: the owner's tasks/update delivered answers for
	// "keys" (keys not outstanding are ignored by the task); "resumed"
	// says whether the task left input_required because of them.
	AuditInputAnswered = "input_answered"
	// AuditCancelRequested: the owner's tasks/cancel was accepted; "status"
	// is the task's status right after it (cancelled at once when no step
	// was running).
	AuditCancelRequested = "cancel_requested"
	// AuditTerminal: the task reached a terminal status ("status"). Logged
	// once per task, by whichever process made the transition.
	AuditTerminal = "terminal"
)

// Methods of the tasks extension.
const (
	methodGet    = "tasks/get"
	methodUpdate = "tasks/update"
	methodCancel = "tasks/cancel"
)

// wireTime formats a timestamp as the protocol's ISO 8601 (RFC 3339, UTC,
// millisecond precision).
func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// wireTaskFields is the Task object of SEP-2663, shared by CreateTaskResult and
// detailedTask.
type wireTaskFields struct {
	TaskID        string        `json:"taskId"`
	Status        driver.Status `json:"status"`
	StatusMessage string        `json:"statusMessage,omitempty"`
	CreatedAt     string        `json:"createdAt"`
	LastUpdatedAt string        `json:"lastUpdatedAt"`
	// TTLMs is the integer lifetime from creation in ms; nil encodes null.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
}

func taskFields(t *driver.Task) wireTaskFields {
	ttl := t.TTL.Milliseconds()
	return wireTaskFields{
		TaskID:         t.ID,
		Status:         t.Status,
		StatusMessage:  t.StatusMessage,
		CreatedAt:      wireTime(t.CreatedAt),
		LastUpdatedAt:  wireTime(t.UpdatedAt),
		TTLMs:          &ttl,
		PollIntervalMs: t.PollInterval.Milliseconds(),
	}
}

// createTaskResult is returned by tools/call in lieu of a CallToolResult. It
// is flat: the task's fields sit beside resultType "task", and it never
// carries result, error, inputRequests or requestState.
type createTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	wireTaskFields
}

// newCreateTaskResult returns the handle for t.
func newCreateTaskResult(t *driver.Task) *createTaskResult {
	return &createTaskResult{ResultType: "task", wireTaskFields: taskFields(t)}
}

// detailedTask is the result of tasks/get: the task with its status-specific
// payload inline (result when completed, error when failed, inputRequests
// when input_required).
type detailedTask struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	wireTaskFields
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         *driver.ErrorObject        `json:"error,omitempty"`
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

// newDetailedTask returns the tasks/get view of t.
func newDetailedTask(t *driver.Task) *detailedTask {
	d := &detailedTask{ResultType: "complete", wireTaskFields: taskFields(t)}
	switch t.Status {
	case driver.StatusCompleted:
		d.Result = t.Result
	case driver.StatusFailed:
		d.Error = t.Error
	case driver.StatusInputRequired:
		d.InputRequests = t.InputRequests
		if d.InputRequests == nil {
			d.InputRequests = map[string]json.RawMessage{}
		}
	}
	return d
}

// ack is the empty acknowledgement of tasks/update and tasks/cancel.
type ack struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// getParams are the params of tasks/get and tasks/cancel.
type getParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// updateParams are the params of tasks/update.
type updateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}
