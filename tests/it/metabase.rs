//! The `metabase` server through the real binary and a real MCP client, against the fake
//! Metabase: every tool, sessions that expire mid-run, five concurrent calls sharing one new
//! login, a wrong password at start, the login throttle, dashboards kept whole on 0.46 and 0.50
//! (cards added, and cards removed with every other card and tab kept), the root collection,
//! failed queries, trimmed results, the structured 403 without secrets, and read-only keys.

use std::time::Duration;

use rmcp::model::{CallToolResult, ReadResourceRequestParams, ResourceContents};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::fake_metabase::{
    API_KEY, FORBIDDEN_CARD, FakeMetabase, PASSWORD, READ_ONLY_API_KEY, USERNAME, Version,
};
use crate::support::{OrcaSetup, TestDatabase, call, meta_of, run, tool_names, wait_for_row};

type Client = RunningService<RoleClient, ()>;

/// The 21 tools of specification 000.
const TOOLS: [&str; 21] = [
    "get_dashboard",
    "create_dashboard",
    "update_dashboard",
    "add_card_to_dashboard",
    "delete_dashboard",
    "get_card",
    "create_card",
    "update_card",
    "execute_card_query",
    "delete_card",
    "list_collections",
    "get_collection",
    "create_collection",
    "update_collection",
    "get_collection_items",
    "list_databases",
    "get_database_metadata",
    "get_table",
    "get_table_query_metadata",
    "search_resources",
    "run_dataset_query",
];

/// orca with the `orca` and `metabase` servers, signed in to `fake` with `credentials`.
fn setup(database: &TestDatabase, fake: &FakeMetabase, credentials: &[(&str, &str)]) -> OrcaSetup {
    let mut setup = OrcaSetup::new(&database.url)
        .with_config("servers: [orca, metabase]\nhttp:\n  health_details: names\n")
        .with_env("METABASE_URL", &fake.url());
    for (key, value) in credentials {
        setup = setup.with_env(key, value);
    }
    setup
}

fn session_login() -> [(&'static str, &'static str); 2] {
    [("METABASE_USERNAME", USERNAME), ("METABASE_PASSWORD", PASSWORD)]
}

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

async fn ok(client: &Client, name: &str, arguments: Value) -> Value {
    let result = call(client, name, arguments.clone(), None).await.unwrap();
    let value = structured(&result);
    assert_eq!(result.is_error, Some(false), "{name} {arguments} -> {value}");
    value
}

async fn failure(client: &Client, name: &str, arguments: Value) -> (Value, CallToolResult) {
    let result = call(client, name, arguments.clone(), None).await.unwrap();
    assert_eq!(result.is_error, Some(true), "{name} {arguments} should fail: {result:?}");
    (structured(&result)["error"].clone(), result)
}

async fn servers(client: &Client) -> Vec<Value> {
    let value = ok(client, "list_servers", json!({})).await;
    value["servers"].as_array().unwrap().clone()
}

