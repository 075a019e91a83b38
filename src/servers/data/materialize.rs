//! `materialize_sql` and `create_view`: the result of a read stored as a table, or kept as a
//! view, in one transaction. The SQL must be a pure read; the caller needs the `create` verb;
//! both tools are absent in read-only mode.

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::query::{check_dialect, read_only_query};
use super::{DataServer, TableRef};
use crate::servers::sql_common::sql_error;
use crate::servers::{CallContext, ToolSpec};
use crate::sql::materialize::{Materialization, MaterializeMode, materialize};
use crate::tool::{ToolError, ToolOutput, Verb, parse_arguments};

/// The tools of this file.
pub(super) const NAMES: &[&str] = &["materialize_sql", "create_view"];

pub(super) fn tools(read_only: bool) -> Vec<ToolSpec> {
    if read_only {
        return Vec::new();
    }
    let writes = || {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(false)
    };
    vec![
        ToolSpec::new::<MaterializeSqlParams>(
            "materialize_sql",
            "Store the result of one read-only query as a table, in one transaction. mode: create (a new table; fails if it exists), replace (drop and create again), append (insert into the existing table). target is a TableRef {catalog?, schema? (default public), table}. Returns affected_rows and duration_ms.",
            Verb::Create,
            writes(),
        ),
        ToolSpec::new::<CreateViewParams>(
            "create_view",
            "Define a view as one read-only query. name is a TableRef {catalog?, schema? (default public), table}; or_replace (default true) replaces a view of that name.",
            Verb::Create,
            writes(),
        ),
    ]
}

pub(super) async fn call(
    server: &DataServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
    context: &CallContext,
) -> Result<ToolOutput, ToolError> {
    if server.read_only {
        return Err(ToolError::invalid_input(format!("{tool} is not available in read-only mode")));
    }
    crate::servers::sql_common::refuse_masked_write(&context.principal, tool)?;
    match tool {
        "materialize_sql" => {
            let params: MaterializeSqlParams = parse_arguments(arguments)?;
            check_dialect(params.dialect.as_deref())?;
            let mode = params.mode;
            let (target, duration_ms, affected_rows) = server
                .materialize(&params.sql, &params.target, Materialization::Table(mode.into()))
                .await?;
            Ok(ToolOutput::new(json!({
                "status": "ok",
                "affected_rows": affected_rows,
                "target": target,
                "duration_ms": duration_ms,
                "mode": mode,
            })))
        }
        _ => {
            let params: CreateViewParams = parse_arguments(arguments)?;
            check_dialect(params.dialect.as_deref())?;
            let (view, duration_ms, _) = server
                .materialize(
                    &params.sql,
                    &params.name,
                    Materialization::View { or_replace: params.or_replace },
                )
                .await?;
            Ok(ToolOutput::new(json!({"status": "ok", "view": view, "duration_ms": duration_ms})))
        }
    }
}

/// How `materialize_sql` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Mode {
    Create,
    Replace,
    Append,
}

impl From<Mode> for MaterializeMode {
    fn from(mode: Mode) -> MaterializeMode {
        match mode {
            Mode::Create => MaterializeMode::Create,
            Mode::Replace => MaterializeMode::Replace,
            Mode::Append => MaterializeMode::Append,
        }
    }
}

/// Arguments of `materialize_sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MaterializeSqlParams {
    /// One read-only SQL query whose rows are stored.
    sql: String,
    /// The table to write: {catalog?, schema? (default public), table}.
    target: TableRef,
    /// create (default), replace or append.
    #[serde(default = "create_mode")]
    mode: Mode,
    /// `postgres` (default) or `ansi`.
    dialect: Option<String>,
}

fn create_mode() -> Mode {
    Mode::Create
}

fn yes() -> bool {
    true
}

/// Arguments of `create_view`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateViewParams {
    /// One read-only SQL query: the view's definition.
    sql: String,
    /// The view: {catalog?, schema? (default public), table}.
    name: TableRef,
    /// Replace a view of that name (default true).
    #[serde(default = "yes")]
    or_replace: bool,
    /// `postgres` (default) or `ansi`.
    dialect: Option<String>,
}

impl DataServer {
    /// Check the query and the target, materialize, and forget the cached schema.
    async fn materialize(
        &self,
        sql_text: &str,
        target: &TableRef,
        what: Materialization,
    ) -> Result<(TableRef, u64, u64), ToolError> {
        let query = read_only_query(sql_text, "the query")?;
        let database = self.database_schema().await?.database.clone();
        if let Some(catalog) = &target.catalog
            && catalog != &database
        {
            return Err(ToolError::not_found(format!(
                "catalog `{catalog}` is not served here; the catalog is `{database}`"
            )));
        }
        let schema = target.schema.clone().unwrap_or_else(|| "public".to_owned());
        if target.table.is_empty() || schema.is_empty() {
            return Err(ToolError::invalid_input("the target needs a table name"));
        }
        let done = materialize(
            &self.target.pool,
            &query,
            &schema,
            &target.table,
            what,
            self.config.default_timeout,
        )
        .await
        .map_err(|error| match error {
            crate::sql::Error::Query { ref message, .. } if message.contains("already exists") => {
                ToolError::invalid_input(message.clone())
                    .with_hint("use mode replace to recreate it, or append to add rows")
            }
            crate::sql::Error::Query { ref message, .. } if message.contains("does not exist") => {
                ToolError::not_found(message.clone())
                    .with_hint("mode append needs an existing table; use create first")
            }
            other => sql_error(other),
        })?;
        self.database.schema_changed().await;
        let table =
            TableRef { catalog: Some(database), schema: Some(schema), table: target.table.clone() };
        Ok((
            table,
            u64::try_from(done.duration.as_millis()).unwrap_or(u64::MAX),
            done.affected_rows,
        ))
    }
}
