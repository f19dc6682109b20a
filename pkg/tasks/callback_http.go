package tasks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// callbackHandler returns the handler of callback URLs, which NewHandler
// serves at CallbackPath outside authentication: the URL is the
// capability (a task id and 256 random bits, of which the store keeps only
// a hash). It answers a POST:
//
//   - 404 (the body of http.NotFound) for a URL that names no open
//     callback: unknown, used, expired, forged, or another task's, all
//     alike; and for a URL that is not a callback's;
//   - 415 for a Content-Type other than application/json (or +json), 413
//     for a body over Options.MaxResultBytes, 400 for a body that is not
//     JSON or does not fit the callback's type: these are checked before
//     the URL is, except the type, and leave the callback open;
//   - 401 for a callback made with WebhookSecret whose request has no
//     valid Standard Webhooks signature within WebhookTolerance;
//   - 202 once the body is journaled for the task, which resumes through
//     the queue if it awaits the callback;
//   - 503 with Retry-After when the store cannot be reached.
//
// Other methods get 405.
func (s *Server) callbackHandler() http.Handler { return http.HandlerFunc(s.serveCallback) }

func (s *Server) serveCallback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		callbackError(w, http.StatusMethodNotAllowed, "a callback URL takes POST")
		return
	}
	_, rest, _ := strings.Cut(r.URL.Path, CallbackPath)
	id, tok, ok := strings.Cut(rest, "/")
	if !ok || !driver.ValidID(id) || !validToken(tok) {
		http.NotFound(w, r)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		callbackError(w, http.StatusUnsupportedMediaType, "the body must be application/json")
		return
	}
	limit := int64(s.opts.MaxResultBytes)
	if limit <= 0 {
		limit = 1 << 20
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		callbackError(w, http.StatusRequestEntityTooLarge, "the body is larger than "+strconv.FormatInt(limit, 10)+" bytes")
		return
	case err != nil:
		callbackError(w, http.StatusBadRequest, "the body could not be read")
		return
	case !json.Valid(body):
		callbackError(w, http.StatusBadRequest, "the body is not JSON")
		return
	}
	es, ok := s.store.(driver.EventStore)
	if !ok {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.StoreTimeout)
	defer cancel()
	proof := proofOf(tok)
	wait, err := await(ctx, s.storeDirect, func(ctx context.Context) (*driver.EventWait, error) {
		return es.Waiting(ctx, id, "", proof, s.now())
	})
	switch {
	case errors.Is(err, driver.ErrNotFound):
		http.NotFound(w, r)
		return
	case err != nil:
		s.log.Error("callback: reading its wait failed", "task", id, "err", err)
		s.storeFailed(ctx, "waiting")
		storeBusy(w)
		return
	}
	if wait.Secret != "" {
		if msg := verifyWebhook(wait.Secret, r.Header, body, s.now()); msg != "" {
			s.log.Info("callback refused: bad signature", "task", id, "callback", wait.Name, "reason", msg)
			callbackError(w, http.StatusUnauthorized, msg)
			return
		}
	}
	payload, msg := checkPayload(wait.Schema, body)
	if msg != "" {
		s.log.Info("callback refused: the body does not fit", "task", id, "callback", wait.Name, "reason", msg)
		callbackError(w, http.StatusBadRequest, msg)
		return
	}
	err = s.deliver(ctx, es, id, &driver.Delivery{Name: wait.Name, Proof: proof, Payload: payload}, "callback")
	switch {
	case errors.Is(err, driver.ErrNotFound) || errors.Is(err, driver.ErrEventClosed):
		http.NotFound(w, r) // taken by a request that came first, or expired meanwhile
		return
	case err != nil:
		s.log.Error("callback: delivery failed", "task", id, "err", err)
		storeBusy(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"accepted":true}` + "\n"))
}

// callbackError answers a callback request with status and a JSON body
// saying what is wrong.
func callbackError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// storeBusy answers a callback request whose store work failed: the
// sender retries.
func storeBusy(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	callbackError(w, http.StatusServiceUnavailable, "task store unavailable; retry shortly")
}

// webhookKey is the HMAC key of a Standard Webhooks secret: the bytes its
// base64 (after an optional "whsec_") encodes, or the string itself when
// it is not base64.
func webhookKey(secret string) []byte {
	b64 := strings.TrimPrefix(secret, "whsec_")
	if key, err := base64.StdEncoding.DecodeString(b64); err == nil && len(key) > 0 {
		return key
	}
	return []byte(secret)
}

// SignWebhook returns the webhook-signature header value of a Standard
// Webhooks request with the given webhook-id, webhook-timestamp (ts, in
// seconds) and body, signed with secret (as [WebhookSecret] takes it):
// "v1," and the base64 HMAC-SHA256 of "id.ts.body". A system that calls
// back, or a test standing in for one, sends it with the webhook-id and
// webhook-timestamp headers.
func SignWebhook(secret, id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, webhookKey(secret))
	mac.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// verifyWebhook checks the Standard Webhooks signature of a request with
// headers h and body, under secret, at now: "" when one of its signatures
// is valid, else why not.
func verifyWebhook(secret string, h http.Header, body []byte, now time.Time) string {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return "the request is not signed: webhook-id, webhook-timestamp and webhook-signature are required"
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "webhook-timestamp is not a number of seconds"
	}
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > WebhookTolerance || d < -WebhookTolerance {
		return "webhook-timestamp is more than " + WebhookTolerance.String() + " away from now"
	}
	want := []byte(SignWebhook(secret, id, at, body))
	for _, sig := range strings.Fields(sigs) {
		if hmac.Equal([]byte(sig), want) {
			return ""
		}
	}
	return "no valid v1 signature in webhook-signature"
}
