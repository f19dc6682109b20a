package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// Transcoded is the body the test's callbacks take.
type Transcoded struct {
	URL   string `json:"url"`
	Bytes int    `json:"bytes"`
}

// hookArgs are the arguments of the test tool "hook".
type hookArgs struct {
	TimeoutMs int    `json:"timeoutMs"`
	Secret    string `json:"secret,omitempty"`
}

// hooks is the test tool "hook": it makes a callback, publishes its URL
// (in a Do step, into urls by task id), awaits it and reports what came,
// or that the wait timed out.
func hooks(urls *sync.Map) func(s *tasks.Server) {
	return func(s *tasks.Server) {
		tasks.AddTool(s, &mcp.Tool{Name: "hook"}, tasks.Optional, func(ctx context.Context, st *tasks.Step, in hookArgs) (*mcp.CallToolResult, error) {
			opts := []tasks.DoOption{tasks.Timeout(time.Duration(in.TimeoutMs) * time.Millisecond)}
			if in.Secret != "" {
				opts = append(opts, tasks.WebhookSecret(in.Secret))
			}
			cb, err := tasks.Callback[Transcoded](st, "transcoded", opts...)
			if err != nil {
				return nil, err
			}
			if _, err := tasks.Do(st, "publish", func(context.Context) (bool, error) {
				urls.Store(st.TaskID(), cb.URL)
				return true, nil
			}); err != nil {
				return nil, err
			}
			v, err := tasks.AwaitCallback(st, cb)
			if errors.Is(err, tasks.ErrCallbackTimeout) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "timed out"}}}, nil
			}
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %d", v.URL, v.Bytes)}}}, nil
		})
	}
}

// callbackURL waits for the URL the task id published and returns it on
// the harness's server.
func (h *harness) callbackURL(t *testing.T, urls *sync.Map, id string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if v, ok := urls.Load(id); ok {
			u, err := url.Parse(v.(string))
			if err != nil {
				t.Fatal(err)
			}
			return h.url + u.Path
		}
	}
	t.Fatalf("task %s never published its callback URL", id)
	return ""
}

// post POSTs body to u as contentType with the headers hdr and returns
// the status and the body of the answer.
func post(t *testing.T, u, contentType, body string, hdr http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A task waits on its callback as working, with no invocation while it
// waits; bad bodies are refused and leave it open; the first valid POST
// resumes it with its body; a second POST, a forged token, another task's
// URL and an unknown task answer exactly like an unknown URL.
func TestCallback(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var urls sync.Map
			h := newHarness(t, backend, tasks.Options{PublicURL: "https://mcp.example.com/"}, hooks(&urls))
			var advances sync.Map // task id -> *atomic.Int32
			h.workWatched(t, 2, func(id string, _ tasks.AdvanceResult, _ error) {
				n, _ := advances.LoadOrStore(id, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			})
			count := func(id string) int32 {
				n, _ := advances.LoadOrStore(id, new(atomic.Int32))
				return n.(*atomic.Int32).Load()
			}
			id := h.create(t, "hook", map[string]any{"timeoutMs": 600000})
			other := h.create(t, "hook", map[string]any{"timeoutMs": 600000})
			u, uOther := h.callbackURL(t, &urls, id), h.callbackURL(t, &urls, other)
			if raw, _ := urls.Load(id); !strings.HasPrefix(raw.(string), "https://mcp.example.com"+tasks.CallbackPath+id+"/") {
				t.Errorf("callback URL %s is not under the public URL", raw)
			}
			tk := h.c.WaitFor(t, id, 20*time.Second, func(tk mcptest.Task) bool { return h.get(t, id).Awaiting == "transcoded" })
			if tk.Status != "working" || len(tk.InputRequests) != 0 {
				t.Errorf("awaiting task: %s with input requests %v, want working without", tk.Status, tk.InputRequests)
			}
			// The invocation that made it wait is counted when it returns,
			// a little after its commit shows: the count is taken once it
			// holds still.
			before := count(id)
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); before = count(id) {
				time.Sleep(100 * time.Millisecond)
				if count(id) == before {
					break
				}
			}
			time.Sleep(300 * time.Millisecond) // no invocation while it waits

			notFound, _ := post(t, h.url+tasks.CallbackPath+"nosuch", "application/json", `{}`, nil)
			if notFound != http.StatusNotFound {
				t.Fatalf("unknown path: %d", notFound)
			}
			_, nfBody := post(t, h.url+tasks.CallbackPath+"nosuch", "application/json", `{}`, nil)
			forged := u[:len(u)-4] + "AAAA"
			for _, tc := range []struct {
				what, url, ct, body string
				want                int
			}{
				{"a body of another type", u, "text/plain", `{"url":"x"}`, http.StatusUnsupportedMediaType},
				{"a body that is not JSON", u, "application/json", `{"url":`, http.StatusBadRequest},
				{"a body that does not fit", u, "application/json", `{"url":1}`, http.StatusBadRequest},
				{"a body too large", u, "application/json", `"` + strings.Repeat("x", 2<<20) + `"`, http.StatusRequestEntityTooLarge},
				{"a forged token", forged, "application/json", `{"url":"f"}`, http.StatusNotFound},
				{"another task's token", strings.Replace(uOther, other, id, 1), "application/json", `{"url":"o"}`, http.StatusNotFound},
				{"this token at another task", strings.Replace(u, id, other, 1), "application/json", `{"url":"o"}`, http.StatusNotFound},
				{"an unknown task", strings.Replace(u, id, driver.NewID(), 1), "application/json", `{"url":"u"}`, http.StatusNotFound},
			} {
				status, body := post(t, tc.url, tc.ct, tc.body, nil)
				if status != tc.want {
					t.Errorf("%s: %d %s, want %d", tc.what, status, body, tc.want)
				}
				if tc.want == http.StatusNotFound && body != nfBody {
					t.Errorf("%s: body %q differs from an unknown URL's %q", tc.what, body, nfBody)
				}
			}
			if got := h.get(t, id); got.Status != driver.StatusWorking || got.Awaiting != "transcoded" {
				t.Errorf("after the refused requests: %s awaiting %q, want still working on it", got.Status, got.Awaiting)
			}
			if n := count(id); n != before {
				t.Errorf("%d worker invocations while the task waited, want 0", n-before)
			}
			if status, body := post(t, u, "application/json; charset=utf-8", `{"url":"s3://out.mp4","bytes":42}`, nil); status != http.StatusAccepted {
				t.Fatalf("the valid POST: %d %s", status, body)
			}
			if status, body := post(t, u, "application/json", `{"url":"again","bytes":1}`, nil); status != http.StatusNotFound || body != nfBody {
				t.Errorf("a second POST: %d %q, want an unknown URL's answer", status, body)
			}
			done := h.wait(t, id)
			if done.Status != "completed" || textOf(t, done.Result) != "s3://out.mp4 42" {
				t.Fatalf("task ended %s with %s", done.Status, done.Result)
			}
			if got := h.get(t, other); got.Status != driver.StatusWorking {
				t.Errorf("the other task is %s, want still waiting", got.Status)
			}
		})
	}
}

