package sqsqueue_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/fakesqs"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/sqsqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// A parallel step runs over SQS: each branch is a message of its own,
// carrying its branch id (on a FIFO queue, in a message group of its own,
// so the branches run in parallel, with a deduplication id of its own),
// and every branch runs once.
func TestParallelStep(t *testing.T) {
	t.Parallel()
	srv := fakesqs.Start(t)
	rc := testredis.Client(t, "redis-server")
	for _, name := range []string{"tasks", "tasks.fifo"} {
		t.Run(name, func(t *testing.T) {
			url := srv.CreateQueue(name)
			fifo := strings.HasSuffix(name, ".fifo")
			store := redisstore.New(rc, &redisstore.Options{Prefix: "sqs" + driver.NewID() + ":"})
			q := sqsqueue.New(srv.Client(), url, &sqsqueue.Options{FIFO: fifo})
			ts := tasks.New(&mcp.Implementation{Name: "t", Version: "1"}, nil, store, q, &tasks.Options{Anonymous: true})
			var mu sync.Mutex
			runs := map[int]int{}
			tasks.AddTool(ts, &mcp.Tool{Name: "fan"}, tasks.Optional, func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
				sq, err := tasks.All(st, "square", []int{0, 1, 2, 3, 4, 5}, func(ctx context.Context, i int) (int, error) {
					mu.Lock()
					runs[i]++
					mu.Unlock()
					return i * i, nil
				}, tasks.Concurrency(3))
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(sq)}}}, err
			})
			ctx := t.Context()
			task, err := store.Create(ctx, &driver.NewTask{ID: driver.NewID(), Owner: "anonymous", Tool: "fan", Args: []byte(`{}`),
				TTL: time.Hour, PollInterval: time.Second, Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Enqueue(ctx, task.ID, time.Time{}); err != nil {
				t.Fatal(err)
			}
			// The worker: every message of the queue, in order.
			var branches []fakesqs.Message
			for handled := 0; ; handled++ {
				msgs := slices.DeleteFunc(srv.Messages(), func(m fakesqs.Message) bool { return m.QueueURL != url })
				if handled == len(msgs) || handled > 100 {
					break
				}
				id, err := queue.DecodeMessage([]byte(msgs[handled].Body))
				if err != nil {
					t.Fatal(err)
				}
				if _, _, _, ok := driver.ParseBranchID(id); ok {
					branches = append(branches, msgs[handled])
				}
				if _, err := ts.Advance(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			got, err := store.Get(ctx, "anonymous", task.ID)
			if err != nil || got.Status != driver.StatusCompleted || !strings.Contains(string(got.Result), "[0 1 4 9 16 25]") {
				t.Fatalf("task: %+v, %v", got, err)
			}
			for i := range 6 {
				if runs[i] != 1 {
					t.Errorf("branch %d ran %d times, want 1", i, runs[i])
				}
			}
			if len(branches) != 6 {
				t.Errorf("%d branch messages, want 6", len(branches))
			}
			for _, m := range branches {
				id, _ := queue.DecodeMessage([]byte(m.Body))
				if fifo && (m.GroupID != id || !strings.HasPrefix(m.DedupID, id+".")) {
					t.Errorf("branch %s: group %q dedup %q, want its own", id, m.GroupID, m.DedupID)
				}
			}
		})
	}
}
