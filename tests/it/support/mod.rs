//! Shared test helpers: the test PostgreSQL and the orca process wrappers.

pub(crate) mod fake_embeddings;
pub(crate) mod fake_llm;
pub(crate) mod fake_llm_tools;
pub(crate) mod fake_metabase;
pub(crate) mod fake_otlp;
pub(crate) mod fake_weaviate;
pub(crate) mod fake_weaviate_graphql;
pub(crate) mod haproxy;
pub(crate) mod hostile;
pub(crate) mod orca;
pub(crate) mod pg;
pub(crate) mod samples;

use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value};

pub(crate) use orca::{OrcaSetup, eventually, read, run};
pub(crate) use pg::{PrivateCluster, TestDatabase};

/// A 2026-07-28 client with nothing to offer.
#[derive(Clone)]
pub(crate) struct Modern;

impl rmcp::ClientHandler for Modern {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let info = rmcp::model::Implementation::new("modern", "1");
        rmcp::model::ClientConfig::new(rmcp::model::ClientCapabilities::default(), info)
            .with_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28)
    }
}

/// A 2026-07-28 client (`server/discover`, no session) of orca's Streamable HTTP `url`, with
/// `key` as its bearer credential when given.
pub(crate) async fn modern_client<H: rmcp::ClientHandler>(
    handler: H,
    url: &str,
    key: Option<&str>,
) -> RunningService<RoleClient, H> {
    use rmcp::service::ClientServiceExt as _;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(key) = key {
        config = config.auth_header(key);
    }
    let lifecycle = rmcp::service::ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    handler
        .serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
        .await
        .expect("server/discover")
}

/// Call a tool with JSON arguments and optional `_meta`.
pub(crate) async fn call<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    name: &str,
    arguments: Value,
    meta: Option<Value>,
) -> Result<CallToolResult, rmcp::service::ServiceError> {
    let mut params = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    if let Some(Value::Object(meta)) = meta {
        params.meta = Some(RequestMetaObject::from(meta));
    }
    client.call_tool(params).await
}

/// The names of the tools a client sees, in `tools/list` order.
pub(crate) async fn tool_names<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
) -> Vec<String> {
    let tools = client.list_all_tools().await.expect("tools/list");
    tools.into_iter().map(|tool| tool.name.into_owned()).collect()
}

/// Wait until `query` (with `$1` bound to `id`) returns a row: records reach the database
/// through a background writer.
pub(crate) async fn wait_for_row(pool: &sqlx::PgPool, query: &'static str, id: uuid::Uuid) {
    eventually(query, std::time::Duration::from_secs(20), || async {
        sqlx::query(query).bind(id).fetch_optional(pool).await.unwrap().is_some()
    })
    .await;
}

/// The rows recorded under `tool` and the status of one, once `result`'s own row is in: what
/// a call that went through several rounds or a task should leave is one row.
pub(crate) async fn recorded_under(
    database: &TestDatabase,
    result: &CallToolResult,
    tool: &str,
) -> (i64, String) {
    let execution_id: uuid::Uuid =
        meta_of(result)["execution_id"].as_str().unwrap().parse().unwrap();
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_executions WHERE id = $1", execution_id).await;
    sqlx::query_as(
        "SELECT count(*) OVER (), status FROM orca.mcp_executions WHERE tool_name = $1 LIMIT 1",
    )
    .bind(tool)
    .fetch_one(&pool)
    .await
    .unwrap()
}

/// Assert that the gateway refused a call before running it: a tool error `UNAUTHORIZED` (a
/// tool outside the caller's verbs or role), not a protocol error.
#[track_caller]
pub(crate) fn assert_unauthorized(result: Result<CallToolResult, rmcp::ServiceError>) {
    let result = result.expect("a refused call is a tool result, not a protocol error");
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let value = result.structured_content.unwrap_or_default();
    assert_eq!(value["error"]["code"], "UNAUTHORIZED", "{value}");
}

/// The `_meta` of a result as a JSON object.
pub(crate) fn meta_of(result: &CallToolResult) -> Map<String, Value> {
    result.meta.as_ref().map(|meta| meta.0.clone()).unwrap_or_default()
}

/// The one text block of a result.
pub(crate) fn text_of(result: &CallToolResult) -> String {
    assert_eq!(result.content.len(), 1, "expected exactly one content block");
    result.content[0].as_text().expect("a text block").text.clone()
}

/// Whether `text` holds a JWT (a header, a payload and a signature of base64url), as every
/// token the provider issues is; a bare `eyJ` is no token (a random client id may hold one).
pub(crate) fn holds_jwt(text: impl AsRef<str>) -> bool {
    static JWT: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+").unwrap()
    });
    JWT.is_match(text.as_ref())
}
