package auth

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults and bounds of the configuration.
const (
	// DefaultLeeway is the clock skew tolerated on exp, nbf and iat when Config.Leeway is 0.
	DefaultLeeway = 30 * time.Second
	// MaxLeeway is the largest accepted Config.Leeway.
	MaxLeeway = 5 * time.Minute
	// DefaultJWKSMinRefreshInterval is the default Config.JWKSMinRefreshInterval.
	DefaultJWKSMinRefreshInterval = 5 * time.Second
	// MinHS256SecretBytes is the shortest accepted HS256 secret (RFC 7518 §3.2: a key at least
	// as long as the hash output).
	MinHS256SecretBytes = 32
	// WellKnownPath is the root well-known URI path of RFC 9728 Protected Resource Metadata.
	WellKnownPath = "/.well-known/oauth-protected-resource"
)

// Environment variable names read by [ConfigFromEnv]; each maps to the Config field of the
// same meaning.
const (
	// EnvIssuer is Config.Issuer: the exact "iss" of accepted tokens.
	EnvIssuer = "MCPTASKS_AUTH_ISSUER"
	// EnvAudience is Config.Audience: the canonical URI of the MCP endpoint, required in "aud".
	EnvAudience = "MCPTASKS_AUTH_AUDIENCE"
	// EnvHS256Secret is Config.HS256Secret: a shared secret of at least 32 bytes.
	EnvHS256Secret = "MCPTASKS_AUTH_HS256_SECRET"
	// EnvPublicKey is Config.PublicKeyPEM: one PEM public key; literal "\n" sequences are
	// read as newlines when the value has no real newline.
	EnvPublicKey = "MCPTASKS_AUTH_PUBLIC_KEY"
	// EnvJWKSURL is Config.JWKSURL: the issuer's JWK Set URL.
	EnvJWKSURL = "MCPTASKS_AUTH_JWKS_URL"
	// EnvAlgorithms is Config.Algorithms, comma- or space-separated.
	EnvAlgorithms = "MCPTASKS_AUTH_ALGORITHMS"
	// EnvTenantClaim is Config.TenantClaim: the name of a claim that becomes part of the
	// principal.
	EnvTenantClaim = "MCPTASKS_AUTH_TENANT_CLAIM"
	// EnvScopes is Config.RequiredScopes, comma- or space-separated.
	EnvScopes = "MCPTASKS_AUTH_SCOPES"
	// EnvLeeway is Config.Leeway as a Go duration ("30s"); unset or 0 means the default.
	EnvLeeway = "MCPTASKS_AUTH_LEEWAY"
	// EnvResourceMetadataURL is Config.ResourceMetadataURL.
	EnvResourceMetadataURL = "MCPTASKS_AUTH_RESOURCE_METADATA_URL"
	// EnvAuthorizationServers is Config.AuthorizationServers, comma- or space-separated.
	EnvAuthorizationServers = "MCPTASKS_AUTH_AUTHORIZATION_SERVERS"
)

// envNames lists every variable whose presence means auth is configured.
func envNames() []string {
	return []string{
		EnvIssuer, EnvAudience, EnvHS256Secret, EnvPublicKey, EnvJWKSURL, EnvAlgorithms,
		EnvTenantClaim, EnvScopes, EnvLeeway, EnvResourceMetadataURL, EnvAuthorizationServers,
	}
}

