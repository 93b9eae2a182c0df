// One MCP client session against Engram's /mcp, printed as JSON on stdout, for the client
// conformance test (tests/e2e/test_mcp_conformance.py):
//   node client.mjs ts-sdk <url>      the TypeScript SDK's Streamable HTTP client
//   node client.mjs mcp-remote <url>  the same client over stdio through mcp-remote (as Claude Desktop runs it)
// The credential comes from the environment (ENGRAM_MCP_AUTH, the Authorization header's value),
// never the command line.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createRequire } from "node:module";

const [mode, url] = process.argv.slice(2);
const auth = process.env.ENGRAM_MCP_AUTH;
const transportErrors = [];

function transport() {
  if (mode === "ts-sdk") {
    return new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: auth } } });
  }
  const proxy = createRequire(import.meta.url).resolve("mcp-remote/dist/proxy.js");
  return new StdioClientTransport({
    command: process.execPath,
    // mcp-remote expands ${ENGRAM_MCP_AUTH} from its environment: the key is not in its argv.
    args: [proxy, url, "--transport", "http-only", "--header", "Authorization:${ENGRAM_MCP_AUTH}"],
    env: { ...process.env },
    stderr: "pipe",
  });
}

const t = transport();
t.onerror = (err) => transportErrors.push(String(err?.message ?? err));
const client = new Client({ name: `conformance-${mode}`, version: "1.0.0" });
const out = { transportErrors };
try {
  await client.connect(t);
  out.serverInfo = client.getServerVersion();
  out.protocolVersion = t.protocolVersion ?? null;
  out.tools = (await client.listTools()).tools;
  out.remember = await client.callTool({ name: "remember", arguments: { fact: `I test with ${mode}`, topic: "testing" } });
  out.listFacts = await client.callTool({ name: "list_facts", arguments: {} });
  out.badArgument = await client.callTool({ name: "list_facts", arguments: { limit: "many" } });
  out.unknownArgument = await client.callTool({ name: "list_facts", arguments: { limt: 3 } });
  await client.close();
} catch (err) {
  out.error = String(err?.stack ?? err);
}
process.stdout.write(JSON.stringify(out));
