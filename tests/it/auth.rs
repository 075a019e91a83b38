//! HTTP authentication and per-tool verbs: no key, a wrong key, a key without the tool's verb;
//! and a tool outside a caller's role, whose `Mcp-Param-*` headers (SEP-2243) it may not probe.

use serde_json::json;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, tool_names, wait_for_row};

const READER_KEY: &str = "orca_test_reader_key";
const WRITER_KEY: &str = "orca_test_writer_key";

fn keyed_setup(database: &TestDatabase) -> OrcaSetup {
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    OrcaSetup::new(&database.url).with_config(&format!(
        "auth:\n  api_keys:\n    - name: analyst\n      sha256: {}\n      verbs: [read]\n    - name: loader\n      sha256: {}\n      verbs: [create]\n",
        hash(READER_KEY),
        hash(WRITER_KEY)
    ))
}

async fn post_initialize(url: &str, authorization: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn requests_without_a_valid_key_are_refused_with_401() {
    let database = TestDatabase::create().await;
    let setup = keyed_setup(&database);
    let server = setup.http_server(&[]);
    let url = server.url("/mcp");
    let (status, body) = post_initialize(&url, None).await;
    assert_eq!(status, 401);
    assert!(body.contains("UNAUTHORIZED") && body.contains("Authorization: Bearer"), "{body}");
    let (status, body) = post_initialize(&url, Some("Bearer not-a-key")).await;
    assert_eq!(status, 401);
    assert!(body.contains("the API key is not valid"), "{body}");
    assert!(!body.contains("not-a-key"), "the presented key is never echoed");
    let (status, _) = post_initialize(&url, Some(&format!("Basic {READER_KEY}"))).await;
    assert_eq!(status, 401);
    assert!(server.try_client(None).await.is_err(), "rmcp's client cannot connect without a key");
    let (status, _) = post_initialize(&url, Some(&format!("Bearer {READER_KEY}"))).await;
    assert_eq!(status, 200);
    // Feedback is behind the same check.
    let status = reqwest::Client::new()
        .post(server.url("/mcp/feedback"))
        .body("{}")
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 401);
}

#[tokio::test]
async fn a_valid_key_is_the_recorded_principal() {
    let database = TestDatabase::create().await;
    let setup = keyed_setup(&database);
    let server = setup.http_server(&[]);
    let client = server.client(Some(READER_KEY)).await;
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    let id: Uuid = meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap();
    client.cancel().await.unwrap();
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    let principal: String =
        sqlx::query_scalar("SELECT principal FROM orca.mcp_executions WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(principal, "analyst");
}

#[tokio::test]
async fn a_tool_outside_the_keys_verbs_is_hidden_and_refused_by_name_and_recorded() {
    let database = TestDatabase::create().await;
    let setup = keyed_setup(&database);
    let server = setup.http_server(&[]);
    let client = server.client(Some(WRITER_KEY)).await;
    let visible = tool_names(&client).await;
    assert_eq!(
        visible,
        ["add_records", "materialize_sql", "create_view"],
        "a create-only key sees only the create tools"
    );
    // Calling it anyway names what is missing, runs nothing, and is recorded as denied.
    let forbidden = call(&client, "list_servers", json!({}), None).await.unwrap();
    assert_eq!(forbidden.is_error, Some(true));
    let error = forbidden.structured_content.unwrap()["error"].clone();
    assert_eq!(error["code"], "UNAUTHORIZED", "{error}");
    assert_eq!(
        error["message"], "`loader` may not use `list_servers`: it needs the `read` verb",
        "{error}"
    );
    let unknown = call(&client, "no_such_tool", json!({}), None).await.unwrap_err();
    assert!(
        matches!(unknown, rmcp::service::ServiceError::McpError(ref data) if data.code.0 == -32602),
        "{unknown:?}"
    );
    client.cancel().await.unwrap();
    let pool = database.connect().await;
    crate::support::eventually("the denied call is recorded", std::time::Duration::from_secs(20), || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM orca.mcp_executions \
              WHERE principal = 'loader' AND tool_name = 'list_servers' AND error_code = 'UNAUTHORIZED'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
            == 1
    })
    .await;

    let reader = server.client(Some(READER_KEY)).await;
    let names = tool_names(&reader).await;
    assert_eq!(
        names,
        [
            "list_servers",
            "submit_feedback",
            "generate_sql",
            "execute_sql",
            "generate_schema",
            "format_results",
            "query_sql",
            "query_plan",
            "explain_sql",
            "list_schemas",
            "list_tables",
            "get_table_schema",
            "get_stats",
            "sample_table",
            "profile_table",
            "detect_pii",
            "preview_masked"
        ]
    );
    reader.cancel().await.unwrap();
}

