package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Answers to input requests are checked before anything of them is stored,
// on every path that takes one (tasks/update, offers, the MRTR
// inputResponses of an inline call, the 2025-11-25 elicitation answer, the
// async-jobs answer tool), against the request they answer: an invalid
// answer is refused with a message that names the field and what was
// expected, and the task keeps waiting for a valid one. The checks, by the
// request's method:
//
//   - elicitation/create: an object whose action is "accept", "decline"
//     or "cancel"; an accepted form answer's content is an object valid
//     against the request's requestedSchema, with the validator that
//     checks tool arguments (defaults applied; fields a closed form does
//     not have dropped). Content of a declined or cancelled answer, or of
//     a URL-mode one, is dropped.
//   - sampling/createMessage: an object with a role, a model and content.
//   - roots/list: an object whose roots is an array of objects with a uri.
//   - anything else: an object.
//
// An answer nested deeper than maxAnswerDepth is refused whatever it
// answers.

// maxAnswerDepth bounds the nesting of an answer: elicitation content is
// flat, and no result a client gives needs more.
const maxAnswerDepth = 32

// answerError is an answer that its request refuses: what is wrong, for
// the client (no Go type names), and the path of the offending field.
type answerError struct {
	key string
	msg string
}

func (e *answerError) Error() string {
	return fmt.Sprintf("invalid answer to input request %q: %s", e.key, e.msg)
}

// rpc is the -32602 error of a refused answer: data names the input key.
func (e *answerError) rpc() *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"inputKey": e.key, "reason": e.msg})
	return &jsonrpc.Error{Code: CodeInvalidParams, Message: e.Error(), Data: data}
}

