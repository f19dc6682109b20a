package awslambda_test

import (
	"github.com/mcptasks/mcptasks/pkg/platform/awslambda"
	"github.com/mcptasks/mcptasks/pkg/tasks"
)

var app = &tasks.App{Name: "transcode", Version: "1.0.0", Register: func(*tasks.Server) {}}

// Each Lambda function's main (cmd/lambda/mcp, worker, sweep) is one
// statement.
func ExampleStartMCP() {
	mcpMain := func() { awslambda.StartMCP(app) }
	workerMain := func() { awslambda.StartWorker(app) }
	sweepMain := func() { awslambda.StartSweep(app) }
	_, _, _ = mcpMain, workerMain, sweepMain
}
