// Package queue is the message format shared by the queue adapters that
// push task ids to a worker (Amazon SQS, Upstash QStash): a message is only
// a task id, "look at this task at or after this time".
//
// The queue contract itself, [driver.Queue], belongs to the engine that
// consumes it. The adapters live in their own packages so that each binary
// links only the one it uses:
//
//   - redisqueue: Redis (the local default and self-hosted workers);
//   - sqsqueue: Amazon SQS (AWS Lambda);
//   - qstash: Upstash QStash (Vercel).
//
// Delivery is at least once and messages carry no state, so a duplicated,
// late or lost message is harmless: the worker re-reads the task from the
// store, and the sweeper re-enqueues a task whose message was lost. The
// queue must never be the only record of anything.
//
// [driver.Queue]: https://pkg.go.dev/github.com/mcptasks/mcptasks/pkg/tasks/driver#Queue
package queue
