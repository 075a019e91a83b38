//! A 2026-07-28 client (no back channel) calling an external server that asks the 2025 way
//! during its call: orca answers with an `InputRequiredResult` and carries the client's
//! `inputResponses` back to the server, round after round, with a sealed `requestState` that
//! nobody else can use; a request for a capability the client did not declare becomes `-32021`.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams,
    Implementation, InputRequiredResult, InputResponses, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ResultType, UpdateTaskParams,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::conformance::DirectFixture;
use crate::support::{OrcaSetup, TestDatabase, meta_of, text_of, wait_for_row};

pub(crate) const ALICE: &str = "orca_test_alice_key";
const BOB: &str = "orca_test_bob_key";
pub(crate) const MULTI_ROUND: &str = "test_input_required_result_multi_round";

/// A 2026-07-28 client that can answer elicitation (and nothing else) when asked.
#[derive(Clone)]
pub(crate) struct Elicits;

impl rmcp::ClientHandler for Elicits {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {}})).unwrap();
        ClientConfig::new(capabilities, Implementation::new("elicits", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

async fn modern_client(url: &str, key: &str) -> RunningService<RoleClient, Elicits> {
    crate::support::modern_client(Elicits, url, Some(key)).await
}

/// orca with alice's and bob's keys (every verb) in front of the fixture at `fixture_url`, with
/// no prefix.
pub(crate) fn alice_and_bob(database: &TestDatabase, fixture_url: &str) -> OrcaSetup {
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    OrcaSetup::new(&database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: alice\n      sha256: {}\n      verbs: [read, create, update, delete]\n    - name: bob\n      sha256: {}\n      verbs: [read, create, update, delete]\n",
            hash(ALICE),
            hash(BOB)
        ))
        .with_external(&format!(
            "mcps:\n  conformance:\n    url: {fixture_url}\n    prefix: \"\"\n    timeout: 30s\n"
        ))
}

/// One round: the call with `answers` under their keys and the state of the previous round.
pub(crate) async fn round(
    client: &RunningService<RoleClient, Elicits>,
    answers: &[(&str, Value)],
    state: Option<&str>,
) -> Result<CallToolResponse, rmcp::ServiceError> {
    let mut params = CallToolRequestParams::new(MULTI_ROUND);
    if !answers.is_empty() {
        let responses: InputResponses =
            answers.iter().map(|(key, answer)| ((*key).to_owned(), answer.clone())).collect();
        params = params.with_input_responses(responses);
    }
    if let Some(state) = state {
        params = params.with_request_state(state);
    }
    client.call_tool_once(params).await
}

#[track_caller]
pub(crate) fn input_required(response: CallToolResponse) -> InputRequiredResult {
    match response {
        CallToolResponse::InputRequired(input) => input,
        other => panic!("expected an InputRequiredResult, got {other:?}"),
    }
}

#[track_caller]
pub(crate) fn refused(outcome: Result<CallToolResponse, rmcp::ServiceError>) -> String {
    match outcome {
        Err(rmcp::ServiceError::McpError(error)) => {
            assert_eq!(error.code.0, -32602, "{error:?}");
            error.message.into_owned()
        }
        other => panic!("expected requestState to be refused, got {other:?}"),
    }
}

pub(crate) fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_client_answers_an_upstreams_questions_round_by_round_and_nobody_else_can() {
    let database = TestDatabase::create().await;
    let fixture = DirectFixture::start();
    let setup = alice_and_bob(&database, &fixture.url);
    let server = setup.http_server(&[]);
    let alice = modern_client(&server.url("/mcp"), ALICE).await;
    let bob = modern_client(&server.url("/mcp"), BOB).await;

    // Round 1: the server asks the name, under the key it named.
    let first = input_required(round(&alice, &[], None).await.unwrap());
    let requests = first.input_requests.clone().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["step1"], "{first:?}");
    let request = serde_json::to_value(&requests["step1"]).unwrap();
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["message"], "Step 1: What is your name?", "{request}");
    let state = first.request_state.clone().unwrap();
    let name = [("step1", accept(json!({"name": "Alice"})))];

    // A state altered by a byte, or presented by another caller, resumes nothing.
    let tampered = format!("{state}-TAMPERED");
    refused(round(&alice, &name, Some(&tampered)).await);
    refused(round(&bob, &name, Some(&state)).await);

    // Round 2: the answer reaches the server, which asks the next question under a new state.
    let second = input_required(round(&alice, &name, Some(&state)).await.unwrap());
    assert_eq!(second.input_requests.as_ref().unwrap().keys().collect::<Vec<_>>(), ["step2"]);
    let next_state = second.request_state.clone().unwrap();
    assert_ne!(next_state, state);
    // The first round's state is spent.
    let spent = refused(round(&alice, &name, Some(&state)).await);
    assert!(spent.contains("earlier round"), "{spent}");

    // Round 3: the call's own answer, built from both rounds' answers.
    let color = [("step2", accept(json!({"color": "blue"})))];
    let CallToolResponse::Complete(result) =
        round(&alice, &color, Some(&next_state)).await.unwrap()
    else {
        panic!("expected the call's result");
    };
    assert_eq!(text_of(&result), "Alice likes blue");
    // 2026-07-28 names every result's type, a relayed 2025 result's too.
    assert_eq!(result.result_type, Some(ResultType::COMPLETE), "{result:?}");

    // The whole conversation is one call in tracking, under the tool's real name.
    let execution_id: uuid::Uuid =
        meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap();
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", execution_id).await;
    let (rows, status, principal): (i64, String, String) = sqlx::query_as(
        "SELECT count(*) OVER (), status, principal FROM orca.mcp_executions WHERE tool_name = $1",
    )
    .bind(MULTI_ROUND)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((rows, status.as_str(), principal.as_str()), (1, "success", "alice"));

    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    let status = server.stop();
    assert!(status.success(), "orca exited with {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_asking_for_a_capability_the_client_lacks_fails_the_call_with_32021() {
    let database = TestDatabase::create().await;
    let fixture = DirectFixture::start();
    let setup = OrcaSetup::new(&database.url).with_external(&format!(
        "mcps:\n  conformance:\n    url: {}\n    prefix: \"\"\n    timeout: 30s\n",
        fixture.url
    ));
    let server = setup.http_server(&[]);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "test_missing_capability")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "test_missing_capability", "arguments": {}, "_meta": meta}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["id"], 7, "{body}");
    assert_eq!(body["error"]["code"], -32021, "{body}");
    assert_eq!(body["error"]["data"]["requiredCapabilities"], json!({"sampling": {}}), "{body}");
    let status = server.stop();
    assert!(status.success(), "orca exited with {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_modern_client_answers_what_an_upstream_asks_while_a_resource_is_read() {
    let database = TestDatabase::create().await;
    let fixture = DirectFixture::start();
    let setup = OrcaSetup::new(&database.url).with_external(&format!(
        "mcps:\n  conformance:\n    url: {}\n    prefix: \"\"\n    timeout: 30s\n",
        fixture.url
    ));
    let server = setup.http_server(&[]);
    let client = crate::support::modern_client(Elicits, &server.url("/mcp"), None).await;
    let uri = "test://input-required-resource";
    let first = client.read_resource_once(ReadResourceRequestParams::new(uri)).await.unwrap();
    let ReadResourceResponse::InputRequired(input) = first else {
        panic!("expected an InputRequiredResult, got {first:?}");
    };
    assert_eq!(input.input_requests.as_ref().unwrap().keys().collect::<Vec<_>>(), ["reader"]);
    let answers = InputResponses::from([("reader".to_owned(), accept(json!({"name": "Ada"})))]);
    let retry = ReadResourceRequestParams::new(uri)
        .with_input_responses(answers)
        .with_request_state(input.request_state.unwrap());
    let ReadResourceResponse::Complete(result) = client.read_resource_once(retry).await.unwrap()
    else {
        panic!("expected the resource");
    };
    let text = serde_json::to_value(&result.contents[0]).unwrap();
    assert_eq!(text["text"], "Read for Ada", "{text}");
    client.cancel().await.unwrap();
    let status = server.stop();
    assert!(status.success(), "orca exited with {status}");
}

