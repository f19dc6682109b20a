package tasks

import (
	"encoding/json"
	"strings"
	"testing"
)

// checkAnswer checks an answer by the method of the request it answers,
// and stores what it checked: a declined elicitation without its content,
// an accepted one with its schema's defaults.
func TestCheckAnswer(t *testing.T) {
	form := `{"method":"elicitation/create","params":{"mode":"form","message":"?","requestedSchema":{"type":"object",` +
		`"properties":{"n":{"type":"integer","default":3},"color":{"type":"string","enum":["red","blue"]}},"required":["color"],"additionalProperties":false}}}`
	for _, c := range []struct {
		name, req, ans string
		want           string // the stored answer, or "!" and the refusal's words
	}{
		{"accept", form, `{"action":"accept","content":{"color":"red"}}`, `{"action":"accept","content":{"color":"red","n":3}}`},
		{"unknown fields dropped", form, `{"action":"accept","content":{"color":"red","x":1}}`, `{"action":"accept","content":{"color":"red","n":3}}`},
		{"decline drops content", form, `{"action":"decline","content":{"junk":1}}`, `{"action":"decline"}`},
		{"cancel", form, `{"action":"cancel"}`, `{"action":"cancel"}`},
		{"enum", form, `{"action":"accept","content":{"color":"green"}}`, `!content.color must be one of "red", "blue", got the string "green"`},
		{"integer", form, `{"action":"accept","content":{"color":"red","n":1.5}}`, `!content.n must be an integer, got the number 1.5`},
		{"accept without content", form, `{"action":"accept"}`, `!missing required content.color (one of "red", "blue")`},
		{"url mode", `{"method":"elicitation/create","params":{"mode":"url","url":"https://x"}}`, `{"action":"accept","content":{"x":1}}`, `{"action":"accept"}`},
		{"sampling", `{"method":"sampling/createMessage","params":{}}`, `{"role":"assistant","model":"m","content":{"type":"text","text":"hi"}}`, `{"role":"assistant","model":"m","content":{"type":"text","text":"hi"}}`},
		{"sampling without model", `{"method":"sampling/createMessage","params":{}}`, `{"role":"assistant","content":[]}`, `!model must be a string, got nothing`},
		{"roots", `{"method":"roots/list"}`, `{"roots":[{"uri":"file:///a"}]}`, `{"roots":[{"uri":"file:///a"}]}`},
		{"roots without uri", `{"method":"roots/list"}`, `{"roots":[{"name":"a"}]}`, `!roots[0].uri must be a string`},
		{"other method", `{"method":"x/y"}`, `[]`, `!the answer must be a JSON object, got an array`},
		{"deep", `{"method":"x/y"}`, strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40), `!nested deeper than 32`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := checkAnswer("k", json.RawMessage(c.req), json.RawMessage(c.ans))
			if refusal, ok := strings.CutPrefix(c.want, "!"); ok {
				if err == nil || !strings.Contains(err.Error(), refusal) {
					t.Fatalf("checkAnswer = %s, %v; want a refusal saying %q", got, err, refusal)
				}
				return
			}
			if err != nil || !jsonSame(got, c.want) {
				t.Fatalf("checkAnswer = %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func jsonSame(a json.RawMessage, b string) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal([]byte(b), &y) == nil && mustJSON(x) == mustJSON(y)
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
