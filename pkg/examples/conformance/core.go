package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// noArgsSchema is the input schema of a tool without arguments.
func noArgsSchema() *jsonschema.Schema { return &jsonschema.Schema{Type: "object"} }

// addPlain registers an ordinary (never a task) tool without arguments.
func addPlain(srv *mcp.Server, name, description string, h mcp.ToolHandler) {
	srv.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: noArgsSchema()}, h)
}

// registerCoreTools adds the tools of the 2026-07-28 core scenarios.
func registerCoreTools(srv *mcp.Server, log *slog.Logger) {
	addPlain(srv, "about", "Describes this fixture server. Takes no arguments and always succeeds.",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("%s: the mcptasks fixture server for the MCP conformance suite (2026-07-28 and the tasks extension).", Name), nil
		})

	addPlain(srv, "test_simple_text", "Returns one text item.",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("This is a simple text response for testing."), nil
		})

	addPlain(srv, "test_image_content", "Returns one image item (a 1x1 PNG).",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.ImageContent{Data: pngBytes(), MIMEType: "image/png"},
			}}, nil
		})

	addPlain(srv, "test_audio_content", "Returns one audio item (a WAV file).",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.AudioContent{Data: wavBytes(), MIMEType: "audio/wav"},
			}}, nil
		})

	addPlain(srv, "test_embedded_resource", "Returns one embedded text resource.",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource.",
				}},
			}}, nil
		})

	addPlain(srv, "test_multiple_content_types", "Returns a text, an image and an embedded resource item.",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "Three content types follow: text, image, resource."},
				&mcp.ImageContent{Data: pngBytes(), MIMEType: "image/png"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
					URI: "test://embedded-in-multiple", MIMEType: "text/plain", Text: "An embedded resource among other content.",
				}},
			}}, nil
		})

	addPlain(srv, "test_error_handling", "Always fails with a tool-level error (isError), not a protocol error.",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return toolError("This tool intentionally fails: the error is reported in the result, with isError set."), nil
		})

	addPlain(srv, "test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 to the request's progressToken, then returns the token.",
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			if token != nil {
				for _, p := range []float64{0, 50, 100} {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: token, Progress: p, Total: 100,
						Message: fmt.Sprintf("%.0f%% done", p),
					}); err != nil {
						return nil, fmt.Errorf("sending progress: %w", err)
					}
					if err := pause(ctx, 20*time.Millisecond); err != nil {
						return nil, err
					}
				}
			}
			return text("progress reported to token %v", token), nil
		})

	addPlain(srv, "test_missing_capability", "Needs the client's sampling capability; without it the call fails with -32021 naming it.",
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if declared(req.Params.GetMeta(), "sampling") {
				return text("The client declared sampling; the tool ran."), nil
			}
			data, err := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"sampling": map[string]any{}}})
			if err != nil {
				return nil, err
			}
			return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities,
				Message: "this tool requires the client capability sampling", Data: data}
		})

	addPlain(srv, "test_streaming_elicitation", "Answers at once with a plain result: its response stream never carries a server-to-client request.",
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text("Answered without any request on the response stream."), nil
		})

	addPlain(srv, "test_logging_tool", "Logs on the server side only: no notifications/message reaches a client that did not ask for logs.",
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			log.InfoContext(ctx, "test_logging_tool called", "tool", req.Params.Name)
			return text("Logged on the server; nothing was sent to the client."), nil
		})

	srv.AddTool(&mcp.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "Declares an input schema that uses JSON Schema 2020-12 keywords ($defs, $anchor, allOf/anyOf, if/then/else); the schema is listed verbatim.",
		InputSchema: json.RawMessage(jsonSchema202012),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("json_schema_2020_12_tool called with %s", string(req.Params.Arguments)), nil
	})

	srv.AddTool(&mcp.Tool{
		Name:        "test_x_mcp_header",
		Description: "Mirrors its region argument into the Mcp-Param-Region header (SEP-2243); the transport checks that they match.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"region":{"type":"string","description":"the region, mirrored into Mcp-Param-Region","x-mcp-header":"Region"},` +
			`"level":{"type":"integer","description":"a detail level, not mirrored"}}}`),
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Region string `json:"region"`
			Level  int    `json:"level"`
		}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return toolError("invalid arguments: %v", err), nil
			}
		}
		return text("region=%s level=%d", in.Region, in.Level), nil
	})
}

