// The measuring half of scripts/bench-console: one headless Chromium page on the console.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR, "package.json"));
const { chromium } = require("playwright-core");
const base = process.env.ORCA_BASE;
const runs = Number(process.env.RUNS);
const rows = Number(process.env.ROWS);
const sql = `SELECT t.track_id, t.name, a.title, t.milliseconds, t.unit_price FROM track t JOIN album a USING (album_id) ORDER BY t.track_id LIMIT ${rows}`;

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
const loads = [];
for (let index = 0; index < Math.min(runs, 10); index++) {
  const started = Date.now();
  await page.goto(`${base}/`);
  await page.getByRole("button", { name: "data", exact: true }).waitFor();
  loads.push(Date.now() - started);
}
await page.getByRole("button", { name: "postgres", exact: true }).click();
await page.getByRole("button", { name: "execute_sql", exact: true }).click();
await page.getByLabel("sql", { exact: true }).fill(sql);
await page.getByRole("checkbox", { name: "dry_run", exact: true }).uncheck();
await page.getByLabel("max_rows", { exact: true }).fill(String(rows));

// Timed inside the page: from the click on Run until the table's caption is in the result and
// a frame has been drawn with it ("shown"), and until every row is in the table and drawn
// ("complete"); Playwright's own click and polling are left out of both.
const throughConsole = (rows) => page.evaluate(async (rows) => {
  const frame = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  const panel = document.getElementById("result-panel");
  const until = (check) => new Promise((resolve) => {
    if (check()) return resolve();
    const observer = new MutationObserver(() => check() && (observer.disconnect(), resolve()));
    observer.observe(panel, { childList: true, subtree: true, attributes: true });
  });
  const caption = `execute_sql, ${rows} rows`;
  const shown = () => !panel.hasAttribute("aria-busy") && [...panel.querySelectorAll("caption")].some((node) => node.textContent === caption);
  const complete = () => shown() && !panel.querySelector(".table-scroll[aria-busy]") && panel.querySelectorAll("tbody tr").length === rows;
  const run = [...document.querySelectorAll("#tool-form button")].find((button) => button.textContent === "Run");
  const started = performance.now();
  run.click();
  await until(shown);
  await frame();
  const shownMs = performance.now() - started;
  await until(complete);
  await frame();
  return { shownMs, completeMs: performance.now() - started };
}, rows);

const raw = [];
const shownTimes = [];
const completeTimes = [];
for (let index = 0; index < runs + 2; index++) {
  const rawMs = await page.evaluate(async ({ sql, rows }) => {
    const started = performance.now();
    const response = await fetch("/mcp", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "execute_sql", arguments: { sql, dry_run: false, max_rows: rows } } }),
    });
    const body = await response.json();
    if (body.result.structuredContent.rows.length !== rows) throw new Error("short result");
    return performance.now() - started;
  }, { sql, rows });
  const { shownMs, completeMs } = await throughConsole(rows);
  // The console refreshes its recent executions 250 ms after a run; let that pass.
  await page.waitForTimeout(300);
  if (index >= 2) {
    raw.push(rawMs);
    shownTimes.push(shownMs);
    completeTimes.push(completeMs);
  }
}
await browser.close();
const rawP50 = median(raw);
const shownP50 = median(shownTimes);
console.log(`page load until the servers are listed: p50 ${median(loads).toFixed(0)} ms over ${loads.length} loads`);
console.log(`execute_sql, ${rows} rows, raw fetch from the page: p50 ${rawP50.toFixed(1)} ms over ${raw.length} calls`);
console.log(`execute_sql, ${rows} rows, through the console, click to the table drawn: p50 ${shownP50.toFixed(1)} ms over ${shownTimes.length} calls`);
console.log(`execute_sql, ${rows} rows, through the console, click to every row drawn: p50 ${median(completeTimes).toFixed(1)} ms`);
console.log(`ratio console (table drawn) / raw: ${(shownP50 / rawP50).toFixed(2)}`);
