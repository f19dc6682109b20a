package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestInitModule does what a user does with `mcptasks init`: scaffold a
// module outside this repository from a checkout (a copy of this one),
// then move the checkout away (the module carries its copy of the library
// in third_party/mcptasks), and in the module: go mod tidy, go vet, its own
// tests, the Vercel entry-point rules and vercel.json, the SAM template,
// the three Lambda bootstraps built by the Makefile as `sam build` runs it
// (linux/arm64, -tags lambda.norpc) and by `make lambda`, a plain make
// refusing without ARTIFACTS_DIR, the real `vercel build`, and its local
// server started as a process, its tool driven over HTTP through
// input_required to completed.
func TestInitModule(t *testing.T) {
	checkReadmeInit(t)
	if testing.Short() {
		t.Skip("builds a module from scratch")
	}
	t.Parallel()
	checkout := filepath.Join(t.TempDir(), "mcptasks")
	copyFiles(t, root, checkout, slices.DeleteFunc(repoFiles(t), func(f string) bool { return strings.HasPrefix(f, "e2e/") }))
	dir := filepath.Join(t.TempDir(), "transcode")
	out := runIn(t, "", binPath, "init", dir, "--module", "example.com/transcode", "--replace", checkout)
	if !strings.Contains(out, filepath.Join(dir, "third_party", "mcptasks")+"/ (") {
		t.Errorf("init did not report the copy of the library:\n%s", out)
	}
	if gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod")); !strings.Contains(string(gomod), "\nreplace github.com/mcptasks/mcptasks => ./third_party/mcptasks\n") {
		t.Errorf("go.mod does not replace the library with its copy:\n%s", gomod)
	}
	for _, f := range []string{"go.mod", "README.md", "Makefile", "vercel.json", "template.yaml", ".gitignore",
		"tools/tools.go", "tools/tools_test.go", "api/mcp/index.go", "api/worker/index.go", "api/cron/index.go",
		"cmd/transcode/main.go", "cmd/lambda/mcp/main.go", "cmd/lambda/worker/main.go", "cmd/lambda/sweep/main.go"} {
		if !strings.Contains(out, filepath.Join(dir, f)+"\n") {
			t.Errorf("init did not report %s:\n%s", f, out)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("init did not write %s: %v", f, err)
		}
	}

	// It never overwrites: a second init fails, naming the files, and
	// changes nothing.
	before, _ := os.ReadFile(filepath.Join(dir, "tools/tools.go"))
	cmd := exec.Command(binPath, "init", dir, "--module", "example.com/other", "--replace", checkout)
	again, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(again), "file exists") || !strings.Contains(string(again), "tools/tools.go") {
		t.Errorf("a second init: err %v, output %s; want a refusal naming the files", err, again)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "tools/tools.go")); !bytes.Equal(before, after) {
		t.Error("a second init changed tools/tools.go")
	}

	// The checkout moves away: nothing of the module refers to it.
	if err := os.RemoveAll(checkout); err != nil {
		t.Fatal(err)
	}

	// The user's glue: every line outside the tools package and the
	// configuration files is one statement per entry point.
	for _, f := range []string{"api/mcp/index.go", "api/worker/index.go", "api/cron/index.go", "cmd/transcode/main.go",
		"cmd/lambda/mcp/main.go", "cmd/lambda/worker/main.go", "cmd/lambda/sweep/main.go"} {
		src, _ := os.ReadFile(filepath.Join(dir, f))
		if n := strings.Count(string(src), "tools.App"); n != 1 {
			t.Errorf("%s mentions tools.App %d times, want one statement", f, n)
		}
	}

	runIn(t, dir, "go", "mod", "tidy")
	if m := runIn(t, dir, "go", "list", "-m", "-f", "{{.Replace.Path}}", "github.com/mcptasks/mcptasks"); strings.TrimSpace(m) != "./third_party/mcptasks" {
		t.Errorf("the library resolves to %q, want ./third_party/mcptasks", m)
	}
	runIn(t, dir, "go", "vet", "./...")
	runIn(t, dir, "go", "test", "-count=1", "./...")
	checkVercelGoRuntimeRules(t, dir)
	checkVercelConfig(t, dir)
	checkSAMTemplate(t, dir)
	checkMakeRefuses(t, dir)

	// The Lambda bootstraps, as `sam build` makes them.
	for _, fn := range []string{"McpFunction", "WorkerFunction", "SweepFunction"} {
		art := filepath.Join(t.TempDir(), fn)
		if err := os.MkdirAll(art, 0o755); err != nil {
			t.Fatal(err)
		}
		runIn(t, dir, "make", "build-"+fn, "ARTIFACTS_DIR="+art)
		st, err := os.Stat(filepath.Join(art, "bootstrap"))
		if err != nil {
			t.Fatalf("%s: no bootstrap: %v", fn, err)
		}
		t.Logf("%s bootstrap: %d bytes", fn, st.Size())
		if head := readHead(t, filepath.Join(art, "bootstrap")); !bytes.HasPrefix(head, []byte("\x7fELF")) || head[18] != 0xb7 {
			t.Errorf("%s bootstrap is not a linux/arm64 ELF binary", fn)
		}
	}

	// make lambda: the three into bin/<function>/bootstrap.
	runIn(t, dir, "make", "lambda")
	for _, fn := range []string{"mcp", "worker", "sweep"} {
		if head := readHead(t, filepath.Join(dir, "bin", fn, "bootstrap")); !bytes.HasPrefix(head, []byte("\x7fELF")) || head[18] != 0xb7 {
			t.Errorf("bin/%s/bootstrap is not a linux/arm64 ELF binary", fn)
		}
	}

	// Vercel's builder, on the module as a deployment uploads it.
	checkVercelOutput(t, vercelBuild(t, dir, treeFiles(t, dir, "bin", ".vercel")))

	// The README's way to a published version of the library.
	checkMoveToPublished(t, dir)

	// The local server, as `go run ./cmd/transcode` runs it.
	bin := filepath.Join(t.TempDir(), "transcode")
	runIn(t, dir, "go", "build", "-o", bin, "./cmd/transcode")
	help := runIn(t, "", bin, "--help")
	for _, want := range []string{"Usage:\n  transcode [command]", "serve", "worker", "token"} {
		if !strings.Contains(help, want) {
			t.Errorf("transcode --help lacks %q:\n%s", want, help)
		}
	}
	srv := startBinary(t, bin, nil, "serve")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var statuses []client.Status
	var asked []string
	res, err := client.New("http://"+srv.addr+"/mcp").Call(ctx, "process", map[string]any{"input": "clip.mov", "waitSeconds": 1},
		client.OnStatus(func(tk client.Task) { statuses = append(statuses, tk.Status) }),
		client.OnElicit(func(_ context.Context, _ *client.InputRequest, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			asked = append(asked, p.Message)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"go": true}}, nil
		}))
	if err != nil {
		t.Fatalf("calling process on the generated server: %v\n%s", err, srv.Log())
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "done: CLIP.MOV" {
		t.Errorf("result %q, want %q", got, "done: CLIP.MOV")
	}
	if len(asked) != 1 || !slices.Contains(statuses, client.StatusInputRequired) || statuses[len(statuses)-1] != client.StatusCompleted {
		t.Errorf("asked %q, statuses %v; want one question, input_required, then completed", asked, statuses)
	}
}

