package main

import (
	"os"
	"strings"
	"testing"
)

// TestColdStart runs the measurement once per bootstrap: each starts under
// the local Runtime API and answers its first invocation with a response.
func TestColdStart(t *testing.T) {
	if err := os.Chdir("../.."); err != nil { // builds ./cmd/lambda/...
		t.Fatal(err)
	}
	// -old with this same checkout: the old rows come from building in DIR.
	rows, err := run(t.Context(), 1, []oldBuild{{"same", "."}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.Name())
		if r.Bytes == 0 || r.Starts != 1 || r.P50Ms <= 0 {
			t.Errorf("%s: %+v, want a built binary and one measured start", r.Name(), r)
		}
		if r.Function == "floor" && r.OverFloorP50Ms != 0 {
			t.Errorf("floor: %+v, want 0 ms over itself", r)
		}
	}
	if want := "floor mcp worker sweep mcp (traced) mcp (same) worker (same) sweep (same)"; strings.Join(names, " ") != want {
		t.Errorf("measured %q, want %q", names, want)
	}
}
