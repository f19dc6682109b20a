package e2e

// The real `vercel build` (the Vercel CLI pinned in testdata/vercelcli/,
// installed by .ci/run with npm install and its lockfile; under testdata because its
// node_modules hold .go files that ./... must not see) of this repository
// and of a module made by `mcptasks init`: Vercel's Go builder
// (@vercel/go) detects the functions, rewrites go.mod as it does on Vercel
// (module renamed, relative replace directives re-rooted), runs go mod
// tidy and go build, and lays out .vercel/output. No Vercel account or
// network access to Vercel is used.
//
// Two things the builder fetches from the network are provided locally:
//   - Go: the builder runs exactly the Go of go.mod's go line, found in its
//     cache or downloaded from go.dev. The test puts that release, which the
//     go command fetches as the module golang.org/toolchain (GOTOOLCHAIN),
//     in the builder's cache.
//   - github.com/vercel/go-bridge, the package the builder's generated
//     main.go starts the Handler with. The Go module proxy this project's
//     machines reach does not serve it, so the test serves a stand-in of its
//     one entry point (bridge.Start serving the handler on $PORT) from a
//     file:// GOPROXY placed before the real one. Everything else is built
//     as on Vercel.

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// vercelCLIDir holds the pinned Vercel CLI (package.json and its lockfile).
const vercelCLIDir = "testdata/vercelcli"

// vercelCLI returns the path of the pinned vercel binary, installing it
// with npm install (the lockfile pins it) when missing. Without npm the test is skipped, or fails
// under CI.
func vercelCLI(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join(vercelCLIDir, "node_modules", ".bin", "vercel"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("npm is needed for the Vercel CLI (apt-get install -y nodejs npm; .ci/run installs e2e/testdata/vercelcli)")
		}
		t.Skip("npm not found on PATH")
	}
	// npm install with the lockfile, as .ci/run does it (npm ci refuses the
	// lockfile's unversioned optional packages of other platforms).
	runIn(t, vercelCLIDir, "npm", "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error")
	return bin
}

// vercelBuild runs `vercel build` on a copy of the project files in dir
// (listed by files, slash-separated and relative to dir) and returns the
// copy, with .vercel/output in it.
func vercelBuild(t *testing.T, dir string, files []string) string {
	t.Helper()
	vercel := vercelCLI(t)
	work := filepath.Join(t.TempDir(), "project")
	copyFiles(t, dir, work, files)
	// What `vercel link` would leave: the project settings, here the
	// defaults (no framework, no build command).
	writeFile(t, filepath.Join(work, ".vercel", "project.json"),
		`{"projectId":"prj_mcptasks_e2e","orgId":"team_mcptasks_e2e","settings":{"framework":null}}`)

	home := t.TempDir()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, k := range []string{"HOME=", "XDG_CACHE_HOME=", "XDG_DATA_HOME=", "XDG_CONFIG_HOME=", "GOPROXY=", "GONOSUMDB=", "GOFLAGS=", "GOTOOLCHAIN=", "TMPDIR=", "VERCEL"} {
			if strings.HasPrefix(kv, k) {
				return true
			}
		}
		return false
	})
	cache := filepath.Join(home, "cache")
	env = append(env,
		"HOME="+home,
		"TMPDIR="+filepath.Join(home, "tmp"),
		"XDG_CACHE_HOME="+cache,
		"XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"VERCEL_TELEMETRY_DISABLED=1",
		"GOPROXY=file://"+filepath.ToSlash(goBridgeProxy(t))+","+goEnv(t, "GOPROXY"),
		"GONOSUMDB=github.com/vercel/go-bridge",
	)
	seedVercelGo(t, work, cache)
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(vercel, "build", "--yes")
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("vercel build (in %s): %v\n%s", work, err, out)
	}
	t.Logf("vercel build:\n%s", lastLines(string(out), 10))
	return work
}