#[tokio::test]
async fn the_stdio_principal_and_its_verbs_come_from_configuration() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_config("auth:\n  stdio:\n    name: desktop\n    verbs: [create]\n");
    let client = setup.stdio_client().await;
    let visible = tool_names(&client).await;
    assert_eq!(visible, ["add_records", "materialize_sql", "create_view"]);
    crate::support::assert_unauthorized(call(&client, "list_servers", json!({}), None).await);
    client.cancel().await.unwrap();
}

/// One raw 2026-07-28 `tools/call` of `name` with `region` in its arguments and `header` as its
/// `Mcp-Param-Region` header: the HTTP status and the JSON-RPC answer.
async fn call_with_region(
    url: &str,
    key: &str,
    name: &str,
    region: &str,
    header: &str,
) -> (u16, serde_json::Value) {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {key}"))
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .header("mcp-param-region", header)
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": name, "arguments": {"region": region}, "_meta": meta}}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// What a call's answer says, without what differs from call to call (ids, tokens, traces).
fn gist(status: u16, body: &serde_json::Value) -> serde_json::Value {
    match (&body["error"], &body["result"]) {
        (serde_json::Value::Null, result) => json!({
            "status": status,
            "is_error": result["isError"],
            "error": result["structuredContent"]["error"]["code"],
        }),
        (error, _) => json!({"status": status, "code": error["code"]}),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_who_may_not_see_a_tool_gets_the_same_answer_whatever_its_mcp_param_headers() {
    let database = TestDatabase::create().await;
    let fixture = crate::conformance::DirectFixture::start();
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    let setup = OrcaSetup::new(&database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: seer\n      sha256: {}\n      verbs: [read, create, update, delete]\n    - name: blind\n      sha256: {}\n      role: blind\n  roles:\n    blind:\n      verbs: [read, create, update, delete]\n      tools: [\"*\", \"!test_custom_headers\"]\n",
            hash(READER_KEY),
            hash(WRITER_KEY)
        ))
        .with_external(&format!(
            "mcps:\n  conformance:\n    url: {}\n    prefix: \"\"\n    timeout: 30s\n",
            fixture.url
        ));
    let server = setup.http_server(&[]);
    let url = server.url("/mcp");
    let tool = "test_custom_headers";

    // Who may see the tool has its header checked against the body: a mismatch is a 400.
    let (status, body) = call_with_region(&url, READER_KEY, tool, "eu", "us").await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = call_with_region(&url, READER_KEY, tool, "eu", "eu").await;
    assert_eq!(
        (status, &body["result"]["content"][0]["text"]),
        (200, &json!("Called for region eu")),
        "{body}"
    );

    // Who may not gets, with a wrong header, the answer a right one gets: the refusal of a
    // tool outside its role, and nothing about the tool's arguments.
    let right = call_with_region(&url, WRITER_KEY, tool, "eu", "eu").await;
    let wrong = call_with_region(&url, WRITER_KEY, tool, "eu", "us").await;
    assert_eq!(
        gist(right.0, &right.1),
        json!({"status": 200, "is_error": true, "error": "UNAUTHORIZED"}),
        "{right:?}"
    );
    assert_eq!(gist(wrong.0, &wrong.1), gist(right.0, &right.1), "{wrong:?}");
    assert!(!wrong.1.to_string().contains("Mcp-Param"), "{wrong:?}");
    let status = server.stop();
    assert!(status.success(), "orca exited with {status}");
}
