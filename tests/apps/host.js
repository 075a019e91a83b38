// A small MCP Apps host for orca's browser tests: the extension's own host side (AppBridge from
// @modelcontextprotocol/ext-apps) in front of a real MCP client (@modelcontextprotocol/client)
// connected to orca. Bundled by esbuild into host.bundle.js; driven by apps.mjs.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const MIME = "text/html;profile=mcp-app";

async function connect(key) {
  const client = new Client(
    { name: "orca-apps-test-host", version: "1" },
    { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [MIME] } } } },
  );
  const transport = new StreamableHTTPClientTransport(new URL("/mcp", location.origin), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

/** Call `name`, then render the app its definition links to, as a host would. */
async function show(client, name, args, theme) {
  const { tools } = await client.listTools();
  const tool = tools.find((candidate) => candidate.name === name);
  if (!tool) throw new Error(`${name} is not listed`);
  const uri = tool._meta?.ui?.resourceUri;
  if (!uri) throw new Error(`${name} links no app`);
  const read = await client.readResource({ uri });
  const content = read.contents[0];
  if (content.mimeType !== MIME) throw new Error(`unexpected type ${content.mimeType}`);
  const result = await client.callTool({ name, arguments: args });
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.title = uri;
  const box = document.getElementById("apps");
  box.replaceChildren(frame);
  const bridge = new AppBridge(
    null,
    { name: "orca-apps-test-host", version: "1" },
    { serverTools: {}, serverResources: {}, logging: {} },
    {
      hostContext: {
        theme,
        toolInfo: { tool },
        displayMode: "inline",
        containerDimensions: { maxWidth: box.clientWidth },
      },
    },
  );
  window.appCalls = [];
  // A view's calls go to orca like any other, saying which app they come from.
  bridge.oncalltool = async (params) => {
    window.appCalls.push(params.name);
    return client.callTool({ ...params, _meta: { ...(params._meta || {}), ui: { resourceUri: uri } } });
  };
  bridge.onsizechange = ({ height }) => { if (height) frame.style.height = `${height}px`; };
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  // Listening before the page loads: its ui/initialize comes as its script runs.
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.srcdoc = content.text;
  await initialized;
  await bridge.sendToolInput({ arguments: args });
  await bridge.sendToolResult(result);
  window.bridge = bridge;
  return { uri, meta: content._meta || null };
}

window.orcaHost = { connect, show, MIME };
window.orcaHostReady = true;
