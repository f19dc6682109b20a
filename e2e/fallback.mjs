// The async-jobs fallback followed end to end by a real TypeScript MCP
// client that does not declare the tasks extension: every step is an
// ordinary tools/call. Shared by the clients' own scripts
// (e2e/tsclient/fallback.mjs: the SDK 1.x client; e2e/tsclient2/fallback.mjs:
// the SDK 2.x Client in either of its version modes), which connect their
// client and hand it here; driven by e2e/fallback_test.go against the split
// shape with auth on.
//
// Env: TOKEN_A and TOKEN_B (bearer tokens of two principals), LONG_SECONDS
// (a slow_compute longer than one invocation's budget). Each check that
// fails throws; the report (the jobs' ids and what the client saw) is the
// last line of stdout.

function step(what) {
  console.error(new Date().toISOString(), what);
}

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

function text(result) {
  return (result?.content ?? []).map((c) => c.text ?? "").join("");
}

// waitDeadlineMs bounds every wait for a job to change.
const waitDeadlineMs = 60_000;

/**
 * Runs the fallback scenario with clients made by connect(token).
 * @param {(token: string) => Promise<{client: any, protocolVersion: string}>} connect
 */
export async function followFallback(connect) {
  const report = {};
  const a = await connect(process.env.TOKEN_A);
  const b = await connect(process.env.TOKEN_B);
  report.protocolVersion = a.protocolVersion;
  // Every answer a client on an older revision gets has that revision's
  // shape: no resultType (a field of 2026-07-28).
  const call = async (who, name, args) => {
    const r = await who.client.callTool({ name, arguments: args });
    check(who.protocolVersion === "2026-07-28" || !("resultType" in r), `${name} on ${who.protocolVersion} carries resultType: ${JSON.stringify(r)}`);
    return r;
  };

  // The companion tools are listed with the task tools.
  step("tools/list: the companion tools");
  const { tools } = await a.client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const name of ["task_status", "task_answer", "task_cancel"]) {
    check(byName[name]?.inputSchema?.properties?.taskId, `${name} in tools/list: ${JSON.stringify(byName[name])}`);
  }

  // start calls a task tool that cannot finish inline and checks the
  // handle it answers at once.
  async function start(name, args) {
    const began = Date.now();
    const r = await call(a, name, args);
    const sc = r.structuredContent;
    check(!r.isError && typeof sc?.taskId === "string" && sc.taskId !== "", `${name}: ${JSON.stringify(r)}`);
    check(sc.tool === name && ["working", "input_required"].includes(sc.status) && sc.pollIntervalMs > 0, `${name} handle ${JSON.stringify(sc)}`);
    check(r._meta?.["io.modelcontextprotocol/related-task"]?.taskId === sc.taskId, `${name} related-task ${JSON.stringify(r._meta)}`);
    check(text(r).includes(sc.taskId) && text(r).includes("task_status"), `${name} text ${JSON.stringify(text(r))}`);
    return { id: sc.taskId, ms: Date.now() - began, result: r };
  }

  // status waits (task_status with waitSeconds, again until the deadline)
  // until the job's status is one of want, and returns the last answer.
  async function status(who, id, ...want) {
    const deadline = Date.now() + waitDeadlineMs;
    for (let calls = 1; ; calls++) {
      const r = await call(who, "task_status", { taskId: id, waitSeconds: 10 });
      const st = r.structuredContent?.status ?? (r._meta?.["io.modelcontextprotocol/related-task"]?.taskId === id && !r.isError ? "completed" : undefined);
      if (want.includes(st) || (want.includes("failed") && r.isError)) return { r, calls };
      check(st === "working" || st === "input_required", `task_status of ${id}: ${JSON.stringify(r)}`);
      check(Date.now() < deadline, `${id} still ${st} after ${waitDeadlineMs} ms, want ${want}`);
    }
  }

  // A job longer than the budget, followed to its result.
  step(`slow_compute ${process.env.LONG_SECONDS}s: started, followed to its result`);
  const long = await start("slow_compute", { seconds: Number(process.env.LONG_SECONDS), label: "fallback" });
  const done = await status(a, long.id, "completed");
  check(!done.r.isError && text(done.r).startsWith(`computed "fallback" in ${process.env.LONG_SECONDS}s`), "long job result " + JSON.stringify(done.r));
  check(done.r._meta?.["io.modelcontextprotocol/related-task"]?.taskId === long.id, "result without related-task " + JSON.stringify(done.r._meta));
  report.long = { taskId: long.id, startMs: long.ms, statusCalls: done.calls, text: text(done.r) };

  // A 600 s job: started at once, polled, cancelled.
  step("slow_compute 600s: started, polled, cancelled");
  const job = await start("slow_compute", { seconds: 600 });
  const polled = await call(a, "task_status", { taskId: job.id });
  check(!polled.isError && polled.structuredContent?.status === "working" && polled.structuredContent.taskId === job.id, "task_status of a working job " + JSON.stringify(polled));
  const cancelled = await call(a, "task_cancel", { taskId: job.id });
  check(!cancelled.isError && cancelled.structuredContent?.taskId === job.id, "task_cancel " + JSON.stringify(cancelled));
  const ended = await status(a, job.id, "cancelled");
  check(ended.r.structuredContent.status === "cancelled" && !ended.r.isError, "cancelled job " + JSON.stringify(ended.r));
  report.cancelled = { taskId: job.id, startMs: job.ms, cancelAnswer: cancelled.structuredContent };

  // An input round: the request rendered for a model, a bad answer
  // refused (the job keeps waiting), a valid one completes the job.
  step("confirm_delete: the input through task_status and task_answer");
  const confirm = await start("confirm_delete", { filename: "fallback.txt" });
  const asking = (await status(a, confirm.id, "input_required")).r;
  const req = asking.structuredContent.inputRequests?.confirm;
  check(req?.method === "elicitation/create" && req.message === "Delete fallback.txt?" && req.requestedSchema?.properties?.confirm?.type === "boolean",
    "input request " + JSON.stringify(asking.structuredContent));
  check(text(asking).includes("task_answer") && text(asking).includes("confirm"), "input request text " + JSON.stringify(text(asking)));
  const bad = await call(a, "task_answer", { taskId: confirm.id, key: "confirm", action: "accept", content: { confirm: "yes" } });
  check(bad.isError === true && /confirm/.test(text(bad)) && /boolean/.test(text(bad)), "invalid answer " + JSON.stringify(bad));
  check(!/[a-z]\.[A-Z]\w+|\bstruct\b|json: cannot/.test(text(bad)), "invalid answer names Go internals: " + text(bad));
  const still = await call(a, "task_status", { taskId: confirm.id });
  check(still.structuredContent?.status === "input_required" && still.structuredContent.inputRequests?.confirm, "after the invalid answer " + JSON.stringify(still));
  // A valid answer: the job's next state, or its result when it is done
  // by then.
  const good = await call(a, "task_answer", { taskId: confirm.id, key: "confirm", action: "accept", content: { confirm: true } });
  check(!good.isError && good._meta?.["io.modelcontextprotocol/related-task"]?.taskId === confirm.id &&
    (text(good) === "deleted fallback.txt" || good.structuredContent?.taskId === confirm.id), "valid answer " + JSON.stringify(good));
  const deleted = await status(a, confirm.id, "completed");
  check(text(deleted.r) === "deleted fallback.txt", "confirm_delete result " + JSON.stringify(deleted.r));
  report.confirm = { taskId: confirm.id, invalidAnswer: text(bad), inputText: text(asking), validAnswer: text(good) };

  // Another principal's handle answers exactly like an unknown one.
  step("another principal's handle, and an unknown one");
  const unknown = "AAAAAAAAAAAAAAAAAAAAAA";
  for (const tool of ["task_status", "task_answer", "task_cancel"]) {
    const args = (id) => (tool === "task_answer" ? { taskId: id, key: "confirm", content: { confirm: true } } : { taskId: id });
    const foreign = await call(b, tool, args(confirm.id));
    const none = await call(b, tool, args(unknown));
    check(foreign.isError === true && text(foreign) === `unknown taskId: ${confirm.id}`, `${tool} of another principal's job: ${JSON.stringify(foreign)}`);
    check(none.isError === true && text(none) === `unknown taskId: ${unknown}`, `${tool} of an unknown job: ${JSON.stringify(none)}`);
    check(JSON.stringify(foreign).replaceAll(confirm.id, unknown) === JSON.stringify(none), `${tool}: ${JSON.stringify(foreign)} differs from ${JSON.stringify(none)}`);
  }

  await a.client.close();
  await b.client.close();
  console.log(JSON.stringify(report));
}
