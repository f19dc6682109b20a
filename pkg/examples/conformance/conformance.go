// Package conformance is the fixture server of the official MCP conformance
// suite (@modelcontextprotocol/conformance), protocol revision 2026-07-28
// plus the io.modelcontextprotocol/tasks extension.
//
// It registers, on the project's public API only, every tool, prompt,
// resource and completion the suite looks for:
//
//   - the core fixtures (test_simple_text, test_tool_with_progress,
//     test_missing_capability, the test_* prompts, test://static-text, ...),
//     as ordinary go-sdk tools, prompts and resources;
//   - the MRTR fixtures test_input_required_result_*, most of them as task
//     tools with optional task support, whose input steps run inline over
//     MRTR rounds for a client without the tasks extension;
//   - the tasks fixtures (greet, slow_compute, failing_job,
//     protocol_error_job, confirm_delete, multi_input, test_tool_with_task):
//     real durable task tools on the Step API that sleep, ask for input and
//     fail the way the suite expects. Nothing in the protocol layer knows
//     about them.
//
// Serve it with `mcptasks serve --app conformance` and run
// scripts/conformance.
package conformance

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name is the server name the fixture server reports (mcptasks --app
// conformance, MCPTASKS_APP=conformance).
const Name = "conformance"

// App is the fixture deployment. It advertises tools, prompts, resources
// and completions without listChanged or subscribe (the server implements
// no subscriptions/listen streams), plus the tasks extension that package
// tasks adds.
var App = newApp()

func newApp() *tasks.App {
	return &tasks.App{
		Name:    Name,
		Title:   "mcptasks conformance fixtures",
		Version: "0.2.0",
		ServerOptions: &mcp.ServerOptions{
			Instructions: "Fixture server for the MCP conformance suite, with durable tasks.",
			Capabilities: &mcp.ServerCapabilities{
				Tools:       &mcp.ToolCapabilities{},
				Prompts:     &mcp.PromptCapabilities{},
				Resources:   &mcp.ResourceCapabilities{},
				Completions: &mcp.CompletionCapabilities{},
			},
			CompletionHandler: complete,
		},
		Register: Register,
	}
}

// Register adds every fixture to s. The go-sdk lists tools sorted by name;
// the first one, "about", takes no arguments and no capabilities, because
// the header-validation scenario calls the first listed tool with {}.
func Register(s *tasks.Server) {
	registerCoreTools(s.MCP(), s.Options().Logger)
	registerPrompts(s.MCP())
	registerResources(s.MCP())
	registerInputRequired(s)
	registerTaskFixtures(s)
}

// complete answers completion/complete: argument values of the fixture
// prompts and of the resource template that start with the typed prefix.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	var candidates []string
	if ref := req.Params.Ref; ref != nil {
		switch {
		case ref.Type == "ref/prompt" && ref.Name == "test_prompt_with_arguments":
			candidates = []string{"test", "testValue1", "testValue2", "value"}
		case ref.Type == "ref/prompt" && ref.Name == "test_prompt_with_embedded_resource":
			candidates = []string{"test://example-resource", "test://static-text", "test://static-binary"}
		case ref.Type == "ref/resource" && ref.URI == templateURI:
			candidates = []string{"1", "42", "123"}
		}
	}
	values := []string{}
	for _, c := range candidates {
		if strings.HasPrefix(c, req.Params.Argument.Value) {
			values = append(values, c)
		}
	}
	slices.Sort(values)
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}

// Base64 of the media the fixtures return.
const (
	// pngBase64 is a 1x1 red PNG.
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	// wavBase64 is a WAV file holding one silent sample.
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

func mustDecode(b64 string) []byte {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		panic(fmt.Sprintf("conformance: bad embedded media: %v", err))
	}
	return b
}

func pngBytes() []byte { return mustDecode(pngBase64) }
func wavBytes() []byte { return mustDecode(wavBase64) }

// text is a CallToolResult with one text item.
func text(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// toolError is a tool-level error result (isError), not a protocol error.
func toolError(format string, args ...any) *mcp.CallToolResult {
	r := text(format, args...)
	r.IsError = true
	return r
}
