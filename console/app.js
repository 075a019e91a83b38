// The console: connects to this server's /mcp (asking for an API key when one is needed),
// builds the servers accordion from list_servers and tools/list, runs tools through generated
// forms, shows results with feedback, opens the feedback dialog after repeated failures, offers
// the manual SQL fallback, and lists waiting approvals, held external tools (for a key that may
// approve them), recent executions and the sign-ins to external servers that ask for OAuth.

import { HttpError, Mcp } from "./mcp.js";
import { buildForm, element } from "./form.js";
import { download, errorOf, feedbackControls, renderError, renderTable, tableOf, toCsv } from "./results.js";
import { beginSignIn, finishSignIn, forgetSignIn, signedIn } from "./signin.js";
import { noteReturn, renderUpstreams } from "./upstreams.js";

const mcp = new Mcp();
const $ = (id) => document.getElementById(id);
const state = { tools: [], selected: null, failures: 0, lastResult: null, lastFocus: null, resultCount: 0 };

function setConnection(text, kind = "") {
  const node = $("connection");
  node.textContent = text;
  node.dataset.kind = kind;
}

// ---- connecting: signing in, or the API key ----

/** Forget the tab's credential, a typed API key or the token of a sign-in alike. */
function forgetCredential() {
  mcp.setKey(null);
  forgetSignIn();
}

async function start() {
  // Back from an external server's sign-in: what happened, shown once connected.
  const upstreamReturn = noteReturn();
  // Back from the issuer with a code: its token is kept like a typed API key.
  let signInError = "";
  try {
    const token = await finishSignIn();
    if (token) mcp.setKey(token);
  } catch (error) {
    signInError = error.message;
  }
  try {
    // Ask first whether a key is needed (and valid), so that no request of the page fails.
    const session = await mcp.getJson("/console/api/session");
    state.signIn = session.sign_in || null;
    if (!session.authenticated) {
      const refused = Boolean(mcp.apiKey) || session.key_refused;
      const wasSignedIn = signedIn();
      const refusal = wasSignedIn ? "The sign-in is no longer accepted: sign in again." : "The API key was refused: check it and try again.";
      forgetCredential();
      showLogin(signInError || (refused ? refusal : ""), Boolean(signInError) || wasSignedIn);
      return;
    }
    const info = await mcp.connect();
    state.principal = session;
    $("login").hidden = true;
    $("workspace").hidden = false;
    $("forget-key").hidden = !mcp.apiKey;
    $("forget-key").textContent = signedIn() ? "Sign out" : "Forget API key";
    const verbs = (session.verbs || []).join(", ");
    const who = signedIn() ? `, signed in as ${session.principal} (may ${verbs || "nothing"})`
      : session.api_key_required ? ` as ${session.principal} (${verbs})` : "";
    setConnection(`Connected to ${info.serverInfo?.name || "orca"} ${info.serverInfo?.version || ""}${who}`.replace(/\s+/g, " "), "ok");
    await loadServers();
    refreshSide();
    await renderUpstreams(mcp, $("upstreams-panel"), $("upstreams"), upstreamReturn);
  } catch (error) {
    if (error instanceof HttpError && error.status === 401) {
      const hadKey = Boolean(mcp.apiKey);
      forgetCredential();
      showLogin(hadKey ? "The API key was refused: check it and try again." : "");
      return;
    }
    if (error instanceof HttpError && error.status === 429) {
      // Too many refused keys from this address: the key typed is not kept, the wait is said.
      forgetCredential();
      showLogin(`${error.message}. Try again in ${error.retryAfter || 60} s.`);
      return;
    }
    setConnection("Not connected", "error");
    $("workspace").hidden = true;
    $("login").hidden = true;
    const main = $("main");
    main.querySelector(".connect-error")?.remove();
    const box = element("section", { class: "card connect-error", "aria-label": "Connection error" }, renderError(error.error || { code: "UPSTREAM_UNAVAILABLE", message: error.message, hint: "check that orca is running, then reload the page" }));
    main.prepend(box);
  }
}

