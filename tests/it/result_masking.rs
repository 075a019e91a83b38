//! A role's masking on every result the caller receives, not only the SQL tools' rows: an
//! external upstream's structured content and text (`orca-rogue-upstream`'s customers, with
//! e-mail addresses, card numbers, an IBAN, an address, a social security number and an AWS
//! key), Metabase's rows and Weaviate's objects (their fakes), by name (JSON keys at any
//! depth, table columns) and by kind (`kinds:`, wherever a value of the kind appears), and the
//! SQL tools' rows by kind. A by-name hash of a result never equals PostgreSQL's hash of the
//! same value, so an echo tool is no dictionary of the SQL hashes. What a server sends besides
//! tool results (`orca-test-upstream`'s resources, prompt and completions with
//! `FIXTURE_PERSONAL`, orca's own `res://samples/...` and prompts) is masked and redacted too.

use serde_json::{Value, json};
use sha2::Digest as _;
use uuid::Uuid;

use crate::pinning::rogue_yaml;
use crate::support::fake_metabase::{FakeMetabase, PASSWORD, USERNAME, Version};
use crate::support::fake_weaviate::{ADMIN_KEY, FakeWeaviate};
use crate::support::{OrcaSetup, TestDatabase, call, eventually, meta_of, wait_for_row};

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

/// The test upstream with its personal data outside tool results (`FIXTURE_PERSONAL`) and its
/// MCP App (`FIXTURE_APP`), as server `fx`.
fn personal_fixture_yaml() -> String {
    format!(
        "mcps:\n  fx:\n    command: {}\n    timeout: 5s\n    env:\n      FIXTURE_PERSONAL: \"1\"\n      FIXTURE_APP: \"1\"\n",
        crate::apps::fixture().display()
    )
}

/// The credentials the fixture puts in its resources, prompt and completions.
const CREDENTIALS: [&str; 2] = [
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
];

fn assert_no_credentials(text: &str, what: &str) {
    for credential in CREDENTIALS {
        assert!(!text.contains(credential), "{what} holds {credential}: {text}");
    }
}

async fn read(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    uri: &str,
) -> Result<rmcp::model::ReadResourceResult, rmcp::ServiceError> {
    client.read_resource(rmcp::model::ReadResourceRequestParams::new(uri)).await
}

/// The text of a read's one contents (a blob decoded).
fn contents_text(read: &rmcp::model::ReadResourceResult) -> String {
    use base64::Engine as _;
    match &read.contents[..] {
        [rmcp::model::ResourceContents::TextResourceContents { text, .. }] => text.clone(),
        [rmcp::model::ResourceContents::BlobResourceContents { blob, .. }] => {
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(blob).unwrap())
                .unwrap()
        }
        other => panic!("expected one contents: {other:?}"),
    }
}

