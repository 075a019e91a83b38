//! The registry: the closed list of internal servers, which of them are enabled, the index from
//! tool name to owner, and dispatch. Two servers declaring the same tool name stop start-up with
//! both owners named.
//!
//! # Design notes
//!
//! Builds the enabled internal servers, indexes tool name → owner, refuses a tool name declared
//! twice (naming both owners), dispatches calls, and publishes the `Directory` of server summaries
//! that `list_servers` reads.
//!
//! Servers that depend on a remote service (`metabase`, `weaviate`) publish a `servers::Presence`
//! (status and, once known, a description) on a watch channel; `Registry::connect` follows each one
//! and is the only writer of their directory entries, so no server touches another's state;
//! `follow` writes the current presence before it returns, and `connect` waits (at most 5 s) for
//! Weaviate's first probe (`WeaviateServer::probed`), so the first `list_servers` has its version.
//!
//! `Registry::route` finds an internal tool, or else an external one (`Route::External`), by
//! exposed name.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use sqlx::PgPool;

use crate::config::ServerKind;
use crate::directory::{Directory, ServerCapabilitiesSummary, ServerSummary};
use crate::external::{ExternalServers, RoutedTool};
use crate::servers::data::DataServer;
use crate::servers::metabase::MetabaseServer;
use crate::servers::orca::OrcaServer;
use crate::servers::postgres::PostgresServer;
use crate::servers::sql_common::Databases;
use crate::servers::weaviate::WeaviateServer;
use crate::servers::{CallContext, Presence, ToolSpec};
use crate::sql::Secret;
use crate::tool::{ToolError, ToolOutput};
use crate::tracking::Tracker;
use tokio::sync::watch;

/// One internal server, as a closed enum: dispatch is a match, not a trait object.
#[derive(Debug, Clone)]
pub(crate) enum InternalServer {
    Orca(OrcaServer),
    Postgres(PostgresServer),
    Data(DataServer),
    Metabase(MetabaseServer),
    Weaviate(WeaviateServer),
}

impl InternalServer {
    fn kind(&self) -> ServerKind {
        match self {
            InternalServer::Orca(_) => ServerKind::Orca,
            InternalServer::Postgres(_) => ServerKind::Postgres,
            InternalServer::Data(_) => ServerKind::Data,
            InternalServer::Metabase(_) => ServerKind::Metabase,
            InternalServer::Weaviate(_) => ServerKind::Weaviate,
        }
    }

