package tasks_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/pkg/tasks"
)

// A status the handler sets after its last step (its final word, such as
// "done") stays on the finished task; one set before a step of an earlier
// invocation, and only replayed since, is cleared
// (TestStatusMessageClearedOnTerminal).
func TestFinalStatusMessageKept(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
			tasks.AddTool(s, &mcp.Tool{Name: "nap", Description: "sleeps, then says done"}, tasks.Optional,
				func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
					st.Status("napping")
					if err := st.Sleep("nap", 50*time.Millisecond); err != nil {
						return nil, err
					}
					st.Status("done")
					return text("rested"), nil
				})
		})
		h.work(t, 1)
		id := h.create(t, "nap", nil)
		if tk := h.wait(t, id); tk.Status != "completed" || tk.StatusMessage != "done" {
			t.Errorf("nap ended %s with statusMessage %q, want completed with \"done\"", tk.Status, tk.StatusMessage)
		}
	})
}
