package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/pkg/client"
)

// A standing offer (stoppable_batch's "stop early?") is an input request
// the task does not wait for: a client without an input handler keeps
// polling past it to the result, and one that asks for standing offers
// (AskStanding) can answer it and stop the job.
func TestClientStandingOffer(t *testing.T) {
	t.Parallel()
	srv := start(t, nil, "serve")
	url := "http://" + srv.addr + "/mcp"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := map[string]any{"parts": 3, "pauseMillis": 1500}

	var sawOffer bool
	res, err := client.New(url).Call(ctx, "stoppable_batch", args, client.OnStatus(func(tk client.Task) {
		for _, r := range tk.InputRequests {
			sawOffer = sawOffer || r.Standing()
		}
	}))
	if err != nil {
		t.Fatalf("without an input handler: %v", err)
	}
	if got := resultText(t, res); strings.Contains(got, "stopped early") {
		t.Errorf("nobody answered, yet: %q", got)
	}
	if !sawOffer {
		t.Error("the task never showed its standing offer")
	}

	res, err = client.New(url).Call(ctx, "stoppable_batch", args, client.AskStanding(),
		client.OnElicit(func(context.Context, *client.InputRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"stop": true}}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); !strings.Contains(got, "stopped early") {
		t.Errorf("answered stop, got %q", got)
	}
}