// checkVercelOutput checks what vercel build left in work/.vercel/output
// for the three functions of vercel.json: each one a Go function whose
// handler is a linux executable, and the rewrites and cron of vercel.json
// in the output's configuration.
func checkVercelOutput(t *testing.T, work string) {
	t.Helper()
	out := filepath.Join(work, ".vercel", "output")
	var funcs []string
	_ = filepath.WalkDir(filepath.Join(out, "functions"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(p, ".func") {
			rel, _ := filepath.Rel(filepath.Join(out, "functions"), p)
			funcs = append(funcs, filepath.ToSlash(rel))
		}
		return nil
	})
	if fmt.Sprint(funcs) != "[api/cron/index.func api/mcp/index.func api/worker/index.func]" {
		t.Errorf("functions in the build output: %v", funcs)
	}
	for _, fn := range funcs {
		fdir := filepath.Join(out, "functions", filepath.FromSlash(fn))
		raw, err := os.ReadFile(filepath.Join(fdir, ".vc-config.json"))
		if err != nil {
			t.Errorf("%s: %v", fn, err)
			continue
		}
		var cfg struct {
			Runtime         string            `json:"runtime"`
			RuntimeLanguage string            `json:"runtimeLanguage"`
			Handler         string            `json:"handler"`
			MaxDuration     int               `json:"maxDuration"`
			FilePathMap     map[string]string `json:"filePathMap"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Errorf("%s: .vc-config.json: %v", fn, err)
			continue
		}
		if cfg.Runtime != "provided.al2023" || cfg.RuntimeLanguage != "go" || cfg.MaxDuration != 60 || cfg.Handler == "" {
			t.Errorf("%s: .vc-config.json %s, want a Go handler on provided.al2023 with maxDuration 60", fn, raw)
			continue
		}
		// The handler is in the function's directory, or where its
		// filePathMap says (relative to the project).
		handler := filepath.Join(fdir, cfg.Handler)
		if p, ok := cfg.FilePathMap[cfg.Handler]; ok {
			handler = filepath.Join(work, filepath.FromSlash(p))
		}
		if head, err := os.ReadFile(handler); err != nil || !strings.HasPrefix(string(head), "\x7fELF") {
			t.Errorf("%s: handler %s is not an ELF executable (%v)", fn, handler, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"/api/mcp"`, `"/api/cron"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the output's config.json lacks %s:\n%s", want, raw)
		}
	}
}

// seedVercelGo puts the Go release of work's go.mod where Vercel's Go
// builder looks for it in its cache (XDG_CACHE_HOME/com.vercel.cli/golang/
// VERSION_linux_ARCH, marked complete): its GOROOT entries linked, and its
// module and build caches linked to this machine's, so that modules
// already downloaded are not downloaded again.
func seedVercelGo(t *testing.T, work, cache string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(work, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+\.\d+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line with a patch version")
	}
	version := string(m[1])
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		t.Skipf("Vercel's Go builder does not run on %s", runtime.GOARCH)
	}
	goroot := stdoutOf(t, "env", "GOTOOLCHAIN=go"+version, "go", "env", "GOROOT")
	dst := filepath.Join(cache, "com.vercel.cli", "golang", version+"_linux_"+arch)
	link := func(old, new string) {
		if err := os.MkdirAll(filepath.Dir(new), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(old, new); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(goroot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "pkg" {
			link(filepath.Join(goroot, e.Name()), filepath.Join(dst, e.Name()))
		}
	}
	pkgs, err := os.ReadDir(filepath.Join(goroot, "pkg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pkgs {
		link(filepath.Join(goroot, "pkg", e.Name()), filepath.Join(dst, "pkg", e.Name()))
	}
	link(goEnv(t, "GOMODCACHE"), filepath.Join(dst, "pkg", "mod"))
	link(goEnv(t, "GOCACHE"), filepath.Join(dst, "go-build"))
	writeFile(t, filepath.Join(dst, ".vercel-go-install-complete"), "")
}

// goBridgeProxy writes a file:// module proxy serving the stand-in of
// github.com/vercel/go-bridge (see the file comment) and returns its
// directory.
func goBridgeProxy(t *testing.T) string {
	t.Helper()
	const (
		module  = "github.com/vercel/go-bridge"
		version = "v0.0.0-20200101000000-000000000000"
		gomod   = "module github.com/vercel/go-bridge\n\ngo 1.21\n"
		bridge  = `// Package bridge is a stand-in for Vercel's, for builds in tests: Start
// serves the function's handler on $PORT.
package bridge

import (
	"net/http"
	"os"
)

// Start serves h on 127.0.0.1:$PORT.
func Start(h http.Handler) {
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("PORT"), h); err != nil {
		panic(err)
	}
}
`
	)
	return moduleProxy(t, module, version, map[string][]byte{"go.mod": []byte(gomod), "go/bridge/bridge.go": []byte(bridge)})
}

// moduleProxy writes a file:// module proxy (GOPROXY=file://DIR) serving
// one version of module, made of files (slash-separated paths, go.mod
// among them), and returns its directory.
func moduleProxy(t *testing.T, module, version string, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	at := filepath.Join(dir, filepath.FromSlash(module), "@v")
	writeFile(t, filepath.Join(at, "list"), version+"\n")
	writeFile(t, filepath.Join(at, version+".info"), `{"Version":"`+version+`","Time":"2020-01-01T00:00:00Z"}`)
	writeFile(t, filepath.Join(at, version+".mod"), string(files["go.mod"]))
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, err := zw.Create(module + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyFiles copies files (slash-separated, relative to src) from src to
// dst, keeping their permissions.
func copyFiles(t *testing.T, src, dst string, files []string) {
	t.Helper()
	for _, f := range files {
		from, to := filepath.Join(src, filepath.FromSlash(f)), filepath.Join(dst, filepath.FromSlash(f))
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// treeFiles lists the regular files under dir (slash-separated, relative
// to dir), leaving out the directories skip names (relative paths).
func treeFiles(t *testing.T, dir string, skip ...string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && slices.Contains(skip, filepath.ToSlash(rel)) {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	return stdoutOf(t, "go", "env", key)
}

// stdoutOf runs a command and returns what it wrote to stdout, trimmed:
// the go command reports on stderr what it does first (on a machine
// without the toolchain GOTOOLCHAIN names, "go: downloading go1.26.0"),
// which must not become part of the value.
func stdoutOf(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// repoFiles lists the files of this repository that git tracks or would
// track (untracked files not ignored), as a deployment uploads them.
func repoFiles(t *testing.T) []string {
	t.Helper()
	out := runIn(t, root, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	var files []string
	for _, f := range strings.Split(out, "\x00") {
		if f == "" {
			continue
		}
		if st, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); err == nil && st.Mode().IsRegular() {
			files = append(files, f)
		}
	}
	return files
}

// TestVercelBuild runs the real `vercel build` on this repository.
func TestVercelBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Vercel functions")
	}
	t.Parallel()
	checkVercelOutput(t, vercelBuild(t, root, repoFiles(t)))
}
