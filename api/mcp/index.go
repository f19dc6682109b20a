// Package handler is the Vercel function serving the MCP endpoint (/mcp,
// rewritten to /api/mcp by vercel.json) and the protected resource
// metadata (/.well-known/oauth-protected-resource[/...]).
package handler

import (
	"net/http"

	"github.com/mcptasks/mcptasks/pkg/apps"
	"github.com/mcptasks/mcptasks/pkg/platform/vercel"
)

// Handler serves the request with the process's mcptasks bundle.
func Handler(w http.ResponseWriter, r *http.Request) { vercel.For(apps.All()...).MCP(w, r) }
