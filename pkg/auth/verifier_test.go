package auth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// targets are the verifier configurations the table tests run against.
type targets struct {
	hs, rs, es, jwks, tenant *Verifier
}

func newTargets(t *testing.T) targets {
	t.Helper()
	k := testKeys()
	base := Config{Issuer: testIssuer, Audience: testAudience}
	hs, rs, es, jw, tn := base, base, base, base, base
	hs.HS256Secret = testSecret
	rs.PublicKeyPEM = pemOf(t, &k.rsaA.PublicKey)
	es.PublicKeyPEM = pemOf(t, &k.ecA.PublicKey)
	srv := newJWKSServer(t, rsaJWK("rsa-1", &k.rsaA.PublicKey), ecJWK(t, "ec-1", &k.ecA.PublicKey))
	jw.JWKSURL = srv.URL
	jw.JWKSMinRefreshInterval = time.Nanosecond // every unknown kid refreshes: deterministic errors
	tn.HS256Secret = testSecret
	tn.TenantClaim = "org_id"
	return targets{
		hs: newVerifier(t, hs), rs: newVerifier(t, rs), es: newVerifier(t, es),
		jwks: newVerifier(t, jw), tenant: newVerifier(t, tn),
	}
}

func (ts targets) get(name string) *Verifier {
	return map[string]*Verifier{"hs": ts.hs, "rs": ts.rs, "es": ts.es, "jwks": ts.jwks, "tenant": ts.tenant}[name]
}

// tamper replaces the payload of a signed token, keeping its header and signature.
func tamper(t *testing.T, tok string, c jwt.MapClaims) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