/// A 2026-07-28 client that takes tasks and answers elicitation.
#[derive(Clone)]
pub(crate) struct TakesTasks;

impl rmcp::ClientHandler for TakesTasks {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities = serde_json::from_value(json!({
            "elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}},
        }))
        .unwrap();
        ClientConfig::new(capabilities, Implementation::new("tasks", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

/// `tasks/get` until the task reaches `status`, as JSON.
pub(crate) async fn task_until(
    client: &RunningService<RoleClient, TakesTasks>,
    id: &str,
    status: &str,
) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        let task = client.get_task(GetTaskParams::new(id)).await.unwrap();
        last = serde_json::to_value(&task).unwrap();
        if last["status"] == status {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the task never reached {status}: {last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_call_becomes_its_callers_task_whose_questions_tasks_update_answers() {
    let database = TestDatabase::create().await;
    let fixture = DirectFixture::start();
    let setup = alice_and_bob(&database, &fixture.url);
    let server = setup.http_server(&[]);
    let url = server.url("/mcp");
    let alice = crate::support::modern_client(TakesTasks, &url, Some(ALICE)).await;
    let bob = crate::support::modern_client(TakesTasks, &url, Some(BOB)).await;

    // A quick call is answered at once; one that asks the user becomes a task.
    let quick = alice.call_tool_once(CallToolRequestParams::new("greet")).await.unwrap();
    assert!(matches!(quick, CallToolResponse::Complete(_)), "{quick:?}");
    let mut params = CallToolRequestParams::new("confirm_delete");
    params = params.with_arguments(json!({"filename": "a.txt"}).as_object().unwrap().clone());
    let CallToolResponse::Task(created) = alice.call_tool_once(params).await.unwrap() else {
        panic!("expected a task");
    };
    let id = created.task.task_id.clone();

    // The task is alice's: bob finds no such task, to read or to answer.
    let unknown = bob.get_task(GetTaskParams::new(&id)).await.unwrap_err();
    assert!(unknown.to_string().contains("unknown task"), "{unknown}");
    let answers = InputResponses::from([("confirm".to_owned(), accept(json!({"confirm": true})))]);
    assert!(bob.update_task(UpdateTaskParams::new(&id, answers.clone())).await.is_err());

    // The server's question is the task's input request; tasks/update answers it.
    let waiting = task_until(&alice, &id, "input_required").await;
    assert_eq!(waiting["inputRequests"]["confirm"]["method"], "elicitation/create", "{waiting}");
    alice.update_task(UpdateTaskParams::new(&id, answers)).await.unwrap();
    let done = task_until(&alice, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Deleted", "{done}");

    // One call in tracking, alice's.
    let pool = database.connect().await;
    let recorded = || async {
        sqlx::query_as::<_, (String,)>(
            "SELECT principal FROM orca.mcp_executions WHERE tool_name = 'confirm_delete'",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    crate::support::eventually(
        "the task's call in tracking",
        std::time::Duration::from_secs(20),
        || async { !recorded().await.is_empty() },
    )
    .await;
    assert_eq!(recorded().await, [("alice".to_owned(),)]);
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    let status = server.stop();
    assert!(status.success(), "orca exited with {status}");
}