// jsonSchema202012 is the SEP-1613/SEP-2106 input schema that the
// json-schema-2020-12 scenario expects to find unchanged in tools/list.
const jsonSchema202012 = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {
		"address": {
			"$anchor": "addressDef",
			"type": "object",
			"properties": {"street": {"type": "string"}, "city": {"type": "string"}}
		}
	},
	"properties": {
		"name": {"type": "string"},
		"address": {"$ref": "#/$defs/address"},
		"contactMethod": {"type": "string", "enum": ["phone", "email"]},
		"phone": {"type": "string"},
		"email": {"type": "string"}
	},
	"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
	"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
	"then": {"required": ["phone"]},
	"else": {"required": ["email"]},
	"additionalProperties": false
}`

// declared reports whether the request's per-request client capabilities
// (_meta["io.modelcontextprotocol/clientCapabilities"]) name capability.
func declared(meta map[string]any, capability string) bool {
	b, err := json.Marshal(meta["io.modelcontextprotocol/clientCapabilities"])
	if err != nil {
		return false
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(b, &caps) != nil {
		return false
	}
	v, ok := caps[capability]
	return ok && string(v) != "null"
}

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// registerPrompts adds the prompts of the core scenarios (the MRTR prompt
// is in registerInputRequired).
func registerPrompts(srv *mcp.Server) {
	user := func(c mcp.Content) *mcp.PromptMessage { return &mcp.PromptMessage{Role: "user", Content: c} }

	srv.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Title: "Simple prompt", Description: "A prompt without arguments."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "A simple prompt", Messages: []*mcp.PromptMessage{
				user(&mcp.TextContent{Text: "This is a simple prompt for testing."}),
			}}, nil
		})

	srv.AddPrompt(&mcp.Prompt{
		Name: "test_prompt_with_arguments", Title: "Prompt with arguments",
		Description: "A prompt built from two required arguments (also the completion target).",
		Arguments: []*mcp.PromptArgument{
			{Name: "arg1", Description: "the first argument", Required: true},
			{Name: "arg2", Description: "the second argument", Required: true},
		},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		return &mcp.GetPromptResult{Description: "A prompt with arguments", Messages: []*mcp.PromptMessage{
			user(&mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1=%q, arg2=%q", a["arg1"], a["arg2"])}),
		}}, nil
	})

	srv.AddPrompt(&mcp.Prompt{
		Name: "test_prompt_with_embedded_resource", Title: "Prompt with an embedded resource",
		Description: "A prompt that embeds the resource named by its argument.",
		Arguments:   []*mcp.PromptArgument{{Name: "resourceUri", Description: "the URI of the resource to embed", Required: true}},
	}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		uri := req.Params.Arguments["resourceUri"]
		if uri == "" {
			uri = "test://example-resource"
		}
		return &mcp.GetPromptResult{Description: "A prompt with an embedded resource", Messages: []*mcp.PromptMessage{
			user(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing."}}),
			user(&mcp.TextContent{Text: "Please process the embedded resource above."}),
		}}, nil
	})

	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt with an image", Description: "A prompt that includes an image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "A prompt with an image", Messages: []*mcp.PromptMessage{
				user(&mcp.ImageContent{Data: pngBytes(), MIMEType: "image/png"}),
				user(&mcp.TextContent{Text: "Please describe the image above."}),
			}}, nil
		})
}

// templateURI is the URI template of the fixture resource template.
const templateURI = "test://template/{id}/data"

// registerResources adds the static resources and the resource template.
func registerResources(srv *mcp.Server) {
	srv.AddResource(&mcp.Resource{Name: "static-text", Description: "A static text resource.",
		MIMEType: "text/plain", URI: "test://static-text"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: req.Params.URI, MIMEType: "text/plain", Text: "This is the content of the static text resource.",
			}}}, nil
		})

	srv.AddResource(&mcp.Resource{Name: "static-binary", Description: "A static binary resource (a PNG image).",
		MIMEType: "image/png", URI: "test://static-binary"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: req.Params.URI, MIMEType: "image/png", Blob: pngBytes(),
			}}}, nil
		})

	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "template", Description: "A JSON document per id.",
		MIMEType: "application/json", URITemplate: templateURI},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			id, ok := strings.CutPrefix(uri, "test://template/")
			if ok {
				id, ok = strings.CutSuffix(id, "/data")
			}
			if !ok || id == "" || strings.Contains(id, "/") {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			body, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			if err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: uri, MIMEType: "application/json", Text: string(body),
			}}}, nil
		})
}
