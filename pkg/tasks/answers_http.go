package tasks

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// answerShapes refuses, with -32602 naming the input key, the MRTR
// inputResponses of a task tool's call that the go-sdk cannot decode (an
// answer that is not an object, an elicitation answer whose action is not
// a string or whose content is not an object, ...): the go-sdk would refuse
// the whole call with an error about its name. Answers it can decode are
// checked by the tasks server against the requests they answer.
func answerShapes(responses map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(responses)) {
		raw := responses[k]
		b, _ := json.Marshal(map[string]json.RawMessage{k: raw})
		var m mcp.InputResponseMap
		if m.UnmarshalJSON(b) == nil {
			continue
		}
		reason := "it has the shape of no elicitation, sampling or roots result"
		obj, ok := object(raw)
		switch {
		case !ok:
			reason = "the answer must be a JSON object, got " + describeJSON(raw)
		case obj["action"] != nil && !isJSONString(obj["action"]):
			reason = `action must be "accept", "decline" or "cancel", got ` + describeJSON(obj["action"])
		case obj["action"] != nil && obj["content"] != nil && obj["content"][0] != '{':
			reason = "content must be an object, got " + describeJSON(obj["content"])
		}
		return &jsonrpc.Error{Code: CodeInvalidParams, Message: fmt.Sprintf("invalid answer to input request %q: %s", k, reason)}
	}
	return nil
}

func isJSONString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }

// describeJSON says what the JSON value raw is, as the tasks server words
// it: `the string "yes"`, `the number 3`, `an object`.
func describeJSON(raw json.RawMessage) string {
	switch {
	case len(raw) == 0:
		return "nothing"
	case raw[0] == '"':
		return "the string " + string(raw)
	case raw[0] == '{':
		return "an object"
	case raw[0] == '[':
		return "an array"
	case raw[0] == 'n':
		return "null"
	case raw[0] == 't' || raw[0] == 'f':
		return "the boolean " + string(raw)
	}
	return "the number " + string(raw)
}
