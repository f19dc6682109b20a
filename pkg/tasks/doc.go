// Package tasks implements the MCP Tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663) on protocol revision 2026-07-28, for servers that run on
// serverless platforms: durable tasks whose state lives in a [driver.Store] and
// whose work is advanced by queue-triggered workers, one step per
// invocation.
//
// # The model
//
// A task tool is a durable workflow written as straight-line Go. Its
// handler receives a [*Step] and takes steps through it:
//
//   - [Do] runs a closure and journals its JSON result under a step name;
//   - [Step.Sleep] and [Step.SleepUntil] park the task and wake it through
//     the queue;
//   - [Elicit] and [Step.Input] park the task in input_required with
//     inputRequests, until tasks/update answers them;
//   - [Step.Offer] puts up a standing input request that the task does not
//     wait for, and [Step.CheckInput] asks, without blocking, whether it
//     was answered (see "Offers" below);
//   - [Step.Status] sets the statusMessage clients see on tasks/get;
//   - [Callback] and [AwaitCallback] hand a URL to a system outside and
//     wait for its POST, [AwaitSignal] waits for a [Server.Signal] from the
//     tool author's own code (see "Waiting on the world" below);
//   - [All] runs independent branches in worker invocations of their own
//     and joins them (see "Parallel steps" below).
//
// [Do]'s retries, backoff and timeout are options of each step; a tool
// states its default policy once with the [StepDefaults] tool option, and a
// step's own options override what they set.
//
// Every invocation reruns the handler from the top. A step whose outcome is
// in the journal returns that outcome without running; the first step that
// has none runs, is journaled with a fenced write, and the invocation ends
// (or goes on, within [Options.StepsPerInvocation] and the time budget).
// Steps are identified by name and order, which must stay the same for a
// task's life: a handler that no longer matches its journal (its code
// changed mid-task) fails the task with a message saying so.
//
// # The flow
//
// A tools/call of a task tool from a client that declares the extension on
// the request gets a createTaskResult only after the task is durably
// created in the store (tasks/get finds it at once); the task id is then
// enqueued. A worker calls [Server.Advance] for each queue message: it
// claims a lease with a fencing generation, replays, runs the next step,
// journals it and re-enqueues, parks or finishes the task. tasks/get
// returns a detailedTask; tasks/update delivers input and resumes the
// task; tasks/cancel cancels a parked task at once and signals a running
// step through its context. [Server.Sweep] re-enqueues tasks whose worker
// died or whose message was lost, and wakes due timers.
//
// A client that does not declare the extension gets an [Optional] tool run
// inline, within the request (input over MRTR rounds with a sealed
// requestState), and a -32021 error for a [Required] one.
//
// # Offers
//
// An offer is a standing input request: "stop after the current batch?",
// "raise the budget?". The handler makes it with [Step.Offer] (its key, like
// every input key, unique over the task's life) and goes on working; at the
// points it chooses, [Step.CheckInput] returns the answer if there is one,
// once. [Step.Withdraw] takes the offer down; so does the end of the task.
// On the wire:
//
//   - While the task is parked (sleeping, or waiting for input) with an
//     offer outstanding, it is input_required, and the offer's request is
//     in inputRequests beside any the task waits for. While a step runs (or
//     the task waits in the queue, or for a retry) it is working and shows
//     no inputRequests. An offer's request carries params._meta
//     [MetaStanding] = true, so that a client knows the task does not wait
//     for it (pkg/client leaves such requests unanswered unless asked to).
//   - tasks/update accepts an answer to an outstanding offer whatever the
//     task's status; the request leaves inputRequests at once, and the
//     answer waits for the next CheckInput. Answers to a withdrawn offer,
//     or one the client already answered, are ignored like those to an
//     unknown key.
//   - An answer to an offer wakes a sleeping task at once: its
//     [Step.Sleep] returns [ErrWoken] (so does a sleep the handler reaches
//     with an unchecked answer already there). It does not end a wait for
//     input, which waits for its own keys.
//   - What each CheckInput found, and whether a sleep was cut short, is
//     journaled where it happened: a replay (in a later invocation, or
//     after a worker died) sees the same outcomes at the same points, even
//     if answers reached the store meanwhile. CheckInput sees answers that
//     arrived before the current invocation claimed the task.
//   - Inline (a client without the extension), offers are neither shown
//     nor answered: CheckInput reports nothing and sleeps run in full.
//
// # Waiting on the world
//
// Much slow work is somebody else's: a transcoding service, a CI run, a
// payment, an approval in another system, which says it is done with a
// webhook. A task waits for such an event without polling and without any
// invocation: while it waits its status is working, with no
// inputRequests (the event is not the client's to give), and the event's
// delivery resumes it through the queue.
//
//   - A callback is a URL: [Callback] makes it (PublicURL + CallbackPath +
//     task id + a 256-bit token, of which the store keeps a hash), the
//     handler hands it out inside a [Do] step, and [AwaitCallback] waits
//     for the first POST of a JSON body that fits the callback's type,
//     which the body is checked against before it is stored. The URL is
//     the capability: single-use (a second POST answers 404), bound to its
//     task and step, expiring with its wait; a URL that names no open
//     callback answers 404 whatever the reason (unknown, used, expired,
//     forged, another task's). With [WebhookSecret] it also checks a
//     Standard Webhooks signature. It takes its request from the moment
//     Callback returns: a request that comes before the task waits is
//     kept for it.
//   - A signal is named: [AwaitSignal] waits for the signal of its name,
//     which the author's code sends with [Server.Signal] (another tool, a
//     cron, a queue consumer), with no principal check: the task id is the
//     address. A signal sent before the task waits is kept (one per name),
//     so the code that starts the work may signal at once without a race;
//     a second signal of a name, one after its wait ended and one to an
//     ended task are refused ([ErrEventClosed]), which makes a repeated
//     delivery harmless.
//   - A wait lasts until its [Timeout] (default: the task's life), when
//     AwaitCallback returns [ErrCallbackTimeout] and AwaitSignal
//     [ErrSignalTimeout], and the handler goes on as it chooses. The claim
//     that runs the task after the wait's end closes it, so an event is
//     either in the journal or refused, never both.
//   - What a wait brought, or that it timed out, is journaled: a replay
//     returns the same.
//   - Events need a store that takes them ([driver.EventStore]); inline (a client
//     without the extension) a tool that waits on the world goes on as a
//     task with the async-jobs fallback, and is refused otherwise.
//
// # Parallel steps
//
// [All] runs one branch per item, each in a worker invocation of its own
// (at most [Concurrency] at once), and returns their results in order once
// every branch has finished. A branch's queue message is a branch id
// ([driver.BranchID]: the task's id, the step's number, the branch's index); its
// invocation claims the branch under a lease and a fencing generation of
// its own, replays the handler up to the parallel step (every step before
// it is journaled) and runs only its own branch, whose result is
// journaled in the store: a branch that finished never runs again, and a
// worker that dies loses only its branch's attempt. Each branch has Do's
// retries; a failed branch fails the join with a [*JoinError] and the
// others' results. The task waits without any invocation while its
// branches run; the last one to finish resumes it; cancelling the task
// stops the branches at their next chance (a running one sees its context
// cancelled). The sweeper watches a task's branches, so a branch whose
// message was lost runs anyway. On a store that is not a [driver.Brancher] the
// branches run one after another as Do steps.
//
// # Audit log
//
// The server records the lifecycle of every task as structured INFO records
// on [Options.Logger] whose message is "task audit" ([AuditMessage]); a log
// pipeline selects them by that message. Their attributes:
//
//   - event: created, input_requested, input_answered, cancel_requested or
//     terminal (the Audit* constants);
//   - principal: the task's owner (the verified principal, "anonymous"
//     under Options.Anonymous);
//   - task: the task id;
//   - tool: the tool's name (on created, input_requested, and terminal
//     when a worker made the transition);
//   - status: the status right after a cancel_requested; the terminal
//     status (completed, failed, cancelled) of a terminal record;
//   - keys: the input keys asked for (input_requested: those the task
//     waits for and its outstanding offers) or answered (input_answered),
//     sorted and comma-separated;
//   - resumed: whether an input_answered resumed the task.
//
// A task has one terminal record, logged by the process that made the
// transition (a worker, or the endpoint for a tasks/cancel that ends a
// parked or queued task). Calls that name an unknown task, or another
// principal's, are not task events and leave no audit record; a task that
// expires (its TTL passed) is not a transition either.
//
// # Telemetry
//
// With [Options.TracerProvider] and [Options.MeterProvider] (a deployment
// gets them through [App.Telemetry]) the server traces each MCP request, worker
// invocation, claim, step attempt, enqueue and sweep, and counts tasks
// created and ended, step durations and attempts, queue lag, sweeper
// recoveries and store errors (see [Telemetry] and the Attr* and Metric*
// constants). A task is one trace: the creating tools/call's trace context
// is stored with it ([driver.Task.TraceParent]), and every later invocation is its
// child and links to the enqueue its message came from. Without providers
// nothing is traced and the hot paths do no tracing work. The package
// depends on the OpenTelemetry API only; exporters are the deployment's
// choice (package otelexport).
//
// The journal also keeps, for operators (mcptasks inspect), when each
// entry was made, the attempt and duration of each Do step, and each
// failed attempt that was retried ([driver.KindAttempt], which replay skips).
//
// # Storing tasks
//
// A [Server] runs on a [driver.Store], which holds every task and its
// journal, and a [driver.Queue], which hands task ids to workers: the
// contracts of package driver, which a tool author never implements. The
// module's stores are pkg/tasks/redisstore (Redis, embedded in the local
// server when no REDIS_URL is set) and pkg/tasks/pgstore (PostgreSQL); its
// queues are under pkg/queue. A deployment gets them from its environment
// through pkg/bundle; a backend author implements package driver and proves
// it with pkg/tasks/storetest and pkg/queue/queuetest. What a store can do
// beyond the Store (events, parallel branches, short leases, listing,
// watching) are optional interfaces there, without which the engine does
// what it can: see package driver.
//
// # What this package guarantees
//
// A handle is returned only once the task is durable; terminal states
// never change; a journaled step is never recomputed and two workers never
// advance one task at once; every task is bound to the principal that
// created it, and a task owned by someone else answers exactly like an
// unknown one, as does an id the server never issued ([driver.ValidID]); any
// process may die at any instant and every task still progresses once
// processes are back; with [Options.MaxLiveTasks], no principal has more
// live tasks than the limit, however many creations race.
package tasks