/** The login card; `aboutSignIn`: the message is about the sign-in, shown next to its button. */
function showLogin(message, aboutSignIn = false) {
  const offer = state.signIn;
  $("workspace").hidden = true;
  $("login").hidden = false;
  $("forget-key").hidden = true;
  $("sign-in").hidden = !offer;
  $("key-intro").hidden = Boolean(offer);
  if (offer) $("sign-in-issuer").textContent = new URL(offer.issuer).host;
  setConnection(offer ? "Sign-in required" : "API key required", "warn");
  const aside = aboutSignIn && offer;
  $("sign-in-error").textContent = aside ? message : "";
  $("login-error").textContent = aside ? "" : message;
  $("api-key").value = "";
  (offer ? $("sign-in-button") : $("api-key")).focus();
}

$("sign-in-button").addEventListener("click", async () => {
  if (!state.signIn) return;
  forgetCredential();
  try {
    await beginSignIn(state.signIn);
  } catch (error) {
    $("sign-in-error").textContent = `The sign-in cannot start: ${error.message}`;
  }
});

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("api-key").value.trim();
  if (!key) {
    $("login-error").textContent = "Enter an API key.";
    $("api-key").focus();
    return;
  }
  forgetSignIn();
  mcp.setKey(key);
  $("api-key").value = "";
  await start();
});

$("forget-key").addEventListener("click", () => {
  forgetCredential();
  location.reload();
});

// ---- servers and tools ----

async function loadServers() {
  state.tools = await mcp.listTools();
  const byName = new Map(state.tools.map((tool) => [tool.name, tool]));
  let servers = [];
  if (byName.has("list_servers")) {
    try {
      const result = await mcp.callTool("list_servers", {});
      servers = result.structuredContent?.servers || [];
    } catch {
      servers = [];
    }
  }
  const claimed = new Set();
  const groups = [];
  for (const server of servers) {
    const tools = (server.tools || []).filter((name) => byName.has(name)).map((name) => byName.get(name));
    tools.forEach((tool) => claimed.add(tool.name));
    // A server whose every tool this key may not use is not shown; one without tools (down) is.
    if (tools.length || !(server.tools || []).length) groups.push({ name: server.name, version: versionOf(server), status: server.status, description: server.description, tools });
  }
  const rest = state.tools.filter((tool) => !claimed.has(tool.name));
  if (rest.length) groups.push({ name: servers.length ? "other" : "tools", status: "", description: "", tools: rest });
  renderServers(groups);
}

/** A server's version when `list_servers` reports one as a non-empty string; null otherwise. */
function versionOf(server) {
  return typeof server.version === "string" && server.version.trim() ? server.version.trim() : null;
}

function renderServers(groups) {
  const container = $("servers");
  container.replaceChildren();
  groups.forEach((group, index) => {
    const panelId = `server-panel-${index}`;
    const buttonId = `server-button-${index}`;
    const open = index === 0 && groups.length <= 2;
    const toggle = element("button", { type: "button", id: buttonId, class: "server-toggle", "aria-expanded": String(open), "aria-controls": panelId }, group.name);
    const statusKind = group.status === "running" ? "ok" : group.status ? "warn" : "";
    // The name and version come first; a long status wraps to its own line and is cut short
    // there, with the whole text on hover.
    const head = element("div", { class: "server-head" },
      element("h3", { class: "server-name" }, toggle),
      group.version ? element("span", { class: "server-version muted small", text: group.version }) : null,
      element("span", { class: "muted small tool-count", text: `${group.tools.length} tool${group.tools.length === 1 ? "" : "s"}` }),
      group.status ? element("span", { class: `badge server-status ${statusKind}`, title: group.status, text: group.status }) : null);
    const panel = element("div", { id: panelId, role: "region", "aria-labelledby": buttonId, class: "server-tools" });
    panel.hidden = !open;
    if (group.description) panel.append(element("p", { class: "muted small server-description", text: group.description }));
    const list = element("ul", { class: "tool-list" });
    for (const tool of group.tools) {
      const descriptionId = `tool-desc-${tool.name}`;
      const button = element("button", { type: "button", class: "tool-button", "aria-describedby": descriptionId }, tool.name);
      button.addEventListener("click", () => selectTool(tool, button));
      list.append(element("li", {}, button, element("p", { id: descriptionId, class: "tool-description", text: tool.description || "" })));
    }
    if (!group.tools.length) list.append(element("li", { class: "muted small", text: "No tools available right now." }));
    panel.append(list);
    toggle.addEventListener("click", () => {
      const expanded = toggle.getAttribute("aria-expanded") === "true";
      toggle.setAttribute("aria-expanded", String(!expanded));
      panel.hidden = expanded;
    });
    container.append(element("div", { class: "server" }, head, panel));
  });
}

