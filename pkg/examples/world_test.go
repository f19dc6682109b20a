package examples_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/queue/redisqueue"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/redisstore"
)

// world is the example tools on the embedded Redis, served by a test
// server (their callback URLs too); drain runs the queue's messages by
// hand.
type world struct {
	srv *tasks.Server
	q   *redisqueue.Queue
}

func newWorld(t *testing.T) *world {
	rc := testredis.Client(t, "embedded")
	var handler http.Handler // the server's, once it is built
	callbacks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(callbacks.Close)
	q := redisqueue.New(rc, nil)
	srv := tasks.New(&mcp.Implementation{Name: "examples", Version: examples.Version}, nil,
		redisstore.New(rc, &redisstore.Options{Queue: q}), q,
		&tasks.Options{Anonymous: true, Logger: slog.New(slog.DiscardHandler), PublicURL: callbacks.URL})
	examples.Register(srv)
	handler = tasks.NewHandler(srv, nil)
	return &world{srv: srv, q: q}
}

// drain advances every due message until none is left.
func (w *world) drain(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	for range 1000 {
		d, ok, _, err := w.q.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		res, err := w.srv.Advance(ctx, d.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Settled {
			_ = w.q.Ack(ctx, d)
		}
	}
	t.Fatal("the queue never drained")
}

func (w *world) create(t *testing.T, tool, args string) string {
	t.Helper()
	// The store dispatches: the creation enqueues the task.
	task, err := w.srv.Store().Create(t.Context(), &driver.NewTask{ID: driver.NewID(), Owner: "anonymous", Tool: tool,
		Args: json.RawMessage(args), TTL: time.Hour, PollInterval: time.Second, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return task.ID
}

func (w *world) result(t *testing.T, id string) string {
	t.Helper()
	tk, err := w.srv.Store().Get(t.Context(), "anonymous", id)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(tk.Result, &r); err != nil || len(r.Content) != 1 {
		t.Fatalf("task %s is %s: %s %v", id, tk.Status, tk.Result, tk.Error)
	}
	return r.Content[0].Text
}

// transcode hands its job to the service with a callback URL, waits, and
// completes with what the service POSTs there.
func TestTranscode(t *testing.T) {
	w := newWorld(t)
	jobs := make(chan examples.Job, 1)
	service := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var j examples.Job
		_ = json.NewDecoder(r.Body).Decode(&j)
		jobs <- j
	}))
	defer service.Close()
	id := w.create(t, "transcode", `{"video":"cat.mov","service":"`+service.URL+`"}`)
	w.drain(t)
	job := <-jobs
	if job.Video != "cat.mov" || !strings.Contains(job.CallbackURL, tasks.CallbackPath+id+"/") {
		t.Fatalf("job %+v", job)
	}
	resp, err := http.Post(job.CallbackURL, "application/json", strings.NewReader(`{"output":"s3://out/cat.mp4"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("callback: %s", resp.Status)
	}
	w.drain(t)
	if got := w.result(t, id); got != "transcoded cat.mov to s3://out/cat.mp4" {
		t.Errorf("result %q", got)
	}
	// The fake service in the worker's process calls back by itself.
	fake := w.create(t, "transcode", `{"video":"dog.mov","seconds":0}`)
	w.drain(t)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		w.drain(t)
		if tk, _ := w.srv.Store().Get(context.Background(), "anonymous", fake); tk.Status.Terminal() || time.Now().After(deadline) {
			break
		}
	}
	if got := w.result(t, fake); got != "transcoded dog.mov to s3://videos/dog.mov.mp4" {
		t.Errorf("result %q", got)
	}
}

// index_documents indexes every document once, in parallel or in
// sequence, to the same result.
func TestIndexDocuments(t *testing.T) {
	w := newWorld(t)
	par := w.create(t, "index_documents", `{"documents":12,"concurrency":4}`)
	seq := w.create(t, "index_documents", `{"documents":12,"sequential":true}`)
	w.drain(t)
	for _, id := range []string{par, seq} {
		if got := w.result(t, id); got != "indexed 12 documents, 6854 words" {
			t.Errorf("result %q", got)
		}
	}
}
