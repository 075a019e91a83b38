//! The MCP conformance suite (`@modelcontextprotocol/conformance` from npm, server mode, run by
//! the Node.js 22 of the npm package `node@22`, both installed into `target/`) against the real
//! `orca serve --http`, stateless and `--stateful`, with the suite's fixture server
//! (`fixtures/conformance-upstream`) behind it under no prefix, so every scenario runs through
//! orca's proxy; and what the suite touches that orca relays from upstreams: completions, log
//! messages, `/healthz`'s list of external servers, and the Origin rule of a loopback bind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::orca::BINARY;
use crate::support::{OrcaSetup, TestDatabase, call, eventually, text_of};

/// The suite's version: its scenarios are pinned below, each passing or left out with a reason.
const SUITE: &str = "@modelcontextprotocol/conformance@0.1.16";

/// What a scenario must show.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Expect {
    /// At least one check succeeds and none fails (warnings are reported, not failed).
    Pass,
    /// Not applicable here: `evidence` must appear in a check that did not succeed, so the
    /// scenario is left out for exactly this `reason` and no other.
    LeftOut { evidence: &'static str, reason: &'static str },
    /// Every check passes except exactly the `failing` ones (by name), for this `reason`.
    Except { failing: &'static [&'static str], reason: &'static str },
}

use Expect::{Except, LeftOut, Pass};

/// Every scenario of the suite (active and pending), and what orca (or the fixture server
/// itself) must show, with or without sessions.
fn expectations(stateful: bool) -> Vec<(&'static str, Expect)> {
    let json_answers = LeftOut {
        evidence: "priming event tests not applicable",
        reason: "answers a POST with JSON stateless, where the SSE polling checks do not apply",
    };
    vec![
        ("server-initialize", Pass),
        ("logging-set-level", Pass),
        ("ping", Pass),
        ("completion-complete", Pass),
        ("tools-list", Pass),
        ("resources-list", Pass),
        ("prompts-list", Pass),
        ("dns-rebinding-protection", Pass),
        // Stateless, orca's `Mcp-Session-Id` carries the client's capabilities, and the
        // suite's concurrent POSTs with it are answered (JSON, as ever without a session).
        ("server-sse-multiple-streams", Pass),
        ("server-sse-polling", if stateful { Pass } else { json_answers }),
        ("tools-call-simple-text", Pass),
        ("tools-call-image", Pass),
        ("tools-call-audio", Pass),
        ("tools-call-embedded-resource", Pass),
        ("tools-call-mixed-content", Pass),
        ("tools-call-with-logging", Pass),
        ("tools-call-error", Pass),
        ("tools-call-with-progress", Pass),
        ("tools-call-sampling", Pass),
        ("tools-call-elicitation", Pass),
        ("elicitation-sep1034-defaults", Pass),
        ("elicitation-sep1330-enums", Pass),
        ("json-schema-2020-12", Pass),
        ("resources-read-text", Pass),
        ("resources-read-binary", Pass),
        ("resources-templates-read", Pass),
        ("resources-subscribe", Pass),
        ("resources-unsubscribe", Pass),
        ("prompts-get-simple", Pass),
        ("prompts-get-with-args", Pass),
        ("prompts-get-embedded-resource", Pass),
        ("prompts-get-with-image", Pass),
    ]
}

/// Node.js 22 and the suite's entry point, installed once per target directory.
pub(crate) struct Suite {
    node: PathBuf,
    entry: PathBuf,
}

fn suite() -> Suite {
    install_suite(SUITE, "mcp-conformance")
}

