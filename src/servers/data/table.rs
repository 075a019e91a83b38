//! TableRef (`{catalog, schema, table}`) resolved against the introspected schema: the catalog
//! is the database's name, the schema may be left out when the table name is unique, and an
//! ambiguous name points the caller to the `ask_for_disambiguation` prompt.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::DataServer;
use crate::servers::sql_common::sql_error;
use crate::sql::{self, DatabaseSchema};
use crate::tool::ToolError;

/// A table or view (spec 002 TableRef).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TableRef {
    /// The database name; the target database when absent.
    #[serde(default)]
    pub(crate) catalog: Option<String>,
    /// The schema; found from the table name when absent and unique.
    #[serde(default)]
    pub(crate) schema: Option<String>,
    /// The table or view name.
    pub(crate) table: String,
}

/// A TableRef that names one relation of the target database.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedTable {
    pub(crate) schema: Arc<DatabaseSchema>,
    /// Index into `schema.relations`.
    index: usize,
}

impl ResolvedTable {
    pub(crate) fn relation(&self) -> &sql::introspect::Relation {
        &self.schema.relations[self.index]
    }

    /// `"schema"."table"`, quoted for SQL.
    pub(crate) fn quoted(&self) -> String {
        let relation = self.relation();
        format!("{}.{}", quote(&relation.schema), quote(&relation.name))
    }

    /// The TableRef of this relation, fully qualified.
    pub(crate) fn table_ref(&self) -> TableRef {
        let relation = self.relation();
        TableRef {
            catalog: Some(self.schema.database.clone()),
            schema: Some(relation.schema.clone()),
            table: relation.name.clone(),
        }
    }
}

/// A double-quoted SQL identifier.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl DataServer {
    /// The introspected schema (cached like `generate_schema`'s).
    pub(crate) async fn database_schema(&self) -> Result<Arc<DatabaseSchema>, ToolError> {
        let (schema, _, _) = self
            .schema_cache
            .get(&self.target.pool, self.config.schema_cache_ttl, false)
            .await
            .map_err(sql_error)?;
        Ok(schema)
    }

    /// The relation a TableRef names.
    ///
    /// # Errors
    ///
    /// NOT_FOUND for another catalog or no such relation (with the closest names), and
    /// INVALID_INPUT for an ambiguous name (with the candidates and the prompt to ask).
    pub(crate) async fn resolve_table(&self, table: &TableRef) -> Result<ResolvedTable, ToolError> {
        let schema = self.database_schema().await?;
        if let Some(catalog) = &table.catalog
            && catalog != &schema.database
        {
            return Err(ToolError::not_found(format!(
                "catalog `{catalog}` is not served here; the catalog is `{}`",
                schema.database
            ))
            .with_hint("leave catalog out, or call list_schemas"));
        }
        let name = match &table.schema {
            Some(schema_name) => format!("{}.{}", quote(schema_name), quote(&table.table)),
            None => quote(&table.table),
        };
        let found = schema.find_relation(&name).or_else(|_| {
            // Unquoted, so that case rules apply as PostgreSQL would apply them.
            let loose = match &table.schema {
                Some(schema_name) => format!("{schema_name}.{}", table.table),
                None => table.table.clone(),
            };
            schema.find_relation(&loose)
        });
        let relation = match found {
            Ok(relation) => relation,
            Err(sql::introspect::LookupError::Ambiguous { candidates, .. }) => {
                let mut error = ToolError::invalid_input(format!(
                    "table `{}` was found in several schemas: {}",
                    table.table,
                    candidates.join(", ")
                ))
                .with_hint("set `schema` in the TableRef; the prompt ask_for_disambiguation asks the user which one");
                error.details = Some(Box::new(json!({
                    "candidates": candidates,
                    "prompt": {"name": "ask_for_disambiguation", "arguments": {"table": table.table, "candidates": candidates.join(", ")}},
                })));
                return Err(error);
            }
            Err(other) => {
                return Err(ToolError::not_found(other.to_string())
                    .with_hint("call list_tables to see the tables and views"));
            }
        };
        let index = schema
            .relations
            .iter()
            .position(|candidate| std::ptr::eq(candidate, relation))
            .unwrap_or_default();
        Ok(ResolvedTable { schema, index })
    }
}