func TestMiddlewareRejects(t *testing.T) {
	k := testKeys()
	ts := newTargets(t)
	rsaPEM := pemOf(t, &k.rsaA.PublicKey)
	hs256 := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, testSecret, "", c) }
	now := time.Now()
	skewed := DefaultLeeway + 5*time.Minute
	good := claims("alice")

	cases := []struct {
		name     string
		target   string
		auth     []string // Authorization header values
		token    string   // the token, when one is presented well-formed
		wantCode string   // expected error= parameter, "" for none
		wantErr  error    // what Verify's error must also match (besides auth.ErrInvalidToken)
	}{
		{name: "missing header", target: "hs"},
		{name: "other scheme", target: "hs", auth: []string{"Basic YWxpY2U6c2VjcmV0"}},
		{name: "bearer without token", target: "hs", auth: []string{"Bearer"}, wantCode: "invalid_token"},
		{name: "bearer with two tokens", target: "hs", auth: []string{"Bearer " + hs256(good) + " extra"}, wantCode: "invalid_token"},
		{name: "token with illegal characters", target: "hs", auth: []string{`Bearer a,b"c`}, wantCode: "invalid_token"},
		{name: "two Authorization headers", target: "hs", auth: []string{bearer(hs256(good)), bearer(hs256(good))}, wantCode: "invalid_token"},
		{name: "not a JWT", target: "hs", token: "abc.def.ghi", wantCode: "invalid_token", wantErr: jwt.ErrTokenMalformed},
		{name: "alg none (HS server)", target: "hs", token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "alg none (RS server)", target: "rs", token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "alg none (JWKS server)", target: "jwks", token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-1", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "algorithm confusion: HS256 signed with the RSA public key PEM (RS server)", target: "rs",
			token: sign(t, jwt.SigningMethodHS256, rsaPEM, "", good), wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "algorithm confusion: HS256 signed with the RSA public key PEM (JWKS server)", target: "jwks",
			token: sign(t, jwt.SigningMethodHS256, rsaPEM, "rsa-1", good), wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "HS512 on an HS256 server", target: "hs", token: sign(t, jwt.SigningMethodHS512, testSecret, "", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "bad signature: other secret", target: "hs", token: sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), "", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "bad signature: tampered payload", target: "hs", token: tamper(t, hs256(good), with(good, "sub", "mallory")),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "bad signature: other RSA key", target: "rs", token: sign(t, jwt.SigningMethodRS256, k.rsaB, "", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "bad signature: other EC key", target: "es", token: sign(t, jwt.SigningMethodES256, k.ecB, "", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "bad signature: other RSA key under a known kid", target: "jwks", token: sign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-1", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenSignatureInvalid},
		{name: "ES256 token naming an RSA kid", target: "jwks", token: sign(t, jwt.SigningMethodES256, k.ecA, "rsa-1", good),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenUnverifiable},
		{name: "unknown kid", target: "jwks", token: sign(t, jwt.SigningMethodRS256, k.rsaA, "no-such-kid", good),
			wantCode: "invalid_token", wantErr: jwkset.ErrKeyNotFound},
		{name: "expired", target: "hs", token: hs256(with(good, "exp", now.Add(-skewed).Unix())),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenExpired},
		{name: "expired (RS)", target: "rs", token: sign(t, jwt.SigningMethodRS256, k.rsaA, "", with(good, "exp", now.Add(-skewed).Unix())),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenExpired},
		{name: "missing exp", target: "hs", token: hs256(with(good, "exp", nil)),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenRequiredClaimMissing},
		{name: "not yet valid", target: "hs", token: hs256(with(good, "nbf", now.Add(skewed).Unix())),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenNotValidYet},
		{name: "issued in the future", target: "hs", token: hs256(with(good, "iat", now.Add(skewed).Unix())),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenUsedBeforeIssued},
		{name: "wrong iss", target: "hs", token: hs256(with(good, "iss", "https://evil.example")),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenInvalidIssuer},
		{name: "wrong iss (JWKS)", target: "jwks", token: sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-1", with(good, "iss", "https://evil.example")),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenInvalidIssuer},
		{name: "missing iss", target: "hs", token: hs256(with(good, "iss", nil)),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenRequiredClaimMissing},
		{name: "wrong aud", target: "hs", token: hs256(with(good, "aud", "https://other.example.com/mcp")),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenInvalidAudience},
		{name: "aud with a trailing slash", target: "hs", token: hs256(with(good, "aud", testAudience+"/")),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenInvalidAudience},
		{name: "wrong aud among several", target: "hs", token: hs256(with(good, "aud", []string{"https://a.example", "https://b.example"})),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenInvalidAudience},
		{name: "missing aud", target: "hs", token: hs256(with(good, "aud", nil)),
			wantCode: "invalid_token", wantErr: jwt.ErrTokenRequiredClaimMissing},
		{name: "missing sub", target: "hs", token: hs256(with(good, "sub", nil)),
			wantCode: "invalid_token", wantErr: errMissingSubject},
		{name: "empty sub", target: "hs", token: hs256(with(good, "sub", "")),
			wantCode: "invalid_token", wantErr: errMissingSubject},
		{name: "non-string sub", target: "hs", token: hs256(with(good, "sub", 42)),
			wantCode: "invalid_token", wantErr: errMissingSubject},
		{name: "missing sub (JWKS)", target: "jwks", token: sign(t, jwt.SigningMethodES256, k.ecA, "ec-1", with(good, "sub", nil)),
			wantCode: "invalid_token", wantErr: errMissingSubject},
		{name: "missing tenant", target: "tenant", token: hs256(good),
			wantCode: "invalid_token", wantErr: errMissingTenant},
		{name: "empty tenant", target: "tenant", token: hs256(with(good, "org_id", "")),
			wantCode: "invalid_token", wantErr: errMissingTenant},
		{name: "token too large", target: "hs", token: strings.Repeat("a", maxTokenBytes+1),
			wantCode: "invalid_token", wantErr: errTokenSize},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := ts.get(tc.target)
			auth := tc.auth
			if tc.token != "" {
				auth = []string{bearer(tc.token)}
			}
			r := get(t, serve(t, v).URL, auth...)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("status = %d (%s), want 401", r.status, r.body)
			}
			if r.challenge == nil {
				t.Fatal("no Bearer challenge in WWW-Authenticate")
			}
			if got := r.challenge["resource_metadata"]; got != testMetaURL {
				t.Errorf("resource_metadata = %q, want %q", got, testMetaURL)
			}
			if got, ok := r.challenge["error"]; got != tc.wantCode || ok != (tc.wantCode != "") {
				t.Errorf("error = %q (present %v), want %q", got, ok, tc.wantCode)
			}
			if tc.wantCode != "" && r.challenge["error_description"] == "" {
				t.Error("error_description missing")
			}
			if tc.wantErr == jwt.ErrTokenExpired && r.challenge["error_description"] != descExpired {
				t.Errorf("error_description = %q, want %q", r.challenge["error_description"], descExpired)
			}
			if _, ok := r.challenge["scope"]; ok {
				t.Errorf("scope parameter without required scopes: %q", r.challenge["scope"])
			}
			if tc.token != "" {
				_, err := v.Verify(t.Context(), tc.token)
				if !errors.Is(err, sdkauth.ErrInvalidToken) {
					t.Errorf("Verify error %v does not wrap auth.ErrInvalidToken", err)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("Verify error %v, want one matching %v", err, tc.wantErr)
				}
			}
		})
	}
}

