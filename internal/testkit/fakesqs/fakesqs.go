// Package fakesqs is a local Amazon SQS endpoint for tests: an httptest
// server speaking the SQS JSON protocol (AWS JSON 1.0, X-Amz-Target
// AmazonSQS.SendMessage) the way the real service does, so that an
// sqsqueue.Client (Endpoint pointed here) or a real Lambda binary
// (AWS_ENDPOINT_URL_SQS) can send to it.
//
// It verifies every request's AWS Signature Version 4 as the service does:
// it recomputes the signature over the request it received, limited to the
// headers the request says it signed, with the fake's secret and the AWS
// SDK for Go's own signer (aws/signer/v4, the reference implementation),
// and answers 403 InvalidSignatureException on any difference, so every
// test that sends here checks signing end to end. It is stricter than the
// service in one respect: content-type, x-amz-target and
// x-amz-security-token, when sent, must be signed.
//
// It implements SendMessage only, with the service's validation that
// matters to the adapters (queue existence, DelaySeconds 0-900, FIFO
// queues: MessageGroupId and MessageDeduplicationId required and no
// per-message delay; standard queues: no deduplication id), answers with
// the MD5 of the body that clients verify, and records every accepted
// message. Hooks inject what a client must survive: error answers
// ([Server.FailNext], [Server.FailNextWith]), dropped connections
// ([Server.DropNext]) and a wrong MD5 ([Server.CorruptNextMD5]).
package fakesqs

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go/logging"

	"github.com/mcptasks/mcptasks/internal/testkit/recorder"
	"github.com/mcptasks/mcptasks/pkg/queue/sqsqueue"
)

// Region and credentials that clients of the fake use. A request may carry
// SessionToken (temporary credentials, as on Lambda) or none (a long-term
// key); any other token, key or secret is refused.
const (
	Region          = "us-east-1"
	AccessKeyID     = "AKIDFAKESQS"
	SecretAccessKey = "fake-secret"
	SessionToken    = "fake-session-token"
	account         = "000000000000"
)

// Message is one accepted SendMessage.
type Message struct {
	ID           string
	QueueURL     string
	Body         string
	DelaySeconds int32
	GroupID      string
	DedupID      string
	// Attributes are the String message attributes (name -> value).
	Attributes map[string]string
	Received   time.Time
}

// Server is a running fake SQS endpoint.
type Server struct {
	// URL is the endpoint (ClientOptions.Endpoint / AWS_ENDPOINT_URL_SQS).
	URL string

	msgs     recorder.Log[Message]
	mu       sync.Mutex
	queues   map[string]bool
	faults   []fault // what to do to the next correctly signed requests
	requests int
}

// fault is an injected misbehaviour for one request.
type fault struct {
	status int    // answer this status with code, or
	code   string //
	drop   bool   // close the connection without an answer, or
	badMD5 bool   // accept the message and answer a wrong MD5
}

// Start runs a fake SQS endpoint for the life of tb.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{queues: map[string]bool{}}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Client returns an sqsqueue client of this endpoint, with the fake's
// temporary credentials (access key, secret and session token, as Lambda
// gives them) and retry backoffs of a few milliseconds.
func (s *Server) Client() *sqsqueue.Client {
	c, err := sqsqueue.NewClientWith(Region, sqsqueue.StaticCredentials(sqsqueue.Credentials{
		AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey, SessionToken: SessionToken,
	}), &sqsqueue.ClientOptions{Endpoint: s.URL, RetryBackoff: 5 * time.Millisecond})
	if err != nil {
		panic(err) // the fake's own URL and region are valid
	}
	return c
}

// Env returns the environment variables that point a process (a Lambda
// bootstrap's sqsqueue.NewClient, or an AWS SDK) at this endpoint with the
// fake's temporary credentials, and nowhere else: no shared config, no
// instance metadata.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_SQS=" + s.URL,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		"AWS_SESSION_TOKEN=" + SessionToken,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
	}
}

// CreateQueue makes a queue named name exist and returns its URL; a name
// ending in ".fifo" is a FIFO queue.
func (s *Server) CreateQueue(name string) string {
	u := s.URL + "/" + account + "/" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues[u] = true
	return u
}

// FailNext makes the next correctly signed requests fail with the given
// HTTP statuses and the code InternalError (clients retry a 5xx, not a 4xx).
func (s *Server) FailNext(statuses ...int) {
	for _, st := range statuses {
		s.FailNextWith(st, "InternalError")
	}
}

// FailNextWith makes the next correctly signed request fail with status
// and the error code code (e.g. 400 "ThrottlingException",
// "RequestThrottled").
func (s *Server) FailNextWith(status int, code string) {
	s.inject(fault{status: status, code: code})
}