    fn description(&self) -> &'static str {
        match self {
            InternalServer::Orca(_) => OrcaServer::DESCRIPTION,
            InternalServer::Postgres(_) => PostgresServer::DESCRIPTION,
            InternalServer::Data(_) => DataServer::DESCRIPTION,
            InternalServer::Metabase(_) => MetabaseServer::DESCRIPTION,
            InternalServer::Weaviate(_) => WeaviateServer::DESCRIPTION,
        }
    }

    fn tools(&self) -> &[ToolSpec] {
        match self {
            InternalServer::Orca(server) => server.tools(),
            InternalServer::Postgres(server) => server.tools(),
            InternalServer::Data(server) => server.tools(),
            InternalServer::Metabase(server) => server.tools(),
            InternalServer::Weaviate(server) => server.tools(),
        }
    }

    async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        // Each server's call is a future of its own on the heap: the gateway's future (and the
        // stack an unoptimized build copies it through) holds a pointer, not the largest of them.
        match self {
            InternalServer::Orca(server) => Box::pin(server.call(tool, arguments, context)).await,
            InternalServer::Postgres(server) => {
                Box::pin(server.call(tool, arguments, context)).await
            }
            InternalServer::Data(server) => Box::pin(server.call(tool, arguments, context)).await,
            InternalServer::Metabase(server) => {
                Box::pin(server.call(tool, arguments, context)).await
            }
            InternalServer::Weaviate(server) => {
                Box::pin(server.call(tool, arguments, context)).await
            }
        }
    }

    /// `running`, or why the server cannot serve (a failed Metabase login, Weaviate down).
    fn status(&self) -> String {
        match self {
            InternalServer::Metabase(server) => server.status().text(),
            InternalServer::Weaviate(server) => server.presence().borrow().status.clone(),
            _ => "running".to_owned(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum RegistryError {
    #[error("tool `{tool}` is declared by both `{first}` and `{second}`; disable one of them")]
    ToolCollision { tool: String, first: String, second: String },
    #[error("no server is enabled; enable at least one of: {known}")]
    NothingEnabled { known: String },
    #[error(
        "servers `postgres` and `data` need a target database: set DATABASE_URL or list `databases` in orca.yaml"
    )]
    NoTargetDatabase,
    #[error("server `metabase` needs METABASE_URL and its credentials")]
    NoMetabaseUrl,
    #[error("server `weaviate` needs a Weaviate endpoint: set WEAVIATE_URL")]
    NoWeaviateUrl,
}

/// What the internal servers need from the rest of orca.
#[derive(Debug, Clone)]
pub(crate) struct ServerDependencies {
    pub(crate) state_pool: PgPool,
    pub(crate) tracker: Tracker,
    /// The databases of the SQL tools; without any, `postgres` and `data` are left out unless
    /// asked for.
    pub(crate) databases: Databases,
    pub(crate) secret: Secret,
    pub(crate) read_only: bool,
    /// What `list_servers` reports; shared with the external servers, which keep their entries
    /// current.
    pub(crate) directory: Directory,
    /// Limits of the `data` server's metadata and profiling tools.
    pub(crate) data: crate::config::DataConfig,
    /// Masking policies by id: column name -> rule.
    pub(crate) masking: std::collections::BTreeMap<
        String,
        std::collections::BTreeMap<String, crate::privacy::mask::MaskRule>,
    >,
    /// Model providers and the context file, for the tools that ask a model.
    pub(crate) intelligence: crate::servers::postgres::Intelligence,
    /// The `metabase` server's settings; without them it is left out unless asked for.
    pub(crate) metabase: Option<crate::config::MetabaseConfig>,
    /// The Weaviate endpoint; without it `weaviate` is left out unless asked for.
    pub(crate) weaviate: Option<crate::config::WeaviateConfig>,
}

/// An internal tool found by name: its owner and its declaration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResolvedTool<'a> {
    pub(crate) server: &'static str,
    pub(crate) spec: &'a ToolSpec,
    index: (usize, usize),
}

/// Who answers a tool name.
#[derive(Debug, Clone)]
pub(crate) enum Route<'a> {
    Internal(ResolvedTool<'a>),
    External(RoutedTool),
}

