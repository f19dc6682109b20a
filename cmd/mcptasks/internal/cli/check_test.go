package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/examples"
	"github.com/mcptasks/mcptasks/pkg/platform/local/localtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// expectErr fails the test unless r exited with code, with an error that
// holds each of want and none of unwanted, and printed nothing on stdout.
func expectErr(t *testing.T, r *run, code int, want []string, unwanted ...string) {
	t.Helper()
	check(t, r, code)
	if r.err == nil {
		t.Fatalf("no error; stdout:\n%s", r.out)
	}
	msg := r.err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	for _, u := range unwanted {
		if strings.Contains(msg, u) {
			t.Errorf("error holds %q:\n%s", u, msg)
		}
	}
	if r.out.String() != "" {
		t.Errorf("stdout %q, want nothing", r.out)
	}
}

// Arguments are checked against the tool's input schema before the call:
// the message names the argument and the type it takes, shows how the
// tool is called, and never says the tool reported an error (it did not
// run).
func TestCallChecksArguments(t *testing.T) {
	var calls atomic.Int32
	h := localtest.Serve(t, examples.App)
	// Count the tools/call requests that reach the server.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			calls.Add(1)
		}
		proxy(w, r, h)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"
	ctx := t.Context()
	usage := "usage: mcptasks call slow_compute seconds=<integer> [label=<string>]"
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"slow_compute"}, []string{"call slow_compute: missing argument seconds (integer)", usage}},
		{[]string{"slow_compute", "label=x"}, []string{"missing argument seconds (integer)"}},
		{[]string{"slow_compute", "--json", `{"seconds": "5"}`}, []string{`argument seconds: "5" is a string, want an integer`, usage}},
		{[]string{"slow_compute", "seconds=soon"}, []string{`argument seconds: "soon" is not an integer`}},
		{[]string{"slow_compute", "seconds=1", "colour=red"}, []string{"unknown argument colour (the arguments are label, seconds)", usage}},
		{[]string{"greet"}, []string{"call greet: missing argument name (string)", "usage: mcptasks call greet name=<string>"}},
	} {
		r := newRun(url, nil).exec(ctx, append([]string{"call"}, c.args...)...)
		expectErr(t, r, 2, c.want, "reported an error", "isError", "validating")
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d tools/call reached the server", n)
	}
}

// proxy forwards r to the MCP endpoint at target.
func proxy(w http.ResponseWriter, r *http.Request, target string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, target, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// A server that refuses the arguments itself (the CLI could not read the
// tool's schema) answers a tool error although the tool never ran: the
// command says so instead of "reported an error".
func TestServerRefusedArguments(t *testing.T) {
	e, out, _ := testEnv("", false)
	err := e.result("forecast_report", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
		Text: `validating "arguments": validating root: required: missing properties: ["city"]`}}}, outputText)
	if err == nil || !strings.Contains(err.Error(), `call forecast_report: the server refused the arguments, and the tool did not run: required: missing properties: ["city"]`) ||
		strings.Contains(err.Error(), "reported an error") {
		t.Errorf("err %v", err)
	}
	if out.String() != "" {
		t.Errorf("stdout %q", out)
	}
	// A tool's own error is still one.
	err = e.result("forecast_report", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such city"}}}, outputText)
	if err == nil || err.Error() != "forecast_report reported an error (isError)" || out.String() != "no such city\n" {
		t.Errorf("err %v, stdout %q", err, out)
	}
}

