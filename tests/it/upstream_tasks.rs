//! A 2026-07-28 upstream's own tasks (SEP-2663): orca declares the tasks extension to it, and a
//! call it answers with a task is followed to the end as the same call (`tasks/get`), what the
//! task asks is asked of the caller and answered with `tasks/update`, and the task is cancelled
//! (`tasks/cancel`) when orca stops waiting.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitResult,
    ElicitationAction, GetTaskParams, Implementation, InputResponses, ProgressNotificationParam,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use serde_json::json;

use crate::support::{OrcaSetup, TestDatabase, call, eventually, recorded_under, text_of};

/// orca in front of the test upstream as `fx`, spoken to on 2026-07-28, which makes every
/// call a task; its calls are logged to the returned file.
fn tasks_setup(database: &TestDatabase, timeout: &str) -> (OrcaSetup, tempfile::NamedTempFile) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let fixture = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    let setup = OrcaSetup::new(&database.url).with_external(&format!(
        "mcps:\n  fx:\n    command: {}\n    protocol: 2026-07-28\n    timeout: {timeout}\n    env:\n      FIXTURE_TASKS: \"1\"\n      FIXTURE_ASKS: \"1\"\n      FIXTURE_CALL_LOG: {}\n",
        fixture.display(),
        log.path().display()
    ));
    (setup, log)
}

/// A 2025 client that gives its name when asked.
#[derive(Clone)]
struct Ada;

impl rmcp::ClientHandler for Ada {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(capabilities, Implementation::new("ada", "1"))
    }

    async fn create_elicitation(
        &self,
        _params: rmcp::model::ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({"name": "Ada"}));
        Ok(result)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstreams_task_is_followed_to_its_end_and_its_questions_reach_a_2025_caller() {
    let database = TestDatabase::create().await;
    let (setup, log) = tasks_setup(&database, "10s");
    let client = setup.stdio_client_with(Ada).await;
    let echoed = call(&client, "fx_echo", json!({"text": "through a task"}), None).await.unwrap();
    assert_eq!(text_of(&echoed), "through a task");
    let asked = client.peer().call_tool(CallToolRequestParams::new("fx_ask_name")).await.unwrap();
    assert_eq!(text_of(&asked), "Hello, Ada");
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(logged.contains("task echo") && logged.contains("task ask_name"), "{logged}");

    // The task, with its question, is one call, recorded under the tool's name.
    let (rows, status) = recorded_under(&database, &asked, "fx_ask_name").await;
    assert_eq!((rows, status.as_str()), (1, "success"));

    // A task that fails with a protocol error fails the call with it.
    let failed = call(&client, "fx_echo", json!({"wrong": 1}), None).await.unwrap();
    assert_eq!(failed.is_error, Some(true), "{failed:?}");
    let error = &failed.structured_content.as_ref().unwrap()["error"];
    assert_eq!(error["details"]["jsonrpc_code"], -32602, "{error}");
    client.cancel().await.unwrap();
}

/// A 2026-07-28 client.
#[derive(Clone)]
struct Modern;

