package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPrincipalReachesMCPHandler runs the middleware in front of the go-sdk's stateless
// streamable handler: a tool sees the principal in its request's RequestExtra.TokenInfo,
// which is where pkg/tasks reads the task owner from.
func TestPrincipalReachesMCPHandler(t *testing.T) {
	v := newVerifier(t, Config{Issuer: testIssuer, Audience: testAudience, HS256Secret: testSecret,
		TenantClaim: "org_id"})
	srv := mcp.NewServer(&mcp.Implementation{Name: "authtest", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "returns the caller's principal"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			who := "<no TokenInfo>"
			if ti := req.Extra.TokenInfo; ti != nil {
				who = ti.UserID
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", v.Middleware(mcpHandler))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	c := mcptest.NewClient(strings.TrimPrefix(hs.URL, "http://"), false)

	call := func(token string) *mcptest.Response {
		return c.Call(t, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}},
			"Authorization", bearer(token))
	}
	for _, tc := range []struct{ sub, tenant string }{{"alice", "acme"}, {"bob", "acme"}, {"alice", "globex"}} {
		tok := sign(t, jwt.SigningMethodHS256, testSecret, "", with(claims(tc.sub), "org_id", tc.tenant))
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		r := call(tok)
		if r.HTTP != http.StatusOK {
			t.Fatalf("HTTP %d", r.HTTP)
		}
		r.Decode(t, &res)
		want := Principal(testIssuer, tc.sub, tc.tenant)
		if len(res.Content) != 1 || res.Content[0].Text != want {
			t.Errorf("tool saw %+v, want principal %q", res.Content, want)
		}
	}
}
