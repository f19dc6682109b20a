package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until s holds want.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 20s in:\n%s", want, s.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testEnv returns an env reading stdin, writing to buffers, with no
// interrupts, and seeing a terminal of 80 columns everywhere when tty is
// set.
func testEnv(stdin string, tty bool) (*env, *syncBuffer, *syncBuffer) {
	out, errb := &syncBuffer{}, &syncBuffer{}
	return &env{
		stdin:  strings.NewReader(stdin),
		stdout: out,
		stderr: errb,
		getenv: func(string) string { return "" },
		terminal: func(any) (bool, int) {
			if tty {
				return true, 80
			}
			return false, 0
		},
		exit: func(int) { panic("exit without a harness") },
		now:  time.Now,
	}, out, errb
}

func newFlagSet(name string) *flag.FlagSet { return flag.NewFlagSet(name, flag.ContinueOnError) }

// run is one command line run against url in a test.
type run struct {
	e         *env
	out, errb *syncBuffer
	sig       chan os.Signal
	code      int // the exit status
	err       error
}

// newRun prepares a command line with stdin (a pipe when stdin is
// nil, for tests that write answers as they go).
func newRun(url string, stdin io.Reader) *run {
	e, out, errb := testEnv("", false)
	if stdin != nil {
		e.stdin = stdin
	}
	r := &run{e: e, out: out, errb: errb, sig: make(chan os.Signal, 2)}
	e.getenv = func(k string) string {
		if k == EnvURL {
			return url
		}
		return ""
	}
	e.interrupts = func() (<-chan os.Signal, func()) { return r.sig, func() {} }
	e.exit = func(code int) { r.code = code }
	return r
}

// exec runs args (command first) and sets code as the program would.
func (r *run) exec(ctx context.Context, args ...string) *run {
	cmds := map[string]func(*env, context.Context, []string) error{"call": (*env).call, "task": (*env).task, "tools": (*env).tools, "inspect": (*env).inspect, "tasks": (*env).listTasks}
	err := r.e.exitWith(cmds[args[0]](r.e, ctx, args[1:]))
	r.err = err
	if r.code == 0 && err != nil {
		r.code = 1
		if errors.Is(err, local.ErrUsage) {
			r.code = 2
		}
		if errors.Is(err, flag.ErrHelp) {
			r.code = 0
		}
	}
	return r
}
