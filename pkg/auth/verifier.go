package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"
)

// Limits of the JWKS client and of presented tokens.
const (
	// maxTokenBytes bounds a bearer token; larger ones are rejected unparsed.
	maxTokenBytes = 16 << 10
	// maxJWKSBytes bounds a JWKS response body.
	maxJWKSBytes = 1 << 20
	// jwksHTTPTimeout bounds the initial and the hourly JWKS fetch.
	jwksHTTPTimeout = 5 * time.Second
	// jwksRefreshInterval is the background refresh period of the JWKS cache.
	jwksRefreshInterval = time.Hour
	// jwksUnknownKIDWait bounds how long a request with an unknown kid waits for the refresh
	// rate limiter, and the refresh itself; a request that would wait longer is rejected.
	jwksUnknownKIDWait = 3 * time.Second
	// minRSABits is the smallest RSA modulus accepted for a configured PEM key.
	minRSABits = 2048
)

// Verification failures that jwt/v5 does not report itself.
var (
	errMissingSubject = errors.New("sub claim is missing or empty")
	errMissingTenant  = errors.New("tenant claim is missing or not a non-empty string")
	errTokenSize      = errors.New("token is empty or too large")
)

// family is a class of signing algorithms that share one kind of key.
type family int

const (
	famHMAC family = iota + 1
	famRSA
	famECDSA
	famEdDSA
)

// algFamily returns the key family of a supported JWS algorithm.
func algFamily(alg string) (family, bool) {
	switch alg {
	case "HS256", "HS384", "HS512":
		return famHMAC, true
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return famRSA, true
	case "ES256", "ES384", "ES512":
		return famECDSA, true
	case "EdDSA":
		return famEdDSA, true
	}
	return 0, false
}

// Verifier checks bearer tokens against a [Config]. It is safe for concurrent use; create one
// per process and share it.
type Verifier struct {
	parser        *jwt.Parser
	keyfunc       func(ctx context.Context) jwt.Keyfunc
	tenantClaim   string
	scopes        []string
	leeway        time.Duration
	metadataURL   string
	metadata      oauthex.ProtectedResourceMetadata
	metadataPaths []string
	log           *slog.Logger
}

// New builds a Verifier from cfg. With a JWKS URL it fetches the key set once (a failure is
// logged, not returned: the next token with an unknown kid retries) and refreshes it in the
// background until ctx is done. A nil logger means slog.Default().
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Verifier, error) {
	if logger == nil {
		logger = slog.Default()
	}
	n, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	v := &Verifier{
		tenantClaim: n.TenantClaim,
		scopes:      n.RequiredScopes,
		leeway:      n.Leeway,
		metadataURL: n.ResourceMetadataURL,
		log:         logger,
	}

	switch n.source {
	case sourceSecret:
		secret := bytes.Clone(n.HS256Secret)
		v.keyfunc = func(context.Context) jwt.Keyfunc {
			return func(*jwt.Token) (any, error) { return secret, nil }
		}
	case sourcePEM:
		key, fam, defaultAlg, err := parsePublicKey(n.PublicKeyPEM)
		if err != nil {
			return nil, err
		}
		for _, alg := range n.Algorithms {
			// An ECDSA key verifies only the algorithm of its curve.
			if f, _ := algFamily(alg); f != fam || (fam == famECDSA && alg != defaultAlg) {
				return nil, fmt.Errorf("auth: algorithm %q does not match the configured public key", alg)
			}
		}
		if len(n.Algorithms) == 0 {
			n.Algorithms = []string{defaultAlg}
		}
		v.keyfunc = func(context.Context) jwt.Keyfunc {
			return func(*jwt.Token) (any, error) { return key, nil }
		}
	case sourceJWKS:
		kf, err := newJWKS(ctx, n, logger)
		if err != nil {
			return nil, err
		}
		v.keyfunc = kf.KeyfuncCtx
	}

	v.parser = jwt.NewParser(
		jwt.WithValidMethods(n.Algorithms),
		jwt.WithIssuer(n.Issuer),
		jwt.WithAudience(n.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(n.Leeway),
	)

	v.metadata = oauthex.ProtectedResourceMetadata{
		Resource:               n.Audience,
		AuthorizationServers:   n.AuthorizationServers,
		ScopesSupported:        n.RequiredScopes,
		BearerMethodsSupported: []string{"header"},
	}
	v.metadataPaths = metadataPaths(n.Audience, n.ResourceMetadataURL)
	if len(n.AuthorizationServers) == 0 {
		logger.WarnContext(ctx, "auth: no authorization server to advertise in the protected-resource metadata; set "+EnvAuthorizationServers)
	}
	logger.InfoContext(ctx, "auth: bearer tokens required",
		"issuer", n.Issuer, "audience", n.Audience, "algorithms", n.Algorithms,
		"resource_metadata", n.ResourceMetadataURL)
	return v, nil
}

// Verify checks one bearer token and returns the identity it carries: UserID is the
// [Principal], Scopes the granted scopes, Expiration the "exp" claim, and Extra holds "iss",
// "sub" and, with a tenant claim, "tenant". Every failure wraps the go-sdk's
// auth.ErrInvalidToken. Scopes are not checked here (see [Verifier.Middleware]).
func (v *Verifier) Verify(ctx context.Context, token string) (*sdkauth.TokenInfo, error) {
	if token == "" || len(token) > maxTokenBytes {
		return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, errTokenSize)
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, v.keyfunc(ctx)); err != nil {
		return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, err)
	}
	sub, err := claims.GetSubject()
	if err != nil || sub == "" {
		return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, errMissingSubject)
	}
	iss, err := claims.GetIssuer()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, err)
	}
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, jwt.ErrTokenRequiredClaimMissing)
	}
	extra := map[string]any{"iss": iss, "sub": sub}
	var tenant string
	if v.tenantClaim != "" {
		t, ok := claims[v.tenantClaim].(string)
		if !ok || t == "" {
			return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, errMissingTenant)
		}
		tenant = t
		extra["tenant"] = t
	}
	return &sdkauth.TokenInfo{
		UserID:     Principal(iss, sub, tenant),
		Scopes:     grantedScopes(claims),
		Expiration: exp.Time,
		Extra:      extra,
	}, nil
}

