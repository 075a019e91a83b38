//! The intelligence loop through the real binary and the fake providers: `generate_sql` on
//! Chinook (the prompt's schema and context, validation against the live database, retries
//! with the database's error, failure rows, EXCEEDED_RETRIES), provider failures (429 then
//! success, timeouts, malformed answers, no key), the three wire formats' request bodies,
//! hot reload of the context file, the schema analysis, the written summary, and
//! `orca context suggest`.

use std::time::Duration;

use rmcp::model::CallToolResult;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::support::fake_llm::{FakeLlm, Received, Reply, Wire};
use crate::support::{
    OrcaSetup, TestDatabase, call, eventually, meta_of, run, samples, wait_for_row,
};

type Client = RunningService<RoleClient, ()>;

/// A small context file whose entries the tests look for in the prompts.
const CONTEXT: &str = "# Supabase SQL Context Learning

## Database Schema Overview
<!-- orca:schema:start -->
(written by refresh-schema)
<!-- orca:schema:end -->

## Successful Query Patterns

### Revenue by customer
Revenue is the sum of invoice.total per customer; join customer to invoice on customer_id.
```sql
SELECT c.customer_id, c.first_name, c.last_name, sum(i.total) AS revenue
FROM customer c JOIN invoice i ON i.customer_id = c.customer_id
GROUP BY c.customer_id ORDER BY revenue DESC
```

### Playlists and their tracks
Join playlist to playlist_track to track.

## Common Error Patterns & Fixes

### Invoice date column
**Error**: `column \"created_at\" does not exist`
**Fix**: invoices are dated by `invoice.invoice_date`.

## Query Optimization Insights

### Aggregate before joining
Aggregate invoice_line per invoice before joining to track when counting sales.

## Model Performance Notes

### claude-sonnet-4-5
- **Strengths**: complex joins
";

struct Loop {
    fake: FakeLlm,
    setup: OrcaSetup,
    database: TestDatabase,
    context_file: std::path::PathBuf,
}

/// orca on a fresh copy of Chinook, every provider pointed at the fakes, the test context file.
async fn chinook_loop(yaml: Option<&str>) -> Loop {
    let database = samples::chinook().await;
    let fake = FakeLlm::start().await;
    let mut setup = OrcaSetup::new(&database.url).with_fake_llm(&fake);
    let context_file = setup.home.path().join("context.md");
    std::fs::write(&context_file, CONTEXT).unwrap();
    setup = setup.with_env("ORCA_CONTEXT_FILE", &context_file.display().to_string());
    if let Some(yaml) = yaml {
        setup = setup.with_config(yaml);
    }
    Loop { fake, setup, database, context_file }
}

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

async fn generate(
    client: &Client,
    arguments: Value,
) -> (CallToolResult, Value, Map<String, Value>) {
    let result = call(client, "generate_sql", arguments, None).await.expect("generate_sql");
    let value = structured(&result);
    let meta = meta_of(&result);
    (result, value, meta)
}

fn sql_reply(sql: &str) -> Reply {
    Reply::Text(format!("```sql\n{sql}\n```"))
}

fn execution_id(meta: &Map<String, Value>) -> Uuid {
    Uuid::parse_str(meta["execution_id"].as_str().unwrap()).unwrap()
}

