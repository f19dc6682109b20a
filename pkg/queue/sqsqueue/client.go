package sqsqueue

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Credentials are AWS credentials: an access key and, for temporary
// credentials (a Lambda function's role), a session token.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// CredentialsFunc returns the credentials to sign a request with. The
// [Client] calls it for every attempt; a source whose credentials expire
// (an STS role, a container credentials endpoint) caches and refreshes
// them itself.
type CredentialsFunc func(context.Context) (Credentials, error)

// StaticCredentials returns a CredentialsFunc that always returns c.
func StaticCredentials(c Credentials) CredentialsFunc {
	return func(context.Context) (Credentials, error) { return c, nil }
}

// ClientOptions configures a [Client]. The zero value is the AWS endpoint
// of the region, http.DefaultClient, 3 attempts and 10 seconds per attempt.
type ClientOptions struct {
	// Endpoint overrides the service's URL (an SQS-compatible service or a
	// local fake), e.g. "http://localhost:9324". Default:
	// https://sqs.REGION.amazonaws.com, or the region's partition's domain
	// (amazonaws.com.cn for cn-*, ...).
	Endpoint string
	// HTTPClient sends the requests (default http.DefaultClient).
	HTTPClient *http.Client
	// Timeout bounds each attempt, from sending the request to reading the
	// answer (default 10s); the context bounds them all.
	Timeout time.Duration
	// MaxAttempts is how many times a request is sent at most (default 3):
	// again after a network error, a timeout, an HTTP 5xx or 429, or a
	// throttling error, never after another error.
	MaxAttempts int
	// RetryBackoff is the most the first retry waits (default 200ms); each
	// further retry waits up to twice as long as the one before. Every wait
	// is drawn at random between zero and that bound ("full jitter").
	RetryBackoff time.Duration
	// Now is the clock requests are signed with (default time.Now).
	Now func() time.Time
}

// Client sends messages to Amazon SQS: SendMessage over the SQS JSON
// protocol (AWS JSON 1.0), signed with AWS Signature Version 4, on the
// standard library alone. It is safe for concurrent use.
type Client struct {
	region   string
	endpoint *url.URL
	creds    CredentialsFunc
	o        ClientOptions
}

// NewClientWith returns a client of Amazon SQS in region whose requests
// are signed with the credentials creds returns.
func NewClientWith(region string, creds CredentialsFunc, opts *ClientOptions) (*Client, error) {
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if !validRegion(region) {
		return nil, fmt.Errorf("sqs: invalid region %q", region)
	}
	if creds == nil {
		return nil, errors.New("sqs: no credentials")
	}
	ep := o.Endpoint
	if ep == "" {
		ep = "https://sqs." + region + "." + dnsSuffix(region)
	}
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("sqs: endpoint %q is not an http(s) URL without credentials, query or fragment", ep)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 200 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Client{region: region, endpoint: u, creds: creds, o: o}, nil
}

// NewClient returns an SQS client configured from the environment AWS
// Lambda gives every function: the region from AWS_REGION (or
// AWS_DEFAULT_REGION), the function role's credentials from
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, and an
// endpoint override from AWS_ENDPOINT_URL_SQS (or AWS_ENDPOINT_URL).
// getenv is os.Getenv when nil.
//
// It deliberately reads no other source of the AWS SDK's configuration
// chain (shared config files, SSO, STS, IMDS): a Lambda function never
// needs them. Elsewhere, pass [NewClientWith] a [CredentialsFunc] over any
// source.
func NewClient(getenv func(string) string) (*Client, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	first := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	region := first("AWS_REGION", "AWS_DEFAULT_REGION")
	key, secret := first("AWS_ACCESS_KEY_ID"), first("AWS_SECRET_ACCESS_KEY")
	switch {
	case region == "":
		return nil, errors.New("sqs: AWS_REGION is not set (Lambda sets it; elsewhere set it, or build a client with sqsqueue.NewClientWith)")
	case key == "" || secret == "":
		return nil, errors.New("sqs: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set (Lambda sets them from the function's role; elsewhere set them, or build a client with sqsqueue.NewClientWith and your own credentials source)")
	}
	creds := StaticCredentials(Credentials{AccessKeyID: key, SecretAccessKey: secret, SessionToken: first("AWS_SESSION_TOKEN")})
	return NewClientWith(region, creds, &ClientOptions{Endpoint: first("AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL")})
}

