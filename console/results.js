// Showing a tool's answer: a table for tabular results (with paging), the JSON otherwise,
// images, downloads, errors with code, message and hint, and the feedback controls.

import { element } from "./form.js";

/** The error object of a failed call: orca's `{error: {...}}`, or a text-only upstream error. */
export function errorOf(result) {
  const structured = result?.structuredContent;
  if (structured?.error && typeof structured.error === "object") return structured.error;
  const text = (result?.content || []).filter((block) => block.type === "text").map((block) => block.text).join("\n");
  return { code: "UPSTREAM_ERROR", message: text || "the tool reported an error" };
}

/** An error box: code, message, hint (and details when there are any). */
export function renderError(error) {
  const box = element("div", { class: "error-box", role: "alert" });
  box.append(element("p", { class: "error-line" }, element("strong", { class: "error-code", text: error.code || "ERROR" }), " ", element("span", { text: error.message || "" })));
  if (error.hint) box.append(element("p", { class: "error-hint" }, element("span", { class: "label", text: "Hint: " }), error.hint));
  if (error.details && Object.keys(error.details).length) {
    const details = element("details", {}, element("summary", { text: "Details" }));
    details.append(element("pre", { class: "json", text: JSON.stringify(error.details, null, 2) }));
    box.append(details);
  }
  if (error.trace_id) box.append(element("p", { class: "muted small", text: `trace ${error.trace_id}` }));
  return box;
}

const NUMERIC_TYPES = /^(int[248]?|integer|bigint|smallint|numeric|decimal|float[48]?|real|double precision|money|oid)$/i;

/** Columns and rows of a result: a TabularResult, or the first array of objects in it. */
export function tableOf(value) {
  if (!value || typeof value !== "object") return null;
  const columns = Array.isArray(value.columns) ? value.columns : Array.isArray(value.schema) ? value.schema : null;
  if (columns && Array.isArray(value.rows)) {
    const names = columns.map((column) => (typeof column === "string" ? column : column.name));
    const numeric = columns.map((column) => typeof column === "object" && NUMERIC_TYPES.test(column?.type || ""));
    const rows = value.rows.map((row) => (Array.isArray(row) ? row : names.map((name) => row?.[name])));
    return { columns: names, rows, numeric };
  }
  for (const [key, entry] of Object.entries(value)) {
    if (Array.isArray(entry) && entry.length && entry.every((item) => item && typeof item === "object" && !Array.isArray(item))) {
      const names = [];
      for (const item of entry) for (const name of Object.keys(item)) if (!names.includes(name)) names.push(name);
      return { columns: names, rows: entry.map((item) => names.map((name) => item[name])), key };
    }
  }
  return null;
}

function cellText(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** Rows put in the page at once; the rest follow in batches, after the first rows are drawn. */
const FIRST_ROWS = 100;
const BATCH_ROWS = 300;

/**
 * A table with a caption, column headers and one row per result row. A long result shows its
 * first rows at once and adds the others a batch per task (the scroll region is `aria-busy`
 * until the last is in), so the first rows are not held back by laying out a thousand.
 */
export function renderTable(table, caption) {
  const node = element("table", { class: "data-table" });
  node.append(element("caption", { text: caption }));
  const head = element("thead");
  const headRow = element("tr");
  table.columns.forEach((name, index) => headRow.append(element("th", { scope: "col", text: name, class: table.numeric?.[index] ? "number" : undefined })));
  head.append(headRow);
  const body = element("tbody");
  node.append(head, body);
  const region = element("div", { class: "table-scroll", tabindex: "0", role: "region", "aria-label": caption }, node);
  const append = (from, to) => {
    const rows = document.createDocumentFragment();
    for (const row of table.rows.slice(from, to)) {
      const tr = document.createElement("tr");
      row.forEach((value, index) => {
        const td = document.createElement("td");
        td.textContent = cellText(value);
        if (value === null || value === undefined) td.className = "null";
        else if (typeof value === "number" || table.numeric?.[index]) td.className = "number";
        tr.append(td);
      });
      rows.append(tr);
    }
    body.append(rows);
  };
  append(0, FIRST_ROWS);
  if (table.rows.length > FIRST_ROWS) {
    region.setAttribute("aria-busy", "true");
    let next = FIRST_ROWS;
    const more = () => {
      // A table replaced before it was complete stops growing.
      if (!region.isConnected) return;
      append(next, next + BATCH_ROWS);
      next += BATCH_ROWS;
      if (next < table.rows.length) setTimeout(more, 0);
      else region.removeAttribute("aria-busy");
    };
    requestAnimationFrame(() => setTimeout(more, 0));
  }
  return region;
}

/** RFC 4180 CSV of a table. */
export function toCsv(table) {
  const quote = (value) => {
    const text = cellText(value);
    return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
  };
  return [table.columns, ...table.rows].map((row) => row.map(quote).join(",")).join("\r\n") + "\r\n";
}

/** Offer `text` as a file download (the browser keeps it local: a blob of this page). */
export function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = element("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A thumb drawn in SVG (no emoji font is needed), pointing down when `down`. */
function thumbIcon(down) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "20");
  svg.setAttribute("height", "20");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  if (down) svg.setAttribute("transform", "rotate(180)");
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", "M2 10h4v11H2zM8 21h9.2a2 2 0 0 0 2-1.6l1.6-7.4A2 2 0 0 0 18.8 9.6H14l.8-4.2A2.2 2.2 0 0 0 12.6 3L8 9.6z");
  path.setAttribute("fill", "currentColor");
  svg.append(path);
  return svg;
}

