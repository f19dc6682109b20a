package qstash_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/fakeqstash"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/qstash"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// A parallel step runs over QStash: each branch is a publish of its own,
// carrying its branch id, with a deduplication id of its own, and every
// branch runs once.
func TestParallelStep(t *testing.T) {
	t.Parallel()
	srv := fakeqstash.Start(t)
	rc := testredis.Client(t, "redis-server")
	store := redisstore.New(rc, &redisstore.Options{Prefix: "qs" + driver.NewID() + ":"})
	q, err := qstash.New(srv.Token, workerURL, &qstash.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
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
	// The worker: every publish QStash accepted, in order.
	dedup := map[string]bool{}
	branches := 0
	for handled := 0; ; handled++ {
		pubs := srv.Published()
		if handled == len(pubs) || handled > 100 {
			break
		}
		p := pubs[handled]
		if p.Duplicate {
			continue
		}
		id, err := queue.DecodeMessage(p.Body)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, ok := driver.ParseBranchID(id); ok {
			branches++
			d := p.Header.Get("Upstash-Deduplication-Id")
			if !strings.HasPrefix(d, id+".") || dedup[d] {
				t.Errorf("branch %s: deduplication id %q, want one of its own", id, d)
			}
			dedup[d] = true
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
	if branches != 6 {
		t.Errorf("%d branch publishes, want 6", branches)
	}
}
