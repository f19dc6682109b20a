package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const callUsage = `
Usage: mcptasks call [flags] TOOL [key=value | key:=json ...]

Calls TOOL on an MCP server, declaring the tasks extension, and follows the
task the server may answer with until it ends; then prints the tool's result
on stdout. Progress and questions go to stderr.

Arguments are key=value pairs typed by the tool's input schema (tools/list):
a string property takes the value as it is, a number, integer or boolean one
parses it, anything else reads it as JSON (or as a string if it is not JSON).
key:=json always reads JSON. --json gives the arguments as one object (the
pairs go on top of it).

An input request of the task (elicitation) is asked on the terminal: answer,
decline or cancel, then each field. Ctrl-C cancels the task and waits for
the state it reaches; a second Ctrl-C stops waiting and leaves the task be.

Exit status: 0 the tool succeeded, 1 the task failed or the result is a tool
error (isError) or the call failed, 2 a bad command line, 130 interrupted.

Examples:
  mcptasks call greet name=Ada
  mcptasks call slow_compute seconds=5 label=demo
  mcptasks call batch_report --json '{"steps": 3}' --output json
  ID=$(mcptasks call slow_compute seconds=60 --detach); mcptasks task watch "$ID"`

// errInterrupted is the cause of a call the user interrupted.
var errInterrupted = errors.New("interrupted")

func (e *env) call(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcptasks call", flag.ContinueOnError)
	com := e.commonFlags(fs)
	jsonArg := fs.String("json", "", "the arguments as one JSON object")
	output := fs.String("output", outputText, "how to print the result: text (its text content) or json (the CallToolResult)")
	detach := fs.Bool("detach", false, "print the task's id (the task with --output json) as soon as it exists, and exit")
	pos, err := e.parse(fs, callUsage, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return local.Usagef("call needs a TOOL (mcptasks tools lists them)")
	}
	if err := checkOutput(*output); err != nil {
		return local.Usagef("call: %v", err)
	}
	tool, pairs := pos[0], pos[1:]
	if err := com.checkURL("call " + tool); err != nil {
		return err
	}
	prog := newProgress(e)
	c := com.client(e, prog)
	// tools/list first, with few retries: it types the arguments, and a
	// server that is not there, or has no such tool, is reported at once.
	in, raw, err := e.inputSchema(ctx, com, tool)
	if err != nil {
		return com.explain("call "+tool, err)
	}
	arguments, err := toolArgs(in, *jsonArg, pairs)
	if err != nil {
		return local.Usagef("call %s: %v", tool, err)
	}
	// The arguments are checked here, so that a tool that cannot run with
	// them is not called (the server would answer a tool error).
	if in != nil {
		problems := checkObject(in, arguments, "argument")
		if len(problems) == 0 {
			if p := validateFull(raw, arguments); p != "" {
				problems = append(problems, "the arguments do not match the tool's input schema: "+p)
			}
		}
		if len(problems) > 0 {
			return local.Usagef("call %s: %s\nusage: %s", tool, strings.Join(problems, "; "), usageLine(tool, in))
		}
	}
	ask := e.asker(prog)
	explain := func(err error) error { return com.explain("call "+tool, err) }
	if *detach {
		return explain(e.startDetached(ctx, c, tool, arguments, ask, *output))
	}
	return e.follow(ctx, prog, followOptions{what: "calling " + tool, tool: tool, cancel: true, format: *output, explain: explain},
		func(ctx context.Context, opts ...client.CallOption) (*mcp.CallToolResult, error) {
			return c.Call(ctx, tool, arguments, opts...)
		})
}

// inputSchema returns the input schema of tool from tools/list, decoded
// and raw: nil when the server answers tools/list with an error (the
// arguments are then read without their types and sent unchecked), an
// error when it does not answer or has no such tool.
func (e *env) inputSchema(ctx context.Context, com *common, tool string) (*schema, any, error) {
	tools, err := com.quickClient(e).ListTools(ctx)
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return nil, nil, nil // the arguments are read without their types
		}
		return nil, nil, err
	}
	for _, t := range tools {
		if t.Name == tool {
			s, err := decodeSchema(t.InputSchema)
			if err != nil {
				return nil, nil, nil
			}
			return s, t.InputSchema, nil
		}
	}
	return nil, nil, fmt.Errorf("the server has no tool %q (mcptasks tools lists them)", tool)
}

// startDetached calls tool and prints the task's id as soon as the task
// exists (or the result, if the server answered at once).
func (e *env) startDetached(ctx context.Context, c *client.Client, tool string, args map[string]any, ask *asker, format string) error {
	task, res, err := c.Start(ctx, tool, args, client.OnInput(ask.input))
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(err)
		}
		return err
	}
	if res != nil {
		return e.result(tool, res, format)
	}
	if format == outputJSON {
		return printJSON(e.stdout, toWire(task))
	}
	if live, _ := e.terminal(e.stderr); live {
		fmt.Fprintf(e.stderr, "task %s is %s; follow it with: mcptasks task watch %s\n", task.ID, task.Status, task.ID)
	}
	_, err = fmt.Fprintln(e.stdout, task.ID)
	return err
}

