// The official tasks requester, @modelcontextprotocol/ext-tasks (pinned in
// package.json) on the TypeScript SDK 2.x Client, against a running mcptasks
// endpoint on protocol revision 2026-07-28. Driven by e2e/exttasks_test.go,
// which starts the split shape (an endpoint and a worker process on a real
// redis-server).
//
// The SDK Client rejects a `resultType: "task"` answer, so on 2026-07-28 the
// requester needs the host's own request path for tools/call and tasks/*
// (its rawDispatch option): rawDispatch below POSTs the JSON-RPC request
// with the 2026-07-28 transport headers and reads the answer (JSON or SSE).
// It also logs every request it sends, with the time it was sent and
// answered, so that the report can say what the requester did on the wire.
//
// Env: MCP_URL (the endpoint), TOKEN (a bearer token). Each check that fails
// throws (exit 1, the reason on stderr); on success the last line of stdout
// is a JSON report the Go test checks further.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const url = new URL(process.env.MCP_URL);
const auth = { Authorization: `Bearer ${process.env.TOKEN}` };
const protocolVersion = "2026-07-28";
const clientInfo = { name: "mcptasks-e2e-exttasks", version: "1.0.0" };
// Every request and stream has a deadline.
const requestTimeoutMs = 90_000;

const started = performance.now();
const now = () => Math.round(performance.now() - started);
const report = { scenarios: {}, errors: [] };

function step(what) {
  console.error(new Date().toISOString(), what);
}

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

function text(result) {
  return (result?.content ?? []).map((c) => c.text ?? "").join("");
}

// wire holds one entry per request rawDispatch sent: method, taskId, the
// status the answer carried, and when it was sent and answered (ms since
// the script started).
const wire = [];

// readAnswer returns the JSON-RPC response with id from an HTTP answer: a
// JSON body, or an SSE stream whose data: lines carry messages.
async function readAnswer(res, id) {
  const body = await res.text();
  if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    return JSON.parse(body);
  }
  for (const line of body.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const msg = JSON.parse(line.slice(5));
    if (msg.id === id) return msg;
  }
  throw new Error(`HTTP ${res.status}: no response to ${id} in the stream`);
}

// headersFor returns the 2026-07-28 HTTP headers of request.
function headersFor(request) {
  const h = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": protocolVersion,
    "Mcp-Method": request.method,
    ...auth,
  };
  const params = request.params ?? {};
  if (request.method === "tools/call") h["Mcp-Name"] = params.name;
  if (request.method.startsWith("tasks/")) h["Mcp-Name"] = params.taskId;
  return h;
}

let nextId = 0;

// rawDispatch sends one request the requester built (already framed with
// the 2026-07-28 _meta) and returns its raw result or error.
async function rawDispatch(request, options = {}) {
  const id = `raw-${++nextId}`;
  const entry = { method: request.method, taskId: request.params?.taskId, sent: now() };
  wire.push(entry);
  const signals = [AbortSignal.timeout(options.context?.requestTimeoutMs ?? requestTimeoutMs)];
  if (options.signal) signals.push(options.signal);
  const res = await fetch(url, {
    method: "POST",
    headers: { ...headersFor(request), ...(options.context?.headers ?? {}) },
    body: JSON.stringify({ jsonrpc: "2.0", id, ...request }),
    signal: AbortSignal.any(signals),
  });
  const msg = await readAnswer(res, id);
  entry.answered = now();
  if (msg.error) {
    entry.error = msg.error.code;
    return { kind: "error", error: msg.error };
  }
  entry.status = msg.result?.status;
  entry.taskId ??= msg.result?.taskId;
  return { kind: "result", result: msg.result };
}

// listen opens subscriptions/listen for taskId and hands each
// notifications/tasks to the requester the way the SDK Client would (its
// fallback notification handler, which the requester's adapter installs),
// reopening the stream when the server ends it, until signal aborts.
async function listen(client, taskId, signal, seen) {
  while (!signal.aborted) {
    const request = {
      method: "subscriptions/listen",
      params: {
        notifications: { taskIds: [taskId] },
        _meta: {
          "io.modelcontextprotocol/protocolVersion": protocolVersion,
          "io.modelcontextprotocol/clientInfo": clientInfo,
          "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
        },
      },
    };
    let res;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: headersFor(request),
        body: JSON.stringify({ jsonrpc: "2.0", id: `listen-${++nextId}`, ...request }),
        signal: AbortSignal.any([signal, AbortSignal.timeout(requestTimeoutMs)]),
      });
      check(res.status === 200 && (res.headers.get("content-type") ?? "").startsWith("text/event-stream"), `listen: HTTP ${res.status}`);
      // An abort does not always end a read of the body in progress:
      // cancelling the reader does.
      const reader = res.body.getReader();
      const cancel = () => reader.cancel().catch(() => {});
      signal.addEventListener("abort", cancel, { once: true });
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.startsWith("data:")) continue;
          const msg = JSON.parse(line.slice(5));
          if (msg.method !== "notifications/tasks") continue;
          seen.push({ status: msg.params.status, at: now() });
          await client.fallbackNotificationHandler?.(msg);
        }
      }
      signal.removeEventListener("abort", cancel);
    } catch (e) {
      if (signal.aborted) return;
      throw e;
    }
  }
}

// answers holds what the input handler was asked, by task.
const asked = [];

