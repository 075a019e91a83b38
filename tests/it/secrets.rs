//! Credentials never reach the model: every tool result and error, from every server, is
//! scanned before it leaves orca (`guard.secrets: redact`, the default) and each credential is
//! replaced with a marker naming its kind, in structured content, text, errors and a big read's
//! spliced bytes alike, over stdio and HTTP (stateless and `--stateful`); the tracking row holds
//! the redacted text only; `guard.secrets: off` passes them on.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::pinning::rogue_yaml;
use crate::support::{OrcaSetup, TestDatabase, call, meta_of, wait_for_row};

/// What must never appear anywhere once redacted.
const SECRETS: [&str; 6] = [
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "hunter2secret",
    "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
    "pw-9f8e7d6c5b4a",
];

fn assert_clean(text: &str, what: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} holds {secret}: {text}");
    }
}

/// The stored response, error message and failure details of one execution, as text.
async fn tracked(pool: &sqlx::PgPool, result: &rmcp::model::CallToolResult) -> String {
    let id: Uuid = meta_of(result)["execution_id"].as_str().unwrap().parse().unwrap();
    wait_for_row(pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    let (response, message): (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT response_data::text, error_message FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap();
    let failures: Vec<String> = sqlx::query_scalar(
        "SELECT coalesce(error_details::text, '') FROM orca.mcp_failures WHERE execution_id = $1",
    )
    .bind(id)
    .fetch_all(pool)
    .await
    .unwrap();
    format!(
        "{} | {} | {}",
        response.unwrap_or_default(),
        message.unwrap_or_default(),
        failures.join(" ")
    )
}

fn whole(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_string(result).unwrap()
}

#[tokio::test]
async fn an_upstreams_results_and_errors_reach_the_client_and_tracking_redacted() {
    let database = TestDatabase::create().await;
    let state = tempfile::NamedTempFile::new().unwrap();
    let setup = OrcaSetup::new(&database.url).with_external(&rogue_yaml(state.path(), "", ""));
    let client = setup.stdio_client().await;
    let pool = database.connect().await;

    let customers = call(&client, "r_customers", json!({}), None).await.unwrap();
    assert_clean(&whole(&customers), "the result");
    let structured = customers.structured_content.clone().unwrap();
    assert_eq!(structured["aws"]["access_key_id"], "[REDACTED:aws_access_key]");
    assert_eq!(structured["aws"]["secret_access_key"], "[REDACTED:aws_secret_key]");
    assert_eq!(structured["customers"][0]["note"], "deploy key [REDACTED:aws_access_key]");
    let text = customers.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("the AWS key is [REDACTED:aws_access_key], aws_secret_access_key=[REDACTED:aws_secret_key]"), "{text}");
    let meta = meta_of(&customers);
    assert_eq!(meta["redacted_secrets"], 8, "{meta:?}");
    assert_eq!(meta["redacted_kinds"], json!({"aws_access_key": 5, "aws_secret_key": 3}));
    assert_clean(&tracked(&pool, &customers).await, "the tracking row");

    // An upstream's own failure, and a JSON-RPC error.
    let failed = call(&client, "r_fail", json!({}), None).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    let text = failed.content[0].as_text().unwrap().text.clone();
    assert_eq!(
        text,
        "cannot reach postgres://orca:[REDACTED:url_password]@db.internal:5432/app with [REDACTED:github_token]"
    );
    assert_clean(&tracked(&pool, &failed).await, "the failure's tracking row");
    let refused = call(&client, "r_refuse", json!({}), None).await.unwrap();
    let error = &refused.structured_content.clone().unwrap()["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .ends_with("Authorization: Bearer [REDACTED:anthropic_key]"),
        "{error}"
    );
    assert_clean(&whole(&refused), "the error");
    assert_clean(&tracked(&pool, &refused).await, "the error's tracking row");

    // A clean result says nothing.
    let echoed = call(&client, "r_echo", json!({"text": "plain"}), None).await.unwrap();
    assert!(meta_of(&echoed).get("redacted_secrets").is_none());
    client.cancel().await.unwrap();
}

const READ: &str = "SELECT g AS n, CASE WHEN g % 100 = 0 THEN 'key AKIAIOSFODNN7EXAMPLE, ' || chr(10) || 'dsn postgres://app:pw-9f8e7d6c5b4a@db/x' ELSE 'row ' || g END AS note FROM generate_series(1, 1000) AS g ORDER BY g";

fn check_rows(structured: &Value, transport: &str) {
    let rows = structured["rows"].as_array().unwrap_or_else(|| panic!("{transport}: no rows"));
    assert_eq!(rows.len(), 1000, "{transport}");
    assert_eq!(
        rows[99][1],
        "key [REDACTED:aws_access_key], \ndsn postgres://app:[REDACTED:url_password]@db/x",
        "{transport}"
    );
    assert_eq!(rows[100][1], "row 101", "{transport}");
}

#[tokio::test]
async fn a_spliced_read_is_redacted_in_its_bytes_over_every_transport_and_off_passes_it() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let arguments = json!({"sql": READ, "dry_run": false});
    let pool = database.connect().await;

    let client = setup.stdio_client().await;
    let result = call(&client, "execute_sql", arguments.clone(), None).await.unwrap();
    check_rows(&result.structured_content.clone().unwrap(), "stdio");
    let text: Value = serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap();
    check_rows(&text, "stdio text block");
    assert_clean(&whole(&result), "stdio");
    assert_eq!(meta_of(&result)["redacted_secrets"], 20);
    assert_clean(&tracked(&pool, &result).await, "the tracking row");
    client.cancel().await.unwrap();

    for (extra, transport) in [(&[][..], "stateless http"), (&["--stateful"][..], "stateful http")]
    {
        let server = setup.http_server(extra);
        let client = server.client(None).await;
        let result = call(&client, "execute_sql", arguments.clone(), None).await.unwrap();
        check_rows(&result.structured_content.clone().unwrap(), transport);
        assert_clean(&whole(&result), transport);
        client.cancel().await.unwrap();
    }

    let off = OrcaSetup::new(&database.url).with_config("guard:\n  secrets: off\n");
    let client = off.stdio_client().await;
    let result = call(&client, "execute_sql", arguments, None).await.unwrap();
    let rows = result.structured_content.clone().unwrap()["rows"].clone();
    assert!(rows[99][1].as_str().unwrap().contains("AKIAIOSFODNN7EXAMPLE"), "off: {}", rows[99]);
    assert!(meta_of(&result).get("redacted_secrets").is_none());
    client.cancel().await.unwrap();
}
