package dashboard

import (
	"encoding/json"
	"net/url"
	"testing"
)

// The answer a form sends: an elicitation's action and, accepted, its
// typed content; a URL-mode elicitation's action alone; another request's
// JSON as typed (and refused when it is not JSON).
func TestFormAnswer(t *testing.T) {
	form := json.RawMessage(`{"method":"elicitation/create","params":{"message":"Go?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"integer"}},"required":["n"]}}}`)
	byURL := json.RawMessage(`{"method":"elicitation/create","params":{"mode":"url","url":"https://example.com/auth","message":"Sign in"}}`)
	roots := json.RawMessage(`{"method":"roots/list","params":{}}`)
	for _, c := range []struct {
		req  json.RawMessage
		form url.Values
		want string
	}{
		{form, url.Values{"action": {"accept"}, "f.ok": {"true"}, "f.n": {"2"}}, `{"action":"accept","content":{"n":2,"ok":true}}`},
		{form, url.Values{"action": {"decline"}, "f.n": {"x"}}, `{"action":"decline"}`},
		{form, url.Values{"action": {"accept"}, "f.n": {"x"}}, `error: n: "x" is not an integer`},
		{form, url.Values{"f.n": {"1"}}, `error: no action chosen (accept, decline or cancel)`},
		{byURL, url.Values{"action": {"accept"}}, `{"action":"accept"}`},
		{roots, url.Values{"raw": {` {"roots": [ {"uri": "file:///tmp"} ]} `}}, `{"roots":[{"uri":"file:///tmp"}]}`},
		{roots, url.Values{"raw": {`{"roots":`}}, `error: the answer is not valid JSON`},
	} {
		got, err := formAnswer(inputFormOf("k", c.req, false), c.req, c.form)
		s := string(got)
		if err != nil {
			s = "error: " + err.Error()
		}
		if s != c.want {
			t.Errorf("formAnswer(%s, %v) = %s, want %s", c.req, c.form, s, c.want)
		}
	}
}
