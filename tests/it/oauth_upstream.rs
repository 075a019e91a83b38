//! orca signing in to an external MCP server that asks for OAuth: the upstream is another orca
//! configured as a resource server of a real `oidc-provider` (`tests/oauth/provider.mjs`), and
//! the proxy declares it in `external-mcps.yaml` with `oauth:`. With `mode: service` the proxy
//! signs in by itself (client credentials), keeps the token sealed in `orca.upstream_tokens` and
//! never writes it to its log; with `mode: shared` and nobody signed in, `list_servers` says
//! `needs_sign_in` and `orca logout` has nothing to forget; with `mode: shared` after `orca login`
//! (a person on the provider's pages, `tests/oauth/sign_in.mjs`), calls go through across access
//! tokens' expiry (refreshed), a second replica uses the same sign-in, and a revoked sign-in
//! turns into `needs_sign_in` with the command to sign in again.

use serde_json::{Value, json};

use crate::oauth::{Provider, setup_for};
use crate::support::{OrcaSetup, TestDatabase, call, text_of};

/// A free loopback port, so that the upstream's canonical URL is known before it starts.
fn free_port() -> u16 {
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
    let proxy_setup = OrcaSetup::new(&proxy_database.url)
        .with_env("UP_SECRET", "admin-app-secret")
        .with_external(&format!(
            "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: service\n      client_id: admin-app\n      client_secret_env: UP_SECRET\n  waiting:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: shared\n      client_metadata_url: https://orca.example.com/oauth/client.json\n"
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
    assert!(
        !sealed.contains("eyJ") && !sealed.contains("access_token"),
        "a readable token: {sealed}"
    );
    let tracked: Vec<(Option<String>,)> = sqlx::query_as(
        "SELECT response_data::text FROM orca.mcp_executions WHERE tool_name = 'up_list_servers'",
    )
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    for (row,) in &tracked {
        assert!(
            !row.as_deref().unwrap_or_default().contains("eyJ"),
            "a token in tracking: {row:?}"
        );
    }
    pool.close().await;

    client.cancel().await.unwrap();
    let log = proxy.log_text();
    assert!(!log.contains("eyJ"), "a token in the proxy's log:\n{log}");
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
/// provider's pages (`tests/oauth/sign_in.mjs`); the command's stdout.
fn login(setup: &OrcaSetup, upstream: &str) -> String {
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
    let person = std::process::Command::new("node").arg(script).arg(&address).output().unwrap();
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
        "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: shared\n"
    );
    // Two replicas: one database, one ORCA_SECRET, each its own home.
    let secret = "a shared secret of at least thirty-two characters";
    let proxy_setup = OrcaSetup::new(&proxy_database.url)
        .with_env("ORCA_SECRET", secret)
        .with_external(&external);
    let replica_setup = OrcaSetup::new(&proxy_database.url)
        .with_env("ORCA_SECRET", secret)
        .with_external(&external);

    let said = login(&proxy_setup, "up");
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
    assert!(!log.contains("eyJ"), "a token in the proxy's log:\n{log}");
}