func TestMiddlewareAccepts(t *testing.T) {
	k := testKeys()
	ts := newTargets(t)
	hs256 := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, testSecret, "", c) }
	good := claims("alice")

	cases := []struct {
		name       string
		target     string
		scheme     string // "" means "Bearer"
		token      string
		wantUser   string
		wantScopes []string
		wantExtra  map[string]any
	}{
		{name: "HS256", target: "hs", token: hs256(with(good, "scope", "tasks:read tasks:write")),
			wantUser: Principal(testIssuer, "alice", ""), wantScopes: []string{"tasks:read", "tasks:write"}},
		{name: "HS256, lowercase scheme", target: "hs", scheme: "bearer", token: hs256(good), wantUser: Principal(testIssuer, "alice", "")},
		{name: "RS256 (PEM)", target: "rs", token: sign(t, jwt.SigningMethodRS256, k.rsaA, "", with(good, "sub", "bob")),
			wantUser: Principal(testIssuer, "bob", "")},
		{name: "ES256 (PEM)", target: "es", token: sign(t, jwt.SigningMethodES256, k.ecA, "", with(good, "sub", "carol")),
			wantUser: Principal(testIssuer, "carol", "")},
		{name: "RS256 (JWKS kid)", target: "jwks", token: sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-1", with(good, "scp", []string{"tasks:read"})),
			wantUser: Principal(testIssuer, "alice", ""), wantScopes: []string{"tasks:read"}},
		{name: "ES256 (JWKS kid)", target: "jwks", token: sign(t, jwt.SigningMethodES256, k.ecA, "ec-1", with(good, "sub", "dave")),
			wantUser: Principal(testIssuer, "dave", "")},
		{name: "aud list containing ours", target: "hs", token: hs256(with(good, "aud", []string{"https://a.example", testAudience})),
			wantUser: Principal(testIssuer, "alice", "")},
		{name: "expired within the leeway", target: "hs", token: hs256(with(good, "exp", time.Now().Add(-DefaultLeeway/3).Unix())),
			wantUser: Principal(testIssuer, "alice", "")},
		{name: "tenant", target: "tenant", token: hs256(with(good, "org_id", "acme")),
			wantUser: Principal(testIssuer, "alice", "acme"), wantExtra: map[string]any{"iss": testIssuer, "sub": "alice", "tenant": "acme"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme := tc.scheme
			if scheme == "" {
				scheme = "Bearer"
			}
			r := get(t, serve(t, ts.get(tc.target)).URL, scheme+" "+tc.token)
			if r.status != http.StatusOK {
				t.Fatalf("status = %d (%s, challenge %v), want 200", r.status, r.body, r.challenge)
			}
			var s seen
			if err := json.Unmarshal(r.body, &s); err != nil {
				t.Fatal(err)
			}
			if s.UserID != tc.wantUser {
				t.Errorf("UserID = %q, want %q", s.UserID, tc.wantUser)
			}
			if strings.Join(s.Scopes, " ") != strings.Join(tc.wantScopes, " ") {
				t.Errorf("Scopes = %q, want %q", s.Scopes, tc.wantScopes)
			}
			if s.Expiration.IsZero() {
				t.Error("Expiration not set")
			}
			if tc.wantExtra != nil {
				for key, want := range tc.wantExtra {
					if s.Extra[key] != want {
						t.Errorf("Extra[%q] = %v, want %v", key, s.Extra[key], want)
					}
				}
			}
		})
	}
}

