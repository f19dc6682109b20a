package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/internal/testkit/testredis"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

type task = mcptest.Task

var (
	newClient = mcptest.NewClient
	terminal  = mcptest.Terminal
)

// binPath is the mcptasks binary built once for the package by TestMain.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcptasks-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "mcptasks")
	build := exec.Command("go", "build", "-race", "-o", binPath, "../cmd/mcptasks")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cmd/mcptasks:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running mcptasks process.
type proc struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
}

// Log returns what the process has written to stderr so far.
func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// redisKinds are the Redis servers a split deployment (`serve --no-worker`
// and worker processes) is tested on: one redis-server, and a Redis
// Cluster of three masters.
var redisKinds = []string{"redis-server", "cluster"}

// redisEnv returns the environment that points a deployment's processes at
// a Redis of kind (one of redisKinds): a redis-server of the test's own, or
// the package's shared cluster (testredis.SharedCluster) under a key
// prefix of the test's own.
func redisEnv(t *testing.T, kind string) []string {
	t.Helper()
	switch kind {
	case "redis-server":
		return []string{"REDIS_URL=" + testredis.Start(t)}
	case "cluster":
		return []string{"REDIS_URL=" + testredis.SharedCluster(t).URL, "MCPTASKS_KEY_PREFIX=e2e" + driver.NewID() + ":"}
	}
	t.Fatalf("unknown Redis kind %q", kind)
	return nil
}

// storeKinds are redisKinds and PostgreSQL: the stores a split deployment
// is tested on where a test is cheap enough to run on each.
var storeKinds = append(slices.Clone(redisKinds), "postgres")

// storeEnv is redisEnv for the kinds of storeKinds: "postgres" points the
// processes at a PostgreSQL server of the test's own (testpg.Start), or
// DATABASE_URL under a schema of the test's own, for the Postgres store
// and queue.
func storeEnv(t *testing.T, kind string) []string {
	t.Helper()
	if kind != "postgres" {
		return redisEnv(t, kind)
	}
	url := testpg.Start(t)
	return []string{"MCPTASKS_STORE=postgres", "DATABASE_URL=" + url, "MCPTASKS_PG_SCHEMA=" + testpg.Schema(t, url)}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs `mcptasks args...` with env added to the environment. For a
// serving process it waits until /healthz answers.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, binPath, env, args...)
}

// startBinary is start for another binary with mcptasks' command line (a
// generated module's server).
func startBinary(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startTo(t, bin, nil, env, args...)
}

// startTo is startBinary with the process's stdout written to stdout (nil:
// discarded). A serving process whose free address was taken before it
// listened (another process got the port meanwhile) is started again on
// another.
func startTo(t *testing.T, bin string, stdout io.Writer, env []string, args ...string) *proc {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p, portTaken := launch(t, bin, stdout, env, args...)
		if !portTaken {
			return p
		}
		if attempt == 3 {
			t.Fatalf("mcptasks found its port taken %d times:\n%s", attempt, p.Log())
		}
		t.Logf("mcptasks %v: its port was taken; starting it on another", args)
	}
}

// launch is one attempt of startTo; portTaken reports a serving process
// that could not listen on its address, which it has killed.
func launch(t *testing.T, bin string, stdout io.Writer, env []string, args ...string) (_ *proc, portTaken bool) {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	serving := len(args) == 0 || args[0] == "serve"
	if serving {
		p.addr = freeAddr(t)
		args = append(args, "--addr", p.addr)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Env = append(p.cmd.Env, "MCPTASKS_LOG_LEVEL=DEBUG")
	p.cmd.Stdout = stdout
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.Kill()
		}
		if t.Failed() {
			t.Logf("mcptasks %v log:\n%s", args, p.Log())
		}
	})
	if serving {
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get("http://" + p.addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if strings.Contains(p.Log(), "bind: address already in use") {
				p.Kill()
				return p, true
			}
			select {
			case <-p.done:
				t.Fatalf("mcptasks exited before serving:\n%s", p.Log())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("mcptasks did not serve within 60s:\n%s", p.Log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return p, false
}
