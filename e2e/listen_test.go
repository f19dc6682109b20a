package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sseMessage is one JSON-RPC message of a listen stream, as received.
type sseMessage struct {
	Raw    []byte
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta          map[string]any `json:"_meta"`
		Notifications struct {
			TaskIDs []string `json:"taskIds"`
		} `json:"notifications"`
		task
	} `json:"params"`
	Result *struct {
		Meta       map[string]any `json:"_meta"`
		ResultType string         `json:"resultType"`
	} `json:"result"`
	Error *struct {
		Code int64 `json:"code"`
	} `json:"error"`
}

// listen opens subscriptions/listen for taskIds as c and returns the
// stream's messages as they arrive (closed when the stream ends) and the
// HTTP status.
func listen(t *testing.T, c *mcptest.Client, ctx context.Context, id any, taskIDs ...string) (<-chan sseMessage, int) {
	t.Helper()
	body, hdr := c.Envelope("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": taskIDs}})
	var env map[string]any
	_ = json.Unmarshal(body, &env)
	env["id"] = id
	body, _ = json.Marshal(env)
	req, _ := http.NewRequestWithContext(ctx, "POST", c.URL, bytes.NewReader(body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("subscriptions/listen: %v", err)
	}
	out := make(chan sseMessage, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			raw := new(bytes.Buffer)
			_, _ = raw.ReadFrom(resp.Body)
			var m sseMessage
			_ = json.Unmarshal(raw.Bytes(), &m)
			m.Raw = raw.Bytes()
			out <- m
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m sseMessage
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Errorf("stream message %s: %v", data, err)
				continue
			}
			m.Raw = []byte(data)
			out <- m
		}
	}()
	return out, resp.StatusCode
}

// next returns the stream's next message, failing the test after within.
func next(t *testing.T, ch <-chan sseMessage, within time.Duration) (sseMessage, bool) {
	t.Helper()
	select {
	case m, ok := <-ch:
		return m, ok
	case <-time.After(within):
		t.Fatalf("no stream message within %v", within)
		return sseMessage{}, false
	}
}

// listenSchemas validates stream messages against the published 2026-07-28
// schema and the SEP-2663 task shapes layered on it (pkg/tasks/testdata).
type listenSchemas struct {
	ack, note, result *jsonschema.Schema
}

func newListenSchemas(t *testing.T) *listenSchemas {
	compile := mcptest.Schemas(t, "../pkg/tasks/testdata")
	return &listenSchemas{
		ack:    compile("tasks.json#/$defs/TaskSubscriptionAcknowledged"),
		note:   compile("tasks.json#/$defs/TaskStatusNotification"),
		result: compile("mcp.json#/$defs/SubscriptionsListenResultResponse"),
	}
}

