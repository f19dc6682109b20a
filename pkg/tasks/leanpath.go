package tasks

import (
	"os"
	"reflect"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// leanPathDisabled returns why an endpoint must send every request for s
// through the go-sdk, or "" when it may answer tasks/* and task-creating
// tools/call requests itself, on its lean path (lean.go). The lean
// path answers exactly what the go-sdk answers with its default
// configuration, and calls the same operations (Server.getTask and the
// rest); it is off wherever the go-sdk would answer differently:
//
//   - Options.DisableLeanPath is set;
//   - ServerOptions.SupportedProtocolVersions leaves out ProtocolVersion
//     (the go-sdk then answers -32022, unsupported protocol version);
//   - receiving middleware was added on [Server.MCP] after New: it must see
//     every request, and the lean path does not run it;
//   - MCPGODEBUG is set, which changes go-sdk behaviours the lean path
//     mirrors.
//
// The endpoint asks once, when it is built: add tools and middleware
// before that. (The endpoint also turns the lean path off when the go-sdk
// in the build is not the version it was audited against.)
func (s *Server) leanPathDisabled() string {
	switch {
	case s.opts.DisableLeanPath:
		return "Options.DisableLeanPath is set"
	case s.sdkConfig != "":
		return s.sdkConfig
	case os.Getenv("MCPGODEBUG") != "":
		return "MCPGODEBUG is set (it changes go-sdk behaviours the lean path mirrors)"
	}
	if chain, ok := chainOf(s.mcp); !ok || chain != s.chain {
		return "receiving middleware was added on the go-sdk server (MCP().AddReceivingMiddleware), and it must see every request"
	}
	return ""
}

// leanVersionConflict returns why a go-sdk server restricted to versions
// (ServerOptions.SupportedProtocolVersions; empty: all) cannot have a lean
// path, or "".
func leanVersionConflict(versions []string) string {
	if !slices.Contains(mcp.SupportedProtocolVersions(), ProtocolVersion) {
		return "the go-sdk does not support protocol version " + ProtocolVersion
	}
	if len(versions) > 0 && !slices.Contains(versions, ProtocolVersion) {
		return "ServerOptions.SupportedProtocolVersions leaves out " + ProtocolVersion + " (the go-sdk answers its requests -32022)"
	}
	return ""
}

// sdkChainField is the field of go-sdk v1.8.0's mcp.Server that holds its
// receiving middleware chain (mcp/server.go: receivingMethodHandler_, set
// by AddReceivingMiddleware). The go-sdk offers no way to list middleware,
// so chainOf reads the field, never writes it.
const sdkChainField = "receivingMethodHandler_"

// chainOf identifies the go-sdk server's receiving handler: the code
// pointer of its outermost function. New records it right after adding the
// tasks middleware, whose closure is then outermost; middleware added
// later wraps it in a closure of its own, with another code pointer. ok is
// false when the field is not there (another go-sdk version): the caller
// then assumes middleware was added.
func chainOf(srv *mcp.Server) (ptr uintptr, ok bool) {
	v := reflect.ValueOf(srv).Elem().FieldByName(sdkChainField)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return 0, false
	}
	return v.Pointer(), true
}