// checkAnswers checks the responses whose keys requests holds (key ->
// stored request) and returns them as they are to be stored; responses to
// keys it does not hold are left out (the store would ignore them). The
// first invalid one is the error, and nothing is returned.
func checkAnswers(requests, responses map[string]json.RawMessage) (map[string]json.RawMessage, *answerError) {
	out := make(map[string]json.RawMessage, len(responses))
	for _, k := range slices.Sorted(maps.Keys(responses)) {
		req, ok := requests[k]
		if !ok {
			continue
		}
		v, err := checkAnswer(k, req, responses[k])
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// checkAnswer checks response, the answer to the input request key (req,
// as stored: {"method": ..., "params": ...}), and returns it as it is to
// be stored.
func checkAnswer(key string, req, response json.RawMessage) (json.RawMessage, *answerError) {
	bad := func(format string, args ...any) (json.RawMessage, *answerError) {
		return nil, &answerError{key: key, msg: fmt.Sprintf(format, args...)}
	}
	if depth(response) > maxAnswerDepth {
		return bad("the answer is nested deeper than %d levels", maxAnswerDepth)
	}
	var ans map[string]json.RawMessage
	if err := json.Unmarshal(response, &ans); err != nil || ans == nil {
		return bad("the answer must be a JSON object, got %s", describe(response))
	}
	var r struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(req, &r) // stored by the engine: its own encoding
	switch r.Method {
	case "elicitation/create":
		return checkElicitation(key, r.Params, ans)
	case "sampling/createMessage":
		for _, f := range []string{"role", "model"} {
			if !isString(ans[f]) {
				return bad("%s must be a string, got %s", f, describe(ans[f]))
			}
		}
		if c := ans["content"]; len(c) == 0 || (c[0] != '{' && c[0] != '[') {
			return bad("content must be an object or an array of content blocks, got %s", describe(c))
		}
	case "roots/list":
		var roots []map[string]json.RawMessage
		if err := json.Unmarshal(ans["roots"], &roots); err != nil || ans["roots"] == nil {
			return bad("roots must be an array of objects, got %s", describe(ans["roots"]))
		}
		for i, root := range roots {
			if !isString(root["uri"]) {
				return bad("roots[%d].uri must be a string, got %s", i, describe(root["uri"]))
			}
		}
	}
	return response, nil
}

// checkElicitation checks an answer to an elicitation/create request with
// params.
func checkElicitation(key string, params json.RawMessage, ans map[string]json.RawMessage) (json.RawMessage, *answerError) {
	bad := func(format string, args ...any) (json.RawMessage, *answerError) {
		return nil, &answerError{key: key, msg: fmt.Sprintf(format, args...)}
	}
	var action string
	if raw, ok := ans["action"]; !ok || json.Unmarshal(raw, &action) != nil {
		return bad(`action must be "accept", "decline" or "cancel", got %s`, describe(ans["action"]))
	}
	out := map[string]json.RawMessage{"action": ans["action"]}
	if m, ok := ans["_meta"]; ok {
		if len(m) == 0 || m[0] != '{' {
			return bad("_meta must be an object, got %s", describe(m))
		}
		out["_meta"] = m
	}
	var p struct {
		Mode            string          `json:"mode"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}
	_ = json.Unmarshal(params, &p)
	switch action {
	case "decline", "cancel":
		return encodeAnswer(out)
	case "accept":
	default:
		return bad(`action must be "accept", "decline" or "cancel", got %s`, describe(ans["action"]))
	}
	if p.Mode == "url" {
		return encodeAnswer(out)
	}
	content, given := ans["content"]
	if !given || string(content) == "null" {
		// Checked as an empty form (its required fields are missing), and
		// stored without content, as given.
		content, given = json.RawMessage("{}"), false
	}
	if content[0] != '{' {
		return bad("content must be an object, got %s", describe(content))
	}
	var v map[string]any
	if err := json.Unmarshal(content, &v); err != nil {
		return bad("content must be an object, got %s", describe(content))
	}
	if len(p.RequestedSchema) > 0 {
		var schema jsonschema.Schema
		if err := json.Unmarshal(p.RequestedSchema, &schema); err != nil {
			return bad("the request's schema cannot be read") // the tool's own schema: the server's fault
		}
		// Fields the form does not have are dropped, not refused: clients
		// (the conformance suite among them) send one content for several
		// forms, and elicitation schemas are flat, so nothing the form
		// asks for can hide in them.
		if schema.AdditionalProperties != nil && isFalseSchema(schema.AdditionalProperties) {
			for k := range v {
				if _, ok := schema.Properties[k]; !ok {
					delete(v, k)
				}
			}
			given = true
		}
		if msg := validateValue(&schema, &v, "content"); msg != "" {
			return bad("%s", msg)
		}
	}
	if given {
		b, err := json.Marshal(v) // with the schema's defaults applied
		if err != nil {
			return bad("content cannot be encoded")
		}
		out["content"] = b
	}
	return encodeAnswer(out)
}

func encodeAnswer(m map[string]json.RawMessage) (json.RawMessage, *answerError) {
	b, _ := json.Marshal(m) // raw values the decoder produced: cannot fail
	return b, nil
}

// validateValue applies schema's defaults to *v and validates it, with the
// validator of tool arguments. It returns "" when *v is valid, else what is
// wrong, worded for a person or a model, fields named under root (such as
// "content" or "arguments"): "content.confirm must be a boolean, got the
// string \"yes\"".
func validateValue(schema *jsonschema.Schema, v *map[string]any, root string) string {
	resolved, err := schema.Resolve(nil)
	if err != nil {
		return "the schema cannot be resolved: " + err.Error()
	}
	return validateResolved(schema, resolved, v, root)
}

// validateResolved is validateValue with schema already resolved.
func validateResolved(schema *jsonschema.Schema, resolved *jsonschema.Resolved, v *map[string]any, root string) string {
	if err := resolved.ApplyDefaults(v); err != nil {
		return schemaMessage(schema, *v, root, err)
	}
	if err := resolved.Validate(*v); err != nil {
		return schemaMessage(schema, *v, root, err)
	}
	return ""
}

// schemaMessage words the failure err of validating the object v against
// schema: for the common failures of a flat object schema (a required
// property missing, a property of the wrong type, a value outside its
// enum, a property the schema does not know) it names the field, what it
// wants and what it got; for anything else it gives the validator's own
// words, without their "validating root" prefix.
func schemaMessage(schema *jsonschema.Schema, v map[string]any, root string, err error) string {
	field := func(name string) string {
		if root == "arguments" {
			return "argument " + strconv.Quote(name)
		}
		return root + "." + name
	}
	var missing []string
	for _, name := range schema.Required {
		if _, ok := v[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		var parts []string
		for _, name := range missing {
			parts = append(parts, field(name)+" ("+wants(schema.Properties[name])+")")
		}
		return "missing required " + strings.Join(parts, ", ")
	}
	for _, name := range slices.Sorted(maps.Keys(v)) {
		prop, ok := schema.Properties[name]
		if !ok {
			if schema.AdditionalProperties != nil && isFalseSchema(schema.AdditionalProperties) {
				return fmt.Sprintf("%s is unknown (known: %s)", field(name), strings.Join(slices.Sorted(maps.Keys(schema.Properties)), ", "))
			}
			continue
		}
		if prop == nil {
			continue
		}
		if !typeFits(prop, v[name]) {
			return fmt.Sprintf("%s must be %s, got %s", field(name), wants(prop), describeValue(v[name]))
		}
		if len(prop.Enum) > 0 && !slices.ContainsFunc(prop.Enum, func(e any) bool { return reflect.DeepEqual(e, v[name]) }) {
			return fmt.Sprintf("%s must be %s, got %s", field(name), wants(prop), describeValue(v[name]))
		}
	}
	msg := strings.TrimPrefix(err.Error(), "validating root: ")
	msg = strings.ReplaceAll(msg, "validating /properties/", root+".")
	return root + ": " + msg
}

func isFalseSchema(s *jsonschema.Schema) bool {
	return s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// typeFits reports whether v, as encoding/json decodes it, has a type
// prop allows (true when prop names none).
func typeFits(prop *jsonschema.Schema, v any) bool {
	types := prop.Types
	if prop.Type != "" {
		types = append(types, prop.Type)
	}
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if jsonType(v) == t || (t == "number" && jsonType(v) == "integer") {
			return true
		}
	}
	return false
}

// jsonType is the JSON Schema type of v, as encoding/json decodes it.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "value"
}

// wants says what prop accepts: "a boolean", "one of \"red\", \"blue\"".
func wants(prop *jsonschema.Schema) string {
	if prop == nil {
		return "a value"
	}
	if len(prop.Enum) > 0 {
		var opts []string
		for _, e := range prop.Enum {
			b, _ := json.Marshal(e)
			opts = append(opts, string(b))
		}
		return "one of " + strings.Join(opts, ", ")
	}
	types := prop.Types
	if prop.Type != "" {
		types = []string{prop.Type}
	}
	var names []string
	for _, t := range types {
		switch t {
		case "boolean":
			names = append(names, "a boolean (true or false)")
		case "integer":
			names = append(names, "an integer")
		case "number":
			names = append(names, "a number")
		case "string":
			names = append(names, "a string")
		case "array":
			names = append(names, "an array")
		case "object":
			names = append(names, "an object")
		case "null":
			names = append(names, "null")
		}
	}
	if len(names) == 0 {
		return "a value"
	}
	return strings.Join(names, " or ")
}

// describeValue says what v is, as a person reads JSON: `the string "yes"`.
func describeValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "a value"
	}
	return describe(b)
}

// describe says what the JSON value raw is: `the string "yes"`, `the number
// 3`, `an object`, `nothing`.
func describe(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	short := func(s string) string {
		if len(s) > 40 {
			return s[:37] + "..."
		}
		return s
	}
	switch raw[0] {
	case '"':
		return "the string " + short(string(raw))
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "the boolean " + string(raw)
	case 'n':
		return "null"
	}
	return "the number " + short(string(raw))
}

func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

// depth returns how deeply raw, valid JSON or not, nests arrays and
// objects (strings are skipped).
func depth(raw []byte) int {
	d, maxD, inStr := 0, 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			d++
			maxD = max(maxD, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return maxD
}

// jsonError words an encoding/json decoding error for a client: the field
// and the JSON type it wanted, never a Go type name.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the value"
		}
		return fmt.Sprintf("%s must be %s, got %s", field, goKindWord(te.Type), jsonWord(te.Value))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "malformed JSON at offset " + strconv.FormatInt(se.Offset, 10)
	}
	return "the value does not fit the expected shape"
}

func goKindWord(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return goKindWord(t.Elem())
	}
	return "a value"
}

// jsonWord names the JSON type encoding/json reports in an
// UnmarshalTypeError's Value ("string", "number 1.5", "bool", ...).
func jsonWord(v string) string {
	switch {
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "number"):
		return "a number"
	case v == "string":
		return "a string"
	case v == "array":
		return "an array"
	case v == "object":
		return "an object"
	}
	return v
}
