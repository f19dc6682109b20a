package fakesqs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// TestSignatureVerification sends the fake SendMessage requests signed by
// the AWS SDK's signer, then spoiled one way or another, and checks the
// fake accepts exactly the good ones and refuses the others with the
// service's authentication errors.
func TestSignatureVerification(t *testing.T) {
	t.Parallel()
	srv := Start(t)
	q := srv.CreateQueue("tasks")
	body := `{"QueueUrl":"` + q + `","MessageBody":"{\"taskId\":\"t\"}"}`
	creds := aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey, SessionToken: SessionToken}

	// send builds the request, lets before change it, signs it with the
	// SDK at at with c, lets after change it, and sends it.
	send := func(t *testing.T, c aws.Credentials, at time.Time, before, after func(*http.Request, *[]byte)) (int, string, string) {
		t.Helper()
		b := []byte(body)
		r, err := http.NewRequest(http.MethodPost, srv.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
		if before != nil {
			before(r, &b)
		}
		r.ContentLength = int64(len(b))
		sum := sha256.Sum256(b)
		if err := v4.NewSigner().SignHTTP(context.Background(), c, r, hex.EncodeToString(sum[:]), "sqs", Region, at); err != nil {
			t.Fatal(err)
		}
		if after != nil {
			after(r, &b)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		data, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(data, &e)
		return resp.StatusCode, e.Type, e.Message
	}

	now := time.Now()
	cases := []struct {
		name          string
		creds         aws.Credentials
		at            time.Time
		before, after func(*http.Request, *[]byte)
		status        int
		typ           string
	}{
		{name: "good, with a session token", creds: creds, at: now, status: 200},
		{name: "good, long-term key", creds: aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}, at: now, status: 200},
		{name: "good, five minutes of skew", creds: creds, at: now.Add(-4 * time.Minute), status: 200},
		{name: "wrong secret", creds: aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: "other"}, at: now,
			status: 403, typ: "com.amazon.coral.service#InvalidSignatureException"},
		{name: "body changed after signing", creds: creds, at: now,
			after:  func(_ *http.Request, b *[]byte) { *b = bytes.Replace(*b, []byte(`\"t\"`), []byte(`\"u\"`), 1) },
			status: 403, typ: "com.amazon.coral.service#InvalidSignatureException"},
		{name: "signed header changed after signing", creds: creds, at: now,
			after:  func(r *http.Request, _ *[]byte) { r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessageBatch") },
			status: 403, typ: "com.amazon.coral.service#InvalidSignatureException"},
		{name: "scoped to another region", creds: creds, at: now,
			after: func(r *http.Request, _ *[]byte) {
				r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/"+Region+"/", "/eu-west-1/", 1))
			},
			status: 403, typ: "com.amazon.coral.service#InvalidSignatureException"},
		{name: "expired", creds: creds, at: now.Add(-6 * time.Minute),
			status: 403, typ: "com.amazon.coral.service#InvalidSignatureException"},
		{name: "unknown key", creds: aws.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: SecretAccessKey}, at: now,
			status: 403, typ: "com.amazon.coral.service#UnrecognizedClientException"},
		{name: "unknown session token", creds: aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey, SessionToken: "stale"}, at: now,
			status: 403, typ: "com.amazon.coral.service#UnrecognizedClientException"},
		{name: "unsigned", creds: creds, at: now,
			after:  func(r *http.Request, _ *[]byte) { r.Header.Del("Authorization") },
			status: 403, typ: "com.amazon.coral.service#MissingAuthenticationTokenException"},
		{name: "target not signed", creds: creds, at: now,
			before: func(r *http.Request, _ *[]byte) { r.Header.Del("X-Amz-Target") },
			after:  func(r *http.Request, _ *[]byte) { r.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage") },
			status: 400, typ: "com.amazon.coral.service#IncompleteSignatureException"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(srv.Messages())
			status, typ, msg := send(t, c.creds, c.at, c.before, c.after)
			if status != c.status || typ != c.typ {
				t.Errorf("HTTP %d %s (%s), want %d %s", status, typ, msg, c.status, c.typ)
			}
			if stored := len(srv.Messages()) - before; (c.status == 200) != (stored == 1) {
				t.Errorf("%d messages stored", stored)
			}
		})
	}
}
