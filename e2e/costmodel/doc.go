// Package costmodel measures what one task of a reference workload costs a
// serverless deployment, per task: function invocations (the MCP endpoint
// and the worker) and their durations, queue messages, and Redis commands
// and bytes. Its test (costmodel_test.go) runs the real bundle and platform
// handlers (the Lambda SQS worker handler, the Vercel QStash worker
// function) on a real redis-server, with local SQS and QStash fakes, on a
// simulated clock, so that the workload's ten-minute sleep takes no time:
//
//	MCPTASKS_COST_TASKS=20 go test -run TestCostModel -v ./e2e/costmodel/
//
// BENCHMARKS.md ("What a task costs in dollars") turns the counts into
// dollars per 1,000 tasks.
package costmodel
