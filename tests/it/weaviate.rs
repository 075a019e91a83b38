//! The `weaviate` server through the real binary, a real MCP client and the fake Weaviate: every
//! tool, escaping, tenants, the default alpha, metadata, GraphQL errors inside a 200, Weaviate
//! stopped and started again, read-only keys, secrets kept out of results, logs and tracking.

use std::time::Duration;

use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::support::fake_weaviate::{
    ADMIN_KEY, APPLE_ID, BANANA_ID, CHERRY_ID, FakeWeaviate, NOTE_A_ID, NOTE_B_ID, READER_KEY,
    VECTORIZER_KEY, VERSION,
};
use crate::support::{
    OrcaSetup, TestDatabase, call, eventually, meta_of, run, tool_names, wait_for_row,
};

type Client = RunningService<RoleClient, ()>;

const TOOLS: [&str; 12] = [
    "weaviate-collections-get-config",
    "weaviate-tenants-list",
    "weaviate-collections-create",
    "weaviate-collections-delete",
    "weaviate-objects-upsert",
    "weaviate-objects-get",
    "weaviate-objects-delete",
    "weaviate-query-hybrid",
    "weaviate-query-near-text",
    "weaviate-query-near-vector",
    "weaviate-query-bm25",
    "weaviate-aggregate",
];

struct Lab {
    fake: FakeWeaviate,
    setup: OrcaSetup,
    database: TestDatabase,
}

/// orca with the fake Weaviate, the admin key, and the vectorizer key as a configured header.
async fn lab(extra_yaml: &str) -> Lab {
    let database = TestDatabase::create().await;
    let fake = FakeWeaviate::start();
    let setup = OrcaSetup::new(&database.url)
        .with_env("WEAVIATE_URL", &fake.url())
        .with_env("WEAVIATE_API_KEY", ADMIN_KEY)
        .with_env("TEST_VECTORIZER_KEY", VECTORIZER_KEY)
        .with_config(&format!(
            "weaviate:\n  headers:\n    X-OpenAI-Api-Key: ${{TEST_VECTORIZER_KEY}}\n{extra_yaml}"
        ));
    Lab { fake, setup, database }
}

/// Call a tool; (is_error, structured content).
async fn tool(client: &Client, name: &str, arguments: Value) -> (bool, Value) {
    let result =
        call(client, name, arguments, None).await.unwrap_or_else(|error| panic!("{name}: {error}"));
    (result.is_error == Some(true), result.structured_content.clone().unwrap_or(Value::Null))
}

async fn ok(client: &Client, name: &str, arguments: Value) -> Value {
    let (failed, value) = tool(client, name, arguments.clone()).await;
    assert!(!failed, "{name} {arguments} failed: {value}");
    value
}

async fn fails(client: &Client, name: &str, arguments: Value, code: &str) -> Value {
    let (failed, value) = tool(client, name, arguments.clone()).await;
    assert!(failed, "{name} {arguments} should fail: {value}");
    assert_eq!(value["error"]["code"], code, "{value}");
    value["error"].clone()
}

