// The TypeScript SDK 1.x client (pinned in package.json) on 2025-11-25,
// calling tools without params.task, through the async-jobs fallback tools
// (../fallback.mjs). Driven by e2e/fallback_test.go; env as ../fallback.mjs
// says, plus MCP_URL.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { followFallback } from "../fallback.mjs";

const url = new URL(process.env.MCP_URL);

await followFallback(async (token) => {
  const client = new Client({ name: "mcptasks-e2e-fallback", version: "1.0.0" }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  if (transport.protocolVersion !== "2025-11-25") throw new Error(`negotiated ${transport.protocolVersion}`);
  return { client, protocolVersion: transport.protocolVersion };
});