// Config describes how bearer tokens are verified. Exactly one key source must be set:
// HS256Secret, PublicKeyPEM or JWKSURL.
type Config struct {
	// Issuer is the exact "iss" every token must carry. Required.
	Issuer string
	// Audience is this resource server's identifier, the canonical absolute URI of the MCP
	// endpoint (e.g. https://mcp.example.com/mcp, RFC 8707). Tokens must list it in "aud".
	// It is also the "resource" of the protected-resource metadata. Required.
	Audience string

	// HS256Secret is a shared HMAC secret of at least MinHS256SecretBytes bytes (local
	// development and first-party issuers).
	HS256Secret []byte
	// PublicKeyPEM is one PEM-encoded public key (PKIX "PUBLIC KEY", PKCS#1 "RSA PUBLIC KEY"
	// or a "CERTIFICATE"): RSA, ECDSA or Ed25519.
	PublicKeyPEM []byte
	// JWKSURL is the issuer's JWK Set (https, or http on a loopback host). Keys are selected
	// by "kid", cached, refreshed hourly and on an unknown "kid".
	JWKSURL string

	// Algorithms restricts the accepted "alg" values. Empty means the default of the key
	// source: HS256 for a secret; RS256, ES256/ES384/ES512 or EdDSA for a PEM key, by key
	// type; RS256 and ES256 for a JWKS. HMAC algorithms are accepted only with a secret and
	// asymmetric ones only with public keys; "none" never.
	Algorithms []string
	// TenantClaim, if set, names a claim that must be a non-empty string and becomes part
	// of the principal.
	TenantClaim string
	// RequiredScopes must all be granted by the token ("scope" or "scp"); a token lacking one
	// gets 403 insufficient_scope. They are also advertised as scopes_supported.
	RequiredScopes []string
	// Leeway is the clock skew tolerated on exp, nbf and iat: 0 means DefaultLeeway, at most
	// MaxLeeway.
	Leeway time.Duration

	// ResourceMetadataURL is the absolute URL of the protected-resource metadata, sent in
	// every WWW-Authenticate challenge. Empty means the RFC 9728 path-inserted URL derived
	// from Audience (https://mcp.example.com/.well-known/oauth-protected-resource/mcp).
	ResourceMetadataURL string
	// AuthorizationServers are the issuer identifiers of the authorization servers listed in
	// the metadata. Empty means [Issuer] when the issuer is an http(s) URL.
	AuthorizationServers []string

	// JWKSMinRefreshInterval is the minimum time between two JWKS refreshes triggered by an
	// unknown "kid" (0 means DefaultJWKSMinRefreshInterval). A request that would have to wait
	// longer than a few seconds for the next refresh is rejected instead.
	JWKSMinRefreshInterval time.Duration
}

// ConfigFromEnv reads the MCPTASKS_AUTH_* variables through getenv (os.Getenv in production).
// The bool reports whether auth is configured at all, that is whether any of the variables is
// non-empty; when it is, the configuration must be complete and valid, or an error is returned
// (a half-configured server must not fall back to running anonymously).
func ConfigFromEnv(getenv func(string) string) (Config, bool, error) {
	configured := false
	for _, name := range envNames() {
		if strings.TrimSpace(getenv(name)) != "" {
			configured = true
			break
		}
	}
	if !configured {
		return Config{}, false, nil
	}
	c := Config{
		Issuer:               strings.TrimSpace(getenv(EnvIssuer)),
		Audience:             strings.TrimSpace(getenv(EnvAudience)),
		JWKSURL:              strings.TrimSpace(getenv(EnvJWKSURL)),
		Algorithms:           splitList(getenv(EnvAlgorithms)),
		TenantClaim:          strings.TrimSpace(getenv(EnvTenantClaim)),
		RequiredScopes:       splitList(getenv(EnvScopes)),
		ResourceMetadataURL:  strings.TrimSpace(getenv(EnvResourceMetadataURL)),
		AuthorizationServers: splitList(getenv(EnvAuthorizationServers)),
	}
	if s := getenv(EnvHS256Secret); s != "" {
		c.HS256Secret = []byte(s)
	}
	if pemText := strings.TrimSpace(getenv(EnvPublicKey)); pemText != "" {
		// Many dashboards cannot hold a multi-line value: accept "\n" escapes.
		if !strings.Contains(pemText, "\n") {
			pemText = strings.ReplaceAll(pemText, `\n`, "\n")
		}
		c.PublicKeyPEM = []byte(pemText)
	}
	if s := strings.TrimSpace(getenv(EnvLeeway)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return Config{}, true, fmt.Errorf("auth: %s: %w", EnvLeeway, err)
		}
		c.Leeway = d
	}
	if _, err := c.normalize(); err != nil {
		return Config{}, true, err
	}
	return c, true, nil
}

// splitList splits a comma- or whitespace-separated list, dropping empty items.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
}

// keySource identifies which verification key the configuration uses.
type keySource int

const (
	sourceSecret keySource = iota + 1
	sourcePEM
	sourceJWKS
)

// normalized is a validated Config with its defaults applied.
type normalized struct {
	Config
	source keySource
}

