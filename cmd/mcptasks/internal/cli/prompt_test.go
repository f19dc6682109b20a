package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcptasks/mcptasks/pkg/client"
)

const formSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "title": "Name", "minLength": 2},
	"email": {"type": "string", "format": "email"},
	"age": {"type": "integer", "minimum": 0, "maximum": 150},
	"score": {"type": "number"},
	"subscribe": {"type": "boolean", "default": false},
	"plan": {"type": "string", "enum": ["free", "pro"], "enumNames": ["Free", "Professional"]},
	"size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]},
	"tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1},
	"note": {"type": "string"}
}, "required": ["name", "email", "age", "plan", "size", "tags"]}`

func elicitRequest(schema string) *client.InputRequest {
	params := `{"mode": "form", "message": "Sign up\nplease \u001b[31m", "requestedSchema": ` + schema + `}`
	return &client.InputRequest{Key: "signup", Method: "elicitation/create", Params: json.RawMessage(params)}
}

// The fields are asked in the schema's order; a value the schema refuses
// is asked again; an empty optional field is left out and a default is
// taken.
func TestCLIAskForm(t *testing.T) {
	answers := strings.Join([]string{
		"",             // action: answer
		"", "A", "Ada", // name: required, too short, fine
		"ada", "ada@example.com", // email
		"x", "200", "36", // age: not an integer, out of range, fine
		"2.5",      // score
		"",         // subscribe: its default
		"3", "pro", // plan: no such number, by value
		"large",       // size: by label
		"", "a, c, a", // tags: required, then two (deduplicated)
		"", // note: optional, left out
	}, "\n") + "\n"
	e, _, errb := testEnv(answers, false)
	v, err := e.asker(nil).input(t.Context(), elicitRequest(formSchema))
	if err != nil {
		t.Fatal(err)
	}
	got := compactJSON(v)
	want := `{"action":"accept","content":{"age":36,"email":"ada@example.com","name":"Ada","plan":"pro","score":2.5,"size":"l","subscribe":false,"tags":["a","c"]}}`
	if got != want {
		t.Errorf("answer %s\nwant   %s", got, want)
	}
	out := errb.String()
	for _, s := range []string{
		"? Sign up\nplease  [31m  (input request signup)", // escape sequences are defused
		"  Name: ", "✗ a value is required", "✗ at least 2 characters",
		"  email [email]: ", `✗ "ada" is not an email address`,
		"  age [integer 0..150]: ", `✗ "x" is not an integer`, "✗ 200 is more than 150",
		"  score [number, optional]: ",
		"  subscribe [y/n, default false]: ",
		"    1) Free\n    2) Professional\n  choose [1-2]: ", `✗ "3" is not one of the choices`,
		"    2) Large\n",
		"  choose (numbers or values, comma-separated) [1-3]: ", "✗ a value is required",
		"  note [optional]: ",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("prompts lack %q:\n%s", s, out)
		}
	}
}

// Decline and cancel send the action alone; a stdin that ends is an error.
func TestCLIAskActions(t *testing.T) {
	for in, want := range map[string]string{
		"d\n":          `{"action":"decline"}`,
		"cancel\n":     `{"action":"cancel"}`,
		"what\nno\n":   `{"action":"decline"}`,
		"\n":           `{"action":"accept"}`,
		"accept\nhi\n": `{"action":"accept","content":{"x":"hi"}}`,
	} {
		schema := `{"type": "object"}`
		if strings.HasPrefix(in, "accept") {
			schema = `{"type": "object", "properties": {"x": {"type": "string"}}}`
		}
		e, _, _ := testEnv(in, false)
		v, err := e.asker(nil).input(t.Context(), elicitRequest(schema))
		if err != nil || compactJSON(v) != want {
			t.Errorf("%q: %s, %v; want %s", in, compactJSON(v), err, want)
		}
	}
	e, _, _ := testEnv("", false)
	if _, err := e.asker(nil).input(t.Context(), elicitRequest(formSchema)); err != errNoInput {
		t.Errorf("closed stdin: %v, want errNoInput", err)
	}
	// A request the command line cannot answer says how to answer it.
	_, err := e.asker(nil).input(t.Context(), &client.InputRequest{Key: "g", Method: "sampling/createMessage"})
	if err == nil || !strings.Contains(err.Error(), "mcptasks task answer") {
		t.Errorf("sampling: %v", err)
	}
}

// The answers of task answer: JSON, an action, or a one-field form's value.
func TestCLIAnswerValue(t *testing.T) {
	one := elicitRequest(`{"type": "object", "properties": {"confirm": {"type": "boolean"}}}`)
	two := elicitRequest(formSchema)
	for _, tc := range []struct {
		req  *client.InputRequest
		s    string
		raw  bool
		want string
	}{
		{one, "yes", false, `{"action":"accept","content":{"confirm":true}}`},
		{one, `{"action":"accept","content":{"confirm":false}}`, false, `{"action":"accept","content":{"confirm":false}}`},
		{two, "decline", false, `{"action":"decline"}`},
		{two, `"text"`, true, `"text"`},
	} {
		v, err := answerValue(tc.req, tc.s, tc.raw)
		if err != nil || compactJSON(v) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.s, compactJSON(v), err, tc.want)
		}
	}
	for _, s := range []string{"maybe", "Ada"} {
		req := one
		if s == "Ada" {
			req = two
		}
		if _, err := answerValue(req, s, false); err == nil {
			t.Errorf("%s: no error", s)
		}
	}
}
