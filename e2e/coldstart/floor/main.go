// Command floor is the cold-start floor e2e/coldstart measures beside the
// bootstraps: an AWS Lambda function behind a Function URL, built like
// them (aws-lambda-go's lambdaurl, -tags lambda.norpc, static, stripped),
// that answers every request with a fixed JSON-RPC result and does nothing
// else — no Redis, no MCP server. Its cold start is what the Go runtime,
// the Lambda runtime client and this machine cost before any of
// mcptasks's work.
package main

import (
	"net/http"

	"github.com/aws/aws-lambda-go/lambdaurl"
)

func main() {
	lambdaurl.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	}))
}
