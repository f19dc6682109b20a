package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigFromEnv(t *testing.T) {
	k := testKeys()
	rsaPEM := string(pemOf(t, &k.rsaA.PublicKey))
	escapedPEM := strings.ReplaceAll(strings.TrimSpace(rsaPEM), "\n", `\n`)

	cases := []struct {
		name           string
		env            map[string]string
		wantConfigured bool
		wantErr        string // substring; "" means success
		check          func(t *testing.T, c Config)
	}{
		{name: "nothing set: anonymous", env: map[string]string{"OTHER": "x"}},
		{name: "blank values: anonymous", env: map[string]string{EnvIssuer: "  ", EnvAudience: ""}},
		{name: "HS256 complete", wantConfigured: true, env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret),
			EnvScopes: "tasks:read, tasks:write", EnvLeeway: "10s", EnvTenantClaim: "org_id",
			EnvAuthorizationServers: "https://as1.example https://as2.example",
			EnvResourceMetadataURL:  "https://mcp.example.com/.well-known/oauth-protected-resource",
		}, check: func(t *testing.T, c Config) {
			if c.Issuer != testIssuer || c.Audience != testAudience || string(c.HS256Secret) != string(testSecret) {
				t.Errorf("identity fields: %+v", c)
			}
			if !slices.Equal(c.RequiredScopes, []string{"tasks:read", "tasks:write"}) {
				t.Errorf("RequiredScopes = %q", c.RequiredScopes)
			}
			if c.Leeway != 10*time.Second || c.TenantClaim != "org_id" {
				t.Errorf("Leeway %v TenantClaim %q", c.Leeway, c.TenantClaim)
			}
			if !slices.Equal(c.AuthorizationServers, []string{"https://as1.example", "https://as2.example"}) {
				t.Errorf("AuthorizationServers = %q", c.AuthorizationServers)
			}
			if c.ResourceMetadataURL != "https://mcp.example.com/.well-known/oauth-protected-resource" {
				t.Errorf("ResourceMetadataURL = %q", c.ResourceMetadataURL)
			}
		}},
		{name: "PEM with escaped newlines", wantConfigured: true, env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvPublicKey: escapedPEM, EnvAlgorithms: "RS256,PS256",
		}, check: func(t *testing.T, c Config) {
			if strings.TrimSpace(string(c.PublicKeyPEM)) != strings.TrimSpace(rsaPEM) {
				t.Errorf("PEM not restored:\n%s", c.PublicKeyPEM)
			}
			if !slices.Equal(c.Algorithms, []string{"RS256", "PS256"}) {
				t.Errorf("Algorithms = %q", c.Algorithms)
			}
			if _, err := New(t.Context(), c, testLogger(t)); err != nil {
				t.Errorf("New: %v", err)
			}
		}},
		{name: "JWKS", wantConfigured: true, env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvJWKSURL: "https://issuer.example/.well-known/jwks.json",
		}, check: func(t *testing.T, c Config) {
			if c.JWKSURL != "https://issuer.example/.well-known/jwks.json" {
				t.Errorf("JWKSURL = %q", c.JWKSURL)
			}
		}},
		{name: "half configured: no issuer", wantConfigured: true, wantErr: "issuer",
			env: map[string]string{EnvAudience: testAudience, EnvHS256Secret: string(testSecret)}},
		{name: "half configured: only a scope", wantConfigured: true, wantErr: "issuer",
			env: map[string]string{EnvScopes: "tasks:read"}},
		{name: "no key source", wantConfigured: true, wantErr: "exactly one",
			env: map[string]string{EnvIssuer: testIssuer, EnvAudience: testAudience}},
		{name: "two key sources", wantConfigured: true, wantErr: "exactly one", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret), EnvJWKSURL: "https://issuer.example/jwks"}},
		{name: "short secret", wantConfigured: true, wantErr: "at least 32 bytes", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: "short"}},
		{name: "audience not a URL", wantConfigured: true, wantErr: "audience", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: "my-api", EnvHS256Secret: string(testSecret)}},
		{name: "alg none", wantConfigured: true, wantErr: "not supported", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret), EnvAlgorithms: "none"}},
		{name: "HMAC with JWKS", wantConfigured: true, wantErr: "cannot be used", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvJWKSURL: "https://issuer.example/jwks", EnvAlgorithms: "RS256,HS256"}},
		{name: "RS256 with a secret", wantConfigured: true, wantErr: "cannot be used", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret), EnvAlgorithms: "RS256"}},
		{name: "plain http JWKS", wantConfigured: true, wantErr: "https", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvJWKSURL: "http://issuer.example/jwks"}},
		{name: "bad leeway", wantConfigured: true, wantErr: EnvLeeway, env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret), EnvLeeway: "soon"}},
		{name: "huge leeway", wantConfigured: true, wantErr: "leeway", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret), EnvLeeway: "1h"}},
		{name: "scope with a quote", wantConfigured: true, wantErr: "scope", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret), EnvScopes: `a"b`}},
		{name: "metadata URL with a quote", wantConfigured: true, wantErr: "resource metadata", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret),
			EnvResourceMetadataURL: `https://x.example/"`}},
		{name: "authorization server over http", wantConfigured: true, wantErr: "authorization server", env: map[string]string{
			EnvIssuer: testIssuer, EnvAudience: testAudience, EnvHS256Secret: string(testSecret),
			EnvAuthorizationServers: "http://as.example"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, configured, err := ConfigFromEnv(env(tc.env))
			if configured != tc.wantConfigured {
				t.Errorf("configured = %v, want %v", configured, tc.wantConfigured)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestNewRejectsBadKeys(t *testing.T) {
	k := testKeys()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsaA.PublicKey)})
	base := Config{Issuer: testIssuer, Audience: testAudience}
	cases := []struct {
		name    string
		pem     []byte
		algs    []string
		wantErr string
	}{
		{"not PEM", []byte("hello"), nil, "no PEM block"},
		{"private key block", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), nil, "unsupported PEM block"},
		{"two blocks", append(pemOf(t, &k.rsaA.PublicKey), pemOf(t, &k.ecA.PublicKey)...), nil, "exactly one"},
		{"short RSA key", pemOf(t, &small.PublicKey), nil, "shorter than"},
		{"ES256 with an RSA key", pemOf(t, &k.rsaA.PublicKey), []string{"ES256"}, "does not match"},
		{"RS256 with an EC key", pemOf(t, &k.ecA.PublicKey), []string{"RS256"}, "does not match"},
		{"ES384 with a P-256 key", pemOf(t, &k.ecA.PublicKey), []string{"ES384"}, "does not match"},
		{"PKCS#1 RSA key", pkcs1, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			c.PublicKeyPEM, c.Algorithms = tc.pem, tc.algs
			_, err := New(t.Context(), c, testLogger(t))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}
