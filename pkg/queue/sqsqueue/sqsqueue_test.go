package sqsqueue_test

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/fakesqs"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/sqsqueue"
)

// TestSQS drives the SQS adapter through the package's Client against a
// local endpoint speaking the SQS JSON protocol and verifying every
// request's signature with the AWS SDK's signer, and checks what reaches
// the service.
func TestSQS(t *testing.T) {
	t.Parallel()
	srv := fakesqs.Start(t)
	client := srv.Client()
	std := srv.CreateQueue("tasks")
	fifo := srv.CreateQueue("tasks.fifo")
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	sent := func(t *testing.T, queueURL, id string) fakesqs.Message {
		t.Helper()
		var found []fakesqs.Message
		for _, m := range srv.Messages() {
			if m.QueueURL == queueURL && strings.Contains(m.Body, `"`+id+`"`) {
				found = append(found, m)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d messages for %s, want 1: %+v", len(found), id, found)
		}
		return found[0]
	}

	t.Run("MaxDelayIs15Minutes", func(t *testing.T) {
		if got := sqsqueue.New(client, std, nil).MaxDelay(); got != 15*time.Minute {
			t.Errorf("MaxDelay = %v, want 15m", got)
		}
	})

	t.Run("TraceParentIsAMessageAttribute", func(t *testing.T) {
		q := sqsqueue.New(client, std, &sqsqueue.Options{Now: clock})
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		if err := q.Enqueue(queue.WithTraceParent(t.Context(), tp), "traced", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if err := q.Enqueue(t.Context(), "untraced", time.Time{}); err != nil {
			t.Fatal(err)
		}
		if m := sent(t, std, "traced"); m.Attributes["traceparent"] != tp || m.Body != string(queue.EncodeMessage("traced")) {
			t.Errorf("traced message %+v, want the traceparent attribute and the bare id", m)
		}
		if m := sent(t, std, "untraced"); len(m.Attributes) != 0 {
			t.Errorf("untraced message has attributes %v", m.Attributes)
		}
	})

	t.Run("DelaySecondsRoundedUpAndCapped", func(t *testing.T) {
		q := sqsqueue.New(client, std, &sqsqueue.Options{Now: clock})
		cases := []struct {
			id   string
			at   time.Time
			want int32
		}{
			{"now-zero", time.Time{}, 0},
			{"past", now.Add(-time.Minute), 0},
			{"in-1500ms", now.Add(1500 * time.Millisecond), 2}, // never early
			{"in-10s", now.Add(10 * time.Second), 10},
			{"in-15m", now.Add(15 * time.Minute), 900},
			{"in-2h", now.Add(2 * time.Hour), 900}, // the worker chains the rest
		}
		for _, c := range cases {
			if err := q.Enqueue(t.Context(), c.id, c.at); err != nil {
				t.Fatalf("Enqueue(%s): %v", c.id, err)
			}
			m := sent(t, std, c.id)
			if m.DelaySeconds != c.want {
				t.Errorf("%s: DelaySeconds = %d, want %d", c.id, m.DelaySeconds, c.want)
			}
			if m.GroupID != "" || m.DedupID != "" {
				t.Errorf("%s: standard queue got group %q dedup %q, want neither", c.id, m.GroupID, m.DedupID)
			}
			got, err := queue.DecodeMessage([]byte(m.Body))
			if err != nil || got != c.id {
				t.Errorf("%s: body %q decodes to %q, %v", c.id, m.Body, got, err)
			}
		}
	})

	t.Run("FIFOCarriesGroupAndDedupIDsAndNoDelay", func(t *testing.T) {
		if !sqsqueue.IsFIFOURL(fifo) || sqsqueue.IsFIFOURL(std) {
			t.Fatalf("IsFIFOQueueURL wrong for %s / %s", fifo, std)
		}
		q := sqsqueue.New(client, fifo, &sqsqueue.Options{FIFO: true, Now: clock})
		at := now.Add(30 * time.Second)
		if err := q.Enqueue(t.Context(), "fifo-later", at); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		if err := q.Enqueue(t.Context(), "fifo-now", time.Time{}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		later, nowMsg := sent(t, fifo, "fifo-later"), sent(t, fifo, "fifo-now")
		if later.DelaySeconds != 0 {
			t.Errorf("FIFO DelaySeconds = %d, want 0 (FIFO queues refuse per-message delays)", later.DelaySeconds)
		}
		if later.GroupID != "fifo-later" {
			t.Errorf("MessageGroupId = %q, want the task id", later.GroupID)
		}
		if want := "fifo-later." + strconv.FormatInt(at.UnixMilli(), 10); later.DedupID != want {
			t.Errorf("MessageDeduplicationId = %q, want %q", later.DedupID, want)
		}
		if want := "fifo-now." + strconv.FormatInt(now.UnixMilli(), 10); nowMsg.DedupID != want {
			t.Errorf("MessageDeduplicationId = %q, want %q", nowMsg.DedupID, want)
		}
	})

	t.Run("ServiceErrorsAreAPIErrors", func(t *testing.T) {
		q := sqsqueue.New(client, srv.URL+"/000000000000/missing", nil)
		before := srv.Requests()
		err := q.Enqueue(t.Context(), "x", time.Time{})
		var api *sqsqueue.APIError
		if !errors.As(err, &api) || api.Code != "QueueDoesNotExist" || api.StatusCode != 400 || api.Message == "" || api.RequestID == "" {
			t.Fatalf("Enqueue to a missing queue = %v (%+v), want the QueueDoesNotExist API error", err, api)
		}
		if n := srv.Requests() - before; n != 1 {
			t.Errorf("%d requests, want 1: a client error is not retried", n)
		}
	})

	t.Run("TransientFailuresAreRetried", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		for _, c := range []struct {
			name     string
			inject   func()
			requests int
		}{
			{"500 then 503", func() { srv.FailNext(500, 503) }, 3},
			{"throttled", func() {
				srv.FailNextWith(400, "ThrottlingException")
				srv.FailNextWith(400, "RequestThrottled")
			}, 3},
			{"429", func() { srv.FailNextWith(429, "TooManyRequestsException") }, 2},
			{"connection dropped", func() { srv.DropNext(2) }, 3},
		} {
			before := srv.Requests()
			c.inject()
			id := "flaky-" + strings.ReplaceAll(c.name, " ", "-")
			if err := q.Enqueue(t.Context(), id, time.Time{}); err != nil {
				t.Fatalf("%s: Enqueue: %v", c.name, err)
			}
			sent(t, std, id)
			if n := srv.Requests() - before; n != c.requests {
				t.Errorf("%s: %d requests, want %d", c.name, n, c.requests)
			}
		}
	})

	t.Run("GivesUpAfterThreeAttempts", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		before := srv.Requests()
		srv.FailNext(500, 502, 503)
		err := q.Enqueue(t.Context(), "doomed", time.Time{})
		var api *sqsqueue.APIError
		if !errors.As(err, &api) || api.StatusCode != 503 || !strings.Contains(err.Error(), "after 3 attempts") {
			t.Fatalf("Enqueue after three failures = %v, want the last one's APIError after 3 attempts", err)
		}
		if n := srv.Requests() - before; n != 3 {
			t.Errorf("%d requests, want 3", n)
		}
		for _, m := range srv.Messages() {
			if strings.Contains(m.Body, `"doomed"`) {
				t.Error("the message was stored")
			}
		}
	})

	t.Run("ClientErrorsAreNotRetried", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		before := srv.Requests()
		srv.FailNextWith(400, "InvalidParameterValue")
		var api *sqsqueue.APIError
		if err := q.Enqueue(t.Context(), "refused", time.Time{}); !errors.As(err, &api) || api.Code != "InvalidParameterValue" {
			t.Fatalf("Enqueue = %v, want InvalidParameterValue", err)
		}
		if n := srv.Requests() - before; n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})

	t.Run("WrongCredentialsAreRefused", func(t *testing.T) {
		for _, c := range []struct {
			name  string
			creds sqsqueue.Credentials
			code  string
		}{
			{"bad secret", sqsqueue.Credentials{AccessKeyID: fakesqs.AccessKeyID, SecretAccessKey: "wrong", SessionToken: fakesqs.SessionToken}, "InvalidSignatureException"},
			{"bad token", sqsqueue.Credentials{AccessKeyID: fakesqs.AccessKeyID, SecretAccessKey: fakesqs.SecretAccessKey, SessionToken: "stale"}, "UnrecognizedClientException"},
			{"unknown key", sqsqueue.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: fakesqs.SecretAccessKey}, "UnrecognizedClientException"},
		} {
			bad, err := sqsqueue.NewClientWith(fakesqs.Region, sqsqueue.StaticCredentials(c.creds), &sqsqueue.ClientOptions{Endpoint: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			before, msgs := srv.Requests(), len(srv.Messages())
			err = sqsqueue.New(bad, std, nil).Enqueue(t.Context(), "forged", time.Time{})
			var api *sqsqueue.APIError
			if !errors.As(err, &api) || api.Code != c.code || api.StatusCode/100 != 4 {
				t.Errorf("%s: Enqueue = %v, want %s", c.name, err, c.code)
			}
			if n := srv.Requests() - before; n != 1 || len(srv.Messages()) != msgs {
				t.Errorf("%s: %d requests (want 1, not retried), %d messages stored", c.name, n, len(srv.Messages())-msgs)
			}
		}
	})

	t.Run("LongTermKeyWithoutSessionToken", func(t *testing.T) {
		c, err := sqsqueue.NewClientWith(fakesqs.Region, sqsqueue.StaticCredentials(sqsqueue.Credentials{
			AccessKeyID: fakesqs.AccessKeyID, SecretAccessKey: fakesqs.SecretAccessKey,
		}), &sqsqueue.ClientOptions{Endpoint: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		if err := sqsqueue.New(c, std, nil).Enqueue(t.Context(), "long-term", time.Time{}); err != nil {
			t.Fatal(err)
		}
		sent(t, std, "long-term")
	})

	t.Run("MD5MismatchIsAnError", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		srv.CorruptNextMD5()
		err := q.Enqueue(t.Context(), "corrupted", time.Time{})
		var api *sqsqueue.APIError
		if err == nil || errors.As(err, &api) || !strings.Contains(err.Error(), "MD5") {
			t.Fatalf("Enqueue answered with a wrong MD5 = %v, want an MD5 error", err)
		}
	})

	t.Run("NewClientFromTheEnvironment", func(t *testing.T) {
		env := map[string]string{}
		for _, kv := range srv.Env() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		c, err := sqsqueue.NewClient(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if err := sqsqueue.New(c, std, nil).Enqueue(t.Context(), "from-env", time.Time{}); err != nil {
			t.Fatalf("Enqueue with the environment's temporary credentials: %v", err)
		}
		sent(t, std, "from-env")
	})

	t.Run("BadTaskIDsAreRefusedLocally", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		before := len(srv.Messages())
		for _, id := range []string{"", "has space", strings.Repeat("x", queue.MaxTaskIDLen+1)} {
			if err := q.Enqueue(t.Context(), id, time.Time{}); err == nil {
				t.Errorf("Enqueue(%q) = nil, want an error", id)
			}
		}
		if n := len(srv.Messages()); n != before {
			t.Errorf("%d messages sent for refused ids", n-before)
		}
	})

	t.Run("ContextCancelled", func(t *testing.T) {
		q := sqsqueue.New(client, std, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := q.Enqueue(ctx, "cancelled", time.Time{}); !errors.Is(err, context.Canceled) {
			t.Errorf("Enqueue with a cancelled context = %v, want context.Canceled", err)
		}
	})
}

func TestNewClientNeedsRegionAndKeys(t *testing.T) {
	t.Parallel()
	full := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s"}
	without := func(names ...string) func(string) string {
		return func(k string) string {
			for _, n := range names {
				if k == n {
					return ""
				}
			}
			return full[k]
		}
	}
	if _, err := sqsqueue.NewClient(without()); err != nil {
		t.Errorf("complete environment: %v", err)
	}
	if _, err := sqsqueue.NewClient(without("AWS_REGION")); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("no region: %v, want an error naming AWS_REGION", err)
	}
	if _, err := sqsqueue.NewClient(func(k string) string {
		if k == "AWS_DEFAULT_REGION" {
			return "eu-west-1"
		}
		return without("AWS_REGION")(k)
	}); err != nil {
		t.Errorf("AWS_DEFAULT_REGION: %v", err)
	}
	for _, missing := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if _, err := sqsqueue.NewClient(without(missing)); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("no %s: %v, want an error naming it", missing, err)
		}
	}
	if _, err := sqsqueue.NewClient(func(k string) string {
		if k == "AWS_ENDPOINT_URL_SQS" {
			return "not a url"
		}
		return full[k]
	}); err == nil {
		t.Error("a malformed AWS_ENDPOINT_URL_SQS was accepted")
	}
}

