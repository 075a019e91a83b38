//! The web console: its files and JSON endpoints over HTTP, the Origin rule that lets the page
//! talk to `/mcp`, and the console itself in a real browser (Debian's Chromium, headless, driven
//! by playwright-core from npm through `tests/console/console.mjs`) against the real binary.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::fake_llm::{FakeLlm, Reply, Wire};
use crate::support::orca::BINARY;
use crate::support::{OrcaSetup, TestDatabase, samples};

const READER_KEY: &str = "orca_console_reader_key_4f1c";
const WRITER_KEY: &str = "orca_console_writer_key_7d03";
const ADMIN_KEY: &str = "orca_console_admin_key_9b27";

fn keyed_config(extra: &str) -> String {
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    format!(
        "auth:\n  api_keys:\n    - name: reader\n      sha256: {}\n      verbs: [read]\n    - name: writer\n      sha256: {}\n      verbs: [read, delete]\n    - name: admin\n      sha256: {}\n      verbs: [read, create, update, delete]\n{extra}",
        hash(READER_KEY),
        hash(WRITER_KEY),
        hash(ADMIN_KEY)
    )
}

/// Where the browser tests find Chromium and playwright-core; a clear failure when they cannot.
struct Browser {
    chromium: PathBuf,
    playwright: PathBuf,
}

fn browser() -> Browser {
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
                .iter()
                .map(PathBuf::from)
                .find(|path| path.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "the console's browser tests need Chromium: install it with `apt-get install -y chromium` \
                 (./scripts/test does so when run as root), or set CHROMIUM to its path"
            )
        });
    // playwright-core, installed once per target directory (no browser download: it drives
    // the Chromium above).
    let root = Path::new(BINARY).parent().unwrap().join("console-playwright");
    let package = root.join("node_modules/playwright-core/package.json");
    std::fs::create_dir_all(&root).unwrap();
    let lock = std::fs::File::create(root.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    if !package.is_file() {
        let output = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .arg("playwright-core@1")
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .output()
            .unwrap_or_else(|error| {
                panic!("the console's browser tests need Node.js and npm (apt-get install -y nodejs npm): {error}")
            });
        assert!(
            output.status.success(),
            "npm install playwright-core failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Browser { chromium, playwright: root.join("node_modules/playwright-core") }
}

/// Run one scenario of `tests/console/console.mjs` against `base`; fails the test with the
/// script's output when a check fails.
pub(crate) fn run_scenario(scenario: &str, base: &str, env: &[(&str, &str)]) -> String {
    let browser = browser();
    let screenshots = Path::new(BINARY).parent().unwrap().join("console-screenshots");
    std::fs::create_dir_all(&screenshots).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console/console.mjs");
    let output = Command::new("node")
        .arg(&script)
        .env("ORCA_BASE", base)
        .env("SCENARIO", scenario)
        .env("PLAYWRIGHT_DIR", &browser.playwright)
        .env("CHROMIUM", &browser.chromium)
        .env("SCREENSHOTS", &screenshots)
        .envs(env.iter().copied())
        .output()
        .expect("cannot run node");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "the browser checks of `{scenario}` failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("console checks passed"), "{stdout}");
    stdout
}

fn sql_reply(sql: &str) -> Reply {
    Reply::Text(format!("```sql\n{sql}\n```"))
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_browser_the_console_runs_tools_pages_rates_downloads_and_recovers_from_failures() {
    let database = samples::chinook().await;
    let fake = FakeLlm::start().await;
    // generate_sql never gets it right: three runs of three answers naming a column that does
    // not exist, each ending in the manual fallback.
    fake.script(
        Wire::Anthropic,
        (0..9).map(|_| sql_reply("SELECT artist.title_of_album FROM artist")),
    );
    // An external server whose credentials are missing: listed, disabled, with a long status.
    let external = "mcps:\n  github:\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-github\"]\n    env:\n      GITHUB_PERSONAL_ACCESS_TOKEN: \"${ORCA_CONSOLE_UNSET_GITHUB_API_KEY}\"\n    credentials:\n      api_key_env: ORCA_CONSOLE_UNSET_GITHUB_API_KEY\n      org_env: ORCA_CONSOLE_UNSET_GITHUB_ORG\n";
    let setup = OrcaSetup::new(&database.url).with_fake_llm(&fake).with_external(external);
    let server = setup.http_server(&[]);
    run_scenario("open", &server.base, &[]);

    let pool = database.connect().await;
    let rated: Vec<(String, String, Option<i32>, String)> = sqlx::query_as(
        "SELECT e.tool_name, f.rating, f.rating_score, f.comment FROM orca.mcp_feedback f \
           JOIN orca.mcp_executions e ON e.id = f.execution_id ORDER BY f.created_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        rated,
        vec![
            (
                "query_sql".to_owned(),
                "up".to_owned(),
                Some(4),
                "browser: the artists, nicely paged".to_owned()
            ),
            (
                "generate_sql".to_owned(),
                "down".to_owned(),
                Some(1),
                "browser: it kept guessing column names".to_owned()
            ),
        ]
    );
    let codes: Vec<Option<String>> = sqlx::query_scalar(
        "SELECT error_code FROM orca.mcp_executions WHERE tool_name = 'generate_sql'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(codes, vec![Some("EXCEEDED_RETRIES".to_owned()); 3]);
    // The confirmed write of the manual fallback ran once, with its token.
    let writes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orca.mcp_executions WHERE tool_name = 'execute_sql' \
            AND status = 'success' AND request_data->>'dry_run' = 'false' \
            AND request_data->>'sql' LIKE 'UPDATE artist%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(writes, 1);
    let redeemed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orca.confirmation_tokens WHERE redeemed_at IS NOT NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(redeemed, 1);
    assert_eq!(fake.requests().len(), 9, "three runs of three attempts reached the model");
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_browser_the_console_asks_for_a_key_and_a_person_approves_a_waiting_write() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url)
        .with_config(&keyed_config("sql:\n  write_confirmation: human\n"));
    let server = setup.http_server(&[]);
    run_scenario(
        "keys",
        &server.base,
        &[("READER_KEY", READER_KEY), ("WRITER_KEY", WRITER_KEY), ("ADMIN_KEY", ADMIN_KEY)],
    );

    let pool = database.connect().await;
    let (principal, approved_by): (String, Option<String>) = sqlx::query_as(
        "SELECT principal, approved_by FROM orca.confirmation_tokens WHERE approval_required",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((principal.as_str(), approved_by.as_deref()), ("writer", Some("admin")));
    let log = server.log_text();
    for key in [READER_KEY, WRITER_KEY, ADMIN_KEY] {
        assert!(!log.contains(key), "a key reached the log");
    }
    pool.close().await;
}

async fn get(url: &str, key: Option<&str>, origin: Option<&str>) -> (u16, Value, String) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = format!("{:?}", response.headers());
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), headers)
}

async fn post_mcp(base: &str, origin: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("origin", origin)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "list_servers", "arguments": {}}}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn the_gateway_accepts_its_own_and_loopback_origins_and_refuses_foreign_ones() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&["--servers", "orca"]);
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    assert_eq!(post_mcp(&server.base, &server.base).await, 200);
    // Bound to loopback, pages on this machine (any loopback origin) may call it too.
    for local in [
        format!("http://127.0.0.1:{}", port.parse::<u16>().unwrap().wrapping_add(1)),
        format!("http://localhost:{port}"),
    ] {
        assert_eq!(post_mcp(&server.base, &local).await, 200, "{local}");
    }
    for foreign in ["http://evil.example", "http://localhost.evil.example", "null"] {
        assert_eq!(post_mcp(&server.base, foreign).await, 403, "{foreign}");
    }
}

