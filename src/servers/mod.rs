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
/// or why it cannot serve) and, once known, a description naming what it is connected to. The
/// server publishes it on a watch channel; the registry copies it into the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Presence {
    pub(crate) status: String,
    pub(crate) description: Option<String>,
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
    /// A way to ask the person at the client, when the client supports MCP elicitation.
    pub(crate) elicitor: Option<Elicitor>,
}

/// Asks the person behind an MCP client a yes/no question through elicitation.
#[derive(Debug, Clone)]
pub(crate) struct Elicitor {
    peer: rmcp::Peer<rmcp::RoleServer>,
}

/// The form an approval question asks for.
#[derive(Debug, serde::Serialize, serde::Deserialize, JsonSchema)]
struct Approval {
    /// Whether to approve.
    approve: bool,
}

rmcp::elicit_safe!(Approval);

impl Elicitor {
    /// An elicitor for this peer, if its client declared the elicitation capability.
    pub(crate) fn for_peer(peer: &rmcp::Peer<rmcp::RoleServer>) -> Option<Elicitor> {
        let info = peer.peer_info()?;
        info.capabilities.elicitation.as_ref()?;
        Some(Elicitor { peer: peer.clone() })
    }

    /// Ask `question`; true only for an explicit approval within five minutes.
    pub(crate) async fn confirm(&self, question: &str) -> bool {
        let answer = self
            .peer
            .elicit_with_timeout::<Approval>(question, Some(std::time::Duration::from_secs(300)))
            .await;
        matches!(answer, Ok(Some(Approval { approve: true })))
    }
}