func (s *listenSchemas) check(t *testing.T, m sseMessage) {
	t.Helper()
	sch := s.note
	switch {
	case m.Method == "notifications/subscriptions/acknowledged":
		sch = s.ack
	case m.Result != nil:
		sch = s.result
	case m.Method != "notifications/tasks":
		t.Errorf("a task stream carried %s", m.Raw)
		return
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(m.Raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("stream message does not match the schema: %v\n%s", err, m.Raw)
	}
}

// TestListenAcrossProcesses runs the endpoint and the worker as separate
// processes on a real redis-server. A listen stream for a confirm_delete
// task, opened before any worker runs, gets the acknowledgement (only the
// caller's task: someone else's and an unknown id are left out alike),
// the task working, then input_required with the request inline, published
// by the worker process once it starts; after tasks/update, completed with
// the result inline, and the listen result. Every message validates against
// the published schema. A stream on a task that does not end closes with
// its result before MCPTASKS_MAX_DURATION; a listen that does not declare
// the extension gets -32021.
func TestListenAcrossProcesses(t *testing.T) {
	env := []string{
		"REDIS_URL=" + testredis.Start(t),
		"MCPTASKS_MAX_DURATION=6s",
		"MCPTASKS_SWEEP_INTERVAL=300ms",
		"MCPTASKS_POLL_INTERVAL=100ms",
		"MCPTASKS_AUTH_ISSUER=https://issuer.mcptasks.test",
		"MCPTASKS_AUTH_AUDIENCE=https://mcp.mcptasks.test/mcp",
		"MCPTASKS_AUTH_HS256_SECRET=0123456789abcdef0123456789abcdef-e2e",
	}
	api := start(t, env, "serve", "--no-worker")
	alice, bob := newClient(api.addr, true), newClient(api.addr, true)
	alice.Header = http.Header{"Authorization": {"Bearer " + mint(t, env, "alice")}}
	bob.Header = http.Header{"Authorization": {"Bearer " + mint(t, env, "bob")}}
	schemas := newListenSchemas(t)

	var mine, theirs task
	alice.Call(t, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "a.txt"}}).Decode(t, &mine)
	bob.Call(t, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 600}}).Decode(t, &theirs)
	const unknown = "AAAAAAAAAAAAAAAAAAAAAA" // a well-formed id no task has

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Foreign and unknown ids alike: acknowledged as nothing, and the
	// stream ends at once with its result, byte for byte the same.
	var streams [2][]string
	for i, id := range []string{theirs.TaskID, unknown} {
		ch, status := listen(t, alice, ctx, "s", id)
		if status != 200 {
			t.Fatalf("listen for %s: HTTP %d", id, status)
		}
		for m := range ch {
			schemas.check(t, m)
			streams[i] = append(streams[i], string(m.Raw))
		}
	}
	if !slices.Equal(streams[0], streams[1]) || len(streams[0]) != 2 {
		t.Fatalf("a foreign task's stream differs from an unknown one's:\n%q\n%q", streams[0], streams[1])
	}

	// The task's own stream, re-opened as the protocol says when it ends
	// before the task does.
	var seen []string
	var final task
	worker := false
	for listens := 0; final.Status == "" && listens < 10; listens++ {
		ch, _ := listen(t, alice, ctx, "watch", mine.TaskID, theirs.TaskID, unknown)
		ack, _ := next(t, ch, 10*time.Second)
		schemas.check(t, ack)
		if ack.Method != "notifications/subscriptions/acknowledged" || !slices.Equal(ack.Params.Notifications.TaskIDs, []string{mine.TaskID}) ||
			ack.Params.Meta["io.modelcontextprotocol/subscriptionId"] != "watch" {
			t.Fatalf("acknowledgement: %s", ack.Raw)
		}
		for m := range ch {
			schemas.check(t, m)
			if m.Result != nil {
				if m.Result.Meta["io.modelcontextprotocol/subscriptionId"] != "watch" || string(m.ID) != `"watch"` {
					t.Errorf("listen result: %s", m.Raw)
				}
				break
			}
			if m.Params.Meta["io.modelcontextprotocol/subscriptionId"] != "watch" || m.Params.TaskID != mine.TaskID {
				t.Fatalf("notification: %s", m.Raw)
			}
			if len(seen) == 0 || seen[len(seen)-1] != m.Params.Status {
				seen = append(seen, m.Params.Status)
			}
			switch m.Params.Status {
			case "working":
				if !worker {
					worker = true
					start(t, env, "worker") // another process publishes from here on
				}
			case "input_required":
				if _, ok := m.Params.InputRequests["confirm"]; !ok {
					t.Fatalf("input_required without the request inline: %s", m.Raw)
				}
				r := alice.Call(t, "tasks/update", map[string]any{"taskId": mine.TaskID, "inputResponses": map[string]any{
					"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}})
				if r.Error != nil {
					t.Fatalf("tasks/update: %+v", r.Error)
				}
			case "completed":
				final = m.Params.task
				if len(final.Result) == 0 {
					t.Fatalf("completed without the result inline: %s", m.Raw)
				}
			}
		}
	}
	// Working, input_required, (working again, if the stream read the task
	// before the worker finished), completed.
	want := []string{"working", "input_required", "working", "completed"}
	if !slices.Equal(seen, want) && !slices.Equal(seen, slices.Delete(slices.Clone(want), 2, 3)) {
		t.Fatalf("statuses on the stream: %v, want %v", seen, want)
	}

	// A stream on a task that does not end closes with its result within
	// the platform's limit (MCPTASKS_MAX_DURATION=6s).
	began := time.Now()
	ch, _ := listen(t, bob, ctx, 7, theirs.TaskID)
	var last sseMessage
	for m := range ch {
		schemas.check(t, m)
		last = m
	}
	if took := time.Since(began); last.Result == nil || took >= 6*time.Second {
		t.Fatalf("stream on a live task ended after %v with %s, want its result before 6s", took, last.Raw)
	}

	// No extension declared: -32021, HTTP 400.
	plain := newClient(api.addr, false)
	plain.Header = alice.Header
	ch, status := listen(t, plain, ctx, "p", mine.TaskID)
	m := <-ch
	if status != 400 || m.Error == nil || m.Error.Code != -32021 {
		t.Fatalf("listen without the extension: HTTP %d %s", status, m.Raw)
	}
}

// TestClientListens: pkg/client follows a task over a listen stream when
// the server offers one (endpoint and worker in separate processes on a
// real redis-server, and on PostgreSQL, where the worker's transitions
// reach the endpoint's stream through NOTIFY): the input request arrives
// on the stream and is answered, the result arrives on it, and no
// tasks/get is spent. With WithPolling, the same call polls.
func TestClientListens(t *testing.T) {
	for _, shape := range []string{"split", "postgres"} {
		t.Run(shape, func(t *testing.T) { testClientListens(t, shape) })
	}
}

func testClientListens(t *testing.T, shape string) {
	s := startClientServer(t, shape, "examples")
	confirm := client.OnElicit(func(context.Context, *client.InputRequest, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
	})
	c, wire := newTaskClient(s)
	res, err := c.Call(context.Background(), "confirm_delete", map[string]any{"filename": "a.txt"}, confirm)
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != "deleted a.txt" {
		t.Fatalf("result %q", got)
	}
	if n, m := len(wire.of("subscriptions/listen")), len(wire.of("tasks/get")); n == 0 || m != 0 {
		t.Fatalf("%d subscriptions/listen and %d tasks/get, want the task followed on a stream alone", n, m)
	}
	if len(wire.of("tasks/update")) != 1 {
		t.Fatalf("tasks/update sent %d times, want once", len(wire.of("tasks/update")))
	}

	l := &wireLog{}
	polling := client.New(s.url, client.WithHTTPClient(&http.Client{Transport: l}), client.WithPolling())
	if _, err := polling.Call(context.Background(), "confirm_delete", map[string]any{"filename": "b.txt"}, confirm); err != nil {
		t.Fatal(err)
	}
	if n, m := len(l.of("subscriptions/listen")), len(l.of("tasks/get")); n != 0 || m == 0 {
		t.Fatalf("WithPolling: %d subscriptions/listen and %d tasks/get", n, m)
	}
}
