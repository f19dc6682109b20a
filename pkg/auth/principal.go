package auth

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Principal encodes a verified identity, the owner of the tasks it creates, as
//
//	<len(iss)>:<iss>|<len(sub)>:<sub>[|<len(tenant)>:<tenant>]
//
// with byte lengths in decimal; the tenant part is present only when tenant is non-empty.
// Each field's length says exactly where it ends, so the encoding is injective: different
// (iss, sub, tenant) triples never share a principal, whatever bytes they contain ("a|b"+"c"
// and "a"+"b|c" differ). The same subject at two issuers, or in two tenants, is two
// principals. A principal always starts with a digit, so it never equals a fixed name such as
// an anonymous placeholder.
func Principal(iss, sub, tenant string) string {
	var b strings.Builder
	b.Grow(len(iss) + len(sub) + len(tenant) + 16)
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(iss)
	b.WriteByte('|')
	field(sub)
	if tenant != "" {
		b.WriteByte('|')
		field(tenant)
	}
	return b.String()
}

// devClaims are the claims of a development token.
type devClaims struct {
	jwt.RegisteredClaims
	Scope string `json:"scope,omitempty"`
}

// MintDevToken signs an HS256 access token for local development and tests: issuer iss,
// audience aud, subject sub, issued now, valid for ttl, with the scopes as a space-separated
// "scope" claim. It is the counterpart of a Config with the same HS256Secret, Issuer and
// Audience; never use shared-secret tokens with a third-party issuer.
func MintDevToken(secret []byte, iss, aud, sub string, ttl time.Duration, scopes []string) (string, error) {
	switch {
	case len(secret) < MinHS256SecretBytes:
		return "", fmt.Errorf("auth: HS256 secret must be at least %d bytes", MinHS256SecretBytes)
	case iss == "" || aud == "" || sub == "":
		return "", errors.New("auth: a dev token needs an issuer, an audience and a subject")
	case ttl <= 0:
		return "", errors.New("auth: a dev token needs a positive ttl")
	}
	for _, s := range scopes {
		if !validScope(s) {
			return "", fmt.Errorf("auth: invalid scope %q", s)
		}
	}
	now := time.Now()
	claims := devClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    iss,
			Subject:   sub,
			Audience:  jwt.ClaimStrings{aud},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
		Scope: strings.Join(scopes, " "),
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("auth: sign dev token: %w", err)
	}
	return tok, nil
}
