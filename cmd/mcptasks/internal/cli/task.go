package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcptasks/mcptasks/pkg/client"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const taskUsage = `
Usage: mcptasks task get|watch|cancel|answer TASKID [flags]

  get     print the task as tasks/get answers it (JSON)
  watch   follow the task until it ends, asking for the input it needs, and
          print its result; Ctrl-C stops watching (the task goes on)
  cancel  cancel the task (tasks/cancel), wait for it to end and print the
          status it reached
  answer  answer the task's input requests (tasks/update): with no answers
          on the command line, ask for each one

Run 'mcptasks task SUBCOMMAND --help' for the flags of each.`

const taskAnswerUsage = `
Usage: mcptasks task answer TASKID [KEY=ANSWER ... | --json '{"KEY": {...}}']

Answers input requests of the task, by their keys (tasks/update). ANSWER is
  - the response as JSON, e.g. confirm='{"action":"accept","content":{"confirm":true}}'
  - accept, decline or cancel: that action, without content
  - for an elicitation whose form has one field, that field's value
    (e.g. confirm=yes)
--json gives all the responses as one object by key. With no answers given,
each pending request is asked on the terminal.`

// taskHelp describes the subcommands of task in their --help.
var taskHelp = map[string]string{
	"get": "Prints the task as tasks/get answers it (JSON): its status and status message, and its\n" +
		"result, error or pending input requests.",
	"watch": "Follows the task until it ends, asking for the input it needs, and prints its result as\n" +
		"call does (same output and exit status). Ctrl-C stops watching; the task goes on.",
	"cancel": "Cancels the task (tasks/cancel), waits for it to end and prints the status it reached.\n" +
		"Cancellation is cooperative: a waiting task is cancelled at once, a running step stops at its\n" +
		"next chance, and the task may still complete or fail. A task still running when --wait\n" +
		"passes is printed as it is (its cancellation stays requested).",
}

func (e *env) task(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return local.Usagef("task needs a subcommand: get, watch, cancel or answer")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.stdout, strings.TrimSpace(taskUsage))
		return flag.ErrHelp
	case "get", "watch", "cancel", "answer":
	default:
		return local.Usagef("task: unknown subcommand %q (get, watch, cancel or answer)", sub)
	}
	fs := flag.NewFlagSet("mcptasks task "+sub, flag.ContinueOnError)
	com := e.commonFlags(fs)
	var output, jsonArg *string
	var wait *time.Duration
	usage := fmt.Sprintf("Usage: mcptasks task %s TASKID [flags]\n\n%s", sub, taskHelp[sub])
	switch sub {
	case "watch":
		output = fs.String("output", outputText, "how to print the result: text (its text content) or json (the CallToolResult)")
	case "cancel":
		wait = fs.Duration("wait", client.DefaultCancelWait, "how long to wait for the task to end after the cancel (0: read it once)")
	case "answer":
		jsonArg = fs.String("json", "", "the responses as one JSON object by input request key")
		usage = taskAnswerUsage
	}
	pos, err := e.parse(fs, usage, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return local.Usagef("task %s needs a TASKID", sub)
	}
	if len(pos) > 1 && sub != "answer" {
		return unexpected("task "+sub, pos[1])
	}
	id := pos[0]
	if output != nil {
		if err := checkOutput(*output); err != nil {
			return local.Usagef("task %s: %v", sub, err)
		}
	}
	if err := com.checkURL("task " + sub); err != nil {
		return err
	}
	explain := func(err error) error { return com.explain("task "+sub, err) }
	switch sub {
	case "get":
		t, err := com.quickClient(e).Get(ctx, id)
		if err != nil {
			return explain(err)
		}
		return printJSON(e.stdout, toWire(t))
	case "watch":
		// One quick look first: a server that is not there, or a task it
		// does not know, is reported at once.
		if _, err := com.quickClient(e).Get(ctx, id); err != nil {
			return explain(err)
		}
		prog := newProgress(e)
		c := com.client(e, prog)
		return e.follow(ctx, prog, followOptions{what: "watching task " + id, format: *output, explain: explain},
			func(ctx context.Context, opts ...client.CallOption) (*mcp.CallToolResult, error) {
				return c.Resume(ctx, id, opts...)
			})
	case "cancel":
		if *wait < 0 {
			return local.Usagef("task cancel: --wait must not be negative, not %s", *wait)
		}
		t, err := com.quickClient(e).CancelAndWait(ctx, id, *wait)
		if err != nil {
			return explain(err)
		}
		if !t.Status.Terminal() && *wait > 0 {
			fmt.Fprintf(e.stderr, "the task has not ended within %s: a step is still running; its cancellation stays requested\n", *wait)
		}
		_, err = fmt.Fprintf(e.stdout, "task %s: %s\n", t.ID, t.Status)
		return err
	}
	return explain(e.answer(ctx, com.quickClient(e), id, *jsonArg, pos[1:]))
}

// answer sends the answers to input requests of task id, from the command
// line or asked on the terminal.
func (e *env) answer(ctx context.Context, c *client.Client, id, jsonArg string, pairs []string) error {
	t, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	if t.Status != client.StatusInputRequired || len(t.InputRequests) == 0 {
		return fmt.Errorf("task %s is %s: it waits for no input", t.ID, t.Status)
	}
	pending := func(key string) (*client.InputRequest, error) {
		if r := t.InputRequests[key]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("task %s has no pending input request %q (pending: %s)", t.ID, key, strings.Join(t.Pending(), ", "))
	}
	responses := map[string]any{}
	if jsonArg != "" {
		m, err := parseObject(jsonArg)
		if err != nil {
			return local.Usagef("task answer: --json: %v", err)
		}
		for k, v := range m {
			if _, err := pending(k); err != nil {
				return err
			}
			responses[k] = v
		}
	}
	for _, p := range pairs {
		key, value, raw, err := splitPair(p)
		if err != nil {
			return local.Usagef("task answer: %v", err)
		}
		req, err := pending(key)
		if err != nil {
			return err
		}
		v, err := answerValue(req, value, raw)
		if err != nil {
			return local.Usagef("task answer: %s: %v", key, err)
		}
		responses[key] = v
	}
	for _, k := range sortedKeys(responses) {
		if err := checkAnswer(t.InputRequests[k], responses[k]); err != nil {
			return local.Usagef("task answer: %v", err)
		}
	}
	if len(responses) == 0 {
		ask := e.asker(nil)
		for _, k := range t.Pending() {
			v, err := ask.input(ctx, t.InputRequests[k])
			if err != nil {
				return err
			}
			responses[k] = v
		}
	}
	if err := c.Update(ctx, id, responses); err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(responses))
	if t, err = c.Get(ctx, id); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "answered %s; task %s: %s\n", strings.Join(keys, ", "), t.ID, t.Status)
	return err
}

// checkAnswer refuses an answer that is not what req asks for: for an
// elicitation, an action (accept, decline or cancel) and, accepted in a
// form, content that its requested schema takes; for another request, an
// object. The error shows the shape expected.
func checkAnswer(req *client.InputRequest, v any) error {
	generic, err := roundTrip(v)
	if err != nil {
		return fmt.Errorf("%s: %v", req.Key, err)
	}
	obj, isObj := generic.(map[string]any)
	if req.Method != "elicitation/create" {
		if !isObj {
			return fmt.Errorf("%s: the answer to a %s request is a JSON object (its result), not %s", req.Key, req.Method, clean(compactJSON(generic), false))
		}
		return nil
	}
	p, err := req.Elicitation()
	if err != nil {
		return fmt.Errorf("%s: %v", req.Key, err)
	}
	rs, err := requestedSchema(req)
	if err != nil {
		return fmt.Errorf("%s: reading its requested schema: %v", req.Key, err)
	}
	expected := func(problem string) error {
		accept := `{"action":"accept"}`
		if p.Mode != "url" {
			accept = `{"action":"accept","content":` + shape(rs) + `}`
		}
		msg := fmt.Sprintf("%s: %s; the answer to this elicitation is %s, {\"action\":\"decline\"} or {\"action\":\"cancel\"}", req.Key, problem, accept)
		if len(rs.Properties) == 1 && p.Mode != "url" {
			msg += fmt.Sprintf(" (or %s=%s: the value of %s)", req.Key, placeholder(rs.Properties[0].Schema), rs.Properties[0].Name)
		}
		return errors.New(msg)
	}
	action, _ := obj["action"].(string)
	switch {
	case !isObj:
		return expected(clean(compactJSON(generic), false) + " is not an object")
	case action == "":
		return expected(clean(compactJSON(generic), false) + " has no action")
	case action != "accept" && action != "decline" && action != "cancel":
		return expected(fmt.Sprintf("the action %q is not accept, decline or cancel", action))
	case action != "accept" || p.Mode == "url":
		return nil
	}
	content, ok := obj["content"].(map[string]any)
	if !ok {
		if obj["content"] != nil || len(rs.Required) > 0 {
			return expected("an accepted answer needs its content as an object")
		}
		content = map[string]any{}
	}
	if problems := checkObject(rs, content, "field"); len(problems) > 0 {
		return expected(strings.Join(problems, "; "))
	}
	return nil
}

// roundTrip returns v as the generic JSON value it encodes to.
func roundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// answerValue reads the command-line answer s to req (see taskAnswerUsage).
func answerValue(req *client.InputRequest, s string, raw bool) (any, error) {
	if v, ok := parseJSON(s); ok && (raw || jsonKind(v) == "object") {
		return v, nil
	}
	if raw {
		return nil, fmt.Errorf("%q is not JSON", s)
	}
	switch a := strings.ToLower(strings.TrimSpace(s)); a {
	case "accept", "decline", "cancel":
		return &mcp.ElicitResult{Action: a}, nil
	}
	if req.Method == "elicitation/create" {
		if rs, err := requestedSchema(req); err == nil && len(rs.Properties) == 1 {
			p := rs.Properties[0]
			choices, multi := p.Schema.choices(), false
			if len(choices) == 0 && p.Schema.Items != nil && slices.Contains(p.Schema.kinds(), "array") {
				choices, multi = p.Schema.Items.choices(), true
			}
			v, err := fieldValue(p.Schema, strings.TrimSpace(s), choices, multi)
			if err != nil {
				if p.Name != req.Key {
					err = fmt.Errorf("%s: %v", p.Name, err)
				}
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{p.Name: v}}, nil
		}
	}
	return nil, fmt.Errorf(`give the answer as JSON, e.g. %s='{"action":"accept","content":{...}}'`, req.Key)
}

// requestedSchema reads the requested schema of an elicitation from its raw
// params, keeping the order of its fields.
func requestedSchema(req *client.InputRequest) (*schema, error) {
	var p struct {
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, err
	}
	if len(p.RequestedSchema) == 0 {
		return &schema{}, nil
	}
	return decodeSchema(p.RequestedSchema)
}
