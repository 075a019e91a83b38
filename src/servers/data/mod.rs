//! The built-in `data` server: the data-provider toolset of specification 002 on the target
//! PostgreSQL database (`catalog` is the database name). Tools are thin adapters over
//! [`crate::sql`], one file per group: `query.rs` (`query_sql`, `explain_sql`, `query_plan`),
//! `metadata.rs` (schemas, tables, columns, statistics, samples), `profile.rs` (profiles, PII,
//! masking), `materialize.rs` (`materialize_sql`, `create_view`); `table.rs` resolves a
//! TableRef.

mod materialize;
mod metadata;
mod profile;
pub(crate) mod prompts;
mod query;
pub(crate) mod resources;
mod table;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::sql_common::{SchemaCache, Target};
use super::{CallContext, ToolSpec};
use crate::config::{DataConfig, SqlConfig};
use crate::privacy::mask::{MaskRule, MaskingPolicy};
use crate::sql;
use crate::tool::{ToolError, ToolOutput};

pub(crate) use table::TableRef;

/// The SQL dialects `query_sql` accepts: PostgreSQL's own, and ANSI SQL (which PostgreSQL
/// runs as written).
pub(crate) const DIALECTS: [&str; 2] = ["postgres", "ansi"];

/// What the `data` server is configured with.
#[derive(Debug, Clone)]
pub(crate) struct DataSettings {
    pub(crate) sql: SqlConfig,
    pub(crate) data: DataConfig,
    /// Masking policies by id: column name -> rule.
    pub(crate) masking: BTreeMap<String, BTreeMap<String, MaskRule>>,
    pub(crate) read_only: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct DataServer {
    target: Target,
    secret: sql::Secret,
    config: SqlConfig,
    data: DataConfig,
    /// Masking policies, each with a salt derived from the orca secret (hashes are stable
    /// across replicas and restarts, and cannot be reversed by hashing guesses elsewhere).
    masking: Arc<BTreeMap<String, MaskingPolicy>>,
    read_only: bool,
    schema_cache: SchemaCache,
    tools: Arc<[ToolSpec]>,
}

impl DataServer {
    pub(crate) const DESCRIPTION: &str = "the data-provider toolset on the target PostgreSQL database: paged reads, Substrait plans, metadata, statistics, samples, profiles, PII detection, masked previews, materialization, prompts";

    pub(crate) fn new(target: Target, secret: sql::Secret, settings: DataSettings) -> DataServer {
        let masking = settings
            .masking
            .into_iter()
            .map(|(id, columns)| {
                let salt = crate::privacy::salt(&secret, &id);
                (id.clone(), MaskingPolicy { id, columns, salt })
            })
            .collect();
        let tools = DataServer::declared_tools(settings.read_only);
        DataServer {
            target,
            secret,
            config: settings.sql,
            data: settings.data,
            masking: Arc::new(masking),
            read_only: settings.read_only,
            schema_cache: SchemaCache::default(),
            tools: tools.into(),
        }
    }

    /// The tools this server declares.
    pub(crate) fn declared_tools(read_only: bool) -> Vec<ToolSpec> {
        let mut tools = query::tools();
        tools.extend(metadata::tools());
        tools.extend(profile::tools());
        tools.extend(materialize::tools(read_only));
        tools
    }

    pub(crate) fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        match tool {
            name if query::NAMES.contains(&name) => {
                query::call(self, name, arguments, context).await
            }
            name if metadata::NAMES.contains(&name) => {
                metadata::call(self, name, arguments, context).await
            }
            name if profile::NAMES.contains(&name) => {
                profile::call(self, name, arguments, context).await
            }
            name if materialize::NAMES.contains(&name) => {
                materialize::call(self, name, arguments, context).await
            }
            other => Err(ToolError::not_found(format!("the data server has no tool `{other}`"))),
        }
    }

    /// What this server can do, with the configured limits (spec 002 "Capabilities"): a
    /// feature is `true` only when it works in this configuration.
    pub(crate) fn capabilities(&self) -> Value {
        json!({
            "dialects": DIALECTS,
            "limits": {
                "default_max_rows": self.config.default_max_rows,
                "hard_max_rows": self.config.hard_max_rows,
                "page_size_bytes": self.config.max_result_bytes,
                "timeout_seconds": self.config.default_timeout.as_secs(),
            },
            "features": {
                "paging": true,
                "explain": true,
                "substrait": true,
                "profiling": true,
                "pii_masking": !self.masking.is_empty(),
                "materialization": !self.read_only,
                "lineage": true,
            },
            "security": {
                "auth": ["api_key"],
                "row_level_security": false,
                "masking": !self.masking.is_empty(),
            },
        })
    }

    /// Read a `res://` resource; `None` when the URI is not one of this server's.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        context: &CallContext,
    ) -> Option<Result<Value, ToolError>> {
        resources::read(self, uri, context).await
    }
}
