package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The npm projects (package.json, package-lock.json) of the real
// TypeScript clients the tests drive, each with its scripts.
const (
	// tsClientDir holds the TypeScript SDK 1.x client.
	tsClientDir = "tsclient"
	// tsClient2Dir holds the TypeScript SDK 2.x Client and the official
	// tasks requester, @modelcontextprotocol/ext-tasks.
	tsClient2Dir = "tsclient2"
)

// nodeProject returns the node binary, with the npm project in dir
// installed as its lockfile pins it (npm ci when a dependency is missing
// or of another version than package.json pins). Without node or npm the
// test is skipped, or fails under CI.
func nodeProject(t *testing.T, dir string) string {
	t.Helper()
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node and npm are needed for the TypeScript clients (apt-get install -y nodejs npm)")
		}
		t.Skip("node or npm not found on PATH")
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil || len(pkg.Dependencies) == 0 {
		t.Fatalf("reading %s/package.json: %v (dependencies %v)", dir, err, pkg.Dependencies)
	}
	for name, want := range pkg.Dependencies {
		var installed struct {
			Version string `json:"version"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json")); err == nil {
			_ = json.Unmarshal(b, &installed)
		}
		if installed.Version == want {
			continue
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
		break
	}
	return node
}

// runNode runs `node script` in the npm project dir (installed by
// nodeProject) with env added to the environment, killing it after
// within, and returns the last line of its stdout: the script's JSON
// report. A script that fails fails the test with its output.
func runNode(t *testing.T, dir, script string, within time.Duration, env ...string) []byte {
	t.Helper()
	node := nodeProject(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s/%s: %v\nstderr:\n%s\nstdout:\n%s", dir, script, err, stderr.String(), stdout.String())
	}
	t.Logf("%s/%s:\n%s", dir, script, stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return []byte(lines[len(lines)-1])
}
