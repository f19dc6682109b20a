package tasks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/rueidis"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// The 2025-11-25 tasks utility on the same server and store: what the
// handler calls for a task-augmented tools/call, tasks/list and
// tasks/result of a client on that revision. The worker is driven by hand.
func TestLegacyUtilityOperations(t *testing.T) {
	redis, _ := embedredis.Start(nil)
	defer redis.Close()
	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redis.Addr()}, ForceSingleClient: true, DisableCache: true})
	defer client.Close()
	srv := tasks.New(&mcp.Implementation{Name: "example", Version: "1"}, nil,
		redisstore.New(client, nil), redisqueue.New(client, nil), nil)
	tasks.AddTool(srv, &mcp.Tool{Name: "shout", Description: "Shouts."}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, in struct{}) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "HEY"}}}, nil
		})

	ctx := context.Background()
	res, _ := srv.LegacyCreateTask(ctx, "alice", "shout", nil, 0)
	created := res.(*tasks.LegacyCreateTaskResult)
	if created.Task.Status != driver.StatusWorking || *created.Task.TTL != 3600000 {
		t.Errorf("created %+v, want working with a ttl of an hour", created.Task)
	}

	_, _ = srv.Advance(ctx, created.Task.TaskID)

	list, _ := srv.LegacyListTasks(ctx, "alice", "")
	if ts := list.(*tasks.LegacyListTasksResult).Tasks; len(ts) != 1 || ts[0].TaskID != created.Task.TaskID || ts[0].Status != driver.StatusCompleted {
		t.Errorf("tasks/list %+v, want the completed task", ts)
	}
	done, _ := srv.WatchTask(ctx, "alice", created.Task.TaskID, func(*driver.Task) bool { return false })
	out, _ := tasks.LegacyOutcome(done, true)
	b, _ := json.Marshal(out)
	if want := `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + done.ID + `"}},"content":[{"type":"text","text":"HEY"}]}`; string(b) != want {
		t.Errorf("tasks/result %s, want %s", b, want)
	}
}