/// The suite `package` and Node.js 22, installed into `dir` under the target directory.
pub(crate) fn install_suite(package: &str, dir: &str) -> Suite {
    let root = Path::new(BINARY).parent().unwrap().join(dir);
    let node = root.join("node_modules/node/bin/node");
    let entry = root.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    std::fs::create_dir_all(&root).unwrap();
    let lock = std::fs::File::create(root.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    if !node.is_file() || !entry.is_file() {
        let output = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .args([package, "node@22"])
            .output()
            .unwrap_or_else(|error| {
                panic!("the conformance suite needs npm (apt-get install -y npm): {error}")
            });
        assert!(
            output.status.success(),
            "npm install {package} node@22 failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let version = Command::new(&node).arg("--version").output().expect("cannot run node@22");
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    assert!(version.starts_with("v22."), "node@22 runs {version}");
    Suite { node, entry }
}

/// A test upstream, built next to orca by `cargo build` of the workspace.
pub(crate) fn binary(name: &str) -> PathBuf {
    let path = Path::new(BINARY).with_file_name(name);
    assert!(
        path.is_file(),
        "{} is missing: build the workspace (cargo build --workspace)",
        path.display()
    );
    path
}

fn fixture() -> PathBuf {
    binary("orca-test-upstream")
}

/// The suite's fixture server behind orca, its names and URIs as they are.
pub(crate) fn conformance_yaml() -> String {
    format!(
        "mcps:\n  conformance:\n    command: {}\n    prefix: \"\"\n    timeout: 10s\n",
        binary("orca-conformance-upstream").display()
    )
}

/// The suite's fixture server on its own over Streamable HTTP with sessions; killed when
/// dropped.
pub(crate) struct DirectFixture {
    child: std::process::Child,
    pub(crate) url: String,
}

impl DirectFixture {
    pub(crate) fn start() -> DirectFixture {
        DirectFixture::start_with(&[])
    }

    /// The same with `env` set for the fixture (`FIXTURE_NATIVE_TASKS`).
    pub(crate) fn start_with(env: &[(&str, &str)]) -> DirectFixture {
        use std::io::BufRead as _;
        let mut child = Command::new(binary("orca-conformance-upstream"))
            .args(["--http", "127.0.0.1:0"])
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
        let url =
            line.trim().strip_prefix("listening on ").expect("the fixture's address").to_owned();
        DirectFixture { child, url }
    }
}

impl Drop for DirectFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture_yaml() -> String {
    format!(
        "mcps:\n  fx:\n    name: Fixture\n    command: {}\n    timeout: 10s\n",
        fixture().display()
    )
}

/// Run the whole suite against `url`; each scenario's checks by scenario name.
pub(crate) fn run_suite(suite: &Suite, url: &str, out: &Path) -> BTreeMap<String, Vec<Value>> {
    let output = Command::new(&suite.node)
        .arg(&suite.entry)
        .args(["server", "--suite", "all", "--url", url, "--output-dir"])
        .arg(out)
        .output()
        .expect("cannot run the conformance suite");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(stdout.contains("=== SUMMARY ==="), "the suite did not finish:\n{stdout}");
    let mut checks = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        // `server-<scenario>-<ISO timestamp>`.
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let scenario = name.strip_prefix("server-").unwrap();
        let stamp = scenario
            .match_indices('-')
            .map(|(at, _)| at)
            .find(|&at| {
                let rest = &scenario.as_bytes()[at + 1..];
                rest.len() > 11
                    && rest[..4].iter().all(u8::is_ascii_digit)
                    && (rest[4], rest[7], rest[10]) == (b'-', b'-', b'T')
            })
            .expect("a timestamped directory");
        let scenario = &scenario[..stamp];
        let text = std::fs::read_to_string(path.join("checks.json")).unwrap();
        let list: Vec<Value> = serde_json::from_str(&text).unwrap();
        checks.insert(scenario.to_owned(), list);
    }
    checks
}

/// Check every scenario against its expectation; the table of outcomes, for the test's output.
fn judge(stateful: bool, checks: &BTreeMap<String, Vec<Value>>) -> String {
    judge_against(expectations(stateful), checks)
}

/// Check every scenario against its expectation in `expected`; the table of outcomes.
pub(crate) fn judge_against(
    expected: Vec<(&'static str, Expect)>,
    checks: &BTreeMap<String, Vec<Value>>,
) -> String {
    let known: Vec<&str> = expected.iter().map(|(name, _)| *name).collect();
    let unknown: Vec<&String> =
        checks.keys().filter(|name| !known.contains(&name.as_str())).collect();
    assert!(unknown.is_empty(), "scenarios with no expectation here: {unknown:?}");
    let mut table = String::new();
    let mut problems = Vec::new();
    for (scenario, expect) in expected {
        let Some(list) = checks.get(scenario) else {
            problems.push(format!("{scenario}: not run"));
            continue;
        };
        let count = |status: &str| list.iter().filter(|check| check["status"] == status).count();
        let (passed, failed, warned) = (count("SUCCESS"), count("FAILURE"), count("WARNING"));
        match expect {
            Pass if failed == 0 && passed > 0 => {
                table.push_str(&format!("{scenario}: pass ({passed} checks, {warned} warnings)\n"));
            }
            Pass => problems.push(format!("{scenario}: expected to pass: {list:#?}")),
            LeftOut { evidence, reason } => {
                let shown = list
                    .iter()
                    .filter(|check| check["status"] != "SUCCESS")
                    .any(|check| check.to_string().contains(evidence));
                if shown {
                    table.push_str(&format!("{scenario}: left out ({reason})\n"));
                } else {
                    problems.push(format!(
                        "{scenario}: left out because it {reason}, but no check shows `{evidence}`: {list:#?}"
                    ));
                }
            }
            Except { failing, reason } => {
                let mut failed: Vec<&str> = list
                    .iter()
                    .filter(|check| check["status"] == "FAILURE")
                    .filter_map(|check| check["name"].as_str())
                    .collect();
                failed.sort_unstable();
                failed.dedup();
                let mut expected_failures = failing.to_vec();
                expected_failures.sort_unstable();
                if failed == expected_failures {
                    table.push_str(&format!(
                        "{scenario}: {passed} checks pass, {} fail ({reason})\n",
                        failed.len()
                    ));
                } else {
                    problems.push(format!(
                        "{scenario}: expected exactly {expected_failures:?} to fail ({reason}), got {failed:?}: {list:#?}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "conformance problems:\n{}", problems.join("\n"));
    table
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::print_stderr, reason = "the table of outcomes is the test's own report")]
async fn the_mcp_conformance_suite_passes_through_orca_as_it_passes_against_its_fixture_server() {
    let suite = suite();
    // The fixture server on its own passes every scenario: it does what the suite asks.
    let direct = DirectFixture::start();
    let out = tempfile::tempdir().unwrap();
    let table = judge(true, &run_suite(&suite, &direct.url, out.path()));
    eprintln!("conformance, the fixture server directly:\n{table}");
    drop(direct);

    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&conformance_yaml());
    for stateful in [false, true] {
        let server = setup.http_server(if stateful { &["--stateful"] } else { &[] });
        let out = tempfile::tempdir().unwrap();
        let checks = run_suite(&suite, &server.url("/mcp"), out.path());
        let table = judge(stateful, &checks);
        eprintln!("conformance, {}:\n{table}", if stateful { "stateful" } else { "stateless" });
        let status = server.stop();
        assert!(status.success(), "orca exited with {status}");
    }
}

/// The same through orca speaking 2026-07-28 to the fixture (over stdio): what the fixture
/// asks during a call comes to orca as an `InputRequiredResult` and reaches the suite's 2025
/// client as requests on its call's stream; list changes and the watched resource's update
/// come on a listen stream.
#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::print_stderr, reason = "the table of outcomes is the test's own report")]
async fn the_mcp_conformance_suite_passes_through_orca_speaking_2026_07_28_to_its_fixture() {
    let suite = suite();
    let database = TestDatabase::create().await;
    let yaml = format!("{}    protocol: 2026-07-28\n", conformance_yaml());
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    for stateful in [false, true] {
        let server = setup.http_server(if stateful { &["--stateful"] } else { &[] });
        let out = tempfile::tempdir().unwrap();
        let checks = run_suite(&suite, &server.url("/mcp"), out.path());
        let table = judge(stateful, &checks);
        let mode = if stateful { "stateful" } else { "stateless" };
        eprintln!("conformance, {mode}, orca speaking 2026-07-28 to the fixture:\n{table}");
        let status = server.stop();
        assert!(status.success(), "orca exited with {status}");
    }
}

/// A raw `initialize` with the given `Host` and `Origin`; the status.
async fn initialize_with(url: &str, host: Option<&str>, origin: &str) -> u16 {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("origin", origin)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(host) = host {
        request = request.header("host", host);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    request.json(&body).send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_loopback_bind_accepts_loopback_origins_and_refuses_foreign_ones() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let url = server.url("/mcp");
    let port = url.rsplit(':').next().unwrap().split('/').next().unwrap().to_owned();
    for origin in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        "http://localhost:5173".to_owned(),
        "http://127.0.0.1:3000".to_owned(),
        "http://[::1]:8080".to_owned(),
    ] {
        assert_eq!(initialize_with(&url, None, &origin).await, 200, "{origin}");
    }
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example",
        "http://127.0.0.1.evil.example:3000",
        "null",
    ] {
        assert_eq!(initialize_with(&url, None, origin).await, 403, "{origin}");
    }
    // DNS rebinding: a foreign name resolving to loopback is refused by its Host.
    let rebound = initialize_with(&url, Some("evil.example"), "http://evil.example").await;
    assert_eq!(rebound, 403);

    // Bound to every address (which needs keys), a loopback origin is foreign like any other.
    let key = "orca_conformance_key_5e21";
    let keyed = OrcaSetup::new(&database.url).with_config(&format!(
        "auth:\n  api_keys:\n    - name: reader\n      sha256: {}\n      verbs: [read]\n",
        hex::encode(Sha256::digest(key.as_bytes()))
    ));
    let wide = keyed.http_command(&["serve", "--http", "0.0.0.0:0"]);
    let wide_url = wide.url("/mcp").replace("0.0.0.0", "127.0.0.1");
    let status = initialize_with(&wide_url, None, "http://localhost:5173").await;
    assert_eq!(status, 403);
}

/// A client that keeps the log messages it is sent.
#[derive(Clone, Default)]
struct LogCollector {
    messages: Arc<Mutex<Vec<Value>>>,
}

impl rmcp::ClientHandler for LogCollector {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("logs", "1"))
    }

    #[expect(deprecated, reason = "MCP logging is deprecated by SEP-2577 but still spoken")]
    async fn on_logging_message(
        &self,
        message: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.messages.lock().unwrap().push(serde_json::to_value(message).unwrap());
    }
}

impl LogCollector {
    fn texts(&self) -> Vec<String> {
        let messages = self.messages.lock().unwrap();
        messages
            .iter()
            .filter_map(|message| message["data"]["text"].as_str())
            .map(str::to_owned)
            .collect()
    }
}

/// Log through the fixture at `level`, then at `error` as a marker, and wait for the marker (and
/// for the message itself when the client is to `hear` it: rmcp's client runs each
/// notification's handler in a task of its own, so they may land in either order).
async fn log_and_wait(
    client: &RunningService<RoleClient, LogCollector>,
    collector: &LogCollector,
    level: &str,
    text: &str,
    hear: bool,
) {
    let result = call(client, "fx_log", json!({"level": level, "text": text}), None).await.unwrap();
    assert_eq!(text_of(&result), "logged");
    let marker = format!("after {text}");
    call(client, "fx_log", json!({"level": "error", "text": marker}), None).await.unwrap();
    eventually("the marker log message", Duration::from_secs(10), || async {
        let texts = collector.texts();
        texts.contains(&marker) && (!hear || texts.iter().any(|heard| heard == text))
    })
    .await;
}

/// `logging/setLevel` with a level by its wire name.
#[expect(deprecated, reason = "MCP logging is deprecated by SEP-2577 but still spoken")]
async fn set_level(client: &RunningService<RoleClient, LogCollector>, level: &str) {
    let level: rmcp::model::LoggingLevel = serde_json::from_value(json!(level)).unwrap();
    client.set_level(rmcp::model::SetLevelRequestParams::new(level)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_log_messages_reach_stdio_and_session_clients_at_their_level() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_config("http:\n  health_details: names\n")
        .with_external(&fixture_yaml());

    let collector = LogCollector::default();
    let client = setup.stdio_client_with(collector.clone()).await;
    assert!(client.peer_info().unwrap().capabilities.logging.is_some());
    log_and_wait(&client, &collector, "info", "hello over stdio", true).await;
    let messages = collector.messages.lock().unwrap().clone();
    let first = messages.iter().find(|message| message["data"]["text"] == "hello over stdio");
    let first = first.expect("the message").clone();
    assert_eq!(first["level"], "info");
    assert_eq!(first["logger"], "fx/fixture", "the logger names the server: {first}");
    set_level(&client, "warning").await;
    log_and_wait(&client, &collector, "info", "quiet", false).await;
    log_and_wait(&client, &collector, "warning", "loud", true).await;
    let texts = collector.texts();
    assert!(
        texts.contains(&"loud".to_owned()) && !texts.contains(&"quiet".to_owned()),
        "{texts:?}"
    );
    client.cancel().await.unwrap();

    let server = setup.http_server(&["--stateful"]);
    let collector = LogCollector::default();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")),
    );
    let client = collector.clone().serve(transport).await.unwrap();
    log_and_wait(&client, &collector, "notice", "hello over a session", true).await;
    set_level(&client, "error").await;
    log_and_wait(&client, &collector, "warning", "below error", false).await;
    let texts = collector.texts();
    assert!(texts.contains(&"hello over a session".to_owned()), "{texts:?}");
    assert!(!texts.contains(&"below error".to_owned()), "{texts:?}");

    // With `http.health_details: names`, /healthz names each external server with its state.
    let health: Value = reqwest::get(server.url("/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(health["external"], json!([{"name": "fx", "state": "running"}]), "{health}");
    client.cancel().await.unwrap();
}

/// Two calls in flight on the fixture at once: `first`'s lasts 1.5 s, and `second`'s, made
/// 300 ms later, logs `step 1` (logger `fixture`) 300 ms after it starts.
async fn two_calls_in_flight(
    first: &RunningService<RoleClient, LogCollector>,
    second: &RunningService<RoleClient, LogCollector>,
) {
    let long = call(first, "fx_steps", json!({"steps": 1, "ms": 1500}), None);
    let logging = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        call(second, "fx_steps", json!({"steps": 1, "ms": 300, "log": true}), None).await
    };
    let (long, logging) = tokio::join!(long, logging);
    assert_eq!(text_of(&long.unwrap()), "1 steps");
    assert_eq!(text_of(&logging.unwrap()), "1 steps");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_message_of_no_one_call_reaches_only_the_sessions_that_may_see_its_server() {
    let database = TestDatabase::create().await;
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    let auth = format!(
        "auth:\n  api_keys:\n    - name: seer\n      sha256: {}\n      verbs: [read, create, update, delete]\n    - name: blind\n      sha256: {}\n      role: blind\n  roles:\n    blind:\n      verbs: [read, create, update, delete]\n      tools: [\"*\", \"!server:fx\"]\n",
        hash("seer-key"),
        hash("blind-key"),
    );
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml()).with_config(&auth);
    let server = setup.http_server(&["--stateful"]);
    let session = |key: &'static str| async {
        let collector = LogCollector::default();
        (server.client_with(collector.clone(), Some(key)).await, collector)
    };
    let (first, _) = session("seer-key").await;
    let (second, _) = session("seer-key").await;
    let (watching, watched) = session("seer-key").await;
    let (blind, blind_heard) = session("blind-key").await;
    let names = crate::support::tool_names(&blind).await;
    assert!(!names.iter().any(|name| name.starts_with("fx_")), "{names:?}");

    // Two calls in flight on the stdio server: its log message is neither's alone, so it goes
    // to every session that may read it.
    two_calls_in_flight(&first, &second).await;
    eventually("a session that may see fx hears it", Duration::from_secs(10), || async {
        watched.texts().contains(&"step 1".to_owned())
    })
    .await;
    // A session whose role hides the server hears nothing of it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(blind_heard.texts().is_empty(), "{:?}", blind_heard.texts());
    for client in [first, second, watching] {
        client.cancel().await.unwrap();
    }
    blind.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_log_message_on_a_calls_own_http_stream_reaches_that_caller_alone() {
    let database = TestDatabase::create().await;
    let (mut upstream, url) = crate::external::start_http_fixture_with(0, &[]);
    let setup = OrcaSetup::new(&database.url).with_external(&format!(
        "mcps:\n  fx:\n    url: {url}\n    protocol: 2026-07-28\n    timeout: 10s\n"
    ));
    let server = setup.http_server(&["--stateful"]);
    let session = || async {
        let collector = LogCollector::default();
        (server.client_with(collector.clone(), None).await, collector)
    };
    let (first, first_heard) = session().await;
    let (second, second_heard) = session().await;
    let (watching, watched) = session().await;

    // Two calls in flight on one server: the message came on the second call's own response
    // stream, so it is that call's, however many others are in flight.
    two_calls_in_flight(&first, &second).await;
    eventually("the caller hears its call's log message", Duration::from_secs(10), || async {
        second_heard.texts().contains(&"step 1".to_owned())
    })
    .await;
    let logger = second_heard.messages.lock().unwrap()[0]["logger"].clone();
    assert_eq!(logger, "fx/fixture");
    let meta = second_heard.messages.lock().unwrap()[0].get("_meta").cloned();
    assert!(meta.is_none(), "orca's mark stays with orca: {meta:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(first_heard.texts().is_empty(), "{:?}", first_heard.texts());
    assert!(watched.texts().is_empty(), "{:?}", watched.texts());
    for client in [first, second, watching] {
        client.cancel().await.unwrap();
    }
    upstream.kill().unwrap();
    let _ = upstream.wait();
}

async fn prompt_names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let listed = client.list_all_prompts().await.unwrap();
    listed.into_iter().map(|prompt| prompt.name.to_string()).collect()
}

#[tokio::test]
async fn completions_reach_only_the_servers_a_callers_role_may_use() {
    let database = TestDatabase::create().await;
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    let setup = OrcaSetup::new(&database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: seer\n      sha256: {}\n      verbs: [read]\n    - name: auditor\n      sha256: {}\n      role: auditor\n  roles:\n    auditor:\n      verbs: [read]\n      tools: [\"server:orca\"]\n",
            hash("orca_seer_key"),
            hash("orca_auditor_key")
        ))
        .with_external(&fixture_yaml());
    let server = setup.http_server(&[]);
    let seer = server.client(Some("orca_seer_key")).await;
    let auditor = server.client(Some("orca_auditor_key")).await;
    eventually("the fixture's prompts are listed", Duration::from_secs(20), || async {
        prompt_names(&seer).await.contains(&"fx_summarize".to_owned())
    })
    .await;
    assert!(!prompt_names(&auditor).await.contains(&"fx_summarize".to_owned()));

    // The seer sees the fixture, and its completions.
    let topics = seer.complete_prompt_argument("fx_summarize", "topic", "d", None).await.unwrap();
    assert_eq!(topics.values, ["databases", "dolphins"]);
    let template = "orca://fx/fixture://items/{id}";
    let ids = seer.complete_resource_argument(template, "id", "1", None).await.unwrap();
    assert_eq!(ids.values, ["1", "10"]);

    // The auditor, whose role shows it orca's own server only, gets nothing of the fixture's:
    // the same empty answer as for a name nobody owns.
    let topics =
        auditor.complete_prompt_argument("fx_summarize", "topic", "d", None).await.unwrap();
    assert!(topics.values.is_empty(), "{topics:?}");
    let ids = auditor.complete_resource_argument(template, "id", "1", None).await.unwrap();
    assert!(ids.values.is_empty(), "{ids:?}");
    seer.cancel().await.unwrap();
    auditor.cancel().await.unwrap();
}

#[tokio::test]
async fn servers_are_named_only_to_callers_that_may_use_them_and_counted_for_anyone() {
    let database = TestDatabase::create().await;
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    // `fx` runs; `signin` asks its users to sign in (and is never reached).
    let external = format!(
        "{}  signin:\n    url: http://127.0.0.1:9/mcp\n    timeout: 2s\n    oauth:\n      mode: per_user\n",
        fixture_yaml()
    );
    let setup = OrcaSetup::new(&database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: seer\n      sha256: {}\n      verbs: [read]\n    - name: auditor\n      sha256: {}\n      role: auditor\n  roles:\n    auditor:\n      verbs: [read]\n      tools: [\"server:orca\"]\n",
            hash("orca_seer_key"),
            hash("orca_auditor_key")
        ))
        .with_external(&external);
    let server = setup.http_server(&[]);
    let seer = server.client(Some("orca_seer_key")).await;
    eventually("the fixture's tools are listed", Duration::from_secs(20), || async {
        let tools = seer.list_all_tools().await.unwrap();
        tools.iter().any(|tool| tool.name == "fx_echo")
    })
    .await;
    let echoed = call(&seer, "fx_echo", json!({"text": "hello"}), None).await.unwrap();
    assert_ne!(echoed.is_error, Some(true), "{}", text_of(&echoed));

    // /healthz and /metrics answer anyone: they count servers by state and name none, nor the
    // tool called.
    let health: Value = reqwest::get(server.url("/healthz")).await.unwrap().json().await.unwrap();
    assert_eq!(health["details"], "counts", "{health}");
    assert_eq!(health["servers"], 3, "{health}");
    assert_eq!(health["server_status"], json!({"running": 3}), "{health}");
    assert_eq!(health["external"]["running"], 1, "{health}");
    let text = health.to_string();
    for name in ["fx", "signin", "postgres", "orca\""] {
        assert!(!text.contains(&format!("\"{name}")), "{name} in {health}");
    }
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("orca_tool_calls_total{status=\"success\"} 1"), "{metrics}");
    assert!(metrics.contains("orca_external_servers{state=\"running\"} 1"), "{metrics}");
    assert!(!metrics.contains("fx") && !metrics.contains("signin"), "{metrics}");

    // The instructions of a caller whose role shows it orca's own server name only that one.
    let auditor = server.client(Some("orca_auditor_key")).await;
    let instructions = |client: &RunningService<RoleClient, ()>| {
        client.peer_info().unwrap().instructions.clone().unwrap_or_default()
    };
    let told = instructions(&auditor);
    assert!(told.contains("Servers behind it: orca."), "{told}");
    for name in ["fx", "signin", "postgres", "execute_sql"] {
        assert!(!told.contains(name), "{name} in {told}");
    }
    let told = instructions(&seer);
    assert!(told.contains("Servers behind it: orca, postgres, data, fx, signin."), "{told}");

    // The console's list of upstreams to sign in to: only those the caller may use.
    let upstreams = |key: &'static str| {
        let url = server.url("/console/api/upstreams");
        async move {
            let answer: Value = reqwest::Client::new()
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            answer["upstreams"].clone()
        }
    };
    assert_eq!(upstreams("orca_auditor_key").await, json!([]));
    assert_eq!(upstreams("orca_seer_key").await[0]["name"], "signin");
    seer.cancel().await.unwrap();
    auditor.cancel().await.unwrap();
}

#[tokio::test]
async fn completions_of_external_prompts_and_resource_templates_come_from_their_server() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml());
    let client = setup.stdio_client().await;
    assert!(client.peer_info().unwrap().capabilities.completions.is_some());

    let topics = client.complete_prompt_argument("fx_summarize", "topic", "d", None).await.unwrap();
    assert_eq!(topics.values, ["databases", "dolphins"]);
    let ids = client
        .complete_resource_argument("orca://fx/fixture://items/{id}", "id", "1", None)
        .await
        .unwrap();
    assert_eq!(ids.values, ["1", "10"]);

    // orca's own prompts offer no completions; neither does a name nobody owns.
    for prompt in ["ask_for_disambiguation", "no_such_prompt"] {
        let none = client.complete_prompt_argument(prompt, "question", "x", None).await.unwrap();
        assert!(none.values.is_empty(), "{prompt}: {none:?}");
    }

    // The upstream's refusal comes back as invalid params, in orca's words.
    let refused = client.complete_prompt_argument("fx_summarize", "tone", "x", None).await;
    let refused = refused.unwrap_err().to_string();
    assert!(refused.contains("-32602") || refused.contains("nothing to complete"), "{refused}");

    // Hostile sizes are refused before any server sees them.
    let huge = "x".repeat(5000);
    let error =
        client.complete_prompt_argument("fx_summarize", "topic", &huge, None).await.unwrap_err();
    assert!(error.to_string().contains("argument.value must be at most 4096 bytes"), "{error}");
    client.cancel().await.unwrap();
}
