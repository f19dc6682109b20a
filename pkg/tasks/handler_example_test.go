package tasks_test

import (
	"net/http"

	"github.com/mcptasks/mcptasks/pkg/tasks"
	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tasks server's endpoint: register tools (and any go-sdk receiving
// middleware) first, then compose. Requests pass the Origin check, the body
// limit, authentication, the lean tasks path and the go-sdk, in that order.
func ExampleNewHandler() {
	var store driver.Store                     // for example redisstore.New(client, nil)
	var queue driver.Queue                     // for example redisqueue.New(client, nil)
	var verify func(http.Handler) http.Handler // for example (*auth.Verifier).Middleware
	srv := tasks.New(&mcp.Implementation{Name: "reports", Version: "1.0.0"}, nil, store, queue, nil)
	// tasks.AddTool(srv, ...)
	h := tasks.NewHandler(srv, &tasks.HandlerOptions{
		AllowedOrigins: []string{"https://app.example.com"},
		Authenticate:   verify,
	})
	_ = http.ListenAndServe("127.0.0.1:8080", h)
}
