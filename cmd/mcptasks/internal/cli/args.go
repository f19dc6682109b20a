package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// parseObject decodes s as a JSON object.
func parseObject(s string) (map[string]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	if dec.More() {
		return nil, fmt.Errorf("text after the JSON object")
	}
	return m, nil
}

// parseJSON decodes s as one JSON value (numbers kept exact).
func parseJSON(s string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// splitPair splits "key=value" or "key:=json"; raw reports the second form.
func splitPair(arg string) (key, value string, raw bool, err error) {
	if strings.HasPrefix(arg, "-") {
		return "", "", false, fmt.Errorf("unknown flag %s", arg)
	}
	i := strings.IndexByte(arg, '=')
	if i <= 0 {
		return "", "", false, fmt.Errorf("%q is not key=value", arg)
	}
	key, value = arg[:i], arg[i+1:]
	if k, ok := strings.CutSuffix(key, ":"); ok && k != "" {
		return k, value, true, nil
	}
	return key, value, false, nil
}

// toolArgs builds the arguments of a tools/call: the JSON object of --json
// (if any), then each key=value of pairs on top of it, typed by the tool's
// input schema in (nil if unknown). key:=value always reads the value as
// JSON.
func toolArgs(in *schema, jsonArg string, pairs []string) (map[string]any, error) {
	args := map[string]any{}
	if jsonArg != "" {
		m, err := parseObject(jsonArg)
		if err != nil {
			return nil, fmt.Errorf("--json: %v", err)
		}
		args = m
	}
	for _, p := range pairs {
		key, value, raw, err := splitPair(p)
		if err != nil {
			return nil, err
		}
		var ps *schema
		if in != nil {
			ps = in.property(key)
		}
		v, err := typedValue(ps, value, raw)
		if err != nil {
			return nil, fmt.Errorf("argument %s: %v", key, err)
		}
		args[key] = v
	}
	return args, nil
}

// typedValue reads the command-line value s for a property of schema ps
// (nil if unknown): a string property takes s as it is; a number, integer
// or boolean one parses it; anything else (an array, an object, a property
// the schema does not name) reads s as JSON, or takes it as a string if it
// is not JSON.
func typedValue(ps *schema, s string, raw bool) (any, error) {
	if raw {
		v, ok := parseJSON(s)
		if !ok {
			return nil, fmt.Errorf("%q is not JSON", s)
		}
		return v, nil
	}
	var kinds []string
	if ps != nil {
		kinds = ps.kinds()
		if ps.nullable() && s == "null" {
			return nil, nil
		}
	}
	if len(kinds) == 1 {
		return scalar(kinds[0], s)
	}
	if v, ok := parseJSON(s); ok && (len(kinds) == 0 || allows(kinds, v)) {
		return v, nil
	}
	if len(kinds) == 0 || slices.Contains(kinds, "string") {
		return s, nil
	}
	return nil, fmt.Errorf("%q is not %s", s, kindsText(kinds))
}

// allows reports whether a value of one of the JSON types kinds may be v
// (an integer is a number too).
func allows(kinds []string, v any) bool {
	k := jsonKind(v)
	return slices.Contains(kinds, k) || k == "integer" && slices.Contains(kinds, "number")
}

// scalar parses s as a value of the JSON type kind.
func scalar(kind, s string) (any, error) {
	switch kind {
	case "string":
		return s, nil
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", s)
		}
		return n, nil
	case "number":
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case "boolean":
		b, ok := parseBool(s)
		if !ok {
			return nil, fmt.Errorf("%q is not a boolean (true or false)", s)
		}
		return b, nil
	}
	v, ok := parseJSON(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a JSON %s", s, kind)
	}
	if k := jsonKind(v); k != kind && !(kind == "number" && k == "integer") {
		return nil, fmt.Errorf("%q is not a JSON %s", s, kind)
	}
	return v, nil
}

// parseBool reads the usual spellings of yes and no.
func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "t", "yes", "y", "1", "on":
		return true, true
	case "false", "f", "no", "n", "0", "off":
		return false, true
	}
	return false, false
}

// compactJSON is v as one line of JSON.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(b.String())
}
