package cli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A requested schema becomes form fields (kinds, choices, defaults, what
// each takes), and a submitted form becomes the content of an accepted
// answer, typed as the schema says; a value it refuses names its field.
func TestFormFieldsAndContent(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"confirm":{"type":"boolean","description":"really?"},
		"copies":{"type":"integer","minimum":1,"default":1},
		"level":{"type":"string","enum":["low","high"],"enumNames":["Low","High"]},
		"tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]}},
		"note":{"type":"string","title":"Note"},
		"ratio":{"type":"number"}
	},"required":["confirm","level"]}`)
	fields, err := FormFields(schema)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, f := range fields {
		kinds[f.Name] = f.Kind
	}
	want := map[string]string{"confirm": "boolean", "copies": "integer", "level": "choice", "tags": "multi", "note": "string", "ratio": "number"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	if f := fields[1]; f.Default != "1" || !strings.Contains(f.Hint, "≥ 1") {
		t.Errorf("copies field %+v: want default 1 and its minimum in the hint", f)
	}
	if f := fields[2]; !f.Required || len(f.Choices) != 2 || f.Choices[1] != (FormChoice{"high", "High"}) {
		t.Errorf("level field %+v", f)
	}
	if f := fields[0]; f.Label != "confirm — really?" || strings.Contains(f.Hint, "y/n") {
		t.Errorf("confirm field %+v", f)
	}

	got, err := FormContent(schema, map[string][]string{"confirm": {"true"}, "copies": {""}, "level": {"high"}, "tags": {"a", "c"}, "ratio": {"0.5"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if string(b) != `{"confirm":true,"copies":1,"level":"high","ratio":0.5,"tags":["a","c"]}` {
		t.Errorf("content %s", b)
	}
	got, err = FormContent(schema, map[string][]string{"level": {"low"}})
	if err != nil || got["confirm"] != false {
		t.Errorf("an unchecked box: %v, %v; want confirm false", got, err)
	}
	for _, c := range []struct {
		form map[string][]string
		want string
	}{
		{map[string][]string{"level": {""}}, "level: a value is required"},
		{map[string][]string{"level": {"mid"}}, `level: "mid" is not one of the choices`},
		{map[string][]string{"level": {"low"}, "copies": {"0"}}, "copies: 0 is less than 1"},
		{map[string][]string{"level": {"low"}, "copies": {"1.5"}}, `copies: "1.5" is not an integer`},
		{map[string][]string{"level": {"low"}, "tags": {"z"}}, `tags: "z" is not one of the choices`},
	} {
		if _, err := FormContent(schema, c.form); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FormContent(%v) = %v, want %q", c.form, err, c.want)
		}
	}
}
