// orca's MCP Apps in a real browser: Chromium (headless, through playwright-core) opens the test
// host (index.html + host.bundle.js, served on orca's own origin by routing) which renders the
// apps orca links through the extension's AppBridge. Prints "apps checks passed" when every
// check holds. Environment: ORCA_BASE, PLAYWRIGHT_DIR, CHROMIUM, HOST_DIR, ANALYST_KEY,
// OUTSIDER_KEY, SCREENSHOT (where to save the README's picture).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_DIR);
const base = process.env.ORCA_BASE;
const hostDir = process.env.HOST_DIR;

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ["--no-sandbox"] });
try {
  const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
  await context.route(`${base}/apps-host/**`, (route) => {
    const name = path.basename(new URL(route.request().url()).pathname);
    const type = name.endsWith(".js") ? "text/javascript" : "text/html";
    route.fulfill({ status: 200, contentType: type, body: readFileSync(path.join(hostDir, name)) });
  });
  const page = await context.newPage();
  page.on("console", (message) => console.log(`[page] ${message.text()}`));
  page.on("pageerror", (error) => console.log(`[page error] ${error.message}`));
  await page.goto(`${base}/apps-host/index.html`);
  await page.waitForFunction(() => window.orcaHostReady === true);

  // orca's results app: a Chinook result as a table.
  const sql = "SELECT t.name, t.composer, t.milliseconds, NULL::text AS note FROM track t ORDER BY t.track_id";
  const shown = await page.evaluate(async ({ key, sql }) => {
    window.client = await window.orcaHost.connect(key);
    return window.orcaHost.show(window.client, "query_sql", { sql, max_rows: 8 }, "light");
  }, { key: process.env.ANALYST_KEY, sql });
  check(shown.uri === "ui://orca/results", "query_sql links ui://orca/results");
  check(JSON.stringify(shown.meta.ui.csp.connectDomains) === "[]", "the app's CSP allows no connection");
  const app = page.frameLocator("iframe");
  await app.locator("h1", { hasText: "8 rows, 4 columns" }).waitFor();
  check(await app.locator("tbody tr").count() === 8, "the first page shows 8 rows");
  check((await app.locator("tbody tr").first().innerText()).includes("For Those About To Rock"), "the first Chinook track is shown");
  check(await app.locator("th .type", { hasText: "text" }).count() >= 1, "column types are shown");
  check(await app.locator("td .null", { hasText: "NULL" }).count() >= 8, "NULLs are shown as NULL");
  check(await app.locator("td.number").count() === 8, "numbers are right-aligned");
  check((await app.locator("#paging").innerText()).includes("More rows exist"), "has_more is said plainly");

  // Sorting within the page.
  await app.locator("th", { hasText: "milliseconds" }).click();
  const firstSorted = Number(await app.locator("tbody tr td.number").first().innerText());
  const all = (await app.locator("tbody tr td.number").allInnerTexts()).map(Number);
  check(firstSorted === Math.min(...all), "a click on a header sorts the page");

  // The next page, through the host and orca.
  await app.locator("#next").click();
  await app.locator("#paging", { hasText: "Page 2: rows 9–16" }).waitFor();
  check(await page.evaluate(() => window.appCalls.includes("query_sql")), "the next page was a tools/call through the host");

  // A chart, and back.
  await app.locator("#show-chart").click();
  await app.locator("svg[data-kind='bar'] rect").first().waitFor();
  check(await app.locator("svg[data-kind='bar'] rect").count() === 8, "the chart is a bar per track");
  await page.screenshot({ path: process.env.SCREENSHOT });
  await app.locator("#show-table").click();
  await app.locator("tbody tr").first().waitFor();

  // Rated.
  await app.locator("#up").click();
  await app.locator("#status", { hasText: "Thanks: rated as a good result." }).waitFor();
  check(await page.evaluate(() => window.appCalls.includes("submit_feedback")), "the rating was submit_feedback through the host");

  // The host's theme and a phone's width.
  await page.evaluate(() => window.bridge.setHostContext({ theme: "dark" }));
  await app.locator("html[data-theme='dark']").waitFor();
  check(true, "the host's dark theme is applied");
  await page.setViewportSize({ width: 390, height: 800 });
  await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 300)));
  const fits = await app.locator("body").evaluate((body) => body.scrollWidth <= body.ownerDocument.documentElement.clientWidth + 1);
  check(fits, "the app fits 390 px (the table scrolls inside it)");
  await page.evaluate(() => window.bridge.teardownResource({}));
  check(true, "teardown answered");

  // The upstream's app, for a role that may use its server.
  await page.setViewportSize({ width: 900, height: 900 });
  const upstream = await page.evaluate(() => window.orcaHost.show(window.client, "fx_show_app", {}, "light"));
  check(upstream.uri === "ui://fx/fixture/app.html", "the upstream tool links its app under the prefix");
  check(upstream.meta.ui.csp.connectDomains[0] === "https://api.fixture.example", "the upstream's CSP is passed on");
  await app.locator("#greeting", { hasText: "fixture app: hello from the fixture app" }).waitFor();
  check(true, "the upstream app renders through orca");

  // ... and invisible to one that may not.
  const hidden = await page.evaluate(async (key) => {
    const outsider = await window.orcaHost.connect(key);
    const { tools } = await outsider.listTools();
    const { resources } = await outsider.listResources();
    let refused = false;
    try { await outsider.readResource({ uri: "ui://fx/fixture/app.html" }); } catch { refused = true; }
    return {
      tool: tools.some((tool) => tool.name === "fx_show_app"),
      listed: resources.some((resource) => resource.uri.startsWith("ui://fx/")),
      refused,
    };
  }, process.env.OUTSIDER_KEY);
  check(!hidden.tool && !hidden.listed, "the outsider lists neither the upstream tool nor its app");
  check(hidden.refused, "the outsider's read of the upstream app is refused");
  console.log("apps checks passed");
} finally {
  await browser.close();
}
