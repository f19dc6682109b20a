// Package auth verifies OAuth 2.0 bearer tokens (JWTs) in front of the MCP endpoint and serves
// the OAuth 2.0 Protected Resource Metadata (RFC 9728) that tells clients where to get them.
//
// # Trust model
//
// The server is an OAuth resource server. It trusts exactly one token issuer (Config.Issuer)
// and accepts a token only if all of these hold:
//
//   - it is signed with one of the explicitly allowed algorithms (never "none", and never an
//     HMAC algorithm when public keys are configured, so an attacker cannot sign an HS256
//     token with the public key as the secret);
//   - the signature verifies with the configured key: an HS256 shared secret, a single RS/ES/
//     EdDSA public key, or a key from a JWKS document selected by the token's "kid";
//   - "iss" equals Config.Issuer, "aud" contains Config.Audience (the canonical URI of this
//     MCP endpoint, RFC 8707), "exp" is present and not past, "nbf"/"iat" are not in the
//     future (all with a small leeway), and "sub" is a non-empty string;
//   - the tenant claim, when one is configured, is a non-empty string;
//   - every required scope is granted ("scope" or "scp" claim), otherwise the answer is 403.
//
// The verified identity is the principal: issuer plus subject, plus the tenant when a tenant
// claim is configured (see [Principal]; the encoding is injective, so two different identities
// never share a principal). The middleware stores it as the UserID of a go-sdk
// [github.com/modelcontextprotocol/go-sdk/auth.TokenInfo] in the request context, where the
// MCP handler picks it up; every task is bound to the principal that created it, and a task
// owned by another principal is indistinguishable from an unknown one.
//
// Without auth configured (no MCPTASKS_AUTH_* variable set), the server is meant for local
// development only: it runs anonymously, every caller shares one anonymous principal, and a
// task id (at least 128 random bits from crypto/rand) is the only capability that guards a
// task. No principal produced by this package can equal the anonymous one.
package auth