impl rmcp::ClientHandler for Modern {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(capabilities, Implementation::new("modern", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_caller_answers_an_upstreams_task_by_retrying_its_call() {
    let database = TestDatabase::create().await;
    let (setup, log) = tasks_setup(&database, "10s");
    let server = setup.http_server(&[]);
    let client = crate::support::modern_client(Modern, &server.url("/mcp"), None).await;
    let first = client.call_tool_once(CallToolRequestParams::new("fx_ask_name")).await.unwrap();
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected an InputRequiredResult, got {first:?}");
    };
    let requests = asked.input_requests.clone().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["name"], "{asked:?}");
    let answers: InputResponses =
        [("name".to_owned(), json!({"action": "accept", "content": {"name": "Grace"}}))]
            .into_iter()
            .collect();
    let again = CallToolRequestParams::new("fx_ask_name")
        .with_input_responses(answers)
        .with_request_state(asked.request_state.clone().unwrap());
    let CallToolResponse::Complete(result) = client.call_tool_once(again).await.unwrap() else {
        panic!("expected the call's result");
    };
    assert_eq!(text_of(&result), "Hello, Grace");
    assert!(std::fs::read_to_string(log.path()).unwrap().contains("task ask_name"));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_orca_stops_waiting_for_cancels_the_upstreams_task() {
    let database = TestDatabase::create().await;
    let (setup, log) = tasks_setup(&database, "2s");
    let client = setup.stdio_client().await;
    let hung = call(&client, "fx_hang", json!({}), None).await.unwrap();
    assert_eq!(hung.is_error, Some(true), "{hung:?}");
    eventually("tasks/cancel at the upstream", Duration::from_secs(10), || async {
        std::fs::read_to_string(log.path()).unwrap().contains("cancelled task hang")
    })
    .await;
    assert!(std::fs::read_to_string(log.path()).unwrap().contains("task hang"));
    client.cancel().await.unwrap();
}

/// A 2026-07-28 client that takes tasks.
#[derive(Clone)]
struct TakesTasks;

impl rmcp::ClientHandler for TakesTasks {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities = serde_json::from_value(json!({
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        }))
        .unwrap();
        ClientConfig::new(capabilities, Implementation::new("tasks", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn what_an_upstreams_task_says_of_itself_reaches_the_callers_own_task() {
    let database = TestDatabase::create().await;
    let (setup, _log) = tasks_setup(&database, "10s");
    let server = setup.http_server(&[]);
    let client = crate::support::modern_client(TakesTasks, &server.url("/mcp"), None).await;
    let arguments = json!({"ms": 1500}).as_object().unwrap().clone();
    let slow = CallToolRequestParams::new("fx_slow").with_arguments(arguments);
    let CallToolResponse::Task(created) = client.call_tool_once(slow).await.unwrap() else {
        panic!("expected orca's own task for a slow call");
    };
    let id = created.task.task_id;
    let mut said = Vec::new();
    for _ in 0..100 {
        let task = client.get_task(GetTaskParams::new(&id)).await.unwrap();
        let task = serde_json::to_value(&task).unwrap();
        said.push(task["statusMessage"].clone());
        if task["status"] == "completed" {
            assert_eq!(task["result"]["content"][0]["text"], "slept 1500", "{task}");
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(said.contains(&json!("running slow")), "{said:?}");
    client.cancel().await.unwrap();
}

/// Each progress notification's `progress` and `total`.
type Heard = Vec<(f64, Option<f64>)>;

/// A 2025 client that keeps the progress and the log messages it is sent.
#[derive(Clone, Default)]
struct Watching {
    progress: Arc<Mutex<Heard>>,
    logged: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl rmcp::ClientHandler for Watching {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push((params.progress, params.total));
    }

    #[expect(deprecated, reason = "MCP logging is deprecated by SEP-2577 but still spoken")]
    async fn on_logging_message(
        &self,
        message: rmcp::model::LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.logged.lock().unwrap().push(message.data);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_tasks_progress_reaches_the_caller_until_the_task_ends() {
    let database = TestDatabase::create().await;
    let (setup, log) = tasks_setup(&database, "10s");
    let watching = Watching::default();
    let client = setup.stdio_client_with(watching.clone()).await;
    // The steps come after the task was created, 100 ms apart.
    let arguments = json!({"steps": 3, "ms": 100}).as_object().unwrap().clone();
    let steps = CallToolRequestParams::new("fx_steps").with_arguments(arguments);
    let result = client.peer().call_tool(steps).await.unwrap();
    assert_eq!(text_of(&result), "3 steps");
    assert!(std::fs::read_to_string(log.path()).unwrap().contains("task steps"));
    // rmcp's client hands each notification to a task of its own, which may run after the
    // answer is back.
    let heard = || async { watching.progress.lock().unwrap().len() >= 3 };
    eventually("three progress steps", Duration::from_secs(5), heard).await;
    let progress = watching.progress.lock().unwrap().clone();
    assert_eq!(progress, [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_tasks_log_messages_reach_its_caller_and_no_other_session() {
    let database = TestDatabase::create().await;
    let (setup, log) = tasks_setup(&database, "10s");
    let server = setup.http_server(&["--stateful"]);
    let session = || async {
        let watching = Watching::default();
        (server.client_with(watching.clone(), None).await, watching)
    };
    let (caller, caller_heard) = session().await;
    let (other, other_heard) = session().await;
    // The message comes 200 ms after the task was created.
    let arguments = json!({"steps": 1, "ms": 200, "log": true});
    let stepped = call(&caller, "fx_steps", arguments, None).await.unwrap();
    assert_eq!(text_of(&stepped), "1 steps");
    assert!(std::fs::read_to_string(log.path()).unwrap().contains("task steps"));
    eventually("the caller hears the task's log message", Duration::from_secs(10), || async {
        caller_heard.logged.lock().unwrap().iter().any(|data| data["text"] == "step 1")
    })
    .await;
    // Another session's stream would have had it too, had it been nobody's call's.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let elsewhere = other_heard.logged.lock().unwrap().clone();
    assert!(elsewhere.is_empty(), "{elsewhere:?}");
    caller.cancel().await.unwrap();
    other.cancel().await.unwrap();
}
