package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeURL is the endpoint the README's examples call: the local server
// of `go run ./cmd/mcptasks`.
const readmeURL = "http://127.0.0.1:8080/mcp"

// callItBlocks returns the ```sh blocks of the README's "Call it" section,
// read from README.md now, so that the documentation cannot drift from
// what the server and the CLI do.
func callItBlocks(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "\n## Call it\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Call it" section`)
	}
	section := readme[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// runBlock runs one README block with bash, URL (its first assignment) and
// MCPTASKS_URL pointed at url, and the mcptasks under test first on PATH.
func runBlock(t *testing.T, block, url string) string {
	t.Helper()
	script := block
	if strings.Contains(block, "URL=") {
		script = strings.Replace(block, "URL="+readmeURL+"\n", "URL="+url+"\n", 1)
		if script == block {
			t.Fatalf("the block does not start from URL=%s:\n%s", readmeURL, block)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cliProcessEnv(url), "PATH="+filepath.Dir(binPath)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("README block failed: %v\n%s\noutput:\n%s", err, block, out.String())
	}
	return out.String()
}

// The "Call it" section of README.md works as written against a real
// server process: the curl commands get a task handle and then the task
// from tasks/get; the mcptasks commands call tools, detach, read and
// cancel a task.
func TestReadmeCallIt(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed (.ci/run installs it)")
		}
		t.Skip("curl is not installed")
	}
	blocks := callItBlocks(t)
	if len(blocks) != 3 {
		t.Fatalf("the Call it section has %d sh blocks, want 3 (curl, mcptasks, then curl without the extension)", len(blocks))
	}
	url := cliServer(t, "examples")

	t.Run("curl", func(t *testing.T) {
		t.Parallel()
		out := runBlock(t, blocks[0], url)
		created := regexp.MustCompile(`"resultType":"task","taskId":"([^"]+)","status":"working"`).FindStringSubmatch(out)
		if created == nil || !strings.Contains(out, `"ttlMs":`) || !strings.Contains(out, `"pollIntervalMs":`) {
			t.Fatalf("no CreateTaskResult in:\n%s", out)
		}
		got := `"resultType":"complete","taskId":"` + created[1] + `","status":"working"`
		if !strings.Contains(out, got) {
			t.Errorf("no tasks/get answer %s in:\n%s", got, out)
		}
	})
	t.Run("jobs", func(t *testing.T) {
		t.Parallel()
		out := runBlock(t, blocks[2], url)
		job := regexp.MustCompile(`"resultType":"complete","content":\[\{"type":"text","text":"slow_compute continues as background job ([^ ,]+),`).FindStringSubmatch(out)
		if job == nil || !strings.Contains(out, `"structuredContent":{"taskId":"`+job[1]+`"`) {
			t.Fatalf("no job handle in:\n%s", out)
		}
		for _, want := range []string{`Job ` + job[1] + ` (slow_compute) is still working`, `Job ` + job[1] + ` (slow_compute) is cancelled.`} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("mcptasks", func(t *testing.T) {
		t.Parallel()
		out := runBlock(t, blocks[1], url)
		for _, want := range []string{
			"NAME", "confirm_delete", // tools
			"Hello, Ada!",                // call greet
			`computed "demo" in 2s`,      // call slow_compute
			`"text": "processed 3 parts`, // --output json
			`"status": "working"`,        // task get after --detach
			": cancelled",                // task cancel
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
	})
}
