//! The internal MCP servers. Each declares its tools (name, description, input schema, the verb
//! the caller needs) and answers calls with a domain result or a domain error; the gateway owns
//! everything that touches the wire.
//!
//! # Design notes
//!
//! The internal MCP servers, each a variant of the closed enum `registry::InternalServer`.
//!
//! A server declares `ToolSpec`s (rmcp `Tool` with a schemars input schema, plus the verb it needs)
//! and answers `call(tool, arguments, context)` with `Result<ToolOutput, ToolError>`.
//!
//! Servers never import each other. `servers/sql_common/` holds what the two SQL servers share:
//! `Target` (a database's pool, the label tokens are bound to, `catalog@host:port/database`, and
//! the result source), the `SchemaCache` (named after its catalog, showing only the configured
//! schemas), `tabular_result`/`tabular_encoded` (a read as the TabularResult of the data-provider
//! specification), `sql_error` (the mapping of `sql::Error` to the taxonomy), the `database`
//! parameter added to each SQL tool's schema and taken out of its arguments, and `databases.rs`:
//! `Database` (name, description, `Target`, read-only, limits, schema cache, context store, and a
//! watch of its `Health`: `connecting`, `running` or `unreachable: <why>` with a reason that names
//! no host or password, its version and the `Features` tried when first reached) and `Databases`,
//! the set in configuration order (`resolve` a name or the only one; `probe_all` at start,
//! `monitor` every 10 s; `summaries` for `list_servers`, whose directory entry holds the set and
//! renders it live).
//!
//! Each SQL server holds the set and, per call, a copy of itself bound to the chosen database
//! (`on`): its pool, limits, schema cache and (for `postgres`) context store, so the tools
//! themselves are unchanged; `CallContext::chose_database` records the choice for tracking.
//! `postgres/choose.rs` is `generate_sql`'s choice without `database`: one BM25 index over every
//! database's tables (name, columns, comments) and one text per database (name, description), a
//! database's score its description's plus its three best tables', close within 20% (ask), or a
//! question whose named tables no one database holds together (refuse).

pub(crate) mod data;
pub(crate) mod metabase;
pub(crate) mod orca;
pub(crate) mod postgres;
pub(crate) mod sql_common;
pub(crate) mod weaviate;

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::config::Principal;
use crate::tool::{ToolError, Verb, parse_arguments};

/// How a server that depends on a remote service shows in `list_servers`: its status (`running`,
/// or why it cannot serve) and, once known, a description naming what it is connected to and
/// the service's version. The
/// server publishes it on a watch channel; the registry copies it into the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Presence {
    pub(crate) status: String,
    pub(crate) description: Option<String>,
    /// The service's version, once known.
    pub(crate) version: Option<String>,
}

/// Decodes a tool's arguments into its parameter type, keeping only whether that worked.
pub(crate) type DecodeArguments = fn(Option<Map<String, Value>>) -> Result<(), ToolError>;

/// A tool as its server declares it.
#[derive(Debug, Clone)]
pub(crate) struct ToolSpec {
    pub(crate) tool: Tool,
    /// What the caller must be allowed to do; checked by the gateway before dispatch.
    pub(crate) verb: Verb,
    /// Decodes arguments into the declared parameter type as the tool's call does (the fuzz
    /// target of arguments checks it against the published schema).
    pub(crate) decode: DecodeArguments,
}

impl ToolSpec {
    /// A tool whose arguments are the JSON form of `P`.
    pub(crate) fn new<P: JsonSchema + DeserializeOwned + 'static>(
        name: &'static str,
        description: &'static str,
        verb: Verb,
        annotations: ToolAnnotations,
    ) -> ToolSpec {
        let schema = rmcp::handler::server::common::schema_for_type::<P>();
        let tool = Tool::new(name, description, Arc::clone(&schema)).annotate(annotations);
        ToolSpec { tool, verb, decode: |arguments| parse_arguments::<P>(arguments).map(|_| ()) }
    }

    pub(crate) fn name(&self) -> &str {
        &self.tool.name
    }
}

/// Every internal tool as declared with writes allowed, without building the servers.
pub(crate) fn declared_tools() -> Vec<ToolSpec> {
    let mut tools = orca::OrcaServer::declared_tools();
    tools.extend(postgres::PostgresServer::declared_tools(false));
    tools.extend(data::DataServer::declared_tools(false));
    tools.extend(metabase::MetabaseServer::declared_tools(false));
    tools.extend(weaviate::WeaviateServer::declared_tools(false));
    tools
}

/// Each internal server's tools as `tools/list` shows them with writes allowed and one database
/// served (the SQL tools with their optional `database` argument), without building the servers:
/// what the tool reference (`orca config reference`) is written from.
pub(crate) fn listed_tools() -> Vec<(crate::config::ServerKind, Vec<ToolSpec>)> {
    use crate::config::ServerKind;
    ServerKind::ALL
        .into_iter()
        .map(|kind| {
            let tools = match kind {
                ServerKind::Orca => orca::OrcaServer::declared_tools(),
                ServerKind::Postgres => postgres::PostgresServer::listed_tools(false, &[]),
                ServerKind::Data => data::DataServer::listed_tools(false, &[]),
                ServerKind::Metabase => metabase::MetabaseServer::declared_tools(false),
                ServerKind::Weaviate => weaviate::WeaviateServer::declared_tools(false),
            };
            (kind, tools)
        })
        .collect()
}

/// What a tool may know about the call it serves.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    pub(crate) principal: Principal,
    /// The database the call worked on, once an SQL tool chose it (for tracking).
    database: Arc<std::sync::OnceLock<String>>,
    /// The calling client as a model to ask (`llm_provider: client`), when the gateway can
    /// reach it during the call.
    pub(crate) client_model: Option<Arc<dyn crate::llm::ClientModel>>,
}

impl CallContext {
    pub(crate) fn new(principal: Principal) -> CallContext {
        CallContext { principal, database: Arc::default(), client_model: None }
    }

    /// The context of a call whose client can be asked for its model's answers.
    pub(crate) fn with_client_model(
        mut self,
        client_model: Option<Arc<dyn crate::llm::ClientModel>>,
    ) -> CallContext {
        self.client_model = client_model;
        self
    }

    /// Note the database the call works on (the first choice holds).
    pub(crate) fn chose_database(&self, name: &str) {
        let _ = self.database.set(name.to_owned());
    }

    /// The database the call worked on, if it chose one.
    pub(crate) fn database(&self) -> Option<String> {
        self.database.get().cloned()
    }
}