// followOptions say how a call or a watch follows its task.
type followOptions struct {
	what   string // what the live line says before the task exists
	tool   string // the tool called, if known
	cancel bool   // an interrupt cancels the task (call), or only stops waiting (watch)
	format string
	// explain rewords an error reaching the server (see common.explain).
	explain func(error) error
}

// follow runs run (a Call or a Resume) with progress, prompts and
// interrupts wired in, and turns its outcome into output and an exit
// status.
func (e *env) follow(ctx context.Context, prog *progress, f followOptions, run func(context.Context, ...client.CallOption) (*mcp.CallToolResult, error)) error {
	detachCtx, detach := context.WithCancelCause(context.Background())
	defer detach(nil)
	callCtx, cancelCall := context.WithCancelCause(ctx)
	defer cancelCall(nil)
	first, second := func() {
		prog.note("cancelling the task: Ctrl-C again to stop waiting")
		cancelCall(errInterrupted)
	}, func() { detach(errInterrupted) }
	if !f.cancel {
		// A watch never cancels the task: an interrupt (or the end of
		// ctx) only stops waiting.
		callCtx = context.WithoutCancel(ctx)
		unhook := context.AfterFunc(ctx, func() { detach(errInterrupted) })
		defer unhook()
		first = second
	}
	stop := e.watchInterrupts(first, second)
	defer stop()

	prog.begin(f.what)
	res, err := run(callCtx, client.OnStatus(prog.update), client.OnInput(e.asker(prog).input), client.Detach(detachCtx))
	prog.stop()
	if err == nil {
		return e.result(f.tool, res, f.format)
	}
	var te *client.TaskError
	if !errors.As(err, &te) || te.Task == nil || te.Task.ID == "" {
		if callCtx.Err() != nil || detachCtx.Err() != nil {
			return interrupted(err)
		}
		if f.explain != nil {
			return f.explain(err)
		}
		return err
	}
	t := te.Task
	switch {
	case errors.Is(err, client.ErrDetached):
		return interrupted(fmt.Errorf("stopped waiting for task %s (%s); follow it with: mcptasks task watch %s", t.ID, t.Status, t.ID))
	case t.Status == client.StatusCompleted && t.Result != nil:
		// Cancelled too late: the task completed first.
		return e.result(f.tool, t.Result, f.format)
	case t.Status == client.StatusFailed:
		if f.format == outputJSON && t.Error != nil {
			_ = printJSON(e.stdout, t.Error)
		}
		return err
	case t.Status == client.StatusCancelled && callCtx.Err() != nil:
		return interrupted(fmt.Errorf("task %s cancelled", t.ID))
	case errors.Is(err, client.ErrInputRequired) || errors.Is(err, errNoInput):
		return fmt.Errorf("%v\nanswer it with: mcptasks task answer %s, then follow it with: mcptasks task watch %s", err, t.ID, t.ID)
	case callCtx.Err() != nil:
		return interrupted(err)
	}
	return err
}

// result prints a tool's result; a tool error (isError) is printed too,
// and is an error. A server that refused the arguments answers a tool
// error too, although the tool never ran: that one is said so, not
// printed as a result.
func (e *env) result(tool string, res *mcp.CallToolResult, format string) error {
	if msg, ok := refusedArguments(res); ok && format == outputText {
		return local.Usagef("call %s: the server refused the arguments, and the tool did not run: %s", tool, msg)
	}
	if err := printResult(e.stdout, res, format); err != nil {
		return err
	}
	if res.IsError {
		if tool == "" {
			return errors.New("the tool reported an error (isError)")
		}
		return fmt.Errorf("%s reported an error (isError)", tool)
	}
	return nil
}

// refusedArguments reports whether res is the tool error a server answers
// for arguments its input schema refuses (the go-sdk and mcptasks both say
// `validating "arguments": ...`), and its message.
func refusedArguments(res *mcp.CallToolResult) (string, bool) {
	if !res.IsError || len(res.Content) != 1 {
		return "", false
	}
	t, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return "", false
	}
	msg, ok := strings.CutPrefix(t.Text, `validating "arguments": `)
	return strings.TrimPrefix(msg, "validating root: "), ok
}

// client returns a client of the endpoint; its retries are reported on
// prog.
func (c *common) client(e *env, prog *progress) *client.Client {
	return c.newClient(e, client.WithLogger(slog.New(slog.NewTextHandler(noteWriter{prog}, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey) {
				return slog.Attr{}
			}
			return a
		},
	}))))
}

// noteWriter writes log records as notes of the progress display.
type noteWriter struct{ p *progress }

func (w noteWriter) Write(b []byte) (int, error) {
	w.p.note("%s", clean(strings.TrimRight(string(b), "\n"), false))
	return len(b), nil
}
