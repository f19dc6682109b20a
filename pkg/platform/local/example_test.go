package local_test

import (
	"context"
	"fmt"
	"io"

	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// app is what a tools package declares once.
var app = &tasks.App{Name: "transcode", Version: "1.0.0", Register: func(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "wait", Description: "Waits a second, durably."}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, _ struct{}) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, st.Sleep("wait", 1e9)
		})
}}

// A user's cmd/NAME/main.go is one line: the whole command line (serve,
// worker, token, help) over the user's App.
func ExampleMain() {
	_ = func() { local.Main(app) } // func main() { local.Main(tools.App) }
}

// A Program adds commands of its own to the command line.
func ExampleProgram() {
	p := &local.Program{
		Name: "transcode",
		Apps: []*tasks.App{app},
		Commands: []local.Command{{
			Name:    "version",
			Summary: "print the version",
			Run: func(_ context.Context, _ []string, out io.Writer) error {
				_, err := fmt.Fprintln(out, app.Version)
				return err
			},
		}},
	}
	_ = p.Run(context.Background(), []string{"version"})
	// Output: 1.0.0
}
