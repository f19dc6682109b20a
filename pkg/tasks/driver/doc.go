// Package driver defines the contracts that package tasks runs on: the
// [Store] that holds tasks (the only state its processes share) and the
// [Queue] that hands task ids to workers, with the records they exchange
// ([Task], [NewTask], [Claim], [Change], [Entry]) and the errors a store
// returns. It is to package tasks what database/sql/driver is to
// database/sql: a tool author never imports it; a backend author
// implements it, and proves the implementation with the contract suites
// (pkg/tasks/storetest, pkg/queue/queuetest).
//
// The Store is required. Everything else a store can do is an optional
// interface that the engine discovers with a type assertion, and does
// without when it is missing:
//
//   - [Dispatcher]: the store enqueues in its own transitions (one write
//     instead of two);
//   - [LeaseRenewer]: short leases, renewed while a step runs, so a dead
//     worker's task is delivered again within seconds;
//   - [DeadlineHonourer] (a Store or a Queue): every call returns by its
//     context's deadline, so a request calls it without a goroutine of
//     its own;
//   - [Lister]: a principal's tasks, for the 2025-11-25 tasks/list;
//   - [Watcher]: transitions announced to every process, for task streams;
//   - [EventStore]: callbacks and signals (tasks.Callback, tasks.AwaitSignal);
//   - [Brancher]: the branches of parallel steps (tasks.All) in invocations
//     of their own.
//
// This package imports nothing but the standard library. Names of package
// tasks in its documentation (Server, Options, Step, Callback, All) are
// that package's.
//
// The implementations in this module are pkg/tasks/redisstore and
// pkg/tasks/pgstore (stores) and the queues under pkg/queue.
package driver