// validRegion reports whether region can be a DNS label of the endpoint
// and a field of the credential scope.
func validRegion(region string) bool {
	if region == "" || len(region) > 63 || region[0] == '-' {
		return false
	}
	for _, c := range region {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// dnsSuffix is the domain of the AWS partition region belongs to
// (aws-sdk-go-v2 internal/endpoints/awsrulesfn/partitions.json).
func dnsSuffix(region string) string {
	for _, p := range []struct{ prefix, suffix string }{
		{"cn-", "amazonaws.com.cn"},
		{"us-isob-", "sc2s.sgov.gov"},
		{"us-isof-", "csp.hci.ic.gov"},
		{"us-iso-", "c2s.ic.gov"},
		{"eu-isoe-", "cloud.adc-e.uk"},
		{"eusc-", "amazonaws.eu"},
	} {
		if strings.HasPrefix(region, p.prefix) {
			return p.suffix
		}
	}
	return "amazonaws.com"
}

// APIError is an error answer of the service, e.g. Code
// "QueueDoesNotExist" (the part of the JSON protocol's __type after '#').
type APIError struct {
	Code       string
	Message    string
	StatusCode int
	// RequestID is the service's x-amzn-RequestId, for AWS support.
	RequestID string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("sqs: %s (HTTP %d)", e.Code, e.StatusCode)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " (request id " + e.RequestID + ")"
	}
	return s
}

// retryable reports whether the same request may succeed later.
func (e *APIError) retryable() bool {
	if e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests {
		return true
	}
	switch e.Code {
	case "ThrottlingException", "Throttling", "RequestThrottled", "RequestThrottledException",
		"TooManyRequestsException", "RequestLimitExceeded", "SlowDown",
		"RequestTimeout", "RequestTimeoutException":
		return true
	}
	return false
}

// SendMessage sends in.MessageBody to the queue at in.QueueURL, retrying
// as [ClientOptions].MaxAttempts says, and checks the MD5 of the body the
// service answers. A retry after a network error may store the message
// twice, as with the AWS SDK. Errors of the service are *[APIError].
func (c *Client) SendMessage(ctx context.Context, in *SendMessageInput) (*SendMessageOutput, error) {
	if in.QueueURL == "" || in.MessageBody == "" {
		return nil, errors.New("sqs: SendMessage needs a QueueURL and a MessageBody")
	}
	body, err := marshalSendMessage(in)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		out, retry, err := c.send(ctx, body)
		if err == nil {
			if out.MD5OfMessageBody != "" {
				sum := md5.Sum([]byte(in.MessageBody))
				if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, out.MD5OfMessageBody) {
					return nil, fmt.Errorf("sqs: message %s: the service's MD5 of the body is %s, want %s", out.MessageID, out.MD5OfMessageBody, got)
				}
			}
			return out, nil
		}
		if !retry || attempt >= c.o.MaxAttempts || ctx.Err() != nil {
			if attempt > 1 {
				err = fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return nil, err
		}
		bound := c.o.RetryBackoff
		for i := 1; i < attempt && bound < time.Minute; i++ {
			bound *= 2
		}
		t := time.NewTimer(rand.N(bound) + 1)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w; not retried: %w", err, ctx.Err())
		case <-t.C:
		}
	}
}

// marshalSendMessage returns SendMessage's JSON body.
func marshalSendMessage(in *SendMessageInput) ([]byte, error) {
	req := sendMessageRequest{
		QueueURL: in.QueueURL, MessageBody: in.MessageBody, DelaySeconds: in.DelaySeconds,
		MessageGroupID: in.MessageGroupID, MessageDeduplicationID: in.MessageDeduplicationID,
	}
	if in.TraceParent != "" {
		req.MessageAttributes = map[string]messageAttribute{"traceparent": {DataType: "String", StringValue: in.TraceParent}}
	}
	return json.Marshal(req)
}

// messageAttribute is a String message attribute of SendMessage.
type messageAttribute struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue"`
}

// sendMessageRequest is SendMessage's JSON body. DelaySeconds 0 is
// omitted, as the SDK does (so a queue's default delay applies).
type sendMessageRequest struct {
	QueueURL               string                      `json:"QueueUrl"`
	MessageBody            string                      `json:"MessageBody"`
	DelaySeconds           int32                       `json:"DelaySeconds,omitempty"`
	MessageGroupID         string                      `json:"MessageGroupId,omitempty"`
	MessageDeduplicationID string                      `json:"MessageDeduplicationId,omitempty"`
	MessageAttributes      map[string]messageAttribute `json:"MessageAttributes,omitempty"`
}

// maxAnswer bounds the answer read: SendMessage's is a few hundred bytes.
const maxAnswer = 1 << 20

// send makes one attempt; retry reports whether another may succeed.
func (c *Client) send(ctx context.Context, body []byte) (out *SendMessageOutput, retry bool, err error) {
	creds, err := c.creds(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("sqs: credentials: %w", err)
	}
	if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		return nil, false, errors.New("sqs: credentials without an access key id or secret")
	}
	actx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	req, err := c.newRequest(actx, body)
	if err != nil {
		return nil, false, err
	}
	signV4(req, payloadHash(body), creds, c.region, "sqs", c.o.Now())

	resp, err := c.o.HTTPClient.Do(req)
	if err != nil {
		return nil, ctx.Err() == nil, fmt.Errorf("sqs: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, ctx.Err() == nil, fmt.Errorf("sqs: reading the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		apiErr := parseError(resp, data)
		return nil, apiErr.retryable(), apiErr
	}
	var ans struct {
		MessageID        string `json:"MessageId"`
		MD5OfMessageBody string
		SequenceNumber   string
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, false, fmt.Errorf("sqs: undecodable answer (HTTP %d): %w", resp.StatusCode, err)
	}
	return &SendMessageOutput{MessageID: ans.MessageID, MD5OfMessageBody: ans.MD5OfMessageBody, SequenceNumber: ans.SequenceNumber}, false, nil
}

// newRequest returns the unsigned SendMessage request carrying body.
func (c *Client) newRequest(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	req.Header.Set("User-Agent", "mcptasks-sqsqueue")
	return req, nil
}

// parseError reads an error answer of the AWS JSON protocol: the code in
// the X-Amzn-ErrorType header or the body's __type ("namespace#Code",
// possibly followed by ":" and more), the message in message or Message.
func parseError(resp *http.Response, data []byte) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("X-Amzn-RequestId")}
	var body struct {
		Type    string `json:"__type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Upper   string `json:"Message"`
	}
	if json.Unmarshal(data, &body) == nil {
		e.Message = body.Message
		if e.Message == "" {
			e.Message = body.Upper
		}
		e.Code = body.Type
		if e.Code == "" {
			e.Code = body.Code
		}
	} else {
		e.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	if h := resp.Header.Get("X-Amzn-ErrorType"); h != "" {
		e.Code = h
	}
	e.Code, _, _ = strings.Cut(e.Code, ":")
	if _, after, ok := strings.Cut(e.Code, "#"); ok {
		e.Code = after
	}
	if e.Code == "" {
		e.Code = "UnknownError"
	}
	return e
}
