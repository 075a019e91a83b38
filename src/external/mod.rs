//! External MCP servers declared in `external-mcps.yaml`: started or connected to, namespaced,
//! supervised, and merged into one index of exposed tool names next to the internal servers'.
//! A change upstream (a restart, `list_changed`) rebuilds the index and, debounced, tells
//! orca's own clients that the lists changed. Each listing of tools is judged against the pinned
//! definitions (`pins.rs`): what changed, what was added after the first listing and what
//! reads as poisoned is held for a person under `pin: hold`, so it is neither listed, searched
//! nor called; a hold or an approval on any replica makes every replica list the server again.
//!
//! # Design notes
//!
//! External MCP servers from `external-mcps.yaml` (parsed and validated in `config/external.rs`,
//! credentials resolved there into `SecretString`s).
//!
//! An HTTP server with `oauth:` (`config::UpstreamOAuth`: `mode: service`, client credentials,
//! `shared`, one person's sign-in, or `per_user`, each orca user's own) is reached through
//! `client::auth::AuthorizedHttpClient` with an `Authorizer` (its identity bound to `oauth.issuer`
//! by `identity_of`, confined to the upstream's origin, the issuer's and `oauth.allowed_hosts` by
//! `confinement_of`, as console sign-ins and `orca login` are) whose store is `tokens.rs`'s
//! `TokenVault`: `orca.upstream_tokens` (migration `20261126300000_upstream_tokens`), each sign-in
//! sealed with AES-256-GCM (aws-lc-rs) under an HKDF-SHA256 key of the orca secret, the row's
//! upstream and subject as additional data; a shared upstream nobody signed in to (or whose refresh
//! token was refused) is `Status::NeedsSignIn` (`needs_sign_in` in `list_servers` and `/healthz`)
//! and looks for a sign-in every 10 s, or at once when one is made through the console.
//!
//! `mod.rs`: `ExternalServers`, the set: starts every enabled server, waits (bounded) for the first
//! attempts, refuses duplicate names at start-up, keeps the index of exposed names, updates the
//! `Directory`, and publishes debounced list changes that each gateway session forwards to its
//! client. `assign_names` rebuilds the index after a list change: a name stays with the server that
//! served it while that server lists it, the rest go in configuration order, and a newcomer that
//! collides is left out (a warning, and `left_out_tools` in its `list_servers` entry).

mod batched;
mod calls;
mod child;
mod connection;
mod exchange;
mod frame;
mod freshness;
mod handler;
mod heard;
mod lane;
mod logs;
mod names;
mod per_user;
mod pins;
mod reach;
mod sign_in;
mod sse;
mod subscriptions;
mod tokens;
mod traced;
mod upstream;

pub(crate) use pins::{
    ApproveError, Approver, Held, Pins, approve as approve_tools, held as held_tools,
};
pub(crate) use sign_in::{EXPIRY as SIGN_IN_EXPIRY, SignInError};
pub(crate) use tokens::TokenVault;
pub(crate) use upstream::{confinement_of, identity_of};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResult, CompleteRequestParams, CompleteResult, GetPromptResult, Prompt,
    ReadResourceResult, Reference, Resource, ResourceTemplate, Tool,
};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Availability, ExternalServerConfig};
use crate::directory::{Directory, ServerCapabilitiesSummary, ServerSummary};
use crate::tool::{ToolError, Verb};
pub(crate) use batched::{BatchedTransport, Outbox};
pub(crate) use calls::{Caller, LogFilter};
pub(crate) use exchange::Exchange;
#[cfg(test)]
pub(crate) use exchange::Kind;
pub(crate) use freshness::{CacheHint, ListKind};
pub(crate) use logs::{ExternalLog, severity};
pub(crate) use reach::{AnswerStream, Reach, Replies};
pub(crate) use subscriptions::{Subscriber, Target as SubscriptionTarget};
pub(crate) use upstream::Attempts;
use upstream::{Event, ExternalTool, HeldTool, Status, Upstream};