// checkReadmeInit checks that the README's block marked with
// TestInitModule is the user's way this test takes: init from the
// checkout, then in the module go mod tidy, its server (built and run as
// `go run ./cmd/transcode` does) and its tests.
func checkReadmeInit(t *testing.T) {
	t.Helper()
	blocks := markedBlocks(t, "TestInitModule", "e2e/scaffold_test.go")
	if len(blocks) != 1 || blocks[0].file != "README.md" {
		t.Fatalf("want one README block marked TestInitModule, got %q", blocks)
	}
	var got []string
	for _, l := range strings.Split(blocks[0].body, "\n") {
		if l, _, _ = strings.Cut(l, "#"); strings.TrimSpace(l) != "" {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"go run ./cmd/mcptasks init ../transcode --module example.com/transcode",
		"cd ../transcode",
		"go mod tidy",
		"go run ./cmd/transcode",
		"go test ./...",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the README's init block runs\n%s\nwhile TestInitModule checks\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// checkMoveToPublished runs, in a copy of the module made by init in dir,
// the commands its README gives to move from the copy of the library to a
// published version, against a module proxy that serves the copy as a
// release (the library is not on a public proxy), and builds the module.
func checkMoveToPublished(t *testing.T, dir string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\n(rm -rf third_party/mcptasks\n.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no commands to move to a published version:\n%s", readme)
	}
	const release = "v0.9.0"
	lib := filepath.Join(dir, "third_party", "mcptasks")
	files := map[string][]byte{}
	for _, f := range treeFiles(t, lib) {
		b, err := os.ReadFile(filepath.Join(lib, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	proxy := moduleProxy(t, "github.com/mcptasks/mcptasks", release, files)
	work := filepath.Join(t.TempDir(), "published")
	copyFiles(t, dir, work, treeFiles(t, dir, "bin", ".vercel"))
	env := append(os.Environ(), "GOPROXY=file://"+filepath.ToSlash(proxy)+","+goEnv(t, "GOPROXY"), "GONOSUMDB=github.com/mcptasks/mcptasks")
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir, cmd.Env = work, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	gomod, _ := os.ReadFile(filepath.Join(work, "go.mod"))
	if !strings.Contains(string(gomod), "github.com/mcptasks/mcptasks "+release) || strings.Contains(string(gomod), "replace") {
		t.Errorf("go.mod after the README's commands:\n%s\nwant the release required, no replace directive", gomod)
	}
	if _, err := os.Stat(filepath.Join(work, "third_party", "mcptasks")); err == nil {
		t.Error("third_party/mcptasks is still there")
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir, cmd.Env = work, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./... on the published version: %v\n%s", err, out)
	}
}

// runIn runs name args in dir (the current directory when empty) and
// returns its combined output, failing the test when it fails.
func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

func readHead(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 20)
	if _, err := f.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
