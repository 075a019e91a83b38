//! The client's own model as a provider (`llm_provider: client`): `generate_sql` with no
//! provider key, answered through `sampling/createMessage` by rmcp's client over stdio, over
//! `--stateful` HTTP sessions, stateless HTTP (2025-06-18, the capabilities of its `initialize`
//! carried by the signed `Mcp-Session-Id` it sends back, the request on the call's own answer
//! stream and the reply posted back) and in 2026-07-28 input rounds; `generate_schema`'s analysis
//! and `format_results`' summary through it too; a wrong first answer is retried through a second
//! sampling request carrying the database's error; the tracking row names the client and the
//! model it reported; a client that declines, or lacks the capability, hears which keys to set.
#![expect(deprecated, reason = "sampling is deprecated by SEP-2577, and still what clients offer")]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult, ErrorCode,
    Implementation, ProtocolVersion, SamplingMessage,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use serde_json::{Value, json};

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, samples, text_of, wait_for_row};

/// The model rmcp's test client says answered.
const CLIENT_MODEL: &str = "client-model-7";
const WRONG: &str = "```sql\nSELECT count(*) FROM no_such_table\n```";
const RIGHT: &str = "```sql\nSELECT count(*) AS invoices FROM invoice\n```";

/// A client whose model answers from a script (`Err`: it declines), noting what it was asked.
#[derive(Clone)]
struct Samples {
    answers: Arc<Mutex<VecDeque<Result<&'static str, &'static str>>>>,
    asked: Arc<Mutex<Vec<Value>>>,
    declares: bool,
    version: ProtocolVersion,
}

impl Samples {
    fn new(answers: &[Result<&'static str, &'static str>], version: ProtocolVersion) -> Samples {
        Samples {
            answers: Arc::new(Mutex::new(answers.iter().copied().collect())),
            asked: Arc::default(),
            declares: true,
            version,
        }
    }

    fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap().clone()
    }
}

impl rmcp::ClientHandler for Samples {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities = if self.declares {
            serde_json::from_value(json!({"sampling": {}})).unwrap()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(capabilities, Implementation::new("samples", "1"))
            .with_protocol_version(self.version.clone())
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        self.asked.lock().unwrap().push(serde_json::to_value(&params).unwrap());
        let next = self.answers.lock().unwrap().pop_front();
        match next {
            Some(Ok(text)) => Ok(CreateMessageResult::new(
                SamplingMessage::assistant_text(text),
                CLIENT_MODEL.to_owned(),
            )),
            Some(Err(message)) => Err(McpError::new(ErrorCode(-1), message, None)),
            None => Err(McpError::internal_error("no more answers", None)),
        }
    }
}

enum Transport {
    Stdio,
    /// Streamable HTTP with `--stateful` sessions: the request on the session's stream.
    Stateful,
    /// Stateless Streamable HTTP, 2025-06-18: its capabilities come back with its session id.
    Stateless,
    /// The same, with the client named as `generate_sql`'s provider in `orca.yaml`.
    StatelessNamed,
    /// Stateless Streamable HTTP, 2026-07-28 (input rounds).
    Modern,
}

/// Chinook with no provider key.
async fn setup(transport: &Transport) -> (TestDatabase, OrcaSetup) {
    let database = samples::chinook().await;
    let mut setup = OrcaSetup::new(&database.url);
    if matches!(transport, Transport::StatelessNamed) {
        setup = setup.with_config("llm:\n  tools:\n    generate_sql:\n      provider: client\n");
    }
    (database, setup)
}

/// Run `check` with a client of `transport` built from `handler`.
async fn with_client<F, Fut>(transport: Transport, handler: Samples, check: F)
where
    F: FnOnce(RunningService<RoleClient, Samples>, TestDatabase) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (database, setup) = setup(&transport).await;
    match transport {
        Transport::Stdio => {
            let client = setup.stdio_client_with(handler).await;
            check(client, database).await;
        }
        Transport::Stateful => {
            let server = setup.http_server(&["--stateful"]);
            let client = server.client_with(handler, None).await;
            check(client, database).await;
        }
        Transport::Stateless | Transport::StatelessNamed => {
            let server = setup.http_server(&[]);
            let client = server.client_with(handler, None).await;
            check(client, database).await;
        }
        Transport::Modern => {
            let server = setup.http_server(&[]);
            let client = crate::support::modern_client(handler, &server.url("/mcp"), None).await;
            check(client, database).await;
        }
    }
}

