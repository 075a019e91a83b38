// The console's sign-in through the issuer orca trusts (OAuth authorization code with PKCE, as
// a public client): `beginSignIn` keeps a code verifier and a state in this tab and sends the
// browser to the issuer; `finishSignIn`, when the issuer sends it back with a code, checks the
// state (and the issuer, RFC 9207), takes the code out of the address bar at once and has this
// server exchange it for an access token, which the page then keeps like an API key.

const PENDING = "orca.console.signIn";
const SIGNED_IN = "orca.console.signedIn";

function base64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** `size` random bytes as base64url: 32 bytes make a 43-character PKCE verifier. */
function randomText(size) {
  const bytes = new Uint8Array(size);
  crypto.getRandomValues(bytes);
  return base64url(bytes);
}

/** Send the browser to the issuer's sign-in page, as `offer` (from /console/api/session) says. */
export async function beginSignIn(offer) {
  const verifier = randomText(32);
  const state = randomText(16);
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  const redirectUri = `${location.origin}/`;
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, issuer: offer.issuer, redirectUri }));
  const url = new URL(offer.authorization_endpoint);
  const params = {
    response_type: "code",
    client_id: offer.client_id,
    redirect_uri: redirectUri,
    code_challenge: base64url(new Uint8Array(digest)),
    code_challenge_method: "S256",
    state,
    resource: offer.resource,
  };
  if (offer.scope) params.scope = offer.scope;
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  location.assign(url.href);
}

/**
 * When the issuer sent the browser back here: the access token for the code it brought (the
 * query is removed from the address first). Null when the page was not opened that way; throws
 * an Error whose message the page shows when the sign-in cannot be completed.
 */
export async function finishSignIn() {
  const query = new URLSearchParams(location.search);
  if (!query.has("code") && !query.has("error")) return null;
  history.replaceState(null, "", location.pathname);
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || "null");
  sessionStorage.removeItem(PENDING);
  if (!pending || query.get("state") !== pending.state) {
    throw new Error("The sign-in was not started from this tab: sign in again.");
  }
  if (query.has("iss") && query.get("iss") !== pending.issuer) {
    throw new Error("The sign-in came back from another issuer than this server trusts: sign in again.");
  }
  if (query.has("error")) {
    const reason = /^[a-z_]{1,64}$/.test(query.get("error")) ? ` (${query.get("error")})` : "";
    throw new Error(`The sign-in was not completed${reason}.`);
  }
  const response = await fetch("/console/api/token", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ code: query.get("code"), code_verifier: pending.verifier, redirect_uri: pending.redirectUri }),
  });
  const body = await response.json().catch(() => null);
  if (!response.ok || typeof body?.access_token !== "string") {
    throw new Error(`The sign-in failed: ${body?.error?.message || `HTTP ${response.status}`}.`);
  }
  sessionStorage.setItem(SIGNED_IN, "1");
  return body.access_token;
}

/** Whether the credential this tab keeps came from a sign-in rather than a typed API key. */
export function signedIn() {
  return sessionStorage.getItem(SIGNED_IN) === "1";
}

/** Forget that this tab signed in (the credential itself is forgotten by its owner). */
export function forgetSignIn() {
  sessionStorage.removeItem(SIGNED_IN);
}
