//! `execute_sql` through a real MCP client on Chinook: reads, dry runs, and the write flow.

use serde_json::{Value, json};

use crate::support::{OrcaSetup, call, run as run_orca, samples};

fn structured(result: &rmcp::model::CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_read_returns_a_tabular_result() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let result = call(
        &client,
        "execute_sql",
        json!({"sql": "SELECT artist_id, name FROM artist ORDER BY artist_id LIMIT 3", "dry_run": false}),
        None,
    )
    .await
    .unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "{value}");
    assert_eq!(value["rows"][0], json!([1, "AC/DC"]), "{value}");
    assert_eq!(value["schema"][0]["name"], "artist_id");
    assert_eq!(value["schema"][0]["type"], "INT4");
    assert_eq!(value["schema"][0]["nullable"], false);
    assert_eq!(value["row_count"], 3);
    assert_eq!(value["truncated"], false);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_write_runs_once_with_the_token_of_its_dry_run() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let sql = "DELETE FROM playlist_track WHERE playlist_id = 1 AND track_id = 3402";
    let dry = call(&client, "execute_sql", json!({"sql": sql}), None).await.unwrap();
    let execution_id: uuid::Uuid =
        crate::support::meta_of(&dry)["execution_id"].as_str().unwrap().parse().unwrap();
    let dry = structured(&dry);
    let token = dry["confirmation_token"].as_str().unwrap_or_else(|| panic!("{dry}")).to_owned();
    assert_eq!(dry["statement"]["kind"], "delete");
    let run = call(
        &client,
        "execute_sql",
        json!({"sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(structured(&run)["rows_affected"], 1, "{}", structured(&run));
    let replay = call(
        &client,
        "execute_sql",
        json!({"sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(structured(&replay)["error"]["code"], "CONFIRMATION_REQUIRED");
    client.cancel().await.unwrap();
    // The token is not kept in the tracking record of the dry run.
    let pool = database.connect().await;
    crate::support::wait_for_row(
        &pool,
        "SELECT 1 FROM orca.mcp_executions WHERE id = $1",
        execution_id,
    )
    .await;
    let (stored,): (Value,) =
        sqlx::query_as("SELECT response_data FROM orca.mcp_executions WHERE id = $1")
            .bind(execution_id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored["confirmation_token"], "[REDACTED]", "{stored}");
    assert_eq!(stored["statement"]["kind"], "delete");
}

async fn add_records(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    arguments: Value,
) -> (bool, Value) {
    let result = call(client, "add_records", arguments, None).await.unwrap();
    (result.is_error == Some(true), structured(&result))
}

#[tokio::test]
async fn add_records_maps_fields_and_returns_the_primary_keys() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let (failed, value) = add_records(
        &client,
        json!({"table": "Customer", "data": [
            {"customerId": 100, "FirstName": "Ada", "last_name": "Lovelace", "EMAIL": "ada@example.com", "supportRepId": "3"},
            {"customerId": 101, "firstName": "Alan", "lastName": "Turing", "email": "alan@example.com", "company": null}
        ]}),
    )
    .await;
    assert!(!failed, "{value}");
    assert_eq!(value["table"], "public.customer");
    assert_eq!(value["inserted"], 2);
    assert_eq!(value["primary_keys"], json!([{"customer_id": 100}, {"customer_id": 101}]));
    let pool = database.connect().await;
    let (name, rep): (String, Option<i32>) =
        sqlx::query_as("SELECT first_name, support_rep_id FROM customer WHERE customer_id = 100")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((name.as_str(), rep), ("Ada", Some(3)));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn add_records_refuses_what_it_would_have_to_guess() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let cases = [
        // An unknown field: the columns and the closest names come back.
        (json!({"table": "artist", "data": {"artist_id": 900, "nmae": "X"}}), "nmae"),
        // A required column is missing.
        (json!({"table": "customer", "data": {"customer_id": 900, "first_name": "A"}}), "required"),
        // A fractional number for an integer column.
        (json!({"table": "artist", "data": {"artist_id": 1.5, "name": "X"}}), "whole number"),
        // An object for a text column.
        (json!({"table": "artist", "data": {"artist_id": 901, "name": {"a": 1}}}), "expected text"),
        // Not records at all.
        (json!({"table": "artist", "data": []}), "non-empty array"),
        // Two fields for one column.
        (
            json!({"table": "artist", "data": {"name": "a", "Name": "b", "artist_id": 902}}),
            "both map",
        ),
        // No such table: the closest names come back.
        (json!({"table": "artists", "data": {"name": "X"}}), "artist"),
        // A view is not a table.
        (json!({"table": "pg_catalog.pg_tables", "data": {"x": 1}}), "no table"),
    ];
    for (arguments, expected) in cases {
        let (failed, value) = add_records(&client, arguments.clone()).await;
        assert!(failed, "{arguments} must be refused: {value}");
        let error = &value["error"];
        let text = format!("{} {}", error["message"], error["details"]);
        assert!(text.contains(expected), "{arguments}: expected {expected:?} in {value}");
    }
    let (_, value) =
        add_records(&client, json!({"table": "artist", "data": {"artist_id": 900, "nmae": "X"}}))
            .await;
    assert_eq!(value["error"]["code"], "INVALID_INPUT");
    assert_eq!(value["error"]["details"]["closest"]["nmae"][0], "name", "{value}");
    // Nothing was inserted by any refused call.
    let pool = database.connect().await;
    let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM artist WHERE artist_id >= 900")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0);
    // With validate_fields=false unknown fields are ignored and reported.
    let (failed, value) = add_records(
        &client,
        json!({"table": "artist", "data": {"artist_id": 903, "name": "Y", "nmae": "X"}, "validate_fields": false}),
    )
    .await;
    assert!(!failed, "{value}");
    assert_eq!(value["ignored_fields"], json!(["nmae"]));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn add_records_loads_a_large_batch_through_copy_in_one_transaction() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let records: Vec<Value> = (0..2500)
        .map(|i| json!({"genre_id": 1000 + i, "name": format!("genre, \"{i}\"\nline")}))
        .collect();
    let result = call(&client, "add_records", json!({"table": "genre", "data": records}), None)
        .await
        .unwrap();
    let value = structured(&result);
    assert_eq!(value["inserted"], 2500, "{value}");
    assert_eq!(value["primary_keys"].as_array().unwrap().len(), 2500);
    assert_eq!(result.meta.as_ref().unwrap().0["method"], "copy");
    let pool = database.connect().await;
    let (name,): (String,) = sqlx::query_as("SELECT name FROM genre WHERE genre_id = 1007")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(name, "genre, \"7\"\nline");
    // One bad record: nothing of the batch stays.
    let mut records: Vec<Value> =
        (0..1500).map(|i| json!({"genre_id": 5000 + i, "name": "x"})).collect();
    records.push(json!({"genre_id": 1000, "name": "duplicate key"}));
    let result = call(&client, "add_records", json!({"table": "genre", "data": records}), None)
        .await
        .unwrap();
    let value = structured(&result);
    assert_eq!(value["error"]["code"], "QUERY_FAILED", "{value}");
    let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM genre WHERE genre_id >= 5000")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 0);
    client.cancel().await.unwrap();
}

/// An MCP client that declares elicitation and answers every approval question the same way,
/// remembering the questions.
#[derive(Clone)]
struct Approver {
    approve: bool,
    questions: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Approver {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder().enable_elicitation().build(),
            rmcp::model::Implementation::new("approver", "1.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.questions.lock().unwrap().push(message);
        }
        Ok(rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
            .with_content(json!({"approve": self.approve})))
    }
}

#[tokio::test]
async fn the_calling_client_never_approves_its_own_write_not_even_through_elicitation() {
    use rmcp::ServiceExt;
    let database = samples::chinook().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url).with_config("sql:\n  write_confirmation: human\n");
    let sql = "UPDATE artist SET name = 'AC/DC (approved)' WHERE artist_id = 1";
    let name = || async {
        let (name,): (String,) = sqlx::query_as("SELECT name FROM artist WHERE artist_id = 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        name
    };
    // A client that would say yes to any approval question it were asked.
    let approver = Approver {
        approve: true,
        questions: std::sync::Arc::new(std::sync::Mutex::new(Vec::new())),
    };
    let mut command = setup.tokio_command();
    command.args(["serve", "--stdio"]);
    let transport = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
        .0;
    let client = approver.clone().serve(transport).await.unwrap();
    let dry = structured(&call(&client, "execute_sql", json!({"sql": sql}), None).await.unwrap());
    let id = dry["approval_id"].as_str().unwrap_or_else(|| panic!("{dry}")).to_owned();
    assert!(dry.get("confirmation_token").is_none(), "the model never sees a token: {dry}");
    let write = json!({"sql": sql, "dry_run": false, "read_only": false});
    let run = structured(&call(&client, "execute_sql", write.clone(), None).await.unwrap());
    assert_eq!(run["error"]["code"], "CONFIRMATION_REQUIRED", "{run}");
    assert!(
        approver.questions.lock().unwrap().is_empty(),
        "the calling client is not asked to approve its own write"
    );
    assert_ne!(name().await, "AC/DC (approved)");

    // Nor does the requesting principal approve it under another door.
    let requester: String =
        sqlx::query_scalar("SELECT principal FROM orca.confirmation_tokens WHERE id = $1::uuid")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    let (code, stdout, stderr) = run_orca(&setup, &["approve", &id, "--by", &requester]);
    assert_ne!(code, 0, "{stdout}");
    assert!(stderr.contains("cannot approve it; another person must"), "{stderr}");
    let run = structured(&call(&client, "execute_sql", write.clone(), None).await.unwrap());
    assert_eq!(run["error"]["code"], "CONFIRMATION_REQUIRED", "{run}");

    // Another person's approval lets the same call run once.
    let (code, stdout, stderr) = run_orca(&setup, &["approve", &id, "--by", "dana"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let run = structured(&call(&client, "execute_sql", write, None).await.unwrap());
    assert_eq!(run["rows_affected"], 1, "{run}");
    assert_eq!(name().await, "AC/DC (approved)");
    client.cancel().await.unwrap();
}

/// Every tool that takes SQL, with a statement that holds `$n` placeholders: the caller's error
/// (orca binds no values), named and not retryable, and nothing created.
#[tokio::test]
async fn placeholders_are_the_callers_error_in_every_tool_that_takes_sql() {
    let database = samples::chinook().await;
    let setup = OrcaSetup::new(&database.url);
    let client = setup.stdio_client().await;
    let read = "SELECT name FROM artist WHERE artist_id = $1";
    let cases = [
        ("execute_sql", json!({"sql": read, "dry_run": false}), "$1"),
        ("execute_sql", json!({"sql": read}), "$1"),
        (
            "execute_sql",
            json!({"sql": "UPDATE artist SET name = $2 WHERE artist_id = $1", "dry_run": false,
                   "read_only": false}),
            "$1, $2",
        ),
        ("execute_sql", json!({"sql": "DELETE FROM artist WHERE artist_id = $1"}), "$1"),
        ("execute_sql", json!({"sql": "EXPLAIN ANALYZE SELECT $3::int", "dry_run": false}), "$3"),
        ("query_sql", json!({"sql": read}), "$1"),
        ("query_sql", json!({"sql": "SELECT name FROM artist ORDER BY name LIMIT $1"}), "$1"),
        (
            "query_sql",
            json!({"sql": "WITH a AS (SELECT $1::int AS id) SELECT name FROM artist JOIN a \
                           ON artist.artist_id = a.id"}),
            "$1",
        ),
        ("explain_sql", json!({"sql": read}), "$1"),
        ("explain_sql", json!({"sql": read, "analyze": true}), "$1"),
        ("materialize_sql", json!({"sql": read, "target": {"table": "by_placeholder"}}), "$1"),
        ("create_view", json!({"sql": read, "name": {"table": "by_placeholder_view"}}), "$1"),
    ];
    let mut failures = Vec::new();
    for (tool, arguments, named) in cases {
        let result = call(&client, tool, arguments.clone(), None).await.unwrap();
        let error = &structured(&result)["error"];
        let message = error["message"].as_str().unwrap_or_default();
        if result.is_error != Some(true)
            || error["code"] != "INVALID_INPUT"
            || error["retryable"] != false
            || !message.contains(&format!("placeholders {named}"))
            || !error["hint"].as_str().unwrap_or_default().contains("literal")
        {
            failures.push(format!("{tool} {arguments}: {}", structured(&result)));
        }
    }
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));

    // Dollar signs in strings, dollar quotes and quoted names are no placeholders.
    let result = call(
        &client,
        "query_sql",
        json!({"sql": "SELECT '$1' AS plain, $$ $2 $$ AS quoted, 3 AS \"$3\""}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(structured(&result)["rows"][0], json!(["$1", " $2 ", 3]), "{result:?}");
    let pool = database.connect().await;
    let created: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class WHERE relname IN ('by_placeholder', 'by_placeholder_view')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(created, 0);
    client.cancel().await.unwrap();
}
