//! orca as an OAuth 2.1 resource server, against a real OpenID provider: `oidc-provider` from
//! npm (`tests/oauth/provider.mjs`), started, stopped and restarted with a new key by these
//! tests. Tokens come from its token endpoint (client credentials with a resource indicator);
//! none is written by hand here (the refused forms that a provider will not mint, such as
//! `alg: none` or a tampered payload, are unit tests of `gateway::oauth`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::orca::{BINARY, HttpServer};
use crate::support::{OrcaSetup, TestDatabase, call, holds_jwt, meta_of, samples};

const RESOURCE: &str = "https://orca.test/mcp";
const API_KEY: &str = "orca_test_key_next_to_oauth";

/// oidc-provider and the MCP TypeScript SDK, installed once per target directory.
fn provider_dir() -> PathBuf {
    let root = Path::new(BINARY).parent().unwrap().join("oauth-provider");
    let packages = ["oidc-provider", "@modelcontextprotocol/sdk"]
        .map(|name| root.join("node_modules").join(name).join("package.json"));
    std::fs::create_dir_all(&root).unwrap();
    let lock = std::fs::File::create(root.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    if !packages.iter().all(|package| package.is_file()) {
        let output = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .args(["oidc-provider@9", "@modelcontextprotocol/sdk@1"])
            .output()
            .unwrap_or_else(|error| {
                panic!(
                    "the OAuth tests need Node.js and npm (apt-get install -y nodejs npm): {error}"
                )
            });
        assert!(
            output.status.success(),
            "npm install oidc-provider @modelcontextprotocol/sdk failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    root
}

/// A running provider on a fixed port, so that a restart keeps its issuer.
pub(crate) struct Provider {
    port: u16,
    child: Option<Child>,
    /// The console's redirect URI, for a provider with the console's client and its login and
    /// consent pages.
    console: Option<String>,
}

impl Provider {
    pub(crate) fn start(kid: &str, alg: &str, ttl: u64) -> Provider {
        Provider::start_with(kid, alg, ttl, None)
    }

    /// A provider with the public client `orca-console` redirecting to `console`, and its
    /// development login and consent pages.
    pub(crate) fn start_for_console(console: &str) -> Provider {
        Provider::start_with("key-1", "RS256", 300, Some(console.to_owned()))
    }

    pub(crate) fn start_with(kid: &str, alg: &str, ttl: u64, console: Option<String>) -> Provider {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut provider = Provider { port, child: None, console };
        provider.restart(kid, alg, ttl);
        provider
    }

    pub(crate) fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stop it (if running) and start it again with a fresh key `kid`.
    pub(crate) fn restart(&mut self, kid: &str, alg: &str, ttl: u64) {
        self.stop();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth/provider.mjs");
        let mut command = Command::new("node");
        if let Some(console) = &self.console {
            command.env("CONSOLE_REDIRECT_URI", console).env("DEV_INTERACTIONS", "1");
        }
        let child = command
            .arg(&script)
            .env("PROVIDER_DIR", provider_dir())
            .env("PORT", self.port.to_string())
            .env("KID", kid)
            .env("ALG", alg)
            .env("TTL", ttl.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run node");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("{}/.well-known/openid-configuration", self.issuer());
        while !answers_ok(&url) {
            assert!(Instant::now() < deadline, "the provider did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// An access token for `client`, with `scope`, for `resource`.
    pub(crate) async fn token(&self, client: &str, scope: &str, resource: &str) -> String {
        let response = reqwest::Client::new()
            .post(format!("{}/token", self.issuer()))
            .basic_auth(client, Some(format!("{client}-secret")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[
                ("grant_type", "client_credentials"),
                ("scope", scope),
                ("resource", resource),
            ]))
            .send()
            .await
            .unwrap();
        let body: Value = response.json().await.unwrap();
        body["access_token"].as_str().unwrap_or_else(|| panic!("no token: {body}")).to_owned()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `application/x-www-form-urlencoded` of `fields`.
fn form(fields: &[(&str, &str)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|byte| match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(byte).to_string()
                }
                b' ' => "+".to_owned(),
                other => format!("%{other:02X}"),
            })
            .collect()
    };
    fields
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Whether a GET of `url` (plain HTTP on loopback) answers 200.
fn answers_ok(url: &str) -> bool {
    use std::io::{Read, Write};
    let Some((authority, path)) = url.strip_prefix("http://").and_then(|rest| rest.split_once('/'))
    else {
        return false;
    };
    let Ok(mut stream) = std::net::TcpStream::connect(authority) else { return false };
    let request = format!("GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

fn setup(database: &TestDatabase, issuer: &str) -> OrcaSetup {
    setup_with_roles(
        database,
        issuer,
        "    analyst:\n      verbs: [read]\n    admin:\n      verbs: [read, create, update, delete]\n",
        "verbs: [read]",
    )
}

/// orca accepting tokens from `issuer`, with `roles` (YAML under `auth.roles`) and an API key
/// whose entry ends with `key` (its verbs or its role).
fn setup_with_roles(database: &TestDatabase, issuer: &str, roles: &str, key: &str) -> OrcaSetup {
    setup_for(database, issuer, RESOURCE, roles, key)
}

/// [`setup_with_roles`] for orca's canonical URL `resource`.
pub(crate) fn setup_for(
    database: &TestDatabase,
    issuer: &str,
    resource: &str,
    roles: &str,
    key: &str,
) -> OrcaSetup {
    let hash = hex::encode(Sha256::digest(API_KEY.as_bytes()));
    OrcaSetup::new(&database.url).with_config(&format!(
        "auth:\n  api_keys:\n    - name: ops\n      sha256: {hash}\n      {key}\n  oauth:\n    issuer: {issuer}\n    resource: {resource}\n    scopes_supported: [orca.read, orca.write]\n    required_scopes: [orca.read]\n    roles_claim: groups\n    leeway_seconds: 0\n    jwks_min_refresh_seconds: 0\n  roles:\n{roles}"
    ))
}

/// `POST /mcp` of `tools/list` with `token`: the status, the `WWW-Authenticate` header and the
/// body.
async fn list_tools_raw(server: &HttpServer, token: Option<&str>) -> (u16, String, Value) {
    let mut request = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, challenge, response.json().await.unwrap_or(Value::Null))
}

async fn tool_names(server: &HttpServer, token: &str) -> Vec<String> {
    let client = server.client(Some(token)).await;
    let names =
        client.list_all_tools().await.unwrap().iter().map(|tool| tool.name.to_string()).collect();
    client.cancel().await.unwrap();
    names
}

async fn executions(database: &TestDatabase) -> i64 {
    let pool = database.connect().await;
    sqlx::query_scalar(
        "SELECT count(*) FROM orca.mcp_executions WHERE principal <> 'unauthenticated'",
    )
    .fetch_one(&pool)
    .await
    .unwrap()
}

/// Who made a call, as its execution row records it: principal, client and role.
async fn attribution_of(database: &TestDatabase, execution_id: &str) -> Value {
    let pool = database.connect().await;
    let id: uuid::Uuid = execution_id.parse().unwrap();
    crate::support::wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id)
        .await;
    let (principal, client, role): (String, Option<String>, Option<String>) =
        sqlx::query_as("SELECT principal, client_id, role FROM orca.mcp_executions WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    json!({"principal": principal, "client": client, "role": role})
}

/// The analyst token's call (`listed`) names its user, client and role in `list_servers`, in its
/// execution row and in both files of `orca export-feedback`; an API key's call names its key
/// and no client or role.
async fn attribution_is_recorded_and_exported(
    database: &TestDatabase,
    setup: &OrcaSetup,
    server: &HttpServer,
    analyst: &str,
    listed: &rmcp::model::CallToolResult,
) {
    let analyst_identity =
        json!({"principal": "analyst-app", "client": "analyst-app", "role": "analyst"});
    let caller: Value =
        serde_json::from_str::<Value>(&crate::support::text_of(listed)).unwrap()["caller"].clone();
    assert_eq!(
        caller,
        json!({"principal": "analyst-app", "client": "analyst-app", "role": "analyst", "verbs": ["read"]})
    );
    let execution_id = meta_of(listed)["execution_id"].as_str().unwrap().to_owned();
    assert_eq!(attribution_of(database, &execution_id).await, analyst_identity);

    // A rating and a failure of the analyst's, exported with who made the call.
    let client = server.client(Some(analyst)).await;
    let token = meta_of(listed)["feedback_token"].clone();
    let rated =
        call(&client, "submit_feedback", json!({"feedback_token": token, "rating": "up"}), None)
            .await
            .unwrap();
    assert_eq!(rated.is_error, Some(false), "{rated:?}");
    let failed = call(&client, "list_servers", json!({"unexpected": true}), None).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    client.cancel().await.unwrap();
    let failed_id = meta_of(&failed)["execution_id"].as_str().unwrap().to_owned();
    let pool = database.connect().await;
    crate::support::wait_for_row(
        &pool,
        "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1",
        failed_id.parse().unwrap(),
    )
    .await;
    let out = setup.home.path().join("exports");
    let out_text = out.display().to_string();
    let (code, _, stderr) =
        crate::support::run(setup, &["export-feedback", "--since", "1h", "--out", &out_text]);
    assert_eq!(code, 0, "{stderr}");
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    for (file, execution) in [("feedback", &execution_id), ("failures", &failed_id)] {
        let mut reader = csv::Reader::from_path(out.join(format!("{file}-{today}.csv"))).unwrap();
        let header = reader.headers().unwrap().clone();
        let column = |name: &str| header.iter().position(|column| column == name).unwrap();
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        let row = rows
            .iter()
            .find(|row| row.get(column("execution_id")) == Some(execution.as_str()))
            .unwrap_or_else(|| panic!("{file}: no row of {execution}"));
        let field = |name: &str| row.get(column(name)).unwrap().to_owned();
        assert_eq!(
            json!({"principal": field("principal"), "client": field("client_id"), "role": field("role")}),
            analyst_identity,
            "{file}"
        );
        if file == "feedback" {
            assert_eq!(field("user_id"), "analyst-app", "the rater");
        }
    }

    // An API key's call: its key's name, and neither client nor role.
    let client = server.client(Some(API_KEY)).await;
    let by_key = call(&client, "list_servers", json!({}), None).await.unwrap();
    client.cancel().await.unwrap();
    let caller: Value =
        serde_json::from_str::<Value>(&crate::support::text_of(&by_key)).unwrap()["caller"].clone();
    assert_eq!(
        caller,
        json!({"principal": "ops", "client": null, "role": null, "verbs": ["read"]})
    );
    let key_execution = meta_of(&by_key)["execution_id"].as_str().unwrap().to_owned();
    assert_eq!(
        attribution_of(database, &key_execution).await,
        json!({"principal": "ops", "client": null, "role": null})
    );
}

#[tokio::test]
async fn tokens_from_a_real_provider_are_checked_for_audience_scope_roles_and_rotation() {
    let mut provider = Provider::start("key-1", "RS256", 300);
    let database = TestDatabase::create().await;
    let setup = setup(&database, &provider.issuer());
    let server = setup.http_server(&[]);

    // No token: 401 with the challenge a client follows to the provider.
    let (status, challenge, _) = list_tools_raw(&server, None).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        "Bearer resource_metadata=\"https://orca.test/.well-known/oauth-protected-resource/mcp\", scope=\"orca.read\""
    );
    let metadata: Value = reqwest::get(server.url("/.well-known/oauth-protected-resource/mcp"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        metadata,
        json!({
            "resource": RESOURCE,
            "authorization_servers": [provider.issuer()],
            "bearer_methods_supported": ["header"],
            "dpop_signing_alg_values_supported": ["ES256", "ES384", "RS256", "PS256", "EdDSA", "Ed25519"],
            "resource_name": "orca",
            "scopes_supported": ["orca.read", "orca.write"],
        })
    );

    // A valid token: its roles give its verbs, its client id is the principal.
    let analyst = provider.token("analyst-app", "orca.read", RESOURCE).await;
    let admin = provider.token("admin-app", "orca.read orca.write", RESOURCE).await;
    let analyst_tools = tool_names(&server, &analyst).await;
    let admin_tools = tool_names(&server, &admin).await;
    assert!(analyst_tools.contains(&"list_servers".to_owned()), "{analyst_tools:?}");
    assert!(!analyst_tools.contains(&"add_records".to_owned()), "read only: {analyst_tools:?}");
    assert!(admin_tools.contains(&"add_records".to_owned()), "{admin_tools:?}");
    let client = server.client(Some(&analyst)).await;
    let listed = call(&client, "list_servers", json!({}), None).await.unwrap();
    client.cancel().await.unwrap();
    let pool = database.connect().await;
    crate::support::eventually("the call is recorded", Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM orca.mcp_executions WHERE principal = 'analyst-app'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
            == 1
    })
    .await;
    attribution_is_recorded_and_exported(&database, &setup, &server, &analyst, &listed).await;

    // Refused tokens reach no tool.
    let before = executions(&database).await;
    let elsewhere = provider.token("analyst-app", "orca.read", "https://other.example/mcp").await;
    let (status, challenge, body) = list_tools_raw(&server, Some(&elsewhere)).await;
    assert_eq!(status, 401, "{body}");
    assert!(challenge.starts_with("Bearer error=\"invalid_token\""), "{challenge}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("issued for another resource"),
        "{body}"
    );
    let write_only = provider.token("write-only-app", "orca.write", RESOURCE).await;
    let (status, challenge, body) = list_tools_raw(&server, Some(&write_only)).await;
    assert_eq!(status, 403, "{body}");
    assert!(challenge.starts_with("Bearer error=\"insufficient_scope\""), "{challenge}");
    assert!(challenge.ends_with("scope=\"orca.read\""), "{challenge}");
    let (status, _, _) =
        list_tools_raw(&server, Some("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")).await;
    assert_eq!(status, 401);

    // API keys keep working next to OAuth.
    let (status, _, body) = list_tools_raw(&server, Some(API_KEY)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(executions(&database).await, before, "no refused request ran anything");
    // ... and each refused token is recorded, with why and where it asked (its body is never
    // read: what it asked for is only what its `Mcp-Method` header says, and these send none).
    let pool = database.connect().await;
    crate::support::eventually(
        "the refused tokens are recorded",
        Duration::from_secs(20),
        || async {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM orca.mcp_executions WHERE principal = 'unauthenticated'",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
                == 3
        },
    )
    .await;
    let refused: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT tool_name, error_code, error_message FROM orca.mcp_executions \
          WHERE principal = 'unauthenticated' ORDER BY created_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for ((tool, code, message), reason) in refused.iter().zip([
        "issued for another resource",
        "lacks the scope(s) orca.read",
        "not a signed JWT",
    ]) {
        assert_eq!((tool.as_str(), code.as_str()), ("/mcp", "UNAUTHORIZED"), "{message}");
        assert!(message.contains(reason), "{message}");
    }

    // The provider rotates its key: a token signed with the new one is accepted at once.
    provider.restart("key-2", "ES256", 300);
    let rotated = provider.token("analyst-app", "orca.read", RESOURCE).await;
    let (status, _, body) = list_tools_raw(&server, Some(&rotated)).await;
    assert_eq!(status, 200, "a token signed with the new key: {body}");

    // `orca doctor` checks the issuer, its keys and says which audience tokens must name.
    let (_, stdout, _) = crate::support::run(&setup, &["doctor"]);
    assert!(
        stdout.contains(&format!(
            "ok    oauth issuer: issuer {} reachable, 1 signing key(s) at {}/jwks; tokens must name the audience {RESOURCE}",
            provider.issuer(),
            provider.issuer()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("auth.roles"), "{stdout}");

    // The provider stopped: a cached key still checks tokens; an orca with none answers 503.
    provider.stop();
    let (code, stdout, _) = crate::support::run(&setup, &["doctor"]);
    assert_ne!(code, 0);
    assert!(stdout.contains("FAIL  oauth issuer: cannot connect to"), "{stdout}");
    let (status, _, body) = list_tools_raw(&server, Some(&rotated)).await;
    assert_eq!(status, 200, "the cached key: {body}");
    let second = setup.http_server(&[]);
    let (status, _, body) = list_tools_raw(&second, Some(&rotated)).await;
    assert_eq!(status, 503, "no key can be had: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("authorization server cannot be reached"),
        "{body}"
    );
}

#[tokio::test]
async fn an_expired_token_and_a_missing_scope_are_refused_and_a_token_with_the_scope_succeeds() {
    let provider = Provider::start("key-1", "EdDSA", 3);
    let database = TestDatabase::create().await;
    let server = setup(&database, &provider.issuer()).http_server(&[]);
    let short = provider.token("admin-app", "orca.read", RESOURCE).await;
    let (status, _, body) = list_tools_raw(&server, Some(&short)).await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(Duration::from_millis(4100)).await;
    let (status, challenge, body) = list_tools_raw(&server, Some(&short)).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("has expired"), "{body}");
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");

    let without = provider.token("admin-app", "orca.write", RESOURCE).await;
    let (status, _, _) = list_tools_raw(&server, Some(&without)).await;
    assert_eq!(status, 403);
    let with = provider.token("admin-app", "orca.read orca.write", RESOURCE).await;
    let (status, _, body) = list_tools_raw(&server, Some(&with)).await;
    assert_eq!(status, 200, "the same client stepped up: {body}");
}

#[tokio::test]
async fn a_clients_token_never_reaches_an_upstream_which_gets_orcas_own_credential() {
    let provider = Provider::start("key-1", "RS256", 300);
    let database = TestDatabase::create().await;
    let (mut upstream, url) = crate::external::start_http_fixture(0, "upstream-credential");
    let mut setup = setup(&database, &provider.issuer()).with_external(&format!(
        "mcps:\n  web:\n    url: {url}\n    timeout: 5s\n    credentials:\n      token_env: WEB_TOKEN\n"
    ));
    setup.env.insert("WEB_TOKEN".into(), "upstream-credential".into());
    let server = setup.http_server(&[]);
    let token = provider.token("admin-app", "orca.read orca.write", RESOURCE).await;
    let client = server.client(Some(&token)).await;
    let result = call(&client, "web_headers", json!({}), None).await.unwrap();
    let text = crate::support::text_of(&result);
    let headers: Value = serde_json::from_str(&text).unwrap();
    // The fixture answers only a request with the configured credential
    // (FIXTURE_REQUIRE_BEARER); orca redacts it from the echo on its way back.
    assert_eq!(headers["authorization"], "Bearer [REDACTED:authorization]", "{headers}");
    assert!(!text.contains(&token), "the client's token reached the upstream: {text}");
    client.cancel().await.unwrap();
    upstream.kill().unwrap();
    let _ = upstream.wait();
}

#[tokio::test]
async fn each_role_sees_and_calls_only_its_tools_within_its_rate() {
    let provider = Provider::start("key-1", "RS256", 300);
    let database = TestDatabase::create().await;
    let roles = "    analyst:\n      verbs: [read]\n      tools: [\"*\", \"!execute_sql\", \"!*materialize*\"]\n      calls_per_minute: 4\n    admin:\n      verbs: [read, create, update, delete]\n      tools: [\"*\"]\n    auditor:\n      verbs: [read]\n      tools: [\"server:orca\"]\n";
    let setup = setup_with_roles(&database, &provider.issuer(), roles, "role: auditor");
    let server = setup.http_server(&[]);
    let analyst = provider.token("analyst-app", "orca.read", RESOURCE).await;
    let admin = provider.token("admin-app", "orca.read orca.write", RESOURCE).await;

    let analyst_tools = tool_names(&server, &analyst).await;
    assert!(!analyst_tools.contains(&"execute_sql".to_owned()), "{analyst_tools:?}");
    assert!(analyst_tools.contains(&"query_sql".to_owned()), "{analyst_tools:?}");
    assert!(tool_names(&server, &admin).await.contains(&"execute_sql".to_owned()));
    assert_eq!(
        tool_names(&server, API_KEY).await,
        ["list_servers", "submit_feedback"],
        "an API key with a role gets the role's tools"
    );

    // The auditor key reaches only orca's own server: no data prompts or resources either.
    let auditor = server.client(Some(API_KEY)).await;
    assert!(auditor.list_all_resources().await.unwrap().is_empty());
    assert!(auditor.list_all_prompts().await.unwrap().is_empty());
    assert!(
        auditor
            .read_resource(rmcp::model::ReadResourceRequestParams::new("res://catalogs"))
            .await
            .is_err()
    );
    let listed = call(&auditor, "list_servers", json!({}), None).await.unwrap();
    let servers = listed.structured_content.unwrap()["servers"].clone();
    assert_eq!(servers.as_array().unwrap().len(), 1, "{servers}");
    assert_eq!(servers[0]["name"], "orca");
    auditor.cancel().await.unwrap();

    // A call outside the policy is refused by name and recorded as denied; nothing ran.
    let client = server.client(Some(&analyst)).await;
    let listed = call(&client, "list_servers", json!({}), None).await.unwrap();
    let postgres = listed.structured_content.unwrap()["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["name"] == "postgres")
        .cloned()
        .unwrap();
    assert!(!postgres["tools"].as_array().unwrap().contains(&json!("execute_sql")), "{postgres}");
    let refused = call(&client, "execute_sql", json!({"sql": "SELECT 1"}), None).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    let error = refused.structured_content.unwrap()["error"].clone();
    assert_eq!(error["code"], "UNAUTHORIZED", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("`analyst-app` may not use `execute_sql`"),
        "{error}"
    );
    let pool = database.connect().await;
    crate::support::eventually("the denied call is recorded", Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM orca.mcp_executions \
              WHERE tool_name = 'execute_sql' AND principal = 'analyst-app' \
                AND status = 'error' AND error_code = 'UNAUTHORIZED'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
            == 1
    })
    .await;

    // Two calls made, two more allowed this minute, then 429 with Retry-After.
    for _ in 0..2 {
        call(&client, "list_servers", json!({}), None).await.unwrap();
    }
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .bearer_auth(&analyst)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "list_servers", "arguments": {}}})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let (status, _, _) = list_tools_raw(&server, Some(&analyst)).await;
    assert_eq!(status, 200, "only tool calls count");
    let (status, _, _) = list_tools_raw(&server, Some(&admin)).await;
    assert_eq!(status, 200, "another principal has its own count");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_mcp_client_finds_the_provider_from_orcas_401_and_signs_in_by_itself() {
    let provider = Provider::start("key-1", "RS256", 300);
    let database = TestDatabase::create().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let roles = "    analyst:\n      verbs: [read]\n";
    let setup = setup_for(&database, &provider.issuer(), &resource, roles, "verbs: [read]");
    let _server = setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth/mcp_client.mjs");
    let output = tokio::process::Command::new("node")
        .arg(&script)
        .env("PROVIDER_DIR", provider_dir())
        .env("ORCA_URL", &resource)
        .env("CLIENT_ID", "analyst-app")
        .env("CLIENT_SECRET", "analyst-app-secret")
        .env("SCOPE", "orca.read")
        .output()
        .await
        .expect("cannot run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the SDK client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(seen["tools"].as_array().unwrap().contains(&json!("list_servers")), "{seen}");
    assert!(
        !seen["tools"].as_array().unwrap().contains(&json!("add_records")),
        "read only: {seen}"
    );
    assert_eq!(seen["result"]["servers"][0]["name"], "orca", "{seen}");
    let pool = database.connect().await;
    crate::support::eventually("the client's call is recorded", Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM orca.mcp_executions WHERE principal = 'analyst-app' AND tool_name = 'list_servers'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
            == 1
    })
    .await;
}

/// `POST /console/api/token` with `body`: the status and the answer.
async fn exchange(base: &str, body: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/console/api/token"))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_browser_the_console_signs_in_through_the_provider_with_pkce_and_signs_out() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let provider = Provider::start_for_console(&format!("{base}/"));
    let database = TestDatabase::create().await;
    let hash = hex::encode(Sha256::digest(API_KEY.as_bytes()));
    let setup = OrcaSetup::new(&database.url).with_config(&format!(
        "http:\n  auth_failures_per_minute: 3\nauth:\n  api_keys:\n    - name: ops\n      sha256: {hash}\n      verbs: [read]\n  oauth:\n    issuer: {issuer}\n    resource: {base}/mcp\n    scopes_supported: [orca.read, orca.write]\n    required_scopes: [orca.read]\n    roles_claim: groups\n    console_client_id: orca-console\n  roles:\n    analyst:\n      verbs: [read]\n",
        issuer = provider.issuer(),
    ));
    let server = setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);

    let (_, session) = {
        let response =
            reqwest::Client::new().get(server.url("/console/api/session")).send().await.unwrap();
        (response.status().as_u16(), response.json::<Value>().await.unwrap())
    };
    assert_eq!(
        session["sign_in"],
        json!({
            "authorization_endpoint": format!("{}/auth", provider.issuer()),
            "client_id": "orca-console",
            "issuer": provider.issuer(),
            "scope": "orca.read orca.write",
            "resource": format!("{base}/mcp"),
        })
    );

    crate::console::run_scenario("signin", &base, &[("PROVIDER_ORIGIN", &provider.issuer())]);

    let pool = database.connect().await;
    crate::support::eventually("the console's call is recorded", Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM orca.mcp_executions WHERE principal = 'ada' AND tool_name = 'list_servers'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
            >= 1
    })
    .await;
    pool.close().await;

    // The exchange endpoint: a code the provider never issued is refused without its words, a
    // foreign redirect URI and a large body are refused before the provider is asked, and past
    // http.auth_failures_per_minute the address waits.
    let verifier = "v".repeat(43);
    let own = |code: &str| {
        json!({"code": code, "code_verifier": verifier, "redirect_uri": format!("{base}/")})
            .to_string()
    };
    let (status, body) = exchange(&base, &own("not-a-code")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "UNAUTHORIZED");
    assert_eq!(
        body["error"]["message"],
        "the authorization server refused the code (invalid_grant)"
    );
    let foreign =
        json!({"code": "c", "code_verifier": verifier, "redirect_uri": "http://evil.example/"});
    let (status, body) = exchange(&base, &foreign.to_string()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("INVALID_INPUT")), "{body}");
    let (status, _) = exchange(&base, &own(&"c".repeat(10_000))).await;
    assert_eq!(status, 413);
    let (status, body) = exchange(&base, &own("again")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "RATE_LIMITED");
    assert!(!holds_jwt(server.log_text()), "a token reached the log");
}

const ANALYST_KEY: &str = "orca_test_key_of_the_analyst_role";
const ADMIN_KEY: &str = "orca_test_key_of_the_admin_role";

/// orca on `database` accepting tokens from `issuer`, where the analyst role masks the people
/// columns of Chinook's `customer` and the admin role masks nothing; one API key per role. Both
/// hold every verb, so that only the masking refuses the analyst's writes.
fn masked_setup(database: &TestDatabase, issuer: &str) -> OrcaSetup {
    let analyst = hex::encode(Sha256::digest(ANALYST_KEY.as_bytes()));
    let admin = hex::encode(Sha256::digest(ADMIN_KEY.as_bytes()));
    OrcaSetup::new(&database.url).with_config(&format!(
        "masking:\n  people:\n    email: keep_email_domain\n    phone: keep_last:4\n    company: redact\n  phones:\n    phone: redact\nauth:\n  api_keys:\n    - name: analyst-key\n      sha256: {analyst}\n      role: analyst\n    - name: admin-key\n      sha256: {admin}\n      role: admin\n  oauth:\n    issuer: {issuer}\n    resource: {RESOURCE}\n    scopes_supported: [orca.read, orca.write]\n    required_scopes: [orca.read]\n    roles_claim: groups\n    leeway_seconds: 0\n    jwks_min_refresh_seconds: 0\n  roles:\n    analyst:\n      verbs: [read, create, update, delete]\n      masking: people\n    admin:\n      verbs: [read, create, update, delete]\n"
    ))
}

type McpClient = rmcp::service::RunningService<rmcp::service::RoleClient, ()>;

/// The structured result of a tool call that succeeded.
async fn ok(client: &McpClient, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone(), None).await.unwrap();
    let value = result.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(result.is_error, Some(false), "{tool} {arguments} -> {value}");
    value
}

/// The error of a tool call that failed.
async fn refused(client: &McpClient, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone(), None).await.unwrap();
    let value = result.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(result.is_error, Some(true), "{tool} {arguments} should fail: {value}");
    value["error"].clone()
}

/// The cell of `column` in the first row of a TabularResult.
fn cell(result: &Value, column: &str) -> Value {
    let position = result["schema"]
        .as_array()
        .unwrap()
        .iter()
        .position(|field| field["name"] == column)
        .unwrap_or_else(|| panic!("no column {column} in {result}"));
    result["rows"][0][position].clone()
}

/// Customer 1 of Chinook as the admin sees it and as the analyst's `people` policy masks it.
const CLEAR: [(&str, &str); 4] = [
    ("email", "luisg@embraer.com.br"),
    ("phone", "+55 (12) 3923-5555"),
    ("company", "Embraer - Empresa Brasileira de Aeronáutica S.A."),
    ("first_name", "Luís"),
];
const MASKED: [(&str, &str); 4] = [
    ("email", "***@embraer.com.br"),
    ("phone", "**************5555"),
    ("company", "[REDACTED]"),
    ("first_name", "Luís"),
];

fn assert_customer_one(result: &Value, expected: &[(&str, &str)], who: &str) {
    for (column, value) in expected {
        assert_eq!(cell(result, column), json!(value), "{who}: {column} in {result}");
    }
}

#[tokio::test]
async fn each_role_reads_the_same_chinook_columns_with_its_own_masking_in_every_tool() {
    let provider = Provider::start("key-1", "RS256", 300);
    let database = samples::chinook().await;
    let server = masked_setup(&database, &provider.issuer()).http_server(&[]);
    let analyst = server.client(Some(ANALYST_KEY)).await;
    let admin = server.client(Some(ADMIN_KEY)).await;
    let one =
        "SELECT customer_id, first_name, email, phone, company FROM customer WHERE customer_id = 1";
    let star = "SELECT * FROM customer WHERE customer_id = 1";
    for (client, expected, who) in [(&analyst, &MASKED, "analyst"), (&admin, &CLEAR, "admin")] {
        for sql in [one, star] {
            let read = ok(client, "execute_sql", json!({"sql": sql, "dry_run": false})).await;
            assert_customer_one(&read, expected, &format!("{who} execute_sql {sql}"));
            let read = ok(client, "query_sql", json!({"sql": sql})).await;
            assert_customer_one(&read, expected, &format!("{who} query_sql {sql}"));
        }
        let sample = ok(
            client,
            "sample_table",
            json!({"ref": {"table": "customer"}, "method": "head", "limit": 100}),
        )
        .await;
        let row = sample["rows"]
            .as_array()
            .unwrap()
            .iter()
            .position(|row| row[0] == 1)
            .unwrap_or_else(|| panic!("customer 1 in {sample}"));
        let mut first = sample.clone();
        first["rows"] = json!([sample["rows"][row]]);
        assert_customer_one(&first, expected, &format!("{who} sample_table"));
        let stats = ok(
            client,
            "get_stats",
            json!({"ref": {"table": "customer"}, "columns": ["email", "first_name"]}),
        )
        .await;
        let least = stats["columns"]["email"]["min"].as_str().unwrap().to_owned();
        assert_eq!(least.starts_with("***@"), who == "analyst", "{who} get_stats {stats}");
        assert!(stats["columns"]["first_name"]["min"].as_str().unwrap().len() > 1, "{stats}");
        let profile = ok(
            client,
            "profile_table",
            json!({"ref": {"table": "customer"}, "columns": ["company", "email"]}),
        )
        .await;
        let companies: Vec<&str> = profile["topk"]["company"]
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| entry["value"].as_str().unwrap())
            .collect();
        assert!(!companies.is_empty(), "{profile}");
        assert_eq!(
            companies.iter().all(|company| *company == "[REDACTED]"),
            who == "analyst",
            "{who} profile_table {profile}"
        );
        let emails =
            profile["distributions"]["email"].to_string() + &profile["topk"]["email"].to_string();
        assert_eq!(
            emails.contains("aaronmitchell@"),
            who == "admin",
            "{who} profile_table {profile}"
        );
        // The analyst's profile counts the masked values: eight customers share one.
        assert_eq!(
            emails.contains(r#"{"value":"***@gmail.com","count":8}"#),
            who == "analyst",
            "{who} profile_table {profile}"
        );
        // `preview_masked` with a policy that masks only the phone: the analyst's role masks
        // the rest on top.
        let preview = ok(
            client,
            "preview_masked",
            json!({"ref": {"table": "customer"}, "policy_id": "phones", "limit": 1}),
        )
        .await;
        assert_eq!(cell(&preview, "phone"), json!("[REDACTED]"), "{preview}");
        assert_eq!(cell(&preview, "email"), json!(expected[0].1), "{who} preview {preview}");
        assert_eq!(
            preview["policy_applied"]["caller_policy"]["policy_id"],
            if who == "analyst" { json!("people") } else { Value::Null },
            "{preview}"
        );
    }

    // `query_plan`: a Substrait plan reading `customer` becomes SQL that takes `query_sql`'s
    // path, masking included.
    let plan = json!({"relations": [{"root": {
        "names": ["customer_id", "email"],
        "input": {"read": {
            "namedTable": {"names": ["public", "customer"]},
            "baseSchema": {"names": ["customer_id", "email"],
                "struct": {"types": [{"i32": {}}, {"string": {}}]}}
        }}
    }}]});
    for (client, expected, who) in [(&analyst, &MASKED, "analyst"), (&admin, &CLEAR, "admin")] {
        let read = ok(client, "query_plan", json!({"substrait": plan, "max_rows": 100})).await;
        let row = read["rows"]
            .as_array()
            .unwrap()
            .iter()
            .position(|row| row[0] == 1)
            .unwrap_or_else(|| panic!("customer 1 in {read}"));
        assert_eq!(read["rows"][row][1], json!(expected[0].1), "{who} query_plan {read}");
    }

    // The `res://samples` resource is `sample_table` for the caller.
    for (client, clear) in [(&analyst, false), (&admin, true)] {
        let catalogs = client
            .read_resource(rmcp::model::ReadResourceRequestParams::new("res://catalogs"))
            .await
            .unwrap();
        let catalogs: Value = serde_json::from_str(
            serde_json::to_value(&catalogs.contents[0]).unwrap()["text"].as_str().unwrap(),
        )
        .unwrap();
        let catalog = catalogs["items"][0]["name"].as_str().unwrap().to_owned();
        let uri = format!("res://samples/{catalog}/public/customer?method=head&limit=100");
        let read = client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.clone()))
            .await
            .unwrap();
        let text = serde_json::to_value(&read.contents[0]).unwrap()["text"].to_string();
        assert!(text.contains("embraer.com.br"), "{uri}: {text}");
        assert_eq!(text.contains("luisg@embraer"), clear, "{uri}: {text}");
    }

    // A query whose pages are keyed by a masked column is paged on the masked values: no
    // original value is in the result or its token, and the pages go on.
    let emails =
        ok(&analyst, "query_sql", json!({"sql": "SELECT email FROM customer", "max_rows": 5}))
            .await;
    assert!(!emails.to_string().contains("luisg@"), "{emails}");
    let token = emails["page_token"].as_str().expect("a page token").to_owned();
    let next = ok(
        &analyst,
        "query_sql",
        json!({"sql": "SELECT email FROM customer", "max_rows": 5, "page_token": token}),
    )
    .await;
    assert_eq!(next["rows"].as_array().unwrap().len(), 5, "{next}");
    assert!(next["rows"].to_string().contains("***@"), "{next}");
    let emails =
        ok(&admin, "query_sql", json!({"sql": "SELECT email FROM customer", "max_rows": 5})).await;
    assert!(emails["page_token"].is_string(), "{emails}");

    // Every way around the mask is refused for the analyst and runs for the admin.
    let tricks = [
        ("SELECT lower(email) FROM customer", "`email` is masked for this caller"),
        ("SELECT email || '' FROM customer", "`email` is masked for this caller"),
        (
            "SELECT first_name FROM customer WHERE email LIKE 'a%'",
            "`email` is masked for this caller",
        ),
        ("SELECT email AS e FROM customer", "`email` is masked for this caller"),
        ("SELECT * FROM (SELECT phone FROM customer) s", "`phone` is masked for this caller"),
        (
            "WITH c AS (SELECT company FROM customer) SELECT * FROM c",
            "`company` is masked for this caller",
        ),
        ("SELECT row_to_json(c) FROM customer c", "whole-row reference `c`"),
        ("SELECT first_name FROM customer ORDER BY email", "`email` is masked for this caller"),
    ];
    for (sql, message) in tricks {
        for (tool, arguments) in [
            ("execute_sql", json!({"sql": sql, "dry_run": false})),
            ("query_sql", json!({"sql": sql})),
            ("explain_sql", json!({"sql": sql, "analyze": true})),
        ] {
            let error = refused(&analyst, tool, arguments.clone()).await;
            assert_eq!(error["code"], "UNAUTHORIZED", "{tool} {sql}: {error}");
            assert!(error["message"].as_str().unwrap().contains(message), "{tool} {sql}: {error}");
            ok(&admin, tool, arguments).await;
        }
    }
    // A write could copy a masked column where the mask does not know it: refused.
    let copy = "INSERT INTO genre (genre_id, name) SELECT 1000 + customer_id, email FROM customer";
    let error = refused(&analyst, "execute_sql", json!({"sql": copy, "dry_run": true})).await;
    assert_eq!(error["code"], "UNAUTHORIZED", "{error}");
    assert!(error["message"].as_str().unwrap().contains("masking policy `people`"), "{error}");
    ok(&admin, "execute_sql", json!({"sql": copy, "dry_run": true})).await;
    let target = json!({"table": "customer_copy"});
    for (tool, arguments) in [
        ("materialize_sql", json!({"sql": "SELECT * FROM customer", "target": target})),
        ("create_view", json!({"sql": "SELECT * FROM customer", "name": target})),
    ] {
        let error = refused(&analyst, tool, arguments).await;
        assert_eq!(error["code"], "UNAUTHORIZED", "{tool}: {error}");
        assert!(error["message"].as_str().unwrap().contains("masking policy `people`"), "{error}");
    }
    analyst.cancel().await.unwrap();
    admin.cancel().await.unwrap();

    // Tokens from the real provider: the analyst-app's groups name the analyst role.
    let analyst_token = provider.token("analyst-app", "orca.read", RESOURCE).await;
    let admin_token = provider.token("admin-app", "orca.read orca.write", RESOURCE).await;
    for (token, expected, who) in
        [(&analyst_token, &MASKED, "analyst-app"), (&admin_token, &CLEAR, "admin-app")]
    {
        let client = server.client(Some(token)).await;
        let read = ok(&client, "execute_sql", json!({"sql": one, "dry_run": false})).await;
        assert_customer_one(&read, expected, who);
        let read = ok(&client, "query_sql", json!({"sql": star})).await;
        assert_customer_one(&read, expected, who);
        let trick =
            call(&client, "query_sql", json!({"sql": "SELECT lower(email) FROM customer"}), None)
                .await
                .unwrap();
        assert_eq!(trick.is_error, Some(who == "analyst-app"), "{who}: {trick:?}");
        client.cancel().await.unwrap();
    }
}
