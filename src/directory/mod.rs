//! The directory of servers: one entry per server behind the gateway, internal and external, as
//! `list_servers` reports it. The registry writes the internal servers' entries, `external` the
//! upstreams' entries, and the `orca` server reads them; it sits below all three so that none of
//! them reaches another through it (the upstream wrapper imports no built-in server).

use std::fmt::Debug;
use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde_json::Value;

/// One server as `list_servers` reports it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ServerSummary {
    pub(crate) name: String,
    /// `internal` or `external`.
    pub(crate) kind: &'static str,
    /// `running`, `disabled`, or a reason it is not serving.
    pub(crate) status: String,
    /// The server's version: orca's own for internal servers, the service's or the upstream's
    /// for the others; `None` (`null`) while unknown.
    pub(crate) version: Option<String>,
    pub(crate) description: String,
    pub(crate) tool_count: usize,
    pub(crate) tools: Vec<String>,
    pub(crate) capabilities: ServerCapabilitiesSummary,
    /// External servers only: endpoint, transport, prefix, restarts, the upstream's own name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) external: Option<Value>,
    /// The SQL servers only: each target database with its health as it is when listed.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "live_summaries")]
    pub(crate) databases: Option<Arc<dyn LiveSummaries>>,
}

/// What an entry shows that changes while the entry stays (a database's health): read each time
/// the entry is listed. The SQL servers' set of databases implements it.
pub(crate) trait LiveSummaries: Debug + Send + Sync {
    /// Each item as it is now.
    fn summaries(&self) -> Vec<Value>;
}

/// The live part as it is now.
fn live_summaries<S: serde::Serializer>(
    live: &Option<Arc<dyn LiveSummaries>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    live.as_ref().map(|live| live.summaries()).serialize(serializer)
}

/// Which MCP capabilities a server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct ServerCapabilitiesSummary {
    pub(crate) tools: bool,
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

/// The registry's current view of every server, shared with `list_servers`.
pub(crate) type Directory = Arc<RwLock<Vec<ServerSummary>>>;
