//! The gateway over Streamable HTTP: rmcp's client in stateless and session mode, the plain
//! HTTP endpoints, and the Host, Origin and body-size guards.

use std::collections::HashMap;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, run, wait_for_row};

async fn execution_row(
    pool: &sqlx::PgPool,
    id: Uuid,
) -> (String, Option<String>, Option<String>, String) {
    wait_for_row(pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    sqlx::query_as(
        "SELECT transport, agent_id, session_id, principal FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn http_stateless_call_carries_meta_and_the_agent_header_is_recorded() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    // rmcp's client with a custom X-Agent-Id header on every request.
    let mut headers = HashMap::new();
    headers.insert(
        http::HeaderName::from_static("x-agent-id"),
        http::HeaderValue::from_static("nightly-agent"),
    );
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            server.url("/mcp"),
        );
    config.custom_headers = headers;
    let client = rmcp::ServiceExt::serve(
        (),
        rmcp::transport::StreamableHttpClientTransport::from_config(config),
    )
    .await
    .unwrap();
    let info = client.peer_info().unwrap().clone();
    assert_eq!(info.server_info.as_ref().unwrap().name, "orca");
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    assert_eq!(result.structured_content.as_ref().unwrap()["servers"][0]["name"], "orca");
    let meta = meta_of(&result);
    let id: Uuid = meta["execution_id"].as_str().unwrap().parse().unwrap();
    client.cancel().await.unwrap();
    let pool = database.connect().await;
    let (transport, agent, session, principal) = execution_row(&pool, id).await;
    assert_eq!(transport, "http");
    assert_eq!(agent.as_deref(), Some("nightly-agent"));
    assert_eq!(session, None, "stateless mode has no session");
    assert_eq!(principal, "anonymous");
}

#[tokio::test]
async fn http_stateful_mode_records_the_session_id() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&["--stateful"]);
    let client = server.client(None).await;
    let result = call(&client, "list_servers", json!({}), Some(json!({"agent_id": "from-meta"})))
        .await
        .unwrap();
    let id: Uuid = meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap();
    client.cancel().await.unwrap();
    let pool = database.connect().await;
    let (_, agent, session, _) = execution_row(&pool, id).await;
    assert_eq!(agent.as_deref(), Some("from-meta"));
    assert!(
        session.is_some_and(|session| !session.is_empty()),
        "a session id is recorded in session mode"
    );
}

#[tokio::test]
async fn healthz_and_metrics_report_the_calls_made() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_config("http:\n  health_details: names\n");
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    for _ in 0..3 {
        call(&client, "list_servers", json!({}), None).await.unwrap();
    }
    call(&client, "list_servers", json!({"bad": 1}), None).await.unwrap();
    let _ = call(&client, "nope", json!({}), None).await;
    client.cancel().await.unwrap();
    let http = reqwest::Client::new();
    let health: Value =
        http.get(server.url("/healthz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["servers"], json!(["orca", "postgres", "data"]));
    assert_eq!(health["tracking"]["enabled"], true);
    let response = http.get(server.url("/metrics")).send().await.unwrap();
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    let metrics = response.text().await.unwrap();
    assert!(
        metrics.contains("orca_tool_calls_total{tool=\"list_servers\",status=\"success\"} 3"),
        "{metrics}"
    );
    assert!(
        metrics.contains("orca_tool_calls_total{tool=\"list_servers\",status=\"error\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("orca_tool_call_duration_seconds_count{tool=\"list_servers\"} 4"),
        "{metrics}"
    );
    assert!(metrics.contains("orca_unknown_tool_calls_total 1"), "{metrics}");
    assert!(
        metrics.contains("orca_http_request_duration_seconds_bucket{route=\"/mcp\",le=\"+Inf\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("orca_tracking_queue_depth "), "{metrics}");
    assert!(metrics.contains("orca_tracking_spilled_records_total 0"), "{metrics}");
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_config("http:\n  allowed_origins: [\"http://localhost:*\"]\n");
    let server = setup.http_server(&[]);
    let http = reqwest::Client::new();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let check = |host: Option<&'static str>, origin: Option<&'static str>| {
        let mut request = http
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .json(&body);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(check(Some("attacker.example"), None).await, 403, "DNS-rebinding Host");
    assert_eq!(check(None, Some("https://attacker.example")).await, 403, "foreign Origin");
    assert_eq!(check(None, Some("http://localhost:5173")).await, 200, "allowed Origin");
    assert_eq!(check(Some("localhost:1234"), None).await, 200, "loopback Host");
}

#[tokio::test]
async fn oversized_request_bodies_are_refused_with_413() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_config("http:\n  max_body_bytes: 2048\n");
    let server = setup.http_server(&[]);
    let http = reqwest::Client::new();
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "list_servers", "arguments": {"padding": "x".repeat(10_000)}}});
    let status = http
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .json(&big)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 413);
    let status = http
        .post(server.url("/mcp/feedback"))
        .body("x".repeat(10_000))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 413);
}

#[tokio::test]
async fn anonymous_http_is_refused_on_a_non_loopback_address() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let (code, _, stderr) = run(&setup, &["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("anonymous callers are served on loopback addresses only"), "{stderr}");
}

#[tokio::test]
async fn servers_flag_rejects_unknown_names() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let (code, _, stderr) = run(&setup, &["serve", "--stdio", "--servers", "orca,metabass"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown server `metabass`; known servers: orca"), "{stderr}");
}
