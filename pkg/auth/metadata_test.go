package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

func TestMetadataHandler(t *testing.T) {
	cases := []struct {
		name      string
		cfg       Config
		wantJSON  map[string]any
		wantURL   string   // resource_metadata in challenges
		wantPaths []string // MetadataPaths
	}{
		{
			name: "defaults from issuer and audience",
			cfg: Config{Issuer: testIssuer, Audience: testAudience, HS256Secret: testSecret,
				RequiredScopes: []string{"tasks:read", "tasks:write"}},
			wantJSON: map[string]any{
				"resource":                 testAudience,
				"authorization_servers":    []any{testIssuer},
				"scopes_supported":         []any{"tasks:read", "tasks:write"},
				"bearer_methods_supported": []any{"header"},
			},
			wantURL:   testMetaURL,
			wantPaths: []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"},
		},
		{
			name: "explicit servers and metadata URL, root audience, non-URL issuer",
			cfg: Config{Issuer: "mcptasks-dev", Audience: "https://tasks.example.com", HS256Secret: testSecret,
				AuthorizationServers: []string{"https://as.example", "https://as2.example/tenant"},
				ResourceMetadataURL:  "https://tasks.example.com/meta/prm.json"},
			wantJSON: map[string]any{
				"resource":                 "https://tasks.example.com",
				"authorization_servers":    []any{"https://as.example", "https://as2.example/tenant"},
				"bearer_methods_supported": []any{"header"},
			},
			wantURL:   "https://tasks.example.com/meta/prm.json",
			wantPaths: []string{"/.well-known/oauth-protected-resource", "/meta/prm.json"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(t, tc.cfg)
			srv := httptest.NewServer(v.MetadataHandler())
			t.Cleanup(srv.Close)

			resp, err := http.Get(srv.URL + WellKnownPath)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Error("metadata not readable cross-origin")
			}
			var got map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.wantJSON) {
				t.Errorf("metadata = %v\nwant       %v", got, tc.wantJSON)
			}

			// The go-sdk client's own checks (resource matches, safe server URLs) pass.
			if _, err := oauthex.GetProtectedResourceMetadata(t.Context(), srv.URL+WellKnownPath, tc.cfg.Audience, http.DefaultClient); err != nil {
				t.Errorf("go-sdk client rejects the metadata: %v", err)
			}

			if got := v.MetadataPaths(); !slices.Equal(got, tc.wantPaths) {
				t.Errorf("MetadataPaths = %q, want %q", got, tc.wantPaths)
			}
			if r := get(t, serve(t, v).URL); r.challenge["resource_metadata"] != tc.wantURL {
				t.Errorf("challenge resource_metadata = %q, want %q", r.challenge["resource_metadata"], tc.wantURL)
			}
		})
	}
}