function selectTool(tool, button) {
  state.selected = tool;
  closeFallback();
  document.querySelectorAll(".tool-button[aria-current]").forEach((node) => node.removeAttribute("aria-current"));
  button?.setAttribute("aria-current", "true");
  $("tool-title").textContent = tool.name;
  $("tool-description").textContent = tool.description || "";
  const { form, fields } = buildForm(tool, (args) => runTool(tool, args));
  $("tool-form").replaceChildren(form);
  const first = fields[0]?.control || form.querySelector("button");
  first?.focus();
}

// ---- running a tool ----

async function callTool(name, args) {
  try {
    const result = await mcp.callTool(name, args);
    return { result, error: result.isError ? errorOf(result) : null };
  } catch (error) {
    if (error instanceof HttpError && error.status === 401) {
      const wasSignedIn = signedIn();
      forgetCredential();
      showLogin(wasSignedIn ? "The sign-in is no longer accepted: sign in again." : "The API key is no longer accepted.", wasSignedIn);
    }
    return { result: null, error: error.error || { code: "INTERNAL", message: error.message } };
  }
}

async function runTool(tool, args, { page = 1, previous = null } = {}) {
  const panel = $("result-panel");
  // A second run waits for the first; the button is not disabled, which would lose its focus.
  if (state.running) return;
  state.running = true;
  panel.hidden = false;
  panel.setAttribute("aria-busy", "true");
  $("result-title").textContent = `Running ${tool.name}…`;
  const started = performance.now();
  const { result, error } = await callTool(tool.name, args);
  const elapsed = Math.round(performance.now() - started);
  state.running = false;
  panel.removeAttribute("aria-busy");
  state.lastResult = { tool: tool.name, args, result, error };
  showResult(tool, args, result, error, elapsed, page, previous);
  if (error) {
    state.failures += 1;
    if (error.code === "EXCEEDED_RETRIES" && tool.name === "generate_sql") showFallback(error);
    if (error.code === "EXCEEDED_RETRIES" || state.failures >= 3) {
      openFeedbackDialog(tool.name, error, result?._meta?.feedback_token);
      state.failures = 0;
    }
  } else {
    state.failures = 0;
  }
  setTimeout(refreshSide, 250);
}

function showResult(tool, args, result, error, elapsed, page, previous) {
  const container = $("result");
  container.replaceChildren();
  state.resultCount += 1;
  const meta = result?._meta || {};
  $("result-title").textContent = error ? `${tool.name} failed` : `${tool.name} result`;
  const facts = [`${elapsed} ms`];
  if (meta.model_used) facts.push(`${meta.provider_used || ""} ${meta.model_used}`.trim());
  if (meta.attempt) facts.push(`attempt ${meta.attempt}`);
  if (error && state.failures >= 1) facts.push(`${state.failures + 1} failures in a row`);
  container.append(element("p", { class: "muted small result-facts", text: facts.join(" · ") }));
  if (error) {
    container.append(renderError(error));
  } else {
    const value = result.structuredContent;
    const table = tableOf(value);
    const facts = scalarFacts(value, table);
    if (facts) container.append(facts);
    if (table) {
      const rows = table.rows.length;
      const caption = `${tool.name}${table.key ? `: ${table.key}` : ""}, ${rows} row${rows === 1 ? "" : "s"}${page > 1 ? `, page ${page}` : ""}`;
      container.append(renderTable(table, caption));
      const paging = element("div", { class: "paging" });
      paging.append(element("span", { class: "muted small", text: `Page ${page}${value.row_count != null ? ` · ${value.row_count} rows in all` : ""}${value.has_more ? " · more rows available" : ""}` }));
      if (previous) {
        const back = element("button", { type: "button", class: "secondary" }, "Previous page");
        back.addEventListener("click", () => runTool(tool, previous.args, { page: page - 1, previous: previous.previous }));
        paging.append(back);
      }
      if (value.has_more && value.page_token) {
        const next = element("button", { type: "button", class: "secondary" }, "Next page");
        next.addEventListener("click", () => runTool(tool, { ...args, page_token: value.page_token }, { page: page + 1, previous: { args, previous } }));
        paging.append(next);
      }
      container.append(paging);
    }
    for (const block of result.content || []) {
      if (block.type === "image" && /^image\/(png|jpeg|gif|webp|svg\+xml)$/.test(block.mimeType || "")) {
        container.append(element("figure", { class: "chart" }, element("img", { src: `data:${block.mimeType};base64,${block.data}`, alt: `${tool.name} chart` })));
      }
    }
    if (value && typeof value.sql === "string" && tool.name === "generate_sql") {
      container.append(element("pre", { class: "sql", "aria-label": "Generated SQL", text: value.sql }));
    }
    container.append(jsonView(value ?? result.content, !table));
    const actions = element("div", { class: "result-actions" });
    const csv = element("button", { type: "button", class: "secondary" }, "Download CSV");
    csv.disabled = !table;
    csv.addEventListener("click", () => table && download(`${tool.name}.csv`, "text/csv", toCsv(table)));
    const jsonButton = element("button", { type: "button", class: "secondary" }, "Download JSON");
    jsonButton.addEventListener("click", () => download(`${tool.name}.json`, "application/json", JSON.stringify(value ?? result.content, null, 2)));
    actions.append(csv, jsonButton);
    container.append(actions);
  }
  const token = result?._meta?.feedback_token;
  if (token) {
    const footer = element("footer", { class: "result-footer" });
    footer.append(feedbackControls(mcp, token, { idPrefix: `result-${state.resultCount}`, onSent: () => setTimeout(refreshSide, 150) }));
    container.append(footer);
  }
}

