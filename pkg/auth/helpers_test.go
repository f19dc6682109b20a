package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "https://mcp.example.com/mcp"
	testMetaURL  = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef-dev-secret")

// keys are generated once for the whole package: RSA generation is slow under -race.
type testKeySet struct {
	rsaA, rsaB *rsa.PrivateKey
	ecA, ecB   *ecdsa.PrivateKey
}

var testKeys = sync.OnceValue(func() testKeySet {
	mustRSA := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	}
	mustEC := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	}
	return testKeySet{rsaA: mustRSA(), rsaB: mustRSA(), ecA: mustEC(), ecB: mustEC()}
})

// pemOf encodes a public key as a PKIX "PUBLIC KEY" PEM block.
func pemOf(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// claims returns a valid claim set for sub, valid for an hour.
func claims(sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": testIssuer,
		"aud": testAudience,
		"sub": sub,
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
}

// with returns a copy of c with the given changes; a nil value deletes the claim.
func with(c jwt.MapClaims, kv ...any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for k, v := range c {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(out, k)
		} else {
			out[k] = kv[i+1]
		}
	}
	return out
}

// sign signs c with method and key, naming kid when non-empty.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// rsaJWK and ecJWK build JWKs by hand (RFC 7518 §6), independently of the JWKS library.
func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}
}

func ecJWK(t *testing.T, kid string, pub *ecdsa.PublicKey) map[string]any {
	t.Helper()
	pt, err := pub.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
		"x": b64(pt[1:33]), "y": b64(pt[33:]),
	}
}

// jwksServer serves a JWK Set that tests can replace, and counts fetches.
type jwksServer struct {
	*httptest.Server
	mu     sync.Mutex
	keys   []map[string]any
	status int
	hits   atomic.Int64
}

func newJWKSServer(t *testing.T, keys ...map[string]any) *jwksServer {
	t.Helper()
	s := &jwksServer{keys: keys, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		status, body := s.status, map[string]any{"keys": s.keys}
		s.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "unavailable", status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(status int, keys ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.keys = status, keys
}

// seen is what the protected handler observed through auth.TokenInfoFromContext.
type seen struct {
	UserID     string
	Scopes     []string
	Expiration time.Time
	Extra      map[string]any
}

// serve puts v.Middleware in front of a handler that echoes the TokenInfo it finds.
func serve(t *testing.T, v *Verifier) *httptest.Server {
	t.Helper()
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := sdkauth.TokenInfoFromContext(r.Context())
		if info == nil {
			http.Error(w, "no TokenInfo in context", http.StatusTeapot)
			return
		}
		_ = json.NewEncoder(w).Encode(seen{info.UserID, info.Scopes, info.Expiration, info.Extra})
	})
	srv := httptest.NewServer(v.Middleware(inner))
	t.Cleanup(srv.Close)
	return srv
}

type response struct {
	status    int
	challenge map[string]string // params of the Bearer challenge; nil if none
	body      []byte
}

// get sends GET with the given Authorization header values (none when empty).
func get(t *testing.T, url string, authorization ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range authorization {
		req.Header.Add("Authorization", a)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := response{status: resp.StatusCode, body: body}
	if h := resp.Header.Values("WWW-Authenticate"); len(h) > 0 {
		chs, err := oauthex.ParseWWWAuthenticate(h)
		if err != nil {
			t.Fatalf("unparsable WWW-Authenticate %q: %v", h, err)
		}
		for _, c := range chs {
			if c.Scheme == "bearer" {
				out.challenge = c.Params
				if out.challenge == nil {
					out.challenge = map[string]string{}
				}
			}
		}
	}
	return out
}

func bearer(tok string) string { return "Bearer " + tok }

func newVerifier(t *testing.T, cfg Config) *Verifier {
	t.Helper()
	v, err := New(t.Context(), cfg, testLogger(t))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

// testLogger writes to the test's output, shown only for failing tests or with -v.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