#[tokio::test]
async fn an_upstreams_resources_prompts_and_completions_are_masked_and_redacted() {
    use rmcp::model::{ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, Reference};
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    // A table for orca's own resources, there before orca starts (and masks it).
    sqlx::raw_sql("CREATE TABLE notes (id int PRIMARY KEY, note text); INSERT INTO notes VALUES (1, 'write to ada@example.com, key AKIAIOSFODNN7EXAMPLE')")
        .execute(&pool)
        .await
        .unwrap();
    let setup = OrcaSetup::new(&database.url)
        .with_config(&config())
        .with_external(&personal_fixture_yaml());
    let server = setup.http_server(&[]);
    let reader = server.client(Some(READER)).await;
    let admin = server.client(Some(ADMIN)).await;

    // Resources: free text by kind, JSON text as JSON (by name too), a blob's text, the
    // upstream's `_meta`; and what the tracking row holds.
    let card = read(&reader, "orca://fx/fixture://customer").await.unwrap();
    let whole = serde_json::to_string(&card).unwrap();
    assert_masked(&whole, "the reader's resource");
    assert_no_credentials(&whole, "the reader's resource");
    assert_eq!(
        contents_text(&card),
        format!(
            "Ada Lovelace <***@example.com> pays with ***************1111; deploy key \
             [REDACTED:aws_access_key]; session [REDACTED:jwt]"
        )
    );
    let meta = card.meta.clone().unwrap().0;
    assert_eq!(meta["masking_policy"], "people");
    assert_eq!(meta["redacted_secrets"], 3, "{meta:?}");
    let record = read(&reader, "orca://fx/fixture://customer.json").await.unwrap();
    let record: Value = serde_json::from_str(&contents_text(&record)).unwrap();
    assert_eq!(
        record,
        json!({"email": "[REDACTED]", "card": "***************1111", "token": "[REDACTED:jwt]"})
    );
    let backup = read(&reader, "orca://fx/fixture://backup").await.unwrap();
    assert_eq!(
        contents_text(&backup),
        "backup contact ***@example.org, key [REDACTED:aws_access_key]"
    );
    let failed = read(&reader, "orca://fx/fixture://items/ada@example.com/x").await.unwrap_err();
    assert_masked(&failed.to_string(), "the reader's failed read");
    // An upstream's app page is served as it came (it holds nothing to redact).
    let app = read(&reader, "ui://fx/fixture/app.html").await.unwrap();
    assert_eq!(
        contents_text(&app),
        include_str!("../../fixtures/upstream/src/app.html"),
        "the app page is not masked"
    );

    // The unmasked admin sees the personal data, never the credentials.
    let clear = read(&admin, "orca://fx/fixture://customer").await.unwrap();
    let clear_text = contents_text(&clear);
    assert!(
        clear_text.contains("ada@example.com") && clear_text.contains("4111 1111"),
        "{clear_text}"
    );
    assert_no_credentials(&serde_json::to_string(&clear).unwrap(), "the admin's resource");

    // The reader's tracking rows hold what the reader saw.
    eventually("the reader's five reads", std::time::Duration::from_secs(20), || async {
        let count: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM orca.mcp_executions \
              WHERE principal = 'reader' AND tool_name = 'resources/read'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        count == 5
    })
    .await;
    let stored: Vec<String> = sqlx::query_scalar(
        "SELECT coalesce(e.response_data::text, '') || ' | ' || coalesce(e.error_message, '') \
                || ' | ' || coalesce((SELECT string_agg(f.error_details::text, ' ') \
                                        FROM orca.mcp_failures f WHERE f.execution_id = e.id), '') \
           FROM orca.mcp_executions e \
          WHERE e.principal = 'reader' AND e.tool_name = 'resources/read'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for row in &stored {
        assert_masked(row, "the reader's tracking row");
        assert_no_credentials(row, "the reader's tracking row");
    }
    let admin_row: String = sqlx::query_scalar(
        "SELECT coalesce(response_data::text, '') FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(clear.meta.unwrap().0["execution_id"].as_str().unwrap().parse::<Uuid>().unwrap())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_no_credentials(&admin_row, "the admin's tracking row");

    // A prompt: its description, messages, embedded resource and `_meta`.
    let prompt = reader.get_prompt(GetPromptRequestParams::new("fx_customer_note")).await.unwrap();
    let whole = serde_json::to_string(&prompt).unwrap();
    assert_masked(&whole, "the reader's prompt");
    assert_no_credentials(&whole, "the reader's prompt");
    assert_eq!(
        prompt.description.as_deref(),
        Some("A note to ***@example.com (key [REDACTED:aws_access_key])")
    );
    assert!(whole.contains("Write to ***@example.com; token [REDACTED:jwt]"), "{whole}");
    assert!(whole.contains("Card on file: ***************1111."), "{whole}");
    assert!(whole.contains("Ada Lovelace <***@example.com> pays with"), "embedded: {whole}");
    let clear = admin.get_prompt(GetPromptRequestParams::new("fx_customer_note")).await.unwrap();
    let clear = serde_json::to_string(&clear).unwrap();
    assert!(clear.contains("A note to ada@example.com"), "{clear}");
    assert_no_credentials(&clear, "the admin's prompt");

    // Completions, and a failed one.
    let contact = |value: &str| {
        CompleteRequestParams::new(
            Reference::for_prompt("fx_customer_note"),
            ArgumentInfo::new("contact", value),
        )
    };
    let completed = reader.complete(contact("")).await.unwrap();
    assert_eq!(
        completed.completion.values,
        ["***@example.com", "***@example.net", "[REDACTED:aws_access_key]"]
    );
    assert_no_credentials(&serde_json::to_string(&completed).unwrap(), "the reader's completion");
    let clear = admin.complete(contact("")).await.unwrap();
    assert_eq!(
        clear.completion.values,
        ["ada@example.com", "alan@example.net", "[REDACTED:aws_access_key]"]
    );
    let failed = reader
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("fx_customer_note"),
            ArgumentInfo::new("ada@example.com", ""),
        ))
        .await
        .unwrap_err();
    assert_masked(&failed.to_string(), "the reader's failed completion");

    // orca's own resources and prompts (the `data` server's, masked by kind).
    let catalogs: Value =
        serde_json::from_str(&contents_text(&read(&reader, "res://catalogs").await.unwrap()))
            .unwrap();
    let catalog = catalogs["items"][0]["name"].as_str().unwrap().to_owned();
    let sample = read(&reader, &format!("res://samples/{catalog}/public/notes")).await.unwrap();
    let sample_text = contents_text(&sample);
    assert_masked(&sample_text, "the reader's sample rows");
    assert_no_credentials(&sample_text, "the reader's sample rows");
    assert!(
        sample_text.contains("write to ***@example.com, key [REDACTED:aws_access_key]"),
        "{sample_text}"
    );
    let id: Uuid = sample.meta.unwrap().0["execution_id"].as_str().unwrap().parse().unwrap();
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", id).await;
    let row: String = sqlx::query_scalar(
        "SELECT coalesce(response_data::text, '') FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_masked(&row, "the sample's tracking row");
    assert_no_credentials(&row, "the sample's tracking row");
    let mut arguments = serde_json::Map::new();
    arguments.insert("table".into(), json!("ada@example.com"));
    arguments.insert("candidates".into(), json!("AKIAIOSFODNN7EXAMPLE"));
    let own = reader
        .get_prompt(GetPromptRequestParams::new("ask_for_disambiguation").with_arguments(arguments))
        .await
        .unwrap();
    let own = serde_json::to_string(&own).unwrap();
    assert!(own.contains("***@example.com"), "{own}");
    assert_masked(&own, "orca's own prompt");
    assert_no_credentials(&own, "orca's own prompt");
    reader.cancel().await.unwrap();
    admin.cancel().await.unwrap();
}