/**
 * The result as pretty-printed JSON in a <details>: open (and built) at once when there is no
 * table, otherwise built the first time it is opened, so a large result costs nothing folded.
 */
function jsonView(value, open) {
  const view = element("details", { class: "json-view" }, element("summary", { text: "JSON" }));
  const build = () => {
    if (!view.querySelector("pre")) view.append(element("pre", { class: "json", "aria-label": "The result as JSON", text: JSON.stringify(value, null, 2) }));
  };
  if (open) {
    build();
    view.open = true;
  } else {
    view.addEventListener("toggle", () => view.open && build());
  }
  return view;
}

/** The plain top-level fields of a result that is not itself a table, as a list of facts. */
function scalarFacts(value, table) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return null;
  const skip = new Set(["rows", "columns", "schema", "page_token", "markdown", "sql"]);
  if (table?.key) skip.add(table.key);
  const entries = Object.entries(value).filter(([key, entry]) => !skip.has(key) && entry !== null && typeof entry !== "object");
  if (!entries.length || (table && !table.key)) return null;
  const list = element("dl", { class: "facts" });
  for (const [key, entry] of entries) list.append(element("dt", { text: key }), element("dd", { text: String(entry) }));
  return list;
}

// ---- the feedback dialog and the manual SQL fallback ----

function openFeedbackDialog(toolName, error, token) {
  const dialog = $("feedback-dialog");
  if (dialog.open) return;
  state.lastFocus = document.activeElement;
  const body = $("feedback-dialog-body");
  body.replaceChildren(
    element("p", { text: error.code === "EXCEEDED_RETRIES" ? `${toolName} gave up after every attempt failed.` : `Three calls in a row failed; the last was ${toolName}.` }),
    renderError(error),
  );
  if (error.code === "EXCEEDED_RETRIES" && toolName === "generate_sql") {
    body.append(element("p", { class: "muted", text: "The last SQL it tried is in the editor below the result: fix it there and run it with a dry run first." }));
  }
  if (token) body.append(feedbackControls(mcp, token, { idPrefix: `dialog-${state.resultCount}`, onSent: () => setTimeout(refreshSide, 150) }));
  else body.append(element("p", { class: "muted", text: "This failure has no feedback token to rate." }));
  dialog.showModal();
  dialog.querySelector("button")?.focus();
}

$("feedback-dialog-close").addEventListener("click", () => $("feedback-dialog").close());
$("feedback-dialog").addEventListener("close", () => {
  const target = state.lastFocus;
  state.lastFocus = null;
  if (target && document.contains(target) && !target.disabled) target.focus();
  else $("tool-panel").focus();
});

