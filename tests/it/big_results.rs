//! A big read's rows are encoded once and written into the message by the transport, without a
//! `Value` tree (`splice`): they must arrive whole and exact over stdio, stateless and stateful
//! HTTP and `orca call`'s in-process gateway, in structured content and in the text block alike,
//! and be tracked as they were sent.

use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, run, text_of, wait_for_row};

const ROWS: i64 = 20_000;

/// Quotes, backslashes, a newline, non-ASCII text, nulls, numerics and JSON documents: all that
/// is escaped differently in structured content and in the text block.
const SQL: &str = "SELECT g AS n, 'row \"' || g || '\" \\ ünï' || chr(10) || '✓' AS label, \
                   CASE WHEN g % 7 = 0 THEN NULL ELSE g * 0.5 END AS half, \
                   jsonb_build_object('k', g, 'q', '\"\\') AS doc \
                   FROM generate_series(1, 20000) AS g ORDER BY g";

const CONFIG: &str =
    "sql:\n  default_max_rows: 100000\n  hard_max_rows: 100000\n  max_result_bytes: 67108864\n";

fn arguments() -> Value {
    json!({"sql": SQL, "dry_run": false})
}

/// The result as a client reads it: every row exact, and the text block the same JSON.
fn check(structured: &Value, text: &str, transport: &str) {
    assert_eq!(structured["row_count"], ROWS, "{transport}");
    assert_eq!(structured["truncated"], false, "{transport}");
    assert_eq!(structured["schema"][1]["name"], "label", "{transport}");
    let rows = structured["rows"].as_array().unwrap_or_else(|| panic!("{transport}: no rows"));
    assert_eq!(rows.len() as i64, ROWS, "{transport}");
    for (index, row) in rows.iter().enumerate() {
        let n = index as i64 + 1;
        assert_eq!(row[0], n, "{transport}");
        assert_eq!(row[1], format!("row \"{n}\" \\ ünï\n✓"), "{transport}");
        assert_eq!(row[2].is_null(), n % 7 == 0, "{transport}: {row}");
        assert_eq!(row[3], json!({"k": n, "q": "\"\\"}), "{transport}");
    }
    let from_text: Value = serde_json::from_str(text).unwrap();
    assert_eq!(&from_text, structured, "{transport}: the text block is the same JSON");
}

#[tokio::test]
async fn a_big_read_arrives_whole_over_every_transport_and_is_tracked_as_sent() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url).with_config(CONFIG);

    // stdio.
    let client = setup.stdio_client().await;
    let result = call(&client, "execute_sql", arguments(), None).await.unwrap();
    let structured = result.structured_content.clone().unwrap();
    let text = text_of(&result);
    check(&structured, &text, "stdio");
    let id: Uuid = meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap();
    client.cancel().await.unwrap();

    // Tracked as sent: the size of the whole text, and its start.
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    let (stored, size): (String, i64) = sqlx::query_as(
        "SELECT response_data::text, response_bytes FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(size, text.len() as i64);
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(stored["truncated"], true);
    assert_eq!(stored["size_bytes"], size);
    let preview = stored["preview"].as_str().unwrap();
    assert!(preview.len() > 60_000 && text.starts_with(preview), "{}", &preview[..200]);

    // Streamable HTTP, stateless: rmcp's client, then the raw body.
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let result = call(&client, "execute_sql", arguments(), None).await.unwrap();
    check(&result.structured_content.clone().unwrap(), &text_of(&result), "http");
    client.cancel().await.unwrap();
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "execute_sql", "arguments": arguments()}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body = response.bytes().await.unwrap();
    assert!(
        memchr::memmem::find(&body, b"orca-splice-").is_none(),
        "no placeholder reaches the wire"
    );
    let message: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(message["id"], 9);
    let result = &message["result"];
    check(&result["structuredContent"], result["content"][0]["text"].as_str().unwrap(), "raw");
    drop(server);

    // Streamable HTTP with sessions, whose streams carry whole results.
    let server = setup.http_server(&["--stateful"]);
    let client = server.client(None).await;
    let result = call(&client, "execute_sql", arguments(), None).await.unwrap();
    check(&result.structured_content.clone().unwrap(), &text_of(&result), "stateful http");
    client.cancel().await.unwrap();
    drop(server);

    // `orca call` with no target: orca's own gateway in-process.
    let args = arguments().to_string();
    let (code, stdout, stderr) = run(&setup, &["call", "execute_sql", "--args", &args]);
    assert_eq!(code, 0, "{stderr}");
    let output: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(output["success"], true, "{stderr}");
    let data = &output["data"];
    check(data, &serde_json::to_string(data).unwrap(), "in-process");
}
