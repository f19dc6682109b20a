package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerJob registers the tools the wire tests drive: "job" ends as its
// argument says, "must_be_task" requires the extension.
func registerJob(s *tasks.Server) {
	type confirm struct {
		OK bool `json:"ok"`
	}
	tasks.AddTool(s, &mcp.Tool{Name: "job", Description: "ends as asked"}, tasks.Optional,
		func(ctx context.Context, st *tasks.Step, in struct {
			End string `json:"end"`
		}) (*mcp.CallToolResult, error) {
			st.Status("working on it")
			switch in.End {
			case "ask":
				ans, err := tasks.Elicit[confirm](st, "confirm", "Go on?")
				if err != nil {
					return nil, err
				}
				return text("ok=" + map[bool]string{true: "yes", false: "no"}[ans.Content.OK]), nil
			case "fail":
				return nil, &jsonrpc.Error{Code: -32000, Message: "upstream refused"}
			case "crash":
				return nil, errors.New("disk full")
			case "toolerror":
				r := text("not found")
				r.IsError = true
				return r, nil
			case "sleep":
				return nil, st.Sleep("nap", time.Hour)
			case "offer":
				if err := tasks.OfferElicit[confirm](st, "stop", "Stop early?"); err != nil {
					return nil, err
				}
				if err := st.Sleep("nap", time.Hour); err != nil && !errors.Is(err, tasks.ErrWoken) {
					return nil, err
				}
				ans, ok, err := tasks.CheckElicit[confirm](st, "stop")
				if err != nil {
					return nil, err
				}
				return text(fmt.Sprintf("stop answered=%v ok=%v", ok, ans.Content.OK)), nil
			}
			return text("done"), nil
		})
	tasks.AddTool(s, &mcp.Tool{Name: "must_be_task", Description: "runs only as a task"}, tasks.Required,
		func(ctx context.Context, st *tasks.Step, _ noArgs) (*mcp.CallToolResult, error) {
			return text("ok"), nil
		})
}

// section is one "-- name --" part of a transcript.
type section struct{ name, body string }

// parseTxtar splits a txtar archive into its comment and sections.
func parseTxtar(data string) (string, []section) {
	var secs []section
	lines := strings.SplitAfter(data, "\n")
	var comment strings.Builder
	cur := -1
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "-- ") && strings.HasSuffix(t, " --") && len(t) > 6 {
			secs = append(secs, section{name: strings.TrimSpace(t[3 : len(t)-3])})
			cur = len(secs) - 1
			continue
		}
		if cur < 0 {
			comment.WriteString(l)
		} else {
			secs[cur].body += l
		}
	}
	return comment.String(), secs
}

// normalize replaces the values that differ between runs (the task id,
// timestamps, _meta) with placeholders.
func normalize(v any, taskID string) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "_meta")
		for k, e := range x {
			switch {
			case (k == "createdAt" || k == "lastUpdatedAt") && e != nil:
				x[k] = "$TIME"
			case k == "taskId" && e == taskID:
				x[k] = "$TASK"
			case taskID != "" && isString(e):
				x[k] = strings.ReplaceAll(e.(string), taskID, "$TASK")
			default:
				x[k] = normalize(e, taskID)
			}
		}
	case []any:
		for i := range x {
			x[i] = normalize(x[i], taskID)
		}
	}
	return v
}

// TestWireTranscripts replays the golden transcripts in testdata/wire, each
// through the lean tasks/* path and through the go-sdk path: a reviewer
// reads the protocol there, not in the code.
func TestWireTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/wire/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, secs := parseTxtar(string(data))
		for _, path := range []string{"lean", "go-sdk"} {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar")+"/"+path, func(t *testing.T) {
				// A constant poll advice: the transcripts pin the wire,
				// poll_test.go pins the advice.
				h := newHarness(t, "embedded", tasks.Options{PollMin: time.Second, PollMax: time.Second}, registerJob)
				with := h.c
				if path == "go-sdk" {
					with = h.sdk
				}
				without := mcptest.NewClient(strings.TrimSuffix(strings.TrimPrefix(with.URL, "http://"), "/mcp"), false)
				var taskID string
				var last *mcptest.Response
				for i, sec := range secs {
					switch sec.name {
					case "client":
						var req struct {
							Caps    []string          `json:"caps"`
							Method  string            `json:"method"`
							Params  map[string]any    `json:"params"`
							Headers map[string]string `json:"headers"`
						}
						if err := json.Unmarshal([]byte(strings.ReplaceAll(sec.body, "$TASK", taskID)), &req); err != nil {
							t.Fatalf("section %d: %v", i, err)
						}
						c := with
						if req.Caps != nil && len(req.Caps) == 0 {
							c = without
						}
						var override []string
						for k, v := range req.Headers {
							override = append(override, k, v)
						}
						last = c.Call(t, req.Method, req.Params, override...)
						if req.Method == "tools/call" && last.Error == nil {
							var tk struct {
								mcptest.Task
								Job struct {
									TaskID string `json:"taskId"`
								} `json:"structuredContent"`
							}
							if json.Unmarshal(last.Result, &tk) == nil && tk.TaskID != "" {
								taskID = tk.TaskID
							} else if tk.Job.TaskID != "" {
								taskID = tk.Job.TaskID // an async job's handle
							}
						}
					case "server":
						var want, got any
						if err := json.Unmarshal([]byte(sec.body), &want); err != nil {
							t.Fatalf("section %d: %v", i, err)
						}
						actual := map[string]any{"status": last.HTTP}
						if last.Error != nil {
							e := map[string]any{"code": last.Error.Code, "message": last.Error.Message}
							if len(last.Error.Data) > 0 {
								var d any
								_ = json.Unmarshal(last.Error.Data, &d)
								e["data"] = d
							}
							actual["error"] = e
						} else {
							var r any
							_ = json.Unmarshal(last.Result, &r)
							actual["result"] = r
						}
						b, _ := json.Marshal(actual)
						_ = json.Unmarshal(b, &got)
						got = normalize(got, taskID)
						if !reflect.DeepEqual(got, want) {
							gb, _ := json.Marshal(got)
							wb, _ := json.Marshal(want)
							t.Errorf("section %d (after %s):\n got  %s\n want %s", i, secs[i-1].name, gb, wb)
						}
					case "worker":
						for range 10 {
							res, err := h.srv.Advance(context.Background(), taskID)
							if err != nil {
								t.Fatal(err)
							}
							if res.Skipped || res.Status.Terminal() || res.Status == driver.StatusInputRequired {
								break
							}
						}
					default:
						t.Fatalf("unknown section %q", sec.name)
					}
				}
			})
		}
	}
}

func isString(v any) bool { _, ok := v.(string); return ok }
