package tasks

import "github.com/modelcontextprotocol/go-sdk/mcp"

// The go-sdk sets resultType only on results of its own tool handlers.
// tools/call answers produced in the receiving middleware (argument errors,
// GatherInputFirst rounds, a preflight that finished) are rendered here
// with the shape the go-sdk would have given them.

// inputRequiredResult is the SEP-2322 InputRequiredResult of a tools/call.
type inputRequiredResult struct {
	mcp.ResultBase
	ResultType    string              `json:"resultType"`
	InputRequests mcp.InputRequestMap `json:"inputRequests"`
	RequestState  string              `json:"requestState,omitempty"`
}

// completeCallResult is a final CallToolResult with resultType "complete"
// and content never null.
type completeCallResult struct {
	mcp.ResultBase
	ResultType        string        `json:"resultType"`
	Content           []mcp.Content `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

// middlewareCallResult gives a *mcp.CallToolResult returned by the
// receiving middleware its wire shape; other results pass unchanged.
func middlewareCallResult(res mcp.Result) mcp.Result {
	c, ok := res.(*mcp.CallToolResult)
	if !ok || c == nil {
		return res
	}
	if c.InputRequests != nil {
		r := &inputRequiredResult{ResultType: "input_required", InputRequests: c.InputRequests, RequestState: c.RequestState}
		r.Meta = c.Meta
		return r
	}
	r := &completeCallResult{ResultType: "complete", Content: c.Content, StructuredContent: c.StructuredContent, IsError: c.IsError}
	if r.Content == nil {
		r.Content = []mcp.Content{}
	}
	r.Meta = c.Meta
	return r
}
