// Package fakesqs is a local Amazon SQS endpoint for tests: an httptest
// server speaking the SQS JSON protocol (AWS JSON 1.0, X-Amz-Target
// AmazonSQS.SendMessage) the way the real service does, so that a real
// aws-sdk-go-v2 SQS client (BaseEndpoint pointed here, static credentials)
// or a real Lambda binary (AWS_ENDPOINT_URL_SQS) can send to it.
//
// It implements SendMessage only, with the service's validation that
// matters to the adapters (queue existence, DelaySeconds 0-900, FIFO
// queues: MessageGroupId and MessageDeduplicationId required and no
// per-message delay; standard queues: no deduplication id), answers with
// the MD5 of the body that the SDK verifies, and records every accepted
// message.
package fakesqs

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/mcptasks/mcptasks/internal/recorder"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Region and credentials that clients of the fake use.
const (
	Region          = "us-east-1"
	AccessKeyID     = "AKIDFAKESQS"
	SecretAccessKey = "fake-secret"
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
	Received     time.Time
}

// Server is a running fake SQS endpoint.
type Server struct {
	// URL is the endpoint (BaseEndpoint / AWS_ENDPOINT_URL_SQS).
	URL string

	msgs   recorder.Log[Message]
	mu     sync.Mutex
	queues map[string]bool
	fail   []int // HTTP statuses to answer the next requests with
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

// Client returns a real SQS client of this endpoint, with static
// credentials and the SDK's standard retryer with backoffs capped at 20ms.
func (s *Server) Client() *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxBackoff = 20 * time.Millisecond
		}),
	})
}

// Env returns the environment variables that point a process's AWS SDK at
// this endpoint (and nowhere else: no shared config, no instance metadata).
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_SQS=" + s.URL,
		"AWS_REGION=" + Region,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
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

// FailNext makes the next requests fail with the given HTTP statuses (500
// and 503 are retried by the SDK; 400 is not).
func (s *Server) FailNext(statuses ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, statuses...)
}

// Messages returns the accepted messages so far, oldest first.
func (s *Server) Messages() []Message { return s.msgs.All() }

// WaitFor waits up to within until some accepted message satisfies match,
// and returns it; ok is false on timeout.
func (s *Server) WaitFor(within time.Duration, match func(Message) bool) (Message, bool) {
	return s.msgs.WaitFor(within, match)
}

// sqsError writes an error the way SQS's JSON protocol does.
func sqsError(w http.ResponseWriter, status int, typ, queryCode, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	if queryCode != "" {
		w.Header().Set("x-amzn-query-error", queryCode)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#" + typ, "message": msg})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if len(s.fail) > 0 {
		status := s.fail[0]
		s.fail = s.fail[1:]
		s.mu.Unlock()
		sqsError(w, status, "InternalError", "", "injected failure")
		return
	}
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		http.Error(w, "not an SQS JSON request", http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.0" {
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", "Content-Type "+ct+" is not application/x-amz-json-1.0")
		return
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+AccessKeyID+"/") || !strings.Contains(auth, "/"+Region+"/sqs/aws4_request") {
		sqsError(w, http.StatusForbidden, "InvalidClientTokenId", "", "missing or foreign SigV4 credentials: "+auth)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	if target != "AmazonSQS.SendMessage" {
		sqsError(w, http.StatusBadRequest, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation;Sender", "fakesqs implements SendMessage only, not "+target)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		sqsError(w, http.StatusBadRequest, "InvalidParameterValue", "", err.Error())
		return
	}
	var in struct {
		QueueURL               string `json:"QueueUrl"`
		MessageBody            string
		DelaySeconds           *int32
		MessageGroupID         string `json:"MessageGroupId"`
		MessageDeduplicationID string `json:"MessageDeduplicationId"`
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
	id := rand.Text()
	sum := md5.Sum([]byte(in.MessageBody))
	s.msgs.Add(Message{
		ID: id, QueueURL: in.QueueURL, Body: in.MessageBody, DelaySeconds: delay,
		GroupID: in.MessageGroupID, DedupID: in.MessageDeduplicationID, Received: time.Now(),
	})
	out := map[string]string{"MD5OfMessageBody": hex.EncodeToString(sum[:]), "MessageId": id}
	if fifo {
		out["SequenceNumber"] = fmt.Sprintf("%020d", time.Now().UnixNano())
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(out)
}
