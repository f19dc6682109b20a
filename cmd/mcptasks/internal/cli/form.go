package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// FormField is one field of an elicitation's requested schema as a form
// shows it (the dashboard's answer form); the prompt of task answer asks
// for the same fields.
type FormField struct {
	// Name is the property's name, Label its title and description.
	Name, Label string
	// Kind is how the form takes it: "string", "number", "integer",
	// "boolean", "choice" (one of Choices), "multi" (any of Choices) or
	// "json" (a JSON value of another type).
	Kind     string
	Required bool
	// Hint says what it takes (range, format, default, optional), as the
	// prompt says it.
	Hint string
	// Format is a string's format (email, uri, date, date-time) or "".
	Format  string
	Choices []FormChoice
	// Default is the default value as the field's text ("" for none).
	Default string
}

// FormChoice is one value of a choice field: Value is how the form sends
// it.
type FormChoice struct{ Value, Label string }

// FormFields returns the fields of requestedSchema, in their order.
func FormFields(requestedSchema json.RawMessage) ([]FormField, error) {
	s, err := decodeSchema(requestedSchema)
	if err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	var out []FormField
	for _, p := range s.Properties {
		ps := p.Schema
		f := FormField{Name: p.Name, Label: p.Name, Required: s.required(p.Name), Format: ps.Format}
		if ps.Title != "" {
			f.Label = ps.Title
		}
		if ps.Description != "" && ps.Description != f.Label {
			f.Label += " — " + ps.Description
		}
		choices, multi := fieldChoices(ps)
		f.Hint = strings.TrimSuffix(strings.TrimPrefix(hint(ps, f.Required, len(choices)), " ["), "]")
		if len(choices) > 0 {
			f.Hint = strings.TrimPrefix(strings.TrimPrefix(f.Hint, fmt.Sprintf("1-%d", len(choices))), ", ")
		}
		if firstKind(ps) == "boolean" {
			f.Hint = strings.TrimPrefix(strings.TrimPrefix(f.Hint, "y/n"), ", ") // a box is ticked or not
		}
		switch kind := firstKind(ps); {
		case len(choices) > 0 && multi:
			f.Kind = "multi"
		case len(choices) > 0:
			f.Kind = "choice"
		case kind == "string", kind == "number", kind == "integer", kind == "boolean":
			f.Kind = kind
		default:
			f.Kind = "json"
		}
		for _, c := range choices {
			f.Choices = append(f.Choices, FormChoice{Value: fmt.Sprint(c.Value), Label: c.Label})
		}
		if ps.Default != nil {
			if str, ok := ps.Default.(string); ok {
				f.Default = str
			} else {
				f.Default = compactJSON(ps.Default)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// FormContent reads a submitted form (field name -> its values; an
// unchecked box sends none) into the content of an accepted answer to
// requestedSchema: each value typed as its property says, an empty
// optional field left out, an empty field with a default given it. The
// error names the field a value does not fit; the server checks the
// answer against the schema again, like every answer.
func FormContent(requestedSchema json.RawMessage, values map[string][]string) (map[string]any, error) {
	s, err := decodeSchema(requestedSchema)
	if err != nil {
		return nil, fmt.Errorf("requested schema: %w", err)
	}
	out := map[string]any{}
	for _, p := range s.Properties {
		ps, vs := p.Schema, values[p.Name]
		choices, multi := fieldChoices(ps)
		if multi {
			var picked []any
			for _, v := range vs {
				c, err := pick(choices, v)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", p.Name, err)
				}
				picked = append(picked, c)
			}
			if len(picked) > 0 || s.required(p.Name) {
				if picked == nil {
					picked = []any{}
				}
				out[p.Name] = picked
			}
			continue
		}
		if len(choices) == 0 && firstKind(ps) == "boolean" {
			out[p.Name] = slices.ContainsFunc(vs, func(v string) bool { b, _ := parseBool(v); return b })
			continue
		}
		v := ""
		if len(vs) > 0 {
			v = strings.TrimSpace(vs[0])
		}
		if v == "" {
			switch {
			case ps.Default != nil:
				out[p.Name] = ps.Default
			case s.required(p.Name):
				return nil, fmt.Errorf("%s: a value is required", p.Name)
			}
			continue
		}
		x, err := fieldValue(ps, v, choices, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		out[p.Name] = x
	}
	return out, nil
}

// fieldChoices returns the values a field may take when it is an enum, and
// whether it takes several (an array of an enum).
func fieldChoices(ps *schema) ([]choice, bool) {
	if c := ps.choices(); len(c) > 0 {
		return c, false
	}
	if ps.Items != nil && slices.Contains(ps.kinds(), "array") {
		if c := ps.Items.choices(); len(c) > 0 {
			return c, true
		}
	}
	return nil, false
}

// firstKind is the first JSON type ps allows ("" when it says none).
func firstKind(ps *schema) string {
	if k := ps.kinds(); len(k) > 0 {
		return k[0]
	}
	return ""
}