/// How long list changes are gathered before clients are told, so a burst is one notification.
const DEBOUNCE: Duration = Duration::from_millis(150);
/// How long start-up waits for external servers before serving without the slow ones.
const STARTUP_WAIT: Duration = Duration::from_secs(20);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum StartError {
    #[error(
        "tool `{tool}` is declared by both `{first}` and `{second}`; set a `prefix` or `exclude_tools` in external-mcps.yaml"
    )]
    ToolCollision { tool: String, first: String, second: String },
}

impl StartError {
    /// The server whose tool was left out.
    fn newcomer(&self) -> &str {
        match self {
            StartError::ToolCollision { second, .. } => second,
        }
    }
}

/// Exposed tool name -> (server, position in its catalog).
type Owners = HashMap<String, (usize, usize)>;

/// A name left out: the name, who has it (`None`: an internal tool), the server left without it.
type LeftOut = (String, Option<usize>, usize);

/// Who serves each exposed name: `names[server]` lists each server's exposed tool names in its
/// catalog's order. A name served in `previous` stays with its server while that server still
/// lists it; then every other name goes to the first server (in configuration order) listing
/// it, unless an internal tool has it. Returns the index and, for each name left out, the name,
/// who has it (`None`: an internal tool) and the server left without it.
fn assign_names(
    previous: &Owners,
    names: &[Vec<&str>],
    internal: &HashSet<String>,
) -> (Owners, Vec<LeftOut>) {
    let mut index = Owners::new();
    for (name, &(server, _)) in previous {
        let still_listed = names.get(server).and_then(|list| list.iter().position(|n| n == name));
        if let Some(position) = still_listed
            && !internal.contains(name)
        {
            index.insert(name.clone(), (server, position));
        }
    }
    let mut collisions = Vec::new();
    for (server, list) in names.iter().enumerate() {
        for (position, &name) in list.iter().enumerate() {
            let owner = if internal.contains(name) {
                Some(None)
            } else {
                index.get(name).map(|&owner| Some(owner))
            };
            match owner {
                None => {
                    index.insert(name.to_owned(), (server, position));
                }
                Some(Some(owner)) if owner == (server, position) => {}
                Some(owner) => {
                    collisions.push((name.to_owned(), owner.map(|(first, _)| first), server));
                }
            }
        }
    }
    (index, collisions)
}

/// Counters of list changes, one per list, that orca's client sessions watch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    pub(crate) tools: u64,
    pub(crate) prompts: u64,
    pub(crate) resources: u64,
}

/// A tool found by exposed name.
#[derive(Debug, Clone)]
pub(crate) struct RoutedTool {
    upstream: usize,
    server: Arc<str>,
    tool: Arc<ExternalTool>,
    /// Set for a tool held for a person's approval: a call to it is refused.
    held: Option<Arc<HeldTool>>,
}

impl RoutedTool {
    /// The server's key.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn verb(&self) -> Verb {
        self.tool.verb
    }

    pub(crate) fn upstream_name(&self) -> &str {
        &self.tool.upstream_name
    }

    pub(crate) fn name(&self) -> &str {
        &self.tool.tool.name
    }

    /// The tool as orca lists it (its exposed name, the server's schema).
    pub(crate) fn definition(&self) -> &Tool {
        &self.tool.tool
    }
}

#[derive(Debug, Default)]
struct Index {
    tools: Owners,
}

/// The name index and every server's catalog at one moment: what the exposed tools are made
/// of. Each is replaced, never changed in place, when a server's lists change, and the state
/// holds them, so two states are equal exactly when they are the same index and catalogs.
#[derive(Debug, Clone)]
pub(crate) struct ToolsState {
    index: Arc<Index>,
    catalogs: Vec<Arc<upstream::Catalog>>,
}

