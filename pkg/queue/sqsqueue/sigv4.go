package sqsqueue

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, header-based, as specified in "Create a signed
// AWS API request" (docs.aws.amazon.com/IAM/latest/UserGuide/
// create-signed-request.html) and as aws-sdk-go-v2's aws/signer/v4
// (v1.48.0, Signer.SignHTTP) applies it; sigv4_test.go requires
// byte-identical Authorization headers from both, and the published AWS
// test-suite answers.
//
// What it mirrors of the SDK, beyond the specification:
//   - every header of the request is signed except Authorization,
//     User-Agent, X-Amzn-Trace-Id, Expect and Transfer-Encoding
//     (internal/v4.IgnoredHeaders), plus host and, when the body is not
//     empty, content-length;
//   - the host is the request's Host or its URL's, with a default port
//     (":443" for https, ":80" for http) stripped from both the signature
//     and the wire (internal/v4.SanitizeHostForHeader);
//   - the canonical URI is the path as sent, escaped once more: every byte
//     but A-Z a-z 0-9 - . _ ~ and '/' (smithy-go httpbinding.EscapePath),
//     which is the specification's rule for every service but S3;
//   - a header's values are each trimmed, runs of spaces inside collapsed to
//     one, and joined with ',' (internal/v4.StripExcessSpaces).

const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	amzDateFmt   = "20060102T150405Z"
)

// unsignedHeaders are the headers SigV4 signers leave out: a proxy or the
// transport may add or change them.
var unsignedHeaders = []string{"Authorization", "User-Agent", "X-Amzn-Trace-Id", "Expect", "Transfer-Encoding", "Content-Length"}

// signV4 signs r in place for service in region at t with c: it sets
// X-Amz-Date, X-Amz-Security-Token (with a session token) and
// Authorization. payloadHash is the hex SHA-256 of r's body.
func signV4(r *http.Request, payloadHash string, c Credentials, region, service string, t time.Time) {
	t = t.UTC()
	amzDate := t.Format(amzDateFmt)
	r.Header.Set("X-Amz-Date", amzDate)
	if c.SessionToken != "" {
		r.Header.Set("X-Amz-Security-Token", c.SessionToken)
	}
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	host = withoutDefaultPort(r.URL.Scheme, host)
	r.Host = host

	hdr := r.Header.Clone()
	for _, k := range unsignedHeaders {
		hdr.Del(k)
	}
	if r.ContentLength > 0 {
		hdr["Content-Length"] = []string{strconv.FormatInt(r.ContentLength, 10)}
	}
	canonical, signed := canonicalRequest(r.Method, r.URL.EscapedPath(), r.URL.Query(), host, hdr, payloadHash)
	scope := t.Format("20060102") + "/" + region + "/" + service + "/aws4_request"
	r.Header.Set("Authorization", sigAlgorithm+" Credential="+c.AccessKeyID+"/"+scope+
		", SignedHeaders="+signed+", Signature="+signature(c.SecretAccessKey, t, region, service, canonical))
}

// canonicalRequest returns the canonical request of a request whose path
// (as sent on the wire, already percent-encoded), query, host and other
// headers to sign are given, and its signed header list.
func canonicalRequest(method, path string, query url.Values, host string, hdr http.Header, payloadHash string) (canonical, signedHeaders string) {
	if path == "" {
		path = "/"
	}
	values := map[string][]string{"host": {stripExcessSpaces(host)}}
	keys := make([]string, 0, len(hdr))
	for k := range hdr {
		keys = append(keys, k)
	}
	slices.Sort(keys) // keys differing only in case merge in a fixed order
	for _, k := range keys {
		lk := strings.ToLower(k)
		if lk == "host" {
			continue
		}
		for _, v := range hdr[k] {
			values[lk] = append(values[lk], strings.TrimSpace(stripExcessSpaces(v)))
		}
	}
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	slices.Sort(names)

	var b strings.Builder
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(escapePath(path))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(query))
	b.WriteByte('\n')
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(strings.Join(values[n], ","))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	signedHeaders = strings.Join(names, ";")
	b.WriteString(signedHeaders)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String(), signedHeaders
}

// signature is the hex HMAC of the string to sign of canonical, with the
// key derived from secret for t's date, region and service.
func signature(secret string, t time.Time, region, service, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	toSign := sigAlgorithm + "\n" + t.Format(amzDateFmt) + "\n" +
		t.Format("20060102") + "/" + region + "/" + service + "/aws4_request\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+secret), t.Format("20060102"))
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, service)
	key = hmacSHA256(key, "aws4_request")
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// payloadHash is the hex SHA-256 of body.
func payloadHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// canonicalQuery encodes every name and value (RFC 3986 unreserved
// characters kept, a space as %20) and sorts the pairs by encoded name,
// then encoded value.
func canonicalQuery(q url.Values) string {
	type pair struct{ k, v string }
	pairs := make([]pair, 0, len(q))
	for k, vs := range q {
		ek := escapeQuery(k)
		for _, v := range vs {
			pairs = append(pairs, pair{ek, escapeQuery(v)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

func escapeQuery(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// escapePath percent-encodes every byte of p but the unreserved characters
// and '/'.
func escapePath(p string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// stripExcessSpaces trims the spaces around s and collapses each run of
// spaces inside it to one.
func stripExcessSpaces(s string) string {
	s = strings.Trim(s, " ")
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// withoutDefaultPort strips ":443" from an https host and ":80" from an
// http one.
func withoutDefaultPort(scheme, host string) string {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.Contains(host[i:], "]") {
		return host
	}
	port := host[i+1:]
	if port == "" || strings.EqualFold(scheme, "https") && port == "443" || strings.EqualFold(scheme, "http") && port == "80" {
		return strings.TrimSuffix(strings.TrimPrefix(host[:i], "["), "]")
	}
	return host
}
