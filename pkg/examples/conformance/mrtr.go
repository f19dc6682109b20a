package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// noArgs is the input of a fixture that takes no arguments.
type noArgs struct{}

// nameForm is what the fixtures that ask for a name elicit.
type nameForm struct {
	Name string `json:"name" jsonschema:"your name"`
}

// colorForm is what the second round of the multi-round fixture elicits.
type colorForm struct {
	Color string `json:"color" jsonschema:"your favorite color"`
}

// okForm is a yes/no confirmation.
type okForm struct {
	OK bool `json:"ok" jsonschema:"true to go on"`
}

// samplingRequest is the params of a sampling/createMessage input request,
// as plain wire data.
type samplingRequest struct {
	Messages  []samplingMessage `json:"messages"`
	MaxTokens int               `json:"maxTokens"`
}

type samplingMessage struct {
	Role    string       `json:"role"`
	Content samplingText `json:"content"`
}

type samplingText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// samplingAnswer is the part of a sampling response the fixtures read.
type samplingAnswer struct {
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
}

// rootsAnswer is a roots/list response.
type rootsAnswer struct {
	Roots []struct {
		URI  string `json:"uri"`
		Name string `json:"name,omitempty"`
	} `json:"roots"`
}

func askSampling(question string) tasks.InputRequest {
	return tasks.InputRequest{Method: "sampling/createMessage", Params: samplingRequest{
		Messages:  []samplingMessage{{Role: "user", Content: samplingText{Type: "text", Text: question}}},
		MaxTokens: 100,
	}}
}

func askRoots() tasks.InputRequest {
	return tasks.InputRequest{Method: "roots/list", Params: map[string]any{}}
}

func askElicit(message string, schema any) tasks.InputRequest {
	return tasks.InputRequest{Method: "elicitation/create",
		Params: &mcp.ElicitParams{Mode: "form", Message: message, RequestedSchema: schema}}
}

func schemaFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("conformance: inferring a schema: %v", err))
	}
	return s
}

// decodeElicit decodes an elicitation response.
func decodeElicit[T any](raw json.RawMessage) (tasks.ElicitResult[T], error) {
	var r tasks.ElicitResult[T]
	err := json.Unmarshal(raw, &r)
	return r, err
}