impl PartialEq for ToolsState {
    fn eq(&self, other: &ToolsState) -> bool {
        Arc::ptr_eq(&self.index, &other.index)
            && self.catalogs.len() == other.catalogs.len()
            && self.catalogs.iter().zip(&other.catalogs).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

#[derive(Debug)]
pub(crate) struct ExternalServers {
    upstreams: Vec<Arc<Upstream>>,
    index: RwLock<Arc<Index>>,
    /// Names of the internal servers' tools, which external tools may not take.
    internal_tools: HashSet<String>,
    changes: watch::Sender<Changes>,
    /// Log messages from every server, for the gateway's sessions.
    logs: broadcast::Sender<ExternalLog>,
    directory: Directory,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The sealed sign-ins, and those waiting for their browser (on any replica).
    vault: Option<TokenVault>,
}

impl ExternalServers {
    /// Start every enabled server, wait (bounded) for them to come up, and check that no two
    /// tools share an exposed name.
    ///
    /// # Errors
    ///
    /// A tool name taken twice among the servers that came up, naming both owners.
    pub(crate) async fn start(
        configs: &[ExternalServerConfig],
        internal_tools: HashSet<String>,
        directory: Directory,
        vault: Option<TokenVault>,
        public_url: Option<String>,
        pins: Option<Pins>,
    ) -> Result<Arc<ExternalServers>, StartError> {
        let (events_sender, events) = mpsc::unbounded_channel();
        let logs = broadcast::Sender::new(logs::LOG_BUFFER);
        let upstreams: Vec<Arc<Upstream>> = configs
            .iter()
            .enumerate()
            .map(|(index, config)| {
                let initial = match &config.availability {
                    Availability::Enabled => Status::Starting,
                    Availability::Disabled => {
                        Status::Disabled("disabled in external-mcps.yaml".to_owned())
                    }
                    Availability::MissingCredentials(names) => {
                        Status::Disabled(format!("missing credentials: {}", names.join(", ")))
                    }
                };
                Arc::new(
                    Upstream::new(
                        index,
                        Arc::new(config.clone()),
                        initial,
                        events_sender.clone(),
                        logs.clone(),
                        vault.clone(),
                        public_url.clone(),
                    )
                    .with_pins(pins.clone()),
                )
            })
            .collect();
        let set = Arc::new(ExternalServers {
            upstreams,
            index: RwLock::new(Arc::default()),
            internal_tools,
            changes: watch::Sender::new(Changes::default()),
            logs,
            directory,
            shutdown: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            vault,
        });
        let mut tasks = Vec::new();
        for upstream in &set.upstreams {
            if upstream.config.availability == Availability::Enabled {
                tasks.push(tokio::spawn(upstream.clone().supervise(set.shutdown.clone())));
            } else {
                tracing::info!(server = %upstream.config.key, status = %upstream.status().describe(), "external server not started");
            }
        }
        let deadline = set
            .upstreams
            .iter()
            .map(|upstream| upstream.config.timeout)
            .max()
            .unwrap_or_default()
            .min(STARTUP_WAIT);
        futures::future::join_all(
            set.upstreams.iter().map(|upstream| upstream.wait_first_attempt(deadline)),
        )
        .await;
        let (index, collisions) = set.build_index(&Index::default());
        if let Some(collision) = collisions.into_iter().next() {
            set.shutdown().await;
            drop(tasks);
            return Err(collision);
        }
        *set.index.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(index);
        set.publish_directory();
        tasks.push(tokio::spawn(set.clone().follow(events)));
        if let Some(pins) = &pins {
            // A hold or an approval made on any replica: list that server's tools again.
            let upstreams = set.upstreams.clone();
            tasks.push(tokio::spawn(pins::listen(pins.pool().clone(), move |server| {
                for upstream in &upstreams {
                    if server.is_none_or(|server| server == upstream.config.key) {
                        upstream.relist.notify_one();
                    }
                }
            })));
        }
        set.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).extend(tasks);
        Ok(set)
    }

    /// React to status and catalog changes until shutdown.
    async fn follow(self: Arc<Self>, mut events: mpsc::UnboundedReceiver<Event>) {
        let mut pending: Option<(Instant, Changes)> = None;
        let mut published = self.fingerprints();
        loop {
            let wait = pending.map_or(Duration::from_secs(3600), |(since, _)| {
                DEBOUNCE.saturating_sub(since.elapsed())
            });
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                event = events.recv() => {
                    let Some(event) = event else { return };
                    match event {
                        Event::Status => self.publish_directory(),
                        Event::Catalog => {
                            let previous = self.index.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
                            let (index, collisions) = self.build_index(&previous);
                            for collision in collisions {
                                tracing::warn!("{collision}; the tool of `{}` is left out", collision.newcomer());
                            }
                            *self.index.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(index);
                            self.publish_directory();
                            // A restart that lists the same things changes nothing for clients.
                            let now = self.fingerprints();
                            if now != published {
                                let (since, mut changes) = pending.unwrap_or((Instant::now(), *self.changes.borrow()));
                                changes.tools += u64::from(now[0] != published[0]);
                                changes.prompts += u64::from(now[1] != published[1]);
                                changes.resources += u64::from(now[2] != published[2]);
                                pending = Some((since, changes));
                                published = now;
                            }
                        }
                    }
                }
                () = tokio::time::sleep(wait), if pending.is_some() => {
                    if let Some((_, changes)) = pending.take() {
                        self.changes.send_replace(changes);
                    }
                }
            }
        }
    }

