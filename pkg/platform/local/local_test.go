package local

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

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
		{map[string]string{"REDIS_URL": "redis://127.0.0.1:1", "MCPTASKS_QUEUE": "sqs", "MCPTASKS_SQS_QUEUE_URL": "https://q"}, []string{"serve"}, "the local server consumes the Redis queue", 1},
		{map[string]string{"MCPTASKS_LOG_LEVEL": "LOUD"}, []string{"serve"}, `MCPTASKS_LOG_LEVEL="LOUD"`, 1},
	} {
		p, _, _ := program(c.env, app, &tasks.App{Name: "two"})
		err := p.Run(t.Context(), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) || p.exitCode(err) != c.code {
			t.Errorf("%v %v: err %v (exit %d), want %q and exit %d", c.env, c.args, err, p.exitCode(err), c.want, c.code)
		}
	}
}