/**
 * The feedback controls for one result: Thumbs up / Thumbs down, a 1-5 rating, a comment and
 * "Send feedback", posting to /mcp/feedback with the result's feedback token.
 */
export function feedbackControls(mcp, token, { onSent, idPrefix }) {
  const box = element("div", { class: "feedback", role: "group", "aria-label": "Feedback on this result" });
  let rating = null;
  let score = null;
  const up = element("button", { type: "button", class: "thumb", "aria-pressed": "false", "aria-label": "Thumbs up", title: "Thumbs up" }, thumbIcon(false));
  const down = element("button", { type: "button", class: "thumb", "aria-pressed": "false", "aria-label": "Thumbs down", title: "Thumbs down" }, thumbIcon(true));
  const choose = (value) => {
    rating = rating === value ? null : value;
    up.setAttribute("aria-pressed", String(rating === "up"));
    down.setAttribute("aria-pressed", String(rating === "down"));
  };
  up.addEventListener("click", () => choose("up"));
  down.addEventListener("click", () => choose("down"));
  const stars = element("fieldset", { class: "stars" }, element("legend", { text: "Rating" }));
  for (let value = 1; value <= 5; value++) {
    const id = `${idPrefix}-star-${value}`;
    const input = element("input", { type: "radio", name: `${idPrefix}-stars`, id, value: String(value), class: "star-input" });
    input.addEventListener("change", () => { score = value; paint(); });
    // The radio lies over its own star, so a click on the star is a click on the radio.
    const label = element("label", { for: id, class: "star", title: `${value} star${value > 1 ? "s" : ""}` });
    label.append(input, element("span", { "aria-hidden": "true", text: "★" }), element("span", { class: "visually-hidden", text: `${value} star${value > 1 ? "s" : ""}` }));
    stars.append(label);
  }
  const paint = () => stars.querySelectorAll("label.star").forEach((label, index) => label.classList.toggle("lit", score !== null && index < score));
  const commentId = `${idPrefix}-comment`;
  const comment = element("textarea", { id: commentId, rows: 2, maxlength: "4000", class: "prose" });
  const commentField = element("div", { class: "comment-field" }, element("label", { for: commentId, text: "Comment" }), comment);
  const send = element("button", { type: "button", class: "secondary" }, "Send feedback");
  const status = element("p", { class: "feedback-status", role: "status", "aria-live": "polite" });
  send.addEventListener("click", async () => {
    const chosen = rating ?? (score !== null ? (score >= 3 ? "up" : "down") : null);
    if (!chosen) {
      status.className = "feedback-status error-text";
      status.textContent = "Choose thumbs up or down, or a star rating, first.";
      return;
    }
    const body = { feedback_token: token, rating: chosen };
    if (score !== null) body.rating_score = score;
    if (comment.value.trim()) body.comment = comment.value.trim();
    send.disabled = true;
    try {
      await mcp.postJson("/mcp/feedback", body);
      status.className = "feedback-status ok-text";
      status.textContent = `Thanks, your feedback was saved (${chosen === "up" ? "thumbs up" : "thumbs down"}${score !== null ? `, ${score} of 5` : ""}).`;
      onSent?.();
    } catch (error) {
      status.className = "feedback-status error-text";
      status.textContent = `Feedback was not saved: ${error.error?.code || ""} ${error.message}`;
    } finally {
      send.disabled = false;
    }
  });
  box.append(element("div", { class: "feedback-row" }, element("span", { class: "muted", text: "Was this useful?" }), up, down, stars), commentField, element("div", { class: "feedback-row" }, send, status));
  return box;
}
