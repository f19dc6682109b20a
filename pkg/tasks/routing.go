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

// maxPeek bounds how much of a body the tasks layer reads to check or
// serve it; larger bodies are left to the go-sdk (and its own limit).
const maxPeek = 1 << 20

// checkRouting wraps the go-sdk handler so that tasks/get, tasks/update and
// tasks/cancel requests carry an Mcp-Name header equal to params.taskId, as
// the 2026-07-28 transport requires (the go-sdk checks Mcp-Name only for
// its own methods). A mismatch answers HTTP 400 with JSON-RPC error -32020,
// with the id the go-sdk would answer with; a body the go-sdk refuses (a
// notification, an odd id, malformed JSON) is left to it. The body is read
// once and handed on unchanged.
func checkRouting(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		switch strings.TrimSpace(r.Header.Get("Mcp-Method")) {
		case methodGet, methodUpdate, methodCancel:
		default:
			next.ServeHTTP(w, r)
			return
		}
		body, err := peekBody(r)
		if err != nil {
			bodyError(w, err)
			return
		}
		if len(body) > maxPeek {
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
// body limit (the http.MaxBytesReader of the body-limit layer), else 400.
func bodyError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		return
	}
	http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
}

// peekBody reads the start of r's body (up to maxPeek+1 bytes) and puts it
// back, so that the next handler reads the body unchanged.
func peekBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPeek+1))
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
