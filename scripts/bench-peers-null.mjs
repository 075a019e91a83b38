// The floor of scripts/bench-peers: the least an MCP server can do over Streamable HTTP. Node's
// own `http` module answers `initialize`, `tools/list`, `ping` and a `tools/call` of `echo` from
// memory, one JSON body per request (no session, no SSE), so that a path through it times the
// client's own HTTP exchange with next to nothing on the server side.
// Usage: PORT=<port> node scripts/bench-peers-null.mjs
import http from "node:http";

const port = Number(process.env.PORT || 3002);
const echo = {
  name: "echo",
  description: "Echoes back the input",
  inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
};

function answer(message) {
  switch (message.method) {
    case "initialize":
      return {
        protocolVersion: message.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "null", version: "1.0.0" },
      };
    case "tools/list":
      return { tools: [echo] };
    case "tools/call":
      return { content: [{ type: "text", text: `Echo: ${message.params?.arguments?.message}` }] };
    default:
      return {};
  }
}

http
  .createServer((request, response) => {
    if (request.method !== "POST") {
      response.writeHead(405).end();
      return;
    }
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const message = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      if (message.id === undefined) {
        response.writeHead(202).end();
        return;
      }
      const body = JSON.stringify({ jsonrpc: "2.0", id: message.id, result: answer(message) });
      response.writeHead(200, { "content-type": "application/json" }).end(body);
    });
  })
  .listen(port, "127.0.0.1");