async fn metabase_status(client: &Client) -> String {
    let servers = servers(client).await;
    let entry = servers.iter().find(|server| server["name"] == "metabase").unwrap();
    entry["status"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn every_tool_works_against_metabase() {
    let fake = FakeMetabase::start(Version::V050);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;

    // list_servers carries the version from /api/session/properties.
    crate::support::eventually(
        "list_servers shows Metabase's version",
        Duration::from_secs(10),
        || async {
            servers(&client)
                .await
                .iter()
                .any(|server| server["name"] == "metabase" && server["version"] == "v0.50.3")
        },
    )
    .await;
    let tools = client.list_all_tools().await.unwrap();
    for name in TOOLS {
        let tool = tools.iter().find(|tool| tool.name == name).unwrap_or_else(|| panic!("{name}"));
        let annotations = tool.annotations.as_ref().unwrap();
        let reads =
            ["get_", "list_", "search_", "execute_", "run_"].iter().any(|p| name.starts_with(p));
        assert_eq!(annotations.read_only_hint, Some(reads), "{name}");
        if name.starts_with("delete_") || name == "update_dashboard" {
            assert_eq!(annotations.destructive_hint, Some(true), "{name}");
        }
    }
    let required = |name: &str| {
        let tool = tools.iter().find(|tool| tool.name == name).unwrap();
        let mut required: Vec<String> = tool
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|items| items.iter().map(|item| item.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        required.sort();
        required
    };
    assert_eq!(
        required("add_card_to_dashboard"),
        ["card_id", "col", "dashboard_id", "row", "size_x", "size_y"]
    );
    assert_eq!(
        required("create_card"),
        ["dataset_query", "display", "name", "visualization_settings"]
    );
    assert_eq!(required("search_resources"), ["q"]);
    assert_eq!(required("run_dataset_query"), ["database"]);
    assert_eq!(metabase_status(&client).await, "running");

    let dashboard = ok(&client, "get_dashboard", json!({"id": 1})).await;
    assert_eq!(dashboard["name"], "Sales");
    assert_eq!(dashboard["dashcards"].as_array().unwrap().len(), 2);
    let created = ok(
        &client,
        "create_dashboard",
        json!({"name": "Ops", "collection_id": 1,
        "parameters": [{"id": "p1", "name": "Date", "slug": "date", "type": "date/all-options"}]}),
    )
    .await;
    let new_dashboard = created["id"].as_i64().unwrap();
    let updated = ok(
        &client,
        "update_dashboard",
        json!({"id": new_dashboard, "name": "Operations", "description": "daily"}),
    )
    .await;
    assert_eq!(updated["name"], "Operations");
    let card = ok(
        &client,
        "create_card",
        json!({"name": "Revenue", "display": "scalar", "visualization_settings": {},
        "collection_id": 1, "dataset_query": {"database": 1, "type": "native",
        "native": {"query": "SELECT count(*) FROM orders", "template_tags": {}}}}),
    )
    .await;
    let card_id = card["id"].as_i64().unwrap();
    assert!(card["dataset_query"]["native"].get("template-tags").is_some(), "{card}");
    let added = ok(
        &client,
        "add_card_to_dashboard",
        json!({"dashboard_id": new_dashboard, "card_id": card_id,
        "size_x": 6, "size_y": 4, "row": 0, "col": 0}),
    )
    .await;
    assert_eq!(added["dashcard"]["card_id"], card_id);
    assert!(added["dashcard"]["id"].as_i64().unwrap() > 0, "{added}");
    let moved = ok(
        &client,
        "update_dashboard",
        json!({"id": new_dashboard,
        "cards": [{"id": added["dashcard"]["id"], "row": 3}]}),
    )
    .await;
    assert_eq!(moved["dashcards"][0]["row"], 3);
    assert!(ok(&client, "get_card", json!({"id": 1})).await.get("result_metadata").is_none());
    let renamed = ok(&client, "update_card", json!({"id": card_id, "name": "Revenue (all)"})).await;
    assert_eq!(renamed["name"], "Revenue (all)");
    let result =
        ok(&client, "execute_card_query", json!({"card_id": 3, "parameters": {"category": 2}}))
            .await;
    assert_eq!(result["rows"], json!([[2]]));
    let collections = ok(&client, "list_collections", json!({"archived": false})).await;
    assert_eq!(collections["collections"][0]["name"], "Analytics");
    assert_eq!(ok(&client, "get_collection", json!({"id": 1})).await["name"], "Analytics");
    let child = ok(&client, "create_collection", json!({"name": "Finance", "parent_id": 1})).await;
    let child_id = child["id"].as_i64().unwrap();
    assert_eq!(child["location"], "/1/");
    let child =
        ok(&client, "update_collection", json!({"id": child_id, "description": "money"})).await;
    assert_eq!(child["description"], "money");
    let items =
        ok(&client, "get_collection_items", json!({"id": 1, "models": ["dashboard"]})).await;
    assert!(
        items["data"].as_array().unwrap().iter().all(|item| item["model"] == "dashboard"),
        "{items}"
    );
    let databases = ok(&client, "list_databases", json!({"include_tables": true})).await;
    assert_eq!(databases["data"][0]["tables"].as_array().unwrap().len(), 2);
    let metadata = ok(&client, "get_database_metadata", json!({"id": 1})).await;
    assert_eq!(metadata["tables"][0]["fields"][0]["id"], 100);
    assert!(!metadata.to_string().contains("fingerprint"), "{metadata}");
    assert!(!metadata.to_string().contains("db.internal"), "{metadata}");
    let verbose = ok(&client, "get_database_metadata", json!({"id": 1, "verbose": true})).await;
    assert!(verbose.to_string().contains("fingerprint"));
    assert_eq!(ok(&client, "get_table", json!({"id": 10})).await["name"], "orders");
    let query_metadata = ok(&client, "get_table_query_metadata", json!({"id": 10})).await;
    assert_eq!(query_metadata["fields"][1]["id"], 101);
    assert!(!query_metadata.to_string().contains("dimension_options"));
    let found = ok(&client, "search_resources", json!({"q": "orders", "models": ["card"]})).await;
    let ids: Vec<i64> =
        found["data"].as_array().unwrap().iter().map(|item| item["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [1, 3]);
    let search = fake.requests().into_iter().find(|r| r.path == "/api/search").unwrap();
    assert!(search.query.contains(&("models".to_owned(), "card".to_owned())), "{:?}", search.query);
    let one = ok(
        &client,
        "run_dataset_query",
        json!({"database": 1, "native": {"query": "SELECT 1 AS one"}}),
    )
    .await;
    assert_eq!(one["rows"], json!([[1]]));
    assert_eq!(one["truncated"], false);
    let mbql = ok(
        &client,
        "run_dataset_query",
        json!({"database": 1, "type": "query", "query": {"source-table": 10}}),
    )
    .await;
    assert_eq!(mbql["row_count"], 3);
    assert_eq!(ok(&client, "delete_card", json!({"id": card_id})).await["success"], true);
    assert_eq!(
        ok(&client, "delete_dashboard", json!({"id": new_dashboard})).await["success"],
        true
    );
    let (gone, _) = failure(&client, "get_card", json!({"id": card_id})).await;
    assert_eq!(gone["code"], "NOT_FOUND");
    assert_eq!(gone["details"]["metabase_error"], "Not found.");

    let templates = client.list_all_resource_templates().await.unwrap();
    let uris: Vec<String> = templates.iter().map(|t| t.uri_template.clone()).collect();
    for kind in ["dashboard", "card", "collection"] {
        assert!(uris.contains(&format!("metabase://{kind}/{{id}}")), "{uris:?}");
    }
    let read = client
        .read_resource(ReadResourceRequestParams::new("metabase://dashboard/1"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("a text resource")
    };
    assert_eq!(serde_json::from_str::<Value>(text).unwrap()["name"], "Sales");

    assert_eq!(fake.violations(), Vec::<String>::new());
    for request in fake.requests() {
        if let Some(parameters) = request.body.get("parameters") {
            assert!(parameters.is_array(), "{} {}: {parameters}", request.method, request.path);
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn arguments_are_checked_before_metabase_is_called() {
    let fake = FakeMetabase::start(Version::V050);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    ok(&client, "get_table", json!({"id": 10})).await;
    let before = fake.requests().len();
    for (tool, arguments, mentions) in [
        ("get_dashboard", json!({}), "id"),
        ("get_dashboard", json!({"id": 0}), "id"),
        ("get_database_metadata", json!({"id": -3, "verbose": true}), "positive id"),
        ("create_dashboard", json!({"name": "x", "collection_id": 0}), "collection_id"),
        ("get_card", json!({"id": "seven"}), "id"),
        ("create_dashboard", json!({"name": "  "}), "name"),
        ("create_dashboard", json!({"name": "x", "parameters": {"date": 1}}), "parameters"),
        (
            "create_card",
            json!({"name": "x", "display": "table", "visualization_settings": {}, "dataset_query": {"database": 1, "type": "native", "native": {"query": ""}}}),
            "native.query",
        ),
        (
            "create_card",
            json!({"name": "x", "display": "table", "dataset_query": {"database": 1}}),
            "visualization_settings",
        ),
        ("update_card", json!({"id": 1}), "nothing to change"),
        (
            "add_card_to_dashboard",
            json!({"dashboard_id": 1, "card_id": 1, "size_x": 30, "size_y": 4, "row": 0, "col": 0}),
            "size_x",
        ),
        (
            "add_card_to_dashboard",
            json!({"dashboard_id": 1, "card_id": 1, "size_x": 6, "size_y": 4, "row": 0, "col": 20}),
            "col",
        ),
        ("execute_card_query", json!({"card_id": 1, "parameters": "category=2"}), "parameters"),
        ("execute_card_query", json!({"card_id": 1, "max_rows": 0}), "max_rows"),
        ("search_resources", json!({"q": "x", "models": ["spreadsheet"]}), "spreadsheet"),
        ("run_dataset_query", json!({"database": 1}), "native"),
        (
            "run_dataset_query",
            json!({"database": 1, "type": "sql", "native": {"query": "SELECT 1"}}),
            "type",
        ),
        ("run_dataset_query", json!({"database": 1, "type": "query"}), "query"),
        ("update_dashboard", json!({"id": 1, "cards": [{"row": 2}]}), "cards[0].id"),
        ("update_dashboard", json!({"id": 1, "remove_cards": [0]}), "remove_cards"),
        ("update_dashboard", json!({"id": 1, "remove_cards": "1"}), "remove_cards"),
        (
            "update_dashboard",
            json!({"id": 1, "cards": [{"id": 2, "row": 1}], "remove_cards": [2]}),
            "remove_cards",
        ),
        ("get_collection", json!({"id": "home"}), "id"),
        ("get_collection", json!({"id": "Root"}), "id"),
        ("get_collection", json!({"id": 0}), "id"),
    ] {
        let (error, _) = failure(&client, tool, arguments.clone()).await;
        assert_eq!(error["code"], "INVALID_INPUT", "{tool} {arguments}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(mentions),
            "{tool} {arguments}: {error}"
        );
    }
    assert_eq!(fake.requests().len(), before, "no request reached Metabase");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_expired_session_is_renewed_once_and_the_call_retried() {
    let fake = FakeMetabase::start(Version::V050);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    ok(&client, "get_card", json!({"id": 1})).await;
    assert_eq!(fake.logins(), 1);
    fake.expire_sessions();
    let card = ok(&client, "get_card", json!({"id": 1})).await;
    assert_eq!(card["name"], "Orders count");
    assert_eq!(fake.logins(), 2);
    let card_requests: Vec<_> =
        fake.requests().into_iter().filter(|request| request.path == "/api/card/1").collect();
    assert_eq!(card_requests.len(), 3, "first call, the expired try, the retry");
    assert_ne!(
        card_requests[1].credential, card_requests[2].credential,
        "the retry has the new session"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn five_concurrent_calls_on_an_expired_session_log_in_once() {
    let fake = FakeMetabase::start(Version::V050);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    ok(&client, "get_card", json!({"id": 1})).await;
    fake.expire_sessions();
    fake.set_login_delay(Duration::from_millis(300));
    let calls = (0..5).map(|_| ok(&client, "get_collection", json!({"id": 1})));
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(|value| value["name"] == "Analytics"));
    assert_eq!(fake.logins(), 2, "one login at start, one shared by the five calls");
    let expired = fake.requests().into_iter().find(|r| r.path == "/api/card/1").unwrap().credential;
    let on_the_expired_session = fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/collection/1" && r.credential == expired)
        .count();
    assert_eq!(on_the_expired_session, 5, "all five met the expired session");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_wrong_password_at_start_leaves_orca_serving_and_says_why() {
    let fake = FakeMetabase::start(Version::V050);
    fake.set_password("a-different-password");
    let database = TestDatabase::create().await;
    let setup = setup(&database, &fake, &session_login());
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let status = metabase_status(&client).await;
    assert!(status.starts_with("login failed:"), "{status}");
    assert!(status.contains("METABASE_USERNAME and METABASE_PASSWORD"), "{status}");
    assert!(!status.contains(PASSWORD), "{status}");
    let health: Value = reqwest::get(server.url("/healthz")).await.unwrap().json().await.unwrap();
    assert!(
        health["server_status"]["metabase"].as_str().unwrap().starts_with("login failed"),
        "{health}"
    );

    let (error, result) = failure(&client, "get_card", json!({"id": 1})).await;
    assert_eq!(error["code"], "UNAUTHORIZED");
    assert!(error["hint"].as_str().unwrap().contains("METABASE_PASSWORD"), "{error}");
    assert!(!format!("{result:?}").contains(PASSWORD));
    assert_eq!(fake.logins(), 2, "the call tried to sign in again");

    fake.set_password(PASSWORD);
    assert_eq!(ok(&client, "get_card", json!({"id": 1})).await["id"], 1);
    assert_eq!(metabase_status(&client).await, "running");
    client.cancel().await.unwrap();
    assert!(!server.log_text().contains(PASSWORD));
}

#[tokio::test]
async fn a_login_throttle_is_waited_out_not_hammered() {
    let fake = FakeMetabase::start(Version::V050);
    fake.throttle_logins(1, 1);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    assert_eq!(ok(&client, "get_collection", json!({"id": 1})).await["id"], 1);
    let logins: Vec<_> = fake.requests().into_iter().filter(|r| r.path == "/api/session").collect();
    assert_eq!(logins.len(), 2, "one throttled login, one after the wait");
    assert!(logins[1].at.duration_since(logins[0].at) >= Duration::from_secs(1));
    assert_eq!(fake.violations(), Vec::<String>::new());

    fake.throttle_logins(1, 120);
    fake.expire_sessions();
    let (error, _) = failure(&client, "get_collection", json!({"id": 1})).await;
    assert_eq!(error["code"], "RATE_LIMITED");
    assert_eq!(error["retryable"], true);
    let (again, _) = failure(&client, "get_collection", json!({"id": 1})).await;
    assert_eq!(again["code"], "RATE_LIMITED");
    let attempts = fake.requests().into_iter().filter(|r| r.path == "/api/session").count();
    assert_eq!(attempts, 3, "no login is sent while the throttle's wait runs");
    assert_eq!(fake.violations(), Vec::<String>::new());
    client.cancel().await.unwrap();
}

async fn add_a_card_keeps_the_dashboard_whole(version: Version) {
    let fake = FakeMetabase::start(version);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    let before = ok(&client, "get_dashboard", json!({"id": 1})).await;
    let added = ok(
        &client,
        "add_card_to_dashboard",
        json!({"dashboard_id": 1, "card_id": 3,
        "size_x": 12, "size_y": 6, "row": 4, "col": 0}),
    )
    .await;
    assert_eq!(added["dashcard"]["card_id"], 3, "{added}");
    let after = fake.dashboard(1);
    let key = if version == Version::V046 { "ordered_cards" } else { "dashcards" };
    let cards: Vec<i64> =
        after[key].as_array().unwrap().iter().map(|c| c["card_id"].as_i64().unwrap()).collect();
    assert_eq!(cards, [1, 2, 3], "{after}");
    let kept: Vec<i64> =
        after[key].as_array().unwrap().iter().take(2).map(|c| c["id"].as_i64().unwrap()).collect();
    assert_eq!(kept, [1, 2], "the existing dashcards keep their ids");
    if version == Version::V050 {
        assert_eq!(after["tabs"], before["tabs"], "tabs kept");
        assert_eq!(after[key][0]["dashboard_tab_id"], 5);
        assert_eq!(after[key][1]["dashboard_tab_id"], 6);
        assert_eq!(after[key][2]["dashboard_tab_id"], 5, "the new card goes on the first tab");
        let put = fake.requests().into_iter().find(|r| r.method == "PUT").unwrap();
        assert_eq!(put.path, "/api/dashboard/1");
        assert_eq!(put.body["dashcards"].as_array().unwrap().len(), 3);
        assert_eq!(put.body["dashcards"][2]["id"], -1);
        assert_eq!(put.body["tabs"].as_array().unwrap().len(), 2);
    } else {
        let post = fake
            .requests()
            .into_iter()
            .find(|r| r.method == "POST" && r.path.ends_with("/cards"))
            .unwrap();
        assert_eq!(post.body["cardId"], 3);
        assert!(fake.requests().iter().all(|r| r.method != "PUT"));
    }
    assert_eq!(fake.violations(), Vec::<String>::new());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn adding_a_card_keeps_every_card_and_tab_on_metabase_0_50() {
    add_a_card_keeps_the_dashboard_whole(Version::V050).await;
}

#[tokio::test]
async fn adding_a_card_keeps_every_card_on_metabase_0_46() {
    add_a_card_keeps_the_dashboard_whole(Version::V046).await;
}

async fn removing_a_card_keeps_every_other_card_and_tab(version: Version) {
    let fake = FakeMetabase::start(version);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    let key = if version == Version::V046 { "ordered_cards" } else { "dashcards" };
    let before = fake.dashboard(1);
    let writes = || -> Vec<_> {
        fake.requests()
            .into_iter()
            .filter(|r| r.method != "GET" && r.path != "/api/session")
            .collect()
    };

    // An id that is not a dashcard of this dashboard (99, or the card id 3 of a question that
    // is not on it) is refused, naming it, and nothing is written.
    for unknown in [99, 3] {
        let (error, _) =
            failure(&client, "update_dashboard", json!({"id": 1, "remove_cards": [unknown]})).await;
        assert_eq!(error["code"], "INVALID_INPUT", "{version:?}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(&format!("dashcard {unknown}")), "{version:?}: {error}");
        assert!(writes().is_empty(), "nothing written: {:?}", writes());
    }
    assert_eq!(fake.dashboard(1), before);

    fake.expect_removal(1);
    let updated = ok(
        &client,
        "update_dashboard",
        json!({"id": 1, "name": "Sales (trimmed)", "remove_cards": [1, 1]}),
    )
    .await;
    assert_eq!(updated["name"], "Sales (trimmed)");
    let ids = |dashboard: &Value| -> Vec<i64> {
        dashboard[key].as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect()
    };
    assert_eq!(ids(&updated), [2], "{version:?}: {updated}");
    let after = fake.dashboard(1);
    assert_eq!(ids(&after), [2], "{version:?}: {after}");
    assert_eq!(after[key][0], before[key][1], "the other card is kept as it was");
    assert_eq!(after["name"], "Sales (trimmed)");
    let writes = writes();
    if version == Version::V050 {
        assert_eq!(after["tabs"], before["tabs"], "tabs kept");
        let [put] = writes.as_slice() else { panic!("one replacing PUT: {writes:?}") };
        assert_eq!(put.path, "/api/dashboard/1");
        assert_eq!(put.body["name"], "Sales (trimmed)");
        assert_eq!(put.body["dashcards"].as_array().unwrap().len(), 1);
        assert_eq!(put.body["dashcards"][0]["id"], 2);
        assert_eq!(put.body["tabs"].as_array().unwrap().len(), 2);
    } else {
        let methods: Vec<(&str, &str)> =
            writes.iter().map(|r| (r.method.as_str(), r.path.as_str())).collect();
        assert_eq!(
            methods,
            [("PUT", "/api/dashboard/1"), ("DELETE", "/api/dashboard/1/cards")],
            "the name, then the dashcard on its own"
        );
        assert_eq!(writes[1].query, [("dashcardId".to_owned(), "1".to_owned())]);
        assert!(writes[0].body.get(key).is_none(), "{:?}", writes[0].body);
    }
    assert_eq!(fake.violations(), Vec::<String>::new(), "{version:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn removing_a_card_keeps_every_other_card_and_tab_on_metabase_0_46_and_0_50() {
    for version in [Version::V046, Version::V050] {
        removing_a_card_keeps_every_other_card_and_tab(version).await;
    }
}

async fn the_root_collection_is_read_by_its_name(version: Version) {
    let fake = FakeMetabase::start(version);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    let tools = client.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|tool| tool.name == "get_collection").unwrap();
    let schema = serde_json::to_string(&tool.input_schema["properties"]["id"]).unwrap();
    assert!(schema.contains("\"root\"") && schema.contains("integer"), "{schema}");
    let root = ok(&client, "get_collection", json!({"id": "root"})).await;
    assert_eq!(root["id"], "root", "{version:?}: {root}");
    assert_eq!(root["name"], "Our analytics", "{version:?}: {root}");
    assert_eq!(ok(&client, "get_collection", json!({"id": 1})).await["name"], "Analytics");
    let paths: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with("/api/collection"))
        .map(|r| r.path)
        .collect();
    assert_eq!(paths, ["/api/collection/root", "/api/collection/1"], "{version:?}");
    assert_eq!(fake.violations(), Vec::<String>::new(), "{version:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_root_collection_is_read_by_its_name_on_metabase_0_46_and_0_50() {
    for version in [Version::V046, Version::V050] {
        the_root_collection_is_read_by_its_name(version).await;
    }
}

#[tokio::test]
async fn failed_queries_are_errors_and_large_results_are_trimmed() {
    let fake = FakeMetabase::start(Version::V050);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    let (error, _) = failure(
        &client,
        "run_dataset_query",
        json!({"database": 1, "native": {"query": "FOOBAR"}}),
    )
    .await;
    assert_eq!(error["code"], "QUERY_FAILED");
    let details = &error["details"];
    assert_eq!(details["status_code"], 202);
    assert_eq!(details["error_type"], "query_failed");
    assert_eq!(details["request_info"]["endpoint"], "/api/dataset");
    assert_eq!(details["request_info"]["params"]["native"]["query"], "FOOBAR");
    assert!(details["metabase_error"]["error"].as_str().unwrap().contains("syntax error"));
    assert!(!error.to_string().contains("QueryExecutorImpl"), "no stack trace: {error}");

    let (invalid, _) = failure(&client, "execute_card_query", json!({"card_id": 3, "parameters": [
        {"type": "number", "target": ["variable", ["template-tag", "category"]], "value": "314 Studios"}]})).await;
    assert_eq!(invalid["code"], "QUERY_FAILED");
    assert_eq!(invalid["details"]["metabase_error"]["error_type"], "invalid-parameter");

    let big = ok(
        &client,
        "run_dataset_query",
        json!({"database": 1, "native": {"query": "SELECT * FROM big"}}),
    )
    .await;
    assert_eq!(big["rows"].as_array().unwrap().len(), 200);
    assert_eq!(big["truncated"], true);
    assert_eq!(big["row_count"], 2000);
    assert_eq!(
        big["cols"],
        json!([{"name": "n", "display_name": "N", "base_type": "type/Integer"},
                                   {"name": "label", "display_name": "Label", "base_type": "type/Text"}])
    );
    for bulk in ["fingerprint", "results_metadata", "json_query", "field_ref"] {
        assert!(!big.to_string().contains(bulk), "{bulk} dropped");
    }
    let card =
        ok(&client, "execute_card_query", json!({"card_id": 2, "max_rows": 5, "verbose": true}))
            .await;
    assert_eq!(card["rows"].as_array().unwrap().len(), 5);
    assert!(card.to_string().contains("fingerprint"), "verbose keeps the bulk");
    assert_eq!(fake.violations(), Vec::<String>::new());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_403_is_a_structured_error_without_any_secret_here_or_in_tracking() {
    let fake = FakeMetabase::start(Version::V050);
    let database = TestDatabase::create().await;
    let client = setup(&database, &fake, &session_login()).stdio_client().await;
    let (error, result) =
        failure(&client, "update_card", json!({"id": FORBIDDEN_CARD, "name": "Mine now"})).await;
    assert_eq!(error["code"], "UNAUTHORIZED");
    let details = &error["details"];
    assert_eq!(details["status_code"], 403);
    assert_eq!(details["error_type"], "permissions");
    assert_eq!(details["metabase_error"], "You don't have permissions to do that.");
    assert_eq!(
        details["request_info"],
        json!({"endpoint": format!("/api/card/{FORBIDDEN_CARD}"),
        "method": "PUT", "params": {"name": "Mine now"}})
    );
    assert_eq!(details["raw_response"], "\"You don't have permissions to do that.\"");

    let sessions: Vec<String> = fake.requests().into_iter().filter_map(|r| r.credential).collect();
    assert!(!sessions.is_empty());
    let everything = format!("{result:?}");
    assert!(!everything.contains(PASSWORD));
    for session in &sessions {
        assert!(!everything.contains(session.as_str()), "session id in the result");
    }
    let id = Uuid::parse_str(meta_of(&result)["execution_id"].as_str().unwrap()).unwrap();
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1", id).await;
    let stored: String = sqlx::query_scalar(
        "SELECT row_to_json(e)::text || (SELECT json_agg(f)::text FROM orca.mcp_failures f WHERE f.execution_id = e.id)
         FROM orca.mcp_executions e WHERE e.id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(stored.contains("permissions"), "{stored}");
    assert!(!stored.contains(PASSWORD), "{stored}");
    for session in &sessions {
        assert!(!stored.contains(session.as_str()), "session id in tracking: {stored}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn read_only_keys_are_refused_the_write_tools() {
    let fake = FakeMetabase::start(Version::V050);
    let database = TestDatabase::create().await;
    // An orca API key with the read verb only: the write tools are not there for it.
    let reader = "orca_reader_key_for_metabase_tests_0123456789";
    let yaml = format!(
        "servers: [orca, metabase]\nauth:\n  api_keys:\n    - name: reader\n      sha256: {}\n      verbs: [read]\n",
        sha256_hex(reader)
    );
    let setup = OrcaSetup::new(&database.url)
        .with_config(&yaml)
        .with_env("METABASE_URL", &fake.url())
        .with_env("METABASE_API_KEY", API_KEY);
    let server = setup.http_server(&[]);
    let client = server.client(Some(reader)).await;
    let names = tool_names(&client).await;
    for tool in TOOLS {
        let write = ["create_", "update_", "delete_", "add_"].iter().any(|p| tool.starts_with(p));
        assert_eq!(names.contains(&tool.to_owned()), !write, "{tool}");
    }
    crate::support::assert_unauthorized(call(&client, "delete_card", json!({"id": 1}), None).await);
    assert!(fake.requests().iter().all(|r| r.method != "DELETE"));
    assert_eq!(ok(&client, "get_card", json!({"id": 1})).await["id"], 1);
    client.cancel().await.unwrap();
    drop(server);

    // A Metabase API key of a view-only group: Metabase's 403 comes back as UNAUTHORIZED.
    let setup = self::setup(&database, &fake, &[("METABASE_API_KEY", READ_ONLY_API_KEY)]);
    let client = setup.stdio_client().await;
    assert_eq!(ok(&client, "get_card", json!({"id": 1})).await["id"], 1);
    let (error, _) = failure(&client, "create_collection", json!({"name": "Mine"})).await;
    assert_eq!(error["code"], "UNAUTHORIZED");
    assert_eq!(error["details"]["error_type"], "permissions");
    let keyed: Vec<_> =
        fake.requests().into_iter().filter(|r| r.path == "/api/collection").collect();
    assert_eq!(keyed.last().unwrap().credential.as_deref(), Some(READ_ONLY_API_KEY));
    assert_eq!(fake.logins(), 0, "API keys need no login");
    client.cancel().await.unwrap();
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

#[tokio::test]
async fn doctor_reports_the_version_and_the_user() {
    let fake = FakeMetabase::start(Version::V046);
    let database = TestDatabase::create().await;
    let setup = setup(&database, &fake, &session_login());
    assert_eq!(run(&setup, &["migrate"]).0, 0);
    let (code, stdout, stderr) = run(&setup, &["doctor"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("ok    metabase: Metabase v0.46.6"), "{stdout}");
    assert!(stdout.contains(USERNAME), "{stdout}");
    assert!(!stdout.contains(PASSWORD), "{stdout}");
    fake.set_password("changed");
    let (code, stdout, _) = run(&setup, &["doctor"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("FAIL  metabase: cannot sign in"), "{stdout}");
    assert!(!stdout.contains(PASSWORD), "{stdout}");
}

#[tokio::test]
async fn an_unreachable_or_slow_metabase_is_an_upstream_error_or_a_timeout() {
    let database = TestDatabase::create().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let setup = OrcaSetup::new(&database.url)
        .with_config("servers: [orca, metabase]\n")
        .with_env("METABASE_URL", &format!("http://{closed}"))
        .with_env("METABASE_API_KEY", API_KEY);
    let client = setup.stdio_client().await;
    let status = metabase_status(&client).await;
    assert!(status.starts_with("unreachable:") && status.contains("METABASE_URL"), "{status}");
    let (error, _) = failure(&client, "list_databases", json!({})).await;
    assert_eq!(error["code"], "UPSTREAM_UNAVAILABLE");
    assert_eq!(error["retryable"], true);
    assert_eq!(error["details"]["request_info"]["endpoint"], "/api/database");
    client.cancel().await.unwrap();

    let fake = FakeMetabase::start(Version::V050);
    let setup = OrcaSetup::new(&database.url)
        .with_config("servers: [orca, metabase]\nmetabase:\n  timeout_ms: 400\n")
        .with_env("METABASE_URL", &fake.url())
        .with_env("METABASE_API_KEY", API_KEY);
    let client = setup.stdio_client().await;
    fake.set_answer_delay(Duration::from_secs(3));
    let (error, _) = failure(&client, "get_collection", json!({"id": 1})).await;
    assert_eq!(error["code"], "TIMEOUT");
    assert_eq!(error["details"]["request_info"]["endpoint"], "/api/collection/1");
    client.cancel().await.unwrap();
}
