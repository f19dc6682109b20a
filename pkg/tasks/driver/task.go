package driver

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// Bounds every store shares with the engine.
const (
	// MaxTTL caps a task's TTL: a store may size what it keeps for a
	// task (its indexes' windows, its keys' expiry) by it.
	MaxTTL = 7 * 24 * time.Hour
	// ListPageSize is how many tasks one page of a list holds at most
	// (Lister.List, and the tasks/list the engine serves from it).
	ListPageSize = 50
	// MaxBranches bounds the branches of one parallel step: a branch id's
	// index is below it.
	MaxBranches = 1000
	// MaxEvents bounds the events a task holds when a signal comes before
	// its wait: an EventStore refuses such a signal (ErrEventClosed) once
	// the task holds this many events (waits and deliveries).
	MaxEvents = 100
)

// Errors a [Store] returns.
var (
	// ErrNotFound means no task with that id is visible to the caller: it
	// never existed, expired, or belongs to another principal. The three
	// cases are deliberately indistinguishable.
	ErrNotFound = errors.New("task not found")
	// ErrFenced means a worker's write was rejected because another worker
	// claimed the task since (its generation is stale) or the task reached a
	// terminal state.
	ErrFenced = errors.New("task write fenced: claim is stale or task is terminal")
	// ErrLeased means another worker holds a live lease on the task.
	ErrLeased = errors.New("task is leased by another worker")
	// ErrExists means Create was given an id that is already in use.
	ErrExists = errors.New("task id already exists")
	// ErrTooManyTasks means Create refused a task because its owner has
	// NewTask.MaxLive live tasks already; nothing was created.
	ErrTooManyTasks = errors.New("too many live tasks for this principal")
	// ErrBadCursor means a tasks/list cursor was not one the store issued.
	ErrBadCursor = errors.New("invalid tasks/list cursor")
	// ErrEventClosed: the task takes no more of this signal. It was
	// delivered already, its wait timed out, the name is not a signal's,
	// the task holds MaxEvents events, or the task ended.
	ErrEventClosed = errors.New("tasks: the task takes no more of this event")
)

// Status is the lifecycle state of a task.
type Status string

// The task states of SEP-2663. Completed, Failed and Cancelled are terminal:
// once a task reaches one of them it never changes again.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s is a final state.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Task is the durable record of one task, in engine terms. The wire shapes
// (CreateTaskResult, DetailedTask) are built from it.
type Task struct {
	ID    string
	Owner string // principal that created the task; never empty
	Tool  string
	Args  json.RawMessage

	Status        Status
	StatusMessage string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	TTL           time.Duration // from CreatedAt; the task expires after it
	PollInterval  time.Duration

	// Result is the final CallToolResult, set when Status is completed.
	Result json.RawMessage
	// Error is the JSON-RPC error object, set when Status is failed.
	Error *ErrorObject
	// InputRequests are the outstanding input requests (key -> MRTR request
	// object), set when Status is input_required: those the task waits for,
	// and its outstanding offers (see Change.Append).
	InputRequests map[string]json.RawMessage

	// CancelRequested is set by Cancel on a task that a worker was running.
	CancelRequested bool
	// LeaseUntil is when the current worker's lease ends (zero if none).
	LeaseUntil time.Time
	// WakeAt is when a parked task wants to run again (zero if none).
	WakeAt time.Time
	// TraceParent is the W3C traceparent of the span of the tools/call
	// that created the task ("" when tracing was off): every later span of
	// the task joins its trace.
	TraceParent string
	// Awaiting is the event a released task waits for (Change.Await): a
	// callback, a signal or the join of a parallel step; "" when none.
	Awaiting string
}

// ExpiresAt is when the task stops being readable.
func (t *Task) ExpiresAt() time.Time { return t.CreatedAt.Add(t.TTL) }

// NewTask describes a task to create.
type NewTask struct {
	ID           string // from NewID
	Owner        string
	Tool         string
	Args         json.RawMessage
	TTL          time.Duration
	PollInterval time.Duration
	Now          time.Time
	// Journal and Responses seed the task with steps already taken
	// synchronously (input gathered over MRTR before the task was created).
	Journal   []Entry
	Responses map[string]json.RawMessage
	// TraceParent is stored as Task.TraceParent.
	TraceParent string
	// Listed asks a store that lists tasks (Lister) to index the task in
	// its owner's list. The server sets it when it serves tasks/list (not
	// under Options.Anonymous, where nobody could list): an index nobody
	// reads costs nothing.
	Listed bool
	// MaxLive, when positive, makes Create refuse the task with
	// ErrTooManyTasks if Owner already has that many live (created, not
	// yet terminal, not expired) tasks. The check and the count are
	// atomic: concurrent creations never exceed it.
	MaxLive int
}

// DueTask is a task the sweeper must look at, and the attention time it
// was due at.
type DueTask struct {
	ID string
	At time.Time
}

// ErrorObject is a JSON-RPC error object, as stored for a failed task.
type ErrorObject struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *ErrorObject) Error() string { return e.Message }

// NewID returns a fresh task id: 128 bits from crypto/rand, base64url.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// idLen is the length of an id from NewID: 16 bytes in unpadded base64url.
const idLen = 22

// ValidID reports whether id has the form of an id [NewID] issues: 22
// characters of the base64url alphabet encoding exactly 16 bytes (the last
// character carries 2 bits, so it is one of A, Q, g, w).
//
// Anything else was never issued, so it names no task: the server answers
// it as an unknown task before it reaches the store, and a Store answers
// ErrNotFound for it without running anything. Task ids become parts of
// store keys; this keeps a caller-chosen id such as "queue" from naming a
// key that is not a task's.
func ValidID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	switch id[idLen-1] {
	case 'A', 'Q', 'g', 'w':
		return true
	}
	return false
}
