//! The 21 tools of specification 000, each a thin adapter: decode and check the arguments,
//! make the one Metabase call (two for a card added on 0.47 and later: read, then replace),
//! and shape the answer.

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::MetabaseServer;
use super::client::Method;
use super::dashboards::{self, Layout};
use super::shape;
use crate::servers::ToolSpec;
use crate::tool::{ToolError, ToolOutput, Verb, parse_arguments};

/// Item types of `GET /api/search` and `GET /api/collection/:id/items`.
const MODELS: [&str; 14] = [
    "dashboard",
    "table",
    "dataset",
    "segment",
    "collection",
    "database",
    "action",
    "indexed-entity",
    "metric",
    "card",
    "pulse",
    "snippet",
    "timeline",
    "no_models",
];

/// `{id}` of a dashboard, card, collection, database or table.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IdParams {
    /// The id (search_resources finds ids by name).
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    id: i64,
}

/// A collection: a positive id, or `root`, Metabase's root collection ("Our analytics"), which
/// has no number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CollectionId {
    Root,
    Id(i64),
}

impl std::fmt::Display for CollectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CollectionId::Root => f.write_str("root"),
            CollectionId::Id(id) => write!(f, "{id}"),
        }
    }
}

impl<'de> Deserialize<'de> for CollectionId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(text) if text == "root" => Ok(CollectionId::Root),
            Value::Number(number) if number.is_i64() => {
                let id = number.as_i64().unwrap_or_default();
                checked_id(id).map(CollectionId::Id).map_err(serde::de::Error::custom)
            }
            other => Err(serde::de::Error::custom(format!(
                "must be a positive collection id or \"root\", found {other}"
            ))),
        }
    }
}

/// The schema of [`CollectionId`]: a positive integer or the string `root`.
fn collection_id_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "The collection's id, or \"root\" for the root collection (search_resources finds ids by name).",
        "anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "const": "root"}
        ]
    })
}

/// `{id}` of `get_collection`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CollectionParams {
    #[schemars(schema_with = "collection_id_schema")]
    id: CollectionId,
}