async function onInputRequest(request, context) {
  check(request.kind === "elicitation", "input request of kind " + request.kind);
  const props = Object.keys(request.params.requestedSchema?.properties ?? {});
  asked.push({ taskId: context.taskId, key: context.inputId, message: request.params.message, fields: props, at: now() });
  if (props.includes("confirm")) return { action: "accept", content: { confirm: true } };
  if (props.includes("stop")) return { action: "accept", content: { stop: true } };
  throw new Error("unexpected input request " + JSON.stringify(request.params));
}

const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: protocolVersion } } });
await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: auth } }));
check(client.getProtocolEra() === "modern" && client.getNegotiatedProtocolVersion() === protocolVersion,
  `negotiated ${client.getProtocolEra()} ${client.getNegotiatedProtocolVersion()}`);
const session = createTaskSessionFromClient(client, {
  endpointId: "mcptasks-e2e",
  rawDispatch,
  v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities: { elicitation: { form: {} } } },
  onInputRequest,
  onError: (e) => report.errors.push(String(e?.stack ?? e)),
});
check(session.capabilities.execution === true, "session capabilities " + JSON.stringify(session.capabilities));

// run calls tool as a task and settles it; the scenario's record has the
// task id, the outcome, and when it was seen.
async function run(name, tool, args, during) {
  step(`${name}: ${tool} ${JSON.stringify(args)}`);
  const execution = await session.callTool(tool, args, { task: { preference: "require" } });
  check(execution.kind === "task", `${name}: ${tool} ran as ${execution.kind}`);
  const rec = { taskId: execution.handle.taskId };
  report.scenarios[name] = rec;
  const [{ outcome }] = await Promise.all([execution.settle(), during?.(execution, rec)]);
  rec.outcomeAt = now();
  rec.status = outcome.status;
  step(`${name}: ${outcome.status} after ${rec.outcomeAt} ms`);
  if (outcome.status === "completed") {
    rec.text = text(outcome.result);
    rec.isError = outcome.result.isError ?? false;
  }
  if (outcome.status === "failed") rec.error = { code: outcome.error.code, message: outcome.error.message };
  return rec;
}

// answered adds to rec how the task's input round went on the wire: when
// the tasks/update was acknowledged, how long after it the outcome was
// seen, and the tasks/get sent in between.
function answered(rec) {
  const updates = wire.filter((w) => w.method === "tasks/update" && w.taskId === rec.taskId);
  check(updates.length === 1 && updates[0].error === undefined, `tasks/update of ${rec.taskId}: ${JSON.stringify(updates)}`);
  rec.ackAt = updates[0].answered;
  rec.answeredToOutcomeMs = rec.outcomeAt - rec.ackAt;
  rec.getsAfterAck = wire.filter((w) => w.method === "tasks/get" && w.taskId === rec.taskId && w.sent >= rec.ackAt).length;
  rec.asked = asked.filter((a) => a.taskId === rec.taskId).map((a) => ({ key: a.key, message: a.message, fields: a.fields }));
  return rec;
}

const scenarios = [
  // A task to completion.
  run("complete", "slow_compute", { seconds: 2, label: "exttasks" }).then((r) => {
    check(r.status === "completed" && r.text.includes('computed "exttasks" in 2s'), "complete: " + JSON.stringify(r));
  }),
  // An input round answered through the input handler, by polling alone.
  run("input", "confirm_delete", { filename: "report.txt" }).then((r) => {
    answered(r);
    check(r.status === "completed" && r.text === "deleted report.txt", "input: " + JSON.stringify(r));
  }),
  // Cancel.
  run("cancel", "slow_compute", { seconds: 600 }, async (execution, rec) => {
    rec.cancelledAt = now();
    await execution.cancel();
  }).then((r) => {
    check(r.status === "cancelled", "cancel: " + JSON.stringify(r));
  }),
  // A failed task: the tool's JSON-RPC error, through the requester.
  run("failed", "batch_report", { steps: 0 }).then((r) => {
    check(r.status === "failed" && r.error.code === -32602 && /steps must be between 1 and 100/.test(r.error.message), "failed: " + JSON.stringify(r));
  }),
  // The same input round, followed over subscriptions/listen.
  run("listen", "confirm_delete", { filename: "listened.txt" }, async (execution, rec) => {
    rec.notifications = [];
    const stop = new AbortController();
    const stream = listen(client, execution.handle.taskId, stop.signal, rec.notifications);
    await execution.settle();
    stop.abort();
    await stream;
  }).then((r) => {
    answered(r);
    check(r.status === "completed" && r.text === "deleted listened.txt", "listen: " + JSON.stringify(r));
    check(r.notifications.some((n) => n.status === "completed"), "listen: no completed notification " + JSON.stringify(r.notifications));
  }),
  // An offer: stoppable_batch offers "stop" while it pauses between parts;
  // the handler accepts it and the job stops early.
  run("offer", "stoppable_batch", { parts: 3, pauseMillis: 8000 }).then((r) => {
    answered(r);
    check(r.status === "completed" && r.text.includes("stopped early"), "offer: " + JSON.stringify(r));
  }),
];
const results = await Promise.allSettled(scenarios);
step("closing");
const failures = results.filter((r) => r.status === "rejected").map((r) => String(r.reason?.stack ?? r.reason));
await session.close();
await client.close();
report.wire = wire;
report.asked = asked;
if (failures.length > 0) {
  console.error(JSON.stringify(report, null, 1));
  throw new Error(failures.join("\n"));
}
console.log(JSON.stringify(report));
