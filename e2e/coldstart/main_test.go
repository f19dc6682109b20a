package main

import (
	"os"
	"testing"
)

// TestColdStart runs the measurement once per bootstrap: each starts under
// the local Runtime API and answers its first invocation with a response.
func TestColdStart(t *testing.T) {
	if err := os.Chdir("../.."); err != nil { // builds ./cmd/lambda/...
		t.Fatal(err)
	}
	rows, err := run(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("measured %d bootstraps, want mcp, worker and sweep", len(rows))
	}
	for _, r := range rows {
		if r.Bytes == 0 || r.Starts != 1 || r.P50Ms <= 0 {
			t.Errorf("%s: %+v, want a built binary and one measured start", r.Function, r)
		}
	}
}