/**
 * Hide the manual fallback (its flow finished, or another tool was chosen); the focus, when it
 * was inside, moves to the result.
 */
function closeFallback() {
  const panel = $("fallback-panel");
  if (panel.hidden) return;
  const hadFocus = panel.contains(document.activeElement);
  panel.hidden = true;
  $("fallback").replaceChildren();
  if (hadFocus) ($("result-panel").hidden ? $("tool-panel") : $("result-panel")).focus();
}

function showFallback(error) {
  const panel = $("fallback-panel");
  const container = $("fallback");
  panel.hidden = false;
  // With several databases, the statement runs on the one generate_sql wrote it for.
  const database = state.lastResult?.args?.database || error.details?.database?.name;
  const on = database ? { database } : {};
  const lastSql = error.details?.last_sql || "";
  const lastError = error.details?.last_error;
  const sql = element("textarea", { id: "fallback-sql", rows: 6, class: "code", spellcheck: "false" });
  sql.value = lastSql;
  const status = element("div", { class: "fallback-status", "aria-live": "polite" });
  const dryRun = element("button", { type: "button", class: "primary" }, "Dry run");
  const actions = element("div", { class: "form-actions" }, dryRun);
  container.replaceChildren(
    element("p", { class: "muted", text: "generate_sql could not produce working SQL. Edit its last attempt and check it with a dry run; nothing runs until you confirm." }),
    lastError ? element("p", { class: "last-error" }, element("span", { class: "label", text: "Last error: " }), typeof lastError === "string" ? lastError : JSON.stringify(lastError)) : null,
    element("label", { for: "fallback-sql", text: "SQL" }),
    sql,
    actions,
    status,
  );
  dryRun.addEventListener("click", async () => {
    actions.querySelectorAll(".follow-up").forEach((node) => node.remove());
    status.replaceChildren(element("p", { class: "muted", text: "Checking…" }));
    const statement = sql.value;
    const { result, error: failure } = await callTool("execute_sql", { ...on, sql: statement, dry_run: true });
    setTimeout(refreshSide, 250);
    if (failure) {
      status.replaceChildren(renderError(failure));
      return;
    }
    const value = result.structuredContent || {};
    const announced = value.warning || (value.statement?.kind ? `a ${value.statement.kind} statement` : "the statement is valid");
    status.replaceChildren(element("p", { class: "dry-run-summary" }, element("span", { class: "label", text: "Dry run: " }), announced));
    if (value.confirmation_token || value.approval_id) {
      const confirm = element("button", { type: "button", class: "primary follow-up danger" }, "Confirm");
      confirm.addEventListener("click", () => confirmWrite(statement, value, status, on));
      actions.append(confirm);
    } else {
      const runRead = element("button", { type: "button", class: "secondary follow-up" }, "Run query");
      runRead.addEventListener("click", async () => {
        const tool = state.tools.find((candidate) => candidate.name === "execute_sql");
        if (!tool) return;
        await runTool(tool, { ...on, sql: statement, dry_run: false });
        // The read ran and its rows are in the result: the fallback's work is done.
        if (!state.lastResult?.error) closeFallback();
      });
      actions.append(runRead);
    }
  });
  sql.focus({ preventScroll: true });
}

async function confirmWrite(statement, dryRun, status, on) {
  const args = dryRun.approval_id
    ? { ...on, sql: statement, dry_run: false, read_only: false }
    : { ...on, sql: statement, dry_run: false, read_only: false, confirmation_token: dryRun.confirmation_token };
  const started = performance.now();
  const { result, error } = await callTool("execute_sql", args);
  const elapsed = Math.round(performance.now() - started);
  setTimeout(refreshSide, 250);
  if (dryRun.approval_id && error && error.code === "CONFIRMATION_REQUIRED") {
    status.replaceChildren(element("p", { class: "approval-wait" }, "Waiting for a person to approve this write: approval id ", element("code", { text: dryRun.approval_id }), ". It is listed under Approvals; once approved, press Confirm again."));
    return;
  }
  showWriteOutcome(args, result, error, status, elapsed);
}

