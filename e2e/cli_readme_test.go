package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeURL is the endpoint the README's examples call: the local server
// of `go run ./cmd/mcptasks`.
const readmeURL = "http://127.0.0.1:8080/mcp"

// docBlock is one ```sh block of README.md or docs/*.md.
type docBlock struct {
	file string // relative to the repository
	body string
}

// markerRE matches a block marked with the test that runs it (as
// docs/docs_test.go requires of every block of commands): the markers
// right above the opening fence, then the block.
var markerRE = regexp.MustCompile("(?s)((?:<!-- test: [^\n]* -->\n)+)```sh\n(.*?)\n```\n")

// markedBlocks returns the ```sh blocks of README.md and docs/*.md whose
// markers name test of file (e2e/cli_readme_test.go when none is given),
// read from the files now, so that the documentation cannot drift from
// what the server and the CLI do: a block marked for a test is a block
// that test runs.
func markedBlocks(t *testing.T, test string, file ...string) []docBlock {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	in := "e2e/cli_readme_test.go"
	if len(file) > 0 {
		in = file[0]
	}
	want := "<!-- test: " + in + " " + test + " -->\n"
	var blocks []docBlock
	for _, f := range append([]string{filepath.Join(root, "README.md")}, files...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range markerRE.FindAllStringSubmatch(string(raw), -1) {
			if strings.Contains(m[1], want) {
				blocks = append(blocks, docBlock{file: filepath.ToSlash(rel), body: m[2]})
			}
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("no ```sh block of README.md or docs/*.md is marked %q", strings.TrimSpace(want))
	}
	return blocks
}

// blockCmd is the bash process that runs one documentation block: in its
// own process group, so that what the block starts in the background
// ends with it, with the mcptasks under test first on PATH.
func blockCmd(ctx context.Context, t *testing.T, script string, env []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(env, "PATH="+filepath.Dir(binPath)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runBlock runs one documentation block with bash, URL (its first
// assignment) and MCPTASKS_URL pointed at url, and returns its output.
func runBlock(t *testing.T, b docBlock, url string) string {
	t.Helper()
	script := b.body
	if strings.Contains(b.body, "URL=") {
		script = strings.Replace(b.body, "URL="+readmeURL+"\n", "URL="+url+"\n", 1)
		if script == b.body {
			t.Fatalf("the block of %s does not start from URL=%s:\n%s", b.file, readmeURL, b.body)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := blockCmd(ctx, t, script, cliProcessEnv(url))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the block of %s failed: %v\n%s\noutput:\n%s", b.file, err, b.body, out.String())
	}
	return out.String()
}

// TestReadmeRunIt runs the README's "Run it" block as written, `go run
// ./cmd/mcptasks` from the repository (on a free address through
// MCPTASKS_ADDR), and finds the example tools served on the embedded
// store: a task of slow_compute completes.
func TestReadmeRunIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/mcptasks with go run")
	}
	blocks := markedBlocks(t, "TestReadmeRunIt")
	if len(blocks) != 1 || blocks[0].file != "README.md" || strings.TrimSpace(blocks[0].body) != "go run ./cmd/mcptasks" {
		t.Fatalf("want the one README block `go run ./cmd/mcptasks`, got %q", blocks)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := blockCmd(ctx, t, blocks[0].body, append(os.Environ(), "MCPTASKS_ADDR="+addr))
	cmd.Dir = root
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("go run ./cmd/mcptasks exited before serving: %v\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("go run ./cmd/mcptasks did not serve on %s:\n%s", addr, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	url := "http://" + addr + "/mcp"
	runCLI(t, url, "", "tools").expect(t, 0, "slow_compute", "confirm_delete", "greet")
	runCLI(t, url, "", "call", "slow_compute", "seconds=1", "label=run-it").expect(t, 0, `computed "run-it" in 1s`)
}

// TestReadmeCallIt runs, against a real server process, the blocks of
// the README's "Call it" section and of docs/protocol.md marked with it:
// the curl commands get a task handle and then the task from tasks/get;
// the mcptasks commands call tools, detach, read and cancel a task; curl
// without the extension gets a background job and follows it with tool
// calls; curl listens to a task to its end.
func TestReadmeCallIt(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed (.ci/run installs it)")
		}
		t.Skip("curl is not installed")
	}
	// Each block, known by what it does; a block marked for this test
	// that it does not know is an error.
	kinds := map[string]docBlock{}
	for _, b := range markedBlocks(t, "TestReadmeCallIt") {
		var kind string
		switch {
		case strings.Contains(b.body, "subscriptions/listen"):
			kind = "listen"
		case strings.Contains(b.body, "task_status"):
			kind = "jobs"
		case strings.HasPrefix(b.body, "mcptasks tools"):
			kind = "mcptasks"
		case strings.Contains(b.body, "curl") && strings.Contains(b.body, "tasks/get"):
			kind = "curl"
		default:
			t.Fatalf("a block of %s is marked TestReadmeCallIt, which does not know how to check it:\n%s", b.file, b.body)
		}
		if _, dup := kinds[kind]; dup {
			t.Fatalf("two %s blocks are marked TestReadmeCallIt", kind)
		}
		kinds[kind] = b
	}
	for kind, file := range map[string]string{"curl": "README.md", "mcptasks": "README.md", "jobs": "docs/protocol.md", "listen": "docs/protocol.md"} {
		if kinds[kind].file != file {
			t.Fatalf("want the %s block in %s, marked TestReadmeCallIt; found %q", kind, file, kinds[kind].file)
		}
	}
	url := cliServer(t, "examples")

	t.Run("curl", func(t *testing.T) {
		t.Parallel()
		out := runBlock(t, kinds["curl"], url)
		created := regexp.MustCompile(`"resultType":"task","taskId":"([^"]+)","status":"working"`).FindStringSubmatch(out)
		if created == nil || !strings.Contains(out, `"ttlMs":`) || !strings.Contains(out, `"pollIntervalMs":`) {
			t.Fatalf("no CreateTaskResult in:\n%s", out)
		}
		// As the README says: resultType is the result's family, status the task's.
		got := `"resultType":"complete","taskId":"` + created[1] + `","status":"working"`
		if !strings.Contains(out, got) {
			t.Errorf("no tasks/get answer %s in:\n%s", got, out)
		}
	})
	t.Run("jobs", func(t *testing.T) {
		t.Parallel()
		out := runBlock(t, kinds["jobs"], url)
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
		out := runBlock(t, kinds["mcptasks"], url)
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
	t.Run("listen", func(t *testing.T) {
		t.Parallel()
		out := runBlock(t, kinds["listen"], url)
		for _, want := range []string{
			`"method":"notifications/subscriptions/acknowledged"`,
			`"method":"notifications/tasks"`,
			`"status":"completed"`,
			`computed`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the listen stream lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestDocsSecurityToken runs docs/security.md's block as written, with
// its address (127.0.0.1:8080) replaced by a free one: a server with auth
// on, started in the background, answers a call with a token that
// `mcptasks token` minted and refuses one without.
func TestDocsSecurityToken(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed (.ci/run installs it)")
		}
		t.Skip("curl is not installed")
	}
	blocks := markedBlocks(t, "TestDocsSecurityToken")
	if len(blocks) != 1 || blocks[0].file != "docs/security.md" || !strings.Contains(blocks[0].body, "127.0.0.1:8080") {
		t.Fatalf("want one block of docs/security.md on 127.0.0.1:8080, got %q", blocks)
	}
	addr := freeAddr(t)
	script := strings.ReplaceAll(blocks[0].body, "127.0.0.1:8080", addr)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := blockCmd(ctx, t, script, append(cliProcessEnv("http://"+addr+"/mcp"), "MCPTASKS_ADDR="+addr))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the block left running
	if err != nil {
		t.Fatalf("the block failed: %v\n%s\noutput:\n%s", err, script, out.String())
	}
	for _, want := range []string{"Hello, Alice!", "refused"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "Hello, Alice!"); n != 1 {
		t.Errorf("greeted %d times, want once (the call without a token refused):\n%s", n, out.String())
	}
}
