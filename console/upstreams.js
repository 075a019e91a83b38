// Sign-ins to external servers that ask for OAuth: the list from /console/api/upstreams (each
// server's name, mode, status and whether this caller is signed in), a "Sign in" button that has
// orca start the sign-in and sends the browser to the authorization server (orca exchanges the
// code when the browser comes back to /oauth/upstream/callback, which returns here), and a
// "Sign out" button. `noteReturn` reads what the way back says and takes it out of the address.

import { element } from "./form.js";

const MODES = {
  per_user: "your own sign-in",
  shared: "one sign-in shared by every caller",
  service: "orca signs in by itself",
};

const RETURN_ERRORS = {
  expired: "The sign-in was unknown, already used or expired: start it again.",
  other_browser: "The sign-in was started in another browser: start it again here.",
  failed: "The sign-in failed: try again, and check orca's log if it fails again.",
};

/** What the way back from a sign-in says, as { text, kind }, or null; the address is cleaned. */
export function noteReturn() {
  const query = new URLSearchParams(location.search);
  if (!query.has("signed_in") && !query.has("sign_in_error") && !query.has("upstream")) return null;
  history.replaceState(null, "", location.pathname);
  const name = query.get("upstream");
  if (query.get("signed_in") === "1" && name) return { text: `Signed in to ${name}.`, kind: "ok", name };
  const error = RETURN_ERRORS[query.get("sign_in_error")];
  if (error) return { text: error, kind: "error", name };
  return name ? { text: `Sign in to ${name} below.`, kind: "warn", name } : null;
}

/** Render the OAuth upstreams into `container` (the panel is hidden when there are none). */
export async function renderUpstreams(mcp, panel, container, notice) {
  let data;
  try {
    data = await mcp.getJson("/console/api/upstreams");
  } catch {
    panel.hidden = true;
    return;
  }
  const upstreams = data.upstreams || [];
  panel.hidden = !upstreams.length;
  const list = element("ul", { class: "upstream-list" });
  for (const upstream of upstreams) list.append(upstreamItem(mcp, upstream, () => renderUpstreams(mcp, panel, container, null)));
  const children = [];
  if (notice) children.push(element("p", { class: notice.kind === "ok" ? "ok-text" : "error-text", role: notice.kind === "ok" ? "status" : "alert", text: notice.text }));
  children.push(list);
  container.replaceChildren(...children);
}

function upstreamItem(mcp, upstream, refresh) {
  const stateText = upstream.mode === "service" ? "" : upstream.signed_in ? "Signed in" : "Not signed in";
  const item = element("li", { class: "upstream" },
    element("span", { class: "upstream-name", text: upstream.display_name || upstream.name }),
    element("span", { class: "muted small", text: ` ${MODES[upstream.mode] || upstream.mode}` }),
    stateText ? element("span", { class: `badge ${upstream.signed_in ? "ok" : "warn"}`, text: stateText }) : null);
  const problem = element("p", { class: "error-text", role: "alert" });
  if (upstream.may_sign_in) {
    const label = `${upstream.signed_in ? "Sign in again to" : "Sign in to"} ${upstream.name}`;
    const signIn = element("button", { type: "button", class: upstream.signed_in ? "quiet" : "primary", "aria-label": label }, "Sign in");
    signIn.addEventListener("click", async () => {
      signIn.disabled = true;
      problem.textContent = "";
      try {
        const started = await mcp.postJson(`/console/api/upstreams/${encodeURIComponent(upstream.name)}/sign-in`);
        const target = new URL(started.authorization_url);
        if (target.protocol !== "https:" && target.protocol !== "http:") throw new Error("not a web address");
        location.assign(target.href);
      } catch (error) {
        signIn.disabled = false;
        problem.textContent = `The sign-in cannot start: ${error.error?.message || error.message}`;
      }
    });
    item.append(signIn);
    if (upstream.signed_in) {
      const signOut = element("button", { type: "button", class: "quiet", "aria-label": `Sign out of ${upstream.name}` }, "Sign out");
      signOut.addEventListener("click", async () => {
        signOut.disabled = true;
        const response = await fetch(`/console/api/upstreams/${encodeURIComponent(upstream.name)}/sign-in`, {
          method: "DELETE",
          headers: mcp.headers({ Accept: "application/json" }),
        });
        if (!response.ok) {
          signOut.disabled = false;
          problem.textContent = `The sign-out failed (HTTP ${response.status}).`;
          return;
        }
        await refresh();
      });
      item.append(signOut);
    }
  }
  item.append(problem);
  return item;
}
