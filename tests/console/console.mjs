// The web console in a real browser: Debian's Chromium driven headless by playwright-core.
// Run by tests/it/console.rs against a real orca; every check failing ends the script with a
// non-zero status and the reason. Environment: ORCA_BASE (the orca origin), SCENARIO
// (`open`, `keys`, `signin`, `upstream` or `databases`), PLAYWRIGHT_DIR (where playwright-core is installed), CHROMIUM (its
// path), SCREENSHOTS (a directory), for `keys`: READER_KEY, WRITER_KEY, ADMIN_KEY, for
// `signin` and `upstream`: PROVIDER_ORIGIN (the OpenID provider's origin, the only other one the
// browser may navigate to), and for `upstream`: USER_KEY (an API key) and UPSTREAM (the key of
// an external server with `oauth: {mode: per_user}`).

import { createRequire } from "node:module";
import { readFile } from "node:fs/promises";
import assert from "node:assert/strict";
import path from "node:path";

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR, "package.json"));
const { chromium } = require("playwright-core");

const base = process.env.ORCA_BASE;
const shots = process.env.SCREENSHOTS;
const step = (text) => console.log(`step: ${text}`);

/**
 * A page that records console errors, failed and foreign requests, to check at the end; with
 * `navigateTo`, navigations (not other requests) to that one origin are allowed too.
 */
async function openPage(browser, viewport = { width: 1280, height: 800 }, { navigateTo } = {}) {
  const context = await browser.newContext({ viewport, acceptDownloads: true });
  const page = await context.newPage();
  const problems = [];
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning") problems.push(`console ${message.type()}: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("request", (request) => {
    const url = request.url();
    const navigation = navigateTo && url.startsWith(`${navigateTo}/`) && request.isNavigationRequest() && request.frame() === page.mainFrame();
    if (!url.startsWith(`${base}/`) && !url.startsWith("blob:") && !url.startsWith("data:") && !navigation) problems.push(`request left the orca origin: ${url}`);
  });
  page.on("response", (response) => {
    if (response.status() >= 400) problems.push(`HTTP ${response.status()} for ${response.url()}`);
  });
  page.on("requestfailed", (request) => {
    // A reload by the test itself cancels the page's requests in flight.
    if (page.reloading && request.failure()?.errorText === "net::ERR_ABORTED") return;
    problems.push(`request failed: ${request.url()} ${request.failure()?.errorText}`);
  });
  page.problems = problems;
  return { context, page };
}

function assertClean(page, what) {
  assert.deepEqual(page.problems, [], `${what}: the browser logged problems`);
}