impl Route<'_> {
    pub(crate) fn verb(&self) -> crate::tool::Verb {
        match self {
            Route::Internal(tool) => tool.spec.verb,
            Route::External(tool) => tool.verb(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Registry {
    servers: Vec<InternalServer>,
    /// Tool name -> (server index, tool index).
    index: HashMap<String, (usize, usize)>,
    external: Option<Arc<ExternalServers>>,
    /// What `list_servers` reads; a server whose status changes updates its entry.
    directory: Directory,
}

impl Registry {
    /// Build the enabled servers (`enabled`: `None` means every internal server).
    ///
    /// # Errors
    ///
    /// When two servers declare the same tool, or nothing is enabled.
    pub(crate) fn build(
        enabled: Option<&[ServerKind]>,
        dependencies: ServerDependencies,
    ) -> Result<Registry, RegistryError> {
        let explicit = enabled.is_some();
        let mut enabled: Vec<ServerKind> =
            enabled.map_or_else(|| ServerKind::ALL.to_vec(), <[ServerKind]>::to_vec);
        let needs_target =
            |kind: &ServerKind| matches!(kind, ServerKind::Postgres | ServerKind::Data);
        if dependencies.databases.is_empty() && enabled.iter().any(needs_target) {
            if explicit {
                return Err(RegistryError::NoTargetDatabase);
            }
            enabled.retain(|kind| !needs_target(kind));
        }
        if dependencies.metabase.is_none() && enabled.contains(&ServerKind::Metabase) {
            if explicit {
                return Err(RegistryError::NoMetabaseUrl);
            }
            enabled.retain(|kind| *kind != ServerKind::Metabase);
        }
        if dependencies.weaviate.is_none() && enabled.contains(&ServerKind::Weaviate) {
            if explicit {
                return Err(RegistryError::NoWeaviateUrl);
            }
            enabled.retain(|kind| *kind != ServerKind::Weaviate);
        }
        if enabled.is_empty() {
            return Err(RegistryError::NothingEnabled {
                known: ServerKind::ALL.map(ServerKind::name).join(", "),
            });
        }
        let directory = dependencies.directory.clone();
        let servers: Vec<InternalServer> = enabled
            .iter()
            .map(|kind| match kind {
                ServerKind::Orca => InternalServer::Orca(OrcaServer::new(
                    directory.clone(),
                    dependencies.state_pool.clone(),
                    dependencies.tracker.clone(),
                )),
                ServerKind::Data => InternalServer::Data(DataServer::new(
                    dependencies.databases.clone(),
                    dependencies.secret.clone(),
                    crate::servers::data::DataSettings {
                        data: dependencies.data.clone(),
                        masking: dependencies.masking.clone(),
                        read_only: dependencies.read_only,
                    },
                )),
                ServerKind::Postgres => InternalServer::Postgres(PostgresServer::new(
                    dependencies.databases.clone(),
                    dependencies.state_pool.clone(),
                    dependencies.secret.clone(),
                    dependencies.intelligence.clone(),
                )),
                ServerKind::Metabase => InternalServer::Metabase(MetabaseServer::new(
                    dependencies.metabase.as_ref().expect("checked above"),
                    dependencies.read_only,
                )),
                ServerKind::Weaviate => InternalServer::Weaviate(WeaviateServer::new(
                    dependencies.weaviate.clone().expect("checked above"),
                    dependencies.read_only,
                )),
            })
            .collect();
        let declared: Vec<(&str, Vec<&str>)> = servers
            .iter()
            .map(|server| {
                (server.kind().name(), server.tools().iter().map(ToolSpec::name).collect())
            })
            .collect();
        let index = index_tools(&declared)?;
        let summaries: Vec<ServerSummary> = ServerKind::ALL
            .iter()
            .map(|kind| match servers.iter().find(|server| server.kind() == *kind) {
                Some(server) => ServerSummary {
                    name: kind.name().to_owned(),
                    kind: "internal",
                    status: server.status(),
                    // Servers in front of a remote service publish its version once known.
                    version: match kind {
                        ServerKind::Metabase | ServerKind::Weaviate => None,
                        _ => Some(env!("CARGO_PKG_VERSION").to_owned()),
                    },
                    description: server.description().to_owned(),
                    tool_count: server.tools().len(),
                    tools: server.tools().iter().map(|tool| tool.name().to_owned()).collect(),
                    capabilities: ServerCapabilitiesSummary {
                        tools: true,
                        resources: matches!(kind, ServerKind::Data | ServerKind::Metabase),
                        prompts: *kind == ServerKind::Data,
                    },
                    external: None,
                    databases: matches!(kind, ServerKind::Postgres | ServerKind::Data).then(|| {
                        Arc::new(dependencies.databases.clone())
                            as Arc<dyn crate::directory::LiveSummaries>
                    }),
                },
                None => ServerSummary {
                    name: kind.name().to_owned(),
                    kind: "internal",
                    status: "disabled".to_owned(),
                    version: None,
                    description: String::new(),
                    tool_count: 0,
                    tools: Vec::new(),
                    capabilities: ServerCapabilitiesSummary {
                        tools: false,
                        resources: false,
                        prompts: false,
                    },
                    external: None,
                    databases: None,
                },
            })
            .collect();
        {
            // External servers publish their own entries, after the internal ones.
            let mut shared = directory.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            shared.retain(|summary| summary.kind == "external");
            shared.splice(0..0, summaries);
        }
        Ok(Registry { servers, index, external: None, directory })
    }

    /// Sign the servers that talk to a remote service in (Metabase), or wait for their first
    /// probe (Weaviate's readiness and version), each for at most 5 s, and keep their entries in
    /// the directory current. A failure does not stop orca: the entry says why.
    pub(crate) async fn connect(&self) {
        for server in &self.servers {
            let name = server.kind().name();
            match server {
                InternalServer::Metabase(metabase) => {
                    let versions = metabase.clone();
                    follow(self.directory.clone(), name, metabase.subscribe(), move |status| {
                        Presence {
                            status: status.text(),
                            description: None,
                            version: versions.known_version(),
                        }
                    });
                    // Start-up waits a few seconds at most for a slow instance; the login goes
                    // on in the background and its outcome reaches the directory.
                    let connecting = tokio::spawn({
                        let metabase = metabase.clone();
                        async move { metabase.connect().await }
                    });
                    let _ =
                        tokio::time::timeout(std::time::Duration::from_secs(5), connecting).await;
                }
                InternalServer::Weaviate(weaviate) => {
                    // The probe started with the server; a session that lists the servers first
                    // thing sees what `/v1/meta` said, unless Weaviate takes more than 5 s.
                    let _ =
                        tokio::time::timeout(std::time::Duration::from_secs(5), weaviate.probed())
                            .await;
                    follow(self.directory.clone(), name, weaviate.presence(), Presence::clone);
                }
                InternalServer::Orca(_) | InternalServer::Postgres(_) | InternalServer::Data(_) => {
                }
            }
        }
    }

    /// Each internal server's status: `running`, or why it cannot serve.
    /// Each target database's name and status, for `/healthz`.
    pub(crate) fn database_statuses(&self) -> Map<String, Value> {
        let databases = self.servers.iter().find_map(|server| match server {
            InternalServer::Postgres(server) => Some(server.databases()),
            InternalServer::Data(server) => Some(server.databases()),
            _ => None,
        });
        databases
            .into_iter()
            .flat_map(|databases| databases.iter())
            .map(|database| (database.name.clone(), Value::from(database.health().status)))
            .collect()
    }

    pub(crate) fn server_statuses(&self) -> Map<String, Value> {
        self.servers
            .iter()
            .map(|server| (server.kind().name().to_owned(), Value::from(server.status())))
            .collect()
    }

    fn metabase_server(&self) -> Option<&MetabaseServer> {
        self.servers.iter().find_map(|server| match server {
            InternalServer::Metabase(server) => Some(server),
            _ => None,
        })
    }

    /// Whether an internal server offers resources (`data`, `metabase`).
    pub(crate) fn has_resources(&self) -> bool {
        self.data_server().is_some() || self.metabase_server().is_some()
    }

    /// The internal server that answers this resource URI, if one does.
    pub(crate) fn resource_server(&self, uri: &str) -> Option<&'static str> {
        if MetabaseServer::owns_resource(uri) {
            Some(ServerKind::Metabase.name())
        } else if uri.starts_with("res://") {
            Some(ServerKind::Data.name())
        } else {
            None
        }
    }

    /// Whether an internal server offers prompts and resources (the `data` server does).
    pub(crate) fn has_prompts(&self) -> bool {
        self.data_server().is_some()
    }

    /// The internal servers' prompts.
    pub(crate) fn prompts(&self) -> Vec<rmcp::model::Prompt> {
        if self.has_prompts() { crate::servers::data::prompts::list() } else { Vec::new() }
    }

    /// An internal prompt, filled; `None` when no internal server has it.
    pub(crate) fn get_prompt(
        &self,
        name: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Option<Result<rmcp::model::GetPromptResult, String>> {
        if !self.has_prompts() {
            return None;
        }
        crate::servers::data::prompts::get(name, arguments)
    }

    fn data_server(&self) -> Option<&crate::servers::data::DataServer> {
        self.servers.iter().find_map(|server| match server {
            InternalServer::Data(server) => Some(server),
            _ => None,
        })
    }

    /// The internal servers' fixed resources and resource templates.
    pub(crate) fn resources(
        &self,
    ) -> (Vec<rmcp::model::Resource>, Vec<rmcp::model::ResourceTemplate>) {
        let (resources, mut templates) = match self.data_server() {
            Some(_) => (
                crate::servers::data::resources::list(),
                crate::servers::data::resources::templates(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        if self.metabase_server().is_some() {
            templates.extend(MetabaseServer::resource_templates());
        }
        (resources, templates)
    }

    /// Read an internal resource as JSON; `None` when no internal server has it.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        context: &CallContext,
    ) -> Option<Result<Value, ToolError>> {
        if MetabaseServer::owns_resource(uri) {
            return self.metabase_server()?.read_resource(uri).await;
        }
        self.data_server()?.read_resource(uri, context).await
    }

    /// Put the external servers behind this registry.
    pub(crate) fn with_external(mut self, external: Arc<ExternalServers>) -> Registry {
        self.external = Some(external);
        self
    }

    pub(crate) fn external(&self) -> Option<&Arc<ExternalServers>> {
        self.external.as_ref()
    }

    /// The names of every internal tool (external tools may not take them).
    pub(crate) fn internal_tool_names(&self) -> std::collections::HashSet<String> {
        self.tools().map(|tool| tool.spec.name().to_owned()).collect()
    }

    /// An internal tool, or else an external one, by its exposed name.
    pub(crate) fn route(&self, name: &str) -> Option<Route<'_>> {
        if let Some(tool) = self.resolve(name) {
            return Some(Route::Internal(tool));
        }
        self.external.as_ref()?.resolve_or_held(name).map(Route::External)
    }

    /// Names of the servers that are serving.
    pub(crate) fn server_names(&self) -> Vec<&'static str> {
        self.servers.iter().map(|server| server.kind().name()).collect()
    }

    /// Every tool with its owner, in server order.
    pub(crate) fn tools(&self) -> impl Iterator<Item = ResolvedTool<'_>> {
        self.servers.iter().enumerate().flat_map(|(server_index, server)| {
            server.tools().iter().enumerate().map(move |(tool_index, spec)| ResolvedTool {
                server: server.kind().name(),
                spec,
                index: (server_index, tool_index),
            })
        })
    }

    pub(crate) fn resolve(&self, name: &str) -> Option<ResolvedTool<'_>> {
        let &(server_index, tool_index) = self.index.get(name)?;
        let server = &self.servers[server_index];
        Some(ResolvedTool {
            server: server.kind().name(),
            spec: &server.tools()[tool_index],
            index: (server_index, tool_index),
        })
    }

    pub(crate) async fn call(
        &self,
        tool: ResolvedTool<'_>,
        arguments: Option<Map<String, Value>>,
        context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let server = &self.servers[tool.index.0];
        server.call(tool.spec.name(), arguments, context).await
    }
}

/// Copy a server's presence into its `list_servers` entry now, and every change of it after,
/// until the server is gone.
fn follow<T: Send + Sync + 'static>(
    directory: Directory,
    name: &'static str,
    mut changes: watch::Receiver<T>,
    show: impl Fn(&T) -> Presence + Send + 'static,
) {
    // Before the caller goes on (and serves a first `list_servers`), not on a task of its own.
    show_presence(&directory, name, show(&changes.borrow_and_update()));
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let presence = show(&changes.borrow_and_update());
            show_presence(&directory, name, presence);
        }
    });
}

