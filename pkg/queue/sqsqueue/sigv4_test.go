package sqsqueue

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The AWS SDK for Go's signer is the oracle of these tests: it is linked by
// this test binary (and internal/testkit/fakesqs) only, never by a binary of
// mcptasks.

// sdkSign signs r with the SDK's v4.Signer.SignHTTP.
func sdkSign(t testing.TB, r *http.Request, body []byte, c Credentials, region, service string, at time.Time) {
	t.Helper()
	err := v4.NewSigner().SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken},
		r, payloadHash(body), service, region, at)
	if err != nil {
		t.Fatal(err)
	}
}

// sameSignature fails unless ours and sdk's signing headers are
// byte-identical.
func sameSignature(t testing.TB, ours, sdk *http.Request) {
	t.Helper()
	for _, h := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if a, b := ours.Header.Values(h), sdk.Header.Values(h); strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("%s:\n ours %q\n sdk  %q", h, a, b)
		}
	}
	if ours.Host != sdk.Host {
		t.Errorf("Host: ours %q, sdk %q", ours.Host, sdk.Host)
	}
}

// TestSignatureMatchesSDK builds the very SendMessage request the Client
// sends, for several endpoints, regions, bodies and times, with and
// without a session token, signs it with signV4 and a twin of it with the
// SDK's v4.Signer.SignHTTP, and requires byte-identical Authorization,
// X-Amz-Date and X-Amz-Security-Token headers (and Host, whose default
// port both strip).
func TestSignatureMatchesSDK(t *testing.T) {
	t.Parallel()
	creds := []Credentials{
		{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{AccessKeyID: "ASIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", SessionToken: "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+token/with=padding"},
	}
	bodies := []*SendMessageInput{
		{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/mcptasks-tasks", MessageBody: `{"taskId":"abc"}`},
		{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/mcptasks-tasks", MessageBody: `{"taskId":"abc"}`, DelaySeconds: 900},
		{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/t.fifo", MessageBody: "<b>é & ü</b>\u2028", MessageGroupID: "g", MessageDeduplicationID: "g.1796040000000"},
	}
	endpoints := []struct{ region, endpoint string }{
		{"us-east-1", ""},
		{"cn-north-1", ""},
		{"eu-west-1", "https://sqs.eu-west-1.amazonaws.com:443"}, // default port stripped
		{"us-east-1", "http://127.0.0.1:9324"},
		{"us-east-1", "http://localhost:4566/some path/ü~"}, // escaped, then escaped again
	}
	times := []time.Time{
		time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("CET", 3600)), // signed as UTC
	}
	for _, ep := range endpoints {
		for _, cr := range creds {
			for _, in := range bodies {
				for _, at := range times {
					c, err := NewClientWith(ep.region, StaticCredentials(cr), &ClientOptions{Endpoint: ep.endpoint})
					if err != nil {
						t.Fatal(err)
					}
					body, err := marshalSendMessage(in)
					if err != nil {
						t.Fatal(err)
					}
					ours, _ := c.newRequest(t.Context(), body)
					sdk, _ := c.newRequest(t.Context(), body)
					signV4(ours, payloadHash(body), cr, ep.region, "sqs", at)
					sdkSign(t, sdk, body, cr, ep.region, "sqs", at)
					sameSignature(t, ours, sdk)
					auth := ours.Header.Get("Authorization")
					want := "SignedHeaders=content-length;content-type;host;x-amz-date;x-amz-target,"
					if cr.SessionToken != "" {
						want = "SignedHeaders=content-length;content-type;host;x-amz-date;x-amz-security-token;x-amz-target,"
					}
					if !strings.Contains(auth, want) || !strings.Contains(auth, "/"+ep.region+"/sqs/aws4_request,") {
						t.Errorf("Authorization %q, want %s and the sqs scope of %s", auth, want, ep.region)
					}
				}
			}
		}
	}
}

// TestSignatureMatchesSDKBeyondSQS signs requests that the Client never
// sends but a SigV4 signer must get right: headers the SDK ignores,
// several values, keys differing in case, spaces and tabs in values, a
// query whose encoded order differs from its decoded order, an escaped
// path.
func TestSignatureMatchesSDKBeyondSQS(t *testing.T) {
	t.Parallel()
	cr := Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "SESSION"}
	at := time.Date(2021, 10, 20, 12, 42, 0, 0, time.UTC)
	build := func() *http.Request {
		r, err := http.NewRequest(http.MethodPost, "https://example.amazonaws.com:8443/a%20b/c+d/%C3%A9?a-b=1&a=x%2Fy&a=x-y&sp=a+b&empty=", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("User-Agent", "ignored")
		r.Header.Set("X-Amzn-Trace-Id", "ignored")
		r.Header.Set("Expect", "ignored")
		r.Header.Set("Content-Type", "application/x-amz-json-1.0")
		r.Header.Set("X-Amz-Meta-Spaces", "   inner      space    ")
		r.Header.Add("X-Amz-Meta-Multi", "one")
		r.Header.Add("X-Amz-Meta-Multi", "\ttwo\t")
		return r
	}
	ours, sdk := build(), build()
	signV4(ours, payloadHash([]byte("{}")), cr, "mock-region", "mockAPI", at)
	sdkSign(t, sdk, []byte("{}"), cr, "mock-region", "mockAPI", at)
	sameSignature(t, ours, sdk)

	// Keys differing only in case are one header, their values merged in
	// a fixed order (the SDK merges them in map order).
	h := http.Header{"X-Amz-Meta-Multi": {"one", "two"}, "x-amz-meta-multi": {"three"}}
	canonical, signed := canonicalRequest("GET", "/", nil, "h", h, "")
	if !strings.Contains(canonical, "\nx-amz-meta-multi:one,two,three\n") || signed != "host;x-amz-meta-multi" {
		t.Errorf("canonical request:\n%s\nsigned %s", canonical, signed)
	}
}

// FuzzSignatureMatchesSDK checks signV4 against the SDK on arbitrary
// paths, queries, header values and bodies.
func FuzzSignatureMatchesSDK(f *testing.F) {
	f.Add("/", "", "application/x-amz-json-1.0", `{"QueueUrl":"q"}`, "")
	f.Add("/a b/ü", "b=2&a=1&a=0", "  x   y ", "", "token")
	f.Add("/%2F", "a-b=1&a=2", "\t", "x", "")
	f.Fuzz(signsLikeSDK)
}

// signsLikeSDK is one case of FuzzSignatureMatchesSDK.
func signsLikeSDK(t *testing.T, path, rawQuery, value, body, token string) {
	u := &url.URL{Scheme: "https", Host: "sqs.us-east-1.amazonaws.com", Path: "/" + path, RawQuery: rawQuery}
	cr := Credentials{AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: token}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func() *http.Request {
		r, err := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(body))
		if err != nil {
			t.Skip()
		}
		r.Header.Set("X-Amz-Meta-Value", value)
		return r
	}
	ours, sdk := build(), build()
	signV4(ours, payloadHash([]byte(body)), cr, "us-east-1", "sqs", at)
	sdkSign(t, sdk, []byte(body), cr, "us-east-1", "sqs", at)
	sameSignature(t, ours, sdk)
}

// TestSignatureKnownAnswers signs requests of the AWS Signature Version 4
// test suite (credentials AKIDEXAMPLE, 2015-08-30T12:36:00Z, us-east-1,
// service "service"; the answers published with the suite), and the SDK's
// own known answer (aws/signer/v4/v4_test.go TestSignRequest).
func TestSignatureKnownAnswers(t *testing.T) {
	t.Parallel()
	suite := Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	at := time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	const scope = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
	cases := []struct {
		name, method, target, contentType, body, token, want string
	}{
		{"get-vanilla", "GET", "/", "", "", "",
			"SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-vanilla-with-session-token", "GET", "/", "", "", "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267",
			"SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"},
		{"get-vanilla-query-order-key-case", "GET", "/?Param2=value2&Param1=value1", "", "", "",
			"SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
		{"post-vanilla", "POST", "/", "", "", "",
			"SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
		{"post-x-www-form-urlencoded", "POST", "/", "application/x-www-form-urlencoded", "Param1=value1", "",
			"SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := http.NewRequest(c.method, "https://example.amazonaws.com"+c.target, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			r.ContentLength = 0 // the suite signs no content-length
			if c.contentType != "" {
				r.Header.Set("Content-Type", c.contentType)
			}
			cr := suite
			cr.SessionToken = c.token
			signV4(r, payloadHash([]byte(c.body)), cr, "us-east-1", "service", at)
			if got := r.Header.Get("Authorization"); got != scope+c.want {
				t.Errorf("Authorization\n got  %s\n want %s", got, scope+c.want)
			}
			if got := r.Header.Get("X-Amz-Date"); got != "20150830T123600Z" {
				t.Errorf("X-Amz-Date %q", got)
			}
			if got := r.Header.Get("X-Amz-Security-Token"); got != c.token {
				t.Errorf("X-Amz-Security-Token %q, want %q", got, c.token)
			}
		})
	}

	t.Run("sdk-TestSignRequest", func(t *testing.T) {
		// The SDK's request has a pre-escaped path (URL.Opaque) that
		// net/url cannot express, so this signs its canonical form.
		h := http.Header{}
		h.Set("X-Amz-Target", "prefix.Operation")
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("Content-Length", "2")
		h.Set("X-Amz-Meta-Other-Header", "some-value=!@#$%^&* (+)")
		h.Add("X-Amz-Meta-Other-Header_With_Underscore", "some-value=!@#$%^&* (+)")
		h.Add("X-amz-Meta-Other-Header_With_Underscore", "some-value=!@#$%^&* (+)")
		h.Set("X-Amz-Date", "19700101T000000Z")
		h.Set("X-Amz-Security-Token", "SESSION")
		canonical, signed := canonicalRequest("POST", "/bucket/key-._~,!@#$%^&*()", nil, "dynamodb.us-east-1.amazonaws.com", h, payloadHash([]byte("{}")))
		got := "AWS4-HMAC-SHA256 Credential=AKID/19700101/us-east-1/dynamodb/aws4_request, SignedHeaders=" + signed +
			", Signature=" + signature("SECRET", time.Unix(0, 0).UTC(), "us-east-1", "dynamodb", canonical)
		const want = "AWS4-HMAC-SHA256 Credential=AKID/19700101/us-east-1/dynamodb/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-date;x-amz-meta-other-header;x-amz-meta-other-header_with_underscore;x-amz-security-token;x-amz-target, Signature=a518299330494908a70222cec6899f6f32f297f8595f6df1776d998936652ad9"
		if got != want {
			t.Errorf("Authorization\n got  %s\n want %s\ncanonical:\n%s", got, want, canonical)
		}
	})
}

// TestEndpoints: the region's endpoint in its partition, an override, and
// what is refused.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	creds := StaticCredentials(Credentials{AccessKeyID: "a", SecretAccessKey: "b"})
	for region, want := range map[string]string{
		"us-east-1":      "https://sqs.us-east-1.amazonaws.com/",
		"eu-west-3":      "https://sqs.eu-west-3.amazonaws.com/",
		"us-gov-west-1":  "https://sqs.us-gov-west-1.amazonaws.com/",
		"cn-north-1":     "https://sqs.cn-north-1.amazonaws.com.cn/",
		"cn-northwest-1": "https://sqs.cn-northwest-1.amazonaws.com.cn/",
		"us-iso-east-1":  "https://sqs.us-iso-east-1.c2s.ic.gov/",
		"us-isob-east-1": "https://sqs.us-isob-east-1.sc2s.sgov.gov/",
		"eusc-de-east-1": "https://sqs.eusc-de-east-1.amazonaws.eu/",
	} {
		c, err := NewClientWith(region, creds, nil)
		if err != nil || c.endpoint.String() != want {
			t.Errorf("%s: endpoint %v, %v; want %s", region, c, err, want)
		}
	}
	if c, err := NewClientWith("us-east-1", creds, &ClientOptions{Endpoint: "http://localhost:9324"}); err != nil || c.endpoint.String() != "http://localhost:9324/" {
		t.Errorf("override: %v, %v", c, err)
	}
	for _, region := range []string{"", "US-EAST-1", "us east 1", "us-east-1.evil.com/", "-x"} {
		if _, err := NewClientWith(region, creds, nil); err == nil {
			t.Errorf("region %q accepted", region)
		}
	}
	for _, ep := range []string{"ftp://h", "localhost:9324", "http://", "http://u:p@h", "http://h/?a=1", "http://h/#f", "://"} {
		if _, err := NewClientWith("us-east-1", creds, &ClientOptions{Endpoint: ep}); err == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
	if _, err := NewClientWith("us-east-1", nil, nil); err == nil {
		t.Error("nil credentials accepted")
	}
}
