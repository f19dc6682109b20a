package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Output formats of --output.
const (
	outputText = "text"
	outputJSON = "json"
)

func checkOutput(format string) error {
	if format != outputText && format != outputJSON {
		return fmt.Errorf("--output is text or json, not %q", format)
	}
	return nil
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printResult writes a tool's result: as JSON, or its content as text
// (text blocks as they are, other blocks as a one-line summary).
func printResult(w io.Writer, res *mcp.CallToolResult, format string) error {
	if format == outputJSON {
		return printJSON(w, res)
	}
	var b strings.Builder
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "[resource %s: %s]", c.Name, c.URI)
		case *mcp.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
				b.WriteString("[resource]")
			case r.Text != "":
				b.WriteString(r.Text)
			default:
				fmt.Fprintf(&b, "[resource %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))
			}
		default:
			raw, _ := json.Marshal(c)
			b.Write(raw)
		}
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		return printJSON(w, res.StructuredContent)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wireTask is a task as tasks/get carries it (SEP-2663), for printing.
type wireTask struct {
	TaskID         string                 `json:"taskId"`
	Status         client.Status          `json:"status"`
	StatusMessage  string                 `json:"statusMessage,omitempty"`
	CreatedAt      string                 `json:"createdAt,omitempty"`
	LastUpdatedAt  string                 `json:"lastUpdatedAt,omitempty"`
	TTLMs          *int64                 `json:"ttlMs"`
	PollIntervalMs *int64                 `json:"pollIntervalMs,omitempty"`
	Result         *mcp.CallToolResult    `json:"result,omitempty"`
	Error          *jsonrpc.Error         `json:"error,omitempty"`
	InputRequests  map[string]wireRequest `json:"inputRequests,omitempty"`
}

type wireRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// toWire converts t back to its wire form.
func toWire(t *client.Task) *wireTask {
	w := &wireTask{
		TaskID:        t.ID,
		Status:        t.Status,
		StatusMessage: t.StatusMessage,
		CreatedAt:     wireTime(t.CreatedAt),
		LastUpdatedAt: wireTime(t.LastUpdatedAt),
		Result:        t.Result,
		Error:         t.Error,
	}
	if t.TTL > 0 {
		ms := t.TTL.Milliseconds()
		w.TTLMs = &ms
	}
	if t.PollInterval > 0 {
		ms := t.PollInterval.Milliseconds()
		w.PollIntervalMs = &ms
	}
	if len(t.InputRequests) > 0 {
		w.InputRequests = map[string]wireRequest{}
		for k, r := range t.InputRequests {
			w.InputRequests[k] = wireRequest{Method: r.Method, Params: r.Params}
		}
	}
	return w
}

func wireTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
