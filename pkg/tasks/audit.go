package tasks

import (
	"context"
	"log/slog"
	"slices"
	"strings"
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
