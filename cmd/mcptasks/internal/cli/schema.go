package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// schema is the part of a JSON Schema the commands read: the input schema
// of a tool (to type key=value arguments) and the requested schema of an
// elicitation (to ask for each field). Properties keep their order.
type schema struct {
	Type        types            `json:"type"`
	Title       string           `json:"title"`
	Description string           `json:"description"`
	Default     any              `json:"default"`
	Enum        []any            `json:"enum"`
	EnumNames   []string         `json:"enumNames"`
	OneOf       []*schema        `json:"oneOf"`
	AnyOf       []*schema        `json:"anyOf"`
	Const       *json.RawMessage `json:"const"`
	Items       *schema          `json:"items"`
	Format      string           `json:"format"`
	Pattern     string           `json:"pattern"`
	MinLength   *int             `json:"minLength"`
	MaxLength   *int             `json:"maxLength"`
	Minimum     *float64         `json:"minimum"`
	Maximum     *float64         `json:"maximum"`
	MinItems    *int             `json:"minItems"`
	MaxItems    *int             `json:"maxItems"`
	Required    []string         `json:"required"`
	Properties  properties       `json:"properties"`
	// AdditionalProperties is kept raw: only "false" is read (see closed).
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
}

// types is a schema's "type": one name or a list of them.
type types []string

func (t *types) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = types{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("type: %w", err)
	}
	*t = many
	return nil
}

// property is one named property of an object schema.
type property struct {
	Name   string
	Schema *schema
}

// properties are an object schema's properties, in the order they were
// written.
type properties []property

func (ps *properties) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("properties: not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		var s schema
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("property %q: %w", name, err)
		}
		*ps = append(*ps, property{Name: name, Schema: &s})
	}
	_, err = dec.Token()
	return err
}

// decodeSchema reads a schema given as any JSON value (a map, a
// *jsonschema.Schema, raw JSON).
func decodeSchema(v any) (*schema, error) {
	if v == nil {
		return &schema{}, nil
	}
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, err
		}
	}
	var s schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// property returns the schema of the property name, or nil.
func (s *schema) property(name string) *schema {
	for _, p := range s.Properties {
		if p.Name == name {
			return p.Schema
		}
	}
	return nil
}

func (s *schema) required(name string) bool { return slices.Contains(s.Required, name) }

// kinds returns the JSON types a value of s may have, "null" left out
// (inferred from enum values and oneOf/anyOf branches when "type" is
// absent); nil when s says nothing.
func (s *schema) kinds() []string {
	var out []string
	add := func(k string) {
		if k != "null" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	for _, t := range s.Type {
		add(t)
	}
	if len(out) > 0 {
		return out
	}
	for _, v := range s.Enum {
		add(jsonKind(v))
	}
	for _, sub := range append(slices.Clone(s.OneOf), s.AnyOf...) {
		if sub.Const != nil {
			var v any
			if json.Unmarshal(*sub.Const, &v) == nil {
				add(jsonKind(v))
			}
		}
		for _, k := range sub.kinds() {
			add(k)
		}
	}
	return out
}

// nullable reports whether s allows null.
func (s *schema) nullable() bool { return slices.Contains(s.Type, "null") }

// jsonKind is the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// choice is one value of an enum, with its label.
type choice struct {
	Value any
	Label string
}

// choices returns the values s allows when it is an enum (enum with
// enumNames, or oneOf/anyOf of titled consts), or nil.
func (s *schema) choices() []choice {
	var out []choice
	for i, v := range s.Enum {
		c := choice{Value: v, Label: fmt.Sprint(v)}
		if i < len(s.EnumNames) && s.EnumNames[i] != "" {
			c.Label = s.EnumNames[i]
		}
		out = append(out, c)
	}
	if len(out) > 0 {
		return out
	}
	for _, sub := range append(slices.Clone(s.OneOf), s.AnyOf...) {
		if sub.Const == nil {
			return nil // not an enum of consts
		}
		var v any
		if err := json.Unmarshal(*sub.Const, &v); err != nil {
			return nil
		}
		c := choice{Value: v, Label: fmt.Sprint(v)}
		if sub.Title != "" {
			c.Label = sub.Title
		}
		out = append(out, c)
	}
	return out
}
