// Package layers states the module's layers, lowest first, and its test
// checks that no package imports one from a higher layer (go list): each
// package builds only on what is below it.
//
//  0. Leaf helpers, where their users are: internal/slots (Redis Cluster
//     hash slots), internal/pgschema and internal/pglisten (the Postgres
//     schema and LISTEN), pkg/tasks/internal/jsonscan.
//  1. The contracts the engine runs on: pkg/tasks/driver (the Store and
//     the Queue, the records they exchange, the errors a store returns).
//     It imports only the standard library.
//  2. The engine and its public face: pkg/tasks (the Step API, the
//     Server, its HTTP handler). It imports only the contracts, the
//     go-sdk, a JSON-schema validator, OpenTelemetry's API and the leaf
//     helpers.
//  3. What builds on the engine alone: pkg/tasks/inspect (the operator's
//     view of a store), pkg/queue (the shared message format), pkg/auth,
//     pkg/embedredis, pkg/otelexport, pkg/client.
//  4. Backends: pkg/tasks/redisstore, pkg/tasks/pgstore, and the queues
//     under pkg/queue.
//  5. The contracts' suites, for backend authors: pkg/tasks/storetest,
//     pkg/queue/queuetest.
//  6. The one wiring place: pkg/bundle (environment to store, queue,
//     auth, server and handler).
//  7. Platform adapters: pkg/platform and its subpackages (local,
//     vercel, awslambda, local/localtest).
//  8. Tool packages: pkg/examples, pkg/examples/conformance, pkg/apps. A
//     tool package imports the engine (layer 2) and nothing of the wiring;
//     no platform adapter imports one.
//  9. Entry points and commands: api/..., cmd/... (with
//     cmd/mcptasks/internal/..., the code only mcptasks uses).
//  10. Test kits and end-to-end programs: internal/testkit/..., e2e/...,
//     pkg/client/internal/faketasks. Only tests (and other test kits)
//     import them. Beside them, test-only packages: internal/layers (this
//     rule) and docs (every command the documentation shows names the test
//     that runs it).
//
// Tests may import any layer.
package layers