/// Write one presence into the internal server `name`'s entry.
fn show_presence(directory: &Directory, name: &str, presence: Presence) {
    let mut shared = directory.write().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(entry) =
        shared.iter_mut().find(|entry| entry.kind == "internal" && entry.name == name)
    {
        entry.status = presence.status;
        if let Some(description) = presence.description {
            entry.description = description;
        }
        if presence.version.is_some() {
            entry.version = presence.version;
        }
    }
}

/// Map each tool name to its owner, refusing a name declared twice.
fn index_tools(
    declared: &[(&str, Vec<&str>)],
) -> Result<HashMap<String, (usize, usize)>, RegistryError> {
    let mut index: HashMap<String, (usize, usize)> = HashMap::new();
    for (server_index, (server, tools)) in declared.iter().enumerate() {
        for (tool_index, tool) in tools.iter().enumerate() {
            if let Some(&(other, _)) = index.get(*tool) {
                return Err(RegistryError::ToolCollision {
                    tool: (*tool).to_owned(),
                    first: declared[other].0.to_owned(),
                    second: (*server).to_owned(),
                });
            }
            index.insert((*tool).to_owned(), (server_index, tool_index));
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_declared_twice_names_both_owners() {
        let declared =
            vec![("orca", vec!["list_servers", "x"]), ("postgres", vec!["execute_sql", "x"])];
        assert_eq!(
            index_tools(&declared),
            Err(RegistryError::ToolCollision {
                tool: "x".into(),
                first: "orca".into(),
                second: "postgres".into()
            })
        );
        let message = index_tools(&declared).unwrap_err().to_string();
        assert!(message.contains("`orca`") && message.contains("`postgres`"), "{message}");
    }

    #[test]
    fn distinct_tool_names_are_indexed_by_owner() {
        let declared = vec![("a", vec!["one", "two"]), ("b", vec!["three"])];
        let index = index_tools(&declared).unwrap();
        assert_eq!(index["three"], (1, 0));
        assert_eq!(index["two"], (0, 1));
    }
}
