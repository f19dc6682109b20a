// Package spawn starts the server processes of tests (redis-server,
// postgres) so that they die with the test binary.
package spawn

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// The servers a test binary starts must not outlive it, even when it dies
// without running its cleanups (a panic, the -timeout alarm, a kill). On
// Linux every server is started with the parent-death signal SIGKILL. The
// kernel sends that signal when the thread that forked the child exits, not
// the process, and the Go runtime may end or reuse any thread; so every
// start happens on one goroutine locked to its OS thread that never returns
// (the Go issue 27505 workaround): that thread lives exactly as long as the
// test binary. This is the package's only state shared between tests, and
// it holds no test's data.
var spawner = sync.OnceValue(func() chan<- spawnRequest {
	ch := make(chan spawnRequest)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the process
		for r := range ch {
			r.done <- r.cmd.Start()
		}
	}()
	return ch
})

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// Start starts cmd so that it is killed when the test binary exits (on
// Linux; elsewhere it is stopped by the test's cleanup only).
func Start(cmd *exec.Cmd) error {
	setParentDeathSignal(cmd)
	done := make(chan error, 1)
	spawner() <- spawnRequest{cmd, done}
	return <-done
}

// WaitFor reads out, a started process's output, until a line contains
// marker, then drains the rest in the background so that the process
// never blocks on its log. It fails when the output ends first (the
// process exited; the error holds what it wrote) or after timeout (the
// caller then stops the process).
func WaitFor(out io.Reader, marker string, timeout time.Duration) error {
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var seen strings.Builder
		for sc.Scan() {
			line := sc.Text()
			seen.WriteString(line + "\n")
			if strings.Contains(line, marker) {
				ready <- nil
				for sc.Scan() { // drain
				}
				return
			}
		}
		ready <- fmt.Errorf("exited before it was ready:\n%s", seen.String())
	}()
	select {
	case err := <-ready:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("not ready within %v", timeout)
	}
}

// FreePort returns a loopback TCP port that was free a moment ago (a
// server started on it may find it taken, and should be started again).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