fn ids(value: &Value) -> Vec<String> {
    value["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn every_tool_is_listed_and_list_servers_shows_weaviates_version() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let names = tool_names(&client).await;
    for name in TOOLS {
        assert!(names.contains(&name.to_owned()), "{name} missing from {names:?}");
    }
    let tools = client.list_all_tools().await.unwrap();
    let annotations = |name: &str| {
        tools.iter().find(|tool| tool.name == name).unwrap().annotations.clone().unwrap()
    };
    assert_eq!(annotations("weaviate-query-hybrid").read_only_hint, Some(true));
    assert_eq!(annotations("weaviate-objects-delete").destructive_hint, Some(true));
    assert_eq!(annotations("weaviate-objects-upsert").read_only_hint, Some(false));
    eventually("list_servers shows the version", Duration::from_secs(20), || async {
        let servers = ok(&client, "list_servers", json!({})).await;
        let weaviate = servers["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|server| server["name"] == "weaviate")
            .unwrap()
            .clone();
        weaviate["status"] == "running"
            && weaviate["description"]
                .as_str()
                .unwrap()
                .contains(&format!("Weaviate {VERSION} at {}", lab.fake.url()))
            && weaviate["version"] == VERSION
            && weaviate["tool_count"] == 12
    })
    .await;
    let (code, stdout, _) = run(&lab.setup, &["doctor"]);
    assert!(
        stdout
            .contains(&format!("ok    weaviate: Weaviate {VERSION} at {}, ready", lab.fake.url())),
        "{code} {stdout}"
    );
    assert!(!stdout.contains(ADMIN_KEY) && !stdout.contains(VECTORIZER_KEY), "{stdout}");
    assert!(stdout.contains("API key set") && stdout.contains("X-OpenAI-Api-Key"), "{stdout}");
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

/// A session that lists the servers right after `tools/list` sees what `/v1/meta` said, even
/// when Weaviate is slow to say it: orca reads it before it serves the first request.
#[tokio::test]
async fn list_servers_right_after_tools_list_shows_the_version_read_at_start() {
    let lab = lab("").await;
    lab.fake.state().meta_delay = Duration::from_millis(800);
    let client = lab.setup.stdio_client().await;
    assert!(tool_names(&client).await.contains(&TOOLS[0].to_owned()));
    let servers = ok(&client, "list_servers", json!({})).await;
    let weaviate =
        servers["servers"].as_array().unwrap().iter().find(|server| server["name"] == "weaviate");
    let weaviate = weaviate.unwrap();
    assert_eq!(weaviate["status"], "running", "{weaviate}");
    assert_eq!(weaviate["version"], VERSION, "{weaviate}");
    let description = weaviate["description"].as_str().unwrap();
    assert!(
        description.starts_with(&format!("Weaviate {VERSION} at {}: ", lab.fake.url())),
        "{description}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn without_weaviate_url_the_server_is_disabled() {
    let database = TestDatabase::create().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    assert!(!tool_names(&client).await.iter().any(|name| name.starts_with("weaviate-")));
    let servers = ok(&client, "list_servers", json!({})).await;
    let weaviate = servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["name"] == "weaviate")
        .unwrap()
        .clone();
    assert_eq!(weaviate["status"], "disabled");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn collections_and_tenants_are_read_in_the_specifications_shapes() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let all = ok(&client, "weaviate-collections-get-config", json!({})).await;
    let names: Vec<&str> = all["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|class| class["class"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Article", "Note"]);
    let one =
        ok(&client, "weaviate-collections-get-config", json!({"collection_name": "note"})).await;
    assert_eq!(one["collections"].as_array().unwrap().len(), 1);
    assert_eq!(one["collections"][0]["multiTenancyConfig"]["enabled"], true);
    let error = fails(
        &client,
        "weaviate-collections-get-config",
        json!({"collection_name": "Missing"}),
        "NOT_FOUND",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("`Missing`"), "{error}");

    let before = lab.fake.requests().len();
    let error = fails(
        &client,
        "weaviate-collections-get-config",
        json!({"collection_name": "Art icle"}),
        "INVALID_INPUT",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("collection_name"), "{error}");
    assert_eq!(lab.fake.requests().len(), before, "nothing is sent for a bad name");

    let tenants = ok(&client, "weaviate-tenants-list", json!({"collection_name": "Note"})).await;
    assert_eq!(
        tenants,
        json!({"tenants": [
            {"name": "tenantA", "activityStatus": "ACTIVE"},
            {"name": "tenantB", "activityStatus": "ACTIVE"},
            {"name": "tenantC", "activityStatus": "OFFLOADED"}]})
    );
    let error = fails(
        &client,
        "weaviate-tenants-list",
        json!({"collection_name": "Article"}),
        "INVALID_INPUT",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("multi-tenancy is not enabled"), "{error}");
    assert_eq!(error["details"]["weaviate"]["status"], 422);
    fails(&client, "weaviate-tenants-list", json!({}), "INVALID_INPUT").await;
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn upsert_is_a_true_upsert_with_per_object_errors_in_input_order() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let created = ok(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "properties": {"title": "Durian", "year": 2024}}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(Uuid::parse_str(&id).is_ok(), "{created}");
    assert_eq!(created.as_object().unwrap().len(), 1, "{created}");
    assert!(lab.fake.objects("Article", None).iter().any(|object| object.id == id));
    let batch = lab
        .fake
        .requests()
        .into_iter()
        .find(|request| request.path == "/v1/batch/objects")
        .unwrap();
    assert_eq!(batch.method, "POST");
    assert_eq!(batch.headers["authorization"], format!("Bearer {ADMIN_KEY}"));
    assert_eq!(batch.body["objects"][0]["class"], "Article");

    // The same id again replaces the object.
    let again = ok(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "id": id, "properties": {"title": "Durian, updated"}}),
    )
    .await;
    assert_eq!(again["id"], id.as_str());
    let got =
        ok(&client, "weaviate-objects-get", json!({"collection_name": "Article", "id": id})).await;
    assert_eq!(got["object"]["properties"], json!({"title": "Durian, updated"}));
    assert_eq!(lab.fake.objects("Article", None).len(), 4);

    let many = ok(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "objects": [
            {"id": APPLE_ID, "properties": {"title": "Apple, renamed"}, "vectors": {"default": [1.0, 0.0, 0.0]}},
            {"properties": {"year": "not a number"}},
            {"uuid": "9f0c1c5e-0000-5000-8000-0000000000ff", "properties": {"title": "Elderberry"}}]}),
    )
    .await;
    let results = many["results"].as_array().unwrap();
    assert_eq!(results[0], json!({"id": APPLE_ID}));
    assert!(
        results[1]["error"].as_str().unwrap().contains("invalid int property 'year'"),
        "{many}"
    );
    assert_eq!(results[2], json!({"id": "9f0c1c5e-0000-5000-8000-0000000000ff"}));

    let error = fails(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "properties": {"nope": 1}}),
        "INVALID_INPUT",
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains("no such prop with name 'nope'"),
        "{error}"
    );
    fails(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "id": "not-a-uuid", "properties": {}}),
        "INVALID_INPUT",
    )
    .await;
    fails(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "id": APPLE_ID, "objects": [{"properties": {}}]}),
        "INVALID_INPUT",
    )
    .await;
    fails(&client, "weaviate-objects-upsert", json!({"collection_name": "Article", "objects": [{"properties": {}, "vectors": {"bad name": [1.0]}}]}), "INVALID_INPUT").await;
    let error = fails(
        &client,
        "weaviate-objects-get",
        json!({"collection_name": "Article", "id": "9f0c1c5e-0000-5000-8000-0000000000ee"}),
        "NOT_FOUND",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("no object"), "{error}");
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn a_multi_tenant_collection_refuses_an_object_without_a_tenant_and_keeps_tenants_apart() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let error = fails(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Note", "properties": {"text": "orphan"}}),
        "INVALID_INPUT",
    )
    .await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("multi-tenancy enabled, but request was without tenant"),
        "{error}"
    );
    assert_eq!(lab.fake.objects("Note", None).len(), 0);
    let stored = ok(&client, "weaviate-objects-upsert", json!({"collection_name": "Note", "tenant": "tenantA", "properties": {"text": "gamma secret"}})).await;
    assert_eq!(lab.fake.objects("Note", Some("tenantA")).len(), 2);
    assert_eq!(lab.fake.objects("Note", Some("tenantB")).len(), 1);

    let a = ok(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Note", "tenant": "tenantA", "query": "secret"}),
    )
    .await;
    let mut found = ids(&a);
    found.sort();
    let mut expected = vec![NOTE_A_ID.to_owned(), stored["id"].as_str().unwrap().to_owned()];
    expected.sort();
    assert_eq!(found, expected);
    let b = ok(&client, "weaviate-query-hybrid", json!({"collection_name": "Note", "tenant_name": "tenantB", "query": "secret", "alpha": 0.0})).await;
    assert_eq!(ids(&b), [NOTE_B_ID]);
    assert_eq!(b["results"][0]["properties"]["text"], "beta secret plan");
    let error = fails(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Note", "query": "secret"}),
        "QUERY_FAILED",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("without tenant"), "{error}");
    fails(
        &client,
        "weaviate-objects-get",
        json!({"collection_name": "Note", "id": NOTE_A_ID, "tenant": "tenantB"}),
        "NOT_FOUND",
    )
    .await;
    let got = ok(
        &client,
        "weaviate-objects-get",
        json!({"collection_name": "Note", "id": NOTE_A_ID, "tenant": "tenantA"}),
    )
    .await;
    assert_eq!(got["object"]["tenant"], "tenantA");
    let request = lab
        .fake
        .requests()
        .into_iter()
        .rfind(|request| request.path.starts_with("/v1/objects/Note/"))
        .unwrap();
    assert_eq!(request.query, [("tenant".to_owned(), "tenantA".to_owned())]);
    let error = fails(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Note", "tenant": "tenant A!", "query": "x"}),
        "INVALID_INPUT",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("tenant"), "{error}");
    let counted =
        ok(&client, "weaviate-aggregate", json!({"collection_name": "Note", "tenant": "tenantB"}))
            .await;
    assert_eq!(counted["count"], 1);
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn hybrid_search_sends_the_default_alpha_and_maps_return_metadata_to_additional() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let found = ok(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "apple", "limit": 2,
               "return_metadata": ["id", "score", "distance", "creationTimeUnix", "explainScore"]}),
    )
    .await;
    let query = lab.fake.graphql_queries().pop().unwrap();
    assert!(query.contains("alpha: 0.5"), "{query}");
    assert!(query.contains("limit: 2"), "{query}");
    assert!(
        query.contains("_additional { id score distance creationTimeUnix explainScore }"),
        "{query}"
    );
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let first = &results[0];
    assert_eq!(first["class"], "Article");
    assert_eq!(first["id"], APPLE_ID);
    assert!(first["additional"]["score"].is_f64(), "{first}");
    assert_eq!(first["additional"]["creationTimeUnix"], 1_767_225_600_000_i64);
    assert_eq!(first["additional"]["id"], APPLE_ID);
    assert!(first["additional"]["explainScore"].as_str().unwrap().contains("Hybrid"), "{first}");
    assert!(first["additional"].get("distance").is_some(), "{first}");
    // Every property but the nested object, which needs a sub-selection.
    let properties = first["properties"].as_object().unwrap();
    assert_eq!(
        properties.keys().collect::<Vec<_>>(),
        ["title", "body", "year", "published", "tags"]
    );
    let request =
        lab.fake.requests().into_iter().rfind(|request| request.path == "/v1/graphql").unwrap();
    assert_eq!(request.headers["x-openai-api-key"], VECTORIZER_KEY);

    let chosen = ok(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "apple", "alpha": 0.25, "target_properties": ["title"],
               "target_vectors": ["default"], "return_properties": ["title"],
               "filters": {"path": ["year"], "operator": "GreaterThan", "valueInt": 2019}}),
    )
    .await;
    let query = lab.fake.graphql_queries().pop().unwrap();
    assert!(query.contains("alpha: 0.25") && query.contains("properties: [\"title\"]"), "{query}");
    assert!(
        query.contains("where: {operator: GreaterThan, path: [\"year\"], valueInt: 2019}"),
        "{query}"
    );
    assert!(!ids(&chosen).contains(&BANANA_ID.to_owned()), "{chosen}");
    assert_eq!(chosen["results"][0]["properties"], json!({"title": "Apple Inc."}));
    assert_eq!(chosen["results"][0]["additional"], json!({}));

    fails(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "x", "alpha": 1.5}),
        "INVALID_INPUT",
    )
    .await;
    fails(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "x", "return_metadata": ["secret"]}),
        "INVALID_INPUT",
    )
    .await;
    fails(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "x", "limit": 0}),
        "INVALID_INPUT",
    )
    .await;
    fails(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "x", "surprise": 1}),
        "INVALID_INPUT",
    )
    .await;
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn a_query_text_with_quotes_braces_backslashes_and_a_newline_arrives_intact() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let text = "say \"hi\" } { Get { Note } \\\" back\\slash\nnew line\ttab café 😀 \u{2028}";
    ok(&client, "weaviate-query-bm25", json!({"collection_name": "Article", "query": text})).await;
    ok(&client, "weaviate-query-hybrid", json!({"collection_name": "Article", "query": text}))
        .await;
    ok(
        &client,
        "weaviate-query-near-text",
        json!({"collection_name": "Article", "query": text,
               "filters": {"path": ["title"], "operator": "Like", "valueText": text}}),
    )
    .await;
    let strings = lab.fake.state().strings.clone();
    assert_eq!(strings.iter().filter(|received| *received == text).count(), 3, "{strings:?}");
    for query in lab.fake.graphql_queries() {
        assert!(!query.contains("\\ud83d"), "non-ASCII goes as UTF-8: {query}");
    }

    // Names are checked before anything is sent.
    let before = lab.fake.requests().len();
    for (arguments, argument) in [
        (
            json!({"collection_name": "Article(limit: 1) { title } }", "query": "x"}),
            "collection_name",
        ),
        (
            json!({"collection_name": "Article", "query": "x", "return_properties": ["title _additional { vector }"]}),
            "return_properties[0]",
        ),
        (
            json!({"collection_name": "Article", "query": "x", "target_properties": ["title\"]"]}),
            "target_properties[0]",
        ),
        (
            json!({"collection_name": "Article", "query": "x", "filters": {"path": ["year) {"], "operator": "Equal", "valueInt": 1}}),
            "filters.path[0]",
        ),
        (
            json!({"collection_name": "Article", "query": "x", "filters": {"path": ["year"], "operator": "Equal", "valueInt": 1, "valueText": "a"}}),
            "exactly one value",
        ),
    ] {
        let error = fails(&client, "weaviate-query-hybrid", arguments, "INVALID_INPUT").await;
        assert!(error["message"].as_str().unwrap().contains(argument), "{error}");
    }
    assert_eq!(lab.fake.requests().len(), before, "nothing is sent for bad names");
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn graphql_errors_inside_a_200_are_error_results_with_weaviates_message() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let error = fails(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Article", "query": "apple", "return_properties": ["nonexistent"]}),
        "QUERY_FAILED",
    )
    .await;
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("Cannot query field \"nonexistent\" on type \"Article\"."),
        "{error}"
    );
    assert_eq!(error["details"]["weaviate"]["graphql_errors"][0]["locations"][0]["line"], 1);
    let error = fails(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Nowhere", "query": "x", "return_properties": ["a"]}),
        "QUERY_FAILED",
    )
    .await;
    assert!(
        error["message"].as_str().unwrap().contains("Cannot query field \"Nowhere\""),
        "{error}"
    );
    // Without return_properties the collection's schema is read first: a 404 there.
    fails(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Nowhere", "query": "x"}),
        "NOT_FOUND",
    )
    .await;
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn near_text_near_vector_bm25_and_aggregate_answer_from_weaviate() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let near = ok(&client, "weaviate-query-near-vector", json!({"collection_name": "Article", "vector": [1.0, 0.0, 0.0], "distance": 0.2, "return_metadata": ["distance"]})).await;
    assert_eq!(ids(&near), [APPLE_ID]);
    assert!(near["results"][0]["additional"]["distance"].as_f64().unwrap() < 1e-6, "{near}");
    let near = ok(&client, "weaviate-query-near-vector", json!({"collection_name": "Article", "vector": [1.0, 0.0, 0.0], "target_vectors": ["default"]})).await;
    assert_eq!(ids(&near), [APPLE_ID, CHERRY_ID, BANANA_ID]);
    fails(
        &client,
        "weaviate-query-near-vector",
        json!({"collection_name": "Article", "vector": []}),
        "INVALID_INPUT",
    )
    .await;
    fails(
        &client,
        "weaviate-query-near-vector",
        json!({"collection_name": "Article", "vector": [1.0], "distance": 0.1, "certainty": 0.9}),
        "INVALID_INPUT",
    )
    .await;

    let text = ok(
        &client,
        "weaviate-query-near-text",
        json!({"collection_name": "Article", "query": "cherries in june", "limit": 1}),
    )
    .await;
    assert_eq!(ids(&text), [CHERRY_ID]);
    let error = fails(
        &client,
        "weaviate-query-near-text",
        json!({"collection_name": "Note", "tenant": "tenantA", "query": "plan"}),
        "QUERY_FAILED",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("vectorizer"), "{error}");

    let keyword = ok(&client, "weaviate-query-bm25", json!({"collection_name": "Article", "query": "banana", "target_properties": ["title"], "return_metadata": ["score"]})).await;
    assert_eq!(ids(&keyword), [BANANA_ID]);
    assert_eq!(keyword["results"][0]["additional"]["score"], 1.0);

    let counted = ok(
        &client,
        "weaviate-aggregate",
        json!({"collection_name": "Article",
               "filters": {"path": ["published"], "operator": "Equal", "valueBoolean": true},
               "properties": [
                   {"name": "year", "metrics": ["count", "mean", "maximum"]},
                   {"name": "tags", "top_occurrences": 2},
                   {"name": "published", "metrics": ["totalTrue"]}]}),
    )
    .await;
    assert_eq!(counted["count"], 2);
    assert_eq!(
        counted["properties"]["year"],
        json!({"count": 2, "mean": 2021.5, "maximum": 2023.0})
    );
    assert_eq!(
        counted["properties"]["tags"]["topOccurrences"][0],
        json!({"value": "fruit", "occurs": 2})
    );
    assert_eq!(counted["properties"]["published"]["totalTrue"], 2);
    let everything = ok(&client, "weaviate-aggregate", json!({"collection_name": "Article"})).await;
    assert_eq!(everything, json!({"count": 3, "properties": {}}));
    let error = fails(&client, "weaviate-aggregate", json!({"collection_name": "Article", "properties": [{"name": "title", "metrics": ["mean"]}]}), "QUERY_FAILED").await;
    assert!(error["message"].as_str().unwrap().contains("Cannot query field \"mean\""), "{error}");
    fails(&client, "weaviate-aggregate", json!({"collection_name": "Article", "properties": [{"name": "title", "metrics": ["median; drop"]}]}), "INVALID_INPUT").await;
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn deletes_by_id_and_by_filter_with_a_dry_run_first() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let fruit = json!({"path": ["tags"], "operator": "ContainsAny", "valueTextArray": ["fruit"]});
    let dry = ok(
        &client,
        "weaviate-objects-delete",
        json!({"collection_name": "Article", "filters": fruit}),
    )
    .await;
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["matches"], 2);
    assert_eq!(lab.fake.objects("Article", None).len(), 3, "a dry run deletes nothing");
    let request = lab
        .fake
        .requests()
        .into_iter()
        .rfind(|request| request.path == "/v1/batch/objects")
        .unwrap();
    assert_eq!(request.method, "DELETE");
    assert_eq!(request.body["dryRun"], true);
    assert_eq!(request.body["match"]["where"], fruit);

    let done = ok(
        &client,
        "weaviate-objects-delete",
        json!({"collection_name": "Article", "filters": fruit, "dry_run": false}),
    )
    .await;
    assert_eq!(done, json!({"dry_run": false, "matches": 2, "deleted": 2, "failed": 0}));
    assert_eq!(lab.fake.objects("Article", None).len(), 1);

    let checked = ok(
        &client,
        "weaviate-objects-delete",
        json!({"collection_name": "Article", "id": BANANA_ID, "dry_run": true}),
    )
    .await;
    assert_eq!(checked["matches"], 1);
    assert_eq!(lab.fake.objects("Article", None).len(), 1);
    let deleted = ok(
        &client,
        "weaviate-objects-delete",
        json!({"collection_name": "Article", "id": BANANA_ID}),
    )
    .await;
    assert_eq!(deleted, json!({"deleted": 1, "id": BANANA_ID}));
    fails(
        &client,
        "weaviate-objects-delete",
        json!({"collection_name": "Article", "id": BANANA_ID}),
        "NOT_FOUND",
    )
    .await;
    fails(
        &client,
        "weaviate-objects-delete",
        json!({"collection_name": "Article"}),
        "INVALID_INPUT",
    )
    .await;
    fails(
        &client,
        "weaviate-objects-delete",
        json!({"collection_name": "Article", "id": BANANA_ID, "filters": fruit}),
        "INVALID_INPUT",
    )
    .await;
    let deleted = ok(&client, "weaviate-objects-delete", json!({"collection_name": "Note", "tenant": "tenantB", "filters": {"path": ["topic"], "operator": "Equal", "valueText": "plans"}, "dry_run": false})).await;
    assert_eq!(deleted["deleted"], 1);
    assert_eq!(
        lab.fake.objects("Note", Some("tenantA")).len(),
        1,
        "the other tenant keeps its objects"
    );
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn collections_are_created_and_deleted() {
    let lab = lab("").await;
    let client = lab.setup.stdio_client().await;
    let created = ok(
        &client,
        "weaviate-collections-create",
        json!({"collection_name": "book", "description": "Books", "vectorizer": "none", "multi_tenancy": true,
               "properties": [{"name": "title", "data_type": "text", "tokenization": "word"}, {"name": "pages", "data_type": "int"}]}),
    )
    .await;
    assert_eq!(created["collection"]["class"], "Book");
    assert_eq!(created["collection"]["multiTenancyConfig"]["enabled"], true);
    assert_eq!(
        created["collection"]["properties"][1],
        json!({"name": "pages", "dataType": ["int"]})
    );
    let error = fails(
        &client,
        "weaviate-collections-create",
        json!({"collection_name": "Book"}),
        "INVALID_INPUT",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("already exists"), "{error}");
    let error = fails(&client, "weaviate-collections-create", json!({"collection_name": "Shelf", "properties": [{"name": "x", "data_type": "string\"}"}]}), "INVALID_INPUT").await;
    assert!(error["message"].as_str().unwrap().contains("properties[0].data_type"), "{error}");
    assert_eq!(
        ok(&client, "weaviate-tenants-list", json!({"collection_name": "Book"})).await,
        json!({"tenants": []})
    );

    let deleted =
        ok(&client, "weaviate-collections-delete", json!({"collection_name": "Book"})).await;
    assert_eq!(deleted, json!({"deleted": "Book"}));
    fails(
        &client,
        "weaviate-collections-get-config",
        json!({"collection_name": "Book"}),
        "NOT_FOUND",
    )
    .await;
    fails(&client, "weaviate-collections-delete", json!({"collection_name": "Book"}), "NOT_FOUND")
        .await;
    client.cancel().await.unwrap();
    assert!(lab.fake.violations().is_empty(), "{:?}", lab.fake.violations());
}

