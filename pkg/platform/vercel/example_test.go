package vercel_test

import (
	"net/http"

	"github.com/mcptasks/mcptasks/pkg/platform/vercel"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

var app = &tasks.App{Name: "transcode", Version: "1.0.0", Register: func(*tasks.Server) {}}

// Each Vercel function (api/mcp/index.go, api/worker/index.go,
// api/cron/index.go; package handler) is one statement; the process's
// bundle is built on the first request and shared by the later ones.
func ExampleFor() {
	mcpHandler := func(w http.ResponseWriter, r *http.Request) { vercel.For(app).MCP(w, r) }
	workerHandler := func(w http.ResponseWriter, r *http.Request) { vercel.For(app).Worker(w, r) }
	cronHandler := func(w http.ResponseWriter, r *http.Request) { vercel.For(app).Cron(w, r) }
	_, _, _ = mcpHandler, workerHandler, cronHandler
}
