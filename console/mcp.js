// The console's MCP client: JSON-RPC over Streamable HTTP to this server's /mcp, with the
// tab's API key (if any) as a bearer token, plus the console's read-only JSON endpoints.

const KEY_STORAGE = "orca.console.apiKey";
const PROTOCOL_VERSION = "2025-06-18";

/** An HTTP answer that is not a success: status and orca's error object when it sent one. */
export class HttpError extends Error {
  constructor(status, error) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.error = error || { code: status === 401 ? "UNAUTHORIZED" : "INTERNAL", message: `HTTP ${status}` };
  }
}

/** A JSON-RPC error: the request itself was refused (unknown tool, invalid parameters). */
export class RpcError extends Error {
  constructor(error) {
    super(error?.message || "JSON-RPC error");
    this.error = { code: String(error?.code ?? "RPC_ERROR"), message: error?.message || "", hint: hintFor(error) };
  }
}

function hintFor(error) {
  if (error?.code === -32602 && /unknown tool/.test(error?.message || "")) {
    return "the tool does not exist or this API key may not use it";
  }
  return error?.data?.hint;
}

export class Mcp {
  constructor() {
    this.apiKey = sessionStorage.getItem(KEY_STORAGE);
    this.session = null;
    this.protocol = null;
    this.nextId = 1;
  }

  setKey(key) {
    this.apiKey = key || null;
    if (key) sessionStorage.setItem(KEY_STORAGE, key);
    else sessionStorage.removeItem(KEY_STORAGE);
    this.session = null;
  }

  headers(extra = {}) {
    const headers = { ...extra };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    if (this.session) headers["Mcp-Session-Id"] = this.session;
    if (this.protocol) headers["MCP-Protocol-Version"] = this.protocol;
    return headers;
  }

  async post(message) {
    // The console lists every tool for a person to pick from: never the tool-search pair.
    const response = await fetch("/mcp?tool_search=off", {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/json", Accept: "application/json, text/event-stream" }),
      body: JSON.stringify(message),
    });
    if (!response.ok && response.status !== 202) throw new HttpError(response.status, await errorBody(response));
    return response;
  }

  /** Send one request and return its result; throws HttpError or RpcError. */
  async request(method, params) {
    const id = this.nextId++;
    const response = await this.post({ jsonrpc: "2.0", id, method, params });
    const session = response.headers.get("Mcp-Session-Id");
    if (session) this.session = session;
    const message = await readAnswer(response, id);
    if (message.error) throw new RpcError(message.error);
    return message.result;
  }

  async notify(method, params) {
    const response = await this.post({ jsonrpc: "2.0", method, ...(params ? { params } : {}) });
    // Read the (empty) body so that the request completes rather than being dropped.
    await response.text();
  }

  /** The MCP handshake; works with stateless and session mode alike. */
  async connect() {
    this.session = null;
    this.protocol = null;
    const result = await this.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: "orca-console", version: "1" },
    });
    this.protocol = result.protocolVersion;
    await this.notify("notifications/initialized");
    return result;
  }

  async listTools() {
    const tools = [];
    let cursor;
    do {
      const page = await this.request("tools/list", cursor ? { cursor } : {});
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }

  callTool(name, args) {
    return this.request("tools/call", { name, arguments: args });
  }

  /** GET a JSON endpoint of this server with the tab's key. */
  async getJson(path) {
    const response = await fetch(path, { headers: this.headers({ Accept: "application/json" }) });
    if (!response.ok) {
      const error = new HttpError(response.status, await errorBody(response));
      error.retryAfter = response.headers.get("Retry-After");
      throw error;
    }
    return response.json();
  }

  /** POST JSON to an endpoint of this server with the tab's key. */
  async postJson(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/json", Accept: "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) throw new HttpError(response.status, await errorBody(response));
    return response.json();
  }
}

async function errorBody(response) {
  try {
    const body = await response.json();
    return body?.error || null;
  } catch {
    return null;
  }
}

/** The JSON-RPC answer with `id`, from a JSON body or a server-sent event stream. */
async function readAnswer(response, id) {
  const type = response.headers.get("Content-Type") || "";
  if (type.includes("text/event-stream")) {
    const text = await response.text();
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event.split(/\r?\n/).filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart()).join("\n");
      if (!data) continue;
      const message = JSON.parse(data);
      if (message.id === id) return message;
    }
    throw new Error("the server's event stream ended without an answer");
  }
  const message = await response.json();
  if (Array.isArray(message)) return message.find((item) => item.id === id);
  return message;
}
