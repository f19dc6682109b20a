package tasks

import (
	"context"
	"log/slog"
	"slices"
	"strings"
)

// AuditMessage is the message of every audit record the server logs (see
// the package doc, "Audit log").
const AuditMessage = "task audit"

// Audit events: the value of the "event" attribute of an audit record.
const (
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

// audit logs one audit record on the server's logger at INFO.
func (s *Server) audit(ctx context.Context, event, principal, task string, attrs ...slog.Attr) {
	attrs = append([]slog.Attr{
		slog.String("event", event), slog.String("principal", principal), slog.String("task", task),
	}, attrs...)
	s.log.LogAttrs(ctx, slog.LevelInfo, AuditMessage, attrs...)
}

// auditKeys is the "keys" attribute: input keys, sorted, comma-separated.
func auditKeys[V any](m map[string]V) slog.Attr {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return slog.String("keys", strings.Join(keys, ","))
}