    /// Hashes of what clients see: the tools (with their verbs), the prompts, the resources.
    fn fingerprints(&self) -> [u64; 3] {
        fn hash(value: &impl serde::Serialize) -> u64 {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(value).unwrap_or_default().hash(&mut hasher);
            hasher.finish()
        }
        let tools: Vec<(Tool, &str)> =
            self.tools().into_iter().map(|(tool, verb, _)| (tool, verb.as_str())).collect();
        [hash(&tools), hash(&self.prompts()), hash(&(self.resources(), self.resource_templates()))]
    }

    /// Build the index of exposed tool names from the servers' current catalogs. A name keeps
    /// the server that serves it in `previous` for as long as that server lists it, so a
    /// server whose list changes never takes a name from another while it is served; the
    /// others are taken in configuration order. A name already taken (by an internal tool or
    /// another server) is left out and reported.
    fn build_index(&self, previous: &Index) -> (Index, Vec<StartError>) {
        let catalogs: Vec<Arc<upstream::Catalog>> =
            self.upstreams.iter().map(|upstream| upstream.catalog()).collect();
        let names: Vec<Vec<&str>> = catalogs
            .iter()
            .map(|catalog| catalog.tools.iter().map(|tool| tool.tool.name.as_ref()).collect())
            .collect();
        let (tools, collisions) = assign_names(&previous.tools, &names, &self.internal_tools);
        let collisions = collisions
            .into_iter()
            .map(|(tool, first, second)| StartError::ToolCollision {
                tool,
                first: first.map_or_else(
                    || "an internal server".to_owned(),
                    |server| self.upstreams[server].config.key.clone(),
                ),
                second: self.upstreams[second].config.key.clone(),
            })
            .collect();
        (Index { tools }, collisions)
    }

    fn publish_directory(&self) {
        let summaries: Vec<ServerSummary> =
            self.upstreams.iter().map(|upstream| self.summary(upstream)).collect();
        let mut directory = self.directory.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        directory.retain(|summary| summary.kind != "external");
        directory.extend(summaries);
    }