#[tokio::test]
async fn large_results_are_cut_to_max_results_bytes_and_say_so() {
    let lab = lab("  max_results_bytes: 400\n").await;
    let client = lab.setup.stdio_client().await;
    let found = ok(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "apple"}),
    )
    .await;
    assert_eq!(found["truncated"], true, "{found}");
    assert_eq!(found["total"], 3);
    assert!(found["returned"].as_u64().unwrap() < 3);
    assert!(serde_json::to_string(&found["results"]).unwrap().len() <= 400);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn weaviate_stopped_and_started_again_is_unavailable_then_serves() {
    let lab = lab("  probe_interval_ms: 200\n").await;
    lab.fake.stop();
    // Weaviate down at start does not stop orca.
    let client = lab.setup.stdio_client().await;
    let error =
        fails(&client, "weaviate-collections-get-config", json!({}), "UPSTREAM_UNAVAILABLE").await;
    assert_eq!(error["retryable"], true);
    assert!(error["message"].as_str().unwrap().contains(&lab.fake.url()), "{error}");
    let status = || async {
        let servers = ok(&client, "list_servers", json!({})).await;
        servers["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|server| server["name"] == "weaviate")
            .unwrap()["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(status().await.starts_with("unavailable: "), "{}", status().await);

    lab.fake.restart();
    let all = ok(&client, "weaviate-collections-get-config", json!({})).await;
    assert_eq!(all["collections"].as_array().unwrap().len(), 2);
    eventually("list_servers says running", Duration::from_secs(20), || async {
        status().await == "running"
    })
    .await;

    lab.fake.stop();
    fails(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Article", "query": "apple", "return_properties": ["title"]}),
        "UPSTREAM_UNAVAILABLE",
    )
    .await;
    eventually("list_servers says unavailable", Duration::from_secs(20), || async {
        status().await.starts_with("unavailable")
    })
    .await;
    lab.fake.restart();
    ok(
        &client,
        "weaviate-query-bm25",
        json!({"collection_name": "Article", "query": "apple", "return_properties": ["title"]}),
    )
    .await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_read_only_key_is_refused_the_write_tools() {
    // orca's own key with the read verb only: the write tools are not there.
    let lab = lab(&format!(
        "auth:\n  api_keys:\n    - name: viewer\n      sha256: {}\n      verbs: [read]\n",
        hex::encode(Sha256::digest(b"orca_weaviate_viewer"))
    ))
    .await;
    let server = lab.setup.http_server(&[]);
    let client = server.client(Some("orca_weaviate_viewer")).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"weaviate-query-hybrid".to_owned()));
    for write in [
        "weaviate-objects-upsert",
        "weaviate-objects-delete",
        "weaviate-collections-create",
        "weaviate-collections-delete",
    ] {
        assert!(!names.contains(&write.to_owned()), "{write} offered to a read-only key");
        crate::support::assert_unauthorized(
            call(&client, write, json!({"collection_name": "Article", "properties": {}}), None)
                .await,
        );
    }
    assert!(
        !lab.fake
            .requests()
            .iter()
            .any(|request| request.method != "GET" && request.path != "/v1/graphql")
    );
    ok(&client, "weaviate-query-bm25", json!({"collection_name": "Article", "query": "apple"}))
        .await;
    client.cancel().await.unwrap();
    drop(server);

    // Weaviate's read-only role: reads work, writes come back UNAUTHORIZED with its message.
    let setup = lab.setup.with_env("WEAVIATE_API_KEY", READER_KEY);
    let client = setup.stdio_client().await;
    ok(&client, "weaviate-collections-get-config", json!({})).await;
    let error = fails(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "properties": {"title": "x"}}),
        "UNAUTHORIZED",
    )
    .await;
    assert!(error["message"].as_str().unwrap().contains("insufficient permissions"), "{error}");
    assert_eq!(error["details"]["weaviate"]["status"], 403);
    client.cancel().await.unwrap();
    let setup = setup.with_env("WEAVIATE_API_KEY", "not-the-key");
    let client = setup.stdio_client().await;
    let error = fails(&client, "weaviate-collections-get-config", json!({}), "UNAUTHORIZED").await;
    assert_eq!(error["retryable"], false);
    assert!(!error.to_string().contains("not-the-key"), "{error}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn keys_never_appear_in_results_logs_or_tracking() {
    let mut lab = lab("").await;
    // A wrong vectorizer key: the fake's error quotes it, as OpenAI's does.
    let wrong = "sk-wrong-vectorizer-key-0042";
    lab.setup =
        lab.setup.with_env("TEST_VECTORIZER_KEY", wrong).with_env("ORCA_LOG", "orca=trace,debug");
    let server = lab.setup.http_server(&[]);
    let client = server.client(None).await;
    let result = call(
        &client,
        "weaviate-query-hybrid",
        json!({"collection_name": "Article", "query": "apple"}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(result.is_error, Some(true));
    let text = serde_json::to_string(&result).unwrap();
    assert!(text.contains("Incorrect API key provided: ****"), "{text}");
    ok(
        &client,
        "weaviate-objects-upsert",
        json!({"collection_name": "Article", "properties": {"title": "tracked"}}),
    )
    .await;
    let id: Uuid = meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap();
    let pool = lab.database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1", id).await;
    let tracked: Vec<String> = sqlx::query_scalar(
        "SELECT concat_ws(' ', tool_name, request_data::text, response_data::text, error_message, (SELECT string_agg(error_details::text, ' ') FROM orca.mcp_failures f WHERE f.execution_id = e.id)) FROM orca.mcp_executions e",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(tracked.iter().any(|row| row.starts_with("weaviate-query-hybrid")), "{tracked:?}");
    client.cancel().await.unwrap();
    let log = server.log_text();
    drop(server);
    for secret in [ADMIN_KEY, wrong] {
        assert!(!text.contains(secret), "result leaks {secret}");
        assert!(!log.contains(secret), "log leaks {secret}");
        assert!(
            !tracked.iter().any(|row| row.contains(secret)),
            "tracking leaks {secret}: {tracked:?}"
        );
    }
}