/** A failed write stays in the fallback to be fixed; a confirmed one closes it and is shown as the result. */
function showWriteOutcome(args, result, error, status, elapsed) {
  if (error) {
    status.replaceChildren(renderError(error));
    return;
  }
  const value = result.structuredContent || {};
  const affected = value.affected_rows ?? value.rows_affected;
  $("result-panel").hidden = false;
  state.lastResult = { tool: "execute_sql", args, result, error: null };
  showResult({ name: "execute_sql" }, args, result, null, elapsed, 1, null);
  $("result").prepend(element("p", { class: "ok-text", role: "status", text: `The write ran${affected != null ? `: ${affected} row${affected === 1 ? "" : "s"} affected` : ""}.` }));
  closeFallback();
}

// ---- approvals and recent executions ----

function refreshSide() {
  refreshApprovals();
  refreshHeld();
  refreshRecent();
}

async function refreshApprovals() {
  const container = $("approvals");
  let data;
  try {
    data = await mcp.getJson("/console/api/approvals");
  } catch (error) {
    container.replaceChildren(renderError(error.error || { code: "INTERNAL", message: error.message }));
    return;
  }
  const approvals = data.approvals || [];
  if (!approvals.length) {
    container.replaceChildren(element("p", { class: "muted", text: "No writes are waiting for approval." }));
    return;
  }
  const table = element("table", { class: "data-table approvals" });
  table.append(element("caption", { text: `${approvals.length} write${approvals.length === 1 ? "" : "s"} waiting for approval` }));
  const head = element("tr");
  for (const name of ["Statement", "Caller", "Estimate", "Needs", "Action"]) head.append(element("th", { scope: "col", text: name }));
  table.append(element("thead", {}, head));
  const body = element("tbody");
  for (const { request, can_approve: canApprove } of approvals) {
    const row = element("tr");
    row.append(
      element("td", {}, element("code", { class: "statement", text: request.statement })),
      element("td", { text: request.principal }),
      element("td", { class: "number", text: request.estimated_rows == null ? "unknown" : `${request.estimated_rows} rows` }),
      element("td", { text: (request.required_verbs || []).join(", ") }),
    );
    const cell = element("td");
    if (canApprove) {
      const approve = element("button", { type: "button", class: "primary", "aria-describedby": `approval-${request.id}` }, "Approve");
      approve.addEventListener("click", async () => {
        approve.disabled = true;
        try {
          await mcp.postJson(`/approvals/${encodeURIComponent(request.id)}`);
          cell.replaceChildren(element("span", { class: "ok-text", role: "status", text: "Approved" }));
        } catch (error) {
          approve.disabled = false;
          cell.append(renderError(error.error || { code: "INTERNAL", message: error.message }));
        }
      });
      cell.append(approve);
    } else {
      cell.append(element("span", { class: "muted small", text: "needs a key with these verbs" }));
    }
    cell.append(element("span", { id: `approval-${request.id}`, class: "visually-hidden", text: `approval ${request.id}` }));
    row.append(cell);
    body.append(row);
  }
  table.append(body);
  container.replaceChildren(element("div", { class: "table-scroll" }, table));
}

// External tools held until a person approves them (pin: hold), for a key whose role has
// approve_tools: what changed, what the poisoning rules found, the diff, and Approve, which pins
// the definition shown (its hash goes with the approval).
async function refreshHeld() {
  const panel = $("held-panel");
  const container = $("held");
  let data;
  try {
    data = await mcp.getJson("/console/api/held-tools");
  } catch (error) {
    panel.hidden = false;
    container.replaceChildren(renderError(error.error || { code: "INTERNAL", message: error.message }));
    return;
  }
  // A key whose role may not approve tools sees no panel.
  panel.hidden = !data.may_approve;
  if (panel.hidden) return;
  const held = data.held_tools || [];
  if (!held.length) {
    container.replaceChildren(element("p", { class: "muted", text: "No external tool is held." }));
    return;
  }
  const list = element("ul", { class: "held-tools" });
  for (const tool of held) {
    const id = `held-${tool.server}-${tool.tool}`.replace(/[^A-Za-z0-9_-]/g, "_");
    const item = element("li", { "aria-labelledby": id });
    item.append(element("h3", { id, text: `${tool.server} ${tool.tool}` }), element("p", { text: tool.what }));
    for (const finding of tool.findings || []) {
      item.append(element("p", { class: "small" }, element("strong", { text: finding.rule }), ` in ${finding.at}: `, element("code", { text: finding.excerpt || "" })));
    }
    const details = element("details", {}, element("summary", { text: "What changed" }), element("pre", { class: "diff", text: tool.diff }));
    const approve = element("button", { type: "button", class: "primary", "aria-describedby": id }, "Approve");
    const status = element("div");
    approve.addEventListener("click", async () => {
      approve.disabled = true;
      try {
        await mcp.postJson("/console/api/held-tools/approve", { server: tool.server, tool: tool.tool, sha256: tool.sha256 });
        status.replaceChildren(element("span", { class: "ok-text", role: "status", text: "Approved" }));
      } catch (error) {
        approve.disabled = false;
        status.replaceChildren(renderError(error.error || { code: "INTERNAL", message: error.message }));
      }
    });
    item.append(details, approve, status);
    list.append(item);
  }
  container.replaceChildren(list);
}