func TestVerifyFields(t *testing.T) {
	v := newVerifier(t, Config{Issuer: testIssuer, Audience: testAudience, HS256Secret: testSecret})
	exp := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	tok := sign(t, jwt.SigningMethodHS256, testSecret, "", with(claims("alice"), "exp", exp.Unix(), "scope", "a b"))
	info, err := v.Verify(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Expiration.Equal(exp) {
		t.Errorf("Expiration = %v, want %v", info.Expiration, exp)
	}
	if info.UserID != Principal(testIssuer, "alice", "") || info.Extra["iss"] != testIssuer || info.Extra["sub"] != "alice" {
		t.Errorf("identity = %q %v", info.UserID, info.Extra)
	}
	if _, ok := info.Extra["tenant"]; ok {
		t.Error("tenant in Extra without a tenant claim configured")
	}
}

func TestInsufficientScope(t *testing.T) {
	v := newVerifier(t, Config{
		Issuer: testIssuer, Audience: testAudience, HS256Secret: testSecret,
		RequiredScopes: []string{"tasks:read", "tasks:write"},
	})
	srv := serve(t, v)
	hs256 := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, testSecret, "", c) }
	good := claims("alice")

	cases := []struct {
		name       string
		auth       []string
		wantStatus int
		wantCode   string
	}{
		{"no scope", []string{bearer(hs256(good))}, http.StatusForbidden, "insufficient_scope"},
		{"one of two", []string{bearer(hs256(with(good, "scope", "tasks:read")))}, http.StatusForbidden, "insufficient_scope"},
		{"similar names", []string{bearer(hs256(with(good, "scope", "tasks:readx tasks:write2")))}, http.StatusForbidden, "insufficient_scope"},
		{"all, scope string", []string{bearer(hs256(with(good, "scope", "tasks:write openid tasks:read")))}, http.StatusOK, ""},
		{"all, scp array", []string{bearer(hs256(with(good, "scp", []string{"tasks:read", "tasks:write"})))}, http.StatusOK, ""},
		{"invalid token still 401", []string{bearer(hs256(with(good, "iss", "x", "scope", "tasks:read tasks:write")))}, http.StatusUnauthorized, "invalid_token"},
		{"missing token still 401", nil, http.StatusUnauthorized, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := get(t, srv.URL, tc.auth...)
			if r.status != tc.wantStatus {
				t.Fatalf("status = %d (%s), want %d", r.status, r.body, tc.wantStatus)
			}
			if tc.wantStatus == http.StatusOK {
				if r.challenge != nil {
					t.Errorf("challenge on success: %v", r.challenge)
				}
				return
			}
			if r.challenge == nil {
				t.Fatal("no Bearer challenge")
			}
			if r.challenge["error"] != tc.wantCode {
				t.Errorf("error = %q, want %q", r.challenge["error"], tc.wantCode)
			}
			if r.challenge["scope"] != "tasks:read tasks:write" {
				t.Errorf("scope = %q, want all required scopes", r.challenge["scope"])
			}
			if r.challenge["resource_metadata"] != testMetaURL {
				t.Errorf("resource_metadata = %q", r.challenge["resource_metadata"])
			}
		})
	}
}

