//! A role's masking on every result the caller receives, not only the SQL tools' rows: an
//! external upstream's structured content and text (`orca-rogue-upstream`'s customers, with
//! e-mail addresses, card numbers, an IBAN, an address, a social security number and an AWS
//! key), Metabase's rows and Weaviate's objects (their fakes), by name (JSON keys at any
//! depth, table columns) and by kind (`kinds:`, wherever a value of the kind appears), and the
//! SQL tools' rows by kind. A by-name hash of a result never equals PostgreSQL's hash of the
//! same value, so an echo tool is no dictionary of the SQL hashes.

use serde_json::{Value, json};
use sha2::Digest as _;
use uuid::Uuid;

use crate::pinning::rogue_yaml;
use crate::support::fake_metabase::{FakeMetabase, PASSWORD, USERNAME, Version};
use crate::support::fake_weaviate::{ADMIN_KEY, FakeWeaviate};
use crate::support::{OrcaSetup, TestDatabase, call, meta_of, wait_for_row};

const READER: &str = "orca_test_key_of_the_masked_reader";
const ADMIN: &str = "orca_test_key_of_the_unmasked_admin";

/// Raw values that must not reach the masked reader, anywhere in a result.
const RAW: [&str; 11] = [
    "ada@example.com",
    "alan@example.net",
    "grace@example.org",
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
    "5555555555554444",
    "203.0.113.9",
    "078-05-1120",
    "DE89370400440532013000",
    "415 555 0100",
    "AKIAIOSFODNN7EXAMPLE",
];

fn config() -> String {
    let hash = |key: &str| hex::encode(sha2::Sha256::digest(key.as_bytes()));
    format!(
        "masking:\n  people:\n    email: redact\n    last_name: hash\n    title: redact\n    kinds:\n      card: keep_last:4\n      email: keep_email_domain\n      phone: keep_last:4\n      iban: keep_last:4\n      ip: redact\n      national_id: redact\nauth:\n  api_keys:\n    - name: reader\n      sha256: {}\n      role: reader\n    - name: admin\n      sha256: {}\n      verbs: [read, create, update, delete]\n  roles:\n    reader:\n      verbs: [read]\n      masking: people\n",
        hash(READER),
        hash(ADMIN)
    )
}

fn assert_masked(text: &str, what: &str) {
    let leaked: Vec<&str> = RAW.iter().copied().filter(|raw| text.contains(raw)).collect();
    assert!(leaked.is_empty(), "{what} shows {leaked:?}: {text}");
}

