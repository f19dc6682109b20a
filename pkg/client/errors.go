package client

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ErrTaskUnknown is wrapped by the error of a tasks/* request on a task the
// server does not know (JSON-RPC -32602): it expired (its TTL passed), never
// existed, or belongs to another principal.
var ErrTaskUnknown = errors.New("task expired or unknown")

// ErrInputRequired is wrapped by the error of a call whose task waits for
// input that no handler of the call can give (none was set with [OnInput] or
// [OnElicit]). The task is left waiting; answer it with [Client.Update] and
// reattach with [Client.Resume].
var ErrInputRequired = errors.New("the task waits for input and the call has no handler for it")

// ErrDetached is wrapped by the error of a call whose [Detach] context
// ended: the client stopped waiting and left the task as it was.
var ErrDetached = errors.New("stopped waiting for the task")

// ErrCancelled is wrapped by the error of a call whose task was cancelled
// by someone else (a call that cancels its own task when its context ends
// wraps the context's error instead).
var ErrCancelled = errors.New("the task was cancelled")

// TaskError is the error of a call that got a task but not its result. Task
// is the last state the client saw, and Err what went wrong:
//
//   - the task failed: Err is its [*jsonrpc.Error] (code, message, data);
//   - the caller's context ended: Err is the context's error, and Task the
//     state the task reached after tasks/cancel (cancelled, or completed
//     with its Result if it finished first);
//   - [ErrCancelled], [ErrTaskUnknown], [ErrInputRequired], [ErrDetached], an input
//     handler's error, or the transport error that outlasted the retries.
//
// Use errors.As to get it, and errors.Is / errors.As on it for the cause.
type TaskError struct {
	Task *Task
	Err  error
}

// Error says which task ended how: "task ID failed: message (code N)" for a
// failed task, "task ID (status): cause" otherwise.
func (e *TaskError) Error() string {
	if e.Task == nil {
		return fmt.Sprintf("task: %v", e.Err)
	}
	var rpc *jsonrpc.Error
	switch {
	case e.Task.Status == StatusFailed && errors.As(e.Err, &rpc):
		return fmt.Sprintf("task %s failed: %s (code %d)", e.Task.ID, rpc.Message, rpc.Code)
	case e.Task.Status == "":
		return fmt.Sprintf("task %s: %v", e.Task.ID, e.Err)
	}
	return fmt.Sprintf("task %s (%s): %v", e.Task.ID, e.Task.Status, e.Err)
}

// Unwrap returns Err.
func (e *TaskError) Unwrap() error { return e.Err }
