// Package fakeqstash is a local Upstash QStash for tests: an httptest server
// implementing the publish endpoint (POST /v2/publish/<destination>, bearer
// token, Upstash-* headers, 201 with a messageId, 202 for a duplicate
// deduplication id) that records every publish, and a signer that signs a
// delivery exactly as QStash does (Upstash-Signature: an HS256 JWT with iss
// "Upstash", sub the destination URL, iat/nbf/exp, jti, and body the
// base64url SHA-256 of the body).
package fakeqstash

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"github.com/mcptasks/mcptasks/internal/testkit/recorder"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Publish is one publish request QStash accepted.
type Publish struct {
	Destination string
	Header      http.Header
	Body        []byte
	// Duplicate is true when the deduplication id was seen before (QStash
	// answers 202 and does not enqueue it).
	Duplicate bool
}

// Server is a running fake QStash.
type Server struct {
	// URL is the API base (QSTASH_URL).
	URL string
	// Token is the bearer token publishers must send (QSTASH_TOKEN).
	Token string
	// CurrentKey and NextKey are the signing keys.
	CurrentKey, NextKey string

	pubs  recorder.Log[Publish]
	mu    sync.Mutex
	dedup map[string]bool
	fail  []int
}

// Start runs a fake QStash for the life of tb.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{
		Token:      "qstash-token-" + rand.Text(),
		CurrentKey: "sig_current_" + rand.Text(),
		NextKey:    "sig_next_" + rand.Text(),
		dedup:      map[string]bool{},
	}
	// A bare handler, not a ServeMux: the destination URL in the path has
	// "//", which a mux would "clean" with a redirect.
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// FailNext makes the next publish requests fail with the given statuses.
func (s *Server) FailNext(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, statuses...)
}

// Published returns the accepted publishes so far, oldest first.
func (s *Server) Published() []Publish { return s.pubs.All() }

// WaitFor waits up to within for a publish that satisfies match.
func (s *Server) WaitFor(within time.Duration, match func(Publish) bool) (Publish, bool) {
	return s.pubs.WaitFor(within, match)
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if len(s.fail) > 0 {
		st := s.fail[0]
		s.fail = s.fail[1:]
		s.mu.Unlock()
		jsonError(w, st, "injected failure")
		return
	}
	s.mu.Unlock()
	dest, ok := strings.CutPrefix(r.URL.Path, "/v2/publish/")
	if r.Method != http.MethodPost || !ok {
		jsonError(w, http.StatusNotFound, "not found")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		jsonError(w, http.StatusUnauthorized, "invalid token")
		return
	}
	if !strings.HasPrefix(dest, "https://") && !strings.HasPrefix(dest, "http://") {
		jsonError(w, http.StatusBadRequest, "invalid destination url: "+dest)
		return
	}
	if r.URL.RawQuery != "" {
		dest += "?" + r.URL.RawQuery
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		jsonError(w, http.StatusBadRequest, err.Error())
		return
	}
	p := Publish{Destination: dest, Header: r.Header.Clone(), Body: body}
	id := "msg_" + rand.Text()
	s.mu.Lock()
	if d := r.Header.Get("Upstash-Deduplication-Id"); d != "" {
		p.Duplicate = s.dedup[d]
		s.dedup[d] = true
	}
	s.pubs.Add(p) // under s.mu: publishes are recorded in dedup order
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if p.Duplicate {
		w.WriteHeader(http.StatusAccepted)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"messageId": id, "deduplicated": p.Duplicate})
}

// Sign returns the Upstash-Signature QStash would send with body to url,
// signed with key, valid from now for five minutes.
func Sign(tb testing.TB, key, url string, body []byte, now time.Time) string {
	tb.Helper()
	sum := sha256.Sum256(body)
	return SignClaims(tb, key, jwt.MapClaims{
		"iss":  "Upstash",
		"sub":  url,
		"iat":  now.Unix(),
		"nbf":  now.Unix(),
		"exp":  now.Add(5 * time.Minute).Unix(),
		"jti":  "jwt_" + rand.Text(),
		"body": base64.URLEncoding.EncodeToString(sum[:]), // padded, as in QStash's docs
	})
}

// SignClaims signs arbitrary claims with key (HS256), for tests of what a
// verifier must reject.
func SignClaims(tb testing.TB, key string, claims jwt.MapClaims) string {
	tb.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(key))
	if err != nil {
		tb.Fatalf("signing: %v", err)
	}
	return tok
}

// Deliver signs p's body for its destination with the current key and
// returns the request QStash would send to the destination.
func (s *Server) Deliver(tb testing.TB, p Publish) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, p.Destination, strings.NewReader(string(p.Body)))
	if err != nil {
		tb.Fatalf("delivery request: %v", err)
	}
	req.Header.Set("Content-Type", p.Header.Get("Content-Type"))
	req.Header.Set("Upstash-Signature", Sign(tb, s.CurrentKey, p.Destination, p.Body, time.Now()))
	req.Header.Set("Upstash-Message-Id", "msg_"+rand.Text())
	req.Header.Set("Upstash-Retried", "0")
	req.Header.Set("User-Agent", "Upstash-QStash")
	for k, v := range p.Header {
		if name, ok := strings.CutPrefix(k, "Upstash-Forward-"); ok {
			req.Header[http.CanonicalHeaderKey(name)] = v
		}
	}
	return req
}
