//! MCP Apps (SEP-1865) through orca, with rmcp's client over `--stateful` HTTP: the results app
//! (`ui://orca/results`) and its links on tools for a client that declares the extension,
//! nothing new for one that does not, and an upstream's app passed through under its prefix
//! for the role that may use that server only. Over stateless HTTP a 2025-11-25 client that
//! declared the extension in its `initialize` gets the same through the signed `Mcp-Session-Id`
//! it sends back, and a forged one gives nothing. The apps in a real browser, with the
//! extension's own host side, are `apps_browser.rs`.

use std::path::{Path, PathBuf};

use rmcp::model::{ClientCapabilities, ClientConfig, ReadResourceRequestParams, ResourceContents};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::orca::HttpServer;
use crate::support::{OrcaSetup, samples};

pub(crate) const ANALYST_KEY: &str = "orca_apps_analyst_key_5a10";
pub(crate) const OUTSIDER_KEY: &str = "orca_apps_outsider_key_c2e4";
pub(crate) const MIME: &str = "text/html;profile=mcp-app";

/// The test upstream, built next to orca.
pub(crate) fn fixture() -> PathBuf {
    Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream")
}

/// orca over `--stateful` HTTP on `database`, with the fixture's app as server `fx` (prefix
/// `fx`): `analyst` may use every server, `outsider` every one but `fx`.
pub(crate) fn orca_with_apps(database_url: &str) -> HttpServer {
    orca_with_apps_over(database_url, &["--stateful"])
}

/// `orca_with_apps` with `args` for the HTTP server (none: stateless).
fn orca_with_apps_over(database_url: &str, args: &[&str]) -> HttpServer {
    apps_setup(database_url).http_server(args)
}

/// The setup of `orca_with_apps`.
fn apps_setup(database_url: &str) -> OrcaSetup {
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    let config = format!(
        "auth:\n  api_keys:\n    - name: analyst\n      sha256: {}\n      role: analyst\n    - name: outsider\n      sha256: {}\n      role: outsider\n  roles:\n    analyst:\n      verbs: [read]\n      tools: [\"*\"]\n    outsider:\n      verbs: [read]\n      tools: [\"*\", \"!server:fx\"]\n",
        hash(ANALYST_KEY),
        hash(OUTSIDER_KEY)
    );
    let external = format!(
        "mcps:\n  fx:\n    name: Fixture\n    command: {}\n    timeout: 5s\n    pin: off\n    env:\n      FIXTURE_APP: \"1\"\n",
        fixture().display()
    );
    OrcaSetup::new(database_url).with_config(&config).with_external(&external)
}

/// The capabilities of a client that renders MCP Apps.
fn apps_capabilities() -> ClientCapabilities {
    serde_json::from_value(json!({
        "extensions": { "io.modelcontextprotocol/ui": { "mimeTypes": [MIME] } }
    }))
    .unwrap()
}

async fn client(
    server: &HttpServer,
    key: &str,
    apps: bool,
) -> RunningService<RoleClient, ClientConfig> {
    let capabilities = if apps { apps_capabilities() } else { ClientCapabilities::default() };
    let info = ClientConfig::new(capabilities, rmcp::model::Implementation::new("apps-test", "1"));
    client_of(server, key, info).await
}

async fn client_of(
    server: &HttpServer,
    key: &str,
    info: ClientConfig,
) -> RunningService<RoleClient, ClientConfig> {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(server.url("/mcp")).auth_header(key);
    rmcp::ServiceExt::serve(info, StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize")
}

async fn tools(client: &RunningService<RoleClient, ClientConfig>) -> Vec<Value> {
    let tools = client.list_all_tools().await.unwrap();
    tools.into_iter().map(|tool| serde_json::to_value(tool).unwrap()).collect()
}

fn tool<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools.iter().find(|tool| tool["name"] == name).unwrap_or_else(|| panic!("{name} not listed"))
}

async fn resource_uris(client: &RunningService<RoleClient, ClientConfig>) -> Vec<String> {
    let resources = client.list_all_resources().await.unwrap();
    resources.into_iter().map(|resource| resource.uri.clone()).collect()
}

async fn read(
    client: &RunningService<RoleClient, ClientConfig>,
    uri: &str,
) -> Result<(String, Value), rmcp::ServiceError> {
    let result = client.read_resource(ReadResourceRequestParams::new(uri)).await?;
    let content = serde_json::to_value(&result.contents[0]).unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &result.contents[0] else {
        panic!("not text: {content}")
    };
    Ok((text.clone(), content))
}