async fn answered_after_a_retry(transport: Transport, version: ProtocolVersion) {
    let handler = Samples::new(&[Ok(WRONG), Ok(RIGHT)], version);
    let seen = handler.clone();
    with_client(transport, handler, |client, database| async move {
        let result = call(&client, "generate_sql", json!({"prompt": "how many invoices?"}), None)
            .await
            .expect("generate_sql");
        let value = result.structured_content.clone().unwrap_or(Value::Null);
        assert_eq!(result.is_error, Some(false), "{value} {:?}", result.content);
        assert_eq!(value["sql"], "SELECT count(*) AS invoices FROM invoice", "{value}");
        let meta = meta_of(&result);
        assert_eq!(meta["provider_used"], "client", "{meta:?}");
        assert_eq!(meta["attempt"], 2, "{meta:?}");
        assert_eq!(meta["usage"]["reported_model"], CLIENT_MODEL, "{meta:?}");

        // Two sampling requests: the question, then the same conversation with the database's
        // error; the configured model goes as a hint.
        let asked = seen.asked();
        assert_eq!(asked.len(), 2, "{asked:?}");
        let first = &asked[0];
        assert!(first["systemPrompt"].as_str().unwrap().contains("SQL"), "{first}");
        assert_eq!(first["modelPreferences"]["hints"][0]["name"], "claude-sonnet-4-5", "{first}");
        assert_eq!(first["includeContext"], "none", "{first}");
        let retry = asked[1]["messages"].as_array().unwrap();
        assert_eq!(retry.len(), 3, "{retry:?}");
        assert_eq!(retry[1]["content"]["text"], WRONG);
        let feedback = retry[2]["content"]["text"].as_str().unwrap();
        assert!(feedback.contains("no_such_table"), "{feedback}");

        // The record names the client and the model it reported.
        let pool = database.connect().await;
        let id: uuid::Uuid = meta["execution_id"].as_str().unwrap().parse().unwrap();
        wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
        let (provider, model): (String, String) =
            sqlx::query_as("SELECT llm_provider, llm_model FROM orca.mcp_executions WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((provider.as_str(), model.as_str()), ("client", CLIENT_MODEL));
        client.cancel().await.unwrap();
    })
    .await;
}

async fn refused(transport: Transport, handler: Samples, asked: usize) {
    let seen = handler.clone();
    with_client(transport, handler, |client, _database| async move {
        let result = call(&client, "generate_sql", json!({"prompt": "how many invoices?"}), None)
            .await
            .expect("generate_sql answers");
        assert_eq!(result.is_error, Some(true), "{result:?}");
        let text = text_of(&result);
        assert!(text.contains("ANTHROPIC_API_KEY"), "{text}");
        assert_eq!(seen.asked().len(), asked, "{:?}", seen.asked());
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn generate_sql_is_answered_by_a_stdio_clients_model_with_no_key_and_retried_through_it() {
    answered_after_a_retry(Transport::Stdio, ProtocolVersion::V_2025_06_18).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn generate_sql_is_answered_in_a_stateful_session_with_no_key_and_retried_through_it() {
    answered_after_a_retry(Transport::Stateful, ProtocolVersion::V_2025_06_18).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn generate_sql_is_answered_on_a_stateless_requests_own_stream_and_retried_through_it() {
    answered_after_a_retry(Transport::Stateless, ProtocolVersion::V_2025_06_18).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn generate_sql_is_answered_in_input_rounds_for_a_2026_client_and_retried_through_them() {
    answered_after_a_retry(Transport::Modern, ProtocolVersion::V_2026_07_28).await;
}

/// The two other tools that ask a model: `generate_schema`'s analysis and `format_results`'
/// written summary come from the client's model when no key is set, each in one request.
#[tokio::test(flavor = "multi_thread")]
async fn the_schema_analysis_and_the_written_summary_come_from_the_clients_model() {
    const ANALYSIS: &str = "A music store: artists, albums, tracks and their sales.";
    const SUMMARY: &str = "Three genres, Rock the largest.";
    let handler = Samples::new(&[Ok(ANALYSIS), Ok(SUMMARY)], ProtocolVersion::V_2025_06_18);
    let seen = handler.clone();
    with_client(Transport::Stdio, handler, |client, _database| async move {
        let schema = call(&client, "generate_schema", json!({"format": "json"}), None)
            .await
            .expect("generate_schema");
        assert_eq!(schema.is_error, Some(false), "{:?}", schema.content);
        let value = schema.structured_content.clone().unwrap();
        assert_eq!(value["analysis"], ANALYSIS, "{value}");
        let meta = meta_of(&schema);
        assert_eq!(meta["analysis_provider"], "client", "{meta:?}");
        assert_eq!(meta["analysis"]["ran"], true, "{meta:?}");

        let rows = json!({
            "columns": [{"name": "genre", "type": "text"}, {"name": "tracks", "type": "int8"}],
            "rows": [["Rock", 1297], ["Latin", 579], ["Metal", 374]],
        });
        let summary =
            call(&client, "format_results", json!({"data": rows, "format": "summary"}), None)
                .await
                .expect("format_results");
        assert_eq!(summary.is_error, Some(false), "{:?}", summary.content);
        let value = summary.structured_content.clone().unwrap();
        assert_eq!(value["summary_source"], "llm", "{value}");
        assert_eq!(value["text"], SUMMARY, "{value}");

        // One request each: the schema for the analysis, the rows' statistics for the summary.
        let asked = seen.asked();
        assert_eq!(asked.len(), 2, "{asked:?}");
        let first = asked[0]["messages"][0]["content"]["text"].as_str().unwrap();
        assert!(first.contains("invoice"), "{first}");
        let second = asked[1]["messages"][0]["content"]["text"].as_str().unwrap();
        assert!(second.contains("Rock"), "{second}");
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_declines_to_sample_hears_which_keys_to_set() {
    let declines = || Samples::new(&[Err("the user declined")], ProtocolVersion::V_2025_06_18);
    refused(Transport::Stdio, declines(), 1).await;
    refused(Transport::Stateless, declines(), 1).await;
    refused(Transport::StatelessNamed, declines(), 1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_without_sampling_is_not_asked_and_hears_which_keys_to_set() {
    let mut lacks = Samples::new(&[Ok(RIGHT)], ProtocolVersion::V_2025_06_18);
    lacks.declares = false;
    refused(Transport::Stdio, lacks, 0).await;
    let mut lacks = Samples::new(&[Ok(RIGHT)], ProtocolVersion::V_2025_06_18);
    lacks.declares = false;
    refused(Transport::Stateless, lacks, 0).await;
    let mut lacks = Samples::new(&[Ok(RIGHT)], ProtocolVersion::V_2026_07_28);
    lacks.declares = false;
    refused(Transport::Modern, lacks, 0).await;
}

/// The MCP Python SDK (2.x) in a virtual environment of the target directory, installed once.
fn python_sdk() -> std::path::PathBuf {
    use std::path::Path;
    use std::process::Command;
    let root = Path::new(crate::support::orca::BINARY).parent().unwrap().join("python-mcp");
    let python = root.join("bin/python");
    std::fs::create_dir_all(root.parent().unwrap()).unwrap();
    let lock = std::fs::File::create(root.with_extension("lock")).unwrap();
    lock.lock().unwrap();
    let installed =
        || Command::new(&python).args(["-c", "import mcp"]).status().is_ok_and(|s| s.success());
    if !installed() {
        let made = Command::new("python3").arg("-m").arg("venv").arg(&root).output();
        let made =
            made.unwrap_or_else(|error| panic!("the Python SDK tests need python3: {error}"));
        assert!(
            made.status.success(),
            "python3 -m venv: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let pip = Command::new(root.join("bin/pip"))
            .args(["install", "--quiet", "mcp>=2,<3"])
            .output()
            .unwrap();
        assert!(pip.status.success(), "pip install mcp: {}", String::from_utf8_lossy(&pip.stderr));
    }
    python
}

/// Run the Python SDK's client against `orca serve --stdio` with `answers` (`None` declines).
fn python_generate_sql(setup: &OrcaSetup, answers: &[Option<&str>]) -> Value {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/python/sampling_client.py");
    let spec = json!({
        "command": crate::support::orca::orca_binary().to_str().unwrap(),
        "args": ["serve", "--stdio"],
        "env": setup.env,
        "cwd": setup.home.path(),
        "answers": answers,
    });
    let output = std::process::Command::new(python_sdk())
        .arg(script)
        .arg(spec.to_string())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python client: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdks_sampling_callback_answers_generate_sql_with_no_key_and_its_retry() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let ran =
        tokio::task::block_in_place(|| python_generate_sql(&setup, &[Some(WRONG), Some(RIGHT)]));
    let result = &ran["result"];
    assert_eq!(result["isError"], false, "{ran}");
    let value = &result["structuredContent"];
    assert_eq!(value["sql"], "SELECT count(*) AS invoices FROM invoice", "{ran}");
    let meta = &result["_meta"];
    assert_eq!(meta["provider_used"], "client", "{meta}");
    assert_eq!(meta["attempt"], 2, "{meta}");
    let asked = ran["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{ran}");
    assert_eq!(asked[0]["modelPreferences"]["hints"][0]["name"], "claude-sonnet-4-5");
    let feedback = asked[1]["messages"][2]["content"]["text"].as_str().unwrap();
    assert!(feedback.contains("no_such_table"), "{feedback}");

    let pool = database.connect().await;
    let id: uuid::Uuid = meta["execution_id"].as_str().unwrap().parse().unwrap();
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    let (provider, model): (String, String) =
        sqlx::query_as("SELECT llm_provider, llm_model FROM orca.mcp_executions WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((provider.as_str(), model.as_str()), ("client", "python-model-3"));

    // A callback that declines: the clear error, naming the keys to set.
    let declined = tokio::task::block_in_place(|| python_generate_sql(&setup, &[None]));
    assert_eq!(declined["result"]["isError"], true, "{declined}");
    let text = declined["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("declined") && text.contains("ANTHROPIC_API_KEY"), "{text}");
}