fn anthropic_requests(fake: &FakeLlm) -> Vec<Received> {
    fake.requests().into_iter().filter(|received| received.wire == Wire::Anthropic).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_becomes_validated_sql_with_the_schema_and_the_relevant_context() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::Anthropic,
        [sql_reply(
            "SELECT c.first_name, c.last_name, sum(i.total) AS revenue\nFROM customer c JOIN invoice i ON i.customer_id = c.customer_id\nGROUP BY c.customer_id ORDER BY revenue DESC LIMIT 5;",
        )],
    );
    let client = lab.setup.stdio_client().await;
    let (result, value, meta) =
        generate(&client, json!({"prompt": "top 5 customers by revenue"})).await;
    assert_eq!(result.is_error, Some(false), "{value}");
    assert!(value["sql"].as_str().unwrap().starts_with("SELECT c.first_name"), "{value}");
    assert!(!value["sql"].as_str().unwrap().ends_with(';'));
    assert!(value["markdown"].as_str().unwrap().starts_with("```sql\n"));
    assert_eq!(value["is_write"], false);
    assert_eq!(meta["provider_used"], "anthropic");
    assert_eq!(meta["model_used"], "claude-sonnet-4-5");
    assert_eq!(meta["attempt"], 1);
    assert_eq!(meta["context_applied"], true);
    assert_eq!(meta["validation"]["valid"], true);
    assert_eq!(meta["validation"]["kind"], "read");
    assert_eq!(meta["validation"]["is_write"], false);
    assert_eq!(meta["validation"]["explained"], true);
    assert_eq!(meta["validation"]["tables"], json!(["customer", "invoice"]));

    let requests = anthropic_requests(&lab.fake);
    assert_eq!(requests.len(), 1);
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
    let request = &requests[0];
    assert_eq!(request.headers["x-api-key"], crate::support::fake_llm::ANTHROPIC_KEY);
    assert!(request.headers.contains_key("anthropic-version"));
    let body = &request.body;
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["temperature"], 0.2);
    assert!(body["system"].as_str().unwrap().contains("Return only valid, executable SQL"));
    let prompt = body["messages"][0]["content"].as_str().unwrap();
    // The live schema, the pattern and the model note that fit the question, and the question.
    assert!(prompt.contains("invoice_line("), "{prompt}");
    assert!(prompt.contains("customer_id integer PK"), "{prompt}");
    assert!(prompt.contains("### Revenue by customer"), "{prompt}");
    assert!(prompt.contains("### claude-sonnet-4-5"), "{prompt}");
    assert!(!prompt.contains("Playlists and their tracks"), "irrelevant entry sent: {prompt}");
    assert!(prompt.trim_end().ends_with("top 5 customers by revenue"), "{prompt}");
    let entries = meta["context"]["entries"].as_array().unwrap();
    assert!(entries.contains(&json!("Revenue by customer")), "{meta:?}");

    // The execution record holds the provider, the model and the tokens.
    let pool = lab.database.connect().await;
    let id = execution_id(&meta);
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    let (provider, model, prompt_tokens, completion_tokens, latency): (String, String, i64, i64, Option<i32>) =
        sqlx::query_as("SELECT llm_provider, llm_model, llm_prompt_tokens, llm_completion_tokens, llm_latency_ms FROM orca.mcp_executions WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((provider.as_str(), model.as_str()), ("anthropic", "claude-sonnet-4-5"));
    assert!(prompt_tokens > 100 && completion_tokens > 0, "{prompt_tokens} {completion_tokens}");
    assert!(latency.is_some(), "the provider's latency is recorded");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_column_is_fixed_on_the_second_attempt_with_the_databases_error() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::Anthropic,
        [
            sql_reply("SELECT created_at, total FROM invoice ORDER BY created_at DESC LIMIT 10"),
            sql_reply(
                "SELECT invoice_date, total FROM invoice ORDER BY invoice_date DESC LIMIT 10",
            ),
        ],
    );
    let client = lab.setup.stdio_client().await;
    let (result, value, meta) =
        generate(&client, json!({"prompt": "the ten latest invoices with their totals"})).await;
    assert_eq!(result.is_error, Some(false), "{value}");
    assert_eq!(
        value["sql"],
        "SELECT invoice_date, total FROM invoice ORDER BY invoice_date DESC LIMIT 10"
    );
    assert_eq!(meta["attempt"], 2);

    let requests = anthropic_requests(&lab.fake);
    assert_eq!(requests.len(), 2);
    let second = &requests[1].body["messages"];
    assert_eq!(second.as_array().unwrap().len(), 3, "{second}");
    assert_eq!(second[1]["role"], "assistant");
    assert!(second[1]["content"].as_str().unwrap().contains("created_at"));
    let retry = second[2]["content"].as_str().unwrap();
    assert!(retry.starts_with("Previous attempt failed:"), "{retry}");
    assert!(retry.contains("column \"created_at\" does not exist"), "{retry}");

    let pool = lab.database.connect().await;
    let id = execution_id(&meta);
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1", id).await;
    let rows: Vec<(i32, String, Value)> = sqlx::query_as(
        "SELECT retry_attempt, error_type, error_details FROM orca.mcp_failures WHERE execution_id = $1 ORDER BY retry_attempt",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, 1);
    assert_eq!(rows[0].1, "sql_error");
    let details = &rows[0].2["error"]["details"];
    assert_eq!(details["stage"], "database");
    assert!(details["sql"].as_str().unwrap().contains("created_at"), "{details}");
    let status: String = sqlx::query_scalar("SELECT status FROM orca.mcp_executions WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(status, "success");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sql_with_placeholders_is_sent_back_to_the_model_as_its_error() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::Anthropic,
        [
            sql_reply("SELECT title FROM album WHERE artist_id = $1 ORDER BY title"),
            sql_reply("SELECT title FROM album WHERE artist_id = 1 ORDER BY title"),
        ],
    );
    let client = lab.setup.stdio_client().await;
    let (result, value, meta) =
        generate(&client, json!({"prompt": "the albums of AC/DC", "use_context": false})).await;
    assert_eq!(result.is_error, Some(false), "{value}");
    assert_eq!(value["sql"], "SELECT title FROM album WHERE artist_id = 1 ORDER BY title");
    assert_eq!(meta["attempt"], 2);
    let requests = anthropic_requests(&lab.fake);
    assert_eq!(requests.len(), 2);
    let retry = requests[1].body["messages"][2]["content"].as_str().unwrap();
    assert!(retry.contains("placeholders $1"), "{retry}");
    assert!(!retry.contains("unavailable"), "{retry}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn sql_that_stays_wrong_ends_in_exceeded_retries_with_one_failure_row_per_attempt() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::Anthropic,
        [
            sql_reply("SELECT nme FROM artist"),
            Reply::Text("I am not sure which table holds that.".to_owned()),
            sql_reply("SELECT name FROM artists"),
        ],
    );
    let client = lab.setup.stdio_client().await;
    let (result, value, meta) = generate(&client, json!({"prompt": "all artist names"})).await;
    assert_eq!(result.is_error, Some(true), "{value}");
    let error = &value["error"];
    assert_eq!(error["code"], "EXCEEDED_RETRIES", "{value}");
    assert_eq!(error["details"]["last_sql"], "SELECT name FROM artists");
    assert!(
        error["details"]["last_error"]
            .as_str()
            .unwrap()
            .contains("relation \"artists\" does not exist"),
        "{value}"
    );
    assert!(error["hint"].as_str().unwrap().contains("execute_sql"));
    assert_eq!(meta["attempts"], 3);
    assert_eq!(meta["provider_used"], "anthropic");
    assert_eq!(anthropic_requests(&lab.fake).len(), 3);

    let pool = lab.database.connect().await;
    let id = execution_id(&meta);
    wait_for_row(
        &pool,
        "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1 AND retry_attempt = 3",
        id,
    )
    .await;
    let rows: Vec<(i32, Option<String>)> = sqlx::query_as(
        "SELECT retry_attempt, error_code FROM orca.mcp_failures WHERE execution_id = $1 ORDER BY retry_attempt",
    )
    .bind(id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let expected: Vec<(i32, Option<String>)> = vec![
        (1, Some("QUERY_FAILED".to_owned())),
        (2, Some("INVALID_INPUT".to_owned())),
        (3, Some("EXCEEDED_RETRIES".to_owned())),
    ];
    assert_eq!(rows, expected);
    let (status, code, provider): (String, String, Option<String>) = sqlx::query_as(
        "SELECT status, error_code, llm_provider FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((status.as_str(), code.as_str()), ("error", "EXCEEDED_RETRIES"));
    assert_eq!(provider.as_deref(), Some("anthropic"));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn generated_writes_are_reported_as_writes_and_nothing_runs() {
    let lab = chinook_loop(None).await;
    lab.fake.script(Wire::Anthropic, [sql_reply("DELETE FROM invoice_line WHERE invoice_id = 1")]);
    let client = lab.setup.stdio_client().await;
    let (result, value, meta) =
        generate(&client, json!({"prompt": "remove the lines of invoice 1"})).await;
    assert_eq!(result.is_error, Some(false), "{value}");
    assert_eq!(value["is_write"], true);
    assert_eq!(value["statement_kind"], "delete");
    assert!(value["warning"].as_str().unwrap().contains("execute_sql"));
    assert_eq!(meta["validation"]["is_write"], true);
    let pool = lab.database.connect().await;
    let lines: i64 = sqlx::query_scalar("SELECT count(*) FROM invoice_line WHERE invoice_id = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(lines > 0, "the generated DELETE must not have run");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_is_waited_out_as_the_provider_asks() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::Anthropic,
        [
            Reply::Error { status: 429, retry_after: Some("1".to_owned()) },
            sql_reply("SELECT count(*) FROM track"),
        ],
    );
    let client = lab.setup.stdio_client().await;
    let (result, value, meta) = generate(&client, json!({"prompt": "how many tracks"})).await;
    assert_eq!(result.is_error, Some(false), "{value}");
    assert_eq!(meta["attempt"], 1, "the model's answer was right the first time it came");
    let requests = anthropic_requests(&lab.fake);
    assert_eq!(requests.len(), 2);
    let waited = requests[1].at - requests[0].at;
    assert!(waited >= Duration::from_millis(900), "Retry-After: 1 was not honoured: {waited:?}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn provider_failures_are_errors_of_the_taxonomy() {
    let lab =
        chinook_loop(Some("llm:\n  timeout_ms: 400\n  max_retries: 1\n  max_backoff_ms: 100\n"))
            .await;
    lab.fake.script(
        Wire::Anthropic,
        [
            Reply::Hang(Duration::from_secs(3)),
            Reply::Malformed("{\"id\": \"msg_1\", \"content\": \"not blocks\"".to_owned()),
            Reply::Error { status: 503, retry_after: None },
            Reply::Error { status: 503, retry_after: None },
            Reply::Error { status: 401, retry_after: None },
        ],
    );
    let client = lab.setup.stdio_client().await;
    let cases = [
        ("TIMEOUT", "did not answer within 400 ms", "llm_timeout"),
        ("UPSTREAM_UNAVAILABLE", "cannot read", "llm_error"),
        ("UPSTREAM_UNAVAILABLE", "unavailable", "llm_error"),
        ("UPSTREAM_UNAVAILABLE", "the key was refused (HTTP 401)", "llm_error"),
    ];
    let pool = lab.database.connect().await;
    for (code, words, error_type) in cases {
        let (result, value, meta) = generate(&client, json!({"prompt": "how many tracks"})).await;
        assert_eq!(result.is_error, Some(true), "{value}");
        assert_eq!(value["error"]["code"], code, "{value}");
        let message = value["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{message}");
        assert!(!message.contains(crate::support::fake_llm::ANTHROPIC_KEY), "{message}");
        assert_eq!(meta["provider_used"], "anthropic", "{meta:?}");
        // The failure row tells a model's failure from the database's.
        let id = execution_id(&meta);
        wait_for_row(&pool, "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1", id).await;
        let stored: String =
            sqlx::query_scalar("SELECT error_type FROM orca.mcp_failures WHERE execution_id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(stored, error_type, "{code}");
    }

    // The schema analysis is an extra: a provider that hangs costs one timeout, and the schema
    // comes back without it.
    lab.fake.script(Wire::Anthropic, [Reply::Hang(Duration::from_secs(3))]);
    let result = call(&client, "generate_schema", json!({}), None).await.unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "{value}");
    assert!(value["content"].as_str().unwrap().contains("invoice_line"), "{value}");
    assert!(value.get("analysis").is_none(), "{value}");
    let analysis = &meta_of(&result)["analysis"];
    assert_eq!(analysis["ran"], false, "{analysis}");
    assert_eq!(analysis["error"]["code"], "TIMEOUT", "{analysis}");
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_key_the_error_names_the_variable_to_set() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    // The input schema follows the specification: the prompt is required, the providers listed.
    let tools = client.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|tool| tool.name == "generate_sql").unwrap();
    let schema = Value::Object((*tool.input_schema).clone());
    assert_eq!(schema["required"], json!(["prompt"]), "{schema}");
    let text = schema.to_string();
    for word in ["\"anthropic\"", "\"openai\"", "\"google\"", "use_context", "max_retries"] {
        assert!(text.contains(word), "{word} in {schema}");
    }
    let cases = [
        (
            json!({"prompt": "x"}),
            "set ANTHROPIC_API_KEY or OPENAI_API_KEY or GEMINI_API_KEY (or GOOGLE_API_KEY)",
        ),
        (
            json!({"prompt": "x", "llm_provider": "openai"}),
            "the openai provider is not configured: set OPENAI_API_KEY",
        ),
        (
            json!({"prompt": "x", "llm_provider": "mistral"}),
            "supported providers: anthropic, openai, google",
        ),
        (
            json!({"prompt": "x", "llm_model": "gemini-2.5-pro"}),
            "set GEMINI_API_KEY (or GOOGLE_API_KEY)",
        ),
    ];
    for (arguments, words) in cases {
        let (result, value, _) = generate(&client, arguments.clone()).await;
        assert_eq!(result.is_error, Some(true), "{arguments}: {value}");
        assert_eq!(value["error"]["code"], "INVALID_INPUT", "{value}");
        let message = value["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{arguments}: {message}");
    }
    // format_results falls back to the statistics, and says so; a provider it does not support
    // is refused with the list of those it does.
    let data = json!([{"genre": "Rock", "tracks": 1297}, {"genre": "Jazz", "tracks": 130}]);
    let result = call(&client, "format_results", json!({"data": data, "format": "summary"}), None)
        .await
        .unwrap();
    let value = structured(&result);
    assert_eq!(value["summary_source"], "statistics", "{value}");
    assert_eq!(value["summary"]["row_count"], 2);
    assert_eq!(meta_of(&result)["llm_summary"]["ran"], false);
    let result = call(
        &client,
        "format_results",
        json!({"data": data, "format": "summary", "llm_provider": "google"}),
        None,
    )
    .await
    .unwrap();
    let message = structured(&result)["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("supported providers: openai, anthropic"), "{message}");
    client.cancel().await.unwrap();
}

/// A database with two empty tables, so that the prompt (and the request body) is the same on
/// every run.
async fn small_database() -> TestDatabase {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    sqlx::raw_sql(
        "CREATE TABLE author (author_id integer PRIMARY KEY, name text NOT NULL);
         CREATE TABLE book (book_id integer PRIMARY KEY, title text NOT NULL,
                            author_id integer REFERENCES author, published date);",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    database
}

#[tokio::test(flavor = "multi_thread")]
async fn each_providers_request_body_matches_its_snapshot() {
    let database = small_database().await;
    let fake = FakeLlm::start().await;
    let mut setup = OrcaSetup::new(&database.url).with_fake_llm(&fake);
    let context_file = setup.home.path().join("context.md");
    std::fs::write(&context_file, CONTEXT).unwrap();
    setup = setup.with_env("ORCA_CONTEXT_FILE", &context_file.display().to_string());
    let answer = "SELECT b.title FROM book b JOIN author a ON a.author_id = b.author_id";
    for wire in [Wire::OpenAi, Wire::Anthropic, Wire::Gemini] {
        fake.script(wire, [sql_reply(answer)]);
    }
    let client = setup.stdio_client().await;
    for (provider, model, wire) in [
        ("openai", "gpt-4o-mini", Wire::OpenAi),
        ("anthropic", "claude-sonnet-4-5", Wire::Anthropic),
        ("google", "gemini-2.5-flash", Wire::Gemini),
    ] {
        let (result, value, meta) = generate(
            &client,
            json!({"prompt": "titles of books with their author", "llm_provider": provider}),
        )
        .await;
        assert_eq!(result.is_error, Some(false), "{provider}: {value}");
        assert_eq!(meta["provider_used"], provider);
        assert_eq!(meta["model_used"], model);
        let received = fake.requests().into_iter().find(|r| r.wire == wire).unwrap();
        assert!(!received.key_in_url, "the key must travel in a header");
        // The test database's name is random; everything else is the same on every run.
        let database_name = database.url.rsplit('/').next().unwrap().to_owned();
        let body = crate::support::fake_llm::stable_body(&received).to_string();
        let body: Value =
            serde_json::from_str(&body.replace(&database_name, "<test database>")).unwrap();
        insta::assert_json_snapshot!(format!("generate_sql_request_{provider}"), body);
    }
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_edited_context_file_reaches_the_next_request() {
    let lab = chinook_loop(None).await;
    for _ in 0..2 {
        lab.fake.script(Wire::Anthropic, [sql_reply("SELECT count(*) FROM playlist")]);
    }
    let client = lab.setup.stdio_client().await;
    let question = json!({"prompt": "how many playlists hold classical music"});
    let (result, _, _) = generate(&client, question.clone()).await;
    assert_eq!(result.is_error, Some(false));
    let first = FakeLlm::conversation_text(&anthropic_requests(&lab.fake)[0]);
    assert!(!first.contains("Classical playlists"), "{first}");

    // A person adds a pattern; an editor saves by writing a new file and renaming it.
    let edited = CONTEXT.replace(
        "## Common Error Patterns & Fixes",
        "### Classical playlists\nThe playlists named Classical hold classical music: filter playlist.name LIKE 'Classical%'.\n\n## Common Error Patterns & Fixes",
    );
    let temporary = lab.context_file.with_extension("tmp");
    std::fs::write(&temporary, edited).unwrap();
    std::fs::rename(&temporary, &lab.context_file).unwrap();
    eventually("the new pattern in the next request", Duration::from_secs(10), || async {
        let _ = generate(&client, question.clone()).await;
        let requests = anthropic_requests(&lab.fake);
        let last = FakeLlm::conversation_text(requests.last().unwrap());
        if !last.contains("Classical playlists") {
            lab.fake.script(Wire::Anthropic, [sql_reply("SELECT count(*) FROM playlist")]);
            return false;
        }
        true
    })
    .await;

    // A malformed save keeps the previous version.
    std::fs::write(&lab.context_file, "").unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    lab.fake.script(Wire::Anthropic, [sql_reply("SELECT count(*) FROM playlist")]);
    let (result, _, _) = generate(&client, question).await;
    assert_eq!(result.is_error, Some(false));
    let last = FakeLlm::conversation_text(anthropic_requests(&lab.fake).last().unwrap());
    assert!(last.contains("Classical playlists"), "the previous version must stay: {last}");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_schema_analysis_is_asked_once_per_schema_and_model() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::Anthropic,
        [Reply::Text(
            "Chinook is a music store: customers buy tracks through invoices.".to_owned(),
        )],
    );
    let client = lab.setup.stdio_client().await;
    for (round, cached) in [(1, false), (2, true)] {
        let result =
            call(&client, "generate_schema", json!({"format": "markdown"}), None).await.unwrap();
        let value = structured(&result);
        let meta = meta_of(&result);
        assert_eq!(result.is_error, Some(false), "{value}");
        assert!(
            value["analysis"].as_str().unwrap().contains("music store"),
            "round {round}: {value}"
        );
        assert_eq!(meta["analysis"]["ran"], true, "{meta:?}");
        assert_eq!(meta["analysis"]["cached"], cached, "round {round}: {meta:?}");
        assert_eq!(meta["analysis_provider"], "anthropic");
        assert_eq!(meta["analysis_model"], "claude-haiku-4-5");
    }
    let requests = anthropic_requests(&lab.fake);
    assert_eq!(requests.len(), 1, "the second call must use the cached analysis");
    let body = &requests[0].body;
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert_eq!(body["temperature"], 0.1);
    assert!(body["system"].as_str().unwrap().contains("database schema expert"));
    assert!(FakeLlm::conversation_text(&requests[0]).contains("invoice_line("));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_summary_is_written_by_the_model_with_the_statistics_kept() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::OpenAi,
        [Reply::Text("Rock dominates the catalogue with 1297 tracks.".to_owned())],
    );
    let client = lab.setup.stdio_client().await;
    let data = json!([{"genre": "Rock", "tracks": 1297}, {"genre": "Jazz", "tracks": 130}]);
    let result = call(&client, "format_results", json!({"data": data, "format": "summary"}), None)
        .await
        .unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "{value}");
    assert_eq!(value["summary_source"], "llm");
    assert_eq!(value["text"], "Rock dominates the catalogue with 1297 tracks.");
    assert_eq!(value["summary"]["row_count"], 2);
    let meta = meta_of(&result);
    assert_eq!(meta["llm_summary"]["llm_provider"], "openai");
    assert_eq!(meta["llm_summary"]["llm_model"], "gpt-4o-mini");
    let request = lab.fake.requests().into_iter().find(|r| r.wire == Wire::OpenAi).unwrap();
    assert_eq!(
        request.headers["authorization"],
        format!("Bearer {}", crate::support::fake_llm::OPENAI_KEY)
    );
    assert!(FakeLlm::conversation_text(&request).contains("Rock,1297"), "the rows go to the model");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn suggestions_from_recent_failures_come_as_a_patch_and_the_file_is_untouched() {
    let lab = chinook_loop(None).await;
    lab.fake.script(
        Wire::Anthropic,
        [
            sql_reply("SELECT name, milliseconds / 60 AS minutes FROM track ORDER BY length DESC LIMIT 3"),
            sql_reply("SELECT name, milliseconds / 60000 AS minutes FROM track ORDER BY milliseconds DESC LIMIT 3"),
        ],
    );
    let client = lab.setup.stdio_client().await;
    let (result, _, meta) = generate(&client, json!({"prompt": "the three longest tracks"})).await;
    assert_eq!(result.is_error, Some(false));
    let pool = lab.database.connect().await;
    wait_for_row(
        &pool,
        "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1",
        execution_id(&meta),
    )
    .await;
    client.cancel().await.unwrap();

    let answer = json!({
        "patterns": [],
        "fixes": [{"title": "Track length", "body": "**Error**: `column \"length\" does not exist`\n**Fix**: use `track.milliseconds`."}],
        "insights": []
    });
    lab.fake.script(Wire::Anthropic, [Reply::Text(format!("```json\n{answer}\n```"))]);
    let patch = lab.setup.home.path().join("context.patch");
    let (code, stdout, stderr) = run(
        &lab.setup,
        &["context", "suggest", "--since", "1h", "--out", &patch.display().to_string()],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("1 additions proposed"), "{stdout}");
    let patch_text = std::fs::read_to_string(&patch).unwrap();
    assert!(patch_text.contains("+### Track length"), "{patch_text}");
    assert!(patch_text.contains("+**Fix**: use `track.milliseconds`."), "{patch_text}");
    assert_eq!(std::fs::read_to_string(&lab.context_file).unwrap(), CONTEXT, "never edited");
    // The patch applies as it is written (paths relative to where orca ran).
    let applied = std::process::Command::new("git")
        .args(["apply", "--verbose", &patch.display().to_string()])
        .current_dir(lab.setup.home.path())
        .output()
        .unwrap();
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let patched = std::fs::read_to_string(&lab.context_file).unwrap();
    assert!(patched.contains("### Track length\n**Error**"), "{patched}");
    let (code, stdout, _) = run(&lab.setup, &["context", "check"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("Track length"), "{stdout}");
    // The patch never goes over the context file itself.
    let file = lab.context_file.display().to_string();
    lab.fake.script(
        Wire::Anthropic,
        [Reply::Text(answer.to_string().replace("Track length", "Track size"))],
    );
    let (code, _, stderr) =
        run(&lab.setup, &["context", "suggest", "--since", "1h", "--out", &file]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is the context file itself"), "{stderr}");

    // The model saw the failed attempt, its error and the SQL that fixed it.
    let request = anthropic_requests(&lab.fake).pop().unwrap();
    let text = FakeLlm::conversation_text(&request);
    assert!(text.contains("the three longest tracks"), "{text}");
    assert!(
        text.contains("column \\\"length\\\" does not exist")
            || text.contains("column \"length\" does not exist"),
        "{text}"
    );
    assert!(text.contains("milliseconds / 60000"), "{text}");
    assert!(text.contains("Revenue by customer"), "the existing titles are listed: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_query_in_the_shipped_context_file_runs_on_chinook() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("context/supabase-sql-context.md"),
    )
    .unwrap();
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines() {
        match (&mut open, line.trim_start()) {
            (None, fence) if fence.starts_with("```sql") => open = Some(String::new()),
            (Some(_), fence) if fence.starts_with("```") => blocks.push(open.take().unwrap()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(blocks.len() >= 6, "the shipped file has its query patterns: {}", blocks.len());
    let database = samples::chinook().await;
    let pool = database.connect().await;
    for block in blocks {
        let mut transaction = pool.begin().await.unwrap();
        sqlx::query("SET TRANSACTION READ ONLY").execute(&mut *transaction).await.unwrap();
        let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(block.clone()))
            .fetch_all(&mut *transaction)
            .await
            .unwrap_or_else(|error| panic!("{error}:\n{block}"));
        assert!(!rows.is_empty(), "the pattern returns rows on Chinook:\n{block}");
        transaction.rollback().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn refresh_schema_rewrites_only_the_overview_and_check_reads_the_result() {
    let lab = chinook_loop(None).await;
    let file = lab.context_file.display().to_string();
    let (code, stdout, stderr) = run(&lab.setup, &["context", "refresh-schema", "--file", &file]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("schema overview of 11 relations"), "{stdout}");
    let refreshed = std::fs::read_to_string(&lab.context_file).unwrap();
    let start = refreshed.find("<!-- orca:schema:start -->").unwrap();
    let end = refreshed.find("<!-- orca:schema:end -->").unwrap();
    let overview = &refreshed[start..end];
    assert!(overview.contains("invoice_line(invoice_line_id integer PK"), "{overview}");
    assert!(!overview.contains("(written by refresh-schema)"), "{overview}");
    let outside = |text: &str| {
        let start = text.find("<!-- orca:schema:start -->").unwrap();
        let end = text.find("<!-- orca:schema:end -->").unwrap();
        format!("{}{}", &text[..start], &text[end..])
    };
    assert_eq!(outside(&refreshed), outside(CONTEXT), "nothing outside the markers changes");

    let (code, stdout, stderr) = run(&lab.setup, &["context", "check", "--file", &file]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("Revenue by customer"), "{stdout}");

    // A file that does not exist yet starts from the template; a malformed one is reported.
    let fresh = lab.setup.home.path().join("new/context.md");
    let fresh_name = fresh.display().to_string();
    let (code, _, stderr) = run(&lab.setup, &["context", "refresh-schema", "--file", &fresh_name]);
    assert_eq!(code, 0, "{stderr}");
    let created = std::fs::read_to_string(&fresh).unwrap();
    for heading in
        ["## Successful Query Patterns", "## Common Error Patterns & Fixes", "invoice_line("]
    {
        assert!(created.contains(heading), "{created}");
    }
    std::fs::write(&fresh, "   \n").unwrap();
    let (code, _, stderr) = run(&lab.setup, &["context", "check", "--file", &fresh_name]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("is malformed"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_loop_refuses_what_it_cannot_serve_and_stops_when_the_database_is_at_fault() {
    // read_only: a generated write is sent back for a read; validation has a 1 s timeout.
    let lab = chinook_loop(Some(
        "read_only: true\nsql:\n  default_timeout_ms: 1000\nllm:\n  max_retries: 0\n  max_backoff_ms: 100\n  tools:\n    format_results: {enabled: false}\n",
    ))
    .await;
    lab.fake.script(
        Wire::Anthropic,
        [
            sql_reply("DELETE FROM invoice_line WHERE invoice_id = 1"),
            sql_reply("SELECT count(*) FROM invoice_line WHERE invoice_id = 1"),
        ],
    );
    let client = lab.setup.stdio_client().await;
    let (result, value, meta) =
        generate(&client, json!({"prompt": "drop the lines of invoice 1", "use_context": false}))
            .await;
    assert_eq!(result.is_error, Some(false), "{value}");
    assert_eq!(meta["attempt"], 2);
    assert_eq!(value["is_write"], false);
    let requests = anthropic_requests(&lab.fake);
    let retry = requests[1].body["messages"][2]["content"].as_str().unwrap().to_owned();
    assert!(retry.contains("read-only"), "{retry}");
    // use_context=false: the schema, but nothing from the context file.
    let first = requests[0].body["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(first.contains("invoice_line("), "{first}");
    assert!(!first.contains("Learned Context"), "{first}");
    assert_eq!(meta["context_applied"], false);

    // A model name of a provider the tool does not support is refused, naming the supported.
    let result = call(&client, "generate_schema", json!({"llm_model": "gemini-2.5-pro"}), None)
        .await
        .unwrap();
    let message = structured(&result)["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("supported providers: anthropic, openai"), "{message}");

    // A tool whose model calls are turned off sends nothing.
    let before = lab.fake.requests().len();
    let data = json!([{"genre": "Rock", "tracks": 1297}]);
    let result = call(&client, "format_results", json!({"data": data, "format": "summary"}), None)
        .await
        .unwrap();
    assert_eq!(structured(&result)["summary_source"], "statistics");
    let reason = meta_of(&result)["llm_summary"]["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("llm.tools.format_results.enabled: false"), "{reason}");
    assert_eq!(lab.fake.requests().len(), before);

    // A rate limit longer than max_backoff is not waited out.
    lab.fake.script(
        Wire::Anthropic,
        [Reply::Error { status: 429, retry_after: Some("30".to_owned()) }],
    );
    let (_, value, _) = generate(&client, json!({"prompt": "how many tracks"})).await;
    assert_eq!(value["error"]["code"], "RATE_LIMITED", "{value}");

    // The table is locked: EXPLAIN times out, which is the database's fault, not the SQL's.
    let pool = lab.database.connect().await;
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE track IN ACCESS EXCLUSIVE MODE").execute(&mut *holder).await.unwrap();
    lab.fake.script(Wire::Anthropic, [sql_reply("SELECT count(*) FROM track")]);
    let asked = anthropic_requests(&lab.fake).len();
    let (_, value, meta) = generate(&client, json!({"prompt": "how many tracks"})).await;
    assert_eq!(value["error"]["code"], "TIMEOUT", "{value}");
    assert_eq!(anthropic_requests(&lab.fake).len(), asked + 1, "the model is not asked again");
    assert_eq!(meta["attempts"], 1);
    holder.rollback().await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_cannot_be_reached_is_reported_without_its_address() {
    let database = samples::chinook().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let setup = OrcaSetup::new(&database.url)
        .with_env("ANTHROPIC_API_KEY", "sk-ant-unreachable")
        .with_env("ANTHROPIC_BASE_URL", &format!("http://{closed}"))
        .with_config("llm:\n  max_retries: 1\n  max_backoff_ms: 50\n");
    let client = setup.stdio_client().await;
    let (result, value, _) = generate(&client, json!({"prompt": "how many tracks"})).await;
    assert_eq!(result.is_error, Some(true));
    assert_eq!(value["error"]["code"], "UPSTREAM_UNAVAILABLE", "{value}");
    let text = value.to_string();
    assert!(text.contains("cannot connect to the anthropic endpoint"), "{text}");
    assert!(!text.contains(&closed.port().to_string()), "no address in errors: {text}");
    client.cancel().await.unwrap();
}
