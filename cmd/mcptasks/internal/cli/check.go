package cli

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

// The checks a command makes before it sends anything, and the words it
// finds for what went wrong on the way: a command says what the user's
// command could not do, in the user's terms (the tool's arguments, the
// URL given), never in the protocol's (tools/list, HTTP 404).

// checkURL refuses a --url (or MCPTASKS_URL) that no request could reach:
// not an absolute http:// or https:// URL.
func (c *common) checkURL(cmd string) error {
	u, err := url.Parse(c.url)
	switch {
	case err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
		return nil
	case err == nil && u.Scheme != "" && u.Opaque == "" && u.Host != "":
		return local.Usagef("%s: --url %s: the scheme must be http or https", cmd, c.url)
	}
	if !strings.Contains(c.url, "://") {
		if v, err := url.Parse("http://" + c.url); err == nil && v.Host != "" {
			return local.Usagef("%s: --url %s has no scheme: did you mean http://%s?", cmd, c.url, c.url)
		}
	}
	return local.Usagef("%s: --url %q is not a URL such as %s", cmd, c.url, DefaultURL)
}

// explain rewords an error of a request to the server at the command's
// URL, for the command cmd: what could not be reached and what to try.
// Errors that are not about reaching the server are returned as they are.
func (c *common) explain(cmd string, err error) error {
	if err == nil {
		return nil
	}
	attempts := ""
	if i := strings.LastIndex(err.Error(), " (gave up after "); i >= 0 {
		attempts = err.Error()[i:]
	}
	var he *client.HTTPError
	var cv *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case errors.Is(err, http.ErrSchemeMismatch):
		return fmt.Errorf("%s: the server at %s speaks plain HTTP, not HTTPS: use --url %s", cmd, c.url, strings.Replace(c.url, "https://", "http://", 1))
	case errors.As(err, &cv):
		return fmt.Errorf("%s: the certificate of %s does not verify: %v", cmd, c.url, cv.Err)
	case errors.As(err, &he) && he.StatusCode == http.StatusNotFound:
		msg := fmt.Sprintf("%s: no MCP endpoint at %s (HTTP 404)", cmd, c.url)
		if u, perr := url.Parse(c.url); perr == nil && u.Path != "/mcp" {
			u.Path, u.RawQuery = "/mcp", ""
			msg += fmt.Sprintf(": mcptasks serves MCP at the path /mcp; try --url %s", u)
		}
		return errors.New(msg)
	case errors.As(err, &he) && he.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%s: %s needs a bearer token (HTTP 401): pass --token or set %s", cmd, c.url, EnvToken)
	case errors.As(err, &he) && he.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: %s refused the token (HTTP 403): %v", cmd, c.url, err)
	case errors.As(err, &op) && op.Op == "dial":
		msg := fmt.Sprintf("%s: cannot connect to %s: %s%s", cmd, c.url, strings.TrimPrefix(op.Err.Error(), "connect: "), attempts)
		if c.url == DefaultURL {
			msg += "; is the local server running? (mcptasks serve)"
		}
		return errors.New(msg)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return fmt.Errorf("%s: cannot connect to %s: %v%s", cmd, c.url, dns, attempts)
	}
	return err
}

// checkObject checks value, an object given for the schema s, and returns
// what is wrong with it, one sentence per problem, naming each property as
// "<what> <name>" (what: "argument" or "field").
func checkObject(s *schema, value map[string]any, what string) []string {
	if g, err := roundTrip(value); err == nil {
		value, _ = g.(map[string]any)
	}
	var problems []string
	for _, name := range s.Required {
		if _, ok := value[name]; !ok {
			problems = append(problems, fmt.Sprintf("missing %s %s%s", what, name, kindNote(s.property(name))))
		}
	}
	for _, name := range sortedKeys(value) {
		ps := s.property(name)
		if ps == nil {
			if s.closed() {
				problems = append(problems, fmt.Sprintf("unknown %s %s (%s)", what, name, s.names(what)))
			}
			continue
		}
		if p := checkValue(ps, value[name]); p != "" {
			problems = append(problems, fmt.Sprintf("%s %s: %s", what, name, p))
		}
	}
	return problems
}