// registerInputRequired adds the SEP-2322 (MRTR) fixtures. Most are task
// tools with optional task support: the conformance client does not declare
// the tasks extension, so their input steps run inline, and every round but
// the last answers with an InputRequiredResult whose signed requestState
// carries the steps taken so far. Only the capability-aware tool (which
// reads the request's client capabilities) and the prompt are plain go-sdk
// handlers.
func registerInputRequired(s *tasks.Server) {
	tasks.AddTool(s, &mcp.Tool{Name: "test_input_required_result_elicitation",
		Description: "MRTR: asks for the caller's name (input key user_name), then greets them."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			ans, err := tasks.Elicit[nameForm](st, "user_name", "What is your name?")
			if err != nil {
				return nil, err
			}
			if !ans.Accepted() || ans.Content.Name == "" {
				return toolError("no name was given (action %q)", ans.Action), nil
			}
			return text("Hello, %s!", ans.Content.Name), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "test_input_required_result_sampling",
		Description: "MRTR: asks the client's model a question (sampling/createMessage), then reports the answer."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			resp, err := st.Input("ask-model", map[string]tasks.InputRequest{
				"capital_question": askSampling("What is the capital of France?"),
			})
			if err != nil {
				return nil, err
			}
			var a samplingAnswer
			if err := json.Unmarshal(resp["capital_question"], &a); err != nil {
				return toolError("unreadable sampling response: %v", err), nil
			}
			return text("The model %q answered: %s", a.Model, string(a.Content)), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "test_input_required_result_list_roots",
		Description: "MRTR: asks for the client's roots (roots/list), then lists them."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			resp, err := st.Input("roots", map[string]tasks.InputRequest{"client_roots": askRoots()})
			if err != nil {
				return nil, err
			}
			var a rootsAnswer
			if err := json.Unmarshal(resp["client_roots"], &a); err != nil {
				return toolError("unreadable roots response: %v", err), nil
			}
			uris := make([]string, len(a.Roots))
			for i, r := range a.Roots {
				uris[i] = r.URI
			}
			return text("The client exposes %d root(s): %s", len(uris), strings.Join(uris, ", ")), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "test_input_required_result_request_state",
		Description: "MRTR: asks for a confirmation; the retry must echo the signed requestState."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			ans, err := tasks.Elicit[okForm](st, "confirm", "Please confirm")
			if err != nil {
				return nil, err
			}
			return text("confirmation received: action=%s ok=%t", ans.Action, ans.Content.OK), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "test_input_required_result_multiple_inputs",
		Description: "MRTR: asks for an elicitation, a sampling and a roots/list answer in one round."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			resp, err := st.Input("introductions", map[string]tasks.InputRequest{
				"user_name":    askElicit("What is your name?", schemaFor[nameForm]()),
				"greeting":     askSampling("Write a one-line greeting."),
				"client_roots": askRoots(),
			})
			if err != nil {
				return nil, err
			}
			name, err := decodeElicit[nameForm](resp["user_name"])
			if err != nil {
				return toolError("unreadable elicitation response: %v", err), nil
			}
			var greeting samplingAnswer
			var roots rootsAnswer
			if err := json.Unmarshal(resp["greeting"], &greeting); err != nil {
				return toolError("unreadable sampling response: %v", err), nil
			}
			if err := json.Unmarshal(resp["client_roots"], &roots); err != nil {
				return toolError("unreadable roots response: %v", err), nil
			}
			return text("%s, greeted by %q, with %d root(s) visible", name.Content.Name, greeting.Model, len(roots.Roots)), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "test_input_required_result_multi_round",
		Description: "MRTR: two elicitation rounds (name, then favorite color), each with a new requestState."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			name, err := tasks.Elicit[nameForm](st, "name", "Round 1: what is your name?")
			if err != nil {
				return nil, err
			}
			color, err := tasks.Elicit[colorForm](st, "color", fmt.Sprintf("Round 2: %s, what is your favorite color?", name.Content.Name))
			if err != nil {
				return nil, err
			}
			return text("Multi-round complete: %s likes %s", name.Content.Name, color.Content.Color), nil
		})

	tasks.AddTool(s, &mcp.Tool{Name: "test_input_required_result_tampered_state",
		Description: "MRTR: asks for a confirmation; a retry whose requestState was altered is rejected (it is HMAC-signed)."},
		tasks.Optional, func(_ context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			ans, err := tasks.Elicit[okForm](st, "confirm", "Please confirm")
			if err != nil {
				return nil, err
			}
			return text("requestState verified; action=%s", ans.Action), nil
		})

	s.MCP().AddTool(&mcp.Tool{Name: "test_input_required_result_capabilities",
		Description: "MRTR: asks only for the kinds of input the client's declared capabilities cover.",
		InputSchema: noArgsSchema()}, capabilityAwareInput)

	s.MCP().AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt",
		Description: "MRTR on prompts/get: asks for context (input key user_context), then builds the prompt."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if r, ok := req.Params.InputResponses["user_context"].(*mcp.ElicitResult); ok && r.Action == "accept" {
				c, _ := r.Content["context"].(string)
				return &mcp.GetPromptResult{Description: "A prompt with elicited context", Messages: []*mcp.PromptMessage{
					{Role: "user", Content: &mcp.TextContent{Text: "Context: " + c}},
				}}, nil
			}
			return &mcp.GetPromptResult{InputRequests: mcp.InputRequestMap{
				"user_context": &mcp.ElicitParams{Message: "Please provide context for the prompt",
					RequestedSchema: &jsonschema.Schema{Type: "object",
						Properties: map[string]*jsonschema.Schema{"context": {Type: "string"}},
						Required:   []string{"context"}}},
			}}, nil
		})
}

// capabilityAwareInput asks for a name by elicitation and for a greeting by
// sampling, each only if the request's client capabilities declare it.
func capabilityAwareInput(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if len(req.Params.InputResponses) > 0 {
		return text("Received %d input response(s).", len(req.Params.InputResponses)), nil
	}
	meta := req.Params.GetMeta()
	reqs := mcp.InputRequestMap{}
	if declared(meta, "elicitation") {
		reqs["user_name"] = &mcp.ElicitParams{Mode: "form", Message: "What is your name?", RequestedSchema: schemaFor[nameForm]()}
	}
	if declared(meta, "sampling") {
		//lint:ignore SA1019 sampling is deprecated in 2026-07-28, but this fixture must ask for it when declared.
		reqs["greeting"] = &mcp.CreateMessageParams{
			//lint:ignore SA1019 see above.
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Write a one-line greeting."}}},
			MaxTokens: 50,
		}
	}
	if len(reqs) == 0 {
		return text("The client declared no capability that an input request could use."), nil
	}
	return &mcp.CallToolResult{InputRequests: reqs}, nil
}
