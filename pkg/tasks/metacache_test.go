package tasks

import (
	"encoding/json"
	"fmt"
	"testing"
)

// The cache answers exactly what parseMeta answers, on the first sight of
// a _meta and on every later one, and never holds more than metaEntries
// verdicts however many distinct _meta it sees.
func TestMetaCache(t *testing.T) {
	metas := []string{
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":7}}`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":null}`,
		`[]`,
	}
	var c metaCache
	for round := range 3 {
		for _, m := range metas {
			params := map[string]json.RawMessage{"_meta": json.RawMessage(m)}
			wantExt, wantOK := parseMeta(params)
			if ext, ok := c.parse(params); ext != wantExt || ok != wantOK {
				t.Errorf("round %d, _meta %s: cache says (%v, %v), parseMeta (%v, %v)", round, m, ext, ok, wantExt, wantOK)
			}
		}
	}
	for i := range 3 * metaEntries {
		c.parse(map[string]json.RawMessage{"_meta": json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		if n := len(c.m); n > metaEntries {
			t.Fatalf("the cache holds %d verdicts, want at most %d", n, metaEntries)
		}
	}
}
