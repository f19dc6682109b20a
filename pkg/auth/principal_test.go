package auth

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// decodePrincipal inverts Principal; a successful round trip for every input proves that the
// encoding is injective.
func decodePrincipal(t *testing.T, p string) (iss, sub, tenant string) {
	t.Helper()
	field := func() string {
		i := strings.IndexByte(p, ':')
		if i <= 0 {
			t.Fatalf("no length prefix in %q", p)
		}
		n, err := strconv.Atoi(p[:i])
		if err != nil || n < 0 || i+1+n > len(p) {
			t.Fatalf("bad length prefix in %q", p)
		}
		f := p[i+1 : i+1+n]
		p = p[i+1+n:]
		return f
	}
	sep := func() bool {
		if p == "" {
			return false
		}
		if p[0] != '|' {
			t.Fatalf("missing separator before %q", p)
		}
		p = p[1:]
		return true
	}
	iss = field()
	if !sep() {
		t.Fatal("missing subject")
	}
	sub = field()
	if sep() {
		tenant = field()
		if tenant == "" {
			t.Fatal("empty tenant encoded")
		}
	}
	if p != "" {
		t.Fatalf("trailing bytes %q", p)
	}
	return iss, sub, tenant
}

func TestPrincipalDistinct(t *testing.T) {
	type id struct{ iss, sub, tenant string }
	tricky := []id{
		{"a|b", "c", ""}, {"a", "b|c", ""}, {"a", "b", "c"}, {"a", "b|1:c", ""}, {"a|1:b", "c", ""},
		{"1:a", "b", ""}, {"", "1:a|1:b", ""}, {"a", "", "b"}, {"", "a", ""}, {"a", "", ""},
		{"https://issuer.example", "alice", ""}, {"https://issuer.example/", "alice", ""},
		{"https://issuer.example", "alice", "acme"}, {"https://issuer.example", "alice|4:acme", ""},
		{"https://issuer.example", "Alice", ""}, {"https://other.example", "alice", ""},
		{"x:", "y", ""}, {"x", ":y", ""}, {"10:aaaaaaaaaa", "", ""}, {"", "", "z"},
		{"\x00", "", ""}, {"", "\x00", ""}, {"\xff\xfe", "é", ""}, {"é", "\xff\xfe", ""},
	}
	// Random identities over a tiny alphabet full of separator-like bytes collide often if
	// the encoding is ambiguous.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("a1:|\\\"\x00")
	randStr := func() string {
		b := make([]byte, rng.IntN(5))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		tricky = append(tricky, id{randStr(), randStr(), randStr()})
	}

	owner := map[string]id{}
	for _, in := range tricky {
		p := Principal(in.iss, in.sub, in.tenant)
		if p == "" || p == "anonymous" || p[0] < '0' || p[0] > '9' {
			t.Fatalf("Principal(%q) = %q: must be non-empty and start with a digit", in, p)
		}
		if prev, ok := owner[p]; ok && prev != in {
			t.Fatalf("collision: %q and %q both give %q", prev, in, p)
		}
		owner[p] = in
		iss, sub, tenant := decodePrincipal(t, p)
		if (id{iss, sub, tenant}) != in {
			t.Fatalf("round trip of %q gave %q", in, id{iss, sub, tenant})
		}
	}
}

func FuzzPrincipal(f *testing.F) {
	f.Add("a|b", "c", "", "a", "b|c", "")
	f.Add("a", "b", "c", "a", "b|1:c", "")
	f.Add("1:a", "", "", "", "1:a", "")
	f.Fuzz(func(t *testing.T, iss1, sub1, ten1, iss2, sub2, ten2 string) {
		same := iss1 == iss2 && sub1 == sub2 && ten1 == ten2
		if (Principal(iss1, sub1, ten1) == Principal(iss2, sub2, ten2)) != same {
			t.Fatalf("(%q,%q,%q) vs (%q,%q,%q): equal principals iff equal identities violated",
				iss1, sub1, ten1, iss2, sub2, ten2)
		}
	})
}

func TestMintDevToken(t *testing.T) {
	v := newVerifier(t, Config{
		Issuer: "mcptasks-dev", Audience: "http://localhost:8080/mcp", HS256Secret: testSecret,
		RequiredScopes: []string{"tasks"},
	})
	tok, err := MintDevToken(testSecret, "mcptasks-dev", "http://localhost:8080/mcp", "alice", time.Hour, []string{"tasks", "extra"})
	if err != nil {
		t.Fatal(err)
	}
	r := get(t, serve(t, v).URL, bearer(tok))
	if r.status != http.StatusOK {
		t.Fatalf("dev token rejected: %d %v", r.status, r.challenge)
	}
	var s seen
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	if s.UserID != Principal("mcptasks-dev", "alice", "") || strings.Join(s.Scopes, " ") != "tasks extra" {
		t.Errorf("seen %+v", s)
	}
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
	if err != nil || parsed.Method.Alg() != "HS256" {
		t.Errorf("alg = %v (%v), want HS256", parsed.Method, err)
	}

	// A token minted for another audience is refused by the same server.
	other, err := MintDevToken(testSecret, "mcptasks-dev", "http://localhost:9999/mcp", "alice", time.Hour, []string{"tasks"})
	if err != nil {
		t.Fatal(err)
	}
	if r := get(t, serve(t, v).URL, bearer(other)); r.status != http.StatusUnauthorized {
		t.Errorf("other audience: status %d, want 401", r.status)
	}

	bad := []struct {
		name   string
		secret []byte
		sub    string
		ttl    time.Duration
		scopes []string
	}{
		{"short secret", []byte("short"), "alice", time.Hour, nil},
		{"no subject", testSecret, "", time.Hour, nil},
		{"no ttl", testSecret, "alice", 0, nil},
		{"bad scope", testSecret, "alice", time.Hour, []string{"a b"}},
	}
	for _, tc := range bad {
		if _, err := MintDevToken(tc.secret, "iss", "https://a.example", tc.sub, tc.ttl, tc.scopes); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
