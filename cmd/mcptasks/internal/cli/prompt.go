package cli

import (
	"context"
	"fmt"
	"io"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// asker answers input requests by asking the user: questions on stderr,
// answers from stdin.
type asker struct {
	e    *env
	out  io.Writer
	prog *progress // paused while asking; may be nil
	// echo repeats each answer read, when stdin is not a terminal (which
	// would have echoed it), so that the questions and answers read well
	// in a log.
	echo bool
}

func (e *env) asker(prog *progress) *asker {
	tty, _ := e.terminal(e.stdin)
	return &asker{e: e, out: e.stderr, prog: prog, echo: !tty}
}

// readLine reads one answer.
func (a *asker) readLine(ctx context.Context) (string, error) {
	s, err := a.e.reader().read(ctx)
	if err != nil {
		fmt.Fprintln(a.out)
		return "", err
	}
	if a.echo {
		fmt.Fprintln(a.out, clean(s, false))
	}
	return s, nil
}

// input is a client.InputHandler: it asks for the answer to an
// elicitation/create request; other methods cannot be answered from a
// command line.
func (a *asker) input(ctx context.Context, req *client.InputRequest) (any, error) {
	if req.Method != "elicitation/create" {
		return nil, fmt.Errorf("input request %q is %s, which the command line cannot answer (answer it with: mcptasks task answer TASKID %s='{...}')", req.Key, req.Method, req.Key)
	}
	p, err := req.Elicitation()
	if err != nil {
		return nil, err
	}
	if a.prog != nil {
		a.prog.pause()
		defer a.prog.resume()
	}
	return a.elicit(ctx, req, p)
}

// elicit asks whether to answer, decline or cancel the elicitation, then
// for each field of its requested schema.
func (a *asker) elicit(ctx context.Context, req *client.InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	fmt.Fprintf(a.out, "? %s  (input request %s)\n", clean(p.Message, true), clean(req.Key, false))
	if p.Mode == "url" {
		fmt.Fprintf(a.out, "  open %s\n", clean(p.URL, false))
	}
	action, err := a.action(ctx, p.Mode == "url")
	if err != nil || action != "accept" || p.Mode == "url" {
		return &mcp.ElicitResult{Action: action}, err
	}
	s, err := requestedSchema(req)
	if err != nil {
		return nil, fmt.Errorf("input request %q: reading its requested schema: %w", req.Key, err)
	}
	content := map[string]any{}
	for _, prop := range s.Properties {
		v, set, err := a.field(ctx, prop.Name, prop.Schema, s.required(prop.Name))
		if err != nil {
			return nil, err
		}
		if set {
			content[prop.Name] = v
		}
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}, nil
}

// action asks for accept, decline or cancel (accept by default).
func (a *asker) action(ctx context.Context, url bool) (string, error) {
	q := "  answer, decline or cancel? [A/d/c]: "
	if url {
		q = "  done (accept), decline or cancel? [A/d/c]: "
	}
	for {
		fmt.Fprint(a.out, q)
		s, err := a.readLine(ctx)
		if err != nil {
			return "", err
		}
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "", "a", "answer", "accept", "y", "yes":
			return "accept", nil
		case "d", "decline", "n", "no":
			return "decline", nil
		case "c", "cancel":
			return "cancel", nil
		}
		fmt.Fprintln(a.out, "    ✗ type a (answer), d (decline) or c (cancel)")
	}
}

// field asks for the value of one property until the schema accepts it. It
// reports set=false for an optional field left empty.
func (a *asker) field(ctx context.Context, name string, ps *schema, required bool) (v any, set bool, err error) {
	label := name
	if ps.Title != "" {
		label = ps.Title
	}
	if ps.Description != "" && ps.Description != label {
		label += " — " + ps.Description
	}
	choices, multi := fieldChoices(ps)
	if len(choices) > 0 {
		fmt.Fprintf(a.out, "  %s\n", clean(label, false))
		for i, c := range choices {
			fmt.Fprintf(a.out, "    %d) %s\n", i+1, clean(c.Label, false))
		}
		label = "  choose"
		if multi {
			label += " (numbers or values, comma-separated)"
		}
	} else {
		label = "  " + clean(label, false)
	}
	q := label + hint(ps, required, len(choices)) + ": "
	for {
		fmt.Fprint(a.out, q)
		s, err := a.readLine(ctx)
		if err != nil {
			return nil, false, err
		}
		s = strings.TrimSpace(s)
		if s == "" {
			if ps.Default != nil {
				return ps.Default, true, nil
			}
			if !required {
				return nil, false, nil
			}
			fmt.Fprintln(a.out, "    ✗ a value is required")
			continue
		}
		v, err := fieldValue(ps, s, choices, multi)
		if err != nil {
			fmt.Fprintf(a.out, "    ✗ %v\n", err)
			continue
		}
		return v, true, nil
	}
}

