// An MCP server built with the TypeScript SDK (@modelcontextprotocol/sdk, McpServer +
// StreamableHTTPServerTransport) as its README shows it, run by the conformance matrix:
//     node server.mjs PORT stateful|stateless
// Stateful: a transport per session (SSE answers). Stateless: a server and transport per request
// (JSON answers). GET /stats tells what the server saw (sessions open, DELETEs, GET streams, its own time).
import http from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const port = Number(process.argv[2]);
const stateful = process.argv[3] === "stateful";
const transports = {};
const stats = { opened: 0, deletes: 0, gets: 0, spentMs: [] };

function build() {
  const server = new McpServer({ name: "matrix-ts", version: "1.0.0" });
  server.registerTool(
    "lookup_price",
    { description: "The price of a ticker symbol.", inputSchema: { symbol: z.string() } },
    async ({ symbol }) => ({ content: [{ type: "text", text: `${symbol.toUpperCase()}: 182.3` }] }),
  );
  server.registerTool(
    "quote",
    {
      description: "A quote as structured content.",
      inputSchema: { symbol: z.string() },
      outputSchema: { symbol: z.string(), price: z.number() },
    },
    async ({ symbol }) => {
      const out = { symbol: symbol.toUpperCase(), price: 182.3 };
      return { content: [{ type: "text", text: JSON.stringify(out) }], structuredContent: out };
    },
  );
  return server;
}

async function readJson(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

function refuse(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

async function handle(req, res) {
  const body = req.method === "POST" ? await readJson(req) : undefined;
  if (!stateful) {
    if (req.method !== "POST") return refuse(res, 405, "Method not allowed.");
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    return transport.handleRequest(req, res, body);
  }
  const sid = req.headers["mcp-session-id"];
  let transport = sid ? transports[sid] : undefined;
  if (!transport) {
    if (sid || req.method !== "POST" || !isInitializeRequest(body)) {
      return refuse(res, 400, "Bad Request: No valid session ID provided");
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        transports[id] = transport;
        stats.opened += 1;
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) delete transports[transport.sessionId];
    };
    await build().connect(transport);
  }
  if (req.method === "DELETE") stats.deletes += 1;
  if (req.method === "GET") stats.gets += 1;
  return transport.handleRequest(req, res, body);
}

http
  .createServer((req, res) => {
    if (req.url === "/stats") {
      res.writeHead(200, { "content-type": "application/json" });
      return res.end(JSON.stringify({ ...stats, open: Object.keys(transports).length }));
    }
    const started = performance.now();
    // the GET stream lasts as long as its session: not work done
    if (req.method !== "GET") res.on("finish", () => stats.spentMs.push(performance.now() - started));
    handle(req, res).catch((err) => {
      if (!res.headersSent) refuse(res, 500, String(err));
    });
  })
  .listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