// DropNext makes the next n correctly signed requests end with the
// connection closed and no answer: a network error to the client.
func (s *Server) DropNext(n int) {
	for range n {
		s.inject(fault{drop: true})
	}
}

// CorruptNextMD5 makes the next correctly signed request's message be
// accepted and answered with a wrong MD5OfMessageBody.
func (s *Server) CorruptNextMD5() { s.inject(fault{badMD5: true}) }

func (s *Server) inject(f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// Requests returns how many requests arrived, refused ones included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Messages returns the accepted messages so far, oldest first.
func (s *Server) Messages() []Message { return s.msgs.All() }

// WaitFor waits up to within until some accepted message satisfies match,
// and returns it; ok is false on timeout.
func (s *Server) WaitFor(within time.Duration, match func(Message) bool) (Message, bool) {
	return s.msgs.WaitFor(within, match)
}

// sqsError writes an error the way SQS's JSON protocol does; typ is a code
// of SQS's namespace, or a whole "namespace#Code".
func sqsError(w http.ResponseWriter, status int, typ, queryCode, msg string) {
	if !strings.Contains(typ, "#") {
		typ = "com.amazonaws.sqs#" + typ
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", rand.Text())
	if queryCode != "" {
		w.Header().Set("x-amzn-query-error", queryCode)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

// Errors of AWS's authentication layer, in front of every JSON service.
const (
	missingToken    = "com.amazon.coral.service#MissingAuthenticationTokenException"
	incompleteSig   = "com.amazon.coral.service#IncompleteSignatureException"
	invalidSig      = "com.amazon.coral.service#InvalidSignatureException"
	unrecognizedKey = "com.amazon.coral.service#UnrecognizedClientException"
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		http.Error(w, "not an SQS JSON request", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", err.Error())
		return
	}
	if status, typ, msg := verifySignature(r, body, time.Now()); status != 0 {
		sqsError(w, status, typ, "", msg)
		return
	}

	var f fault
	s.mu.Lock()
	if len(s.faults) > 0 {
		f = s.faults[0]
		s.faults = s.faults[1:]
	}
	s.mu.Unlock()
	switch {
	case f.drop:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	case f.status != 0:
		sqsError(w, f.status, f.code, "", "injected failure")
		return
	}

	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.0" {
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", "Content-Type "+ct+" is not application/x-amz-json-1.0")
		return
	}
	target := r.Header.Get("X-Amz-Target")
	if target != "AmazonSQS.SendMessage" {
		sqsError(w, http.StatusBadRequest, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation;Sender", "fakesqs implements SendMessage only, not "+target)
		return
	}
	var in struct {
		QueueURL               string `json:"QueueUrl"`
		MessageBody            string
		DelaySeconds           *int32
		MessageGroupID         string `json:"MessageGroupId"`
		MessageDeduplicationID string `json:"MessageDeduplicationId"`
		MessageAttributes      map[string]struct {
			DataType    string
			StringValue *string
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", "malformed request: "+err.Error())
		return
	}
	s.mu.Lock()
	exists := s.queues[in.QueueURL]
	s.mu.Unlock()
	fifo := strings.HasSuffix(in.QueueURL, ".fifo")
	var delay int32
	if in.DelaySeconds != nil {
		delay = *in.DelaySeconds
	}
	switch {
	case !exists:
		sqsError(w, http.StatusBadRequest, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue;Sender", "The specified queue does not exist.")
		return
	case in.MessageBody == "":
		sqsError(w, http.StatusBadRequest, "MissingParameter", "", "The request must contain the parameter MessageBody.")
		return
	case delay < 0 || delay > 900:
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", fmt.Sprintf("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided.", delay))
		return
	case fifo && delay > 0:
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", fmt.Sprintf("Value %d for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.", delay))
		return
	case fifo && (in.MessageGroupID == "" || in.MessageDeduplicationID == ""):
		sqsError(w, http.StatusBadRequest, "MissingParameter", "", "The request must contain the parameters MessageGroupId and MessageDeduplicationId.")
		return
	case !fifo && in.MessageDeduplicationID != "":
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", "The request include parameter MessageDeduplicationId that is not valid for this queue type.")
		return
	}
	var attrs map[string]string
	for k, a := range in.MessageAttributes {
		if a.DataType != "String" || a.StringValue == nil {
			sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", "The message attribute '"+k+"' must be of DataType String with a StringValue (fakesqs).")
			return
		}
		if attrs == nil {
			attrs = map[string]string{}
		}
		attrs[k] = *a.StringValue
	}
	id := rand.Text()
	sum := md5.Sum([]byte(in.MessageBody))
	if f.badMD5 {
		sum = md5.Sum([]byte(in.MessageBody + " (corrupted)"))
	}
	s.msgs.Add(Message{
		ID: id, QueueURL: in.QueueURL, Body: in.MessageBody, DelaySeconds: delay,
		GroupID: in.MessageGroupID, DedupID: in.MessageDeduplicationID, Attributes: attrs, Received: time.Now(),
	})
	out := map[string]string{"MD5OfMessageBody": hex.EncodeToString(sum[:]), "MessageId": id}
	if fifo {
		out["SequenceNumber"] = fmt.Sprintf("%020d", time.Now().UnixNano())
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", rand.Text())
	_ = json.NewEncoder(w).Encode(out)
}

// maxSkew is how far a request's X-Amz-Date may be from the server's
// clock: five minutes, as AWS documents for Signature Version 4.
const maxSkew = 5 * time.Minute

// verifySignature checks r's Signature Version 4 (body is r's body) the
// way the service does, and returns 0 when it is right, else the status,
// error type and message to answer.
func verifySignature(r *http.Request, body []byte, now time.Time) (status int, typ, msg string) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return http.StatusForbidden, missingToken, "Missing Authentication Token"
	}
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return http.StatusBadRequest, incompleteSig, "Authorization header requires the AWS4-HMAC-SHA256 algorithm: " + auth
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	signedHeaders := strings.Split(fields["SignedHeaders"], ";")
	if len(scope) != 5 || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return http.StatusBadRequest, incompleteSig, "Authorization header requires Credential (key/date/region/service/aws4_request), SignedHeaders and Signature: " + auth
	}
	signed := map[string]bool{}
	for _, h := range signedHeaders {
		signed[h] = true
	}
	for _, h := range []string{"host", "x-amz-date"} {
		if !signed[h] {
			return http.StatusBadRequest, incompleteSig, "Authorization header must sign " + h + ": " + auth
		}
	}
	for _, h := range []string{"content-type", "x-amz-target", "x-amz-security-token"} {
		if r.Header.Get(h) != "" && !signed[h] {
			return http.StatusBadRequest, incompleteSig, "fakesqs requires " + h + " to be signed: " + auth
		}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return http.StatusBadRequest, incompleteSig, "X-Amz-Date " + amzDate + " is not of the form YYYYMMDDTHHMMSSZ"
	}
	if d := now.Sub(at); d > maxSkew || d < -maxSkew {
		return http.StatusForbidden, invalidSig, "Signature expired: " + amzDate + " is more than 5 minutes from " + now.UTC().Format("20060102T150405Z")
	}
	switch {
	case scope[0] != AccessKeyID:
		return http.StatusForbidden, unrecognizedKey, "The security token included in the request is invalid."
	case scope[1] != amzDate[:8] || scope[2] != Region || scope[3] != "sqs" || scope[4] != "aws4_request":
		return http.StatusForbidden, invalidSig, "Credential should be scoped to " + amzDate[:8] + "/" + Region + "/sqs/aws4_request, not " + fields["Credential"]
	}
	token := r.Header.Get("X-Amz-Security-Token")
	if token != "" && token != SessionToken {
		return http.StatusForbidden, unrecognizedKey, "The security token included in the request is invalid."
	}

	// Rebuild the request from what was signed, and sign it again with
	// the SDK's signer and the fake's secret.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	re, err := http.NewRequest(r.Method, u.String(), nil)
	if err != nil {
		return http.StatusBadRequest, incompleteSig, err.Error()
	}
	re.Host = r.Host
	for _, h := range signedHeaders {
		switch h {
		case "host":
		case "content-length":
			re.ContentLength = r.ContentLength
		default:
			vs := r.Header.Values(h)
			if len(vs) == 0 {
				return http.StatusBadRequest, incompleteSig, "signed header " + h + " is not in the request"
			}
			re.Header[http.CanonicalHeaderKey(h)] = vs
		}
	}
	sum := sha256.Sum256(body)
	var canonical bytes.Buffer
	err = v4.NewSigner().SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey, SessionToken: token},
		re, hex.EncodeToString(sum[:]), "sqs", Region, at, func(o *v4.SignerOptions) {
			o.LogSigning = true
			o.Logger = logging.LoggerFunc(func(_ logging.Classification, format string, v ...any) {
				fmt.Fprintf(&canonical, format, v...)
			})
		})
	if err != nil {
		return http.StatusInternalServerError, "InternalError", err.Error()
	}
	if want := re.Header.Get("Authorization"); want != auth {
		return http.StatusForbidden, invalidSig, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.\nwant: " + want + "\ngot:  " + auth + "\n" + canonical.String()
	}
	return 0, "", ""
}