// grantedScopes reads the "scope" claim (RFC 9068: space-separated string) and the "scp"
// claim (string or array, as some issuers emit).
func grantedScopes(claims jwt.MapClaims) []string {
	var out []string
	for _, name := range []string{"scope", "scp"} {
		switch s := claims[name].(type) {
		case string:
			out = append(out, strings.Fields(s)...)
		case []any:
			for _, item := range s {
				if str, ok := item.(string); ok && str != "" {
					out = append(out, str)
				}
			}
		}
	}
	return out
}

// parsePublicKey decodes one PEM public key and returns it with its algorithm family and
// default algorithm.
func parsePublicKey(data []byte) (crypto.PublicKey, family, string, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, 0, "", errors.New("auth: public key: no PEM block found")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, 0, "", errors.New("auth: public key: expected exactly one PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		key, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		cert, err = x509.ParseCertificate(block.Bytes)
		if err == nil {
			key = cert.PublicKey
		}
	default:
		return nil, 0, "", fmt.Errorf("auth: public key: unsupported PEM block %q", block.Type)
	}
	if err != nil {
		return nil, 0, "", fmt.Errorf("auth: public key: %w", err)
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return nil, 0, "", fmt.Errorf("auth: public key: RSA key of %d bits is shorter than %d", k.N.BitLen(), minRSABits)
		}
		return k, famRSA, "RS256", nil
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return k, famECDSA, "ES256", nil
		case elliptic.P384():
			return k, famECDSA, "ES384", nil
		case elliptic.P521():
			return k, famECDSA, "ES512", nil
		}
		return nil, 0, "", errors.New("auth: public key: unsupported elliptic curve")
	case ed25519.PublicKey:
		return k, famEdDSA, "EdDSA", nil
	}
	return nil, 0, "", fmt.Errorf("auth: public key: unsupported key type %T", key)
}

// newJWKS builds the JWKS-backed key function: keys by kid from a cache refreshed hourly and,
// rate-limited to one per n.JWKSMinRefreshInterval, whenever a token names an unknown kid
// (keyfunc's default waits up to a minute for that; this waits at most jwksUnknownKIDWait).
func newJWKS(ctx context.Context, n normalized, logger *slog.Logger) (keyfunc.Keyfunc, error) {
	override := keyfunc.Override{
		Client:            jwksClient(),
		HTTPTimeout:       jwksHTTPTimeout,
		RateLimitWaitMax:  jwksUnknownKIDWait,
		RefreshInterval:   jwksRefreshInterval,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(n.JWKSMinRefreshInterval), 1),
		RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
			return func(ctx context.Context, err error) {
				logger.WarnContext(ctx, "auth: JWKS refresh failed", "url", u, "err", err)
			}
		},
	}
	base, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{n.JWKSURL}, override)
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS %s: %w", n.JWKSURL, err)
	}
	// Same storage, but keys marked for encryption ("use":"enc") never verify a signature.
	kf, err := keyfunc.New(keyfunc.Options{
		Ctx:          ctx,
		Storage:      base.Storage(),
		UseWhitelist: []jwkset.USE{jwkset.UseSig, ""},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS %s: %w", n.JWKSURL, err)
	}
	return kf, nil
}

// jwksClient is the HTTP client of the JWKS cache: bounded bodies, no redirect to plain http.
func jwksClient() *http.Client {
	return &http.Client{
		Transport: limitTransport{base: http.DefaultTransport, max: maxJWKSBytes},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return checkHTTPSOrLoopback(req.URL.String())
		},
	}
}

// limitTransport fails reading a response body longer than max bytes.
type limitTransport struct {
	base http.RoundTripper
	max  int64
}

// RoundTrip implements http.RoundTripper.
func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, r: io.LimitReader(resp.Body, t.max+1), max: t.max}
	return resp, nil
}

// limitedBody is a response body that errors once more than max bytes were read.
type limitedBody struct {
	io.ReadCloser
	r   io.Reader
	n   int64
	max int64
}

// Read implements io.Reader.
func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.n > b.max {
		return n, fmt.Errorf("auth: JWKS response larger than %d bytes", b.max)
	}
	return n, err
}

// metadataPaths lists the request paths on which the metadata should be served: the root
// well-known path, the RFC 9728 path-inserted one for the audience, and the path of the
// configured metadata URL.
func metadataPaths(audience, metadataURL string) []string {
	paths := []string{WellKnownPath}
	add := func(p string) {
		for _, q := range paths {
			if q == p {
				return
			}
		}
		paths = append(paths, p)
	}
	if u, err := url.Parse(audience); err == nil {
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			add(WellKnownPath + p)
		}
	}
	if u, err := url.Parse(metadataURL); err == nil && u.Path != "" {
		add(u.Path)
	}
	return paths
}