#[tokio::test]
async fn the_console_is_served_whole_and_its_endpoints_need_the_same_key_as_mcp() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_config(&keyed_config(""));
    let server = setup.http_server(&["--servers", "orca"]);
    let (status, page, headers) = get(&server.url("/"), None, None).await;
    assert_eq!(status, 200);
    let page = page.as_str().unwrap().to_owned();
    assert!(page.contains("<title>orca console</title>"));
    assert!(headers.contains("default-src 'none'"), "{headers}");
    // Every file the page names is served, and nothing is loaded from elsewhere.
    for path in [
        "/console/app.js",
        "/console/mcp.js",
        "/console/signin.js",
        "/console/upstreams.js",
        "/console/form.js",
        "/console/results.js",
        "/console/style.css",
        "/console/favicon.svg",
        "/favicon.ico",
    ] {
        let (status, body, _) = get(&server.url(path), None, None).await;
        assert_eq!(status, 200, "{path}");
        // The SVG namespace is a name, not an address the browser loads.
        let body = body.as_str().unwrap_or_default().replace("http://www.w3.org/2000/svg", "");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} names another origin"
        );
    }
    assert_eq!(get(&server.url("/console/nope.js"), None, None).await.0, 404);

    let (status, session, _) = get(&server.url("/console/api/session"), None, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        session,
        json!({"api_key_required": true, "authenticated": false, "key_refused": false})
    );
    let (_, session, _) = get(&server.url("/console/api/session"), Some("wrong"), None).await;
    assert_eq!(session["key_refused"], true);
    let (_, session, _) = get(&server.url("/console/api/session"), Some(READER_KEY), None).await;
    assert_eq!(
        session,
        json!({"api_key_required": true, "authenticated": true, "principal": "reader", "verbs": ["read"]})
    );

    for path in ["/console/api/executions", "/console/api/approvals"] {
        let (status, body, _) = get(&server.url(path), None, None).await;
        assert_eq!(status, 401, "{path}: {body}");
        assert_eq!(body["error"]["code"], "UNAUTHORIZED");
        assert_eq!(get(&server.url(path), Some("wrong"), None).await.0, 401);
        assert_eq!(get(&server.url(path), Some(READER_KEY), None).await.0, 200);
    }
    // Each key sees its own calls only.
    let client = server.client(Some(READER_KEY)).await;
    crate::support::call(&client, "list_servers", json!({}), None).await.unwrap();
    client.cancel().await.unwrap();
    let executions = |key: &'static str| {
        let url = server.url("/console/api/executions?limit=10");
        async move {
            let (_, body, _) = get(&url, Some(key), None).await;
            body["executions"].as_array().cloned().unwrap_or_default()
        }
    };
    crate::support::eventually(
        "the reader's call is recorded",
        std::time::Duration::from_secs(20),
        || async { executions(READER_KEY).await.len() == 1 },
    )
    .await;
    let row = &executions(READER_KEY).await[0];
    assert_eq!(row["tool"], "list_servers");
    assert_eq!(row["status"], "success");
    assert!(row.get("request_data").is_none() && row.get("response_data").is_none(), "{row}");
    assert_eq!(
        (&row["principal"], &row["client_id"], &row["role"]),
        (&json!("reader"), &Value::Null, &Value::Null),
        "who made the call: the key's name, and no OAuth client or role"
    );
    assert!(executions(ADMIN_KEY).await.is_empty());
    for bad in ["limit=0", "limit=201", "limit=x", "other=1"] {
        let url = server.url(&format!("/console/api/executions?{bad}"));
        let (status, body, _) = get(&url, Some(READER_KEY), None).await;
        assert_eq!(status, 422, "{bad}");
        assert_eq!(body["error"]["code"], "INVALID_INPUT");
    }
}
