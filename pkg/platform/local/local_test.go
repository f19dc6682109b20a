package local

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/bundle"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

func program(env map[string]string, apps ...*tasks.App) (*Program, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Program{
		Name:   "mytool",
		Apps:   apps,
		Stdout: &out,
		Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
		Commands: []Command{{Name: "hello", Summary: "say hello", Run: func(_ context.Context, args []string, w io.Writer) error {
			_, err := io.WriteString(w, "hello "+strings.Join(args, " "))
			return err
		}}},
	}, &out, &errb
}

// help, -h and --help print the usage on stdout (every command, the flags
// of serve) and exit 0; nothing goes to stderr.
func TestHelp(t *testing.T) {
	t.Parallel()
	one := &tasks.App{Name: "one"}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"serve", "--help"}, {"worker", "-h"}} {
		p, out, errb := program(nil, one, &tasks.App{Name: "two"})
		err := p.Run(t.Context(), args)
		if !errors.Is(err, flag.ErrHelp) || p.exitCode(err) != 0 {
			t.Errorf("%v: err %v, exit %d; want flag.ErrHelp and 0", args, err, p.exitCode(err))
		}
		u := out.String()
		for _, want := range []string{"Usage:\n  mytool [command] [flags]", "  serve ", "  worker ", "  token ", "  hello ", "say hello", "  help ", "-addr", "-no-worker", "-app", "one, two", "MCPTASKS_ADDR"} {
			if !strings.Contains(u, want) {
				t.Errorf("%v: usage lacks %q:\n%s", args, want, u)
			}
		}
		if errb.Len() != 0 {
			t.Errorf("%v: stderr %q, want nothing", args, errb.String())
		}
	}
	// With one app there is nothing to select: no --app flag.
	p, out, _ := program(nil, one)
	_ = p.Run(t.Context(), []string{"help"})
	if strings.Contains(out.String(), "-app") {
		t.Errorf("a single-app program lists --app:\n%s", out.String())
	}
}

// A bad command line exits 2 with a hint; extra commands run.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	app := &tasks.App{Name: "one"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"serve", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"serve", "extra"}, `unexpected argument "extra"`},
		{[]string{"token"}, "token needs --sub"},
	} {
		p, _, errb := program(nil, app)
		err := p.Run(t.Context(), c.args)
		if !errors.Is(err, ErrUsage) || p.exitCode(err) != 2 {
			t.Errorf("%v: err %v, exit %d; want a usage error and 2", c.args, err, p.exitCode(err))
			continue
		}
		if s := errb.String(); !strings.Contains(s, c.want) || !strings.Contains(s, "Run 'mytool help' for usage.") {
			t.Errorf("%v: stderr %q, want %q and the hint", c.args, s, c.want)
		}
	}
	p, out, _ := program(nil, app)
	if err := p.Run(t.Context(), []string{"hello", "a", "b"}); err != nil || out.String() != "hello a b" {
		t.Errorf("extra command: %v, %q", err, out.String())
	}
}

// What serve refuses before it starts anything: an unknown app, a queue
// the local server does not consume, split processes on the embedded
// Redis, bad configuration.
func TestServeRefuses(t *testing.T) {
	t.Parallel()
	app := &tasks.App{Name: "one"}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
		code int
	}{
		{nil, []string{"serve", "--app", "nope"}, `unknown app "nope" (want one, two)`, 2},
		{map[string]string{"MCPTASKS_APP": "nope"}, []string{"serve"}, `unknown app "nope"`, 2},
		{nil, []string{"serve", "--no-worker"}, "need REDIS_URL", 1},
		{nil, []string{"worker"}, "need REDIS_URL", 1},
		{map[string]string{"REDIS_URL": "redis://127.0.0.1:1", "MCPTASKS_QUEUE": "sqs", "MCPTASKS_SQS_QUEUE_URL": "https://q"}, []string{"serve"}, "the local server consumes the Redis or Postgres queue", 1},
		{map[string]string{"MCPTASKS_LOG_LEVEL": "LOUD"}, []string{"serve"}, `MCPTASKS_LOG_LEVEL="LOUD"`, 1},
	} {
		p, _, _ := program(c.env, app, &tasks.App{Name: "two"})
		err := p.Run(t.Context(), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || p.exitCode(err) != c.code {
			t.Errorf("%v %v: err %v (exit %d), want %q and exit %d", c.env, c.args, err, p.exitCode(err), c.want, c.code)
		}
	}
}

// serve on an address another process holds fails at once with the
// listen error, workers and all, rather than hanging with its workers
// running.
func TestServeOnBusyAddressFails(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, _, _ := program(nil, &tasks.App{Name: "one"})
	done := make(chan error, 1)
	go func() { done <- p.Run(t.Context(), []string{"serve", "--addr", l.Addr().String()}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "address already in use") || p.exitCode(err) != 1 {
			t.Fatalf("serve on a busy address: %v (exit %d), want the listen error and exit 1", err, p.exitCode(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve on a busy address still running after 30s")
	}
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serveInBackground runs `serve` on the embedded Redis until the test ends.
func serveInBackground(t *testing.T, env map[string]string) string {
	t.Helper()
	addr := freeAddr(t)
	p, _, _ := program(env, &tasks.App{Name: "one"})
	p.Stderr = t.Output()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, []string{"serve", "--addr", addr}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			return addr
		}
		if i == 200 {
			t.Fatalf("serve did not come up: %v", err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// A request whose body never arrives is cut off after
// MCPTASKS_READ_TIMEOUT instead of holding a connection forever.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	addr := serveInBackground(t, map[string]string{"MCPTASKS_READ_TIMEOUT": "300ms"})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	// Generous: the server must close long before this deadline.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server held a request with a missing body for 20s")
	}
}

// Over MCPTASKS_MAX_REQUESTS requests at once, the next one gets 503 with
// Retry-After and a JSON-RPC error body at once.
func TestBusyServerAnswers503(t *testing.T) {
	t.Parallel()
	addr := serveInBackground(t, map[string]string{"MCPTASKS_MAX_REQUESTS": "1", "MCPTASKS_READ_TIMEOUT": "10s"})
	// Hold the only slot: a request whose body is still arriving.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{")
	var resp *http.Response
	for i := 0; i < 100; i++ { // until the held request has taken the slot
		resp, err = http.Post("http://"+addr+"/mcp", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		resp.Body.Close()
		time.Sleep(20 * time.Millisecond)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":-32603`) {
		t.Errorf("busy: HTTP %d, Retry-After %q, body %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// The local server keeps a read cache unless MCPTASKS_READ_CACHE says
// otherwise (the serverless platforms keep none).
func TestLocalReadCacheDefault(t *testing.T) {
	for env, want := range map[string]int{"": defaultReadCache, "0": 0, "7": 7} {
		cfg, err := bundle.FromEnv(func(k string) string {
			if k == "MCPTASKS_READ_CACHE" {
				return env
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		localDefaults(&cfg)
		if cfg.ReadCache != want {
			t.Errorf("MCPTASKS_READ_CACHE=%q: local ReadCache %d, want %d", env, cfg.ReadCache, want)
		}
	}
}
