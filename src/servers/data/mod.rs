//! The built-in `data` server: the data-provider toolset of specification 002 on the target
//! PostgreSQL database (`catalog` is the database name). Tools are thin adapters over
//! [`crate::sql`], one file per group: `query.rs` (`query_sql`, `explain_sql`, `query_plan`),
//! `metadata.rs` (schemas, tables, columns, statistics, samples), `profile.rs` (profiles, PII,
//! masking), `materialize.rs` (`materialize_sql`, `create_view`); `table.rs` resolves a
//! TableRef.
//!
//! # Design notes
//!
//! `servers/data` is the data-provider toolset of specification 002, one file per group of tools,
//! each a `NAMES` list, a `tools()` and a `call()` that `mod.rs` dispatches to: `query.rs`
//! (`query_sql`, `query_plan`, `explain_sql`, and the `_meta.prompts` advice), `metadata.rs`
//! (schemas, tables, columns with hints, statistics, samples), `profile.rs` (profiles, PII
//! detection, masked previews), `materialize.rs` (`materialize_sql`, `create_view`, over
//! `sql::materialize`), `prompts.rs` (the four prompts), `resources.rs` (the `res://` resources,
//! read through the metadata tools so both agree), `table.rs` (a TableRef resolved against the
//! cached introspection; ambiguity points to `ask_for_disambiguation`). Every query these tools
//! build uses quoted identifiers and computed numbers only, and goes through classification and
//! `run_read` like user SQL.

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

use super::sql_common::{
    Database, Databases, SchemaCache, Target, take_database, with_database_parameter,
};
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
    pub(crate) data: DataConfig,
    /// Masking policies by id: column name -> rule.
    pub(crate) masking: BTreeMap<String, BTreeMap<String, MaskRule>>,
    pub(crate) read_only: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct DataServer {
    /// Every database served.
    databases: Databases,
    /// The database of the call being served (the first one until a call chooses).
    database: Arc<Database>,
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

    /// The server over `databases` (at least one).
    pub(crate) fn new(
        databases: Databases,
        secret: sql::Secret,
        settings: DataSettings,
    ) -> DataServer {
        let masking = settings
            .masking
            .into_iter()
            .map(|(id, columns)| {
                let salt = crate::privacy::salt(&secret, &id);
                (id.clone(), MaskingPolicy { id, columns, kinds: Default::default(), salt })
            })
            .collect();
        let first =
            Arc::clone(databases.iter().next().expect("the registry gives at least one database"));
        let names = if databases.len() > 1 { databases.names() } else { Vec::new() };
        let tools =
            DataServer::listed_tools(settings.read_only || !databases.any_writable(), &names);
        DataServer {
            target: first.target.clone(),
            config: first.sql.clone(),
            read_only: settings.read_only || first.read_only,
            schema_cache: first.schema_cache.clone(),
            database: first,
            databases,
            secret,
            data: settings.data,
            masking: Arc::new(masking),
            tools: tools.into(),
        }
    }

    /// This server bound to `database`: its pool, limits and schema cache.
    fn on(&self, database: &Arc<Database>) -> DataServer {
        let mut bound = self.clone();
        bound.target = database.target.clone();
        bound.config = database.sql.clone();
        bound.read_only = database.read_only;
        bound.schema_cache = database.schema_cache.clone();
        bound.database = Arc::clone(database);
        bound
    }

    /// The databases this server serves.
    pub(crate) fn databases(&self) -> &Databases {
        &self.databases
    }

    /// The database a call's arguments name: `database`, or the `catalog` of the call or of any
    /// TableRef it holds, which must agree.
    fn database_for(
        &self,
        arguments: &mut Option<Map<String, Value>>,
    ) -> Result<&Arc<Database>, ToolError> {
        let requested = take_database(arguments)?;
        let mut catalogs: Vec<&str> = Vec::new();
        if let Some(arguments) = arguments.as_ref() {
            if let Some(Value::String(catalog)) = arguments.get("catalog") {
                catalogs.push(catalog);
            }
            for value in arguments.values() {
                if let Some(Value::String(catalog)) = value.get("catalog") {
                    catalogs.push(catalog);
                }
            }
        }
        catalogs.extend(requested.as_deref());
        catalogs.dedup();
        match catalogs.as_slice() {
            [] => self.databases.resolve(None),
            [one] => self.databases.resolve(Some(one)),
            several => Err(ToolError::invalid_input(format!(
                "the call names several databases ({}); one call works on one database",
                several.join(", ")
            ))
            .with_hint("make `database` and every `catalog` name the same database")),
        }
    }

    /// The tools as listed over `names` (empty: one database), each with the `database`
    /// argument.
    pub(crate) fn listed_tools(read_only: bool, names: &[String]) -> Vec<ToolSpec> {
        let mut tools = DataServer::declared_tools(read_only);
        for tool in &mut tools {
            with_database_parameter(tool, names);
        }
        tools
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
        mut arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let database = self.database_for(&mut arguments)?;
        context.chose_database(&database.name);
        let server = self.on(database);
        match tool {
            name if query::NAMES.contains(&name) => {
                query::call(&server, name, arguments, context).await
            }
            name if metadata::NAMES.contains(&name) => {
                metadata::call(&server, name, arguments, context).await
            }
            name if profile::NAMES.contains(&name) => {
                profile::call(&server, name, arguments, context).await
            }
            name if materialize::NAMES.contains(&name) => {
                database.check_writable()?;
                materialize::call(&server, name, arguments, context).await
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

    /// Read a `res://` resource; `None` when the URI is not one of this server's. A URI that
    /// names a catalog is read on that database.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        context: &CallContext,
    ) -> Option<Result<Value, ToolError>> {
        let catalog = resources::catalog_of(uri)?;
        let server = match catalog {
            None => self.clone(),
            Some(catalog) => match self.databases.resolve(Some(&catalog)) {
                Ok(database) => {
                    context.chose_database(&database.name);
                    self.on(database)
                }
                Err(error) => return Some(Err(error)),
            },
        };
        resources::read(&server, uri, context).await
    }
}
