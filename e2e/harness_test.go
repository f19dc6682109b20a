package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// binPath is the mcptasks binary built once for the package by TestMain.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcptasks-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "mcptasks")
	build := exec.Command("go", "build", "-race", "-o", binPath, "../cmd/mcptasks")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cmd/mcptasks:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running mcptasks process.
type proc struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
}

// Log returns what the process has written to stderr so far.
func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs `mcptasks args...` with env added to the environment. For a
// serving process it waits until /healthz answers.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	serving := len(args) == 0 || args[0] == "serve"
	if serving {
		p.addr = freeAddr(t)
		args = append(args, "--addr", p.addr)
	}
	p.cmd = exec.Command(binPath, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Env = append(p.cmd.Env, "MCPTASKS_LOG_LEVEL=DEBUG")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.Kill()
		}
		if t.Failed() {
			t.Logf("mcptasks %v log:\n%s", args, p.Log())
		}
	})
	if serving {
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get("http://" + p.addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			select {
			case <-p.done:
				t.Fatalf("mcptasks exited before serving:\n%s", p.Log())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("mcptasks did not serve within 60s:\n%s", p.Log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return p
}

// client speaks the 2026-07-28 stateless wire to one endpoint.
type client struct {
	url  string
	caps map[string]any // clientCapabilities sent in _meta
	hdr  http.Header    // extra headers on every request
	id   int
}

func newClient(addr string, withTasks bool) *client {
	caps := map[string]any{}
	if withTasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	return &client{url: "http://" + addr + "/mcp", caps: caps, hdr: http.Header{}}
}

// response is one JSON-RPC response and its HTTP status.
type response struct {
	HTTP   int
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("unexpected JSON-RPC error %d: %s", r.Error.Code, r.Error.Message)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		t.Fatalf("decoding result %s: %v", r.Result, err)
	}
}

// call sends method with params (a map; _meta is added) and headers as the
// conformance client does: Mcp-Method always, Mcp-Name for named methods.
// override replaces headers after the defaults.
func (c *client) call(t *testing.T, method string, params map[string]any, override ...string) *response {
	t.Helper()
	c.id++
	if params == nil {
		params = map[string]any{}
	}
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": c.caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
	}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(context.Background(), "POST", c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	switch method {
	case "tools/call", "prompts/get":
		req.Header.Set("Mcp-Name", fmt.Sprint(params["name"]))
	case "tasks/get", "tasks/update", "tasks/cancel":
		req.Header.Set("Mcp-Name", fmt.Sprint(params["taskId"]))
	}
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	for i := 0; i+1 < len(override); i += 2 {
		req.Header.Set(override[i], override[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading body: %v", method, err)
	}
	r := &response{HTTP: resp.StatusCode}
	// An SSE stream carries one JSON message per data: line; a JSON body is
	// the message itself.
	payload := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		payload = nil
		for _, line := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && strings.Contains(d, `"id"`) {
				payload = []byte(strings.TrimSpace(d))
			}
		}
	}
	if err := json.Unmarshal(payload, r); err != nil {
		t.Fatalf("%s: HTTP %d, undecodable body %q: %v", method, resp.StatusCode, raw, err)
	}
	return r
}

// task is the subset of Task fields the tests read.
type task struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *int64                     `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result"`
	Error          json.RawMessage            `json:"error"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
}

func (c *client) get(t *testing.T, id string) task {
	t.Helper()
	var tk task
	c.call(t, "tasks/get", map[string]any{"taskId": id}).decode(t, &tk)
	return tk
}

// waitFor polls tasks/get until cond holds or the deadline passes.
func (c *client) waitFor(t *testing.T, id string, within time.Duration, cond func(task) bool) task {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		tk := c.get(t, id)
		if cond(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: condition not met within %v; last state %+v", id, within, tk)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func terminal(tk task) bool {
	return tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled"
}
