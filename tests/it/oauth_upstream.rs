//! orca signing in to an external MCP server that asks for OAuth: the upstream is another orca
//! configured as a resource server of a real `oidc-provider` (`tests/oauth/provider.mjs`), and
//! the proxy declares it in `external-mcps.yaml` with `oauth:`. With `mode: service` the proxy
//! signs in by itself (client credentials), keeps the token sealed in `orca.upstream_tokens` and
//! never writes it to its log; with `mode: shared` and nobody signed in, `list_servers` says
//! `needs_sign_in` and `orca logout` has nothing to forget.

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
            "mcps:\n  up:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: service\n      client_id: admin-app\n      client_secret_env: UP_SECRET\n  waiting:\n    url: {upstream_url}\n    timeout: 10s\n    oauth:\n      mode: shared\n"
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