async fn tracked_response(pool: &sqlx::PgPool, result: &rmcp::model::CallToolResult) -> String {
    let id: Uuid = meta_of(result)["execution_id"].as_str().unwrap().parse().unwrap();
    wait_for_row(pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    sqlx::query_scalar(
        "SELECT coalesce(response_data::text, '') FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn an_upstreams_results_are_masked_by_name_and_kind_and_what_may_pass_is_what_no_rule_names()
{
    let database = TestDatabase::create().await;
    let state = tempfile::NamedTempFile::new().unwrap();
    let setup = OrcaSetup::new(&database.url).with_config(&config()).with_external(&rogue_yaml(
        state.path(),
        "",
        "",
    ));
    let server = setup.http_server(&[]);
    let reader = server.client(Some(READER)).await;
    let admin = server.client(Some(ADMIN)).await;
    let pool = database.connect().await;

    let seen = call(&reader, "r_customers", json!({}), None).await.unwrap();
    assert_masked(&serde_json::to_string(&seen).unwrap(), "the reader's result");
    assert_masked(&tracked_response(&pool, &seen).await, "the reader's tracking row");
    let structured = seen.structured_content.clone().unwrap();
    let ada = &structured["customers"][0];
    let alan = &structured["customers"][1];
    // By name, at any depth.
    assert_eq!(ada["email"], "[REDACTED]");
    let hashed = ada["last_name"].as_str().unwrap();
    assert!(hashed.starts_with("h:") && hashed.len() == 18, "{hashed}");
    // By kind, whatever the key.
    assert_eq!(ada["card"], "***************1111");
    assert_eq!(ada["contact"], "write to ***@example.org or call ***********0100");
    assert_eq!(ada["iban"], "******************3000");
    assert_eq!(alan["card"], "************4444", "a card number sent as a JSON number");
    assert_eq!(
        (alan["ip"].as_str(), alan["ssn"].as_str()),
        (Some("[REDACTED]"), Some("[REDACTED]"))
    );
    // What can still pass: text of no detectable kind under a key the policy does not name.
    assert_eq!(alan["note"], "nothing special");
    assert_eq!(ada["name"], "Ada Lovelace");
    // And secrets are redacted on top.
    assert_eq!(ada["note"], "deploy key [REDACTED:aws_access_key]");
    // Free text by kind; a JSON text block as JSON, the same as the structured content.
    let free = seen.content[0].as_text().unwrap().text.clone();
    assert!(
        free.starts_with(
            "Ada Lovelace <***@example.com> paid with ***************1111 from [REDACTED];"
        ),
        "{free}"
    );
    let json_text: Value = serde_json::from_str(&seen.content[1].as_text().unwrap().text).unwrap();
    assert_eq!(json_text, structured);
    let meta = meta_of(&seen);
    assert_eq!(meta["masking_policy"], "people");
    assert!(meta["masked_values"].as_u64().unwrap() >= 20, "{meta:?}");

    // The unmasked admin sees the values (its secrets still redacted).
    let clear = call(&admin, "r_customers", json!({}), None).await.unwrap();
    let clear = clear.structured_content.unwrap();
    assert_eq!(clear["customers"][0]["email"], "ada@example.com");
    assert_eq!(clear["customers"][0]["card"], "4111 1111 1111 1111");

    // An echo tool hashes under the results' key: never PostgreSQL's hash of the same value.
    sqlx::raw_sql("CREATE TABLE people (id int PRIMARY KEY, last_name text); INSERT INTO people VALUES (1, 'Lovelace')")
        .execute(&pool)
        .await
        .unwrap();
    let from_sql = call(
        &reader,
        "execute_sql",
        json!({"sql": "SELECT last_name FROM people", "dry_run": false}),
        None,
    )
    .await
    .unwrap();
    let from_sql = from_sql.structured_content.unwrap();
    let sql_hash =
        from_sql["rows"][0][0].as_str().unwrap_or_else(|| panic!("{from_sql}")).to_owned();
    assert!(sql_hash.starts_with("h:"), "{sql_hash}");
    let echoed = call(&reader, "r_echo", json!({"key": "last_name", "text": "Lovelace"}), None)
        .await
        .unwrap();
    let echo_hash =
        echoed.structured_content.unwrap()["echo"]["last_name"].as_str().unwrap().to_owned();
    assert!(echo_hash.starts_with("h:"), "{echo_hash}");
    assert_ne!(echo_hash, sql_hash, "an echo must not hash as the database does");

    // The SQL tools' rows are masked by kind (the database masks them by name): spliced
    // (execute_sql) and not (query_sql).
    let sql = "SELECT 'write to ada@example.com, card 4111 1111 1111 1111' AS note";
    let spliced =
        call(&reader, "execute_sql", json!({"sql": sql, "dry_run": false}), None).await.unwrap();
    let paged = call(&reader, "query_sql", json!({"sql": sql}), None).await.unwrap();
    for (tool, result) in [("execute_sql", &spliced), ("query_sql", &paged)] {
        let rows = result.structured_content.clone().unwrap()["rows"].clone();
        assert_eq!(rows[0][0], "write to ***@example.com, card ***************1111", "{tool}");
        assert_masked(&serde_json::to_string(result).unwrap(), tool);
    }
    reader.cancel().await.unwrap();
    admin.cancel().await.unwrap();
}

#[tokio::test]
async fn metabases_rows_and_weaviates_objects_are_masked_for_a_masked_role() {
    let database = TestDatabase::create().await;
    let metabase = FakeMetabase::start(Version::V050);
    let weaviate = FakeWeaviate::start();
    let setup = OrcaSetup::new(&database.url)
        .with_config(&format!("servers: [orca, metabase, weaviate]\n{}", config()))
        .with_env("METABASE_URL", &metabase.url())
        .with_env("METABASE_USERNAME", USERNAME)
        .with_env("METABASE_PASSWORD", PASSWORD)
        .with_env("WEAVIATE_URL", &weaviate.url())
        .with_env("WEAVIATE_API_KEY", ADMIN_KEY);
    let server = setup.http_server(&[]);
    let reader = server.client(Some(READER)).await;
    let admin = server.client(Some(ADMIN)).await;

    let query = json!({"database": 1, "native": {"query": "SELECT * FROM people"}});
    let rows = call(&reader, "run_dataset_query", query.clone(), None).await.unwrap();
    assert_eq!(rows.is_error, Some(false), "{rows:?}");
    assert_masked(&serde_json::to_string(&rows).unwrap(), "Metabase's rows");
    let value = rows.structured_content.unwrap();
    assert_eq!(
        value["rows"],
        json!([
            [1, "[REDACTED]", "paid with ***************1111 from [REDACTED]"],
            [2, "[REDACTED]", "key [REDACTED:aws_access_key], backup ***@example.org"]
        ]),
        "the column `email` by name, the notes by kind"
    );
    let clear = call(&admin, "run_dataset_query", query, None).await.unwrap();
    assert_eq!(clear.structured_content.unwrap()["rows"][0][1], "ada@example.com");

    let stored = call(
        &admin,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "properties": {"title": "Reach ada@example.com"}}),
        None,
    )
    .await
    .unwrap();
    let id = stored.structured_content.unwrap()["id"].as_str().unwrap().to_owned();
    let note = json!({"collection_name": "Note", "tenant": "tenantA", "properties": {"text": "card 4111 1111 1111 1111 for alan@example.net"}});
    let added = call(&admin, "weaviate-objects-upsert", note, None).await.unwrap();
    assert_eq!(added.is_error, Some(false), "{added:?}");
    let got = call(
        &reader,
        "weaviate-objects-get",
        json!({"collection_name": "Article", "id": id}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        got.structured_content.unwrap()["object"]["properties"]["title"],
        "[REDACTED]",
        "`title` by name"
    );
    let found = call(
        &reader,
        "weaviate-query-bm25",
        json!({"collection_name": "Note", "tenant": "tenantA", "query": "card"}),
        None,
    )
    .await
    .unwrap();
    assert_masked(&serde_json::to_string(&found).unwrap(), "Weaviate's objects");
    let hits = found.structured_content.unwrap()["results"].clone();
    let texts: Vec<&str> = hits
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|hit| hit["properties"]["text"].as_str())
        .collect();
    assert!(texts.contains(&"card ***************1111 for ***@example.net"), "{texts:?}");
    reader.cancel().await.unwrap();
    admin.cancel().await.unwrap();
}
