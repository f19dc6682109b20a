// The real TypeScript MCP SDK 1.x client (pinned in package.json) against a
// running mcptasks endpoint, on protocol revision 2025-11-25 and its tasks
// utility. Driven by e2e/legacy_test.go, which starts the split shape (an
// endpoint and a worker process on a real redis-server) with auth on.
//
// Env: MCP_URL (the endpoint), TOKEN_A and TOKEN_B (bearer tokens of two
// principals). Each check that fails throws (exit 1, with the reason on
// stderr); on success the last line of stdout is a JSON report that the Go
// test checks further (the task ids, read back on 2026-07-28).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.env.MCP_URL);
const report = { elicitations: [] };

function step(what) {
  console.error(new Date().toISOString(), what);
}

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

async function connect(token, elicit) {
  const capabilities = elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: "mcptasks-e2e-ts", version: "1.0.0" }, { capabilities });
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      report.elicitations.push({
        message: req.params.message,
        relatedTask: req.params._meta?.["io.modelcontextprotocol/related-task"]?.taskId ?? null,
      });
      return { action: "accept", content: { confirm: true } };
    });
  }
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  return { client, transport };
}

// stream runs callToolStream with a task and returns its messages.
async function stream(client, name, args) {
  const msgs = [];
  for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, { task: { ttl: 600000 } })) {
    msgs.push(m);
  }
  return msgs;
}

function text(result) {
  return (result?.content ?? []).map((c) => c.text ?? "").join("");
}

const a = await connect(process.env.TOKEN_A, true);
const b = await connect(process.env.TOKEN_B, false);

// initialize: 2025-11-25 with capabilities.tasks, and no 2026 extension.
step('initialize: 2025-11-25 with capabilities.tasks, and no 2026 extension.');
report.protocolVersion = a.transport.protocolVersion;
check(report.protocolVersion === "2025-11-25", `negotiated ${report.protocolVersion}`);
const caps = a.client.getServerCapabilities();
report.capabilities = caps;
check(caps.tasks?.requests?.tools?.call && caps.tasks.list && caps.tasks.cancel, "capabilities.tasks " + JSON.stringify(caps.tasks));
check(!caps.extensions?.["io.modelcontextprotocol/tasks"], "the 2026 extension advertised to a 2025-11-25 client");
const { tools } = await a.client.listTools();
const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport ?? null]));
report.taskSupport = support;
check(support.slow_compute === "optional" && support.confirm_delete === "optional" && support.greet === null, "execution.taskSupport " + JSON.stringify(support));

// callToolStream with a task: the task, its status updates, the result.
step('callToolStream with a task: the task, its status updates, the result.');
let msgs = await stream(a.client, "slow_compute", { seconds: 2, label: "legacy" });
report.computeTypes = msgs.map((m) => m.type);
check(msgs[0].type === "taskCreated", "first message " + msgs[0].type);
check(msgs.some((m) => m.type === "taskStatus" && m.task.status === "working"), "no working status update");
const last = msgs[msgs.length - 1];
check(last.type === "result" && text(last.result).includes('computed "legacy" in 2s'), "compute result " + JSON.stringify(last));
report.computeTask = msgs[0].task.taskId;
check(msgs[0].task.ttl === 600000 && typeof msgs[0].task.pollInterval === "number", "created task " + JSON.stringify(msgs[0].task));

// An input round through elicitation, related to the task.
step('An input round through elicitation, related to the task.');
msgs = await stream(a.client, "confirm_delete", { filename: "report.txt" });
report.confirmTypes = msgs.map((m) => m.type);
const confirmTask = msgs[0].task?.taskId;
const confirmResult = msgs[msgs.length - 1];
check(confirmResult.type === "result" && text(confirmResult.result) === "deleted report.txt", "confirm result " + JSON.stringify(confirmResult));
check(msgs.some((m) => m.type === "taskStatus" && m.task.status === "input_required"), "no input_required status");
check(report.elicitations.some((e) => e.relatedTask === confirmTask && e.message === "Delete report.txt?"), "elicitation " + JSON.stringify(report.elicitations));
report.confirmTask = confirmTask;

// tasks/result of a finished task returns its result, related to it.
step('tasks/result of a finished task returns its result, related to it.');
const again = await a.client.experimental.tasks.getTaskResult(report.computeTask, CallToolResultSchema);
check(text(again).includes('computed "legacy"'), "getTaskResult " + JSON.stringify(again));
check(again._meta?.["io.modelcontextprotocol/related-task"]?.taskId === report.computeTask, "tasks/result without related-task");