// What no retry can heal is reported at once, in the terms of the command
// the user ran: TLS to a plain HTTP server, a URL without a scheme, a 404
// (with the /mcp path suggested), a server that is not there (after the
// same number of attempts in every command).
func TestCLIConnectionErrors(t *testing.T) {
	url := localtest.Serve(t, examples.App)
	ctx := t.Context()
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")

	r := newRun("https://"+host+"/mcp", nil).exec(ctx, "call", "greet", "name=Ada")
	expectErr(t, r, 1, []string{"call greet: the server at https://" + host + "/mcp speaks plain HTTP, not HTTPS: use --url http://" + host + "/mcp"},
		"gave up", "tools/list")

	for name, cmd := range map[string][]string{"call greet": {"call", "greet", "name=Ada"}, "tools": {"tools"}, "task get": {"task", "get", "some-id"}} {
		r := newRun(host+"/mcp", nil).exec(ctx, cmd...)
		expectErr(t, r, 2, []string{name + ": --url " + host + "/mcp has no scheme: did you mean http://" + host + "/mcp?"})
	}
	r = newRun("ftp://"+host+"/mcp", nil).exec(ctx, "tools")
	expectErr(t, r, 2, []string{"tools: --url ftp://" + host + "/mcp: the scheme must be http or https"})

	r = newRun("http://"+host+"/", nil).exec(ctx, "call", "greet", "name=Ada")
	expectErr(t, r, 1, []string{"call greet: no MCP endpoint at http://" + host + "/ (HTTP 404): mcptasks serves MCP at the path /mcp; try --url http://" + host + "/mcp"},
		"tools/list", "gave up")
	r = newRun("http://"+host+"/api/mcp", nil).exec(ctx, "tools")
	expectErr(t, r, 1, []string{"tools: no MCP endpoint at http://" + host + "/api/mcp (HTTP 404)", "try --url http://" + host + "/mcp"})

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	for _, cmd := range [][]string{{"call", "greet", "name=Ada"}, {"tools"}, {"task", "get", "some-id"}, {"task", "watch", "some-id"}, {"task", "cancel", "some-id"}, {"task", "answer", "some-id", "confirm=yes"}} {
		r := newRun(closed, nil).exec(ctx, cmd...)
		name := strings.Join(cmd[:min(2, len(cmd))], " ")
		if cmd[0] == "tools" {
			name = "tools"
		}
		expectErr(t, r, 1, []string{name + ": cannot connect to " + closed + ": connection refused (gave up after 3 attempts)"}, "tools/list", "tasks/get", "Post ")
	}
}

// task answer checks each answer against what its input request asks
// for, refuses a wrong one with the shape expected, and leaves the task
// as it was.
func TestTaskAnswerChecksTheShape(t *testing.T) {
	url := localtest.Serve(t, examples.App)
	ctx := t.Context()
	r := newRun(url, nil).exec(ctx, "call", "confirm_delete", "filename=a.txt", "--detach")
	id := strings.TrimSpace(r.out.String())
	waitStatus(t, url, id, client.StatusInputRequired)
	shape := `the answer to this elicitation is {"action":"accept","content":{"confirm":<boolean>}}, {"action":"decline"} or {"action":"cancel"} (or confirm=<boolean>: the value of confirm)`
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json", `{"confirm": {"confirm": true}}`}, `{"confirm":true} has no action; ` + shape},
		{[]string{"--json", `{"confirm": true}`}, `true is not an object; ` + shape},
		{[]string{"--json", `{"confirm": {"action": "yes"}}`}, `the action "yes" is not accept, decline or cancel; ` + shape},
		{[]string{"--json", `{"confirm": {"action": "accept"}}`}, `an accepted answer needs its content as an object; ` + shape},
		{[]string{"--json", `{"confirm": {"action": "accept", "content": {"confirm": "yes"}}}`}, `field confirm: "yes" is a string, want a boolean; ` + shape},
		{[]string{"--json", `{"confirm": {"action": "accept", "content": {"confirm": true, "force": true}}}`}, `unknown field force (the fields are confirm); ` + shape},
		{[]string{`confirm={"action":"accept","content":{}}`}, `missing field confirm (boolean); ` + shape},
	} {
		r := newRun(url, nil).exec(ctx, append([]string{"task", "answer", id}, c.args...)...)
		expectErr(t, r, 2, []string{"task answer: confirm: " + c.want})
	}
	tk, err := client.New(url).Get(ctx, id)
	if err != nil || tk.Status != client.StatusInputRequired || tk.InputRequests["confirm"] == nil {
		t.Fatalf("task after the refused answers: %+v, %v; want it still waiting for confirm", tk, err)
	}
	ok := newRun(url, nil).exec(ctx, "task", "answer", id, "--json", `{"confirm": {"action": "accept", "content": {"confirm": true}}}`)
	check(t, ok, 0, "answered confirm")
}
