// The TypeScript SDK 2.x Client (pinned in package.json), without the tasks
// extension, through the async-jobs fallback tools (../fallback.mjs), in
// the version mode VERSION: "2026-07-28" pins that revision (negotiated
// with server/discover), "2025-11-25" is the Client's default legacy mode
// (the initialize handshake). Driven by e2e/fallback_test.go; env as
// ../fallback.mjs says, plus MCP_URL and VERSION.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { followFallback } from "../fallback.mjs";

const url = new URL(process.env.MCP_URL);
const version = process.env.VERSION;
const options = version === "2026-07-28" ? { versionNegotiation: { mode: { pin: version } } } : {};

await followFallback(async (token) => {
  const client = new Client({ name: "mcptasks-e2e-fallback", version: "1.0.0" }, options);
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  const protocolVersion = client.getNegotiatedProtocolVersion();
  if (protocolVersion !== version) throw new Error(`negotiated ${protocolVersion}, want ${version}`);
  return { client, protocolVersion };
});
