package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxHeaderCheckBody bounds how much of a tasks/* body is read to check
// its routing header; larger bodies are left to the transport's own limit.
const maxHeaderCheckBody = 1 << 20

// CheckRoutingHeaders wraps the MCP endpoint so that tasks/get, tasks/update
// and tasks/cancel requests carry an Mcp-Name header equal to
// params.taskId, as the 2026-07-28 transport requires (the go-sdk checks
// Mcp-Name only for its own methods). A mismatch answers HTTP 400 with
// JSON-RPC error -32020. The body is read once and handed on unchanged.
func CheckRoutingHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		switch strings.TrimSpace(r.Header.Get("Mcp-Method")) {
		case MethodGet, MethodUpdate, MethodCancel:
		default:
			next.ServeHTTP(w, r)
			return
		}
		body, err := peekBody(r)
		if err != nil {
			bodyError(w, err)
			return
		}
		if len(body) > maxHeaderCheckBody {
			next.ServeHTTP(w, r)
			return
		}
		// Read the members the go-sdk reads, by their exact names.
		top, ok := object(body)
		if !ok {
			next.ServeHTTP(w, r) // malformed: the transport answers it
			return
		}
		params, ok := object(top["params"])
		method, _, mok := str(top, "method")
		taskID, hasID, tok := str(params, "taskId")
		if !ok || !mok || !tok || !hasID {
			next.ServeHTTP(w, r)
			return
		}
		// Answer with the id the go-sdk would; leave the ids it refuses
		// (and notifications) to it.
		msgID, accepted := sdkID(top)
		if !accepted {
			next.ServeHTTP(w, r)
			return
		}
		if text := nameMismatch(r.Header, method, taskID); text != "" {
			writeRPC(w, msgID, nil, &jsonrpc.Error{Code: CodeHeaderMismatch, Message: text})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyError answers a failed body read as the go-sdk does: 413 past the
// body limit (an http.MaxBytesReader set by the endpoint), else 400.
func bodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		return
	}
	http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
}

// peekBody reads the start of r's body (up to maxHeaderCheckBody+1 bytes)
// and puts it back, so that the next handler reads the body unchanged.
func peekBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxHeaderCheckBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	return body, err
}

// nameMismatch returns why the Mcp-Name header does not route to taskID,
// or "" when it does (exactly one header, equal after trimming OWS).
func nameMismatch(h http.Header, method, taskID string) string {
	name, present := h["Mcp-Name"]
	switch {
	case !present:
		return "Mcp-Name header is required for " + method
	case len(name) != 1 || strings.TrimSpace(name[0]) != taskID:
		return "Mcp-Name header does not match params.taskId"
	}
	return ""
}
