//! The resources of specification 002 (`res://...`): catalogs, schemas, tables, one table's
//! columns, constraints, statistics and etag, samples, and lineage. Reads reuse the metadata
//! tools, so a resource and the matching tool always agree.

use rmcp::model::{Resource, ResourceTemplate};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::DataServer;
use super::table::TableRef;
use crate::servers::CallContext;
use crate::servers::sql_common::sql_error;
use crate::sql;
use crate::tool::ToolError;

const PREFIX: &str = "res://";

/// The fixed resources.
pub(crate) fn list() -> Vec<Resource> {
    vec![
        Resource::new("res://catalogs", "catalogs")
            .with_description("The catalogs (databases) served, with an etag")
            .with_mime_type("application/json"),
        Resource::new("res://capabilities", "capabilities")
            .with_description("Dialects, limits and features of the data server")
            .with_mime_type("application/json"),
    ]
}

/// The parameterized resources.
pub(crate) fn templates() -> Vec<ResourceTemplate> {
    [
        ("res://schemas/{catalog}", "schemas", "The schemas of a catalog"),
        (
            "res://tables/{catalog}/{schema}",
            "tables",
            "Tables and views of a schema (?pattern=&limit=)",
        ),
        (
            "res://table/{catalog}/{schema}/{table}",
            "table",
            "Columns, constraints, statistics and etag of a table",
        ),
        (
            "res://samples/{catalog}/{schema}/{table}",
            "samples",
            "Sample rows of a table (?method=head|random&limit=100)",
        ),
        (
            "res://lineage/{catalog}/{schema}/{table}",
            "lineage",
            "Tables upstream and downstream, from foreign keys and view dependencies",
        ),
    ]
    .into_iter()
    .map(|(uri, name, description)| {
        ResourceTemplate::new(uri, name)
            .with_description(description)
            .with_mime_type("application/json")
    })
    .collect()
}

