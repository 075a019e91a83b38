//! The gateway over stdio, through rmcp's client spawning the built binary.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, text_of, wait_for_row};

#[tokio::test]
async fn stdio_initialize_names_orca_its_servers_and_its_capabilities() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let info = client.peer_info().expect("server info after initialize").clone();
    assert_eq!(info.server_info.as_ref().unwrap().name, "orca");
    assert_eq!(info.server_info.as_ref().unwrap().version, env!("CARGO_PKG_VERSION"));
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(instructions.contains("Servers behind it: orca, postgres, data"), "{instructions}");
    assert!(info.capabilities.tools.is_some());
    assert!(info.capabilities.resources.is_some() && info.capabilities.prompts.is_some());
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "list_servers",
            "submit_feedback",
            "generate_sql",
            "execute_sql",
            "add_records",
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
            "preview_masked",
            "materialize_sql",
            "create_view"
        ]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn stdio_call_returns_structured_content_text_and_meta_and_is_tracked() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let result = call(
        &client,
        "list_servers",
        json!({}),
        Some(json!({"agent_id": "agent-7", "user_id": "u-1"})),
    )
    .await
    .unwrap();
    assert_eq!(result.is_error, Some(false));
    let structured = result.structured_content.clone().unwrap();
    assert_eq!(structured["servers"][0]["name"], "orca");
    assert_eq!(structured["servers"][0]["status"], "running");
    assert_eq!(structured["servers"][0]["tool_count"], 2);
    assert_eq!(structured["servers"][1]["name"], "postgres");
    assert_eq!(structured["servers"][1]["tool_count"], 5);
    // Every entry carries `version`: orca's own for its internal servers, null when unknown.
    for server in structured["servers"].as_array().unwrap() {
        match (server["name"].as_str().unwrap(), server["status"].as_str().unwrap()) {
            (_, "disabled") => assert_eq!(server["version"], Value::Null, "{server}"),
            _ => assert_eq!(server["version"], env!("CARGO_PKG_VERSION"), "{server}"),
        }
    }
    assert_eq!(serde_json::from_str::<Value>(&text_of(&result)).unwrap(), structured);
    // The stdio principal, with every verb and neither an OAuth client nor a role.
    assert_eq!(
        structured["caller"],
        json!({"principal": "local", "client": null, "role": null, "verbs": ["read", "create", "update", "delete"]})
    );
    let meta = meta_of(&result);
    let execution_id: Uuid = meta["execution_id"].as_str().unwrap().parse().unwrap();
    let feedback_token: Uuid = meta["feedback_token"].as_str().unwrap().parse().unwrap();
    let trace_id = meta["trace_id"].as_str().unwrap().to_owned();
    assert_eq!(trace_id.len(), 32);
    client.cancel().await.unwrap();

    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", execution_id).await;
    let row: (String, String, String, Option<String>, Option<String>, String, String, Uuid, Value) = sqlx::query_as(
        "SELECT mcp_name, tool_name, principal, agent_id, user_id, transport, status, feedback_token, response_data \
         FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(execution_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(row.0, "orca");
    assert_eq!(row.1, "list_servers");
    assert_eq!(row.2, "local");
    assert_eq!(row.3.as_deref(), Some("agent-7"));
    assert_eq!(row.4.as_deref(), Some("u-1"));
    assert_eq!(row.5, "stdio");
    assert_eq!(row.6, "success");
    assert_eq!(row.7, feedback_token);
    assert_eq!(row.8, structured);
    let stored_trace: String =
        sqlx::query_scalar("SELECT trace_id FROM orca.mcp_executions WHERE id = $1")
            .bind(execution_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored_trace, trace_id);
}

#[tokio::test]
async fn stdio_unknown_tool_is_json_rpc_invalid_params() {
    let database = TestDatabase::create().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let error = call(&client, "drop_everything", json!({}), None).await.unwrap_err();
    match error {
        rmcp::service::ServiceError::McpError(data) => {
            assert_eq!(data.code.0, -32602);
            assert_eq!(data.message, "unknown tool: drop_everything");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn stdio_bad_arguments_give_an_is_error_result_with_the_taxonomy_error() {
    let database = TestDatabase::create().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let result = call(&client, "list_servers", json!({"verbose": true}), None).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    let error = &result.structured_content.clone().unwrap()["error"];
    assert_eq!(error["code"], "INVALID_INPUT");
    assert_eq!(error["retryable"], false);
    assert!(error["message"].as_str().unwrap().contains("verbose"), "{error}");
    let meta = meta_of(&result);
    assert_eq!(error["trace_id"], meta["trace_id"]);
    let execution_id: Uuid = meta["execution_id"].as_str().unwrap().parse().unwrap();
    client.cancel().await.unwrap();

    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1", execution_id)
        .await;
    let (status, code): (String, String) =
        sqlx::query_as("SELECT e.status, f.error_code FROM orca.mcp_executions e JOIN orca.mcp_failures f ON f.execution_id = e.id WHERE e.id = $1")
            .bind(execution_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((status.as_str(), code.as_str()), ("error", "INVALID_INPUT"));
}

#[tokio::test]
async fn stdio_mode_writes_nothing_but_protocol_to_stdout() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let mut child = setup
        .command()
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_servers", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "missing", "arguments": {}}}),
    ];
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        // Responses may come in any order; stop once all four are in.
        let mut lines = Vec::new();
        let mut answered = std::collections::BTreeSet::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(message) = serde_json::from_str::<Value>(&line)
                && let Some(id) = message["id"].as_i64()
            {
                answered.insert(id);
            }
            lines.push(line);
            if answered.len() == 4 {
                break;
            }
        }
        lines
    });
    let lines = reader.join().unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "orca exited with {status} after stdin closed");
    assert_eq!(lines.len(), 4, "one response per request: {lines:#?}");
    for line in &lines {
        let message: Value =
            serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON-RPC on stdout: {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
    let missing = lines
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|message| message["id"] == 4)
        .unwrap();
    assert_eq!(missing["error"]["code"], -32602);
}
