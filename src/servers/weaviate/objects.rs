//! Object tools: `weaviate-objects-upsert` (a true upsert through `POST /v1/batch/objects`, one
//! object or many), `weaviate-objects-get` and `weaviate-objects-delete` (by id, or by filter
//! with a dry run first).

use std::collections::BTreeMap;

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::filter::Filter;
use super::graphql::Name;
use super::{WeaviateServer, collection_missing, collection_name, tenant_name};
use crate::servers::ToolSpec;
use crate::tool::{ToolError, Verb, parse_arguments};

pub(super) const NAMES: [&str; 3] =
    ["weaviate-objects-upsert", "weaviate-objects-get", "weaviate-objects-delete"];

/// The most objects one upsert call may carry.
const MAX_OBJECTS: usize = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ObjectParams {
    /// The object's UUID; a new one is generated when omitted. An existing object is replaced.
    #[serde(alias = "uuid")]
    id: Option<String>,
    /// Key-value pairs of the object's properties.
    #[serde(default)]
    properties: Map<String, Value>,
    /// Named vectors to store with the object: `{name: [numbers]}`.
    vectors: Option<BTreeMap<String, Vec<f32>>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UpsertParams {
    /// Name of the collection to upsert into.
    collection_name: String,
    /// Name of the tenant the objects belong to (required by multi-tenant collections).
    #[serde(alias = "tenant_name")]
    tenant: Option<String>,
    /// One object's properties (answer: {id}).
    properties: Option<Map<String, Value>>,
    /// One object's UUID; a new one is generated when omitted.
    id: Option<String>,
    /// Many objects at once, instead of properties/id (answer: {results: [{id} | {error}]} in
    /// input order).
    objects: Option<Vec<ObjectParams>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetParams {
    collection_name: String,
    /// The object's UUID.
    id: String,
    #[serde(alias = "tenant_name")]
    tenant: Option<String>,
    /// Whether to return the object's vectors too.
    #[serde(default)]
    include_vector: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DeleteParams {
    collection_name: String,
    /// Delete this one object.
    id: Option<String>,
    /// Or delete every object matching this filter (Weaviate's `where` shape).
    filters: Option<Filter>,
    #[serde(alias = "tenant_name")]
    tenant: Option<String>,
    /// With `filters` (default true): only count what would be deleted. Set it to false to
    /// delete. With `id` (default false): only check that the object exists.
    dry_run: Option<bool>,
}

pub(super) fn tools(read_only: bool) -> Vec<ToolSpec> {
    let mut tools = vec![ToolSpec::new::<GetParams>(
        "weaviate-objects-get",
        "Get one object of a Weaviate collection by its UUID (with tenant for multi-tenant collections). Answers {object: {class, id, properties, ...}}.",
        Verb::Read,
        ToolAnnotations::new().read_only(true).idempotent(true).open_world(false),
    )];
    if !read_only {
        tools.insert(
            0,
            ToolSpec::new::<UpsertParams>(
                "weaviate-objects-upsert",
                "Insert or replace objects in a Weaviate collection: one object (properties, optional id; answers {id}) or many (objects: [{id?, properties, vectors?}]; answers {results: [{id} | {error}]} in input order). Multi-tenant collections need tenant.",
                Verb::Create,
                ToolAnnotations::new().read_only(false).destructive(true).idempotent(false).open_world(false),
            ),
        );
        tools.push(ToolSpec::new::<DeleteParams>(
            "weaviate-objects-delete",
            "Delete one object by id, or every object matching filters. With filters it is a dry run by default that reports how many objects match; call again with dry_run: false to delete them. Answers {deleted, ...} or {dry_run: true, matches}.",
            Verb::Delete,
            ToolAnnotations::new().read_only(false).destructive(true).idempotent(true).open_world(false),
        ));
    }
    tools
}

pub(super) async fn call(
    server: &WeaviateServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<Value, ToolError> {
    match tool {
        "weaviate-objects-upsert" => upsert(server, parse_arguments(arguments)?).await,
        "weaviate-objects-get" => {
            let params: GetParams = parse_arguments(arguments)?;
            let name = collection_name(&params.collection_name)?;
            let id = object_id(&params.id, "id")?;
            let tenant = tenant_name(params.tenant.as_deref(), "tenant")?;
            let object = server
                .run(server.client.object(
                    name.as_str(),
                    &id,
                    tenant.as_deref(),
                    params.include_vector,
                ))
                .await
                .map_err(|error| {
                    server.error(error, || object_missing(&name, &id, tenant.as_deref()))
                })?;
            Ok(json!({ "object": object }))
        }
        "weaviate-objects-delete" => delete(server, parse_arguments(arguments)?).await,
        other => Err(ToolError::not_found(format!("no object tool `{other}`"))),
    }
}

fn object_id(text: &str, argument: &str) -> Result<Uuid, ToolError> {
    Uuid::try_parse(text.trim()).map_err(|_| {
        ToolError::invalid_input(format!(
            "{argument}: `{}` is not a UUID",
            text.chars().take(80).collect::<String>()
        ))
    })
}

fn object_missing(collection: &Name, id: &Uuid, tenant: Option<&str>) -> String {
    match tenant {
        Some(tenant) => {
            format!("no object {id} in collection `{collection}` for tenant `{tenant}`")
        }
        None => format!("no object {id} in collection `{collection}`"),
    }
}

async fn upsert(server: &WeaviateServer, params: UpsertParams) -> Result<Value, ToolError> {
    let name = collection_name(&params.collection_name)?;
    let tenant = tenant_name(params.tenant.as_deref(), "tenant")?;
    let (objects, many) = match params.objects {
        Some(objects) => {
            if params.properties.is_some() || params.id.is_some() {
                return Err(ToolError::invalid_input(
                    "give either objects, or properties and id for one object, not both",
                ));
            }
            if objects.is_empty() || objects.len() > MAX_OBJECTS {
                return Err(ToolError::invalid_input(format!(
                    "objects: give between 1 and {MAX_OBJECTS} objects"
                )));
            }
            (objects, true)
        }
        None => (
            vec![ObjectParams {
                id: params.id,
                properties: params.properties.unwrap_or_default(),
                vectors: None,
            }],
            false,
        ),
    };
    let mut bodies = Vec::with_capacity(objects.len());
    let mut ids = Vec::with_capacity(objects.len());
    for (index, object) in objects.into_iter().enumerate() {
        let at = if many { format!("objects[{index}].") } else { String::new() };
        let id = match &object.id {
            Some(id) => object_id(id, &format!("{at}id"))?,
            None => Uuid::new_v4(),
        };
        let mut body = Map::new();
        body.insert("class".into(), Value::from(name.as_str()));
        body.insert("id".into(), Value::from(id.to_string()));
        body.insert("properties".into(), Value::Object(object.properties));
        if let Some(tenant) = &tenant {
            body.insert("tenant".into(), Value::from(tenant.as_str()));
        }
        if let Some(vectors) = object.vectors {
            let mut named = Map::new();
            for (vector_name, values) in vectors {
                let vector_name = Name::parse(&vector_name, &format!("{at}vectors"))
                    .map_err(ToolError::invalid_input)?;
                if values.is_empty() || values.iter().any(|value| !value.is_finite()) {
                    return Err(ToolError::invalid_input(format!(
                        "{at}vectors.{vector_name}: a vector is a non-empty list of finite numbers"
                    )));
                }
                named.insert(vector_name.to_string(), json!(values));
            }
            body.insert("vectors".into(), Value::Object(named));
        }
        bodies.push(Value::Object(body));
        ids.push(id);
    }
    let answers = server
        .run(server.client.batch_objects(bodies))
        .await
        .map_err(|error| server.error(error, || collection_missing(&name)))?;
    let results: Vec<Result<Uuid, Vec<String>>> = answers
        .iter()
        .zip(&ids)
        .map(|(answer, id)| {
            let messages: Vec<String> = answer
                .pointer("/result/errors/error")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|error| error.get("message").and_then(Value::as_str))
                .map(|message| server.client.redact(message))
                .collect();
            let failed = answer.pointer("/result/status").and_then(Value::as_str) == Some("FAILED");
            if failed || !messages.is_empty() {
                Err(if messages.is_empty() {
                    vec!["the object was not stored".to_owned()]
                } else {
                    messages
                })
            } else {
                Ok(*id)
            }
        })
        .collect();
    if !many {
        return match results.into_iter().next() {
            Some(Ok(id)) => Ok(json!({ "id": id.to_string() })),
            Some(Err(messages)) => {
                let mut error = ToolError::invalid_input(format!(
                    "Weaviate did not store the object: {}",
                    messages.join("; ")
                ))
                .with_hint("multi-tenant collections need tenant; property values must match the collection's data types");
                error.details = Some(Box::new(json!({"weaviate": {"messages": messages}})));
                Err(error)
            }
            None => {
                Err(ToolError::new(crate::tool::ErrorCode::Internal, "Weaviate answered no result"))
            }
        };
    }
    let results = results
        .into_iter()
        .map(|result| match result {
            Ok(id) => json!({ "id": id.to_string() }),
            Err(messages) => json!({ "error": messages.join("; ") }),
        })
        .collect();
    Ok(json!({ "results": Value::Array(results) }))
}

async fn delete(server: &WeaviateServer, params: DeleteParams) -> Result<Value, ToolError> {
    let name = collection_name(&params.collection_name)?;
    let tenant = tenant_name(params.tenant.as_deref(), "tenant")?;
    match (params.id, params.filters) {
        (Some(id), None) => {
            let id = object_id(&id, "id")?;
            let missing = || object_missing(&name, &id, tenant.as_deref());
            if params.dry_run == Some(true) {
                server
                    .run(server.client.object(name.as_str(), &id, tenant.as_deref(), false))
                    .await
                    .map_err(|error| server.error(error, missing))?;
                return Ok(json!({"dry_run": true, "matches": 1, "id": id.to_string()}));
            }
            server
                .run(server.client.delete_object(name.as_str(), &id, tenant.as_deref()))
                .await
                .map_err(|error| server.error(error, missing))?;
            Ok(json!({"deleted": 1, "id": id.to_string()}))
        }
        (None, Some(filter)) => {
            filter.validate().map_err(ToolError::invalid_input)?;
            let dry_run = params.dry_run.unwrap_or(true);
            let results = server
                .run(server.client.batch_delete(
                    name.as_str(),
                    filter.to_rest(),
                    dry_run,
                    tenant.as_deref(),
                ))
                .await
                .map_err(|error| server.error(error, || collection_missing(&name)))?;
            let number = |key: &str| results.get(key).and_then(Value::as_u64).unwrap_or(0);
            if dry_run {
                let matches = number("matches");
                Ok(json!({
                    "dry_run": true,
                    "matches": matches,
                    "limit": results.get("limit"),
                    "hint": format!("nothing was deleted; call again with dry_run: false to delete these {matches} object(s)"),
                }))
            } else {
                Ok(json!({
                    "dry_run": false,
                    "matches": number("matches"),
                    "deleted": number("successful"),
                    "failed": number("failed"),
                }))
            }
        }
        _ => Err(ToolError::invalid_input("give exactly one of id or filters")),
    }
}
