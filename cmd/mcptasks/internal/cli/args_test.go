package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

const toolSchema = `{"type": "object", "properties": {
	"name": {"type": "string"},
	"count": {"type": "integer"},
	"ratio": {"type": "number"},
	"dry": {"type": "boolean"},
	"tags": {"type": "array", "items": {"type": "string"}},
	"opts": {"type": "object"},
	"maybe": {"type": ["integer", "null"]},
	"either": {"type": ["integer", "string"]},
	"color": {"enum": ["red", "green"]}
}, "required": ["name"]}`

// key=value pairs are typed by the tool's input schema; what the schema
// does not type is read as JSON, or else as a string.
func TestCLIArgs(t *testing.T) {
	in, err := decodeSchema(json.RawMessage(toolSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pairs []string
		json  string
		want  string // the arguments as JSON
	}{
		{[]string{"name=42"}, "", `{"name":"42"}`},
		{[]string{"name=true", "count=7", "ratio=0.5", "dry=yes"}, "", `{"count":7,"dry":true,"name":"true","ratio":0.5}`},
		{[]string{"tags=[\"a\",\"b\"]", "opts={\"x\":1}"}, "", `{"opts":{"x":1},"tags":["a","b"]}`},
		{[]string{"maybe=null", "either=3"}, "", `{"either":3,"maybe":null}`},
		{[]string{"either=three", "color=red"}, "", `{"color":"red","either":"three"}`},
		{[]string{"unknown=12", "other=hello", "list=[1]"}, "", `{"list":[1],"other":"hello","unknown":12}`},
		{[]string{"name:=\"quoted\"", "count:=8"}, "", `{"count":8,"name":"quoted"}`},
		{[]string{"name=x=y"}, "", `{"name":"x=y"}`},
		{[]string{"count=2"}, `{"name": "Ada", "count": 1, "big": 12345678901234567890}`, `{"big":12345678901234567890,"count":2,"name":"Ada"}`},
		{nil, "", `{}`},
	} {
		got, err := toolArgs(in, tc.json, tc.pairs)
		if err != nil {
			t.Errorf("%v %s: %v", tc.pairs, tc.json, err)
			continue
		}
		if b := compactJSON(got); b != tc.want {
			t.Errorf("%v %s: %s, want %s", tc.pairs, tc.json, b, tc.want)
		}
	}
	for _, tc := range []struct {
		pairs []string
		json  string
		want  string
	}{
		{[]string{"count=two"}, "", `count: "two" is not an integer`},
		{[]string{"ratio=x"}, "", `ratio: "x" is not a number`},
		{[]string{"dry=perhaps"}, "", `dry: "perhaps" is not a boolean`},
		{[]string{"tags=a,b"}, "", `tags: "a,b" is not a JSON array`},
		{[]string{"noequals"}, "", `"noequals" is not key=value`},
		{[]string{"=x"}, "", `"=x" is not key=value`},
		{[]string{"name:=bare"}, "", `name: "bare" is not JSON`},
		{nil, `[1]`, `--json:`},
		{nil, `{"a":1} {}`, `--json: text after`},
	} {
		_, err := toolArgs(in, tc.json, tc.pairs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %s: error %v, want %q", tc.pairs, tc.json, err, tc.want)
		}
	}
	// Without a schema every value is JSON if it can be, else a string.
	got, err := toolArgs(nil, "", []string{"n=1", "s=hi", "b=false"})
	if err != nil || compactJSON(got) != `{"b":false,"n":1,"s":"hi"}` {
		t.Errorf("without a schema: %s, %v", compactJSON(got), err)
	}
}

// Flags and arguments mix in any order; a word that starts with "-" but
// names no flag is an argument (task ids may start with "-"); "--" ends
// the flags.
func TestCLIFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		output  string
		detach  bool
		wantPos string
	}{
		{[]string{"greet", "name=Ada", "--output", "json", "x=1", "--", "--y=2"}, "json", false, "greet name=Ada x=1 --y=2"},
		{[]string{"-detach", "-Ab3_x", "--output=json", "-"}, "json", true, "-Ab3_x -"},
		{[]string{"--Uo3KC", "-detach=false", "-output", "text"}, "text", false, "--Uo3KC"},
		{[]string{"--", "--output", "json"}, "text", false, "--output json"},
	} {
		e, _, _ := testEnv("", false)
		fs := newFlagSet("x")
		out := fs.String("output", "text", "")
		detach := fs.Bool("detach", false, "")
		pos, err := e.parse(fs, "usage", tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if *out != tc.output || *detach != tc.detach || strings.Join(pos, " ") != tc.wantPos {
			t.Errorf("%q: output %q, detach %t, positional %q", tc.args, *out, *detach, pos)
		}
	}
	e, stdout, _ := testEnv("", false)
	fs := newFlagSet("x")
	fs.String("output", "text", "the format")
	if _, err := e.parse(fs, "Usage: x", []string{"a", "-h", "b"}); err == nil || !strings.Contains(stdout.String(), "Usage: x\n\nFlags:\n  -output string\n    \tthe format") {
		t.Errorf("-h: %v\n%s", err, stdout)
	}
}
