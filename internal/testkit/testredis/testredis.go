// Package testredis gives tests a real redis-server, or a real Redis
// Cluster.
//
// [Start] launches redis-server on a free loopback port for the calling test
// and stops it when the test ends. When REDIS_URL is set it is used instead
// and nothing is started. [SharedCluster] is a Redis Cluster of three
// masters that the tests of one test binary share; [StartCluster] gives a
// test a cluster of its own to inject faults into (kill a master, stop a
// replica, wait for the failover). When the redis-server (or, for a
// cluster, redis-cli) binary is missing the test is skipped with a clear
// message, except under CI (the CI environment variable is set), where a
// missing Redis is a failure, never a silent skip. Every server dies with
// the test binary, even one that ends without running its cleanups.
package testredis

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/spawn"
	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/redis/rueidis"
)

// Start returns a redis:// URL of a running redis-server that lives as long
// as tb.
func Start(tb testing.TB) string {
	tb.Helper()
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return startRetrying(tb, lookPath(tb, "redis-server", "redis-server not found on PATH (install it: apt-get install -y redis-server, or set REDIS_URL)")).URL
}

// Server is a redis-server process of a test's own.
type Server struct {
	// URL is its redis:// URL.
	URL string
	// Process is the server process, for fault injection (SIGSTOP, kill).
	Process *os.Process
}

// StartServer starts a redis-server process of the test's own, even when
// REDIS_URL is set (fault injection needs the process), and stops it when
// the test ends. A missing redis-server skips the test, or fails it under
// CI.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	return startRetrying(tb, lookPath(tb, "redis-server", "redis-server not found on PATH (install it: apt-get install -y redis-server)"))
}

// lookPath finds the program name, or skips the test with msg (fails it
// under CI: a missing Redis is never a silent skip there).
func lookPath(tb testing.TB, name, msg string) string {
	tb.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return bin
}

func startRetrying(tb testing.TB, bin string) *Server {
	tb.Helper()
	var lastErr error
	for range 5 {
		addr, proc, err := start(tb, bin)
		if err == nil {
			return &Server{URL: "redis://" + addr, Process: proc}
		}
		lastErr = err
	}
	tb.Fatalf("testredis: %v", lastErr)
	return nil
}

// start runs one redis-server on a port that was free a moment ago; a lost
// race for the port is reported as an error so the caller can retry.
func start(tb testing.TB, bin string) (string, *os.Process, error) {
	port, err := spawn.FreePort()
	if err != nil {
		return "", nil, err
	}
	dir := tb.TempDir()
	cmd := exec.Command(bin,
		"--port", fmt.Sprint(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--protected-mode", "yes",
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := spawn.Start(cmd); err != nil {
		return "", nil, fmt.Errorf("starting redis-server: %w", err)
	}
	if err := spawn.WaitFor(stdout, "Ready to accept connections", 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("redis-server: %w", err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a test may have left it stopped
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return fmt.Sprintf("127.0.0.1:%d", port), cmd.Process, nil
}

// Backends names the Redis servers the store, queue and engine tests run
// against: a real redis-server (the production target), the embedded Redis
// of the local default (package embedredis), and a Redis Cluster of three
// masters (the test binary's [SharedCluster]: tests on it keep to keys of
// their own and scan with [ScanAll]).
func Backends() []string { return []string{"redis-server", "embedded", "cluster"} }

// Client returns a client of a Redis of the given backend (one of
// Backends), closed when tb ends: a fresh server for "redis-server" (unless
// REDIS_URL names one) and "embedded", a cluster-mode client of the shared
// cluster for "cluster".
func Client(tb testing.TB, backend string) rueidis.Client {
	tb.Helper()
	var opt rueidis.ClientOption
	switch backend {
	case "redis-server":
		return Connect(tb, Start(tb))
	case "embedded":
		s, err := embedredis.Start(nil)
		if err != nil {
			tb.Fatalf("testredis: %v", err)
		}
		tb.Cleanup(s.Close)
		opt = rueidis.ClientOption{InitAddress: []string{s.Addr()}, ForceSingleClient: true}
	case "cluster":
		return SharedCluster(tb).Client(tb)
	default:
		tb.Fatalf("testredis: unknown backend %q", backend)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		tb.Fatalf("testredis: connecting to %s: %v", backend, err)
	}
	tb.Cleanup(c.Close)
	return c
}
