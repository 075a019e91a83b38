// A real OpenID provider for orca's OAuth tests: oidc-provider (npm), with its own signing key,
// the client credentials grant and resource indicators (RFC 8707), minting JWT access tokens
// whose audience is the requested resource. The test starts it, stops it and starts it again
// with another key (a rotation). With CONSOLE_REDIRECT_URI it also has the console's public
// client `orca-console` (authorization code with PKCE, no secret), and with DEV_INTERACTIONS=1
// its development login and consent pages (any login and password).
//
// Environment: PROVIDER_DIR (where npm installed oidc-provider), PORT, KID (the signing key's
// id), ALG (RS256, ES256 or EdDSA), TTL (access token lifetime in seconds),
// CONSOLE_REDIRECT_URI, DEV_INTERACTIONS (the development pages, and dynamic registration).
import * as crypto from "node:crypto";
import { createRequire } from "node:module";
import * as path from "node:path";

const require = createRequire(path.join(process.env.PROVIDER_DIR, "package.json"));
const { default: Provider } = await import(require.resolve("oidc-provider"));

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const alg = process.env.ALG || "RS256";
const ttl = Number(process.env.TTL || "300");

const pair = {
  RS256: () => crypto.generateKeyPairSync("rsa", { modulusLength: 2048 }),
  ES256: () => crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }),
  EdDSA: () => crypto.generateKeyPairSync("ed25519"),
}[alg]();
const jwk = { ...pair.privateKey.export({ format: "jwk" }), kid: process.env.KID, use: "sig", alg };

// Each client's roles, sent in the `groups` claim of its tokens.
const groups = { "analyst-app": ["analyst"], "admin-app": ["admin", "staff"], "write-only-app": ["admin"], "orca-console": ["analyst"] };
const client = (id, scope) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ["client_credentials"],
  redirect_uris: [],
  response_types: [],
  scope,
  id_token_signed_response_alg: alg,
});

const clients = [
  client("analyst-app", "orca.read orca.write"),
  client("admin-app", "orca.read orca.write"),
  client("write-only-app", "orca.write"),
];
if (process.env.CONSOLE_REDIRECT_URI) {
  clients.push({
    client_id: "orca-console",
    token_endpoint_auth_method: "none",
    grant_types: ["authorization_code"],
    response_types: ["code"],
    redirect_uris: [process.env.CONSOLE_REDIRECT_URI],
    scope: "orca.read orca.write",
    id_token_signed_response_alg: alg,
  });
}

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients,
  scopes: ["orca.read", "orca.write", ...(process.env.DEV_INTERACTIONS === "1" ? ["offline_access"] : [])],
  features: {
    devInteractions: { enabled: process.env.DEV_INTERACTIONS === "1" },
    // With the development pages, clients may also register themselves (orca login does).
    registration: { enabled: process.env.DEV_INTERACTIONS === "1" },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => ({
        scope: "orca.read orca.write",
        audience: resource,
        accessTokenTTL: ttl,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg } },
      }),
    },
  },
  // A client that registered itself (orca login) signs people in as analysts.
  extraTokenClaims: (ctx, token) => ({
    groups: groups[token.clientId] || (process.env.DEV_INTERACTIONS === "1" ? ["analyst"] : []),
  }),
});
// The development pages load a web font from Google and the browser asks for a favicon: the
// console's browser test allows the provider's own pages only, so they are kept to themselves.
provider.use(async (ctx, next) => {
  if (ctx.path === "/favicon.ico") {
    ctx.status = 204;
    return;
  }
  await next();
  if (typeof ctx.body === "string" && ctx.type.includes("html")) {
    ctx.body = ctx.body.replace(/@import url\(https:\/\/fonts\.googleapis\.com[^)]*\);?/g, "");
  }
});
provider.listen(port, "127.0.0.1", () => {
  console.log(`provider listening on ${issuer} with key ${process.env.KID} (${alg})`);
});