function formatTime(text) {
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? text : date.toLocaleString([], { dateStyle: "short", timeStyle: "medium" });
}

// Who made a call: the key's name or the token's user, then the OAuth client it came through
// when that is another name; the roles that allowed it on hover.
function whoCell(execution) {
  const client = execution.client_id && execution.client_id !== execution.principal ? execution.client_id : null;
  return element("td", { title: execution.role ? `role: ${execution.role}` : null },
    element("span", { text: execution.principal }),
    client && element("span", { class: "muted small", text: ` via ${client}` }));
}

// A call's trace id, a link into the trace viewer when ORCA_TRACE_URL is set (the id is 32 hex
// digits, so it goes into the template as it is).
function traceCell(traceId, template) {
  if (!traceId) return element("td");
  const shown = element("code", { class: "small", title: traceId, text: traceId.slice(0, 8) });
  if (!template || !/^[0-9a-f]{32}$/.test(traceId)) return element("td", {}, shown);
  const href = template.replaceAll("{trace_id}", traceId);
  return element("td", {}, element("a", { href, target: "_blank", rel: "noopener noreferrer", "aria-label": `trace ${traceId}` }, shown));
}

async function refreshRecent() {
  const container = $("recent");
  let data;
  try {
    data = await mcp.getJson("/console/api/executions?limit=25");
  } catch (error) {
    container.replaceChildren(renderError(error.error || { code: "INTERNAL", message: error.message }));
    return;
  }
  const executions = data.executions || [];
  if (!executions.length) {
    container.replaceChildren(element("p", { class: "muted", text: "No calls recorded yet." }));
    return;
  }
  const table = element("table", { class: "data-table recent" });
  table.append(element("caption", { text: `The last ${executions.length} call${executions.length === 1 ? "" : "s"}` }));
  const head = element("tr");
  for (const name of ["Tool", "Who", "Status", "Latency", "Time", "Rating", "Trace"]) head.append(element("th", { scope: "col", text: name }));
  table.append(element("thead", {}, head));
  const body = element("tbody");
  for (const execution of executions) {
    const status = execution.error_code ? `${execution.status} (${execution.error_code})` : execution.status;
    const rating = execution.rating ? `${execution.rating === "up" ? "up" : "down"}${execution.rating_score ? ` ${"★".repeat(execution.rating_score)}${"☆".repeat(5 - execution.rating_score)}` : ""}` : "";
    body.append(element("tr", {},
      element("td", {}, element("span", { class: "tool-name", text: execution.tool }), element("span", { class: "muted small", text: ` ${execution.server}` })),
      whoCell(execution),
      element("td", {}, element("span", { class: `badge ${execution.status === "success" ? "ok" : "error"}`, text: status })),
      element("td", { class: "number", text: execution.latency_ms == null ? "" : `${execution.latency_ms} ms` }),
      element("td", { text: formatTime(execution.at) }),
      element("td", { text: rating }),
      traceCell(execution.trace_id, data.trace_url),
    ));
  }
  table.append(body);
  container.replaceChildren(element("div", { class: "table-scroll" }, table));
}

$("approvals-refresh").addEventListener("click", refreshApprovals);
$("held-refresh").addEventListener("click", refreshHeld);
$("recent-refresh").addEventListener("click", refreshRecent);

// Escape closes any open dialog (the native modal does so too; this covers every browser).
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    const dialog = $("feedback-dialog");
    if (dialog.open) {
      event.preventDefault();
      dialog.close();
    }
  }
});

start();
