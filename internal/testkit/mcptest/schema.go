package mcptest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schemas compiles the published 2026-07-28 schema and the SEP-2663 task
// shapes layered on it, from dir (pkg/tasks/testdata: schema-2026-07-28.json,
// a copy of the spec's schema.json, as "mcp.json"; tasks-schema.json as
// "tasks.json"), and returns a compiler of definitions such as
// "mcp.json#/$defs/CallToolResult"; a definition that does not compile
// fails the test.
func Schemas(t testing.TB, dir string) func(def string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	for url, file := range map[string]string{"mcp.json": "schema-2026-07-28.json", "tasks.json": "tasks-schema.json"} {
		path := filepath.Join(dir, file)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := c.AddResource(url, doc); err != nil {
			t.Fatal(err)
		}
	}
	return func(def string) *jsonschema.Schema {
		t.Helper()
		s, err := c.Compile(def)
		if err != nil {
			t.Fatalf("compiling %s: %v", def, err)
		}
		return s
	}
}
