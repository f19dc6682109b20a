package tasks_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mcptasks/mcptasks/internal/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// logRecorder is a slog.Handler that keeps every record, for tests that
// assert what the server logs. It is safe for concurrent use.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

// logRecord is a record with its attributes flattened to strings.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
	return nil
}

// all returns the records that match, oldest first.
func (l *logRecorder) all(match func(logRecord) bool) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}

func atLeast(level slog.Level) func(logRecord) bool {
	return func(r logRecord) bool { return r.Level >= level }
}

func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

// Ids the server never issued are unknown tasks on every path, before they
// reach Redis: "queue" names the Redis queue's sorted set under the same
// prefix, which the task scripts used to run against (-32603 and an ERROR
// line while the queue key existed, -32602 otherwise: an oracle of other
// tenants' activity).
func TestForeignIDsAreUnknown(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		logs := &logRecorder{}
		h := newHarness(t, backend, tasks.Options{Logger: logs.logger()}, registerNoop(1))
		// A created task waits in the queue (no worker runs): the queue's
		// sorted set "mcptasks:{queue}" exists.
		waiting := h.create(t, "noop", nil)
		if n, err := h.rc.Do(t.Context(), h.rc.B().Zcard().Key("mcptasks:{queue}").Build()).AsInt64(); err != nil || n != 1 {
			t.Fatalf("the queue key does not hold the waiting task: %d, %v", n, err)
		}
		ids := []string{"queue", "{queue}", "due", waiting + "x", waiting[1:], strings.Repeat("A", 21) + "B", strings.Repeat("A", 21) + "!"}
		for _, id := range ids {
			for _, path := range []struct {
				name string
				c    *mcptest.Client
			}{{"lean", h.c}, {"go-sdk", h.sdk}} {
				for _, call := range []struct {
					method string
					params map[string]any
				}{
					{"tasks/get", map[string]any{"taskId": id}},
					{"tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"q": map[string]any{"action": "decline"}}}},
					{"tasks/cancel", map[string]any{"taskId": id}},
				} {
					r := path.c.Call(t, call.method, call.params)
					if r.Error == nil || r.HTTP != 400 || r.Error.Code != tasks.CodeInvalidParams || r.Error.Message != "unknown taskId: "+id {
						t.Errorf("%s %s %q: HTTP %d %+v, want HTTP 400 -32602 unknown taskId", path.name, call.method, id, r.HTTP, r.Error)
					}
				}
			}
			res, err := h.srv.Advance(t.Context(), id)
			if err != nil || !res.Skipped || res.Steps != 0 {
				t.Errorf("Advance(%q) = %+v, %v; want skipped as not found", id, res, err)
			}
		}
		for _, r := range logs.all(atLeast(slog.LevelWarn)) {
			t.Errorf("logged %s %q %v", r.Level, r.Msg, r.Attrs)
		}
		// The queue was not touched: the waiting task is still delivered.
		if n, err := h.rc.Do(t.Context(), h.rc.B().Zcard().Key("mcptasks:{queue}").Build()).AsInt64(); err != nil || n != 1 {
			t.Errorf("queue after the probes: %d entries, %v; want the waiting task", n, err)
		}
		h.work(t, 1)
		if tk := h.wait(t, waiting); tk.Status != "completed" {
			t.Errorf("the waiting task ended %s", tk.Status)
		}
	})
}
