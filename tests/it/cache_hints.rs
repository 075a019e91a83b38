//! The caching hints of orca's lists for a 2026-07-28 client (SEP-2549's `ttlMs` and
//! `cacheScope`): orca's own part (`catalog.cache_ttl_ms`, `catalog.cache_scope`) lowered by
//! what each external server in the list says of its own part, less the age of orca's copy;
//! orca lists a server again when its copy goes stale by the server's word.

use std::path::Path;
use std::time::Duration;

use rmcp::model::CacheScope;
use sha2::{Digest, Sha256};

use crate::support::{Modern, OrcaSetup, TestDatabase};

/// orca with `config` in front of the test upstream as `fx`, which says `hint`
/// (`FIXTURE_CACHE`) of its lists.
fn setup(database: &TestDatabase, config: &str, hint: &str) -> OrcaSetup {
    let fixture = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    OrcaSetup::new(&database.url).with_config(config).with_external(&format!(
        "mcps:\n  fx:\n    command: {}\n    env:\n      FIXTURE_CACHE: \"{hint}\"\n",
        fixture.display()
    ))
}

const SHARED_MINUTE: &str =
    "catalog:\n  search_above: 1000\n  cache_ttl_ms: 60000\n  cache_scope: public\n";

fn ms(ttl: Option<u64>) -> u64 {
    ttl.expect("a 2026-07-28 list carries ttlMs")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merged_list_is_no_fresher_and_no_more_shared_than_its_upstreams_part() {
    let database = TestDatabase::create().await;
    let server = setup(&database, SHARED_MINUTE, "20000:public").http_server(&[]);
    let client = crate::support::modern_client(Modern, &server.url("/mcp"), None).await;

    // The upstream's tools come in two pages, the second saying 10 s: the list says at most that.
    let tools = client.peer().list_tools(None).await.unwrap();
    let names: Vec<&str> = tools.tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert!(names.contains(&"fx_echo") && names.contains(&"fx_hang"), "{names:?}");
    assert!((5_000..=10_000).contains(&ms(tools.ttl_ms)), "{:?}", tools.ttl_ms);
    assert_eq!(tools.cache_scope, Some(CacheScope::Public));

    let prompts = client.peer().list_prompts(None).await.unwrap();
    assert!((15_000..=20_000).contains(&ms(prompts.ttl_ms)), "{:?}", prompts.ttl_ms);
    assert_eq!(prompts.cache_scope, Some(CacheScope::Public));
    let resources = client.peer().list_resources(None).await.unwrap();
    assert!((15_000..=20_000).contains(&ms(resources.ttl_ms)), "{:?}", resources.ttl_ms);
    let templates = client.peer().list_resource_templates(None).await.unwrap();
    assert!((15_000..=20_000).contains(&ms(templates.ttl_ms)), "{:?}", templates.ttl_ms);
    assert_eq!(templates.cache_scope, Some(CacheScope::Public));

    // A read keeps its server's time, but carries a feedback token of its own: never public.
    let greeting = resources.resources.iter().find(|listed| listed.uri.contains("greeting"));
    let uri = greeting.expect("the fixture's greeting is listed").uri.clone();
    let read = client
        .peer()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    assert_eq!((read.ttl_ms, read.cache_scope), (Some(20_000), Some(CacheScope::Private)));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn orcas_own_setting_and_a_private_upstream_each_keep_a_list_from_being_shared() {
    let database = TestDatabase::create().await;
    // orca's default: immediately stale and private, whatever the upstream says.
    let server =
        setup(&database, "catalog:\n  search_above: 1000\n", "20000:public").http_server(&[]);
    let client = crate::support::modern_client(Modern, &server.url("/mcp"), None).await;
    let tools = client.peer().list_tools(None).await.unwrap();
    assert_eq!((tools.ttl_ms, tools.cache_scope), (Some(0), Some(CacheScope::Private)));
    client.cancel().await.unwrap();
    drop(server);

    // orca would share for a minute; the upstream keeps its prompts private for 20 s.
    let server = setup(&database, SHARED_MINUTE, "20000:private").http_server(&[]);
    let client = crate::support::modern_client(Modern, &server.url("/mcp"), None).await;
    let prompts = client.peer().list_prompts(None).await.unwrap();
    assert!((15_000..=20_000).contains(&ms(prompts.ttl_ms)), "{:?}", prompts.ttl_ms);
    assert_eq!(prompts.cache_scope, Some(CacheScope::Private));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn callers_who_see_different_lists_are_never_told_a_list_is_public() {
    let database = TestDatabase::create().await;
    let hash = |key: &str| hex::encode(Sha256::digest(key.as_bytes()));
    let config = format!(
        "{SHARED_MINUTE}auth:\n  api_keys:\n    - name: reader\n      sha256: {}\n      verbs: [read]\n    - name: writer\n      sha256: {}\n      verbs: [read, create]\n",
        hash("cache_reader_key"),
        hash("cache_writer_key")
    );
    let server = setup(&database, &config, "20000:public").http_server(&[]);
    let url = server.url("/mcp");
    let client = crate::support::modern_client(Modern, &url, Some("cache_reader_key")).await;
    let tools = client.peer().list_tools(None).await.unwrap();
    assert!(ms(tools.ttl_ms) > 0, "the time still holds: {:?}", tools.ttl_ms);
    assert_eq!(tools.cache_scope, Some(CacheScope::Private));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn orca_lists_an_upstream_again_when_its_copy_goes_stale() {
    let database = TestDatabase::create().await;
    let server = setup(&database, SHARED_MINUTE, "3000:public").http_server(&[]);
    let client = crate::support::modern_client(Modern, &server.url("/mcp"), None).await;
    let first = client.peer().list_prompts(None).await.unwrap();
    assert!((1..=3_000).contains(&ms(first.ttl_ms)), "{:?}", first.ttl_ms);
    // Past the upstream's 3 s, orca's copy is stale by its word: without a new listing the
    // prompts would say 0 from then on.
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    let again = client.peer().list_prompts(None).await.unwrap();
    assert!((1..=3_000).contains(&ms(again.ttl_ms)), "{:?}", again.ttl_ms);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2025_client_gets_lists_without_hints() {
    let database = TestDatabase::create().await;
    let client = setup(&database, SHARED_MINUTE, "20000:public").stdio_client().await;
    let tools = client.peer().list_tools(None).await.unwrap();
    assert_eq!((tools.ttl_ms, tools.cache_scope), (None, None));
    client.cancel().await.unwrap();
}

/// `server/discover`, posted as a 2026-07-28 client would; its result.
async fn discover(url: &str) -> serde_json::Value {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-method", "server/discover")
        .header("mcp-protocol-version", "2026-07-28")
        .json(&body)
        .send()
        .await
        .unwrap();
    let answer: serde_json::Value = response.json().await.unwrap();
    answer["result"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn server_discover_says_orcas_own_setting() {
    let database = TestDatabase::create().await;
    let server = setup(&database, SHARED_MINUTE, "20000:public").http_server(&[]);
    let discovered = discover(&server.url("/mcp")).await;
    assert_eq!(
        (discovered["ttlMs"].clone(), discovered["cacheScope"].clone()),
        (60_000.into(), "public".into()),
        "{discovered}"
    );
    drop(server);
    let server = setup(&database, "", "20000:public").http_server(&[]);
    let discovered = discover(&server.url("/mcp")).await;
    assert_eq!(
        (discovered["ttlMs"].clone(), discovered["cacheScope"].clone()),
        (0.into(), "private".into()),
        "{discovered}"
    );
}
