// A real MCP client signing in to orca by itself: the MCP TypeScript SDK's Streamable HTTP
// client with its client-credentials provider. It meets orca's 401, follows the
// protected-resource metadata to the authorization server, gets a token for orca's resource and
// calls a tool. Prints one JSON line: the tools it sees and the tool's result.
//
// Environment: PROVIDER_DIR (where npm installed the SDK), ORCA_URL (orca's /mcp), CLIENT_ID,
// CLIENT_SECRET, SCOPE.
import { createRequire } from "node:module";
import * as path from "node:path";

const require = createRequire(path.join(process.env.PROVIDER_DIR, "package.json"));
const sdk = (file) => import(require.resolve(`@modelcontextprotocol/sdk/${file}`));
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ClientCredentialsProvider } = await sdk("client/auth-extensions.js");

const authProvider = new ClientCredentialsProvider({
  clientId: process.env.CLIENT_ID,
  clientSecret: process.env.CLIENT_SECRET,
  scope: process.env.SCOPE,
});
const transport = new StreamableHTTPClientTransport(new URL(process.env.ORCA_URL), { authProvider });
const client = new Client({ name: "orca-oauth-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({ name: "list_servers", arguments: {} });
console.log(JSON.stringify({ tools: tools.map((tool) => tool.name), result: result.structuredContent }));
await client.close();
