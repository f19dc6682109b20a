package client

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SEP-2243: a tool's input schema may mark primitive arguments with
// "x-mcp-header": NAME, and a 2026-07-28 server then requires each such
// argument mirrored in an Mcp-Param-NAME header (a missing one is -32020).
// The client learns the annotations from tools/list when a tools/call is
// refused with -32020, and sends the call again with the headers.

// schemaProp is the part of an input-schema property the mirroring needs.
type schemaProp struct {
	Header     string                `json:"x-mcp-header"`
	Properties map[string]schemaProp `json:"properties"`
}

// paramHeaders returns the Mcp-Param-* headers of a call of tool with args.
func paramHeaders(tool *mcp.Tool, args any) (map[string]string, error) {
	raw, err := json.Marshal(tool.InputSchema)
	if err != nil {
		return nil, err
	}
	var schema schemaProp
	if err := json.Unmarshal(raw, &schema); err != nil {
		return nil, fmt.Errorf("reading the input schema of %s: %w", tool.Name, err)
	}
	rawArgs, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(rawArgs, &values); err != nil {
		return nil, fmt.Errorf("arguments of %s are not an object: %w", tool.Name, err)
	}
	out := map[string]string{}
	collectParamHeaders(schema.Properties, values, out)
	return out, nil
}

func collectParamHeaders(props map[string]schemaProp, values map[string]json.RawMessage, out map[string]string) {
	for name, p := range props {
		v, ok := values[name]
		if !ok || string(v) == "null" {
			continue
		}
		if p.Header != "" {
			if s, ok := headerValue(v); ok {
				out["Mcp-Param-"+p.Header] = s
			}
		}
		if len(p.Properties) > 0 {
			var nested map[string]json.RawMessage
			if json.Unmarshal(v, &nested) == nil {
				collectParamHeaders(p.Properties, nested, out)
			}
		}
	}
}

// headerValue is the header form of a primitive JSON value: a string as is
// (or base64 in =?base64?…?= when it is not safe in a header), an integer in
// decimal, a boolean as true or false.
func headerValue(v json.RawMessage) (string, bool) {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "", false
	}
	switch x := x.(type) {
	case string:
		if needsBase64(x) {
			return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(x)) + "?=", true
		}
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		const safe = 1<<53 - 1
		if x != math.Trunc(x) || math.Abs(x) > safe {
			return "", false
		}
		return strconv.FormatInt(int64(x), 10), true
	}
	return "", false
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if strings.TrimSpace(s) != s {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=")
}

// validHeaderValue reports whether s can be sent as an HTTP header value
// (no control characters).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f {
			return false
		}
	}
	return true
}