async function reload(page) {
  page.reloading = true;
  await page.reload();
  page.reloading = false;
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

const exact = (name) => ({ name, exact: true });

async function openTool(page, server, tool) {
  const toggle = page.getByRole("button", exact(server));
  if ((await toggle.getAttribute("aria-expanded")) !== "true") await toggle.click();
  await page.getByRole("button", exact(tool)).click();
  await page.getByRole("heading", exact(tool)).waitFor();
}

async function run(page) {
  await page.getByRole("button", exact("Run")).click();
  await page.locator("#result-panel:not([aria-busy])").waitFor();
}

/** The server list at `width`: each long status stays off its server's name, nothing scrolls sideways. */
async function checkServerList(page, width) {
  const name = page.getByRole("button", exact("github"));
  await name.waitFor();
  const server = page.locator(".server", { has: page.getByRole("heading", exact("github")) });
  const badge = server.getByText(/^missing credentials: /);
  const title = await badge.getAttribute("title");
  assert.match(title ?? "", /^missing credentials: ORCA_CONSOLE_UNSET_GITHUB_API_KEY, ORCA_CONSOLE_UNSET_GITHUB_ORG$/, `${width} px: the whole status on hover`);
  assert.equal(await badge.textContent(), title);
  const [nameBox, badgeBox] = [await name.boundingBox(), await badge.boundingBox()];
  const apart = nameBox.x + nameBox.width <= badgeBox.x || badgeBox.x + badgeBox.width <= nameBox.x
    || nameBox.y + nameBox.height <= badgeBox.y || badgeBox.y + badgeBox.height <= nameBox.y;
  assert.ok(apart, `${width} px: the status ${JSON.stringify(badgeBox)} overlaps the name ${JSON.stringify(nameBox)}`);
  for (const server of ["github", "orca", "postgres", "data"]) {
    const fits = await page.getByRole("button", exact(server)).evaluate((node) => node.scrollWidth <= node.clientWidth && node.clientWidth > 40);
    assert.ok(fits, `${width} px: the name ${server} is cut or squeezed`);
  }
  const scrolls = await page.getByRole("navigation", exact("Servers")).evaluate((node) => ({
    sidebar: node.scrollWidth - node.clientWidth,
    page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  }));
  assert.deepEqual(scrolls, { sidebar: 0, page: 0 }, `${width} px: something scrolls sideways`);
  await shot(page, `00-servers-${width}`);
}

/**
 * `list_servers` as orca answers it, with versions set the ways a server may report one: a
 * string (postgres), null (data), absent (orca) and empty (github).
 */
async function withVersions(route) {
  const request = route.request().postDataJSON();
  if (request?.method !== "tools/call" || request.params?.name !== "list_servers") return route.continue();
  const response = await route.fetch();
  const edit = (message) => {
    for (const server of message.result?.structuredContent?.servers || []) {
      if (server.name === "postgres") server.version = "16.4-test";
      else if (server.name === "data") server.version = null;
      else if (server.name === "github") server.version = "";
      else delete server.version;
    }
    return message;
  };
  const text = await response.text();
  const body = (response.headers()["content-type"] || "").includes("text/event-stream")
    ? text.replace(/^data: ?(.*)$/gm, (_, data) => `data: ${JSON.stringify(edit(JSON.parse(data)))}`)
    : JSON.stringify(edit(JSON.parse(text)));
  const headers = { ...response.headers() };
  delete headers["content-length"];
  await route.fulfill({ status: response.status(), headers, body });
}

async function checkVersions(browser) {
  step("a server's version stands next to its name when list_servers reports one");
  const { context, page } = await openPage(browser);
  await page.route(`${base}/mcp?tool_search=off`, withVersions);
  await page.goto(`${base}/`);
  const head = (name) => page.locator(".server-head", { has: page.getByRole("heading", exact(name)) });
  const version = head("postgres").getByText("16.4-test", { exact: true });
  await version.waitFor();
  const [nameBox, versionBox] = [await page.getByRole("heading", exact("postgres")).boundingBox(), await version.boundingBox()];
  assert.ok(Math.abs(nameBox.y + nameBox.height / 2 - (versionBox.y + versionBox.height / 2)) < 8, "the version is on the name's line");
  assert.ok(versionBox.x - (nameBox.x + nameBox.width) < 24, `the version stands next to the name: ${JSON.stringify([nameBox, versionBox])}`);
  for (const name of ["data", "orca", "github"]) {
    const text = await head(name).innerText();
    assert.match(text, new RegExp(`^${name}\\s+\\d+ tools?\\b`), `${name} shows no version: ${JSON.stringify(text)}`);
  }
  await shot(page, "00-servers-versions");
  assertClean(page, "versions page");
  await context.close();
}

async function scenarioOpen(browser) {
  await checkVersions(browser);
  const { page } = await openPage(browser);
  await page.goto(`${base}/`);
  assert.equal(await page.title(), "orca console");

  step("the servers accordion names each server, with its status and its tools");
  for (const server of ["orca", "postgres", "data"]) {
    await page.getByRole("heading", exact(server)).waitFor();
  }
  await page.getByRole("button", exact("data")).click();
  const region = page.getByRole("region", exact("data"));
  await region.getByRole("button", exact("query_sql")).waitFor();
  assert.match(await region.innerText(), /query_sql/);
  assert.match(await page.locator(".server", { has: page.getByRole("heading", exact("postgres")) }).innerText(), /running/);

  step("a long status wraps or is cut short beside the server's name, with the whole text on hover");
  await page.getByRole("button", exact("data")).click();
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 800 });
    await checkServerList(page, width);
  }
  await page.setViewportSize({ width: 1280, height: 800 });

  step("a tool's form has one labelled control per parameter");
  await openTool(page, "postgres", "execute_sql");
  await page.getByLabel("sql", { exact: true }).waitFor();
  assert.equal(await page.getByRole("checkbox", exact("dry_run")).isChecked(), true);
  assert.equal(await page.getByRole("spinbutton", exact("max_rows")).count(), 1);
  await openTool(page, "postgres", "generate_sql");
  const provider = page.getByRole("combobox", exact("llm_provider"));
  const providers = await provider.locator("option").allInnerTexts();
  for (const name of ["anthropic", "openai", "google"]) assert.ok(providers.includes(name), `llm_provider offers ${name}: ${providers}`);
  await page.getByRole("combobox", exact("llm_model")).waitFor();
  await openTool(page, "data", "query_sql");
  const timeRange = page.getByLabel("time_range", { exact: true });
  assert.equal(await timeRange.evaluate((node) => node.tagName), "TEXTAREA");
  await page.getByLabel("sql", { exact: true }).fill("SELECT 1");
  await timeRange.fill("{ not json");
  await page.getByRole("button", exact("Run")).click();
  await page.getByText("time_range is not valid JSON").waitFor();
  assert.equal(await page.locator("#result-panel").isHidden(), true, "nothing was sent with invalid JSON");
  await timeRange.fill("[1]");
  await page.getByRole("button", exact("Run")).click();
  await page.getByText("time_range must be a JSON object").waitFor();

  step("a read shows its rows in a table, paged by page_token");
  await timeRange.fill("");
  await page.getByLabel("sql", { exact: true }).fill("SELECT artist_id, name FROM artist ORDER BY artist_id");
  await page.getByLabel("max_rows", { exact: true }).fill("10");
  await run(page);
  const table = page.getByRole("table", { name: /query_sql/ });
  await table.waitFor();
  let rows = table.getByRole("row");
  assert.equal(await rows.count(), 11, "a header and 10 rows");
  assert.match(await rows.nth(1).innerText(), /AC\/DC/);
  const jsonSummary = page.getByText("JSON", { exact: true });
  assert.equal(await jsonSummary.evaluate((summary) => summary.parentElement.textContent), "JSON", "the folded JSON view is built when opened");
  await jsonSummary.click();
  assert.match(await page.getByLabel("The result as JSON").innerText(), /"AC\/DC"/);
  await shot(page, "01-query-results");
  await page.getByRole("button", exact("Next page")).click();
  await page.getByRole("table", { name: /page 2/ }).waitFor();
  rows = page.getByRole("table", { name: /query_sql/ }).getByRole("row");
  assert.match(await rows.nth(1).innerText(), /^11\s/);
  await page.getByRole("button", exact("Previous page")).click();
  await page.getByRole("table", { name: /query_sql, 10 rows$/ }).waitFor();

  step("Download CSV and Download JSON save the result");
  const [csv] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", exact("Download CSV")).click()]);
  const csvText = await readFile(await csv.path(), "utf8");
  assert.ok(csvText.startsWith("artist_id,name\r\n1,AC/DC\r\n"), csvText.slice(0, 80));
  assert.equal(csvText.trimEnd().split("\r\n").length, 11);
  const [json] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", exact("Download JSON")).click()]);
  const jsonValue = JSON.parse(await readFile(await json.path(), "utf8"));
  assert.equal(jsonValue.rows[0][1], "AC/DC");
  assert.equal(jsonValue.has_more, true);

  step("feedback from the result footer reaches orca");
  const footer = page.locator(".result-footer");
  await footer.getByRole("button", exact("Thumbs up")).click();
  assert.equal(await footer.getByRole("button", exact("Thumbs up")).getAttribute("aria-pressed"), "true");
  await footer.getByRole("radio", exact("4 stars")).check();
  await footer.getByRole("textbox", exact("Comment")).fill("browser: the artists, nicely paged");
  await footer.getByRole("button", exact("Send feedback")).click();
  await footer.getByText("Thanks, your feedback was saved").waitFor();
  await page.getByRole("table", { name: /The last/ }).getByText("★★★★☆").waitFor();

  step("recent executions list the calls");
  const recent = page.getByRole("table", { name: /The last/ });
  for (const header of ["Tool", "Who", "Status", "Latency", "Time", "Rating"]) await recent.getByRole("columnheader", exact(header)).waitFor();
  assert.match(await recent.innerText(), /query_sql/);
  await shot(page, "02-feedback-and-recent");

  step("a long result shows its first rows at once and the others right after");
  await openTool(page, "data", "query_sql");
  await page.getByLabel("sql", { exact: true }).fill("SELECT track_id, name FROM track ORDER BY track_id");
  await page.getByLabel("max_rows", { exact: true }).fill("250");
  await run(page);
  const long = page.getByRole("region", { name: /^query_sql, 250 rows$/ });
  await long.and(page.locator(":not([aria-busy])")).waitFor();
  const longRows = long.getByRole("row");
  assert.equal(await longRows.count(), 251, "a header and 250 rows");
  assert.match(await longRows.last().innerText(), /^250\s/);

  step("three failed calls in a row open the feedback dialog, which Escape closes");
  await openTool(page, "postgres", "execute_sql");
  await page.getByLabel("sql", { exact: true }).fill("SELECT * FROM no_such_table");
  await page.getByRole("checkbox", exact("dry_run")).uncheck();
  for (let attempt = 1; attempt <= 3; attempt++) {
    await run(page);
    await page.locator("#result").getByRole("alert").getByText("QUERY_FAILED").waitFor();
    if (attempt < 3) assert.equal(await page.getByRole("dialog").count(), 0, `no dialog after ${attempt} failure(s)`);
  }
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /Three calls in a row failed/);
  assert.match(await dialog.innerText(), /no_such_table/);
  assert.match(await page.locator("#result").getByRole("alert").innerText(), /Hint/);
  await page.keyboard.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Run", "focus returns to Run");

  step("generate_sql that exhausts its retries opens the dialog and the SQL editor");
  await openTool(page, "postgres", "generate_sql");
  await page.getByLabel("prompt", { exact: true }).fill("how many albums per artist?");
  await page.getByLabel("max_retries", { exact: true }).fill("3");
  await run(page);
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /EXCEEDED_RETRIES/);
  await shot(page, "03-retries-exhausted-dialog");
  await dialog.getByRole("button", exact("Thumbs down")).click();
  await dialog.getByRole("radio", exact("1 star")).check();
  await dialog.getByRole("textbox", exact("Comment")).fill("browser: it kept guessing column names");
  await dialog.getByRole("button", exact("Send feedback")).click();
  await dialog.getByText("Thanks, your feedback was saved").waitFor();
  await dialog.getByRole("button", exact("Close")).click();
  await dialog.waitFor({ state: "hidden" });
  const sql = page.getByRole("textbox", exact("SQL"));
  assert.equal(await sql.inputValue(), "SELECT artist.title_of_album FROM artist");
  assert.match(await page.locator("#fallback").innerText(), /title_of_album/);
  await sql.fill("UPDATE artist SET name = name WHERE artist_id = 1");
  await page.getByRole("button", exact("Dry run")).click();
  await page.getByText(/changes data/).waitFor();
  await shot(page, "04-manual-fallback");
  await page.getByRole("button", exact("Confirm")).click();
  await page.getByText("The write ran: 1 row affected.").waitFor();
  const fallbackTitle = page.getByRole("heading", exact("Fix the SQL by hand"));
  await fallbackTitle.waitFor({ state: "hidden" });
  assert.equal(await page.getByRole("heading", exact("execute_sql result")).count(), 1, "the write is shown as the result");

  step("the fallback closes once its read has run");
  const giveUp = async () => {
    await openTool(page, "postgres", "generate_sql");
    await page.getByLabel("prompt", { exact: true }).fill("how many albums per artist?");
    await page.getByLabel("max_retries", { exact: true }).fill("3");
    await run(page);
    await dialog.waitFor();
    await dialog.getByRole("button", exact("Close")).click();
    await dialog.waitFor({ state: "hidden" });
    await fallbackTitle.waitFor();
  };
  await giveUp();
  await sql.fill("SELECT name FROM artist WHERE artist_id = 1");
  await page.getByRole("button", exact("Dry run")).click();
  await page.getByRole("button", exact("Run query")).click();
  await page.getByRole("table", { name: /^execute_sql, 1 row$/ }).waitFor();
  await fallbackTitle.waitFor({ state: "hidden" });

  step("choosing another tool closes the fallback");
  await giveUp();

  await openTool(page, "postgres", "format_results");
  await fallbackTitle.waitFor({ state: "hidden" });

  step("a chart is shown as an image");
  await page.locator("#tool-form").getByLabel("data", { exact: true }).fill('[{"genre": "Rock", "tracks": 1297}, {"genre": "Latin", "tracks": 579}, {"genre": "Metal", "tracks": 374}]');
  await page.getByRole("combobox", exact("format")).selectOption("chart");
  await run(page);
  const chart = page.getByRole("img", exact("format_results chart"));
  await chart.waitFor();
  assert.ok(await chart.evaluate((image) => image.complete && image.naturalWidth > 100), "the chart's PNG is drawn");
  await shot(page, "04b-chart");

  step("keyboard only: Tab reaches every control, Enter runs");
  await reload(page);
  await page.getByRole("heading", exact("data")).waitFor();
  const focusName = () => page.evaluate(() => {
    const node = document.activeElement;
    if (!node) return "";
    const label = node.id ? document.querySelector(`label[for="${node.id}"]`) : null;
    return (label ? label.textContent : node.getAttribute("aria-label") || node.textContent || "").trim();
  });
  const tabTo = async (name, limit = 80) => {
    for (let index = 0; index < limit; index++) {
      await page.keyboard.press("Tab");
      if ((await focusName()) === name) return;
    }
    throw new Error(`Tab never reached ${name}`);
  };
  await tabTo("data");
  await page.keyboard.press("Enter");
  await tabTo("list_tables");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", exact("list_tables")).waitFor();
  assert.equal(await focusName(), "catalog", "the first field has the focus");
  const reached = [await focusName()];
  for (let index = 0; index < 20 && reached.at(-1) !== "Run"; index++) {
    await page.keyboard.press("Tab");
    reached.push(await focusName());
  }
  for (const name of ["catalog", "schema", "pattern", "limit", "Run"]) assert.ok(reached.includes(name), `Tab reaches ${name}: ${reached}`);
  await page.keyboard.press("Shift+Tab");
  while ((await focusName()) !== "pattern") await page.keyboard.press("Shift+Tab");
  await page.keyboard.type("inv*");
  await page.keyboard.press("Enter");
  const tablesTable = page.getByRole("table", { name: /list_tables/ });
  await tablesTable.waitFor();
  assert.match(await tablesTable.innerText(), /invoice_line/);
  await shot(page, "05-keyboard");

  step("the console works on a narrow window");
  await page.setViewportSize({ width: 400, height: 860 });
  await page.getByRole("button", exact("Run")).click();
  await tablesTable.waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page scrolls sideways by ${overflow}px on a narrow window`);
  await shot(page, "06-narrow");

  assertClean(page, "open scenario");
}

async function scenarioDatabases(browser) {
  const { page } = await openPage(browser);
  await page.goto(`${base}/`);
  const dialog = page.getByRole("dialog");

  step("an SQL tool's form offers the databases as a choice");
  await openTool(page, "postgres", "execute_sql");
  const database = page.getByRole("combobox", exact("database"));
  const names = await database.locator("option").allInnerTexts();
  for (const name of ["music", "films"]) assert.ok(names.includes(name), `database offers ${name}: ${names}`);
  await database.selectOption("films");
  await page.getByLabel("sql", { exact: true }).fill("SELECT title FROM film ORDER BY title");
  await page.getByRole("checkbox", exact("dry_run")).uncheck();
  await run(page);
  await page.getByRole("table", { name: /^execute_sql, 3 rows$/ }).waitFor();
  assert.match(await page.locator("#result-panel").innerText(), /ACADEMY DINOSAUR/);
  await shot(page, "20-databases-choice");

  step("the manual fallback runs on the database generate_sql chose");
  await openTool(page, "postgres", "generate_sql");
  await page.getByLabel("prompt", { exact: true }).fill("which films cost the most to rent?");
  await page.getByLabel("max_retries", { exact: true }).fill("3");
  await run(page);
  await dialog.waitFor();
  await dialog.getByRole("button", exact("Close")).click();
  await dialog.waitFor({ state: "hidden" });
  const sql = page.getByRole("textbox", exact("SQL"));
  await sql.fill("SELECT title FROM film WHERE rental_rate > 4");
  await page.getByRole("button", exact("Dry run")).click();
  await page.getByRole("button", exact("Run query")).click();
  await page.getByRole("table", { name: /^execute_sql, 1 row$/ }).waitFor();
  assert.match(await page.locator("#result-panel").innerText(), /ACE GOLDFINGER/);
  assertClean(page, "databases scenario");
}

async function scenarioKeys(browser) {
  step("the console asks for an API key and keeps it for the tab only");
  const reader = await openPage(browser);
  const page = reader.page;
  await page.goto(`${base}/`);
  const keyField = page.getByLabel("API key", { exact: true });
  await keyField.waitFor();
  assert.equal(await keyField.getAttribute("type"), "password");
  await shot(page, "07-api-key");
  await keyField.fill("orca_not_a_key");
  await page.getByRole("button", exact("Connect")).click();
  await page.getByText("The API key was refused").waitFor();
  await keyField.fill(process.env.READER_KEY);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", exact("postgres")).waitFor();
  assert.match(await page.getByRole("status").first().innerText(), /as reader \(read\)/);
  assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing is kept beyond the tab");
  await page.getByRole("button", exact("postgres")).click();
  await page.getByRole("button", exact("execute_sql")).waitFor();
  assert.equal(await page.getByRole("button", exact("add_records")).count(), 0, "a read-only key does not see add_records");
  await reload(page);
  await page.getByRole("heading", exact("postgres")).waitFor();
  const other = await openPage(browser);
  await other.page.goto(`${base}/`);
  await other.page.getByLabel("API key", { exact: true }).waitFor();
  await other.context.close();

  step("a dry run under write_confirmation: human waits for a person");
  const writer = await openPage(browser);
  await writer.page.goto(`${base}/`);
  await writer.page.getByLabel("API key", { exact: true }).fill(process.env.WRITER_KEY);
  await writer.page.getByRole("button", exact("Connect")).click();
  await openTool(writer.page, "postgres", "execute_sql");
  await writer.page.getByLabel("sql", { exact: true }).fill("DELETE FROM playlist_track WHERE playlist_id = 18");
  await run(writer.page);
  assert.match(await writer.page.locator("#result").innerText(), /approval_id/);
  const waiting = writer.page.getByRole("table", { name: /waiting for approval/ });
  await waiting.waitFor();
  assert.match(await waiting.innerText(), /DELETE FROM playlist_track WHERE playlist_id = 18/);
  assert.match(await waiting.innerText(), /writer/);

  step("a key that neither asked for the write nor may approve it does not see it");
  await page.getByRole("button", exact("Refresh approvals")).click();
  await page.getByText("No writes are waiting for approval.").waitFor();

  step("a key holding the write's verbs approves it");
  const admin = await openPage(browser);
  await admin.page.goto(`${base}/`);
  await admin.page.getByLabel("API key", { exact: true }).fill(process.env.ADMIN_KEY);
  await admin.page.getByRole("button", exact("Connect")).click();
  const adminApprovals = admin.page.getByRole("table", { name: /waiting for approval/ });
  await adminApprovals.waitFor();
  assert.match(await adminApprovals.innerText(), /playlist_track/);
  assert.match(await adminApprovals.innerText(), /writer/);
  await shot(admin.page, "08-approvals");
  await adminApprovals.getByRole("button", exact("Approve")).click();
  await adminApprovals.getByText("Approved").waitFor();
  await admin.page.getByRole("button", exact("postgres")).click();
  await admin.page.getByRole("button", exact("add_records")).waitFor();

  step("recent executions show each key its own calls");
  await admin.page.getByRole("button", exact("Refresh executions")).click();
  const adminRecent = admin.page.locator("#recent");
  assert.doesNotMatch(await adminRecent.innerText(), /execute_sql/, "the admin does not see the writer's calls");
  // Tracking stores calls in batches (up to 100 ms apart, later on a busy machine): refresh
  // until the writer's call is there.
  let writerRecent = "";
  for (let attempt = 0; attempt < 50 && !/execute_sql/.test(writerRecent); attempt++) {
    if (attempt > 0) await writer.page.waitForTimeout(200);
    await writer.page.getByRole("button", exact("Refresh executions")).click();
    writerRecent = await writer.page.getByRole("table", { name: /The last/ }).innerText();
  }
  assert.match(writerRecent, /execute_sql/);
  // The "Who" column names the key that made the call.
  const writerCall = writer.page.getByRole("table", { name: /The last/ }).getByRole("row").filter({ hasText: "execute_sql" }).first();
  assert.equal((await writerCall.getByRole("cell").nth(1).innerText()).trim(), "writer");

  step("no page shows a key");
  for (const current of [page, writer.page, admin.page]) {
    const html = await current.content();
    for (const key of [process.env.READER_KEY, process.env.WRITER_KEY, process.env.ADMIN_KEY]) assert.ok(!html.includes(key), "a key appears in the page");
  }
  assertClean(admin.page, "admin page");
  assertClean(writer.page, "writer page");
  // The refused key answered 200 from /console/api/session: no failed request either.
  assertClean(page, "reader page");
}

async function scenarioSignIn(browser) {
  const provider = process.env.PROVIDER_ORIGIN;
  const { page } = await openPage(browser, undefined, { navigateTo: provider });

  step("a code this tab did not ask for is dropped, unused");
  await page.goto(`${base}/?code=forged&state=forged&iss=${encodeURIComponent(provider)}`);
  await page.getByText("The sign-in was not started from this tab: sign in again.").waitFor();
  assert.equal(page.url(), `${base}/`);
  await page.evaluate(() => sessionStorage.setItem("orca.console.signIn", JSON.stringify({ verifier: "v".repeat(43), state: "s1", issuer: "http://127.0.0.1:1", redirectUri: `${location.origin}/` })));
  await page.goto(`${base}/?code=c&state=s1&iss=${encodeURIComponent(provider)}`);
  await page.getByText("The sign-in came back from another issuer than this server trusts: sign in again.").waitFor();
  assert.equal(page.url(), `${base}/`);

  step("the page offers the sign-in, and the API key next to it");
  const signIn = page.getByRole("button", exact("Sign in"));
  await signIn.waitFor();
  await page.getByLabel("API key", { exact: true }).waitFor();
  assert.match(await page.locator("#login").innerText(), new RegExp(`Sign in with your account at ${new URL(provider).host.replace(/\./g, "\\.")}`));
  await shot(page, "09-sign-in");

  step("the issuer's login and consent");
  const asked = page.waitForRequest((request) => request.url().startsWith(`${provider}/`));
  await signIn.click();
  const authorize = new URL((await asked).url());
  const params = Object.fromEntries(authorize.searchParams);
  assert.equal(params.response_type, "code");
  assert.equal(params.client_id, "orca-console");
  assert.equal(params.redirect_uri, `${base}/`);
  assert.equal(params.code_challenge_method, "S256");
  assert.match(params.code_challenge, /^[\w-]{43}$/);
  assert.match(params.state, /^[\w-]{22}$/);
  assert.equal(params.resource, `${base}/mcp`);
  assert.equal(params.scope, "orca.read orca.write");
  assert.equal(params.code_verifier, undefined, "the verifier stays in the tab");
  await page.waitForURL((url) => url.origin === provider);
  await page.locator('input[name="login"]').fill("ada");
  await page.locator('input[name="password"]').fill("any password");
  await shot(page, "10-provider-login");
  await page.getByRole("button", exact("Sign-in")).click();
  const back = page.waitForRequest((request) => request.url().startsWith(`${base}/?`));
  await page.getByRole("button", exact("Continue")).click();
  const answer = Object.fromEntries(new URL((await back).url()).searchParams);
  assert.equal(answer.state, params.state, "the provider sends the state back");
  assert.equal(answer.iss, provider, "the provider names itself (RFC 9207), which the page checks");
  assert.ok(answer.code);

  step("back on the console, signed in, with no code in the address");
  await page.waitForURL((url) => url.origin === base);
  const status = page.getByRole("status").first();
  await page.getByText(/signed in as ada/).waitFor();
  assert.match(await status.innerText(), /signed in as ada \(may read\)/);
  assert.equal(page.url(), `${base}/`, "the code and state left the address bar");
  const stored = await page.evaluate(() => ({ ...sessionStorage }));
  assert.match(stored["orca.console.apiKey"] || "", /^[\w-]+\.[\w-]+\.[\w-]+$/, "the access token is kept in this tab");
  assert.equal(stored["orca.console.signIn"], undefined, "the PKCE verifier and state are gone");
  assert.equal(await page.evaluate(() => localStorage.length), 0, "nothing is kept beyond the tab");
  assert.ok(!(await page.content()).includes(stored["orca.console.apiKey"]), "the token is not shown");

  step("a tool runs with the token");
  await openTool(page, "orca", "list_servers");
  await run(page);
  assert.equal(await page.locator("#result-title").innerText(), "list_servers result");
  await shot(page, "11-signed-in");

  step("a reload keeps the sign-in; Sign out forgets it");
  await reload(page);
  await page.getByText(/signed in as ada/).waitFor();
  // Sign out reloads the page, which cancels its requests in flight.
  page.reloading = true;
  await page.getByRole("button", exact("Sign out")).click();
  await signIn.waitFor();
  page.reloading = false;
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, "the token is forgotten");
  await shot(page, "12-signed-out");
  assertClean(page, "sign-in page");
}

async function scenarioUpstream(browser) {
  const provider = process.env.PROVIDER_ORIGIN;
  const upstream = process.env.UPSTREAM;
  const { page } = await openPage(browser, undefined, { navigateTo: provider });

  step("the console lists the external server that asks each user to sign in");
  await page.goto(`${base}/`);
  await page.getByLabel("API key", { exact: true }).fill(process.env.USER_KEY);
  await page.keyboard.press("Enter");
  const panel = page.getByRole("region", exact("Sign-ins to external servers"));
  await panel.waitFor();
  const item = panel.locator(".upstream", { hasText: upstream });
  await item.getByText("Not signed in", { exact: true }).waitFor();
  assert.match(await item.innerText(), /your own sign-in/);
  await shot(page, "13-upstream-not-signed-in");

  step("Sign in goes to the authorization server and comes back through orca");
  const asked = page.waitForRequest((request) => request.url().startsWith(`${provider}/`) && request.isNavigationRequest());
  await panel.getByRole("button", exact(`Sign in to ${upstream}`)).click();
  const authorize = new URL((await asked).url());
  assert.equal(authorize.searchParams.get("redirect_uri"), `${base}/oauth/upstream/callback`);
  assert.equal(authorize.searchParams.get("code_challenge_method"), "S256");
  assert.equal(authorize.searchParams.get("code_verifier"), null, "the verifier stays in orca");
  await page.waitForURL((url) => url.origin === provider);
  await page.locator('input[name="login"]').fill("dora");
  await page.locator('input[name="password"]').fill("any password");
  await page.getByRole("button", exact("Sign-in")).click();
  await page.getByRole("button", exact("Continue")).click();
  await page.waitForURL((url) => url.origin === base);
  await page.getByText(`Signed in to ${upstream}.`, { exact: true }).waitFor();
  assert.equal(page.url(), `${base}/`, "the way back left the address bar");
  await item.getByText("Signed in", { exact: true }).waitFor();
  assert.equal(await page.evaluate(() => document.cookie), "", "the binding cookie is not readable by the page");
  await shot(page, "14-upstream-signed-in");

  step("a tool of the server runs as the person who signed in");
  await openTool(page, upstream, `${upstream}_list_servers`);
  await run(page);
  // The JSON view is built when first opened; the upstream names its caller there.
  await page.locator("#result").getByText("JSON", { exact: true }).click();
  await page.locator("#result").getByText(/"dora"/).first().waitFor();

  step("Sign out forgets the sign-in");
  await panel.getByRole("button", exact(`Sign out of ${upstream}`)).click();
  await item.getByText("Not signed in", { exact: true }).waitFor();
  await shot(page, "15-upstream-signed-out");
  assertClean(page, "upstream sign-in page");
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"] });
try {
  if (process.env.SCENARIO === "open") await scenarioOpen(browser);
  else if (process.env.SCENARIO === "keys") await scenarioKeys(browser);
  else if (process.env.SCENARIO === "databases") await scenarioDatabases(browser);
  else if (process.env.SCENARIO === "signin") await scenarioSignIn(browser);
  else if (process.env.SCENARIO === "upstream") await scenarioUpstream(browser);
  else throw new Error(`unknown SCENARIO ${process.env.SCENARIO}`);
  console.log("console checks passed");
} finally {
  await browser.close();
}
