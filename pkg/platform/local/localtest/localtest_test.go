package localtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/platform/local/localtest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type countArgs struct {
	N int `json:"n"`
}

var app = &tasks.App{Name: "counter", Version: "1.0.0", Register: func(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "count", Description: "Counts to n, one durable step each."}, tasks.Required,
		func(ctx context.Context, st *tasks.Step, in countArgs) (*mcp.CallToolResult, error) {
			sum := 0
			for i := 1; i <= in.N; i++ {
				v, err := tasks.Do(st, "step-"+string(rune('0'+i)), func(context.Context) (int, error) { return i, nil })
				if err != nil {
					return nil, err
				}
				sum += v
			}
			return &mcp.CallToolResult{StructuredContent: map[string]int{"sum": sum}, Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
}}

// Serve runs the app's task tools to the end on worker goroutines: a
// required task tool called through a real client comes back completed,
// with its tasks/get state visible meanwhile.
func TestServe(t *testing.T) {
	url := localtest.Serve(t, app)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var seen []client.Status
	res, err := client.New(url).Call(ctx, "count", countArgs{N: 3}, client.OnStatus(func(tk client.Task) { seen = append(seen, tk.Status) }))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.StructuredContent; got == nil {
		t.Fatalf("no structured result: %+v", res)
	}
	if len(seen) == 0 || seen[len(seen)-1] != client.StatusCompleted {
		t.Errorf("statuses %v, want ... completed (the call ran as a task)", seen)
	}
	// Two servers in one test are isolated from each other.
	other := localtest.ServeWith(t, app, localtest.Options{Env: map[string]string{"MCPTASKS_POLL_INTERVAL": "50ms"}})
	if other == url {
		t.Fatal("the same URL twice")
	}
	if _, err := client.New(other).Call(ctx, "count", countArgs{N: 1}); err != nil {
		t.Fatal(err)
	}
}

// remind sleeps an hour, then asks for a confirmation it waits a day for.
var remindApp = &tasks.App{Name: "remind", Version: "1.0.0", Register: func(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "remind", Description: "Sleeps an hour, then asks; waits a day for the answer."}, tasks.Required,
		func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			st.Status("sleeping")
			if err := st.Sleep("hour", time.Hour); err != nil {
				return nil, err
			}
			st.Status("asking")
			ans, err := tasks.Elicit[confirm](st, "confirm", "Still wanted?", tasks.Deadline(24*time.Hour))
			text := "no answer within a day"
			switch {
			case errors.Is(err, tasks.ErrInputTimeout):
			case err != nil:
				return nil, err
			case ans.Accepted() && ans.Content.Yes:
				text = "confirmed"
			default:
				text = "declined"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
}}

type confirm struct {
	Yes bool `json:"yes"`
}

// On a Clock, a tool that sleeps an hour and then waits a day for an
// answer is tested without waiting: the test advances the clock while the
// task sleeps, and again while it waits for input. Sleep, input deadline,
// timestamps, poll advice and the task's expiry all follow the clock.
func TestClock(t *testing.T) {
	start := time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)
	clock := localtest.NewClock(start)
	url := localtest.ServeWith(t, remindApp, localtest.Options{Clock: clock, Env: map[string]string{"MCPTASKS_TASK_TTL": "48h"}})
	c := client.New(url)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	t.Run("answered", func(t *testing.T) {
		var msgs []string
		res, err := c.Call(ctx, "remind", struct{}{},
			client.OnStatus(func(tk client.Task) {
				msgs = append(msgs, tk.StatusMessage)
				if tk.StatusMessage == "sleeping" {
					if tk.PollInterval != time.Second {
						t.Errorf("poll advice while sleeping an hour: %v, want the 1s cap", tk.PollInterval)
					}
					clock.Advance(time.Hour)
				}
			}),
			client.OnElicit(func(_ context.Context, _ *client.InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"yes": true}}, nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Content[0].(*mcp.TextContent).Text; got != "confirmed" {
			t.Errorf("result %q, want confirmed (statuses %q)", got, msgs)
		}
		if now := clock.Now(); now.Before(start.Add(time.Hour)) {
			t.Errorf("the clock reads %v, before the hour passed", now)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		tk, _, err := c.Start(ctx, "remind", struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		created := tk.CreatedAt
		if d := created.Sub(clock.Now()); d > 0 || d < -time.Minute {
			t.Errorf("createdAt %v, clock %v: not stamped on the clock", created, clock.Now())
		}
		tk = waitFor(ctx, t, c, tk.ID, func(tk *client.Task) bool { return tk.StatusMessage == "sleeping" })
		clock.Advance(time.Hour)
		tk = waitFor(ctx, t, c, tk.ID, func(tk *client.Task) bool { return tk.Status == client.StatusInputRequired })
		if tk.LastUpdatedAt.Before(created.Add(time.Hour)) {
			t.Errorf("lastUpdatedAt %v, want an hour after createdAt %v", tk.LastUpdatedAt, created)
		}
		clock.Advance(24 * time.Hour)
		tk = waitFor(ctx, t, c, tk.ID, func(tk *client.Task) bool { return tk.Status.Terminal() })
		if tk.Status != client.StatusCompleted || tk.Result == nil || tk.Result.Content[0].(*mcp.TextContent).Text != "no answer within a day" {
			t.Errorf("task after the deadline: %s %+v, want completed with the deadline's result", tk.Status, tk.Result)
		}
		// The task stays readable for its TTL (48h from creation) and
		// expires then, on the clock.
		if _, err := c.Get(ctx, tk.ID); err != nil {
			t.Fatalf("tasks/get within the TTL: %v", err)
		}
		clock.Advance(24 * time.Hour)
		if _, err := c.Get(ctx, tk.ID); !errors.Is(err, client.ErrTaskUnknown) {
			t.Errorf("tasks/get after the TTL: %v, want the task expired", err)
		}
	})
}

// waitFor polls the task until ok says it is there.
func waitFor(ctx context.Context, t *testing.T, c *client.Client, id string, ok func(*client.Task) bool) *client.Task {
	t.Helper()
	for {
		tk, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(tk) {
			return tk
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s stayed %s (%q)", id, tk.Status, tk.StatusMessage)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