// checkValue says what is wrong with v for the schema ps: its type or, for
// an enum, its value ("" when nothing is).
func checkValue(ps *schema, v any) string {
	if v == nil && ps.nullable() {
		return ""
	}
	if kinds := ps.kinds(); len(kinds) > 0 && !allows(kinds, v) {
		return fmt.Sprintf("%s is %s, want %s", clean(compactJSON(v), false), article(jsonKind(v)), kindsText(kinds))
	}
	if choices := ps.choices(); len(choices) > 0 {
		for _, c := range choices {
			if compactJSON(c.Value) == compactJSON(v) {
				return ""
			}
		}
		vals := make([]string, len(choices))
		for i, c := range choices {
			vals[i] = compactJSON(c.Value)
		}
		return fmt.Sprintf("%s is not one of %s", clean(compactJSON(v), false), strings.Join(vals, ", "))
	}
	return ""
}

// validateFull checks value against the whole JSON Schema raw (whatever
// checkObject does not read: ranges, patterns, nested objects), when raw
// resolves; it returns the validator's message.
func validateFull(raw any, value map[string]any) string {
	b, err := json.Marshal(raw)
	if err != nil {
		return ""
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return ""
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return ""
	}
	vb, err := json.Marshal(value)
	if err != nil {
		return ""
	}
	var plain map[string]any
	if err := json.Unmarshal(vb, &plain); err != nil {
		return ""
	}
	if err := rs.Validate(plain); err != nil {
		return strings.TrimPrefix(err.Error(), "validating root: ")
	}
	return ""
}

// usageLine is how a tool is called with key=value arguments: required
// ones bare, optional ones in brackets.
func usageLine(tool string, s *schema) string {
	req, opt := []string{"mcptasks call " + tool}, []string{}
	for _, p := range s.Properties {
		a := p.Name + "=" + placeholder(p.Schema)
		if s.required(p.Name) {
			req = append(req, a)
		} else {
			opt = append(opt, "["+a+"]")
		}
	}
	return strings.Join(append(req, opt...), " ")
}

// shape is the JSON an object of schema s takes, each property's value a
// placeholder of its type: {"publish":<boolean>,"note":<string>}.
func shape(s *schema) string {
	parts := make([]string, 0, len(s.Properties))
	for _, p := range s.Properties {
		v := placeholder(p.Schema)
		if !s.required(p.Name) {
			v = strings.TrimSuffix(v, ">") + ", optional>"
		}
		parts = append(parts, fmt.Sprintf("%q:%s", p.Name, v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// placeholder stands for a value of ps: <integer>, <"a"|"b">.
func placeholder(ps *schema) string {
	if choices := ps.choices(); len(choices) > 0 {
		vals := make([]string, len(choices))
		for i, c := range choices {
			vals[i] = compactJSON(c.Value)
		}
		return "<" + strings.Join(vals, "|") + ">"
	}
	if k := ps.kinds(); len(k) > 0 {
		return "<" + strings.Join(k, "|") + ">"
	}
	return "<value>"
}

func kindNote(ps *schema) string {
	if ps == nil {
		return ""
	}
	if k := ps.kinds(); len(k) > 0 {
		return " (" + strings.Join(k, " or ") + ")"
	}
	return ""
}

func kindsText(kinds []string) string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = article(k)
	}
	return strings.Join(out, " or ")
}

// article is kind with its indefinite article: "an integer", "a string".
func article(kind string) string {
	if kind == "null" {
		return "null"
	}
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// closed reports whether s allows no property it does not name
// (additionalProperties: false).
func (s *schema) closed() bool {
	return len(s.AdditionalProperties) > 0 && strings.TrimSpace(string(s.AdditionalProperties)) == "false"
}

// names lists the properties of s for a message: "it takes a, b".
func (s *schema) names(what string) string {
	if len(s.Properties) == 0 {
		return "there are no " + what + "s"
	}
	names := make([]string, len(s.Properties))
	for i, p := range s.Properties {
		names[i] = p.Name
	}
	return "the " + what + "s are " + strings.Join(names, ", ")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