    fn summary(&self, upstream: &Upstream) -> ServerSummary {
        let catalog = upstream.catalog();
        let index = self.index.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let mut tools = Vec::new();
        let mut left_out = Vec::new();
        for (position, tool) in catalog.tools.iter().enumerate() {
            let name = tool.tool.name.to_string();
            match index.tools.get(&name) {
                Some(&owner) if owner == (upstream.index, position) => tools.push(name),
                Some(&(server, _)) if server != upstream.index => left_out.push(serde_json::json!({
                    "tool": name,
                    "taken_by": self.upstreams[server].config.key,
                })),
                Some(_) => left_out.push(serde_json::json!({ "tool": name, "taken_by": "a tool of the same name on this server" })),
                None => left_out.push(serde_json::json!({ "tool": name, "taken_by": "an internal server" })),
            }
        }
        let status = upstream.status();
        let capabilities = match &status {
            Status::Running(connection) => ServerCapabilitiesSummary {
                tools: connection.capabilities.tools.is_some(),
                resources: connection.capabilities.resources.is_some(),
                prompts: connection.capabilities.prompts.is_some(),
            },
            _ => ServerCapabilitiesSummary {
                tools: !catalog.tools.is_empty(),
                resources: !catalog.resources.is_empty() || !catalog.templates.is_empty(),
                prompts: !catalog.prompts.is_empty(),
            },
        };
        let config = &upstream.config;
        let upstream_name =
            catalog.server_info.as_ref().map(|info| format!("{} {}", info.name, info.version));
        ServerSummary {
            name: config.key.clone(),
            kind: "external",
            status: status.describe(),
            version: catalog
                .server_info
                .as_ref()
                .map(|info| info.version.clone())
                .filter(|version| !version.is_empty()),
            description: match upstream_name {
                Some(name) => format!(
                    "{} (Enhanced): {name} via {}",
                    config.display_name,
                    config.transport.name()
                ),
                None => {
                    format!("{} (Enhanced) via {}", config.display_name, config.transport.name())
                }
            },
            tool_count: tools.len(),
            tools,
            capabilities,
            external: Some(serde_json::json!({
                "orchestrator_enhancements": ["supervision", "retry_logic", "error_translation", "tracking", "namespacing"],
                "external_endpoint": config.endpoint,
                "transport": config.transport.name(),
                "prefix": config.prefix,
                "restarts": upstream.restarts.load(std::sync::atomic::Ordering::Relaxed),
                "declared_capabilities": config.capabilities,
                "upstream_server": catalog.server_info.as_ref().map(|info| serde_json::json!({"name": info.name, "version": info.version})),
                "left_out_tools": left_out,
                "pin": config.pin.as_str(),
                "held_tools": catalog.held.iter().map(|held| &held.notice).collect::<Vec<_>>(),
                "warned_tools": catalog.warned,
            })),
            databases: None,
        }
    }

    /// Every exposed tool with its verb and its server's key, in configuration order.
    pub(crate) fn tools(&self) -> Vec<(Tool, Verb, &str)> {
        self.tools_in(&self.tools_state())
    }

    /// What the exposed tools are made of now: a state that compares equal to a later one
    /// only when neither the name index nor any server's catalog was replaced in between.
    pub(crate) fn tools_state(&self) -> ToolsState {
        let index = self.index.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        ToolsState {
            index,
            catalogs: self.upstreams.iter().map(|upstream| upstream.catalog()).collect(),
        }
    }

    /// The exposed tools of `state` (one of this set's), as [`ExternalServers::tools`].
    pub(crate) fn tools_in(&self, state: &ToolsState) -> Vec<(Tool, Verb, &str)> {
        let mut out = Vec::new();
        for (upstream, catalog) in self.upstreams.iter().zip(&state.catalogs) {
            for (position, tool) in catalog.tools.iter().enumerate() {
                if state
                    .index
                    .tools
                    .get(tool.tool.name.as_ref())
                    .is_some_and(|&owner| owner == (upstream.index, position))
                {
                    out.push((tool.tool.clone(), tool.verb, upstream.config.key.as_str()));
                }
            }
        }
        out
    }

    /// The served tool of this exposed name.
    pub(crate) fn resolve(&self, name: &str) -> Option<RoutedTool> {
        let index = self.index.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let &(server, position) = index.tools.get(name)?;
        let tool = self.upstreams[server].catalog().tools.get(position)?.clone();
        (tool.tool.name == name).then(|| RoutedTool {
            upstream: server,
            server: Arc::from(self.upstreams[server].config.key.as_str()),
            tool,
            held: None,
        })
    }