const LINKED: [&str; 5] =
    ["execute_sql", "format_results", "query_sql", "query_plan", "sample_table"];

#[tokio::test(flavor = "multi_thread")]
async fn a_client_with_the_apps_extension_gets_the_results_app_and_the_links_to_it() {
    let database = samples::chinook().await;
    let server = orca_with_apps(&database.url);
    let client = client(&server, ANALYST_KEY, true).await;
    let info = client.peer_info().unwrap();
    let extensions = serde_json::to_value(&info.capabilities).unwrap()["extensions"].clone();
    assert!(extensions.get("io.modelcontextprotocol/ui").is_some(), "{extensions}");

    let tools = tools(&client).await;
    for name in LINKED {
        let meta = &tool(&tools, name)["_meta"];
        assert_eq!(meta["ui"]["resourceUri"], "ui://orca/results", "{name}: {meta}");
        assert_eq!(meta["ui/resourceUri"], "ui://orca/results", "{name}: {meta}");
    }
    for name in ["generate_sql", "submit_feedback", "list_servers"] {
        assert!(
            tool(&tools, name).get("_meta").is_none_or(|meta| meta.get("ui").is_none()),
            "{name}"
        );
    }
    // The upstream's tool points at its resource under the server's prefix.
    assert_eq!(
        tool(&tools, "fx_show_app")["_meta"]["ui"]["resourceUri"],
        "ui://fx/fixture/app.html"
    );

    let uris = resource_uris(&client).await;
    assert!(uris.contains(&"ui://orca/results".to_owned()), "{uris:?}");
    assert!(uris.contains(&"ui://fx/fixture/app.html".to_owned()), "{uris:?}");
    let listed = client.list_all_resources().await.unwrap();
    let app = listed.iter().find(|resource| resource.uri == "ui://orca/results").unwrap();
    assert_eq!(app.mime_type.as_deref(), Some(MIME));

    let (html, content) = read(&client, "ui://orca/results").await.unwrap();
    assert_eq!(content["mimeType"], MIME);
    assert!(html.starts_with("<!doctype html>") && html.contains("ui/initialize"), "{html:.200}");
    let csp = &content["_meta"]["ui"]["csp"];
    for directive in ["connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"] {
        assert_eq!(csp[directive], json!([]), "{content}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_without_the_extension_sees_no_app_no_link_and_cannot_read_it() {
    let database = samples::chinook().await;
    let server = orca_with_apps(&database.url);
    let client = client(&server, ANALYST_KEY, false).await;
    let info = client.peer_info().unwrap();
    let capabilities = serde_json::to_value(&info.capabilities).unwrap();
    assert!(
        capabilities["extensions"].get("io.modelcontextprotocol/ui").is_none(),
        "{capabilities}"
    );
    let tools = tools(&client).await;
    for name in LINKED {
        assert!(tool(&tools, name).get("_meta").is_none(), "{name}: {}", tool(&tools, name));
    }
    let uris = resource_uris(&client).await;
    assert!(!uris.contains(&"ui://orca/results".to_owned()), "{uris:?}");
    assert!(read(&client, "ui://orca/results").await.is_err());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_app_is_passed_on_unchanged_to_a_role_that_may_use_its_server_only() {
    let database = samples::chinook().await;
    let server = orca_with_apps(&database.url);
    let analyst = client(&server, ANALYST_KEY, true).await;
    let (html, content) = read(&analyst, "ui://fx/fixture/app.html").await.unwrap();
    assert!(html.contains("fixture app waiting"), "{html}");
    assert_eq!(content["uri"], "ui://fx/fixture/app.html");
    assert_eq!(content["mimeType"], MIME);
    assert_eq!(
        content["_meta"]["ui"],
        json!({"csp": {"connectDomains": ["https://api.fixture.example"]}, "permissions": {"clipboardWrite": {}}})
    );
    let listed = analyst.list_all_resources().await.unwrap();
    let app = listed.iter().find(|resource| resource.uri == "ui://fx/fixture/app.html").unwrap();
    assert_eq!(
        serde_json::to_value(app).unwrap()["_meta"]["ui"]["csp"]["connectDomains"],
        json!(["https://api.fixture.example"])
    );

    let outsider = client(&server, OUTSIDER_KEY, true).await;
    let uris = resource_uris(&outsider).await;
    assert!(!uris.iter().any(|uri| uri.starts_with("ui://fx/")), "{uris:?}");
    assert!(uris.contains(&"ui://orca/results".to_owned()), "{uris:?}");
    assert!(!tools(&outsider).await.iter().any(|tool| tool["name"] == "fx_show_app"));
    assert!(read(&outsider, "ui://fx/fixture/app.html").await.is_err());
    analyst.cancel().await.unwrap();
    outsider.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_2025_client_that_declared_the_extension_gets_the_links_through_its_session_id()
{
    let database = samples::chinook().await;
    let server = orca_with_apps_over(&database.url, &[]);
    let info =
        ClientConfig::new(apps_capabilities(), rmcp::model::Implementation::new("apps-test", "1"))
            .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25);
    let client = client_of(&server, ANALYST_KEY, info).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.protocol_version, rmcp::model::ProtocolVersion::V_2025_11_25);
    let listed = tools(&client).await;
    for name in LINKED {
        let meta = &tool(&listed, name)["_meta"];
        assert_eq!(meta["ui"]["resourceUri"], "ui://orca/results", "{name}: {meta}");
    }
    let uris = resource_uris(&client).await;
    assert!(uris.contains(&"ui://orca/results".to_owned()), "{uris:?}");
    let (html, _) = read(&client, "ui://orca/results").await.unwrap();
    assert!(html.starts_with("<!doctype html>"), "{html:.200}");
    // A call goes on as before, and closing the client (its DELETE) is no error.
    let result = crate::support::call(&client, "list_servers", json!({}), None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    client.cancel().await.unwrap();

    // A client that did not declare it gets nothing new.
    let plain = ClientConfig::new(
        ClientCapabilities::default(),
        rmcp::model::Implementation::new("apps-test", "1"),
    )
    .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25);
    let client = client_of(&server, ANALYST_KEY, plain).await;
    let listed = tools(&client).await;
    let execute_sql = tool(&listed, "execute_sql");
    assert!(execute_sql.get("_meta").is_none(), "{execute_sql}");
    client.cancel().await.unwrap();
}

/// A raw JSON-RPC POST to `/mcp` as the analyst, with `session` as `Mcp-Session-Id`.
async fn post(server: &HttpServer, session: Option<&str>, body: Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(server.url("/mcp"))
        .bearer_auth(ANALYST_KEY)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

/// Whether `tools/list` with `session` links `execute_sql` to the results app.
async fn linked_with(server: &HttpServer, session: Option<&str>) -> bool {
    let response =
        post(server, session, json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let tools = body["result"]["tools"].as_array().unwrap_or_else(|| panic!("{body}"));
    let meta = &tool(tools, "execute_sql")["_meta"];
    meta["ui"]["resourceUri"] == "ui://orca/results"
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_or_tampered_session_id_gives_no_capabilities_and_no_error() {
    let database = samples::chinook().await;
    let server = orca_with_apps_over(&database.url, &[]);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let response = post(&server, None, initialize).await;
    assert_eq!(response.status(), 200);
    let token = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(token.starts_with("orca_cs1."), "{token}");
    assert!(linked_with(&server, Some(&token)).await, "the token carries the extension");
    assert!(!linked_with(&server, None).await, "no token, no capabilities");

    // The payload with a byte changed, the signature of another, something else altogether.
    let (payload, signature) = token.rsplit_once('.').unwrap();
    let flipped = |text: &str, at: usize| {
        let mut bytes = text.as_bytes().to_vec();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    };
    let other = post(
        &server,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}}),
    )
    .await;
    let other = other.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let (_, other_signature) = other.rsplit_once('.').unwrap();
    for forged in [
        format!("{}.{signature}", flipped(payload, payload.len() - 2)),
        format!("{payload}.{}", flipped(signature, 3)),
        format!("{payload}.{other_signature}"),
        "a-session-of-another-server".to_owned(),
    ] {
        assert!(!linked_with(&server, Some(&forged)).await, "{forged}");
    }
    // Sent back on the other methods, as clients do: rmcp's stateless answer, not a refusal.
    let client = reqwest::Client::new();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = client
            .request(method.clone(), server.url("/mcp"))
            .bearer_auth(ANALYST_KEY)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method}");
    }
    assert!(!server.log_text().contains(payload), "a token is never written to the log");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_id_one_replica_issued_holds_on_another_that_shares_the_secret_only() {
    const SECRET: &str = "the secret these replicas share, 32+ bytes";
    let database = samples::chinook().await;
    let first = apps_setup(&database.url).with_env("ORCA_SECRET", SECRET).http_server(&[]);
    let second = apps_setup(&database.url).with_env("ORCA_SECRET", SECRET).http_server(&[]);
    let other = apps_setup(&database.url)
        .with_env("ORCA_SECRET", "another secret, of another orca, 32+ bytes")
        .http_server(&[]);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let response = post(&first, None, initialize).await;
    let token = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(linked_with(&second, Some(&token)).await, "nothing is kept: the secret verifies it");
    assert!(!linked_with(&other, Some(&token)).await, "another secret: served without it");
}

/// The browser's side, installed once per target directory: playwright-core (driving Debian's
/// Chromium), the extension's package and the MCP client for the test host, and esbuild to
/// bundle the host for the page.
fn apps_host() -> PathBuf {
    let root = Path::new(crate::support::orca::BINARY).parent().unwrap().join("apps-host");
    std::fs::create_dir_all(&root).unwrap();
    let lock = std::fs::File::create(root.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    let packages = [
        "playwright-core@1",
        "@modelcontextprotocol/ext-apps@2",
        "@modelcontextprotocol/client@2",
        "esbuild@0",
    ];
    if !root.join("node_modules/esbuild/package.json").is_file()
        || !root.join("node_modules/@modelcontextprotocol/ext-apps/package.json").is_file()
    {
        let output = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .args(packages)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .output()
            .expect("the apps' browser tests need Node.js and npm");
        assert!(
            output.status.success(),
            "npm install: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps");
    for file in ["host.js", "index.html"] {
        std::fs::copy(sources.join(file), root.join(file)).unwrap();
    }
    let output = std::process::Command::new(root.join("node_modules/.bin/esbuild"))
        .current_dir(&root)
        .args([
            "host.js",
            "--bundle",
            "--format=esm",
            "--platform=browser",
            "--outfile=host.bundle.js",
        ])
        .output()
        .expect("esbuild");
    assert!(output.status.success(), "esbuild: {}", String::from_utf8_lossy(&output.stderr));
    root
}

fn chromium() -> PathBuf {
    std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            ["/usr/bin/chromium", "/usr/lib/chromium/chromium", "/usr/bin/chromium-browser"]
                .iter()
                .map(PathBuf::from)
                .find(|path| path.is_file())
        })
        .expect(
            "the apps' browser tests need Chromium (apt-get install -y chromium), or CHROMIUM set",
        )
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_browser_the_apps_render_page_chart_and_rate_through_orca_with_the_extensions_host() {
    let database = samples::chinook().await;
    let server = orca_with_apps(&database.url);
    let root = apps_host();
    let screenshot = root.join("results-app.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps/apps.mjs");
    let output = std::process::Command::new("node")
        .arg(&script)
        .env("ORCA_BASE", &server.base)
        .env("PLAYWRIGHT_DIR", root.join("node_modules/playwright-core"))
        .env("CHROMIUM", chromium())
        .env("HOST_DIR", &root)
        .env("ANALYST_KEY", ANALYST_KEY)
        .env("OUTSIDER_KEY", OUTSIDER_KEY)
        .env("SCREENSHOT", &screenshot)
        .output()
        .expect("cannot run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("apps checks passed"),
        "the browser checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(screenshot.is_file());

    // The rating is in orca's tables, and the app's calls are recorded as the app's.
    let pool = database.connect().await;
    // Tracking writes in the background: wait for the three calls' rows.
    for _ in 0..100 {
        let (count,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM orca.mcp_executions WHERE tool_name IN ('query_sql', 'submit_feedback')",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if count >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let rated: Vec<(String, String)> = sqlx::query_as(
        "SELECT e.tool_name, f.rating FROM orca.mcp_feedback f \
           JOIN orca.mcp_executions e ON e.id = f.execution_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rated, vec![("query_sql".to_owned(), "up".to_owned())]);
    let agents: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT tool_name, agent_id FROM orca.mcp_executions \
          WHERE tool_name IN ('query_sql', 'submit_feedback') ORDER BY created_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let app = Some("app:ui://orca/results".to_owned());
    assert_eq!(
        agents,
        vec![
            ("query_sql".to_owned(), None),
            ("query_sql".to_owned(), app.clone()),
            ("submit_feedback".to_owned(), app),
        ]
    );
}
