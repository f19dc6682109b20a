package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

// Generated modules use this module's go directive (Vercel's builder
// downloads exactly that Go).
func TestGoDirectiveMatchesGoMod(t *testing.T) {
	raw, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(raw)
	if m == nil || string(m[1]) != goDirective {
		t.Errorf("go.mod's go line %q, goDirective %q", m, goDirective)
	}
}

// DIR may come before or after the flags; a missing DIR or --module is a
// usage error; inside a checkout the module is pointed at it.
func TestInitCommandLine(t *testing.T) {
	checkout, _ := filepath.Abs("../..")
	for _, args := range [][]string{
		{"DIR", "--module", "example.com/a"},
		{"--module", "example.com/a", "DIR"},
	} {
		dir := filepath.Join(t.TempDir(), "a")
		for i := range args {
			if args[i] == "DIR" {
				args[i] = dir
			}
		}
		var out bytes.Buffer
		if err := runInit(t.Context(), args, &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
		if !strings.Contains(string(gomod), "replace github.com/mcptasks/mcptasks => ./third_party/mcptasks") {
			t.Errorf("%v: go.mod does not point at the copy of the library:\n%s", args, gomod)
		}
		if !strings.Contains(out.String(), filepath.Join(dir, "third_party", "mcptasks")+"/ (") || !strings.Contains(out.String(), "copied from "+filepath.ToSlash(checkout)) {
			t.Errorf("%v: output does not report the copy of the library from the checkout:\n%s", args, out.String())
		}
		if !strings.Contains(out.String(), "go run ./cmd/a") {
			t.Errorf("%v: output lacks the next steps:\n%s", args, out.String())
		}
	}
	for _, args := range [][]string{{"--module", "example.com/a"}, {t.TempDir()}, {"a", "b", "--module", "x.com/y"}} {
		if err := runInit(t.Context(), args, &bytes.Buffer{}); !errors.Is(err, local.ErrUsage) {
			t.Errorf("%v: err %v, want a usage error", args, err)
		}
	}
	if err := runInit(t.Context(), []string{t.TempDir(), "--module", "x.com/y", "--replace", t.TempDir()}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "no go.mod of github.com/mcptasks/mcptasks") {
		t.Errorf("--replace to a non-checkout: %v", err)
	}
}
