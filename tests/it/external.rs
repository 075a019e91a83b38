//! External MCP servers behind orca, against real server processes: the project's own test
//! upstream (`fixtures/upstream`, built with the workspace) over stdio and Streamable HTTP, and
//! the MCP reference server from npm when it can be installed here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::{NotificationContext, RoleClient};
use serde_json::{Value, json};
use sha2::Digest as _;
use uuid::Uuid;

use crate::support::{
    OrcaSetup, TestDatabase, call, eventually, meta_of, run, text_of, tool_names, wait_for_row,
};

/// The test upstream, built next to orca by `cargo build` of the workspace.
fn fixture() -> PathBuf {
    let path = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    assert!(
        path.is_file(),
        "{} is missing: build the workspace (cargo build --workspace)",
        path.display()
    );
    path
}

/// An `external-mcps.yaml` with the fixture over stdio as `fx`, plus `extra` YAML lines for it.
fn fixture_yaml(extra: &str) -> String {
    let timeout = if extra.contains("timeout:") { "" } else { "    timeout: 5s\n" };
    format!(
        "mcps:\n  fx:\n    name: Fixture\n    command: {}\n{timeout}{extra}",
        fixture().display()
    )
}

fn error_of(result: &rmcp::model::CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(true), "expected a failure: {result:?}");
    result.structured_content.clone().expect("structured error")["error"].clone()
}

async fn servers(
    client: &rmcp::service::RunningService<RoleClient, impl rmcp::ClientHandler>,
) -> Vec<Value> {
    let result = call(client, "list_servers", json!({}), None).await.unwrap();
    result.structured_content.unwrap()["servers"].as_array().unwrap().clone()
}

async fn server_named(
    client: &rmcp::service::RunningService<RoleClient, impl rmcp::ClientHandler>,
    name: &str,
) -> Value {
    servers(client).await.into_iter().find(|server| server["name"] == name).expect("server listed")
}

fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has exited; it only waits to be reaped by its parent.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[tokio::test]
async fn external_tools_are_namespaced_called_enhanced_and_tracked() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml(""));
    let client = setup.stdio_client().await;
    let names = tool_names(&client).await;
    for expected in ["list_servers", "execute_sql", "fx_echo", "fx_add", "fx_hang", "fx_count"] {
        assert!(names.contains(&expected.to_owned()), "{expected} missing from {names:?}");
    }
    let info = client.peer_info().unwrap();
    assert!(info.capabilities.tools.as_ref().unwrap().list_changed == Some(true));
    assert!(info.capabilities.prompts.is_some() && info.capabilities.resources.is_some());
    assert!(info.instructions.as_deref().unwrap_or_default().contains("orca, postgres, data, fx"));

    let result = call(&client, "fx_echo", json!({"text": "hello"}), None).await.unwrap();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text_of(&result), "hello");
    let meta = meta_of(&result);
    assert_eq!(meta["enhanced_by"], "orca");
    assert_eq!(meta["upstream"], "fx");
    assert!(meta["response_time_ms"].is_u64(), "{meta:?}");
    let execution_id: Uuid = meta["execution_id"].as_str().unwrap().parse().unwrap();
    assert!(meta["feedback_token"].is_string() && meta["trace_id"].is_string());

    let added = call(&client, "fx_add", json!({"a": 2, "b": 3.5}), None).await.unwrap();
    assert_eq!(added.structured_content.unwrap()["sum"], 5.5);

    // An upstream `isError` result comes through with its content.
    let failed = call(&client, "fx_fail", json!({"message": "no such issue"}), None).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text_of(&failed), "no such issue");
    assert_eq!(meta_of(&failed)["enhanced_by"], "orca");

    let fx = server_named(&client, "fx").await;
    assert_eq!(fx["kind"], "external");
    assert_eq!(fx["status"], "running");
    assert!(fx["description"].as_str().unwrap().contains("(Enhanced)"), "{fx}");
    assert!(fx["description"].as_str().unwrap().contains("orca-test-upstream"), "{fx}");
    assert_eq!(fx["external"]["external_endpoint"], fixture().display().to_string());
    assert!(fx["external"]["orchestrator_enhancements"].as_array().unwrap().len() >= 3);
    assert!(fx["tools"].as_array().unwrap().contains(&json!("fx_echo")));
    assert_eq!(fx["version"], "1.0.0", "the upstream's serverInfo.version: {fx}");
    assert_eq!(fx["external"]["left_out_tools"], json!([]), "{fx}");

    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", execution_id).await;
    let (server, tool, upstream_tool, status): (String, String, Option<String>, String) = sqlx::query_as(
        "SELECT mcp_name, tool_name, upstream_tool_name, status FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(execution_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (server.as_str(), tool.as_str(), upstream_tool.as_deref(), status.as_str()),
        ("fx", "fx_echo", Some("echo"), "success")
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_killed_child_is_restarted_and_the_next_call_succeeds() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml(""));
    let client = setup.stdio_client().await;
    let first: u32 =
        text_of(&call(&client, "fx_pid", json!({}), None).await.unwrap()).parse().unwrap();
    assert!(process_alive(first));
    std::process::Command::new("kill").args(["-KILL", &first.to_string()]).status().unwrap();
    let result = call(&client, "fx_echo", json!({"text": "again"}), None).await.unwrap();
    assert_eq!(text_of(&result), "again", "{result:?}");
    let second: u32 =
        text_of(&call(&client, "fx_pid", json!({}), None).await.unwrap()).parse().unwrap();
    assert_ne!(first, second, "a new process serves");
    let fx = server_named(&client, "fx").await;
    assert_eq!(fx["status"], "running");
    assert!(fx["external"]["restarts"].as_u64().unwrap() >= 1, "{fx}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_hanging_tool_times_out_and_the_server_keeps_serving() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml("    timeout: 1s\n"));
    let client = setup.stdio_client().await;
    let started = Instant::now();
    let result = call(&client, "fx_hang", json!({}), None).await.unwrap();
    let error = error_of(&result);
    assert_eq!(error["code"], "TIMEOUT", "{error}");
    assert!(error["trace_id"].is_string());
    // `hang` has no annotations: its outcome is unknown, so it is not tried again.
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_eq!(
        text_of(&call(&client, "fx_echo", json!({"text": "alive"}), None).await.unwrap()),
        "alive"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn only_calls_that_are_safe_to_repeat_are_retried() {
    let database = TestDatabase::create().await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let yaml =
        fixture_yaml(&format!("    env:\n      FIXTURE_CALL_LOG: {}\n", log.path().display()));
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let client = setup.stdio_client().await;

    // The call ran (it counted) and then the server died: for a tool without read-only or
    // idempotent hints the outcome is unknown, so it is never sent again.
    let result = call(&client, "fx_count_then_crash", json!({}), None).await.unwrap();
    let error = error_of(&result);
    assert_eq!(error["code"], "UPSTREAM_UNAVAILABLE", "{error}");
    assert!(error["message"].as_str().unwrap().contains("may or may not have run"), "{error}");
    let calls = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(calls.lines().filter(|line| *line == "count_then_crash").count(), 1, "{calls}");

    // Let the supervisor bring the server back, so that the next call meets a live one.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let fx = server_named(&client, "fx").await;
        if fx["status"] == "running" && fx["external"]["restarts"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "fx did not come back: {fx}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A read-only tool whose server died under it is repeated on the restarted server.
    let result = call(&client, "fx_flaky_read", json!({}), None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(text_of(&result), "read ok");
    assert_eq!(meta_of(&result)["attempts"], 2);
    let calls = std::fs::read_to_string(log.path()).unwrap();
    assert_eq!(calls.lines().filter(|line| *line == "flaky_read").count(), 2, "{calls}");

    // Both attempts are tracked: the failed one as a failure with its attempt number.
    let execution_id: Uuid = meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap();
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", execution_id).await;
    let attempts: Vec<(i32, String)> = sqlx::query_as(
        "SELECT retry_attempt, error_code FROM orca.mcp_failures WHERE execution_id = $1 ORDER BY retry_attempt",
    )
    .bind(execution_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(attempts, vec![(1, "UPSTREAM_UNAVAILABLE".to_owned())]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_oversized_result_is_result_truncated_and_the_connection_survives() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_external(&fixture_yaml("    max_response_bytes: 20000\n"));
    let client = setup.stdio_client().await;
    let started = Instant::now();
    let error = error_of(&call(&client, "fx_big", json!({"bytes": 200_000}), None).await.unwrap());
    assert_eq!(error["code"], "RESULT_TRUNCATED", "{error}");
    assert_eq!(error["details"]["limit_bytes"], 20000);
    assert!(started.elapsed() < Duration::from_secs(4), "answered at once, not at the timeout");
    let small = call(&client, "fx_big", json!({"bytes": 100}), None).await.unwrap();
    assert_eq!(text_of(&small).len(), 100);
    assert_eq!(server_named(&client, "fx").await["external"]["restarts"], 0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn noise_on_stdout_is_survived_and_a_server_that_is_not_mcp_gets_a_clear_status() {
    let database = TestDatabase::create().await;
    let yaml = format!(
        "{}  broken:\n    command: {}\n    timeout: 5s\n    env:\n      FIXTURE_GARBAGE_ON_START: \"1\"\n",
        fixture_yaml(""),
        fixture().display()
    );
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let client = setup.stdio_client().await;
    // A line of garbage in the middle of a session is dropped; the call still answers.
    let result = call(&client, "fx_garbage", json!({}), None).await.unwrap();
    assert_eq!(text_of(&result), "garbage sent");
    assert_eq!(
        text_of(&call(&client, "fx_echo", json!({"text": "ok"}), None).await.unwrap()),
        "ok"
    );

    // The status names the cause once the first attempt has been judged (it is retried).
    let mut broken = server_named(&client, "broken").await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while !broken["status"].as_str().unwrap().contains("not MCP") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        broken = server_named(&client, "broken").await;
    }
    let status = broken["status"].as_str().unwrap();
    assert!(status.contains("not MCP (JSON-RPC)"), "{status}");
    assert!(status.contains("exited with status 4"), "{status}");
    assert_eq!(broken["tool_count"], 0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn repeated_fast_crashes_are_a_crash_loop_in_list_servers_and_metrics() {
    let database = TestDatabase::create().await;
    let yaml = fixture_yaml("    env:\n      FIXTURE_EXIT_ON_START: \"1\"\n");
    let setup = OrcaSetup::new(&database.url)
        .with_config("http:\n  health_details: names\n")
        .with_external(&yaml);
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    // 250 + 500 + 1000 + 2000 ms of backoff before the fifth failure.
    let mut status = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        status = server_named(&client, "fx").await["status"].as_str().unwrap().to_owned();
        if status.starts_with("crash loop") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(status.starts_with("crash loop"), "{status}");
    assert!(status.contains("exited with status 2"), "{status}");
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("orca_external_server_state{server=\"fx\",state=\"crash_loop\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("orca_external_server_up{server=\"fx\"} 0"), "{metrics}");
    // The internal servers are untouched.
    assert_eq!(server_named(&client, "orca").await["status"], "running");
    client.cancel().await.unwrap();
}

#[derive(Debug, Clone, Default)]
struct CountsListChanges(Arc<AtomicUsize>);

impl rmcp::ClientHandler for CountsListChanges {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn an_upstream_list_change_is_refiltered_and_sent_to_clients_once() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_external(&fixture_yaml("    exclude_tools: [hang]\n    pin: off\n"));
    let handler = CountsListChanges::default();
    let notifications = handler.0.clone();
    let client = setup.stdio_client_with(handler).await;
    let before = tool_names(&client).await;
    assert!(!before.contains(&"fx_extra".to_owned()) && !before.contains(&"fx_hang".to_owned()));
    let result = call(&client, "fx_toggle_extra", json!({}), None).await.unwrap();
    assert_eq!(text_of(&result), "extra on");
    eventually("tools/list_changed from orca", Duration::from_secs(10), || async {
        notifications.load(Ordering::SeqCst) >= 1
    })
    .await;
    let after = tool_names(&client).await;
    assert!(after.contains(&"fx_extra".to_owned()), "{after:?}");
    assert!(!after.contains(&"fx_hang".to_owned()), "the filter still applies: {after:?}");
    assert_eq!(text_of(&call(&client, "fx_extra", json!({}), None).await.unwrap()), "extra!");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(notifications.load(Ordering::SeqCst), 1, "one debounced notification");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn each_roles_tools_list_follows_an_upstreams_list_change_at_once() {
    let database = TestDatabase::create().await;
    let hash = |key: &str| hex::encode(sha2::Sha256::digest(key.as_bytes()));
    let keys = [("everything", None), ("fixture", Some("fixture")), ("no-extra", Some("no_extra"))];
    let mut auth = String::from("auth:\n  api_keys:\n");
    for (name, role) in keys {
        let grant = match role {
            Some(role) => format!("role: {role}"),
            None => "verbs: [read, create, update, delete]".to_owned(),
        };
        auth.push_str(&format!(
            "    - name: {name}\n      sha256: {}\n      {grant}\n",
            hash(name)
        ));
    }
    auth.push_str(
        "  roles:\n    fixture:\n      verbs: [read, create, update, delete]\n      tools: [\"fx_*\", \"!fx_hang\"]\n    no_extra:\n      verbs: [read, create, update, delete]\n      tools: [\"server:fx\", \"!fx_extra\"]\n",
    );
    // The tool added later is served at once (`pin: off`; held under `hold`, `pinning.rs`).
    let setup = OrcaSetup::new(&database.url)
        .with_config(&auth)
        .with_external(&fixture_yaml("    pin: off\n"));
    let server = setup.http_server(&[]);
    let lists = || async {
        let mut lists = Vec::new();
        for (key, _) in keys {
            let client = server.client(Some(key)).await;
            let names = tool_names(&client).await;
            client.cancel().await.unwrap();
            lists.push(names);
        }
        lists
    };
    let has_extra = |lists: &[Vec<String>]| -> Vec<bool> {
        lists.iter().map(|names| names.contains(&"fx_extra".to_owned())).collect()
    };
    // Listed once before the change, so that each access's list is kept.
    let before = lists().await;
    assert_eq!(has_extra(&before), [false, false, false], "{before:?}");
    assert!(
        before[1].iter().all(|name| name.starts_with("fx_") && name != "fx_hang"),
        "{before:?}"
    );
    assert!(before[2].contains(&"fx_hang".to_owned()), "{before:?}");
    let client = server.client(Some("everything")).await;
    for (turn, shown) in [("extra on", [true, true, false]), ("extra off", [false, false, false])] {
        let toggled = call(&client, "fx_toggle_extra", json!({}), None).await.unwrap();
        assert_eq!(text_of(&toggled), turn);
        eventually(&format!("every list after {turn}"), Duration::from_secs(20), || async {
            has_extra(&lists().await) == shown
        })
        .await;
    }
    client.cancel().await.unwrap();
    let status = server.stop();
    assert!(status.success(), "orca exited with {status}");
}

#[tokio::test]
async fn a_tool_an_upstream_adds_under_a_name_already_served_is_left_out_and_listed() {
    let database = TestDatabase::create().await;
    // With the prefix `list`, the tool `servers` that toggle_extra adds is exposed as
    // `list_servers`, which orca's own server serves.
    let yaml = fixture_yaml(
        "    prefix: list\n    pin: off\n    env:\n      FIXTURE_TOGGLED_NAME: servers\n",
    );
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let client = setup.stdio_client().await;
    assert_eq!(
        text_of(&call(&client, "list_toggle_extra", json!({}), None).await.unwrap()),
        "extra on"
    );
    eventually("list_servers names the tool left out", Duration::from_secs(20), || async {
        server_named(&client, "fx").await["external"]["left_out_tools"]
            == json!([{"tool": "list_servers", "taken_by": "an internal server"}])
    })
    .await;
    // The name still belongs to orca's own tool, with its arguments going nowhere else.
    let answered = call(&client, "list_servers", json!({}), None).await.unwrap();
    assert!(answered.structured_content.unwrap()["servers"].is_array(), "answered by orca itself");
    assert_eq!(tool_names(&client).await.iter().filter(|name| *name == "list_servers").count(), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn resource_reads_are_recorded_like_tool_calls_with_their_uri() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml(""));
    let client = setup.stdio_client().await;
    let pool = database.connect().await;
    let cases = [
        ("orca://fx/fixture://items/42", "fx", "success", None),
        ("res://catalogs", "data", "success", None),
        ("res://table/nope/public/nothing", "data", "error", Some("NOT_FOUND")),
    ];
    for (uri, server, status, code) in cases {
        let read = client.read_resource(ReadResourceRequestParams::new(uri)).await;
        let execution_id: Uuid = match (&read, code) {
            (Ok(result), None) => {
                let meta = result.meta.clone().unwrap_or_default().0;
                assert!(meta["feedback_token"].is_string(), "{meta:?}");
                meta["execution_id"].as_str().unwrap().parse().unwrap()
            }
            (Err(rmcp::ServiceError::McpError(error)), Some(_)) => {
                let trace_id =
                    error.data.as_ref().unwrap()["error"]["trace_id"].as_str().unwrap().to_owned();
                crate::support::eventually(
                    "the failed read is recorded",
                    Duration::from_secs(20),
                    || async {
                        sqlx::query("SELECT 1 FROM orca.mcp_executions WHERE trace_id = $1")
                            .bind(&trace_id)
                            .fetch_optional(&pool)
                            .await
                            .unwrap()
                            .is_some()
                    },
                )
                .await;
                sqlx::query_scalar("SELECT id FROM orca.mcp_executions WHERE trace_id = $1")
                    .bind(&trace_id)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
            other => panic!("{uri}: unexpected {other:?}"),
        };
        wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", execution_id).await;
        let (row_server, tool, arguments, row_status, row_code): (String, String, Value, String, Option<String>) =
            sqlx::query_as(
                "SELECT mcp_name, tool_name, request_data, status, error_code FROM orca.mcp_executions WHERE id = $1",
            )
            .bind(execution_id)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(
            (row_server.as_str(), tool.as_str(), row_status.as_str(), row_code.as_deref()),
            (server, "resources/read", status, code),
            "{uri}"
        );
        assert_eq!(arguments, json!({"uri": uri}));
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn resources_and_prompts_are_proxied_under_the_prefix() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml(""));
    let client = setup.stdio_client().await;
    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|resource| resource.uri.as_str()).collect();
    assert!(uris.contains(&"orca://fx/fixture://greeting"), "{uris:?}");
    let read = client
        .read_resource(ReadResourceRequestParams::new("orca://fx/fixture://greeting"))
        .await
        .unwrap();
    let text = serde_json::to_value(&read.contents[0]).unwrap();
    assert_eq!(text["text"], "hello from the fixture");
    assert_eq!(text["uri"], "orca://fx/fixture://greeting");
    let templates = client.list_all_resource_templates().await.unwrap();
    assert!(
        templates.iter().any(|template| template.uri_template == "orca://fx/fixture://items/{id}")
    );
    let item = client
        .read_resource(ReadResourceRequestParams::new("orca://fx/fixture://items/42"))
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(&item.contents[0]).unwrap()["text"], "item 42");
    assert!(
        client.read_resource(ReadResourceRequestParams::new("orca://nope/x://y")).await.is_err()
    );

    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
    assert!(names.contains(&"fx_summarize") && names.contains(&"fx_greet"), "{names:?}");
    let mut arguments = serde_json::Map::new();
    arguments.insert("topic".into(), json!("tides"));
    let prompt = client
        .get_prompt(GetPromptRequestParams::new("fx_summarize").with_arguments(arguments))
        .await
        .unwrap();
    let message = serde_json::to_value(&prompt.messages[0]).unwrap();
    assert!(message.to_string().contains("Summarize tides in one paragraph."), "{message}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn verbs_come_from_annotations_unless_the_entry_sets_them() {
    let database = TestDatabase::create().await;
    let reader_key = "orca_test_reader_key_0123456789abcdef";
    let hash = hex_sha256(reader_key);
    let setup = OrcaSetup::new(&database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: reader\n      sha256: {hash}\n      verbs: [read]\n"
        ))
        .with_external(&fixture_yaml("    tool_verbs:\n      pid: delete\n"));
    let server = setup.http_server(&[]);
    let client = server.client(Some(reader_key)).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"fx_echo".to_owned()), "read-only hint: {names:?}");
    for hidden in ["fx_count", "fx_crash", "fx_hang", "fx_pid"] {
        assert!(!names.contains(&hidden.to_owned()), "{hidden} needs more than read: {names:?}");
    }
    let refused = call(&client, "fx_count", json!({}), None).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    let error = refused.structured_content.unwrap()["error"].clone();
    assert_eq!(error["code"], "UNAUTHORIZED", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("`reader` may not use `fx_count`: it needs the `create` verb"),
        "{error}"
    );
    client.cancel().await.unwrap();
}

fn hex_sha256(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[tokio::test]
async fn missing_credentials_disable_only_that_server_and_never_leak() {
    let database = TestDatabase::create().await;
    let yaml = format!(
        "{}    credentials:\n      api_key_env: FX_API_KEY\n  needs-key:\n    command: {}\n    credentials:\n      token_env: NEEDS_KEY_TOKEN\n",
        fixture_yaml(""),
        fixture().display()
    );
    let mut setup = OrcaSetup::new(&database.url).with_external(&yaml);
    setup.env.insert("FX_API_KEY".into(), "fx-very-secret-value".into());
    let client = setup.stdio_client().await;
    // The credential reaches the stdio server as an environment variable.
    let seen = call(&client, "fx_env", json!({"name": "FX_API_KEY"}), None).await.unwrap();
    assert_eq!(text_of(&seen), "fx-very-secret-value");
    // orca's own secrets stay out of the child's environment; what programs need is there.
    for private in ["ORCA_DATABASE_URL", "DATABASE_URL", "ORCA_HOME"] {
        let value = call(&client, "fx_env", json!({"name": private}), None).await.unwrap();
        assert_eq!(text_of(&value), "<unset>", "{private}");
    }
    let path = call(&client, "fx_env", json!({"name": "PATH"}), None).await.unwrap();
    assert_ne!(text_of(&path), "<unset>");
    let needs = server_named(&client, "needs-key").await;
    assert_eq!(needs["status"], "missing credentials: NEEDS_KEY_TOKEN");
    let (code, stdout, stderr) = run(&setup, &["doctor"]);
    assert!(
        stdout.contains("needs-key (missing credentials: NEEDS_KEY_TOKEN)"),
        "{code} {stdout}{stderr}"
    );
    assert!(!stdout.contains("fx-very-secret-value") && !stderr.contains("fx-very-secret-value"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_tool_name_taken_twice_stops_start_up_naming_both() {
    let database = TestDatabase::create().await;
    let yaml = format!(
        "mcps:\n  submit:\n    command: {}\n    env:\n      FIXTURE_EXTRA_TOOL: feedback\n",
        fixture().display()
    );
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let output = setup
        .command()
        .args(["serve", "--stdio"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("tool `submit_feedback` is declared by both"), "{stderr}");
    assert!(stderr.contains("an internal server") && stderr.contains("`submit`"), "{stderr}");
}

#[tokio::test]
async fn no_child_process_remains_after_shutdown() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_external(&fixture_yaml(""));
    let client = setup.stdio_client().await;
    let child: u32 =
        text_of(&call(&client, "fx_pid", json!({}), None).await.unwrap()).parse().unwrap();
    let grandchild: u32 =
        text_of(&call(&client, "fx_spawn_grandchild", json!({}), None).await.unwrap())
            .parse()
            .unwrap();
    assert!(process_alive(child) && process_alive(grandchild));
    // Closing stdin ends orca; it stops its servers and their process groups on the way out.
    client.cancel().await.unwrap();
    eventually("the upstream and what it started to be gone", Duration::from_secs(15), || async {
        !process_alive(child) && !process_alive(grandchild)
    })
    .await;
}

/// Start the fixture as a Streamable HTTP server on `port` (0: any) and return it with its URL.
pub(crate) fn start_http_fixture(port: u16, token: &str) -> (std::process::Child, String) {
    start_http_fixture_with(port, &[("FIXTURE_REQUIRE_BEARER", token)])
}

/// Start the fixture as a Streamable HTTP server on `port` (0: any) with `env` set.
pub(crate) fn start_http_fixture_with(
    port: u16,
    env: &[(&str, &str)],
) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(fixture())
        .args(["--http", &format!("127.0.0.1:{port}")])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("the fixture printed its address").unwrap();
        if let Some(url) = line.strip_prefix("listening on ") {
            break url.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

#[tokio::test]
async fn an_http_upstream_gets_its_bearer_token_and_is_reinitialized_after_it_restarts() {
    let database = TestDatabase::create().await;
    let (mut upstream, url) = start_http_fixture(0, "tok-123");
    let port: u16 = url.rsplit(':').next().unwrap().trim_end_matches("/mcp").parse().unwrap();
    let yaml = format!(
        "mcps:\n  web:\n    url: {url}\n    timeout: 5s\n    credentials:\n      token_env: WEB_TOKEN\n"
    );
    let mut setup = OrcaSetup::new(&database.url).with_external(&yaml);
    setup.env.insert("WEB_TOKEN".into(), "tok-123".into());
    let client = setup.stdio_client().await;
    let headers: Value = serde_json::from_str(&text_of(
        &call(&client, "web_headers", json!({}), None).await.unwrap(),
    ))
    .unwrap();
    assert_eq!(headers["authorization"], "Bearer tok-123");
    assert_eq!(
        text_of(&call(&client, "web_echo", json!({"text": "one"}), None).await.unwrap()),
        "one"
    );

    // The upstream restarts and forgets its sessions: the next call meets a 404, orca
    // initializes a new session and the call goes through.
    upstream.kill().unwrap();
    upstream.wait().unwrap();
    let (mut restarted, _) = start_http_fixture(port, "tok-123");
    let result = call(&client, "web_echo", json!({"text": "two"}), None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(text_of(&result), "two");
    client.cancel().await.unwrap();
    restarted.kill().unwrap();
    let _ = restarted.wait();
}

/// The MCP reference server from npm, installed once per target directory. `None` (with the
/// reason printed) when npm or the registry is not reachable here.
#[allow(clippy::print_stderr, reason = "a skipped test says why, on the test's own stderr")]
pub(crate) fn reference_server() -> Option<PathBuf> {
    let root = Path::new(crate::support::orca::BINARY).parent()?.join("npm-reference-server");
    let entry = root.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let lock_path = root.with_extension("lock");
    std::fs::create_dir_all(&root).ok()?;
    let lock = std::fs::File::create(&lock_path).ok()?;
    lock.lock().ok()?;
    if !entry.is_file() {
        let output = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&root)
            .arg("@modelcontextprotocol/server-everything")
            .output();
        match output {
            Ok(output) if output.status.success() => {}
            Ok(output) => {
                eprintln!(
                    "skipped: npm install of @modelcontextprotocol/server-everything failed: {}",
                    String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or_default()
                );
                return None;
            }
            Err(error) => {
                eprintln!("skipped: npm is not available: {error}");
                return None;
            }
        }
    }
    if entry.is_file() {
        Some(entry)
    } else {
        eprintln!("skipped: the installed server-everything has no {}", entry.display());
        None
    }
}

#[tokio::test]
async fn the_mcp_reference_server_from_npm_works_behind_orca() {
    let Some(entry) = reference_server() else { return };
    let database = TestDatabase::create().await;
    let yaml = format!(
        "mcps:\n  everything:\n    command: node\n    args: [\"{}\", \"stdio\"]\n    timeout: 20s\n",
        entry.display()
    );
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let client = setup.stdio_client().await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"everything_echo".to_owned()), "{names:?}");
    let result =
        call(&client, "everything_echo", json!({"message": "hi there"}), None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(text_of(&result).contains("hi there"));
    assert_eq!(meta_of(&result)["upstream"], "everything");
    let added = call(&client, "everything_get-sum", json!({"a": 2, "b": 3}), None).await;
    if let Ok(added) = added {
        assert!(text_of(&added).contains('5'), "{added:?}");
    }
    let prompts = client.list_all_prompts().await.unwrap();
    // The reference server's prompts, under its prefix, next to the data server's own.
    let theirs: Vec<&str> = prompts
        .iter()
        .map(|prompt| prompt.name.as_str())
        .filter(|name| !name.starts_with("ask_for_"))
        .collect();
    assert!(
        !theirs.is_empty() && theirs.iter().all(|name| name.starts_with("everything_")),
        "{theirs:?}"
    );
    // The reference server's resources, under its prefix, after the data server's res:// ones.
    let resources = client.list_all_resources().await.unwrap();
    let theirs: Vec<_> =
        resources.iter().filter(|resource| !resource.uri.starts_with("res://")).collect();
    if let Some(resource) = theirs.first() {
        assert!(resource.uri.starts_with("orca://everything/"), "{resource:?}");
        let read = client
            .read_resource(ReadResourceRequestParams::new(resource.uri.clone()))
            .await
            .unwrap();
        assert!(!read.contents.is_empty());
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_mcp_reference_server_over_sse_works_behind_orca() {
    use std::io::BufRead;
    let Some(entry) = reference_server() else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = std::process::Command::new("node")
        .arg(&entry)
        .arg("sse")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(server.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("the reference server said it runs").unwrap();
        if line.contains("running on port") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let database = TestDatabase::create().await;
    let yaml =
        format!("mcps:\n  legacy:\n    url: http://127.0.0.1:{port}/sse\n    timeout: 20s\n");
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let client = setup.stdio_client().await;
    let legacy = server_named(&client, "legacy").await;
    assert_eq!(legacy["status"], "running", "{legacy}");
    assert_eq!(legacy["external"]["transport"], "sse");
    let result = call(&client, "legacy_echo", json!({"message": "over sse"}), None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(text_of(&result).contains("over sse"));
    client.cancel().await.unwrap();
    let _ = server.kill();
    let _ = server.wait();
}

#[tokio::test]
async fn awkward_upstream_names_are_cleaned_shortened_and_still_reach_their_tool() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_external(&fixture_yaml("    env:\n      FIXTURE_ODD_NAMES: \"1\"\n"));
    let client = setup.stdio_client().await;
    let names = tool_names(&client).await;
    let weird = names
        .iter()
        .find(|name| name.starts_with("fx_weird_tool_name_x_"))
        .expect("weird name listed");
    let long = names
        .iter()
        .find(|name| name.starts_with("fx_a_really_long_tool_name_"))
        .expect("long name listed");
    for name in names.iter().filter(|name| name.starts_with("fx_")) {
        assert!(name.len() <= 64, "{name}");
        assert!(
            name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-'),
            "{name}"
        );
    }
    assert_eq!(long.len(), 64);
    assert_eq!(text_of(&call(&client, weird, json!({}), None).await.unwrap()), "weird");
    assert_eq!(text_of(&call(&client, long, json!({}), None).await.unwrap()), "long");
    // The same names after a restart of the upstream: the mapping is stable.
    let pid: u32 =
        text_of(&call(&client, "fx_pid", json!({}), None).await.unwrap()).parse().unwrap();
    std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert_eq!(
        text_of(&call(&client, "fx_echo", json!({"text": "back"}), None).await.unwrap()),
        "back"
    );
    assert_eq!(tool_names(&client).await, names);
    client.cancel().await.unwrap();
}
