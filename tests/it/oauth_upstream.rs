//! orca signing in to an external MCP server that asks for OAuth: the upstream is another orca
//! configured as a resource server of a real `oidc-provider` (`tests/oauth/provider.mjs`), and
//! the proxy declares it in `external-mcps.yaml` with `oauth:`. With `mode: service` the proxy
//! signs in by itself (client credentials), keeps the token sealed in `orca.upstream_tokens` and
//! never writes it to its log; with `mode: shared` and nobody signed in, `list_servers` says
//! `needs_sign_in` and `orca logout` has nothing to forget; with `mode: shared` after `orca login`
//! (a person on the provider's pages, `tests/oauth/sign_in.mjs`), calls go through across access
//! tokens' expiry (refreshed), a second replica uses the same sign-in, and a revoked sign-in
//! turns into `needs_sign_in` with the command to sign in again. With `mode: per_user`, two
//! people behind one proxy (two API keys) each sign in for themselves through the proxy's HTTP
//! routes and the provider's pages, and the upstream sees each as themselves. The provider is on
//! another port than the upstream, so each entry names it (`oauth.issuer`, or
//! `oauth.allowed_hosts`): what an upstream names elsewhere is not fetched.

use serde_json::{Value, json};

use crate::oauth::{Provider, setup_for};
use crate::support::{OrcaSetup, TestDatabase, call, holds_jwt, text_of};

