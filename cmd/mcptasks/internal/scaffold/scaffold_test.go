package scaffold

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func opts(dir string) Options {
	return Options{Dir: dir, Module: "example.com/acme/transcode", Version: "v0.2.0", GoVersion: "1.26.0"}
}

// Every template renders; the name defaults to the module's last element;
// module, name and version reach the files that need them.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := opts(dir)
	o.Replace = "../../../.."
	wrote, err := Write(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) < 15 || !strings.Contains(strings.Join(wrote, " "), "cmd/transcode/main.go") {
		t.Errorf("wrote %v", wrote)
	}
	for f, want := range map[string][]string{
		"go.mod":                {"module example.com/acme/transcode\n", "go 1.26.0\n", "require github.com/mcptasks/mcptasks v0.2.0\n", "replace github.com/mcptasks/mcptasks => ./third_party/mcptasks\n"},
		"api/mcp/index.go":      {"\"example.com/acme/transcode/tools\"", "vercel.For(tools.App).MCP(w, r)"},
		"cmd/transcode/main.go": {"func main() { local.Main(tools.App) }"},
		"tools/tools.go":        {`Name: "transcode"`},
		"README.md":             {"go run ./cmd/transcode\n", "go test ./...\n", "rm -rf third_party/mcptasks\ngo mod edit -dropreplace=github.com/mcptasks/mcptasks -droprequire=github.com/mcptasks/mcptasks\n"},
		".gitignore":            {"/bin/"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s lacks %q:\n%s", f, w, b)
			}
		}
		if strings.Contains(string(b), "[[") {
			t.Errorf("%s has an unexpanded template action", f)
		}
	}
	// The copy of the library: the packages the module imports and
	// theirs, without tests, and the module's go.mod.
	for _, f := range []string{"go.mod", "go.sum", "pkg/tasks/server.go", "pkg/platform/local/localtest/localtest.go", "pkg/platform/vercel/vercel.go", "internal/slots/slots.go"} {
		if !slices.Contains(wrote, VendorDir+"/"+f) {
			t.Errorf("the copy of the library lacks %s", f)
		}
	}
	for _, f := range wrote {
		if rel, ok := strings.CutPrefix(f, VendorDir+"/"); ok && (strings.HasSuffix(f, "_test.go") || strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "cmd/mcptasks/internal/") || strings.HasPrefix(rel, "pkg/examples/") || strings.HasPrefix(rel, "internal/testkit/")) {
			t.Errorf("the copy of the library holds %s, which the module does not use", f)
		}
	}
	// Without Replace, no replace directive, no copy.
	o = opts(t.TempDir())
	wrote, err = Write(o)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(o.Dir, "go.mod")); strings.Contains(string(b), "replace") {
		t.Errorf("go.mod without Replace:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(o.Dir, "README.md")); strings.Contains(string(b), "third_party") || strings.Contains(string(b), "[[") {
		t.Errorf("README.md without Replace mentions the copy:\n%s", b)
	}
	if strings.Contains(strings.Join(wrote, " "), "third_party") {
		t.Errorf("wrote %v without Replace", wrote)
	}
}

// A checkout that lacks a package the module needs is an error, and
// nothing is written.
func TestVendorNeedsThePackages(t *testing.T) {
	t.Parallel()
	checkout := t.TempDir()
	if err := os.WriteFile(filepath.Join(checkout, "go.mod"), []byte("module github.com/mcptasks/mcptasks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := opts(t.TempDir())
	o.Replace = checkout
	if _, err := Write(o); err == nil || !strings.Contains(err.Error(), "pkg/") {
		t.Fatalf("err %v, want one naming the missing package", err)
	}
	if entries, _ := os.ReadDir(o.Dir); len(entries) > 0 {
		t.Errorf("wrote %v", entries)
	}
}

// An existing file stops the whole write: nothing is overwritten or added.
func TestNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools", "tools.go"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Write(opts(dir))
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "tools/tools.go") {
		t.Fatalf("err %v, want ErrExists naming tools/tools.go", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tools", "tools.go")); string(b) != "mine" {
		t.Error("the existing file was overwritten")
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		t.Error("other files were written although one existed")
	}
}

func TestRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, mod := range map[string]func(*Options){
		"no dir":         func(o *Options) { o.Dir = "" },
		"bad module":     func(o *Options) { o.Module = "example.com//x" },
		"module dots":    func(o *Options) { o.Module = "example.com/../x" },
		"bad name":       func(o *Options) { o.Name = "Trans Code" },
		"bad version":    func(o *Options) { o.Version = "latest" },
		"go without fix": func(o *Options) { o.GoVersion = "1.26" },
	} {
		o := opts(t.TempDir())
		mod(&o)
		if _, err := Write(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