// get peeks at the task id (with Awaiting, which tasks/get does not show).
func (h *harness) get(t *testing.T, id string) *driver.Task {
	t.Helper()
	tk, err := h.store.Peek(t.Context(), id)
	if err != nil {
		t.Fatalf("Peek(%s): %v", id, err)
	}
	return tk
}

// A callback whose wait ends first lets the tool go on with the timeout;
// a POST afterwards answers like an unknown URL.
func TestCallbackTimeout(t *testing.T) {
	var urls sync.Map
	h := newHarness(t, "redis-server", tasks.Options{PublicURL: "http://localhost"}, hooks(&urls))
	h.work(t, 2)
	id := h.create(t, "hook", map[string]any{"timeoutMs": 300})
	u := h.callbackURL(t, &urls, id)
	done := h.wait(t, id)
	if done.Status != "completed" || textOf(t, done.Result) != "timed out" {
		t.Fatalf("task ended %s with %s, want completed: timed out", done.Status, done.Result)
	}
	if status, _ := post(t, u, "application/json", `{"url":"late"}`, nil); status != http.StatusNotFound {
		t.Errorf("a POST after the timeout: %d, want 404", status)
	}
}

// A callback made with WebhookSecret takes only requests with a valid
// Standard Webhooks signature: a missing, bad, or stale one is refused
// (401) and the callback stays open.
func TestCallbackSigned(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	var urls sync.Map
	h := newHarness(t, "redis-server", tasks.Options{PublicURL: "http://localhost"}, hooks(&urls))
	h.work(t, 2)
	id := h.create(t, "hook", map[string]any{"timeoutMs": 600000, "secret": secret})
	u := h.callbackURL(t, &urls, id)
	body := `{"url":"signed","bytes":7}`
	signed := func(sec string, at time.Time, b string) http.Header {
		return http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {fmt.Sprint(at.Unix())},
			"Webhook-Signature": {"v1,bm90IGl0 " + tasks.SignWebhook(sec, "msg_1", at, []byte(b))}}
	}
	for _, tc := range []struct {
		what string
		hdr  http.Header
	}{
		{"no signature", nil},
		{"another secret's", signed("whsec_b3RoZXI=", time.Now(), body)},
		{"another body's", signed(secret, time.Now(), `{"url":"other"}`)},
		{"a stale one", signed(secret, time.Now().Add(-10*time.Minute), body)},
	} {
		if status, got := post(t, u, "application/json", body, tc.hdr); status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", tc.what, status, got)
		}
	}
	if status, got := post(t, u, "application/json", body, signed(secret, time.Now(), body)); status != http.StatusAccepted {
		t.Fatalf("a valid signature: %d %s", status, got)
	}
	if done := h.wait(t, id); textOf(t, done.Result) != "signed 7" {
		t.Fatalf("task ended %s with %s", done.Status, done.Result)
	}
}

// Approval is what the test's signal carries.
type Approval struct {
	OK bool   `json:"ok"`
	By string `json:"by"`
}