fn decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%' && index + 2 < bytes.len())
            .then(|| std::str::from_utf8(&bytes[index + 1..index + 3]).ok())
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        if let Some(byte) = escaped {
            out.push(byte);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Read `uri`; `None` when it is not one of these resources.
pub(crate) async fn read(
    server: &DataServer,
    uri: &str,
    context: &CallContext,
) -> Option<Result<Value, ToolError>> {
    let rest = uri.strip_prefix(PREFIX)?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut parameters = Map::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(value);
        let value = value.parse::<u64>().map_or_else(|_| Value::from(value.clone()), Value::from);
        parameters.insert(decode(key), value);
    }
    let segments: Vec<String> = path.split('/').map(decode).collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let table_ref = |catalog: &str, schema: &str, table: &str| TableRef {
        catalog: Some(catalog.to_owned()),
        schema: Some(schema.to_owned()),
        table: table.to_owned(),
    };
    Some(match segments.as_slice() {
        ["catalogs"] => catalogs(server).await,
        ["capabilities"] => Ok(server.capabilities()),
        ["schemas", catalog] => super::metadata::call(
            server,
            "list_schemas",
            Some(object(json!({"catalog": catalog}))),
            context,
        )
        .await
        .map(|output| output.value),
        ["tables", catalog, schema] => {
            let mut arguments = object(json!({"catalog": catalog, "schema": schema}));
            for key in ["pattern", "limit"] {
                if let Some(value) = parameters.get(key) {
                    arguments.insert(key.to_owned(), value.clone());
                }
            }
            super::metadata::call(server, "list_tables", Some(arguments), context)
                .await
                .map(|output| output.value)
        }
        ["table", catalog, schema, table] => {
            describe(server, &table_ref(catalog, schema, table)).await
        }
        ["samples", catalog, schema, table] => {
            let mut arguments = object(json!({"ref": table_ref(catalog, schema, table)}));
            for key in ["method", "limit"] {
                if let Some(value) = parameters.get(key) {
                    arguments.insert(key.to_owned(), value.clone());
                }
            }
            super::metadata::call(server, "sample_table", Some(arguments), context)
                .await
                .map(|output| json!({"sample": output.value}))
        }
        ["lineage", catalog, schema, table] => {
            lineage(server, &table_ref(catalog, schema, table)).await
        }
        _ => Err(ToolError::not_found(format!("unknown resource: {uri}"))
            .with_hint("resources/templates/list names the res:// resources")),
    })
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn etag(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    format!("\"{}\"", hex::encode(&hasher.finalize()[..12]))
}

/// The catalog a `res://` URI names (`Some(None)` for one that names none, such as
/// `res://catalogs`); `None` when the URI is not a `res://` one.
pub(crate) fn catalog_of(uri: &str) -> Option<Option<String>> {
    let rest = uri.strip_prefix(PREFIX)?;
    let path = rest.split_once('?').map_or(rest, |(path, _)| path);
    let mut segments = path.split('/');
    let kind = segments.next().unwrap_or_default();
    Some(match (kind, segments.next()) {
        ("schemas" | "tables" | "table" | "samples" | "lineage", Some(catalog)) => {
            Some(decode(catalog))
        }
        _ => None,
    })
}

/// Every database served: its name, description, status and an etag of its schema (an
/// unreachable database is listed with its status and no etag).
async fn catalogs(server: &DataServer) -> Result<Value, ToolError> {
    let mut items = Vec::new();
    for database in server.databases().iter() {
        let mut item = database.summary();
        let schema = database
            .schema_cache
            .get(&database.target.pool, database.sql.schema_cache_ttl, false)
            .await;
        item["etag"] = match schema {
            Ok((schema, _, _)) => {
                Value::from(etag(&[&serde_json::to_string(&*schema).unwrap_or_default()]))
            }
            Err(_) => Value::Null,
        };
        item["last_modified"] = Value::from(chrono::Utc::now().to_rfc3339());
        items.push(item);
    }
    Ok(json!({ "items": items }))
}

/// `reltuples`, total size, `relpages`, and the last ANALYZE of a table.
type TableStats = (Option<i64>, Option<i64>, Option<i64>, Option<chrono::DateTime<chrono::Utc>>);

/// `res://table/...`: the table, its columns, constraints and statistics, and an etag of the
/// definition and the statistics.
async fn describe(server: &DataServer, table: &TableRef) -> Result<Value, ToolError> {
    let resolved = server.resolve_table(table).await?;
    let relation = resolved.relation();
    let name = resolved.quoted();
    // A compatible database without the statistics views still describes its tables.
    let stats_sql = if server.database.features().stat_views {
        "SELECT c.reltuples::int8, pg_catalog.pg_total_relation_size(c.oid), c.relpages::int8, \
                greatest(s.last_analyze, s.last_autoanalyze) \
           FROM pg_catalog.pg_class c \
           LEFT JOIN pg_catalog.pg_stat_user_tables s ON s.relid = c.oid \
          WHERE c.oid = to_regclass($1)"
    } else {
        "SELECT c.reltuples::int8, pg_catalog.pg_total_relation_size(c.oid), c.relpages::int8, \
                NULL::timestamptz \
           FROM pg_catalog.pg_class c \
          WHERE c.oid = to_regclass($1)"
    };
    let stats: Option<TableStats> = sqlx::query_as(stats_sql)
        .bind(&name)
        .fetch_optional(&server.target.pool)
        .await
        .map_err(|error| sql_error(sql::Error::from_query(error)))?;
    let (tuples, size, pages, analyzed) = stats.unwrap_or_default();
    let row_count = tuples.filter(|rows| *rows >= 0);
    // The definition without the planner's estimate (which the statistics below carry fresh,
    // while the introspected schema may be a few minutes old).
    let mut definition = serde_json::to_value(relation).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut definition {
        map.remove("row_estimate");
    }
    let definition = definition.to_string();
    // pg_class's estimates change with ANALYZE (and VACUUM) at once; the analyze time in the
    // statistics views lags behind, so it is reported but not part of the etag.
    let statistics = format!("{tuples:?}/{pages:?}");
    let primary_key: Vec<&str> = relation
        .primary_key
        .as_ref()
        .map(|key| key.columns.iter().map(String::as_str).collect())
        .unwrap_or_default();
    let foreign_keys: Vec<Value> = relation
        .foreign_keys
        .iter()
        .map(|key| {
            json!({
                "columns": key.columns,
                "ref": {"catalog": resolved.schema.database, "schema": key.referenced_schema, "table": key.referenced_table},
                "ref_columns": key.referenced_columns,
            })
        })
        .collect();
    let kind = serde_json::to_value(relation.kind).unwrap_or(Value::Null);
    let is_view = matches!(kind.as_str(), Some("view" | "materialized_view"));
    Ok(json!({
        "table": {
            "catalog": resolved.schema.database,
            "schema": relation.schema,
            "table": relation.name,
            "type": if is_view { "VIEW" } else { "TABLE" },
            "comment": relation.comment,
        },
        "columns": relation.columns.iter().map(|column| json!({
            "name": column.name,
            "type": column.data_type,
            "nullable": column.nullable,
            "default": column.default,
            "comment": column.comment,
        })).collect::<Vec<_>>(),
        "constraints": {"primary_key": primary_key, "foreign_keys": foreign_keys},
        "stats": {
            "row_count": row_count,
            "size_bytes": size,
            "updated_at": analyzed.map(|instant| instant.to_rfc3339()),
        },
        "etag": etag(&[&definition, &statistics]),
    }))
}

/// `res://lineage/...`: foreign keys and view dependencies, both ways.
async fn lineage(server: &DataServer, table: &TableRef) -> Result<Value, ToolError> {
    let resolved = server.resolve_table(table).await?;
    let relation = resolved.relation();
    let schema = &resolved.schema;
    let reference = |schema_name: &str, table_name: &str| json!({"catalog": schema.database, "schema": schema_name, "table": table_name});
    let mut upstream: Vec<Value> = Vec::new();
    let push = |list: &mut Vec<Value>, value: Value| {
        if !list.contains(&value) {
            list.push(value);
        }
    };
    for key in &relation.foreign_keys {
        push(&mut upstream, reference(&key.referenced_schema, &key.referenced_table));
    }
    for source in &relation.depends_on {
        push(&mut upstream, reference(&source.schema, &source.name));
    }
    let mut downstream: Vec<Value> = Vec::new();
    for other in &schema.relations {
        let references = other.foreign_keys.iter().any(|key| {
            key.referenced_schema == relation.schema && key.referenced_table == relation.name
        });
        let reads = other
            .depends_on
            .iter()
            .any(|source| source.schema == relation.schema && source.name == relation.name);
        if (references || reads)
            && !(other.schema == relation.schema && other.name == relation.name)
        {
            push(&mut downstream, reference(&other.schema, &other.name));
        }
    }
    Ok(json!({"upstream": upstream, "downstream": downstream}))
}
