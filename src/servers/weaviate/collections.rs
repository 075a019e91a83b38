//! Collection tools: `weaviate-collections-get-config`, `weaviate-tenants-list`,
//! `weaviate-collections-create` and `weaviate-collections-delete`.

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::graphql::Name;
use super::{WeaviateServer, collection_missing, collection_name};
use crate::servers::ToolSpec;
use crate::tool::{ToolError, Verb, parse_arguments};

pub(super) const NAMES: [&str; 4] = [
    "weaviate-collections-get-config",
    "weaviate-tenants-list",
    "weaviate-collections-create",
    "weaviate-collections-delete",
];

/// The property data types a new collection may use (plus references to other collections).
const DATA_TYPES: [&str; 16] = [
    "text",
    "text[]",
    "int",
    "int[]",
    "number",
    "number[]",
    "boolean",
    "boolean[]",
    "date",
    "date[]",
    "uuid",
    "uuid[]",
    "geoCoordinates",
    "phoneNumber",
    "blob",
    "object",
];

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetConfigParams {
    /// Name of one collection; omit it for every collection.
    collection_name: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TenantsListParams {
    /// Name of the collection whose tenants to list.
    collection_name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PropertyParams {
    /// Property name (letters, digits, underscores).
    name: String,
    /// Weaviate data type: text, text[], int, int[], number, number[], boolean, boolean[], date,
    /// date[], uuid, uuid[], geoCoordinates, phoneNumber, blob, object, or a collection name
    /// for a reference.
    data_type: String,
    description: Option<String>,
    /// Tokenization of a text property: word, lowercase, whitespace, field, trigram, gse ...
    tokenization: Option<String>,
    index_filterable: Option<bool>,
    index_searchable: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateParams {
    /// Name of the new collection (its first letter is upper-cased, as Weaviate does).
    collection_name: String,
    description: Option<String>,
    /// The properties; Weaviate can also add them on first insert when auto-schema is on.
    #[serde(default)]
    properties: Vec<PropertyParams>,
    /// The vectorizer module, such as `text2vec-openai`, or `none` to bring your own vectors.
    vectorizer: Option<String>,
    /// Whether objects live in tenants (each object then needs a tenant).
    #[serde(default)]
    multi_tenancy: bool,
    /// With multi-tenancy: create a tenant on first insert into it.
    #[serde(default)]
    auto_tenant_creation: bool,
    /// Weaviate's `moduleConfig` object, passed through.
    module_config: Option<Map<String, Value>>,
    /// Weaviate's `vectorConfig` object (named vectors), passed through.
    vector_config: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DeleteParams {
    /// Name of the collection to delete, with all its objects and tenants.
    collection_name: String,
}

pub(super) fn tools(read_only: bool) -> Vec<ToolSpec> {
    let read = ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
    let mut tools = vec![
        ToolSpec::new::<GetConfigParams>(
            "weaviate-collections-get-config",
            "Get the configuration of one Weaviate collection (collection_name) or of every collection: properties, vectorizer, module, index, multi-tenancy and replication settings. Answers {collections: [...]}.",
            Verb::Read,
            read.clone(),
        ),
        ToolSpec::new::<TenantsListParams>(
            "weaviate-tenants-list",
            "List the tenants of a multi-tenant Weaviate collection with their activity status. Answers {tenants: [{name, activityStatus}]}.",
            Verb::Read,
            read,
        ),
    ];
    if !read_only {
        tools.push(ToolSpec::new::<CreateParams>(
            "weaviate-collections-create",
            "Create a Weaviate collection: name, properties (name, data_type ...), vectorizer, multi-tenancy, and optional moduleConfig / vectorConfig objects. Answers {collection: <its configuration>}.",
            Verb::Create,
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false),
        ));
        tools.push(ToolSpec::new::<DeleteParams>(
            "weaviate-collections-delete",
            "Delete a Weaviate collection with all its objects and tenants. This cannot be undone. Answers {deleted: <name>}.",
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
    let client = &server.client;
    match tool {
        "weaviate-collections-get-config" => {
            let params: GetConfigParams = parse_arguments(arguments)?;
            let collections = match params.collection_name.as_deref() {
                Some(name) => {
                    let name = collection_name(name)?;
                    let class = server
                        .run(client.collection(name.as_str()))
                        .await
                        .map_err(|error| server.error(error, || collection_missing(&name)))?;
                    vec![class]
                }
                None => server.run(client.schema()).await.map_err(|error| {
                    server.error(error, || "the schema was not found".to_owned())
                })?,
            };
            Ok(server.list_result("collections", collections))
        }
        "weaviate-tenants-list" => {
            let params: TenantsListParams = parse_arguments(arguments)?;
            let name = collection_name(&params.collection_name)?;
            let tenants = server
                .run(client.tenants(name.as_str()))
                .await
                .map_err(|error| server.error(error, || collection_missing(&name)))?;
            let tenants = tenants
                .into_iter()
                .map(|tenant| json!({"name": tenant.get("name"), "activityStatus": tenant.get("activityStatus")}))
                .collect();
            Ok(server.list_result("tenants", tenants))
        }
        "weaviate-collections-create" => {
            let params: CreateParams = parse_arguments(arguments)?;
            let name = collection_name(&params.collection_name)?;
            let class = class_body(&name, params)?;
            let created = server
                .run(client.create_collection(&class))
                .await
                .map_err(|error| server.error(error, || collection_missing(&name)))?;
            server.forget_fields(&name);
            Ok(json!({ "collection": created }))
        }
        "weaviate-collections-delete" => {
            let params: DeleteParams = parse_arguments(arguments)?;
            let name = collection_name(&params.collection_name)?;
            // Weaviate answers 200 for a collection that does not exist; say so instead.
            server
                .run(client.collection(name.as_str()))
                .await
                .map_err(|error| server.error(error, || collection_missing(&name)))?;
            server
                .run(client.delete_collection(name.as_str()))
                .await
                .map_err(|error| server.error(error, || collection_missing(&name)))?;
            server.forget_fields(&name);
            Ok(json!({ "deleted": name.as_str() }))
        }
        other => Err(ToolError::not_found(format!("no collection tool `{other}`"))),
    }
}

/// The `Class` body of `POST /v1/schema`, every name and type checked.
fn class_body(name: &Name, params: CreateParams) -> Result<Value, ToolError> {
    let mut properties = Vec::new();
    for (index, property) in params.properties.into_iter().enumerate() {
        let at = format!("properties[{index}]");
        let property_name =
            Name::parse(&property.name, &format!("{at}.name")).map_err(ToolError::invalid_input)?;
        let data_type = property.data_type.trim();
        let known = DATA_TYPES.contains(&data_type) || data_type == "object[]";
        let reference = data_type.starts_with(|c: char| c.is_ascii_uppercase())
            && Name::parse(data_type, "data_type").is_ok();
        if !known && !reference {
            return Err(ToolError::invalid_input(format!(
                "{at}.data_type: `{data_type}` is not a Weaviate data type; use one of {} or a collection name",
                DATA_TYPES.join(", ")
            )));
        }
        let mut body = Map::new();
        body.insert("name".into(), Value::from(property_name.as_str()));
        body.insert("dataType".into(), json!([data_type]));
        if let Some(description) = property.description {
            body.insert("description".into(), Value::from(description));
        }
        if let Some(tokenization) = property.tokenization {
            body.insert("tokenization".into(), Value::from(tokenization));
        }
        if let Some(flag) = property.index_filterable {
            body.insert("indexFilterable".into(), Value::from(flag));
        }
        if let Some(flag) = property.index_searchable {
            body.insert("indexSearchable".into(), Value::from(flag));
        }
        properties.push(Value::Object(body));
    }
    if params.auto_tenant_creation && !params.multi_tenancy {
        return Err(ToolError::invalid_input("auto_tenant_creation needs multi_tenancy: true"));
    }
    let mut class = Map::new();
    class.insert("class".into(), Value::from(name.as_str()));
    if let Some(description) = params.description {
        class.insert("description".into(), Value::from(description));
    }
    class.insert("properties".into(), Value::Array(properties));
    if let Some(vectorizer) = params.vectorizer {
        class.insert("vectorizer".into(), Value::from(vectorizer));
    }
    class.insert(
        "multiTenancyConfig".into(),
        json!({"enabled": params.multi_tenancy, "autoTenantCreation": params.auto_tenant_creation}),
    );
    if let Some(config) = params.module_config {
        class.insert("moduleConfig".into(), Value::Object(config));
    }
    if let Some(config) = params.vector_config {
        class.insert("vectorConfig".into(), Value::Object(config));
    }
    Ok(Value::Object(class))
}