// TestEndpointOverride: AWS_ENDPOINT_URL_SQS wins over AWS_ENDPOINT_URL,
// which wins over the region's endpoint.
func TestEndpointOverride(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var hits []string
	answer := func(name string) *httptest.Server {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits = append(hits, name)
			mu.Unlock()
			body, _ := io.ReadAll(r.Body)
			var in struct{ MessageBody string }
			_ = json.Unmarshal(body, &in)
			sum := md5.Sum([]byte(in.MessageBody))
			_, _ = fmt.Fprintf(w, `{"MessageId":"m","MD5OfMessageBody":"%x"}`, sum)
		}))
		t.Cleanup(hs.Close)
		return hs
	}
	sqsEP, allEP := answer("sqs"), answer("all")
	env := map[string]string{"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": allEP.URL}
	for _, withSQS := range []bool{false, true} {
		if withSQS {
			env["AWS_ENDPOINT_URL_SQS"] = sqsEP.URL
		}
		c, err := sqsqueue.NewClient(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.SendMessage(t.Context(), &sqsqueue.SendMessageInput{QueueURL: "q", MessageBody: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(hits, ",") != "all,sqs" {
		t.Errorf("endpoints hit: %v, want all then sqs", hits)
	}
}

// TestClientAttempts checks the client's retries on a scripted endpoint:
// an attempt that outlives its timeout is retried, a cancelled context
// ends the waiting at once, and a 2xx answer that is not JSON is an error.
func TestClientAttempts(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	script := []func(w http.ResponseWriter, r *http.Request){}
	calls := 0
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		var step func(w http.ResponseWriter, r *http.Request)
		if len(script) > 0 {
			step, script = script[0], script[1:]
		}
		mu.Unlock()
		if step != nil {
			step(w, r)
			return
		}
		sum := md5.Sum([]byte("b"))
		_, _ = fmt.Fprintf(w, `{"MessageId":"m","MD5OfMessageBody":"%x"}`, sum)
	}))
	t.Cleanup(hs.Close)
	play := func(steps ...func(w http.ResponseWriter, r *http.Request)) {
		mu.Lock()
		defer mu.Unlock()
		script, calls = steps, 0
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
	newClient := func(o sqsqueue.ClientOptions) *sqsqueue.Client {
		o.Endpoint = hs.URL
		c, err := sqsqueue.NewClientWith("us-east-1", sqsqueue.StaticCredentials(sqsqueue.Credentials{AccessKeyID: "a", SecretAccessKey: "b"}), &o)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	in := &sqsqueue.SendMessageInput{QueueURL: "q", MessageBody: "b"}

	// Slow first attempt, bounded by Timeout, then a good one.
	play(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client hang up
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	start := time.Now()
	out, err := newClient(sqsqueue.ClientOptions{Timeout: 100 * time.Millisecond, RetryBackoff: time.Millisecond}).SendMessage(t.Context(), in)
	if err != nil || out.MessageID != "m" || count() != 2 {
		t.Errorf("after a slow attempt: %+v, %v, %d calls; want the second attempt's answer", out, err, count())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v: the slow attempt was not cut at its timeout", d)
	}

	// A cancelled context ends the wait for a retry.
	play(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = newClient(sqsqueue.ClientOptions{RetryBackoff: time.Hour}).SendMessage(ctx, in)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("cancelled during the backoff: %v after %v", err, time.Since(start))
	}

	// MaxAttempts 1: no retry.
	play(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	if _, err := newClient(sqsqueue.ClientOptions{MaxAttempts: 1}).SendMessage(t.Context(), in); err == nil || count() != 1 {
		t.Errorf("MaxAttempts 1: %v after %d calls", err, count())
	}

	// An error without a JSON body is still an APIError.
	badGateway := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}
	play(badGateway, badGateway, badGateway)
	var api *sqsqueue.APIError
	if _, err := newClient(sqsqueue.ClientOptions{RetryBackoff: time.Millisecond}).SendMessage(t.Context(), in); !errors.As(err, &api) || api.StatusCode != 502 || api.Code != "UnknownError" || !strings.Contains(api.Message, "bad gateway") {
		t.Errorf("HTML 502: %v", err)
	}

	// The code of X-Amzn-ErrorType wins, and "ns#Code:rest" is cut to Code.
	play(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-ErrorType", "com.amazonaws.sqs#KmsThrottled:http://internal")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.sqs#Other","Message":"upper-case message"}`)
	})
	if _, err := newClient(sqsqueue.ClientOptions{}).SendMessage(t.Context(), in); !errors.As(err, &api) || api.Code != "KmsThrottled" || api.Message != "upper-case message" {
		t.Errorf("X-Amzn-ErrorType: %v", err)
	}

	// A success that is not JSON.
	play(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "OK") })
	if _, err := newClient(sqsqueue.ClientOptions{}).SendMessage(t.Context(), in); err == nil || count() != 1 {
		t.Errorf("2xx non-JSON answer: %v after %d calls, want one error", err, count())
	}

	// The credentials function's error is returned, nothing is sent.
	play()
	failing, err := sqsqueue.NewClientWith("us-east-1", func(context.Context) (sqsqueue.Credentials, error) {
		return sqsqueue.Credentials{}, errors.New("no role")
	}, &sqsqueue.ClientOptions{Endpoint: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failing.SendMessage(t.Context(), in); err == nil || !strings.Contains(err.Error(), "no role") || count() != 0 {
		t.Errorf("failing credentials: %v, %d calls", err, count())
	}

	// Required fields are checked locally.
	if _, err := newClient(sqsqueue.ClientOptions{}).SendMessage(t.Context(), &sqsqueue.SendMessageInput{QueueURL: "q"}); err == nil || count() != 0 {
		t.Errorf("no body: %v", err)
	}
}

func TestMessageCodec(t *testing.T) {
	t.Parallel()
	id, err := queue.DecodeMessage(queue.EncodeMessage("abc-_DEF123"))
	if err != nil || id != "abc-_DEF123" {
		t.Fatalf("round trip = %q, %v", id, err)
	}
	for _, body := range []string{``, `{}`, `not json`, `{"taskId":""}`, `{"taskId":"a\nb"}`, `{"taskId":7}`} {
		if id, err := queue.DecodeMessage([]byte(body)); err == nil {
			t.Errorf("DecodeMessage(%q) = %q, want an error", body, id)
		}
	}
}