// hint describes what a field takes: its type, range, default, and
// whether it may be left empty.
func hint(ps *schema, required bool, nchoices int) string {
	var parts []string
	kind := ""
	if k := ps.kinds(); len(k) > 0 {
		kind = k[0]
	}
	switch {
	case nchoices > 0:
		parts = append(parts, fmt.Sprintf("1-%d", nchoices))
	case kind == "boolean":
		parts = append(parts, "y/n")
	case kind == "integer" || kind == "number":
		r := kind
		switch {
		case ps.Minimum != nil && ps.Maximum != nil:
			r += fmt.Sprintf(" %g..%g", *ps.Minimum, *ps.Maximum)
		case ps.Minimum != nil:
			r += fmt.Sprintf(" ≥ %g", *ps.Minimum)
		case ps.Maximum != nil:
			r += fmt.Sprintf(" ≤ %g", *ps.Maximum)
		}
		parts = append(parts, r)
	case ps.Format != "":
		parts = append(parts, ps.Format)
	}
	if ps.Default != nil {
		parts = append(parts, "default "+clean(compactJSON(ps.Default), false))
	} else if !required {
		parts = append(parts, "optional")
	}
	if len(parts) == 0 {
		return ""
	}
	return " [" + strings.Join(parts, ", ") + "]"
}

// fieldValue reads the answer s for a field of schema ps, or says why the
// schema refuses it.
func fieldValue(ps *schema, s string, choices []choice, multi bool) (any, error) {
	if len(choices) > 0 {
		if !multi {
			return pick(choices, s)
		}
		var out []any
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			v, err := pick(choices, part)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		if ps.MinItems != nil && len(out) < *ps.MinItems {
			return nil, fmt.Errorf("choose at least %d", *ps.MinItems)
		}
		if ps.MaxItems != nil && len(out) > *ps.MaxItems {
			return nil, fmt.Errorf("choose at most %d", *ps.MaxItems)
		}
		return out, nil
	}
	kind := "string"
	if k := ps.kinds(); len(k) > 0 {
		kind = k[0]
	}
	switch kind {
	case "boolean":
		b, ok := parseBool(s)
		if !ok {
			return nil, fmt.Errorf("answer y or n")
		}
		return b, nil
	case "integer", "number":
		var f float64
		var v any
		if kind == "integer" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer", s)
			}
			f, v = float64(n), n
		} else {
			var err error
			if f, err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("%q is not a number", s)
			}
			v = f
		}
		if ps.Minimum != nil && f < *ps.Minimum {
			return nil, fmt.Errorf("%s is less than %g", s, *ps.Minimum)
		}
		if ps.Maximum != nil && f > *ps.Maximum {
			return nil, fmt.Errorf("%s is more than %g", s, *ps.Maximum)
		}
		return v, nil
	case "string":
		return s, checkString(ps, s)
	}
	v, ok := parseJSON(s)
	if !ok || !allows([]string{kind}, v) {
		return nil, fmt.Errorf("type a JSON %s", kind)
	}
	return v, nil
}

// pick resolves s to one of choices: its number in the list, its value or
// its label.
func pick(choices []choice, s string) (any, error) {
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(choices) {
		return choices[n-1].Value, nil
	}
	for _, c := range choices {
		if fmt.Sprint(c.Value) == s || strings.EqualFold(c.Label, s) {
			return c.Value, nil
		}
	}
	return nil, fmt.Errorf("%q is not one of the choices (type its number)", s)
}

// checkString applies a string schema's length, format and pattern.
func checkString(ps *schema, s string) error {
	n := len([]rune(s))
	if ps.MinLength != nil && n < *ps.MinLength {
		return fmt.Errorf("at least %d characters", *ps.MinLength)
	}
	if ps.MaxLength != nil && n > *ps.MaxLength {
		return fmt.Errorf("at most %d characters", *ps.MaxLength)
	}
	switch ps.Format {
	case "email":
		if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
			return fmt.Errorf("%q is not an email address", s)
		}
	case "uri":
		if u, err := url.Parse(s); err != nil || u.Scheme == "" {
			return fmt.Errorf("%q is not an absolute URI", s)
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return fmt.Errorf("%q is not a date (YYYY-MM-DD)", s)
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return fmt.Errorf("%q is not a date-time (RFC 3339, e.g. 2026-07-28T12:00:00Z)", s)
		}
	}
	if ps.Pattern != "" {
		// JSON Schema patterns are ECMA-262; one RE2 cannot compile is
		// left to the server.
		if re, err := regexp.Compile(ps.Pattern); err == nil && !re.MatchString(s) {
			return fmt.Errorf("%q does not match %s", s, ps.Pattern)
		}
	}
	return nil
}
