package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
)

// DefaultURL is the endpoint the commands call unless --url or
// MCPTASKS_URL says otherwise: the local server of `mcptasks serve`.
const DefaultURL = "http://" + local.DefaultAddr + "/mcp"

// Environment variables read by the commands.
const (
	EnvURL   = "MCPTASKS_URL"
	EnvToken = "MCPTASKS_TOKEN"
)

// Exit statuses besides 0, 1 (an error) and 2 (a usage error), which
// local.Program maps from the error a command returns.
const exitInterrupted = 130

// The commands, for local.Program's Commands (cmd/mcptasks lists them).
var (
	Call  = command("call", "call a tool and follow its task to the end: call [--url URL] TOOL key=value ... | --json '{...}'", (*env).call)
	Task  = command("task", "one task by its id: task get|watch|cancel|answer TASKID", (*env).task)
	Tools = command("tools", "list the tools of a server: tools [--url URL]", (*env).tools)
)

func command(name, summary string, run func(*env, context.Context, []string) error) local.Command {
	return local.Command{Name: name, Summary: summary, Run: func(ctx context.Context, args []string, stdout io.Writer) error {
		e := defaultEnv(stdout)
		return e.exitWith(run(e, ctx, args))
	}}
}

// env is what a command reads and writes besides its arguments; tests
// replace its members.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// interrupts returns a channel of the user's interrupts (Ctrl-C) and
	// a function that stops them; nil means none arrive.
	interrupts func() (<-chan os.Signal, func())
	// terminal reports whether w is a terminal, and its width in columns
	// (0 if unknown).
	terminal func(w any) (bool, int)
	// exit ends the process with a status that local.Program cannot map
	// from an error (130).
	exit func(code int)
	now  func() time.Time
	// in reads stdin line by line, started at the first prompt.
	in *lineReader
}

func defaultEnv(stdout io.Writer) *env {
	return &env{
		stdin:  os.Stdin,
		stdout: stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		interrupts: func() (<-chan os.Signal, func()) {
			ch := make(chan os.Signal, 2)
			signal.Notify(ch, os.Interrupt)
			return ch, func() { signal.Stop(ch) }
		},
		terminal: isTerminal,
		exit:     os.Exit,
		now:      time.Now,
	}
}

// exitError is an error that ends the command with a given status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// interrupted wraps err (the user interrupted the command) for exit status
// 130.
func interrupted(err error) error { return &exitError{code: exitInterrupted, err: err} }

// exitWith returns err for local.Program to report, or, for a status it
// cannot express, reports err itself and exits.
func (e *env) exitWith(err error) error {
	var x *exitError
	if errors.As(err, &x) && x.code != 1 {
		fmt.Fprintf(e.stderr, "mcptasks: %v\n", x.err)
		e.exit(x.code)
	}
	return err
}

// common are the flags of every command.
type common struct {
	url, token string
}

func (e *env) commonFlags(fs *flag.FlagSet) *common {
	c := &common{}
	def := e.getenv(EnvURL)
	if def == "" {
		def = DefaultURL
	}
	fs.StringVar(&c.url, "url", def, "the server's MCP endpoint (env "+EnvURL+")")
	// The token's default is read after parsing, so that --help never
	// prints it.
	fs.StringVar(&c.token, "token", "", "bearer token sent with every request (env "+EnvToken+")")
	return c
}

func (c *common) newClient(e *env, extra ...client.Option) *client.Client {
	opts := []client.Option{client.WithClientInfo("mcptasks", version())}
	tok := c.token
	if tok == "" {
		tok = e.getenv(EnvToken)
	}
	if tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	return client.New(c.url, append(opts, extra...)...)
}

// quickRetry bounds the retries of the commands that send one request, and
// of the first request of the others: a server that does not answer is
// reported at once, after quickAttempts attempts whatever the command, not
// after the two minutes a task's polling rides out.
var quickRetry = client.RetryPolicy{Attempts: quickAttempts, GiveUpAfter: 10 * time.Second}

// quickAttempts is how many times a command tries to reach a server that
// does not answer before it says so.
const quickAttempts = 3

// quickClient returns a client for single requests (see quickRetry).
func (c *common) quickClient(e *env) *client.Client {
	return c.newClient(e, client.WithRetry(quickRetry))
}

// parse parses args with fs, flags and positional arguments in any order
// ("--" ends the flags). A word that starts with "-" but names no flag of
// fs is an argument: task ids may start with "-". On -h or --help it
// prints usage to stdout and returns flag.ErrHelp; a bad flag value is a
// usage error.
func (e *env) parse(fs *flag.FlagSet, usage string, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			return append(pos, args[1:]...), nil
		}
		n := flagWords(fs, a)
		if n == 0 {
			pos, args = append(pos, a), args[1:]
			continue
		}
		n = min(n, len(args)) // a missing value is fs.Parse's error
		if err := fs.Parse(args[:n]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				e.usage(fs, usage)
				return nil, err
			}
			return nil, local.Usagef("%s: %v", fs.Name(), err)
		}
		args = args[n:]
	}
	return pos, nil
}

// flagWords reports how many words of the command line the flag a takes
// (1, or 2 for a flag whose value is the next word), or 0 when a is not a
// flag of fs (nor -h or --help).
func flagWords(fs *flag.FlagSet, a string) int {
	name, ok := strings.CutPrefix(a, "-")
	if !ok || name == "" {
		return 0
	}
	name = strings.TrimPrefix(name, "-")
	name, _, hasValue := strings.Cut(name, "=")
	f := fs.Lookup(name)
	switch {
	case f == nil && (name == "h" || name == "help"):
		return 1
	case f == nil:
		return 0
	case hasValue:
		return 1
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return 1
	}
	return 2
}

// unexpected is the usage error of an argument too many.
func unexpected(cmd, arg string) error {
	if strings.HasPrefix(arg, "-") {
		return local.Usagef("%s: unknown flag %s", cmd, arg)
	}
	return local.Usagef("%s: unexpected argument %q", cmd, arg)
}

// usage prints text, then the flags of fs.
func (e *env) usage(fs *flag.FlagSet, text string) {
	fmt.Fprintf(e.stdout, "%s\n\nFlags:\n", strings.TrimSpace(text))
	fs.SetOutput(e.stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// version is this binary's module version ("dev" when built from a
// checkout).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// watchInterrupts calls first on the first interrupt and second on the
// second, until stop is called.
func (e *env) watchInterrupts(first, second func()) (stop func()) {
	if e.interrupts == nil {
		return func() {}
	}
	ch, unhook := e.interrupts()
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case <-ch:
				if n == 1 {
					first()
				} else {
					second()
					return
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		unhook()
	}
}
