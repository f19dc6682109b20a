package client

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Status is a task's status.
type Status string

// The statuses of a task. Completed, failed and cancelled are terminal: a
// task that reached one never leaves it.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s is completed, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Task is what the client knows of a task: the server's last answer about
// it.
type Task struct {
	// ID is the taskId.
	ID string
	// Status is where the task stands; see the Status constants.
	Status Status
	// StatusMessage is the server's human-readable note on the status
	// (such as "processing part 2 of 5"); it may be empty.
	StatusMessage string
	// CreatedAt and LastUpdatedAt are the server's timestamps (zero if it
	// sent none that parse).
	CreatedAt, LastUpdatedAt time.Time
	// TTL is how long the server keeps the task from its creation; zero
	// when the server set no limit.
	TTL time.Duration
	// PollInterval is the server's suggested interval between two
	// tasks/get; zero when it suggested none.
	PollInterval time.Duration
	// Result is the tool's result, when Status is completed.
	Result *mcp.CallToolResult
	// Error is the JSON-RPC error the task failed with, when Status is
	// failed.
	Error *jsonrpc.Error
	// InputRequests are the requests the task waits for, by key, when
	// Status is input_required.
	InputRequests map[string]*InputRequest
}

// Pending returns the keys of t's input requests in order.
func (t *Task) Pending() []string {
	return slices.Sorted(maps.Keys(t.InputRequests))
}

// InputRequest is one of a task's pending requests for input: a request the
// server would have sent to the client (most often elicitation/create) if it
// held a connection.
type InputRequest struct {
	// Key identifies the request within its task (unique over the task's
	// life); the answer is sent under it.
	Key string
	// Method is the request's method, such as "elicitation/create",
	// "sampling/createMessage" or "roots/list".
	Method string
	// Params are the request's params as sent by the server.
	Params json.RawMessage
}

// Elicitation decodes the params of an elicitation/create request.
func (r *InputRequest) Elicitation() (*mcp.ElicitParams, error) {
	if r.Method != "elicitation/create" {
		return nil, fmt.Errorf("input request %q is %s, not elicitation/create", r.Key, r.Method)
	}
	var p mcp.ElicitParams
	if err := json.Unmarshal(r.Params, &p); err != nil {
		return nil, fmt.Errorf("input request %q: decoding elicitation params: %w", r.Key, err)
	}
	return &p, nil
}

// wireTask is the Task object of SEP-2663 as CreateTaskResult (flat, with
// resultType "task") and tasks/get (resultType "complete", with the
// status-specific payload inline) carry it.
type wireTask struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         Status                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *float64                   `json:"ttlMs"`
	PollIntervalMs *float64                   `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result"`
	Error          *jsonrpc.Error             `json:"error"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
}

// task converts the wire form; it fails only on a payload it cannot read.
func (w *wireTask) task() (*Task, error) {
	if w.TaskID == "" {
		return nil, fmt.Errorf("the task has no taskId")
	}
	if w.Status == "" {
		return nil, fmt.Errorf("task %s has no status", w.TaskID)
	}
	t := &Task{
		ID:            w.TaskID,
		Status:        w.Status,
		StatusMessage: w.StatusMessage,
		CreatedAt:     parseTime(w.CreatedAt),
		LastUpdatedAt: parseTime(w.LastUpdatedAt),
		Error:         w.Error,
	}
	if w.TTLMs != nil && *w.TTLMs > 0 {
		t.TTL = time.Duration(*w.TTLMs * float64(time.Millisecond))
	}
	if w.PollIntervalMs != nil && *w.PollIntervalMs > 0 {
		t.PollInterval = time.Duration(*w.PollIntervalMs * float64(time.Millisecond))
	}
	if len(w.Result) > 0 && string(w.Result) != "null" {
		var r mcp.CallToolResult
		if err := json.Unmarshal(w.Result, &r); err != nil {
			return nil, fmt.Errorf("task %s: decoding its result: %w", w.TaskID, err)
		}
		t.Result = &r
	}
	if len(w.InputRequests) > 0 {
		t.InputRequests = make(map[string]*InputRequest, len(w.InputRequests))
		for k, raw := range w.InputRequests {
			req, err := decodeInputRequest(k, raw)
			if err != nil {
				return nil, fmt.Errorf("task %s: %w", w.TaskID, err)
			}
			t.InputRequests[k] = req
		}
	}
	if t.Status == StatusCompleted && t.Result == nil {
		return nil, fmt.Errorf("task %s is completed without a result", w.TaskID)
	}
	if t.Status == StatusFailed && t.Error == nil {
		t.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task failed without an error object"}
	}
	return t, nil
}

func decodeInputRequest(key string, raw json.RawMessage) (*InputRequest, error) {
	var r struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("input request %q: %w", key, err)
	}
	return &InputRequest{Key: key, Method: r.Method, Params: r.Params}, nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}