// normalize validates c and applies defaults, except for the algorithms of a PEM key, which
// depend on the parsed key and are settled by [New].
func (c Config) normalize() (normalized, error) {
	n := normalized{Config: c}
	if c.Issuer == "" {
		return n, errors.New("auth: issuer is required")
	}
	aud, err := url.Parse(c.Audience)
	if err != nil || c.Audience == "" || !aud.IsAbs() || aud.Host == "" || aud.Fragment != "" ||
		(aud.Scheme != "https" && aud.Scheme != "http") {
		return n, fmt.Errorf("auth: audience %q must be the absolute http(s) URI of the MCP endpoint", c.Audience)
	}

	sources := 0
	if len(c.HS256Secret) > 0 {
		sources++
		n.source = sourceSecret
		if len(c.HS256Secret) < MinHS256SecretBytes {
			return n, fmt.Errorf("auth: HS256 secret must be at least %d bytes", MinHS256SecretBytes)
		}
	}
	if len(c.PublicKeyPEM) > 0 {
		sources++
		n.source = sourcePEM
	}
	if c.JWKSURL != "" {
		sources++
		n.source = sourceJWKS
		if err := checkHTTPSOrLoopback(c.JWKSURL); err != nil {
			return n, fmt.Errorf("auth: JWKS URL: %w", err)
		}
	}
	if sources != 1 {
		return n, errors.New("auth: configure exactly one of an HS256 secret, a public key PEM or a JWKS URL")
	}

	n.Algorithms = slices.Clone(c.Algorithms)
	for _, alg := range n.Algorithms {
		fam, ok := algFamily(alg)
		if !ok {
			return n, fmt.Errorf("auth: algorithm %q is not supported", alg)
		}
		if (fam == famHMAC) != (n.source == sourceSecret) {
			return n, fmt.Errorf("auth: algorithm %q cannot be used with this key source (HMAC needs a secret, asymmetric algorithms need public keys)", alg)
		}
	}
	if len(n.Algorithms) == 0 {
		switch n.source {
		case sourceSecret:
			n.Algorithms = []string{"HS256"}
		case sourceJWKS:
			n.Algorithms = []string{"RS256", "ES256"}
		}
	}

	switch {
	case c.Leeway == 0:
		n.Leeway = DefaultLeeway
	case c.Leeway < 0 || c.Leeway > MaxLeeway:
		return n, fmt.Errorf("auth: leeway %v must be between 0 and %v", c.Leeway, MaxLeeway)
	}
	switch {
	case c.JWKSMinRefreshInterval == 0:
		n.JWKSMinRefreshInterval = DefaultJWKSMinRefreshInterval
	case c.JWKSMinRefreshInterval < 0:
		return n, errors.New("auth: JWKS minimum refresh interval must not be negative")
	}

	for _, s := range c.RequiredScopes {
		if !validScope(s) {
			return n, fmt.Errorf("auth: invalid scope %q", s)
		}
	}

	if n.ResourceMetadataURL == "" {
		n.ResourceMetadataURL = pathInsertedMetadataURL(aud)
	}
	if u, err := url.Parse(n.ResourceMetadataURL); err != nil || !u.IsAbs() || u.Host == "" ||
		(u.Scheme != "https" && u.Scheme != "http") || !quotable(n.ResourceMetadataURL) {
		return n, fmt.Errorf("auth: resource metadata URL %q must be an absolute http(s) URL", n.ResourceMetadataURL)
	}

	if len(n.AuthorizationServers) == 0 {
		if u, err := url.Parse(c.Issuer); err == nil && u.Host != "" && (u.Scheme == "https" || u.Scheme == "http") {
			n.AuthorizationServers = []string{c.Issuer}
		}
	} else {
		n.AuthorizationServers = slices.Clone(n.AuthorizationServers)
		for _, s := range n.AuthorizationServers {
			if err := checkHTTPSOrLoopback(s); err != nil {
				return n, fmt.Errorf("auth: authorization server %q: %w", s, err)
			}
		}
	}
	return n, nil
}

// pathInsertedMetadataURL builds the RFC 9728 §3.1 metadata URL of a resource: the well-known
// path is inserted between the host and the resource's path.
func pathInsertedMetadataURL(resource *url.URL) string {
	u := url.URL{Scheme: resource.Scheme, Host: resource.Host}
	u.Path = WellKnownPath + strings.TrimSuffix(resource.EscapedPath(), "/")
	return u.String()
}

// checkHTTPSOrLoopback accepts an https URL, or an http URL on a loopback host.
func checkHTTPSOrLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if u.Host == "" {
		return errors.New("not an absolute URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
		return errors.New("http is allowed only on a loopback host; use https")
	default:
		return fmt.Errorf("scheme %q is not https", u.Scheme)
	}
}

// validScope reports whether s is a scope-token of RFC 6749 §3.3 (which also makes it safe
// inside a quoted-string).
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// quotable reports whether s can go inside an HTTP quoted-string without escaping.
func quotable(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