    /// The served tool of this exposed name, or else a held one (whose calls are refused).
    pub(crate) fn resolve_or_held(&self, name: &str) -> Option<RoutedTool> {
        self.resolve(name).or_else(|| {
            self.upstreams.iter().find_map(|upstream| {
                let held = upstream
                    .catalog()
                    .held
                    .iter()
                    .find(|held| held.tool.tool.name == name)?
                    .clone();
                Some(RoutedTool {
                    upstream: upstream.index,
                    server: Arc::from(upstream.config.key.as_str()),
                    tool: held.tool.clone(),
                    held: Some(held),
                })
            })
        })
    }

    pub(crate) async fn call(
        &self,
        tool: &RoutedTool,
        arguments: Option<Map<String, Value>>,
        caller: Option<Caller>,
        user: &str,
    ) -> (Result<CallToolResult, ToolError>, Attempts) {
        if let Some(held) = &tool.held {
            return (Err(upstream::held_error(&tool.server, held)), Vec::new());
        }
        self.upstreams[tool.upstream]
            .call_tool(&tool.tool, arguments, caller.map(Arc::new), user)
            .await
    }

    pub(crate) fn prompts(&self) -> Vec<Prompt> {
        self.upstreams.iter().flat_map(|upstream| upstream.catalog().prompts.clone()).collect()
    }

    pub(crate) fn resources(&self) -> Vec<Resource> {
        self.upstreams.iter().flat_map(|upstream| upstream.catalog().resources.clone()).collect()
    }

    pub(crate) fn resource_templates(&self) -> Vec<ResourceTemplate> {
        self.upstreams.iter().flat_map(|upstream| upstream.catalog().templates.clone()).collect()
    }

    /// What the servers that have a part in a list of `kind` say of its freshness, taking
    /// only those `in_list` accepts (by key) and that have something in it.
    pub(crate) fn cache_hint(&self, kind: ListKind, in_list: impl Fn(&str) -> bool) -> CacheHint {
        let now = Instant::now();
        self.upstreams
            .iter()
            .filter(|upstream| in_list(&upstream.config.key))
            .map(|upstream| upstream.catalog())
            .filter(|catalog| match kind {
                ListKind::Tools => !catalog.tools.is_empty(),
                ListKind::Prompts => !catalog.prompts.is_empty(),
                ListKind::Resources => !catalog.resources.is_empty(),
                ListKind::Templates => !catalog.templates.is_empty(),
            })
            .fold(CacheHint::UNBOUNDED, |hint, catalog| {
                hint.and(catalog.freshness.of(kind).at(now))
            })
    }

    /// The key of the server whose exposed prompt this is, if any.
    pub(crate) fn prompt_server(&self, name: &str) -> Option<String> {
        self.upstreams
            .iter()
            .find(|upstream| upstream.catalog().prompt_names.contains_key(name))
            .map(|upstream| upstream.config.key.clone())
    }

