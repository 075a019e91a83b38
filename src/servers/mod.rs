//! The internal MCP servers. Each declares its tools (name, description, input schema, the verb
//! the caller needs) and answers calls with a domain result or a domain error; the gateway owns
//! everything that touches the wire.

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

/// What a tool may know about the call it serves.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    pub(crate) principal: Principal,
    /// The database the call worked on, once an SQL tool chose it (for tracking).
    database: Arc<std::sync::OnceLock<String>>,
}

impl CallContext {
    pub(crate) fn new(principal: Principal) -> CallContext {
        CallContext { principal, database: Arc::default() }
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