// tasks/result of a task that outlasts one invocation's budget: the stream
// closes at the budget's end and the client resumes it (GET with
// Last-Event-ID), on any instance, until the result. LONG_SECONDS is longer
// than the endpoint's budget.
step("tasks/result held across invocations");
const long = Number(process.env.LONG_SECONDS ?? "0");
if (long > 0) {
  const held = await a.client.request(
    { method: "tools/call", params: { name: "slow_compute", arguments: { seconds: long, label: "long" }, task: {} } },
    CreateTaskResultSchema,
  );
  const t1 = Date.now();
  const res = await a.client.experimental.tasks.getTaskResult(held.task.taskId, CallToolResultSchema, { timeout: 120000 });
  check(text(res).includes('computed "long"'), "held tasks/result " + JSON.stringify(res));
  report.heldMs = Date.now() - t1;
  report.heldTask = held.task.taskId;
}

// cancelTask cancels.
step('cancelTask cancels.');
const created = await a.client.request(
  { method: "tools/call", params: { name: "slow_compute", arguments: { seconds: 600 }, task: { ttl: 600000 } } },
  CreateTaskResultSchema,
);
const cancelled = await a.client.experimental.tasks.cancelTask(created.task.taskId);
check(cancelled.status === "cancelled", "cancelTask " + JSON.stringify(cancelled));
check((await a.client.experimental.tasks.getTask(created.task.taskId)).status === "cancelled", "getTask after cancel");
report.cancelledTask = created.task.taskId;

// B's own task; listTasks shows each principal only its own.
step("B's own task; listTasks shows each principal only its own.");
const bTask = await b.client.request(
  { method: "tools/call", params: { name: "slow_compute", arguments: { seconds: 1 }, task: {} } },
  CreateTaskResultSchema,
);
report.bTask = bTask.task.taskId;
async function listAll(client) {
  const ids = [];
  let cursor;
  do {
    const page = await client.experimental.tasks.listTasks(cursor);
    ids.push(...page.tasks.map((t) => t.taskId));
    cursor = page.nextCursor;
  } while (cursor);
  return ids;
}
const aList = await listAll(a.client);
const bList = await listAll(b.client);
report.aList = aList;
report.bList = bList;
for (const id of [report.computeTask, report.confirmTask, report.cancelledTask]) {
  check(aList.includes(id) && !bList.includes(id), `task ${id} listed for A ${aList.includes(id)}, for B ${bList.includes(id)}`);
}
check(bList.includes(report.bTask) && !aList.includes(report.bTask), "B's task listed wrongly");

// Another principal's task is unknown to B (-32602), as an unknown one.
step("Another principal's task is unknown to B (-32602), as an unknown one.");
try {
  await b.client.experimental.tasks.getTask(report.computeTask);
  check(false, "B read A's task");
} catch (e) {
  check(e instanceof McpError && e.code === -32602, "B getTask of A's task: " + e);
}

// Plain tools/call (no task): elicitation works inline ...
step('Plain tools/call (no task): elicitation works inline ...');
const inline = await a.client.callTool({ name: "confirm_delete", arguments: { filename: "inline.txt" } });
check(text(inline) === "deleted inline.txt" && Array.isArray(inline.content), "inline confirm_delete " + JSON.stringify(inline));
// ... a client without elicitation gets a background job to answer with
// the task_answer tool ...
step('... a client without elicitation gets a background job ...');
const asked = await b.client.callTool({ name: "confirm_delete", arguments: { filename: "x.txt" } });
check(!asked.isError && asked.structuredContent?.taskId && /task_answer/.test(text(asked)), "inline without elicitation: " + JSON.stringify(asked));
report.noElicitationJob = asked.structuredContent?.taskId;
// ... and a call that cannot finish within the budget continues as a
// background job, answered at once.
step('... and a call that cannot finish within the budget continues as a job, answered at once.');
const t0 = Date.now();
const longJob = await a.client.callTool({ name: "slow_compute", arguments: { seconds: 70 } });
check(!longJob.isError && longJob.structuredContent?.taskId && /sleeps 1m10s \(step "compute"\)/.test(text(longJob)), "70 s inline: " + JSON.stringify(longJob));
report.longJob = { taskId: longJob.structuredContent?.taskId, ms: Date.now() - t0 };
// ... and a plain inline call still works, content never null.
step('... and a plain inline call still works, content never null.');
const quick = await a.client.callTool({ name: "slow_compute", arguments: { seconds: 0, label: "now" } });
check(text(quick).includes('computed "now"') && Array.isArray(quick.content), "inline slow_compute 0 " + JSON.stringify(quick));

// An unknown method is a JSON-RPC -32601.
step('An unknown method is a JSON-RPC -32601.');
try {
  await a.client.request({ method: "no/such/method", params: {} }, CreateTaskResultSchema);
  check(false, "unknown method answered");
} catch (e) {
  check(e instanceof McpError && e.code === -32601, "unknown method: " + e);
}

await a.client.close();
await b.client.close();
console.log(JSON.stringify(report));