    /// `None` when no server owns the name.
    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        caller: Option<Caller>,
    ) -> Option<Result<GetPromptResult, ToolError>> {
        for upstream in &self.upstreams {
            let upstream_name = upstream.catalog().prompt_names.get(name).cloned();
            if let Some(upstream_name) = upstream_name {
                let caller = caller.map(Arc::new);
                return Some(upstream.get_prompt(&upstream_name, arguments, caller).await);
            }
        }
        None
    }

    /// The key of the server whose resource URI this is, if any.
    pub(crate) fn resource_server(&self, uri: &str) -> Option<String> {
        let (upstream, _) = self.resource_owner(uri)?;
        Some(upstream.config.key.clone())
    }

    /// The server an exposed resource URI belongs to, and the URI in its own words: by the
    /// prefix in `orca://<prefix>/<uri>`, or else the server with the empty prefix, if any.
    fn resource_owner<'a>(
        &self,
        uri: &'a str,
    ) -> Option<(&Arc<Upstream>, std::borrow::Cow<'a, str>)> {
        let by_prefix =
            |prefix: &str| self.upstreams.iter().find(|upstream| upstream.config.prefix == prefix);
        match names::split_uri(uri).and_then(|(prefix, rest)| Some((by_prefix(prefix)?, rest))) {
            Some(found) => Some(found),
            None => Some((by_prefix("")?, uri.into())),
        }
    }

    /// `None` when the URI is not one of an external server's.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        caller: Option<Caller>,
    ) -> Option<Result<ReadResourceResult, ToolError>> {
        let (upstream, upstream_uri) = self.resource_owner(uri)?;
        Some(upstream.read_resource(&upstream_uri, caller.map(Arc::new)).await)
    }

    /// Subscribe a client session to an external resource; `None` when the URI is no
    /// external server's.
    pub(crate) async fn subscribe_resource(
        &self,
        uri: &str,
        session: u64,
        target: subscriptions::Target,
    ) -> Option<Result<(), ToolError>> {
        let (upstream, upstream_uri) = self.resource_owner(uri)?;
        let subscriber = Subscriber { session, target, exposed_uri: uri.to_owned() };
        Some(upstream.subscribe(&upstream_uri, subscriber).await)
    }

    /// `None` when the URI is no external server's.
    pub(crate) async fn unsubscribe_resource(
        &self,
        uri: &str,
        session: u64,
    ) -> Option<Result<(), ToolError>> {
        let (upstream, upstream_uri) = self.resource_owner(uri)?;
        Some(upstream.unsubscribe(&upstream_uri, session).await)
    }

    /// Completions for an argument of an external prompt or resource template, asked of the
    /// server that owns it; `None` when no external server owns the reference.
    pub(crate) async fn complete(
        &self,
        mut request: CompleteRequestParams,
    ) -> Option<Result<CompleteResult, ToolError>> {
        let upstream = match &mut request.r#ref {
            Reference::Prompt(prompt) => self.upstreams.iter().find_map(|upstream| {
                let upstream_name = upstream.catalog().prompt_names.get(&prompt.name).cloned()?;
                prompt.name = upstream_name;
                Some(upstream)
            })?,
            Reference::Resource(resource) => {
                let (upstream, upstream_uri) = self.resource_owner(&resource.uri)?;
                resource.uri = upstream_uri.into_owned();
                upstream
            }
            _ => return None,
        };
        Some(upstream.complete(request).await)
    }

    /// Every server's key and state (`running`, `restarting`, ...), for `/healthz`.
    pub(crate) fn states(&self) -> Vec<Value> {
        self.upstreams
            .iter()
            .map(|upstream| {
                serde_json::json!({
                    "name": upstream.config.key,
                    "state": upstream.status().state(),
                })
            })
            .collect()
    }

    /// Log messages from every server, from now on.
    pub(crate) fn subscribe_logs(&self) -> broadcast::Receiver<ExternalLog> {
        self.logs.subscribe()
    }

    /// The keys of the servers configured to run.
    pub(crate) fn enabled_names(&self) -> Vec<String> {
        self.upstreams
            .iter()
            .filter(|upstream| upstream.config.availability == Availability::Enabled)
            .map(|upstream| upstream.config.key.clone())
            .collect()
    }

    /// Whether any server is configured to run (then orca offers resources and prompts).
    pub(crate) fn any_enabled(&self) -> bool {
        self.upstreams.iter().any(|upstream| upstream.config.availability == Availability::Enabled)
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Changes> {
        self.changes.subscribe()
    }

    /// Prometheus lines: state and restarts per server.
    pub(crate) fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str("# HELP orca_external_server_up Whether the external server is connected (1) or not (0).\n# TYPE orca_external_server_up gauge\n");
        for upstream in &self.upstreams {
            let up = matches!(upstream.status(), Status::Running(_));
            let _ = writeln!(
                out,
                "orca_external_server_up{{server=\"{}\"}} {}",
                upstream.config.key,
                u8::from(up)
            );
        }
        out.push_str("# HELP orca_external_server_state The external server's state (1 for the current one).\n# TYPE orca_external_server_state gauge\n");
        for upstream in &self.upstreams {
            let current = upstream.status().state();
            for state in ["starting", "running", "restarting", "crash_loop", "disabled", "stopped"]
            {
                let _ = writeln!(
                    out,
                    "orca_external_server_state{{server=\"{}\",state=\"{state}\"}} {}",
                    upstream.config.key,
                    u8::from(state == current)
                );
            }
        }
        out.push_str("# HELP orca_external_server_restarts_total Connections of the external server that ended and were retried.\n# TYPE orca_external_server_restarts_total counter\n");
        for upstream in &self.upstreams {
            let _ = writeln!(
                out,
                "orca_external_server_restarts_total{{server=\"{}\"}} {}",
                upstream.config.key,
                upstream.restarts.load(std::sync::atomic::Ordering::Relaxed)
            );
        }
    }

    /// Stop every server: close their connections and kill their process groups.
    pub(crate) async fn shutdown(&self) {
        self.shutdown.cancel();
        let tasks: Vec<JoinHandle<()>> = std::mem::take(
            &mut *self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for task in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn previous(entries: &[(&str, usize, usize)]) -> HashMap<String, (usize, usize)> {
        entries
            .iter()
            .map(|&(name, server, position)| (name.to_owned(), (server, position)))
            .collect()
    }

    #[test]
    fn a_served_name_keeps_its_server_when_an_earlier_server_starts_listing_it() {
        let internal = HashSet::from(["list_servers".to_owned()]);
        // Server 1 served `p_x_y`; then server 0 (earlier in the configuration) lists it too.
        let before = previous(&[("p_a", 0, 0), ("p_x_y", 1, 0)]);
        let names = vec![vec!["p_a", "p_x_y"], vec!["p_x_y", "q_b"]];
        let (index, collisions) = assign_names(&before, &names, &internal);
        assert_eq!(index["p_x_y"], (1, 0), "the server that served it keeps it");
        assert_eq!(index["p_a"], (0, 0));
        assert_eq!(index["q_b"], (1, 1));
        assert_eq!(collisions, vec![("p_x_y".to_owned(), Some(1), 0)], "the newcomer is left out");
    }

    #[test]
    fn a_name_no_longer_listed_goes_to_the_next_server_in_configuration_order() {
        let before = previous(&[("t", 1, 0)]);
        let names = vec![vec!["t"], vec!["u"], vec!["t"]];
        let (index, collisions) = assign_names(&before, &names, &HashSet::new());
        assert_eq!(index["t"], (0, 0));
        assert_eq!(collisions, vec![("t".to_owned(), Some(0), 2)]);
    }

    #[test]
    fn at_start_the_first_server_wins_and_internal_names_are_never_taken() {
        let internal = HashSet::from(["list_servers".to_owned()]);
        let names = vec![vec!["list_servers", "a", "a"], vec!["a", "b"]];
        let (index, collisions) = assign_names(&HashMap::new(), &names, &internal);
        assert!(!index.contains_key("list_servers"));
        assert_eq!(index["a"], (0, 1));
        assert_eq!(index["b"], (1, 1));
        assert_eq!(
            collisions,
            vec![
                ("list_servers".to_owned(), None, 0),
                ("a".to_owned(), Some(0), 0),
                ("a".to_owned(), Some(0), 1),
            ]
        );
    }

    #[test]
    fn a_server_that_moves_a_name_within_its_list_keeps_it_at_the_new_position() {
        let before = previous(&[("t", 1, 0)]);
        let names = vec![vec!["t"], vec!["u", "t"]];
        let (index, collisions) = assign_names(&before, &names, &HashSet::new());
        assert_eq!(index["t"], (1, 1));
        assert_eq!(collisions, vec![("t".to_owned(), Some(1), 0)]);
    }
}