func TestJWKSKeyRotation(t *testing.T) {
	k := testKeys()
	srv := newJWKSServer(t, rsaJWK("key-a", &k.rsaA.PublicKey))
	v := newVerifier(t, Config{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL})
	h := serve(t, v)
	tokA := sign(t, jwt.SigningMethodRS256, k.rsaA, "key-a", claims("alice"))
	tokB := sign(t, jwt.SigningMethodRS256, k.rsaB, "key-b", claims("alice"))

	if r := get(t, h.URL, bearer(tokA)); r.status != http.StatusOK {
		t.Fatalf("key A before rotation: status %d", r.status)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times after one known-kid token, want 1 (cached)", n)
	}

	// The issuer rotates: key A is withdrawn, key B (new kid) published.
	srv.set(http.StatusOK, rsaJWK("key-b", &k.rsaB.PublicKey))

	r := get(t, h.URL, bearer(tokB))
	if r.status != http.StatusOK {
		t.Fatalf("key B after rotation: status %d (%s)", r.status, r.body)
	}
	var s seen
	if err := json.Unmarshal(r.body, &s); err != nil || s.UserID != Principal(testIssuer, "alice", "") {
		t.Fatalf("principal after rotation = %q (%v)", s.UserID, err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("JWKS fetched %d times, want 2 (initial + one refresh for the unknown kid)", n)
	}
	if r := get(t, h.URL, bearer(tokA)); r.status != http.StatusUnauthorized {
		t.Errorf("withdrawn key A still accepted: status %d", r.status)
	}
}

func TestJWKSUnknownKIDRefreshIsRateLimited(t *testing.T) {
	k := testKeys()
	srv := newJWKSServer(t, rsaJWK("key-a", &k.rsaA.PublicKey))
	v := newVerifier(t, Config{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL,
		JWKSMinRefreshInterval: time.Hour})
	h := serve(t, v)
	for i, kid := range []string{"x1", "x2", "x3"} {
		tok := sign(t, jwt.SigningMethodRS256, k.rsaA, kid, claims("alice"))
		if r := get(t, h.URL, bearer(tok)); r.status != http.StatusUnauthorized {
			t.Fatalf("unknown kid %d: status %d", i, r.status)
		}
	}
	// One initial fetch, one refresh for the first unknown kid; the others are refused
	// without waiting for the next allowed refresh.
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("JWKS fetched %d times, want 2", n)
	}
	// Known kids still work.
	if r := get(t, h.URL, bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "key-a", claims("alice")))); r.status != http.StatusOK {
		t.Errorf("known kid: status %d", r.status)
	}
}

func TestJWKSUnavailableAtStart(t *testing.T) {
	k := testKeys()
	srv := newJWKSServer(t)
	srv.set(http.StatusServiceUnavailable)
	// New succeeds while the issuer is down (a cold start must not fail on it) ...
	v := newVerifier(t, Config{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL,
		JWKSMinRefreshInterval: time.Nanosecond})
	h := serve(t, v)
	tok := sign(t, jwt.SigningMethodES256, k.ecA, "ec-1", claims("alice"))
	// ... but fails closed until keys can be fetched ...
	if r := get(t, h.URL, bearer(tok)); r.status != http.StatusUnauthorized {
		t.Fatalf("JWKS down: status %d, want 401", r.status)
	}
	// ... and recovers through the unknown-kid refresh once the issuer is back.
	srv.set(http.StatusOK, ecJWK(t, "ec-1", &k.ecA.PublicKey))
	if r := get(t, h.URL, bearer(tok)); r.status != http.StatusOK {
		t.Fatalf("JWKS back: status %d, want 200", r.status)
	}
}

func TestJWKSIgnoresEncryptionKeys(t *testing.T) {
	k := testKeys()
	enc := rsaJWK("enc-1", &k.rsaA.PublicKey)
	enc["use"] = "enc"
	srv := newJWKSServer(t, enc)
	v := newVerifier(t, Config{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL})
	tok := sign(t, jwt.SigningMethodRS256, k.rsaA, "enc-1", claims("alice"))
	if r := get(t, serve(t, v).URL, bearer(tok)); r.status != http.StatusUnauthorized {
		t.Fatalf("token verified by an encryption key: status %d", r.status)
	}
}

func TestConcurrentRequests(t *testing.T) {
	k := testKeys()
	srv := newJWKSServer(t, rsaJWK("rsa-1", &k.rsaA.PublicKey))
	v := newVerifier(t, Config{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL})
	h := serve(t, v)
	good := bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-1", claims("alice")))
	unknown := bearer(sign(t, jwt.SigningMethodRS256, k.rsaA, "unknown", claims("alice")))
	status := func(authorization string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, h.URL, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", authorization)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Go(func() {
			for j := range 4 {
				a, want := good, http.StatusOK
				if (i+j)%3 == 0 {
					a, want = unknown, http.StatusUnauthorized
				}
				if got, err := status(a); err != nil || got != want {
					errs <- fmt.Errorf("status %d (err %v), want %d", got, err, want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
