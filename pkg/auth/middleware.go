package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// Fixed error descriptions of the challenges; token contents are never echoed.
const (
	descMissing      = "a bearer token is required"
	descMalformed    = "malformed Authorization header"
	descExpired      = "the access token expired"
	descInvalid      = "the access token is invalid"
	descInsufficient = "the access token lacks a required scope"
)

// handoffSlack pads the go-sdk middleware's own expiry check so that it can never reject a
// token this package has just accepted.
const handoffSlack = time.Minute

// verifiedKey carries the verified TokenInfo to the go-sdk middleware that stores it.
type verifiedKey struct{}

// Middleware requires a valid bearer token on every request before next runs:
//
//   - no credentials, or another scheme: 401 with `WWW-Authenticate: Bearer
//     resource_metadata="…"` (plus scope="…" when scopes are required; RFC 6750 §3.1 sends no
//     error code when no token was presented);
//   - a malformed header or an invalid, expired or not-yet-valid token: 401 with
//     `error="invalid_token"`, an error_description and resource_metadata;
//   - a valid token lacking a required scope: 403 with `error="insufficient_scope"` and the
//     required scope.
//
// On success the request context carries a go-sdk *auth.TokenInfo (read it with
// auth.TokenInfoFromContext; the MCP handler copies it into every request's RequestExtra)
// whose UserID is the [Principal].
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	// The go-sdk keeps its context key private, so the verified identity is handed to its own
	// middleware, which stores it where auth.TokenInfoFromContext and the MCP handler look.
	store := sdkauth.RequireBearerToken(
		func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
			if info, ok := ctx.Value(verifiedKey{}).(*sdkauth.TokenInfo); ok {
				return info, nil
			}
			return nil, sdkauth.ErrInvalidToken
		},
		&sdkauth.RequireBearerTokenOptions{ClockSkew: v.leeway + handoffSlack},
	)(next)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, present, ok := bearerToken(r.Header)
		switch {
		case !present:
			v.deny(w, http.StatusUnauthorized, "", descMissing)
			return
		case !ok:
			v.deny(w, http.StatusUnauthorized, "invalid_token", descMalformed)
			return
		}
		info, err := v.Verify(r.Context(), token)
		if err != nil {
			v.log.DebugContext(r.Context(), "auth: token rejected", "err", err)
			desc := descInvalid
			if errors.Is(err, jwt.ErrTokenExpired) {
				desc = descExpired
			}
			v.deny(w, http.StatusUnauthorized, "invalid_token", desc)
			return
		}
		for _, s := range v.scopes {
			if !slices.Contains(info.Scopes, s) {
				v.log.DebugContext(r.Context(), "auth: insufficient scope", "principal", info.UserID, "missing", s)
				v.deny(w, http.StatusForbidden, "insufficient_scope", descInsufficient)
				return
			}
		}
		store.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, info)))
	})
}

// bearerToken extracts the token of the Authorization header. present is false when the
// request carries no Bearer credentials at all (no header, or another scheme); ok is false
// when Bearer credentials are present but malformed (several headers, no token, extra
// fields, characters outside RFC 6750's b64token).
func bearerToken(h http.Header) (token string, present, ok bool) {
	values := h.Values("Authorization")
	if len(values) == 0 {
		return "", false, false
	}
	if len(values) > 1 {
		return "", true, false
	}
	fields := strings.Fields(values[0])
	if len(fields) == 0 {
		return "", false, false
	}
	if !strings.EqualFold(fields[0], "Bearer") {
		return "", false, false
	}
	if len(fields) != 2 || !isB64Token(fields[1]) {
		return "", true, false
	}
	return fields[1], true, true
}

// isB64Token reports whether s matches RFC 6750's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/':
		default:
			return false
		}
	}
	return true
}

// challenge builds the WWW-Authenticate value; code may be empty (no token presented).
func (v *Verifier) challenge(code, desc string) string {
	var params []string
	if code != "" {
		params = append(params, `error="`+code+`"`, `error_description="`+desc+`"`)
	}
	params = append(params, `resource_metadata="`+v.metadataURL+`"`)
	if len(v.scopes) > 0 {
		params = append(params, `scope="`+strings.Join(v.scopes, " ")+`"`)
	}
	return "Bearer " + strings.Join(params, ", ")
}

// deny writes a 401 or 403 with its challenge and a small JSON body.
func (v *Verifier) deny(w http.ResponseWriter, status int, code, desc string) {
	h := w.Header()
	h.Set("WWW-Authenticate", v.challenge(code, desc))
	h.Add("Access-Control-Expose-Headers", "WWW-Authenticate")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body := struct {
		Error       string `json:"error,omitempty"`
		Description string `json:"error_description"`
	}{code, desc}
	_ = json.NewEncoder(w).Encode(body) // the status is already sent; nothing else to do
}

// MetadataHandler serves this resource's OAuth 2.0 Protected Resource Metadata (RFC 9728):
// resource (the audience), authorization_servers, scopes_supported and
// bearer_methods_supported ["header"], with CORS open to any origin. It answers on whatever
// path it is mounted; mount it on every path of [Verifier.MetadataPaths].
func (v *Verifier) MetadataHandler() http.Handler {
	meta := v.metadata
	return sdkauth.ProtectedResourceMetadataHandler(&meta)
}

// MetadataPaths returns the paths on which [Verifier.MetadataHandler] should be mounted: the
// root /.well-known/oauth-protected-resource, the RFC 9728 path-inserted form for the
// audience (e.g. /.well-known/oauth-protected-resource/mcp), and the path of a configured
// metadata URL.
func (v *Verifier) MetadataPaths() []string {
	return slices.Clone(v.metadataPaths)
}