/// `{id, verbose}` of the metadata tools.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MetadataParams {
    /// The id.
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    id: i64,
    /// Keep field fingerprints, values and other bulk (default false).
    #[serde(default)]
    verbose: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateDashboardParams {
    /// The dashboard's name.
    name: String,
    description: Option<String>,
    /// The collection to put it in (none: the root collection).
    #[serde(default, deserialize_with = "optional_positive_id")]
    #[schemars(range(min = 1))]
    collection_id: Option<i64>,
    /// Dashboard filters: an array of parameter objects (`id`, `name`, `slug`, `type`).
    parameters: Option<Vec<Map<String, Value>>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateDashboardParams {
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    id: i64,
    name: Option<String>,
    description: Option<String>,
    /// Dashboard filters: an array of parameter objects; replaces the current ones.
    parameters: Option<Vec<Map<String, Value>>>,
    /// Dashboard cards to change or add: objects with the dashcard `id` (a negative id adds a
    /// card and needs `card_id`) and the keys to set (`row`, `col`, `size_x`, `size_y`,
    /// `dashboard_tab_id`, ...). Cards not listed are kept as they are.
    cards: Option<Vec<Map<String, Value>>>,
    /// Dashboard cards to remove, by dashcard id (the `id` of an entry of the dashboard's
    /// cards, not its `card_id`); the questions themselves are kept, and so is every other card
    /// and tab.
    #[serde(default, deserialize_with = "optional_positive_ids")]
    #[schemars(schema_with = "positive_ids_schema")]
    remove_cards: Option<Vec<i64>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddCardParams {
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    dashboard_id: i64,
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    card_id: i64,
    /// Width in grid columns (1 to 24).
    #[schemars(range(min = 1, max = 24))]
    size_x: i64,
    /// Height in grid rows.
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    size_y: i64,
    /// Top position (0 is the top).
    #[schemars(range(min = 0))]
    row: i64,
    /// Left position (0 to 23).
    #[schemars(range(min = 0, max = 23))]
    col: i64,
    /// The tab to put it on, for a dashboard with tabs (default: the first tab).
    #[serde(default, deserialize_with = "optional_positive_id")]
    #[schemars(range(min = 1))]
    dashboard_tab_id: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateCardParams {
    name: String,
    /// The query: `{"database": 1, "type": "native", "native": {"query": "SELECT ...",
    /// "template-tags": {}}}` or `{"database": 1, "type": "query", "query": {"source-table": 2}}`.
    dataset_query: Map<String, Value>,
    /// The visualization: table, bar, line, scalar, pie, row, area, ...
    display: String,
    /// Visualization settings (an object, often empty).
    visualization_settings: Map<String, Value>,
    #[serde(default, deserialize_with = "optional_positive_id")]
    #[schemars(range(min = 1))]
    collection_id: Option<i64>,
    description: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateCardParams {
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    id: i64,
    name: Option<String>,
    dataset_query: Option<Map<String, Value>>,
    display: Option<String>,
    visualization_settings: Option<Map<String, Value>>,
    #[serde(default, deserialize_with = "optional_positive_id")]
    #[schemars(range(min = 1))]
    collection_id: Option<i64>,
    description: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecuteCardParams {
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    card_id: i64,
    /// Query parameters: Metabase's array of `{type, target, value}` objects, or an object
    /// `{"template_tag_name": value}` that orca turns into that array.
    parameters: Option<Value>,
    /// Rows to return at most (default from the configuration, 200).
    #[schemars(range(min = 1, max = 10000))]
    max_rows: Option<usize>,
    /// Keep Metabase's full column metadata and other keys (default false).
    #[serde(default)]
    verbose: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListCollectionsParams {
    /// The namespace (for example `snippets`).
    namespace: Option<String>,
    /// List archived collections instead.
    archived: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateCollectionParams {
    name: String,
    description: Option<String>,
    /// The parent collection (none: the root).
    #[serde(default, deserialize_with = "optional_positive_id")]
    #[schemars(range(min = 1))]
    parent_id: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateCollectionParams {
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    id: i64,
    name: Option<String>,
    description: Option<String>,
    #[serde(default, deserialize_with = "optional_positive_id")]
    #[schemars(range(min = 1))]
    parent_id: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CollectionItemsParams {
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    id: i64,
    /// Item types to include: card, dataset, metric, dashboard, collection, pulse, snippet,
    /// timeline, table.
    models: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListDatabasesParams {
    /// Include each database's tables.
    include_tables: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchParams {
    /// The search term.
    q: String,
    /// Types to search: dashboard, card, dataset, metric, collection, table, database,
    /// segment, action, indexed-entity.
    models: Option<Vec<String>>,
    /// Search archived items instead.
    archived: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DatasetParams {
    /// The database id (list_databases).
    #[serde(deserialize_with = "positive_id")]
    #[schemars(range(min = 1))]
    database: i64,
    /// For native queries: `{"query": "SELECT ...", "template-tags": {...}}`.
    native: Option<Map<String, Value>>,
    /// For structured (MBQL) queries: `{"source-table": 2, "aggregation": [...]}`.
    query: Option<Map<String, Value>>,
    /// `native` (default) or `query`.
    #[serde(rename = "type")]
    query_type: Option<String>,
    /// Query parameters: an array of `{type, target, value}` objects.
    parameters: Option<Vec<Map<String, Value>>>,
    /// Rows to return at most (default from the configuration, 200).
    #[schemars(range(min = 1, max = 10000))]
    max_rows: Option<usize>,
    /// Keep Metabase's full column metadata and other keys (default false).
    #[serde(default)]
    verbose: bool,
}

pub(crate) fn tools(read_only: bool) -> Vec<ToolSpec> {
    let read = || ToolAnnotations::new().read_only(true).idempotent(true).open_world(true);
    let create = || ToolAnnotations::new().read_only(false).destructive(false).open_world(true);
    let update = || {
        ToolAnnotations::new().read_only(false).destructive(false).idempotent(true).open_world(true)
    };
    let delete = || {
        ToolAnnotations::new().read_only(false).destructive(true).idempotent(true).open_world(true)
    };
    let mut tools = vec![
        ToolSpec::new::<IdParams>(
            "get_dashboard",
            "Get a Metabase dashboard by id (GET /api/dashboard/{id}): its details, tabs and dashboard cards.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<CreateDashboardParams>(
            "create_dashboard",
            "Create a Metabase dashboard (POST /api/dashboard): name, optional description, collection_id and parameters (an array of filters). Returns it with its id.",
            Verb::Create,
            create(),
        ),
        ToolSpec::new::<UpdateDashboardParams>(
            "update_dashboard",
            "Update a Metabase dashboard (PUT /api/dashboard/{id}): name, description, parameters (an array), cards to move or add by dashcard id, and remove_cards (dashcard ids) to take off it; every other card and tab is kept.",
            Verb::Update,
            // `remove_cards` takes cards off the dashboard.
            update().destructive(true),
        ),
        ToolSpec::new::<AddCardParams>(
            "add_card_to_dashboard",
            "Add a card (question) to a Metabase dashboard at a position and size. Works on every Metabase version; existing cards and tabs are kept. Returns the new dashboard card.",
            Verb::Update,
            create(),
        ),
        ToolSpec::new::<IdParams>(
            "delete_dashboard",
            "Delete a Metabase dashboard by id (DELETE /api/dashboard/{id}).",
            Verb::Delete,
            delete(),
        ),
        ToolSpec::new::<IdParams>(
            "get_card",
            "Get a Metabase card (saved question or model) by id (GET /api/card/{id}).",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<CreateCardParams>(
            "create_card",
            "Create a Metabase card (question) (POST /api/card): name, dataset_query, display, visualization_settings, optional collection_id and description. Native queries put their variables under `template-tags`.",
            Verb::Create,
            create(),
        ),
        ToolSpec::new::<UpdateCardParams>(
            "update_card",
            "Update a Metabase card (PUT /api/card/{id}): any of name, dataset_query, display, visualization_settings, collection_id, description.",
            Verb::Update,
            update(),
        ),
        ToolSpec::new::<ExecuteCardParams>(
            "execute_card_query",
            "Run a saved Metabase card's query (POST /api/card/{card_id}/query) and return its columns and at most max_rows rows, with row_count and truncated.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<IdParams>(
            "delete_card",
            "Delete a Metabase card by id (DELETE /api/card/{id}).",
            Verb::Delete,
            delete(),
        ),
        ToolSpec::new::<ListCollectionsParams>(
            "list_collections",
            "List Metabase collections (GET /api/collection), optionally of a namespace or archived.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<CollectionParams>(
            "get_collection",
            "Get a Metabase collection by id, or the root collection with id \"root\" (GET /api/collection/{id}).",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<CreateCollectionParams>(
            "create_collection",
            "Create a Metabase collection (POST /api/collection): name, optional description and parent_id.",
            Verb::Create,
            create(),
        ),
        ToolSpec::new::<UpdateCollectionParams>(
            "update_collection",
            "Update a Metabase collection (PUT /api/collection/{id}): name, description or parent_id.",
            Verb::Update,
            update(),
        ),
        ToolSpec::new::<CollectionItemsParams>(
            "get_collection_items",
            "List the items of a Metabase collection (GET /api/collection/{id}/items), optionally only some types (models).",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<ListDatabasesParams>(
            "list_databases",
            "List the databases Metabase knows (GET /api/database), optionally with their tables.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<MetadataParams>(
            "get_database_metadata",
            "Get a Metabase database's tables and fields (GET /api/database/{id}/metadata); fingerprints and field values are left out unless verbose.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<IdParams>(
            "get_table",
            "Get a Metabase table by id (GET /api/table/{id}).",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<MetadataParams>(
            "get_table_query_metadata",
            "Get what a query on a Metabase table needs: fields, foreign keys, database (GET /api/table/{id}/query_metadata); fingerprints and values are left out unless verbose.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<SearchParams>(
            "search_resources",
            "Search Metabase for dashboards, cards, collections, tables and more by text (GET /api/search); returns ids to use with the other tools.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<DatasetParams>(
            "run_dataset_query",
            "Run an ad-hoc query through Metabase (POST /api/dataset): native SQL (`native.query`, type native, the default) or MBQL (`query`, type query). Returns columns and at most max_rows rows, with row_count and truncated; a failed query is an error.",
            Verb::Read,
            read(),
        ),
    ];
    if read_only {
        tools.retain(|tool| tool.verb == Verb::Read);
    }
    tools
}

/// An id field of the arguments: ids are positive, and anything else is refused where the
/// arguments are read, as the input schemas (`minimum: 1`) say.
fn positive_id<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let value = i64::deserialize(deserializer)?;
    checked_id(value).map_err(serde::de::Error::custom)
}

/// [`positive_id`] of an optional id.
fn optional_positive_id<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<i64>, D::Error> {
    Option::<i64>::deserialize(deserializer)?
        .map(checked_id)
        .transpose()
        .map_err(serde::de::Error::custom)
}

/// [`positive_id`] of each id of an optional list.
fn optional_positive_ids<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<i64>>, D::Error> {
    Option::<Vec<i64>>::deserialize(deserializer)?
        .map(|ids| ids.into_iter().map(checked_id).collect::<Result<Vec<i64>, String>>())
        .transpose()
        .map_err(serde::de::Error::custom)
}

/// The schema of an optional list of positive ids.
fn positive_ids_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "Dashboard cards to remove, by dashcard id (the `id` of an entry of the dashboard's cards, not its `card_id`); the questions themselves are kept, and so is every other card and tab.",
        "type": ["array", "null"],
        "items": {"type": "integer", "minimum": 1}
    })
}

fn checked_id(value: i64) -> Result<i64, String> {
    if value < 1 {
        return Err(format!(
            "must be a positive id, found {value} (search_resources finds ids by name)"
        ));
    }
    Ok(value)
}

fn positive(value: i64, name: &str) -> Result<i64, ToolError> {
    if value < 1 {
        return Err(ToolError::invalid_input(format!(
            "`{name}` must be a positive id, found {value}"
        ))
        .with_hint("ids are positive integers; search_resources finds them by name"));
    }
    Ok(value)
}

fn non_blank(value: &str, name: &str) -> Result<String, ToolError> {
    if value.trim().is_empty() {
        return Err(ToolError::invalid_input(format!("`{name}` must not be blank")));
    }
    Ok(value.to_owned())
}

fn models(models: Option<Vec<String>>) -> Result<Vec<String>, ToolError> {
    let models = models.unwrap_or_default();
    for model in &models {
        if !MODELS.contains(&model.as_str()) {
            return Err(ToolError::invalid_input(format!("unknown model `{model}`"))
                .with_hint(format!("models are some of: {}", MODELS.join(", "))));
        }
    }
    Ok(models)
}

fn max_rows(requested: Option<usize>, default: usize) -> Result<usize, ToolError> {
    match requested {
        None => Ok(default),
        Some(rows) if (1..=crate::config::MetabaseConfig::HARD_MAX_ROWS).contains(&rows) => {
            Ok(rows)
        }
        Some(rows) => Err(ToolError::invalid_input(format!(
            "`max_rows` must be between 1 and {}, found {rows}",
            crate::config::MetabaseConfig::HARD_MAX_ROWS
        ))),
    }
}

/// A dataset query checked and normalized: `type` known, a non-blank native query or an MBQL
/// object, and native variables under `template-tags` (the key Metabase reads; a
/// `template_tags` is renamed).
fn dataset_query(
    mut query: Map<String, Value>,
    name: &str,
) -> Result<Map<String, Value>, ToolError> {
    let database = query.get("database").and_then(Value::as_i64);
    positive(database.unwrap_or(0), &format!("{name}.database"))?;
    let kind = query.get("type").and_then(Value::as_str).unwrap_or("native").to_owned();
    query.insert("type".into(), Value::from(kind.clone()));
    match kind.as_str() {
        "native" => {
            let native =
                query.get_mut("native").and_then(Value::as_object_mut).ok_or_else(|| {
                    ToolError::invalid_input(format!(
                        "`{name}.native` is required for a native query"
                    ))
                    .with_hint("pass {\"native\": {\"query\": \"SELECT ...\"}}")
                })?;
            native_query(native, &format!("{name}.native"))?;
        }
        "query" => {
            if !query.get("query").is_some_and(Value::is_object) {
                return Err(ToolError::invalid_input(format!(
                    "`{name}.query` (an MBQL object) is required for type `query`"
                )));
            }
        }
        other => {
            return Err(ToolError::invalid_input(format!(
                "`{name}.type` must be `native` or `query`, found `{other}`"
            )));
        }
    }
    Ok(query)
}

fn native_query(native: &mut Map<String, Value>, name: &str) -> Result<(), ToolError> {
    let text = native.get("query").and_then(Value::as_str).unwrap_or_default();
    non_blank(text, &format!("{name}.query"))?;
    if let Some(tags) = native.remove("template_tags") {
        native.entry("template-tags").or_insert(tags);
    }
    match native.get("template-tags") {
        None => {
            native.insert("template-tags".into(), json!({}));
        }
        Some(Value::Object(_)) => {}
        Some(_) => {
            return Err(ToolError::invalid_input(format!(
                "`{name}.template-tags` must be an object keyed by variable name"
            )));
        }
    }
    Ok(())
}

/// `parameters` of a card query as Metabase's array: an array is checked (objects only), an
/// object `{tag: value}` becomes `[{type: "category", target: ["variable", ["template-tag",
/// tag]], value}]`. Never an object: Metabase fails on one with an assertion.
fn card_parameters(parameters: Option<Value>) -> Result<Vec<Value>, ToolError> {
    match parameters {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            if let Some(index) = items.iter().position(|item| !item.is_object()) {
                return Err(ToolError::invalid_input(format!(
                    "`parameters[{index}]` must be an object with type, target and value"
                )));
            }
            Ok(items)
        }
        Some(Value::Object(map)) => Ok(map
            .into_iter()
            .map(|(tag, value)| {
                json!({ "type": "category", "target": ["variable", ["template-tag", tag]], "value": value })
            })
            .collect()),
        Some(_) => Err(ToolError::invalid_input(
            "`parameters` must be an array of parameter objects or an object of template-tag values",
        )),
    }
}

fn object(entries: Vec<(&str, Option<Value>)>) -> Value {
    Value::Object(
        entries
            .into_iter()
            .filter_map(|(key, value)| value.map(|value| (key.to_owned(), value)))
            .collect(),
    )
}

fn maps(items: Vec<Map<String, Value>>) -> Value {
    Value::Array(items.into_iter().map(Value::Object).collect())
}

pub(crate) async fn call(
    server: &MetabaseServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    match tool {
        "get_dashboard"
        | "create_dashboard"
        | "update_dashboard"
        | "add_card_to_dashboard"
        | "delete_dashboard" => dashboard_call(server, tool, arguments).await,
        "get_card" | "create_card" | "update_card" | "execute_card_query" | "delete_card" => {
            card_call(server, tool, arguments).await
        }
        "list_collections"
        | "get_collection"
        | "create_collection"
        | "update_collection"
        | "get_collection_items" => collection_call(server, tool, arguments).await,
        "list_databases"
        | "get_database_metadata"
        | "get_table"
        | "get_table_query_metadata"
        | "search_resources"
        | "run_dataset_query" => database_call(server, tool, arguments).await,
        other => Err(no_such_tool(other)),
    }
}

fn no_such_tool(tool: &str) -> ToolError {
    ToolError::not_found(format!("the metabase server has no tool `{tool}`"))
}

/// The dashboard tools.
async fn dashboard_call(
    server: &MetabaseServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    let value = match tool {
        "get_dashboard" => {
            let IdParams { id } = parse_arguments(arguments)?;
            shape::entity(server.get(&format!("/api/dashboard/{id}"), &[]).await?, false)
        }
        "create_dashboard" => {
            let params: CreateDashboardParams = parse_arguments(arguments)?;
            let body = object(vec![
                ("name", Some(Value::from(non_blank(&params.name, "name")?))),
                ("description", params.description.map(Value::from)),
                ("collection_id", params.collection_id.map(Value::from)),
                ("parameters", Some(maps(params.parameters.unwrap_or_default()))),
            ]);
            server.send(Method::Post, "/api/dashboard", &body).await?
        }
        "update_dashboard" => return update_dashboard(server, parse_arguments(arguments)?).await,
        "add_card_to_dashboard" => return add_card(server, parse_arguments(arguments)?).await,
        "delete_dashboard" => {
            let IdParams { id } = parse_arguments(arguments)?;
            server.delete(&format!("/api/dashboard/{id}"), &[]).await?;
            json!({ "success": true, "deleted": "dashboard", "id": id })
        }
        other => return Err(no_such_tool(other)),
    };
    Ok(ToolOutput::new(value))
}

/// The card (question) tools.
async fn card_call(
    server: &MetabaseServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    let value = match tool {
        "get_card" => {
            let IdParams { id } = parse_arguments(arguments)?;
            shape::entity(server.get(&format!("/api/card/{id}"), &[]).await?, false)
        }
        "create_card" => {
            let params: CreateCardParams = parse_arguments(arguments)?;
            let body = object(vec![
                ("name", Some(Value::from(non_blank(&params.name, "name")?))),
                (
                    "dataset_query",
                    Some(Value::Object(dataset_query(params.dataset_query, "dataset_query")?)),
                ),
                ("display", Some(Value::from(non_blank(&params.display, "display")?))),
                ("visualization_settings", Some(Value::Object(params.visualization_settings))),
                ("collection_id", params.collection_id.map(Value::from)),
                ("description", params.description.map(Value::from)),
            ]);
            shape::entity(server.send(Method::Post, "/api/card", &body).await?, false)
        }
        "update_card" => {
            let params: UpdateCardParams = parse_arguments(arguments)?;
            let id = params.id;
            let body = object(vec![
                (
                    "name",
                    params
                        .name
                        .as_deref()
                        .map(|name| non_blank(name, "name"))
                        .transpose()?
                        .map(Value::from),
                ),
                (
                    "dataset_query",
                    params
                        .dataset_query
                        .map(|query| dataset_query(query, "dataset_query"))
                        .transpose()?
                        .map(Value::Object),
                ),
                (
                    "display",
                    params
                        .display
                        .as_deref()
                        .map(|display| non_blank(display, "display"))
                        .transpose()?
                        .map(Value::from),
                ),
                ("visualization_settings", params.visualization_settings.map(Value::Object)),
                ("collection_id", params.collection_id.map(Value::from)),
                ("description", params.description.map(Value::from)),
            ]);
            nothing_to_change(
                &body,
                "name, dataset_query, display, visualization_settings, collection_id, description",
            )?;
            shape::entity(server.send(Method::Put, &format!("/api/card/{id}"), &body).await?, false)
        }
        "execute_card_query" => {
            let params: ExecuteCardParams = parse_arguments(arguments)?;
            let id = params.card_id;
            let rows = max_rows(params.max_rows, server.max_rows)?;
            let body =
                json!({ "parameters": card_parameters(params.parameters)?, "ignore_cache": false });
            let answer = server.send(Method::Post, &format!("/api/card/{id}/query"), &body).await?;
            shape::query_result(answer, rows, params.verbose)
        }
        "delete_card" => {
            let IdParams { id } = parse_arguments(arguments)?;
            server.delete(&format!("/api/card/{id}"), &[]).await?;
            json!({ "success": true, "deleted": "card", "id": id })
        }
        other => return Err(no_such_tool(other)),
    };
    Ok(ToolOutput::new(value))
}

/// The collection tools.
async fn collection_call(
    server: &MetabaseServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    let value = match tool {
        "list_collections" => {
            let params: ListCollectionsParams = parse_arguments(arguments)?;
            let mut query = Vec::new();
            if let Some(archived) = params.archived {
                query.push(("archived", archived.to_string()));
            }
            if let Some(namespace) = params.namespace {
                query.push(("namespace", non_blank(&namespace, "namespace")?));
            }
            json!({ "collections": server.get("/api/collection", &query).await? })
        }
        "get_collection" => {
            let CollectionParams { id } = parse_arguments(arguments)?;
            server.get(&format!("/api/collection/{id}"), &[]).await?
        }
        "create_collection" => {
            let params: CreateCollectionParams = parse_arguments(arguments)?;
            let body = object(vec![
                ("name", Some(Value::from(non_blank(&params.name, "name")?))),
                ("description", params.description.map(Value::from)),
                ("parent_id", params.parent_id.map(Value::from)),
            ]);
            server.send(Method::Post, "/api/collection", &body).await?
        }
        "update_collection" => {
            let params: UpdateCollectionParams = parse_arguments(arguments)?;
            let id = params.id;
            let body = object(vec![
                (
                    "name",
                    params
                        .name
                        .as_deref()
                        .map(|name| non_blank(name, "name"))
                        .transpose()?
                        .map(Value::from),
                ),
                ("description", params.description.map(Value::from)),
                ("parent_id", params.parent_id.map(Value::from)),
            ]);
            nothing_to_change(&body, "name, description, parent_id")?;
            server.send(Method::Put, &format!("/api/collection/{id}"), &body).await?
        }
        "get_collection_items" => {
            let params: CollectionItemsParams = parse_arguments(arguments)?;
            let id = params.id;
            let query: Vec<(&str, String)> =
                models(params.models)?.into_iter().map(|model| ("models", model)).collect();
            server.get(&format!("/api/collection/{id}/items"), &query).await?
        }
        other => return Err(no_such_tool(other)),
    };
    Ok(ToolOutput::new(value))
}

/// The database, table, search and ad-hoc query tools.
async fn database_call(
    server: &MetabaseServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    let value = match tool {
        "list_databases" => {
            let params: ListDatabasesParams = parse_arguments(arguments)?;
            let query = if params.include_tables == Some(true) {
                vec![("include", "tables".to_owned())]
            } else {
                Vec::new()
            };
            match server.get("/api/database", &query).await? {
                // Before 0.40 the answer is a bare list.
                Value::Array(items) => json!({ "data": items, "total": items.len() }),
                other => other,
            }
        }
        "get_database_metadata" => {
            let MetadataParams { id, verbose } = parse_arguments(arguments)?;
            shape::metadata(
                server.get(&format!("/api/database/{id}/metadata"), &[]).await?,
                verbose,
            )
        }
        "get_table" => {
            let IdParams { id } = parse_arguments(arguments)?;
            shape::metadata(server.get(&format!("/api/table/{id}"), &[]).await?, false)
        }
        "get_table_query_metadata" => {
            let MetadataParams { id, verbose } = parse_arguments(arguments)?;
            shape::metadata(
                server.get(&format!("/api/table/{id}/query_metadata"), &[]).await?,
                verbose,
            )
        }
        "search_resources" => {
            let params: SearchParams = parse_arguments(arguments)?;
            let mut query = vec![("q", non_blank(&params.q, "q")?)];
            query.extend(models(params.models)?.into_iter().map(|model| ("models", model)));
            if let Some(archived) = params.archived {
                query.push(("archived", archived.to_string()));
            }
            shape::entity(server.get("/api/search", &query).await?, false)
        }
        "run_dataset_query" => {
            let params: DatasetParams = parse_arguments(arguments)?;
            let rows = max_rows(params.max_rows, server.max_rows)?;
            let mut query = Map::new();
            query.insert("database".into(), Value::from(params.database));
            query.insert(
                "type".into(),
                Value::from(params.query_type.unwrap_or_else(|| "native".into())),
            );
            if let Some(native) = params.native {
                query.insert("native".into(), Value::Object(native));
            }
            if let Some(mbql) = params.query {
                query.insert("query".into(), Value::Object(mbql));
            }
            let mut body = dataset_query(query, "query").map_err(|error| ToolError {
                message: error.message.replace("`query.", "`"),
                ..error
            })?;
            body.insert("parameters".into(), maps(params.parameters.unwrap_or_default()));
            let answer = server.send(Method::Post, "/api/dataset", &Value::Object(body)).await?;
            shape::query_result(answer, rows, params.verbose)
        }
        other => return Err(no_such_tool(other)),
    };
    Ok(ToolOutput::new(value))
}

fn nothing_to_change(body: &Value, fields: &str) -> Result<(), ToolError> {
    if body.as_object().is_some_and(Map::is_empty) {
        return Err(ToolError::invalid_input("nothing to change")
            .with_hint(format!("pass at least one of: {fields}")));
    }
    Ok(())
}

async fn update_dashboard(
    server: &MetabaseServer,
    params: UpdateDashboardParams,
) -> Result<ToolOutput, ToolError> {
    let id = params.id;
    let mut body = Map::new();
    if let Some(name) = params.name {
        body.insert("name".into(), Value::from(non_blank(&name, "name")?));
    }
    if let Some(description) = params.description {
        body.insert("description".into(), Value::from(description));
    }
    if let Some(parameters) = params.parameters {
        body.insert("parameters".into(), maps(parameters));
    }
    let changes: Vec<Value> =
        params.cards.unwrap_or_default().into_iter().map(Value::Object).collect();
    let mut removals = params.remove_cards.unwrap_or_default();
    removals.sort_unstable();
    removals.dedup();
    for (index, change) in changes.iter().enumerate() {
        let id = change.get("id").and_then(Value::as_i64).ok_or_else(|| {
            ToolError::invalid_input(format!(
                "`cards[{index}].id` is required (a negative id adds a card)"
            ))
        })?;
        if id < 0 && change.get("card_id").and_then(Value::as_i64).is_none_or(|card| card < 1) {
            return Err(ToolError::invalid_input(format!(
                "`cards[{index}]` adds a card (negative id) and needs `card_id`"
            )));
        }
        if removals.contains(&id) {
            return Err(ToolError::invalid_input(format!(
                "`cards[{index}]` changes dashcard {id}, which `remove_cards` removes"
            )));
        }
    }
    if body.is_empty() && changes.is_empty() && removals.is_empty() {
        return Err(ToolError::invalid_input("nothing to change").with_hint(
            "pass at least one of: name, description, parameters, cards, remove_cards",
        ));
    }
    let path = format!("/api/dashboard/{id}");
    if changes.is_empty() && removals.is_empty() {
        let answer = server.send(Method::Put, &path, &Value::Object(body)).await?;
        return Ok(ToolOutput::new(shape::entity(answer, false)));
    }
    let version = server.version().await?;
    if !changes.is_empty() && !version.at_least(47) {
        return Err(ToolError::invalid_input(format!(
            "changing dashboard cards through update_dashboard needs Metabase 0.47 or later; this is {}",
            version.tag
        ))
        .with_hint("add cards with add_card_to_dashboard"));
    }
    let current = server.get(&path, &[]).await?;
    let present: Vec<i64> = dashboards::existing(&current)
        .iter()
        .filter_map(|dashcard| dashcard.get("id").and_then(Value::as_i64))
        .collect();
    if let Some(unknown) = removals.iter().find(|removed| !present.contains(removed)) {
        return Err(ToolError::invalid_input(format!(
            "`remove_cards`: dashboard {id} has no dashcard {unknown}"
        ))
        .with_hint("get_dashboard lists its cards: remove_cards takes their `id`, not `card_id`"));
    }
    if !version.at_least(47) {
        // Before 0.47 a dashcard is removed on its own, and nothing else changes with it.
        if !body.is_empty() {
            server.send(Method::Put, &path, &Value::Object(body)).await?;
        }
        for dashcard in &removals {
            let query = [("dashcardId", dashcard.to_string())];
            server.delete(&format!("{path}/cards"), &query).await?;
        }
        let answer = server.get(&path, &[]).await?;
        return Ok(ToolOutput::new(shape::entity(answer, false)));
    }
    let answer = match dashboards::merged(&current, &changes, &removals, &version) {
        Layout::Dashboard(Value::Object(layout)) => {
            body.extend(layout);
            server.send(Method::Put, &path, &Value::Object(body)).await?
        }
        Layout::CardsEndpoint(layout) => {
            if !body.is_empty() {
                server.send(Method::Put, &path, &Value::Object(body)).await?;
            }
            server.send(Method::Put, &format!("{path}/cards"), &layout).await?;
            server.get(&path, &[]).await?
        }
        Layout::Dashboard(_) => unreachable!("merged builds an object"),
    };
    Ok(ToolOutput::new(shape::entity(answer, false)))
}

async fn add_card(server: &MetabaseServer, params: AddCardParams) -> Result<ToolOutput, ToolError> {
    let dashboard_id = params.dashboard_id;
    let card_id = params.card_id;
    if !(1..=24).contains(&params.size_x) || params.size_y < 1 {
        return Err(ToolError::invalid_input("`size_x` must be 1 to 24 and `size_y` at least 1"));
    }
    if !(0..=23).contains(&params.col) || params.row < 0 || params.col + params.size_x > 24 {
        return Err(ToolError::invalid_input(
            "`row` must be 0 or more, `col` 0 to 23, and `col + size_x` at most 24 (the grid is 24 wide)",
        ));
    }
    let tab = params.dashboard_tab_id;
    let version = server.version().await?;
    let path = format!("/api/dashboard/{dashboard_id}");
    if !version.at_least(47) {
        let body = json!({ "cardId": card_id, "row": params.row, "col": params.col,
            "size_x": params.size_x, "size_y": params.size_y,
            "parameter_mappings": [], "series": [], "visualization_settings": {} });
        let dashcard = server.send(Method::Post, &format!("{path}/cards"), &body).await?;
        return Ok(ToolOutput::new(
            json!({ "dashboard_id": dashboard_id, "dashcard": dashcard, "metabase_version": version.tag }),
        ));
    }
    let current = server.get(&path, &[]).await?;
    let existing = dashboards::existing(&current);
    let tabs = dashboards::tabs(&current);
    let tab = match tab {
        Some(tab) if !tabs.iter().any(|known| known["id"].as_i64() == Some(tab)) => {
            return Err(ToolError::invalid_input(format!(
                "dashboard {dashboard_id} has no tab {tab}"
            ))
            .with_hint("get_dashboard lists its tabs"));
        }
        Some(tab) => Some(tab),
        None => tabs.first().and_then(|first| first["id"].as_i64()),
    };
    let new_id = dashboards::new_id(&existing);
    let new = json!({ "id": new_id, "card_id": card_id, "dashboard_tab_id": tab,
        "row": params.row, "col": params.col, "size_x": params.size_x, "size_y": params.size_y,
        "series": [], "parameter_mappings": [], "visualization_settings": {} });
    let after = match dashboards::merged(&current, std::slice::from_ref(&new), &[], &version) {
        Layout::Dashboard(layout) => server.send(Method::Put, &path, &layout).await?,
        Layout::CardsEndpoint(layout) => {
            server.send(Method::Put, &format!("{path}/cards"), &layout).await?;
            server.get(&path, &[]).await?
        }
    };
    let before: Vec<i64> = existing.iter().filter_map(|card| card["id"].as_i64()).collect();
    let after_cards = dashboards::existing(&after);
    let dashcard = after_cards
        .iter()
        .find(|card| {
            card["card_id"].as_i64() == Some(card_id)
                && card["id"].as_i64().is_some_and(|id| !before.contains(&id))
        })
        .cloned()
        .unwrap_or(Value::Null);
    Ok(ToolOutput::new(json!({
        "dashboard_id": dashboard_id,
        "dashcard": dashboards::for_put(&dashcard),
        "dashcard_count": after_cards.len(),
        "tab_count": tabs.len(),
        "metabase_version": version.tag,
    })))
}
