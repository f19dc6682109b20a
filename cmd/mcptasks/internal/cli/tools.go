package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const toolsUsage = `
Usage: mcptasks tools [--url URL] [--output json]

Lists the server's tools (tools/list): each one's name, its arguments
(required ones bare, optional ones in brackets) and its description.

Whether a call becomes a task is the server's choice, call by call
(SEP-2663): a 2026-07-28 tool declares no task support, so none is listed.
mcptasks call follows a task and prints a synchronous result alike.`

func (e *env) tools(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mcptasks tools", flag.ContinueOnError)
	com := e.commonFlags(fs)
	output := fs.String("output", outputText, "text (a table) or json (the tools as tools/list answers them)")
	pos, err := e.parse(fs, toolsUsage, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return unexpected("tools", pos[0])
	}
	if err := checkOutput(*output); err != nil {
		return local.Usagef("tools: %v", err)
	}
	if err := com.checkURL("tools"); err != nil {
		return err
	}
	tools, err := com.quickClient(e).ListTools(ctx)
	if err != nil {
		return com.explain("tools", err)
	}
	if *output == outputJSON {
		if tools == nil {
			tools = []*mcp.Tool{}
		}
		return printJSON(e.stdout, tools)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tARGUMENTS\tDESCRIPTION")
	for _, t := range tools {
		desc, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
		if desc == "" {
			desc = t.Title
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", clean(t.Name, false), clean(argSummary(t.InputSchema), false), clean(desc, false))
	}
	return tw.Flush()
}

// argSummary lists a tool's arguments as name:type, optional ones in
// brackets.
func argSummary(inputSchema any) string {
	s, err := decodeSchema(inputSchema)
	if err != nil || len(s.Properties) == 0 {
		return "-"
	}
	var req, opt []string
	for _, p := range s.Properties {
		a := p.Name
		if k := p.Schema.kinds(); len(k) > 0 {
			a += ":" + strings.Join(k, "|")
		}
		if s.required(p.Name) {
			req = append(req, a)
		} else {
			opt = append(opt, "["+a+"]")
		}
	}
	return strings.Join(append(req, opt...), " ")
}