// A signal resumes the task that awaits it; one sent before the task
// waits is kept for it; a payload that does not fit, a second signal, a
// signal to an unknown task and one to a finished task are refused.
func TestSignal(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			started := make(chan string, 4)
			h := newHarness(t, backend, tasks.Options{}, func(s *tasks.Server) {
				tasks.AddTool(s, &mcp.Tool{Name: "approve"}, tasks.Optional, func(ctx context.Context, st *tasks.Step, in struct{}) (*mcp.CallToolResult, error) {
					if _, err := tasks.Do(st, "start", func(context.Context) (bool, error) { started <- st.TaskID(); return true, nil }); err != nil {
						return nil, err
					}
					first, err := tasks.AwaitSignal[Approval](st, "first", tasks.Timeout(time.Minute))
					if err != nil {
						return nil, err
					}
					second, err := tasks.AwaitSignal[Approval](st, "second")
					if err != nil {
						return nil, err
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: first.By + "," + second.By}}}, nil
				})
			})
			h.work(t, 2)
			ctx := t.Context()
			id := h.create(t, "approve", map[string]any{})
			<-started
			// Sent before the task waits for it: kept.
			if err := h.srv.Signal(ctx, id, "second", Approval{OK: true, By: "bob"}); err != nil {
				t.Fatalf("Signal before the wait: %v", err)
			}
			if err := h.srv.Signal(ctx, id, "second", Approval{By: "again"}); !errors.Is(err, driver.ErrEventClosed) {
				t.Errorf("a second signal = %v, want ErrEventClosed", err)
			}
			h.c.WaitFor(t, id, 20*time.Second, func(mcptest.Task) bool { return h.get(t, id).Awaiting == "first" })
			if err := h.srv.Signal(ctx, id, "first", map[string]any{"ok": "yes"}); !errors.Is(err, tasks.ErrInvalidPayload) {
				t.Errorf("a payload that does not fit = %v, want ErrInvalidPayload", err)
			}
			if err := h.srv.Signal(ctx, driver.NewID(), "first", Approval{}); !errors.Is(err, driver.ErrNotFound) {
				t.Errorf("a signal to an unknown task = %v, want ErrNotFound", err)
			}
			if err := h.srv.Signal(ctx, id, "first", Approval{OK: true, By: "alice"}); err != nil {
				t.Fatalf("Signal: %v", err)
			}
			done := h.wait(t, id)
			if done.Status != "completed" || textOf(t, done.Result) != "alice,bob" {
				t.Fatalf("task ended %s with %s", done.Status, done.Result)
			}
			if err := h.srv.Signal(ctx, id, "third", Approval{}); !errors.Is(err, driver.ErrEventClosed) {
				t.Errorf("a signal to a finished task = %v, want ErrEventClosed", err)
			}
		})
	}
}

// On a store that takes no events, Callback and AwaitSignal fail their
// task with ErrEventsUnsupported's message, and Signal returns it.
func TestEventsUnsupported(t *testing.T) {
	h := newHarness(t, "embedded", tasks.Options{PublicURL: "http://localhost"}, func(*tasks.Server) {})
	plain := tasks.New(&mcp.Implementation{Name: "plain", Version: "1"}, nil, struct{ driver.Store }{h.store}, h.q, &tasks.Options{PublicURL: "http://localhost", Anonymous: true})
	var urls sync.Map
	hooks(&urls)(plain)
	if err := plain.Signal(t.Context(), driver.NewID(), "x", 1); !errors.Is(err, tasks.ErrEventsUnsupported) {
		t.Errorf("Signal on a plain store = %v, want ErrEventsUnsupported", err)
	}
	res, err := plain.CreateTask(t.Context(), "anonymous", "hook", []byte(`{"timeoutMs":1000}`))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*tasks.CreateTaskResult).TaskID
	for range 5 {
		if _, err := plain.Advance(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	tk := h.get(t, id)
	if tk.Status != driver.StatusFailed || !strings.Contains(tk.Error.Message, "does not take events") {
		t.Fatalf("task on a plain store: %s %+v", tk.Status, tk.Error)
	}
}

// SignWebhook signs as the Standard Webhooks specification's example does.
func TestSignWebhookVector(t *testing.T) {
	got := tasks.SignWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("SignWebhook = %s, want %s", got, want)
	}
}

// Without a public URL a worker cannot form a callback URL: Callback
// returns ErrNoPublicURL, whose message names MCPTASKS_PUBLIC_URL.
func TestCallbackNeedsPublicURL(t *testing.T) {
	var urls sync.Map
	h := newHarness(t, "embedded", tasks.Options{}, hooks(&urls))
	h.work(t, 1)
	id := h.create(t, "hook", map[string]any{"timeoutMs": 1000})
	done := h.wait(t, id)
	if done.Status != "failed" || !strings.Contains(string(done.Error), "MCPTASKS_PUBLIC_URL") {
		t.Fatalf("task ended %s with %s, want failed naming MCPTASKS_PUBLIC_URL", done.Status, done.Error)
	}
}