/// A free loopback port, so that the upstream's canonical URL is known before it starts.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn a_service_identity_signs_in_by_itself_and_its_token_is_sealed_and_never_logged() {
    let provider = Provider::start("key-1", "RS256", 300);
    let database = TestDatabase::create().await;
    let port = free_port();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream_setup = setup_for(
        &database,
        &provider.issuer(),
        &upstream_url,
        "    admin:\n      verbs: [read, create, update, delete]\n",
        "verbs: [read]",
    );
    let upstream = upstream_setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);

    let proxy_database = TestDatabase::create().await;
    let issuer = provider.issuer();
    let proxy_setup = OrcaSetup::new(&proxy_database.url)
        .with_env("UP_SECRET", "admin-app-secret")
        .with_config("http:\n  public_url: https://orca.example.com\n")
        .with_external(&format!(
            "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: service\n      client_id: admin-app\n      client_secret_env: UP_SECRET\n      issuer: {issuer}\n  waiting:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: shared\n      client_metadata_url: https://orca.example.com/oauth/client.json\n"
        ));
    let proxy = proxy_setup.http_server(&[]);
    let client = proxy.client(None).await;

    let result = call(&client, "up_list_servers", json!({}), None).await.unwrap();
    let text = text_of(&result);
    assert_ne!(
        result.is_error,
        Some(true),
        "the call through the signed-in upstream failed: {text}"
    );
    assert!(text.contains("postgres"), "the upstream's list_servers: {text}");

    // The shared upstream waits for a person's `orca login`.
    let servers = call(&client, "list_servers", json!({}), None).await.unwrap();
    let servers: Value = serde_json::from_str(&text_of(&servers)).unwrap();
    let waiting = servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["name"] == "waiting")
        .unwrap_or_else(|| panic!("no `waiting` in {servers}"))
        .clone();
    let status = waiting["status"].as_str().unwrap();
    assert!(status.starts_with("needs_sign_in"), "{waiting}");
    assert!(status.contains("orca login waiting"), "{waiting}");

    // orca serves its Client ID Metadata Document at the configured URL's path.
    let document: Value =
        reqwest::get(proxy.url("/oauth/client.json")).await.unwrap().json().await.unwrap();
    assert_eq!(document["client_id"], "https://orca.example.com/oauth/client.json", "{document}");
    assert_eq!(document["token_endpoint_auth_method"], "none", "{document}");
    assert!(document["grant_types"].to_string().contains("refresh_token"), "{document}");
    // The console's sign-ins come back to orca's callback at its public URL.
    assert!(
        document["redirect_uris"]
            .to_string()
            .contains(r#""https://orca.example.com/oauth/upstream/callback""#),
        "{document}"
    );

    // The stored sign-in opens only with the proxy's secret: the row holds no token.
    let pool = sqlx::PgPool::connect(&proxy_database.url).await.unwrap();
    let rows: Vec<(String, String, Vec<u8>)> =
        sqlx::query_as("SELECT upstream, subject, sealed FROM orca.upstream_tokens")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1, "one sign-in, the service's");
    assert_eq!((rows[0].0.as_str(), rows[0].1.as_str()), ("up", ""));
    let sealed = String::from_utf8_lossy(&rows[0].2).into_owned();
    assert!(!holds_jwt(&sealed) && !sealed.contains("access_token"), "a readable token: {sealed}");
    let tracked: Vec<(Option<String>,)> = sqlx::query_as(
        "SELECT response_data::text FROM orca.mcp_executions WHERE tool_name = 'up_list_servers'",
    )
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    for (row,) in &tracked {
        assert!(!holds_jwt(row.as_deref().unwrap_or_default()), "a token in tracking: {row:?}");
    }
    pool.close().await;

    client.cancel().await.unwrap();
    let log = proxy.log_text();
    assert!(!holds_jwt(&log), "a token in the proxy's log:\n{log}");
    drop(proxy);

    let (code, stdout, stderr) = crate::support::run(&proxy_setup, &["logout", "waiting"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("`waiting` had no sign-in"), "{stdout}");
    let (code, stdout, stderr) = crate::support::run(&proxy_setup, &["logout", "up"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("signed out of `up`"), "{stdout}");
    drop(upstream);
}

/// `orca login <upstream> --no-browser` for `setup`, with a person signing in through the
/// provider's pages (`tests/oauth/sign_in.mjs`) as `person`; the command's stdout.
fn login(setup: &OrcaSetup, upstream: &str, person: &str) -> String {
    use std::io::{BufRead, BufReader};
    let mut child = setup
        .command()
        .args(["login", upstream, "--no-browser"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let mut address = None;
    for line in stderr.lines().map_while(Result::ok) {
        if line.trim_start().starts_with("http://127.0.0.1") && line.contains("/auth?") {
            address = Some(line.trim().to_owned());
            break;
        }
        seen.push(line);
    }
    let address =
        address.unwrap_or_else(|| panic!("orca login printed no address:\n{}", seen.join("\n")));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth/sign_in.mjs");
    let person = std::process::Command::new("node")
        .arg(script)
        .arg(&address)
        .env("LOGIN", person)
        .output()
        .unwrap();
    assert!(
        person.status.success(),
        "signing in through the provider's pages failed: {}{}",
        String::from_utf8_lossy(&person.stdout),
        String::from_utf8_lossy(&person.stderr)
    );
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "orca login failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The `status` of `name` in the proxy's `list_servers`.
async fn status_of(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &str,
) -> String {
    let servers = call(client, "list_servers", json!({}), None).await.unwrap();
    let servers: Value = serde_json::from_str(&text_of(&servers)).unwrap();
    servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["name"] == name)
        .and_then(|server| server["status"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_shared_sign_in_serves_two_replicas_is_refreshed_and_when_revoked_asks_to_sign_in_again()
{
    // Access tokens live 4 s, so that the calls below outlive the first one.
    let mut provider =
        Provider::start_with("key-1", "RS256", 4, Some("http://127.0.0.1:9/".into()));
    let database = TestDatabase::create().await;
    let port = free_port();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream_setup = setup_for(
        &database,
        &provider.issuer(),
        &upstream_url,
        "    analyst:\n      verbs: [read]\n",
        "verbs: [read]",
    );
    let _upstream = upstream_setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);
    let proxy_database = TestDatabase::create().await;
    let external = format!(
        "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: shared\n      issuer: {}\n",
        provider.issuer()
    );
    // Two replicas: one database, one ORCA_SECRET, each its own home.
    let secret = "a shared secret of at least thirty-two characters";
    let proxy_setup = OrcaSetup::new(&proxy_database.url)
        .with_env("ORCA_SECRET", secret)
        .with_external(&external);
    let replica_setup = OrcaSetup::new(&proxy_database.url)
        .with_env("ORCA_SECRET", secret)
        .with_external(&external);

    let said = login(&proxy_setup, "up", "alice");
    assert!(said.contains("signed in to `up`"), "{said}");

    let proxy = proxy_setup.http_server(&[]);
    let client = proxy.client(None).await;
    crate::support::eventually(
        "the upstream signed in",
        std::time::Duration::from_secs(30),
        || async { status_of(&client, "up").await == "running" },
    )
    .await;
    for round in 0..3 {
        let result = call(&client, "up_list_servers", json!({}), None).await.unwrap();
        assert_ne!(result.is_error, Some(true), "call {round}: {}", text_of(&result));
        // Past the access token's lifetime: the next call needs the refreshed one.
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }

    // The other replica uses the same sign-in without signing in.
    let replica = replica_setup.http_server(&[]);
    let other = replica.client(None).await;
    crate::support::eventually(
        "the replica found the sign-in",
        std::time::Duration::from_secs(30),
        || async { status_of(&other, "up").await == "running" },
    )
    .await;
    let result = call(&other, "up_list_servers", json!({}), None).await.unwrap();
    assert_ne!(result.is_error, Some(true), "through the replica: {}", text_of(&result));
    other.cancel().await.unwrap();
    drop(replica);

    // The provider forgets its grants and keys: the refresh token is refused.
    provider.restart("key-2", "RS256", 4);
    crate::support::eventually(
        "the upstream asks to sign in again",
        std::time::Duration::from_secs(60),
        || async {
            let _ = call(&client, "up_list_servers", json!({}), None).await;
            status_of(&client, "up").await.starts_with("needs_sign_in")
        },
    )
    .await;
    let refused = call(&client, "up_list_servers", json!({}), None).await.unwrap();
    let text = text_of(&refused);
    assert!(text.contains("orca login up"), "the error says how to sign in again: {text}");
    client.cancel().await.unwrap();
    let log = proxy.log_text();
    assert!(!holds_jwt(&log), "a token in the proxy's log:\n{log}");
}

const ALICE_KEY: &str = "alice-key-0123456789abcdef0123456789";
const BOB_KEY: &str = "bob-key-0123456789abcdef0123456789ab";
const ADMIN_KEY: &str = "admin-key-0123456789abcdef012345678";

/// A person signing in to the proxy's `upstream` through its HTTP routes: `POST
/// .../sign-in` with `key`, the provider's pages as `person`, and the browser's way back
/// (with the binding cookie when `with_cookie`); the callback's Location and the URL that was
/// delivered.
async fn sign_in_over_http(
    proxy: &crate::support::orca::HttpServer,
    upstream: &str,
    key: &str,
    person: &str,
    with_cookie: bool,
) -> (String, String) {
    let (location, delivered, _) =
        sign_in_across(proxy, proxy, upstream, key, person, with_cookie).await;
    (location, delivered)
}

/// [`sign_in_over_http`] started on `start` with the browser's way back delivered to `back`
/// (another replica, as a load balancer that is not sticky would send it); the binding cookie
/// too.
async fn sign_in_across(
    start: &crate::support::orca::HttpServer,
    back: &crate::support::orca::HttpServer,
    upstream: &str,
    key: &str,
    person: &str,
    with_cookie: bool,
) -> (String, String, String) {
    let response = reqwest::Client::new()
        .post(start.url(&format!("/console/api/upstreams/{upstream}/sign-in")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the sign-in did not start");
    let cookie = response
        .headers()
        .get("set-cookie")
        .map(|value| value.to_str().unwrap().split(';').next().unwrap().to_owned())
        .expect("the binding cookie");
    let body: Value = response.json().await.unwrap();
    let address = body["authorization_url"].as_str().expect("an authorization URL").to_owned();
    assert!(address.contains("code_challenge="), "{address}");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oauth/sign_in.mjs");
    let mut command = tokio::process::Command::new("node");
    command.arg(script).arg(&address).env("LOGIN", person).env("DELIVER_TO", back.url(""));
    if with_cookie {
        command.env("DELIVER_COOKIE", &cookie);
    }
    let output = command.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "signing in through the provider's pages failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout.lines().find(|line| line.starts_with("delivered ")).unwrap_or_default();
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts.get(1), Some(&"303"), "{stdout}");
    (parts[2].to_owned(), parts[3].to_owned(), cookie)
}

/// The principals the upstream orca recorded for its `list_servers` calls through the per-user
/// upstream, in order (erin's, through the shared one, left out).
async fn upstream_principals(pool: &sqlx::PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT principal FROM orca.mcp_executions WHERE tool_name = 'list_servers' AND principal <> 'erin' ORDER BY created_at",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default()
}

/// The error of a call that needs the caller's own sign-in, checked for the link and command.
fn assert_needs_sign_in(result: &rmcp::model::CallToolResult, who: &str) {
    assert_eq!(result.is_error, Some(true), "{who}: {}", text_of(result));
    let error = &result.structured_content.as_ref().expect("a structured error")["error"];
    assert_eq!(error["code"], "UNAUTHORIZED", "{who}: {error}");
    assert_eq!(error["details"]["needs_sign_in"], true, "{who}: {error}");
    assert_eq!(error["details"]["sign_in_url"], "/?upstream=up", "{who}: {error}");
    assert_eq!(error["details"]["sign_in_command"], "orca login up", "{who}: {error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("/?upstream=up") && message.contains("orca login up"), "{message}");
}

#[tokio::test]
async fn each_user_signs_in_for_themselves_and_the_upstream_sees_each_as_themselves() {
    // Access tokens live 4 s: each user's own sign-in is refreshed along the way.
    let mut provider =
        Provider::start_with("key-1", "RS256", 4, Some("http://127.0.0.1:9/".into()));
    let database = TestDatabase::create().await;
    let port = free_port();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream_setup = setup_for(
        &database,
        &provider.issuer(),
        &upstream_url,
        "    analyst:\n      verbs: [read]\n",
        "verbs: [read]",
    );
    let _upstream = upstream_setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);
    let upstream_pool = sqlx::PgPool::connect(&database.url).await.unwrap();
    // The provider is on another port than the upstream: the entry allows it.
    let provider_host = provider.issuer().trim_start_matches("http://").to_owned();

    let proxy_database = TestDatabase::create().await;
    let hash = |key: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(key.as_bytes()));
    let proxy_setup = OrcaSetup::new(&proxy_database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: alice\n      sha256: {}\n      verbs: [read]\n    - name: bob\n      sha256: {}\n      verbs: [read]\n    - name: admin\n      sha256: {}\n      verbs: [read, create, update, delete]\n",
            hash(ALICE_KEY),
            hash(BOB_KEY),
            hash(ADMIN_KEY)
        ))
        .with_external(&format!(
            "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: per_user\n      allowed_hosts: [\"{provider_host}\"]\n  zshared:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: shared\n      issuer: {}\n",
            provider.issuer()
        ));

    // Nobody has signed in: the upstream's tools are unknown, and list_servers says so.
    let proxy = proxy_setup.http_server(&[]);
    let alice = proxy.client(Some(ALICE_KEY)).await;
    let status = status_of(&alice, "up").await;
    assert!(status.starts_with("needs_sign_in"), "{status}");
    assert!(
        status.contains("nobody has signed in") && status.contains("/?upstream=up"),
        "{status}"
    );
    alice.cancel().await.unwrap();
    drop(proxy);

    // carol, the stdio principal, signs in with `orca login`: the tools become known.
    let said = login(&proxy_setup, "up", "carol");
    assert!(said.contains("signed in to `up`") && said.contains("stdio principal"), "{said}");
    let proxy = proxy_setup.http_server(&[]);
    let alice = proxy.client(Some(ALICE_KEY)).await;
    let bob = proxy.client(Some(BOB_KEY)).await;
    crate::support::eventually(
        "the upstream listed with carol's sign-in",
        std::time::Duration::from_secs(30),
        || async { status_of(&alice, "up").await == "running" },
    )
    .await;

    // Neither alice nor bob has signed in: each gets the error with the way to sign in.
    for (client, who) in [(&alice, "alice"), (&bob, "bob")] {
        let refused = call(client, "up_list_servers", json!({}), None).await.unwrap();
        assert_needs_sign_in(&refused, who);
    }

    // alice signs in through the proxy's routes; her calls go through as her, bob's do not.
    let (location, delivered) = sign_in_over_http(&proxy, "up", ALICE_KEY, "alice", true).await;
    assert_eq!(location, "/?upstream=up&signed_in=1");
    let result = call(&alice, "up_list_servers", json!({}), None).await.unwrap();
    assert_ne!(result.is_error, Some(true), "alice's call: {}", text_of(&result));
    assert!(text_of(&result).contains(r#""principal":"alice""#), "{}", text_of(&result));
    assert_needs_sign_in(&call(&bob, "up_list_servers", json!({}), None).await.unwrap(), "bob");
    crate::support::eventually(
        "the upstream recorded alice",
        std::time::Duration::from_secs(15),
        || async { upstream_principals(&upstream_pool).await == ["alice"] },
    )
    .await;

    // The way back is single-use.
    let replayed = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&delivered)
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), 303);
    assert_eq!(replayed.headers()["location"], "/?sign_in_error=expired");

    // The console's list shows alice signed in, bob not.
    let upstreams = |key: &'static str| {
        let url = proxy.url("/console/api/upstreams");
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
    let listed = upstreams(ALICE_KEY).await;
    assert_eq!(
        (listed[0]["name"].as_str(), listed[0]["mode"].as_str()),
        (Some("up"), Some("per_user"))
    );
    assert_eq!(listed[0]["signed_in"], true, "{listed}");
    assert_eq!(listed[0]["may_sign_in"], true, "{listed}");
    assert_eq!(upstreams(BOB_KEY).await[0]["signed_in"], false);

    // A shared sign-in is an administrator's: alice (read only) may not make it.
    assert_eq!(
        (listed[1]["name"].as_str(), listed[1]["mode"].as_str()),
        (Some("zshared"), Some("shared"))
    );
    assert_eq!(listed[1]["may_sign_in"], false, "{listed}");
    let refused = reqwest::Client::new()
        .post(proxy.url("/console/api/upstreams/zshared/sign-in"))
        .bearer_auth(ALICE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let refused: Value = refused.json().await.unwrap();
    assert!(refused.to_string().contains("every verb"), "{refused}");
    let unknown = reqwest::Client::new()
        .post(proxy.url("/console/api/upstreams/nowhere/sign-in"))
        .bearer_auth(ALICE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let anonymous = reqwest::Client::new()
        .post(proxy.url("/console/api/upstreams/up/sign-in"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "starting a sign-in needs a key");
    // An administrator signs in the shared one from the console: every caller then uses it.
    let (location, _) = sign_in_over_http(&proxy, "zshared", ADMIN_KEY, "erin", true).await;
    assert_eq!(location, "/?upstream=zshared&signed_in=1");
    crate::support::eventually(
        "the shared upstream signed in",
        std::time::Duration::from_secs(30),
        || async { status_of(&bob, "zshared").await == "running" },
    )
    .await;
    let shared = call(&bob, "zshared_list_servers", json!({}), None).await.unwrap();
    assert!(text_of(&shared).contains(r#""principal":"erin""#), "{}", text_of(&shared));

    // A way back without the browser's binding cookie is refused, and takes nothing: the
    // sign-in still waits for bob's own browser, which finishes it.
    let (location, delivered, cookie) =
        sign_in_across(&proxy, &proxy, "up", BOB_KEY, "bob", false).await;
    assert_eq!(location, "/?sign_in_error=other_browser");
    assert_needs_sign_in(&call(&bob, "up_list_servers", json!({}), None).await.unwrap(), "bob");
    let own_browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&delivered)
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(own_browser.headers()["location"], "/?upstream=up&signed_in=1");

    // bob signs in as another person: the upstream sees bob.
    let (location, _) = sign_in_over_http(&proxy, "up", BOB_KEY, "bob", true).await;
    assert_eq!(location, "/?upstream=up&signed_in=1");
    let result = call(&bob, "up_list_servers", json!({}), None).await.unwrap();
    assert_ne!(result.is_error, Some(true), "bob's call: {}", text_of(&result));
    assert!(text_of(&result).contains(r#""principal":"bob""#), "{}", text_of(&result));
    crate::support::eventually(
        "the upstream recorded bob",
        std::time::Duration::from_secs(15),
        || async { upstream_principals(&upstream_pool).await == ["alice", "bob"] },
    )
    .await;

    // alice signs out: she needs to sign in again, bob goes on.
    let forgotten: Value = reqwest::Client::new()
        .delete(proxy.url("/console/api/upstreams/up/sign-in"))
        .bearer_auth(ALICE_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(forgotten["signed_out"], true, "{forgotten}");
    assert_needs_sign_in(&call(&alice, "up_list_servers", json!({}), None).await.unwrap(), "alice");
    let result = call(&bob, "up_list_servers", json!({}), None).await.unwrap();
    assert_ne!(result.is_error, Some(true), "bob after alice left: {}", text_of(&result));

    // `orca logout` forgets the stdio principal's own sign-in, and only it.
    let (code, stdout, stderr) = crate::support::run(&proxy_setup, &["logout", "up"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("signed out of `up`"), "{stdout}");
    let (_, stdout, _) = crate::support::run(&proxy_setup, &["logout", "up"]);
    assert!(stdout.contains("`up` had no sign-in"), "{stdout}");
    let result = call(&bob, "up_list_servers", json!({}), None).await.unwrap();
    assert_ne!(result.is_error, Some(true), "bob after carol left: {}", text_of(&result));

    // The provider forgets its grants: bob's refresh is refused, and he is asked to sign in
    // again rather than failing silently.
    provider.restart("key-2", "RS256", 4);
    crate::support::eventually(
        "bob is asked to sign in again",
        std::time::Duration::from_secs(60),
        || async {
            let result = call(&bob, "up_list_servers", json!({}), None).await.unwrap();
            text_of(&result).contains("expired or was revoked")
        },
    )
    .await;
    assert_needs_sign_in(&call(&bob, "up_list_servers", json!({}), None).await.unwrap(), "bob");

    // None of alice's, bob's or carol's sign-ins is left, and no token is readable anywhere.
    let proxy_pool = sqlx::PgPool::connect(&proxy_database.url).await.unwrap();
    let rows: Vec<(String, Vec<u8>)> =
        sqlx::query_as("SELECT subject, sealed FROM orca.upstream_tokens ORDER BY subject")
            .fetch_all(&proxy_pool)
            .await
            .unwrap();
    let subjects: Vec<&str> = rows.iter().map(|(subject, _)| subject.as_str()).collect();
    assert!(!subjects.contains(&"principal:alice"), "{subjects:?}");
    assert!(!subjects.contains(&"principal:bob"), "{subjects:?}");
    assert!(!subjects.contains(&"principal:local"), "{subjects:?}");
    for (_, sealed) in &rows {
        let sealed = String::from_utf8_lossy(sealed);
        assert!(!holds_jwt(&sealed) && !sealed.contains("access_token"), "{sealed}");
    }
    let tracked: Vec<String> = sqlx::query_scalar(
        "SELECT concat_ws(' ', request_data::text, response_data::text, error_message) FROM orca.mcp_executions",
    )
    .fetch_all(&proxy_pool)
    .await
    .unwrap();
    assert!(!tracked.is_empty());
    for row in &tracked {
        assert!(!holds_jwt(row), "a token in tracking: {row}");
    }
    // Nor in the nightly export, which holds the refused calls among its failures.
    let exports = proxy_setup.home.path().join("exports");
    let exports_text = exports.display().to_string();
    let (code, _, stderr) = crate::support::run(
        &proxy_setup,
        &["export-feedback", "--since", "1h", "--out", &exports_text],
    );
    assert_eq!(code, 0, "{stderr}");
    let mut exported = 0;
    for entry in std::fs::read_dir(&exports).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!holds_jwt(&text), "a token in an export: {text}");
        exported += text.lines().count();
    }
    assert!(exported > 2, "the export holds the refused calls");
    proxy_pool.close().await;
    upstream_pool.close().await;
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    let log = proxy.log_text();
    assert!(!holds_jwt(&log), "a token in the proxy's log:\n{log}");
    assert!(!log.contains("code_verifier"), "a verifier in the proxy's log:\n{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_browser_the_console_signs_a_user_in_to_a_per_user_upstream_and_out() {
    let provider = Provider::start_with("key-1", "RS256", 300, Some("http://127.0.0.1:9/".into()));
    let database = TestDatabase::create().await;
    let port = free_port();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream_setup = setup_for(
        &database,
        &provider.issuer(),
        &upstream_url,
        "    analyst:\n      verbs: [read]\n",
        "verbs: [read]",
    );
    let _upstream = upstream_setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);
    let proxy_database = TestDatabase::create().await;
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(ALICE_KEY.as_bytes()));
    let proxy_setup = OrcaSetup::new(&proxy_database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: alice\n      sha256: {hash}\n      verbs: [read]\n"
        ))
        .with_external(&format!(
            "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: per_user\n      allowed_hosts: [\"{}\"]\n",
            provider.issuer().trim_start_matches("http://")
        ));
    // Someone has signed in before, so that the upstream's tools are known.
    login(&proxy_setup, "up", "carol");
    let proxy = proxy_setup.http_server(&[]);
    let client = proxy.client(Some(ALICE_KEY)).await;
    crate::support::eventually(
        "the upstream listed its tools",
        std::time::Duration::from_secs(30),
        || async { status_of(&client, "up").await == "running" },
    )
    .await;
    client.cancel().await.unwrap();
    let base = proxy.url("");
    crate::console::run_scenario(
        "upstream",
        &base,
        &[("PROVIDER_ORIGIN", &provider.issuer()), ("USER_KEY", ALICE_KEY), ("UPSTREAM", "up")],
    );
    let log = proxy.log_text();
    assert!(!holds_jwt(&log), "a token in the proxy's log:\n{log}");
}

#[tokio::test]
async fn a_sign_in_started_on_one_replica_finishes_on_another_and_serves_both() {
    let provider = Provider::start_with("key-1", "RS256", 300, Some("http://127.0.0.1:9/".into()));
    let database = TestDatabase::create().await;
    let port = free_port();
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream_setup = setup_for(
        &database,
        &provider.issuer(),
        &upstream_url,
        "    analyst:\n      verbs: [read]\n",
        "verbs: [read]",
    );
    let _upstream = upstream_setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);
    // Two replicas: one database, one ORCA_SECRET, each its own home.
    let proxy_database = TestDatabase::create().await;
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(ALICE_KEY.as_bytes()));
    let replica_setup = || {
        OrcaSetup::new(&proxy_database.url)
            .with_env("ORCA_SECRET", "a shared secret of at least thirty-two characters")
            .with_config(&format!(
                "auth:\n  api_keys:\n    - name: alice\n      sha256: {hash}\n      verbs: [read]\n"
            ))
            .with_external(&format!(
                "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: per_user\n      issuer: {}\n",
                provider.issuer()
            ))
    };
    let (first_setup, second_setup) = (replica_setup(), replica_setup());
    // Someone has signed in before, so that the upstream's tools are known on both.
    login(&first_setup, "up", "carol");
    let first = first_setup.http_server(&[]);
    let second = second_setup.http_server(&[]);
    let on_first = first.client(Some(ALICE_KEY)).await;
    let on_second = second.client(Some(ALICE_KEY)).await;
    for client in [&on_first, &on_second] {
        crate::support::eventually(
            "the upstream listed its tools",
            std::time::Duration::from_secs(30),
            || async { status_of(client, "up").await == "running" },
        )
        .await;
        assert_needs_sign_in(
            &call(client, "up_list_servers", json!({}), None).await.unwrap(),
            "alice",
        );
    }

    // alice starts on the first replica; her browser comes back to the second.
    let (location, delivered, cookie) =
        sign_in_across(&first, &second, "up", ALICE_KEY, "alice", true).await;
    assert_eq!(location, "/?upstream=up&signed_in=1");
    assert!(delivered.starts_with(&second.url("/oauth/upstream/callback?")), "{delivered}");
    for (client, which) in [(&on_first, "first"), (&on_second, "second")] {
        let result = call(client, "up_list_servers", json!({}), None).await.unwrap();
        assert_ne!(result.is_error, Some(true), "on the {which}: {}", text_of(&result));
        assert!(text_of(&result).contains(r#""principal":"alice""#), "{}", text_of(&result));
    }

    // The way back is single-use on every replica, the browser's cookie notwithstanding.
    let browser =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for replayed in [delivered.replacen(&second.url(""), &first.url(""), 1), delivered.clone()] {
        let answer = browser.get(&replayed).header("cookie", &cookie).send().await.unwrap();
        assert_eq!(answer.status(), 303, "{replayed}");
        assert_eq!(answer.headers()["location"], "/?sign_in_error=expired", "{replayed}");
    }

    // A waiting sign-in is a row keyed by its state's digest, sealed, and refused once expired.
    let pool = sqlx::PgPool::connect(&proxy_database.url).await.unwrap();
    let started = browser
        .post(first.url("/console/api/upstreams/up/sign-in"))
        .bearer_auth(ALICE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 200);
    let cookie = started.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap();
    let cookie = cookie.to_owned();
    let body: Value = started.json().await.unwrap();
    let address = url::Url::parse(body["authorization_url"].as_str().unwrap()).unwrap();
    let state = address.query_pairs().find(|(name, _)| name == "state").unwrap().1.into_owned();
    let rows: Vec<(Vec<u8>, String, String, Vec<u8>)> = sqlx::query_as(
        "SELECT state_sha256, upstream, subject, sealed FROM orca.upstream_sign_ins_pending",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 1, "only the waiting sign-in is kept");
    let (key, upstream, subject, sealed) = &rows[0];
    assert_eq!(*key, <sha2::Sha256 as sha2::Digest>::digest(state.as_bytes()).to_vec());
    assert_eq!((upstream.as_str(), subject.as_str()), ("up", "principal:alice"));
    let sealed = String::from_utf8_lossy(sealed);
    assert!(!sealed.contains("verifier") && !sealed.contains(&state), "{sealed}");
    sqlx::query(
        "UPDATE orca.upstream_sign_ins_pending SET expires_at = now() - interval '1 second'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let late = browser
        .get(second.url(&format!("/oauth/upstream/callback?code=c&state={state}")))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(late.headers()["location"], "/?sign_in_error=expired");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM orca.upstream_sign_ins_pending")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "an expired sign-in is forgotten");

    // At most 1000 sign-ins wait at once, across the replicas (whoever started them).
    sqlx::query(
        "INSERT INTO orca.upstream_sign_ins_pending \
         SELECT sha256(i::text::bytea), 'up', 'principal:x', '\\x00', '\\x00', '\\x00', now() + interval '1 minute' \
         FROM generate_series(1, 1000) AS i",
    )
    .execute(&pool)
    .await
    .unwrap();
    let busy = browser
        .post(second.url("/console/api/upstreams/up/sign-in"))
        .bearer_auth(ALICE_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(busy.status(), 429);
    pool.close().await;

    on_first.cancel().await.unwrap();
    on_second.cancel().await.unwrap();
    for replica in [&first, &second] {
        let log = replica.log_text();
        assert!(!holds_jwt(&log), "a token in a replica's log:\n{log}");
        assert!(!log.contains("code_verifier"), "a verifier in a replica's log:\n{log}");
        assert!(!log.contains(&state), "a state in a replica's log:\n{log}");
    }
}
