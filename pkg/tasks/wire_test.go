package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/internal/testkit/mcptest"
	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/tools/txtar"
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

// update makes TestWireTranscripts rewrite the server sections of the
// transcripts in testdata/wire from the live server (go test -run
// TestWireTranscripts -update), with the values that differ between runs
// normalised as the comparison does.
var update = flag.Bool("update", false, "rewrite the server sections of testdata/wire/*.txtar from the live server")

// transcriptFiles returns the golden transcripts in testdata/wire.
func transcriptFiles(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob("testdata/wire/*.txtar")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no wire transcripts: %v", err)
	}
	return files
}

// transcriptRequest is a transcript's client section: a request, sent with
// the tasks extension declared unless Caps is an empty list.
type transcriptRequest struct {
	Caps    []string          `json:"caps"`
	Method  string            `json:"method"`
	Params  map[string]any    `json:"params"`
	Headers map[string]string `json:"headers"`
}

// parseRequest decodes a client section, its $TASK replaced by taskID.
func parseRequest(body []byte, taskID string) (transcriptRequest, error) {
	var req transcriptRequest
	err := json.Unmarshal([]byte(strings.ReplaceAll(string(body), "$TASK", taskID)), &req)
	return req, err
}

// normalizeWire returns the JSON value raw with the values that differ
// between runs replaced by placeholders (a timestamp by $TIME, the task id
// by $TASK) and _meta left out, in the form of a transcript's server
// section: members in their order on the wire, a value that fits in
// wireWidth columns on one line, a larger one spread over lines.
func normalizeWire(raw []byte, taskID string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readWire(dec, "", taskID)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	v.write(&b, "", 0)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// wireWidth is the width a transcript's server section keeps to where it
// can.
const wireWidth = 100

// wireValue is a JSON value that keeps its members' order: an object
// (keys set), an array (elems only) or a literal, encoded.
type wireValue struct {
	keys  []string
	elems []*wireValue
	lit   string
	open  byte // '{', '[' or 0 for a literal
}

// readWire reads the next value of dec, normalised; key is the member
// name it is the value of ("" in an array).
func readWire(dec *json.Decoder, key, taskID string) (*wireValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		w := &wireValue{open: byte(v)}
		for dec.More() {
			k := ""
			if v == '{' {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				if k = kt.(string); k == "_meta" {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return nil, err
					}
					continue
				}
				w.keys = append(w.keys, k)
			}
			e, err := readWire(dec, k, taskID)
			if err != nil {
				return nil, err
			}
			w.elems = append(w.elems, e)
		}
		_, err := dec.Token() // the closing delimiter
		return w, err
	case string:
		switch {
		case key == "createdAt" || key == "lastUpdatedAt":
			v = "$TIME"
		case taskID != "":
			v = strings.ReplaceAll(v, taskID, "$TASK")
		}
		return &wireValue{lit: jsonString(v)}, nil
	case json.Number:
		return &wireValue{lit: v.String()}, nil
	case bool:
		return &wireValue{lit: strconv.FormatBool(v)}, nil
	}
	return &wireValue{lit: "null"}, nil
}

// jsonString encodes s as a JSON string, without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// compact is v on one line.
func (v *wireValue) compact() string {
	if v.open == 0 {
		return v.lit
	}
	var b strings.Builder
	b.WriteByte(v.open)
	for i, e := range v.elems {
		if i > 0 {
			b.WriteString(", ")
		}
		if v.open == '{' {
			b.WriteString(jsonString(v.keys[i]) + ": ")
		}
		b.WriteString(e.compact())
	}
	b.WriteByte(v.open + 2) // '}' or ']'
	return b.String()
}

// write writes v at indent, after col columns of its line.
func (v *wireValue) write(b *bytes.Buffer, indent string, col int) {
	if c := v.compact(); v.open == 0 || col+len(c) <= wireWidth {
		b.WriteString(c)
		return
	}
	b.WriteByte(v.open)
	for i, e := range v.elems {
		b.WriteString("\n" + indent + "  ")
		col := len(indent) + 2
		if v.open == '{' {
			k := jsonString(v.keys[i]) + ": "
			b.WriteString(k)
			col += len(k)
		}
		e.write(b, indent+"  ", col)
		if i < len(v.elems)-1 {
			b.WriteByte(',')
		}
	}
	b.WriteString("\n" + indent)
	b.WriteByte(v.open + 2)
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

func isString(v any) bool { _, ok := v.(string); return ok }

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(a, b []byte) (bool, error) {
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		return false, err
	}
	return reflect.DeepEqual(va, vb), nil
}

// TestWireTranscripts replays the golden transcripts in testdata/wire, each
// through the lean tasks/* path and through the go-sdk path: a reviewer
// reads the protocol there, not in the code. Each server section is the
// answer to the request before it, as {"status": HTTP status, "result" or
// "error": ...}; a worker section runs the task's worker until it parks
// or ends. With -update, the lean path's answers replace the server
// sections, and the go-sdk path is then checked against them.
func TestWireTranscripts(t *testing.T) {
	for _, file := range transcriptFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ar := txtar.Parse(data)
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
				for i, sec := range ar.Files {
					switch sec.Name {
					case "client":
						req, err := parseRequest(sec.Data, taskID)
						if err != nil {
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
						got, err := normalizeWire(wireAnswer(last), taskID)
						if err != nil {
							t.Fatalf("section %d: the answer: %v", i, err)
						}
						if *update && path == "lean" {
							ar.Files[i].Data = got
							continue
						}
						same, err := sameJSON(got, sec.Data)
						if err != nil {
							t.Fatalf("section %d: %v", i, err)
						}
						if !same {
							t.Errorf("section %d (after %s):\n got  %s\n want %s", i, ar.Files[i-1].Name, got, sec.Data)
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
						t.Fatalf("unknown section %q", sec.Name)
					}
				}
			})
		}
		if *update {
			if out := txtar.Format(ar); !bytes.Equal(out, data) {
				if err := os.WriteFile(file, out, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("updated %s", file)
			}
		}
	}
}

// wireAnswer is the JSON form of a response in a transcript's server section:
// its HTTP status, then its result or its error.
func wireAnswer(r *mcptest.Response) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"status":%d,`, r.HTTP)
	if r.Error != nil {
		e, _ := json.Marshal(struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		}{r.Error.Code, r.Error.Message, r.Error.Data})
		fmt.Fprintf(&b, `"error":%s}`, e)
		return b.Bytes()
	}
	result := r.Result
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	fmt.Fprintf(&b, `"result":%s}`, result)
	return b.Bytes()
}
