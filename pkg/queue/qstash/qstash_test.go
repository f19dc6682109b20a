package qstash_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/mcptasks/mcptasks/internal/testkit/fakeqstash"
	"github.com/mcptasks/mcptasks/pkg/queue"
	"github.com/mcptasks/mcptasks/pkg/queue/qstash"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

const workerURL = "https://app.example.com/api/worker"

// TestQStashPublish checks the HTTP requests the QStash adapter makes,
// against a local QStash that records them.
func TestQStashPublish(t *testing.T) {
	t.Parallel()
	srv := fakeqstash.Start(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.UTC)
	newQ := func(t *testing.T, token string, mod func(*qstash.Options)) *qstash.Queue {
		t.Helper()
		o := &qstash.Options{BaseURL: srv.URL, Now: func() time.Time { return now }}
		if mod != nil {
			mod(o)
		}
		q, err := qstash.New(token, workerURL, o)
		if err != nil {
			t.Fatalf("NewQStash: %v", err)
		}
		return q
	}
	published := func(t *testing.T, id string) []fakeqstash.Publish {
		t.Helper()
		var out []fakeqstash.Publish
		for _, p := range srv.Published() {
			if got, err := queue.DecodeMessage(p.Body); err == nil && got == id {
				out = append(out, p)
			}
		}
		return out
	}

	t.Run("Now", func(t *testing.T) {
		q := newQ(t, srv.Token, nil)
		if err := q.Enqueue(t.Context(), "task-now", time.Time{}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		ps := published(t, "task-now")
		if len(ps) != 1 {
			t.Fatalf("%d publishes, want 1", len(ps))
		}
		p := ps[0]
		if p.Destination != workerURL {
			t.Errorf("destination = %q, want %q", p.Destination, workerURL)
		}
		if got := p.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		if got := p.Header.Get("Upstash-Not-Before"); got != "" {
			t.Errorf("Upstash-Not-Before = %q for a message due now, want none", got)
		}
		if got, want := p.Header.Get("Upstash-Deduplication-Id"), "task-now."+itoa(now.UnixMilli()); got != want {
			t.Errorf("Upstash-Deduplication-Id = %q, want %q", got, want)
		}
		if got := p.Header.Get("Upstash-Forward-Traceparent"); got != "" {
			t.Errorf("untraced enqueue forwards traceparent %q", got)
		}
	})

	t.Run("TraceParentIsForwarded", func(t *testing.T) {
		const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		if err := newQ(t, srv.Token, nil).Enqueue(queue.WithTraceParent(t.Context(), tp), "task-traced", time.Time{}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		p := published(t, "task-traced")[0]
		if got := p.Header.Get("Upstash-Forward-Traceparent"); got != tp {
			t.Errorf("Upstash-Forward-Traceparent = %q, want %q", got, tp)
		}
		if string(p.Body) != string(queue.EncodeMessage("task-traced")) {
			t.Errorf("body %s carries more than the task id", p.Body)
		}
	})

	t.Run("DelayedIsNotBeforeRoundedUp", func(t *testing.T) {
		q := newQ(t, srv.Token, func(o *qstash.Options) {
			o.Retries = 4
			o.Forward = map[string]string{"x-vercel-protection-bypass": "bypass-secret"}
		})
		at := now.Add(90 * time.Second) // .25s past a second boundary
		if err := q.Enqueue(t.Context(), "task-later", at); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		p := published(t, "task-later")[0]
		if got, want := p.Header.Get("Upstash-Not-Before"), itoa(at.Unix()+1); got != want {
			t.Errorf("Upstash-Not-Before = %q, want %q (rounded up, never early)", got, want)
		}
		if got, want := p.Header.Get("Upstash-Deduplication-Id"), "task-later."+itoa(at.UnixMilli()); got != want {
			t.Errorf("Upstash-Deduplication-Id = %q, want %q", got, want)
		}
		if got := p.Header.Get("Upstash-Retries"); got != "4" {
			t.Errorf("Upstash-Retries = %q, want 4", got)
		}
		if got := p.Header.Get("Upstash-Forward-X-Vercel-Protection-Bypass"); got != "bypass-secret" {
			t.Errorf("forwarded bypass header = %q", got)
		}
	})

	t.Run("SameWakeUpIsDeduplicated", func(t *testing.T) {
		q := newQ(t, srv.Token, nil)
		at := now.Add(time.Minute)
		for range 2 {
			if err := q.Enqueue(t.Context(), "task-dup", at); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
		}
		ps := published(t, "task-dup")
		if len(ps) != 2 || ps[0].Duplicate || !ps[1].Duplicate {
			t.Fatalf("publishes %+v: want the second to carry the first's deduplication id", ps)
		}
	})

	t.Run("TransientFailuresRetryWithSameDedupID", func(t *testing.T) {
		q := newQ(t, srv.Token, nil)
		srv.FailNext(503, 429)
		if err := q.Enqueue(t.Context(), "task-flaky", time.Time{}); err != nil {
			t.Fatalf("Enqueue after two transient failures: %v", err)
		}
		if ps := published(t, "task-flaky"); len(ps) != 1 {
			t.Fatalf("%d accepted publishes, want 1", len(ps))
		}
	})

	t.Run("ClientErrorsAreNotRetried", func(t *testing.T) {
		q := newQ(t, "wrong", nil)
		err := q.Enqueue(t.Context(), "task-denied", time.Time{})
		if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "invalid token") {
			t.Fatalf("Enqueue with a wrong token = %v, want HTTP 401 with QStash's message", err)
		}
	})

	t.Run("Options", func(t *testing.T) {
		if _, err := qstash.New("", workerURL, nil); err == nil {
			t.Error("NewQStash without a token succeeded")
		}
		if _, err := qstash.New("t", "/api/worker", nil); err == nil {
			t.Error("NewQStash with a relative destination succeeded")
		}
		if got := newQ(t, srv.Token, nil).MaxDelay(); got != qstash.DefaultMaxDelay {
			t.Errorf("MaxDelay = %v", got)
		}
	})
}

// TestQStashVerifier checks Upstash-Signature verification: only a token
// signed with the current or next key, issued by Upstash, for exactly the
// configured URL, over exactly this body, within its lifetime, passes.
func TestQStashVerifier(t *testing.T) {
	t.Parallel()
	const cur, next = "sig_current_key_0123456789", "sig_next_key_9876543210"
	now := time.Now()
	body := []byte(`{"taskId":"abc"}`)
	sum := sha256.Sum256(body)
	hash := base64.URLEncoding.EncodeToString(sum[:])
	v := &qstash.Verifier{CurrentKey: cur, NextKey: next, URL: workerURL}
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "Upstash", "sub": workerURL, "iat": now.Unix(), "nbf": now.Unix(),
			"exp": now.Add(5 * time.Minute).Unix(), "jti": "jwt_1", "body": hash}
		if mod != nil {
			mod(c)
		}
		return c
	}
	sign := func(key string, mod func(jwt.MapClaims)) string {
		return fakeqstash.SignClaims(t, key, claims(mod))
	}

	good := []struct {
		name string
		sig  string
	}{
		{"current key", fakeqstash.Sign(t, cur, workerURL, body, now)},
		{"next key", fakeqstash.Sign(t, next, workerURL, body, now)},
		{"unpadded body hash", sign(cur, func(c jwt.MapClaims) { c["body"] = strings.TrimRight(hash, "=") })},
	}
	for _, g := range good {
		if err := v.Verify(g.sig, body); err != nil {
			t.Errorf("%s: Verify = %v, want nil", g.name, err)
		}
	}

	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil))
	noneSig, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	hs512, _ := jwt.NewWithClaims(jwt.SigningMethodHS512, claims(nil)).SignedString([]byte(cur))
	bad := []struct {
		name string
		sig  string
		body []byte
	}{
		{"no signature", "", body},
		{"unknown key", sign("some-other-key", nil), body},
		{"wrong sub", sign(cur, func(c jwt.MapClaims) { c["sub"] = "https://evil.example.com/api/worker" }), body},
		{"wrong issuer", sign(cur, func(c jwt.MapClaims) { c["iss"] = "NotUpstash" }), body},
		{"stale body hash", fakeqstash.Sign(t, cur, workerURL, []byte(`{"taskId":"other"}`), now), body},
		{"body changed", fakeqstash.Sign(t, cur, workerURL, body, now), []byte(`{"taskId":"abd"}`)},
		{"expired", sign(cur, func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }), body},
		{"no exp", sign(cur, func(c jwt.MapClaims) { delete(c, "exp") }), body},
		{"not yet valid", sign(cur, func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }), body},
		{"alg none", noneSig, body},
		{"alg HS512", hs512, body},
		{"garbage", "not.a.jwt", body},
	}
	for _, b := range bad {
		err := v.Verify(b.sig, b.body)
		if !errors.Is(err, qstash.ErrSignature) {
			t.Errorf("%s: Verify = %v, want ErrQStashSignature", b.name, err)
		}
	}

	if err := (&qstash.Verifier{URL: workerURL}).Verify(good[0].sig, body); err == nil {
		t.Error("a verifier without keys accepted a signature")
	}
	if err := (&qstash.Verifier{CurrentKey: cur}).Verify(good[0].sig, body); err == nil {
		t.Error("a verifier without a URL accepted a signature")
	}
}
