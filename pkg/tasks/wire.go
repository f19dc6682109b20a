package tasks

import (
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ExtensionID is the capability key of the tasks extension (SEP-2663).
const ExtensionID = "io.modelcontextprotocol/tasks"

// Methods of the tasks extension.
const (
	MethodGet    = "tasks/get"
	MethodUpdate = "tasks/update"
	MethodCancel = "tasks/cancel"
)

// Error codes used by the extension.
const (
	CodeHeaderMismatch      = mcp.CodeHeaderMismatch                    // -32020
	CodeMissingCapabilities = mcp.CodeMissingRequiredClientCapabilities // -32021
	CodeInvalidParams       = -32602
	CodeInternalError       = -32603
	// CodeTooManyTasks answers a task-creating tools/call whose principal
	// has Options.MaxLiveTasks live tasks already (an implementation-defined
	// server error; data carries {"maxLiveTasks": n}).
	CodeTooManyTasks = -32029
)

// wireTime formats a timestamp as the protocol's ISO 8601 (RFC 3339, UTC,
// millisecond precision).
func wireTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// TaskFields is the Task object of SEP-2663, shared by CreateTaskResult and
// DetailedTask.
type TaskFields struct {
	TaskID        string `json:"taskId"`
	Status        Status `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is the integer lifetime from creation in ms; nil encodes null.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
}

func taskFields(t *Task) TaskFields {
	ttl := t.TTL.Milliseconds()
	return TaskFields{
		TaskID:         t.ID,
		Status:         t.Status,
		StatusMessage:  t.StatusMessage,
		CreatedAt:      wireTime(t.CreatedAt),
		LastUpdatedAt:  wireTime(t.UpdatedAt),
		TTLMs:          &ttl,
		PollIntervalMs: t.PollInterval.Milliseconds(),
	}
}

// CreateTaskResult is returned by tools/call in lieu of a CallToolResult. It
// is flat: the task's fields sit beside resultType "task", and it never
// carries result, error, inputRequests or requestState.
type CreateTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	TaskFields
}

// NewCreateTaskResult returns the handle for t.
func NewCreateTaskResult(t *Task) *CreateTaskResult {
	return &CreateTaskResult{ResultType: "task", TaskFields: taskFields(t)}
}

// DetailedTask is the result of tasks/get: the task with its status-specific
// payload inline (result when completed, error when failed, inputRequests
// when input_required).
type DetailedTask struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	TaskFields
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         *ErrorObject               `json:"error,omitempty"`
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

// NewDetailedTask returns the tasks/get view of t.
func NewDetailedTask(t *Task) *DetailedTask {
	d := &DetailedTask{ResultType: "complete", TaskFields: taskFields(t)}
	switch t.Status {
	case StatusCompleted:
		d.Result = t.Result
	case StatusFailed:
		d.Error = t.Error
	case StatusInputRequired:
		d.InputRequests = t.InputRequests
		if d.InputRequests == nil {
			d.InputRequests = map[string]json.RawMessage{}
		}
	}
	return d
}

// Ack is the empty acknowledgement of tasks/update and tasks/cancel.
type Ack struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// GetParams are the params of tasks/get and tasks/cancel.
type GetParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// UpdateParams are the params of tasks/update.
type UpdateParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}
