//! The gateway: the MCP facade over the registry, and the only module that knows JSON-RPC and
//! HTTP. It authenticates the caller, checks the tool's verb, dispatches, maps the domain result
//! to a `CallToolResult` with `_meta` (`execution_id`, `feedback_token`, `trace_id`), and hands
//! the execution record to tracking without waiting for it.
//!
//! # Design notes
//!
//! The MCP facade, and the only module that knows JSON-RPC and HTTP.
//!
//! `Gateway` implements rmcp's `ServerHandler` by hand over the registry (not through
//! `#[tool_router]`): the gateway needs each tool's domain result (structured value, error code,
//! LLM usage) before it becomes a `CallToolResult`, for `_meta`, tracking and metrics.
//!
//! The Origin guard also lets through a request whose `Origin` is the server's own (scheme plus
//! exactly the `Host` it carries, which is checked first), so the console's page can call `/mcp`;
//! other origins still need `http.allowed_origins`.
//!
//! The body's read timeout (`http.body_timeout_ms`, 408) and the refusal of a body declared over
//! the limit (413 before `100 Continue`) are `edge.rs`'s too; a refused credential is answered
//! without reading the body. `http.rs`'s `OwnHost` is the request's `Host` when it names orca
//! itself (allowed by name, on orca's port), put in the request's extensions by the Host/Origin
//! guard: the only `Host` a URL handed out may be built from. `dpop.rs`'s `Replays::remember` is
//! the seam of a replica's own memory of seen proofs (never forgetting one early; full, it
//! refuses).
//!
//! The Origin guard of a server bound to a loopback address also accepts any loopback origin
//! (`localhost`, `127.0.0.0/8`, `[::1]`, any port: a page on this machine); the Host check, which
//! runs first, still stops DNS rebinding.

mod apps;
mod auth;
mod call;
mod carried;
mod console;
mod direct;
mod dpop;
mod edge;
mod error;
mod forwarded;
mod held_tools;
mod hints;
pub(crate) mod http;
mod input_required;
mod listen;
mod logging;
mod metrics;
mod oauth;
mod outgoing;
mod reads;
mod replicas;
mod respond;
mod rounds;
mod sampling;
mod search;
mod session_token;
mod sign_in;
pub(crate) mod stdio;
mod tasks;
mod upstream_sign_in;
mod visible;

use std::sync::Arc;
use std::time::Instant;

use rmcp::ErrorData as McpError;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use sqlx::PgPool;
use uuid::Uuid;

use crate::config::{Config, Principal};
use crate::external::ListKind;
use crate::registry::Registry;
use crate::tool::Verb;
use crate::tracking::Tracker;

pub(crate) use auth::hash_key;
pub(crate) use call::record_refused_token;
use call::status_of;
use carried::{Carried, http_parts, incoming_traceparent, origin, trace_id};
pub(crate) use edge::{BodyProblem, check_json_rpc};
pub(crate) use metrics::Metrics;
use outgoing::{Origin, Outgoing};
pub(crate) use stdio::{Intercept, SCAN_LIMIT, Take, takes_directly};

/// `orca doctor`'s check of the OAuth issuer: its metadata found, its keys fetched.
///
/// # Errors
///
/// Why the issuer's metadata or keys cannot be had.
pub(crate) async fn check_issuer(config: &crate::config::OAuthConfig) -> Result<String, String> {
    oauth::Verifier::new(config.clone()).check().await
}

/// Everything a request needs, shared: a clone is one reference count, as every request's
/// middleware and call clones it.
#[derive(Debug, Clone)]
pub(crate) struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What an `AppState` holds.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Arc<Config>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) tracker: Tracker,
    pub(crate) state_pool: PgPool,
    pub(crate) metrics: Arc<Metrics>,
    /// The tool-search indexes, one per set of visible tools.
    search: Arc<search::Indexes>,
    /// The tools each access may see, until the catalog changes.
    visible: Arc<visible::VisibleTools>,
    /// Calls waiting for a 2026-07-28 client to come back with the input they asked for.
    pending: Arc<input_required::PendingCalls>,
    /// Calls become tasks for the clients that take them.
    tasks: Arc<tasks::Tasks>,
    /// orca's own requests on stateless answers, waiting for their clients' replies.
    pub(crate) replies: Arc<crate::external::Replies>,
    /// The servers the `initialize` instructions may name, found once: the internal servers
    /// and the external ones configured to run, neither of which changes while orca runs
    /// (whether an upstream is up, and its tools, are `list_servers`' and `tools/list`'
    /// business). Each caller's instructions name those it may use.
    server_names: Arc<[String]>,
    /// This replica among the others (`cluster:`), and the limits they count together.
    pub(crate) cluster: crate::cluster::Cluster,
    pub(crate) limits: Arc<crate::cluster::limits::SharedLimits>,
    /// The target databases, for the context versions `/healthz` shows.
    pub(crate) databases: crate::servers::sql_common::Databases,
    /// The tokens that carry a stateless client's capabilities from its `initialize`.
    session_tokens: session_token::Tokens,
}

impl Shared {
    /// The servers whose prompts and resources `principal` may see: those it may use a tool
    /// of; `None`: every server (no tool policy).
    pub(super) fn servers_in_reach(
        &self,
        principal: &Principal,
    ) -> Option<std::collections::HashSet<String>> {
        visible::servers_in_reach(&self.visible, &self.registry, principal)
    }

    /// Whether `principal` may be told `server`'s name (in its instructions, the console's
    /// lists): a tool of it is among those it may use (`reach`), or, for an external server
    /// whose tools may not be known yet, its tool policy may admit one.
    pub(super) fn may_name(
        &self,
        principal: &Principal,
        reach: Option<&std::collections::HashSet<String>>,
        server: &str,
    ) -> bool {
        in_reach(reach, server)
            || self.config.external.servers.iter().any(|external| {
                external.key == server && principal.may_reach_server(server, &external.prefix)
            })
    }
}

impl AppState {
    pub(crate) fn new(
        config: Arc<Config>,
        registry: Arc<Registry>,
        tracker: Tracker,
        state_pool: PgPool,
        metrics: Arc<Metrics>,
        replica: Replica,
    ) -> AppState {
        let server_names = server_names(&registry).into();
        let search = Arc::new(search::Indexes::new(&config, &registry, &state_pool));
        let pending = Arc::new(input_required::PendingCalls::new(replica.cluster.id()));
        let limits = Arc::new(crate::cluster::limits::SharedLimits::new(state_pool.clone()));
        let tasks = Arc::new(tasks::Tasks::default());
        AppState(Arc::new(Shared {
            config,
            registry,
            tracker,
            state_pool,
            metrics,
            search,
            visible: Arc::default(),
            server_names,
            pending,
            tasks,
            replies: Arc::default(),
            cluster: replica.cluster,
            limits,
            databases: replica.databases,
            session_tokens: session_token::Tokens::new(replica.secret),
        }))
    }
}

/// What a replica brings to its state besides its servers.
#[derive(Debug)]
pub(crate) struct Replica {
    pub(crate) cluster: crate::cluster::Cluster,
    pub(crate) databases: crate::servers::sql_common::Databases,
    /// orca's secret, which signs the tokens of stateless clients' capabilities.
    pub(crate) secret: crate::sql::Secret,
}

/// How a client reached the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    Stdio,
    Http,
}

impl Transport {
    fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// One MCP server facade; cloned per HTTP request in stateless mode, so it holds only handles.
#[derive(Debug, Clone)]
pub(crate) struct Gateway {
    state: AppState,
    transport: Transport,
    /// The session's `logging/setLevel`.
    log_level: logging::SessionLevel,
    /// Which session this is, for the resource subscriptions relayed to external servers.
    session: u64,
    /// Whether the transport writes pre-encoded results into the message (`splice`); when not,
    /// they are decoded back into the result.
    splices: bool,
}

impl Gateway {
    /// A gateway whose transport splices pre-encoded results (`splice::split`) into every
    /// message it writes.
    pub(crate) fn new(state: AppState, transport: Transport) -> Gateway {
        let session = next_session();
        let log_level = logging::SessionLevel::new();
        Gateway { state, transport, log_level, session, splices: true }
    }

    /// A gateway whose transport writes messages as rmcp serializes them: the sessions of
    /// stateful HTTP, whose streams keep messages to replay them to a client that reconnects.
    pub(crate) fn without_splicing(mut self) -> Gateway {
        self.splices = false;
        self
    }

    /// The caller: the configured stdio principal, or the one the HTTP auth layer attached.
    fn principal(&self, context: &RequestContext<RoleServer>) -> Result<Principal, McpError> {
        match self.transport {
            Transport::Stdio => Ok(self.state.config.auth.stdio.clone()),
            Transport::Http => http_parts(context)
                .and_then(|parts| parts.extensions.get::<Principal>().cloned())
                .ok_or_else(|| {
                    McpError::internal_error(
                        "request reached the gateway without authentication",
                        None,
                    )
                }),
        }
    }

    /// The tools `principal` may see and call: its verbs and its tool policy allow them.
    /// The hint of a list of prompts or resources: orca's own part, and the external servers'
    /// in `reach` that have a part in it.
    fn list_hint(
        &self,
        external: Option<&Arc<crate::external::ExternalServers>>,
        kind: ListKind,
        reach: Option<&std::collections::HashSet<String>>,
    ) -> crate::external::CacheHint {
        let own = hints::own(&self.state);
        external
            .map_or(own, |external| own.and(external.cache_hint(kind, |key| in_reach(reach, key))))
    }

    /// The same with each tool's server, kept per access until the catalog changes.
    fn visible_tools_by_server(&self, principal: &Principal) -> visible::Visible {
        self.state.visible.of(&self.state.registry, principal)
    }

    /// Whether the server owning `uri` (a resource or a template) is in `reach`.
    fn resource_in_reach(
        &self,
        reach: Option<&std::collections::HashSet<String>>,
        uri: &str,
    ) -> bool {
        let owner = self.state.registry.resource_server(uri).map(str::to_owned).or_else(|| {
            self.state.registry.external().and_then(|external| external.resource_server(uri))
        });
        owner.is_some_and(|owner| in_reach(reach, &owner))
    }

    /// Whether the results app is offered to this caller: its client declared MCP Apps, it may
    /// read, and it may see a tool linked to the app.
    fn offers_results_app(
        &self,
        principal: &Principal,
        context: &RequestContext<RoleServer>,
    ) -> bool {
        apps::declared(context)
            && principal.may(Verb::Read)
            && self
                .visible_tools_by_server(principal)
                .iter()
                .any(|(tool, server)| apps::is_linked(server, &tool.name))
    }

    /// The servers whose prompts and resources `principal` may see (`Shared::servers_in_reach`).
    fn servers_in_reach(&self, principal: &Principal) -> Option<std::collections::HashSet<String>> {
        self.state.servers_in_reach(principal)
    }

    /// The `initialize` instructions for `principal`: they name only the servers it may use.
    fn instructions_for(&self, principal: &Principal) -> String {
        let reach = self.servers_in_reach(principal);
        let named: Vec<&str> = self
            .state
            .server_names
            .iter()
            .filter(|server| self.state.may_name(principal, reach.as_ref(), server))
            .map(String::as_str)
            .collect();
        instructions(&named)
    }

    /// The client of a call, to which an external server's progress, log messages and requests
    /// during the call are relayed, and whose cancellation reaches the server.
    /// A 2026-07-28 request (its protocol version in `_meta`) gets log messages only at or
    /// above the `logLevel` it names, and none without one; older clients get their session's
    /// `logging/setLevel`.
    /// `exchange` holds what its external server asks of a client that answers by retrying.
    fn caller(
        &self,
        context: &RequestContext<RoleServer>,
        exchange: Option<Arc<crate::external::Exchange>>,
    ) -> crate::external::Caller {
        let admits: crate::external::LogFilter =
            match (context.meta.log_level(), context.meta.protocol_version()) {
                (Some(minimum), _) => {
                    let minimum = crate::external::severity(minimum);
                    Arc::new(move |level| crate::external::severity(level) >= minimum)
                }
                (None, Some(_)) => Arc::new(|_| false),
                (None, None) => {
                    let session = self.log_level.clone();
                    Arc::new(move |level| session.admits(level))
                }
            };
        crate::external::Caller {
            reach: crate::external::Reach::Session(context.peer.clone()),
            request_id: context.id.clone(),
            progress_token: context.meta.get_progress_token(),
            cancelled: match &exchange {
                Some(exchange) => exchange.cancelled.clone(),
                None => context.ct.clone(),
            },
            admits,
            exchange,
            declared: session_token::declared(http_parts(context)),
        }
    }

    /// The caller of a call served by `direct` (a 2025 revision): it hears log messages at its
    /// session's level.
    fn plain_caller(
        &self,
        reach: crate::external::Reach,
        request_id: rmcp::model::RequestId,
        progress_token: Option<rmcp::model::ProgressToken>,
        cancelled: tokio_util::sync::CancellationToken,
    ) -> crate::external::Caller {
        let session = self.log_level.clone();
        crate::external::Caller {
            reach,
            request_id,
            progress_token,
            cancelled,
            admits: Arc::new(move |level| session.admits(level)),
            exchange: None,
            declared: None,
        }
    }

    /// The external servers, when there are any and the caller may read (prompts and
    /// resources need the `read` verb).
    fn readable_external(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<&Arc<crate::external::ExternalServers>>, McpError> {
        let principal = self.principal(context)?;
        Ok(self.state.registry.external().filter(|_| principal.may(Verb::Read)))
    }
}

/// The internal servers, then the external ones configured to run.
fn server_names(registry: &Registry) -> Vec<String> {
    let mut names: Vec<String> = registry.server_names().into_iter().map(str::to_owned).collect();
    names.extend(registry.external().map(|external| external.enabled_names()).unwrap_or_default());
    names
}

/// What `initialize` tells a client about orca: the servers behind it (those named in
/// `servers`) and how to rate results.
fn instructions(servers: &[&str]) -> String {
    let listed = servers.join(", ");
    let sql = if servers.contains(&"postgres") {
        " SQL: execute_sql is a dry run unless dry_run=false; reads then run read-only with \
         capped rows; a write needs the confirmation_token of its dry run, then dry_run=false \
         and read_only=false. generate_schema describes the tables."
    } else {
        ""
    };
    format!(
        "orca is one governed gateway to data tools. Servers behind it: {listed}. \
         Every tool result carries _meta.feedback_token; rate a result with the submit_feedback tool \
         (or POST /mcp/feedback) so the people who curate the context can learn from it. \
         Call list_servers to see every server, its status and its tools.{sql}"
    )
}

/// Whether `server` is among `reach` (`None`: every server).
/// A number for a client session or a listen stream, never given twice in this process: the key
/// its resource subscriptions are kept under.
fn next_session() -> u64 {
    static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn in_reach(reach: Option<&std::collections::HashSet<String>>, server: &str) -> bool {
    reach.is_none_or(|servers| servers.contains(server))
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        let external =
            self.state.registry.external().is_some_and(|external| external.any_enabled());
        let prompts =
            external || self.state.registry.has_prompts() || self.state.registry.has_resources();
        let capabilities = match (external, prompts) {
            // A proxied call may become a task (`tasks.rs`).
            (true, _) => ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_tasks()
                .build(),
            (false, true) => ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
            (false, false) => ServerCapabilities::builder().enable_tools().build(),
        };
        // orca answers `completion/complete` (external prompts and resource templates; nothing
        // for its own) and `logging/setLevel` (external servers' log messages are relayed).
        let mut capabilities = capabilities;
        capabilities.completions = Some(rmcp::model::JsonObject::new());
        capabilities.logging = Some(rmcp::model::JsonObject::new());
        // The instructions name servers: each caller's are its own (`initialize`, `discover`).
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("orca", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if apps::declares(&request.capabilities) {
            // The client renders apps: orca says it speaks the extension, and has resources
            // (the results app) even when no server of it has any.
            let capabilities = &mut result.capabilities;
            capabilities.resources.get_or_insert_with(Default::default);
            let extensions = capabilities.extensions.get_or_insert_with(Default::default);
            extensions.insert(apps::EXTENSION.to_owned(), rmcp::model::JsonObject::new());
        }
        result.instructions = Some(self.instructions_for(&self.principal(&context)?));
        Ok(result)
    }

    /// What orca is, with orca's own caching hint (`catalog.cache_ttl_ms`, `catalog.cache_scope`):
    /// it names the servers behind orca and what they offer together, which change when orca's
    /// configuration does, not with any one server's lists.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, McpError> {
        let (ttl, scope) = hints::own(&self.state).wire();
        let versions = self.supported_protocol_versions().into_owned();
        let mut info = self.get_info();
        info.instructions = Some(self.instructions_for(&self.principal(&context)?));
        Ok(rmcp::model::DiscoverResult::from_server_info(versions, info)
            .with_ttl_ms(ttl)
            .with_cache_scope(scope))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Some(external) = self.state.registry.external() else { return };
        // Relay external log messages to a session that has a stream for them and may read.
        let parts = context.extensions.get::<::http::request::Parts>();
        let (session, principal) = match self.transport {
            Transport::Stdio => (true, Some(self.state.config.auth.stdio.clone())),
            Transport::Http => (
                parts.is_some_and(|parts| parts.headers.contains_key("mcp-session-id")),
                parts.and_then(|parts| parts.extensions.get::<Principal>()).cloned(),
            ),
        };
        if let Some(principal) = principal.filter(|principal| session && principal.may(Verb::Read))
        {
            // Only the messages of servers the session's principal may see: whose tools its
            // policy shows it, as the catalog stands when each message comes.
            let gateway = self.clone();
            let sees =
                move |server: &str| in_reach(gateway.servers_in_reach(&principal).as_ref(), server);
            logging::relay(external, self.log_level.clone(), context.peer.clone(), sees);
        }
        // Tell this client when an external server's lists change (debounced upstream).
        listen::follow_for_session(external, context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let external = self.state.registry.external().map(|external| &**external);
        listen::accepted(requested, external, |uri| {
            self.state.registry.resource_server(uri).is_some()
        })
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let principal = self.principal(context.request_context())?;
        let Some(external) = self.readable_external(context.request_context())?.cloned() else {
            return Ok(());
        };
        let reach = self.servers_in_reach(&principal);
        listen::listen(external, context, reach).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let principal = self.principal(&context)?;
        let visible = self.visible_tools_by_server(&principal);
        let own = || hints::own(&self.state);
        if search::offered(&self.state.config.catalog, &principal, &context, visible.len()) {
            let result = ListToolsResult::with_all_items(search::meta_tools());
            return Ok(hints::with(result, own, &context));
        }
        let hint = || {
            self.state.registry.external().map_or(own(), |external| {
                let listed = |key: &str| visible.iter().any(|(_, server)| server == key);
                own().and(external.cache_hint(ListKind::Tools, listed))
            })
        };
        let apps = apps::declared(&context);
        let tools = visible
            .iter()
            .map(|(tool, server)| match apps && apps::is_linked(server, &tool.name) {
                true => apps::linked(tool.clone()),
                false => tool.clone(),
            })
            .collect();
        Ok(hints::with(ListToolsResult::with_all_items(tools), hint, &context))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        check_completion(&request)?;
        // orca's own prompts and resource templates offer no completions.
        let Some(external) = self.readable_external(&context)? else {
            return Ok(CompleteResult::default());
        };
        // Like the prompts and resources themselves, only those of servers in the caller's
        // reach: a hidden server's reference is answered as one nobody owns.
        let principal = self.principal(&context)?;
        let reach = self.servers_in_reach(&principal);
        let owned_in_reach = match &request.r#ref {
            rmcp::model::Reference::Prompt(prompt) => external
                .prompt_server(&prompt.name)
                .is_some_and(|server| in_reach(reach.as_ref(), &server)),
            rmcp::model::Reference::Resource(resource) => {
                self.resource_in_reach(reach.as_ref(), &resource.uri)
            }
            _ => false,
        };
        if !owned_in_reach {
            return Ok(CompleteResult::default());
        }
        let mut outgoing = Outgoing::new(&self.state.config, &principal, Origin::Other);
        match external.complete(request).await {
            None => Ok(CompleteResult::default()),
            Some(Ok(mut result)) => {
                outgoing.completion(&mut result);
                outgoing.tell_in(&mut result.meta);
                Ok(result)
            }
            Some(Err(mut tool_error)) => {
                outgoing.error(&mut tool_error);
                Err(error::protocol_error(&tool_error, &Uuid::new_v4().simple().to_string()))
            }
        }
    }

    #[expect(deprecated, reason = "MCP logging is deprecated by SEP-2577 but still spoken")]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.principal(&context)?;
        self.log_level.set(request.level);
        Ok(())
    }

    /// The transport asks for a tool only to check a 2026-07-28 request's `Mcp-Param-*` headers
    /// against its arguments (SEP-2243), so only an external tool that asks clients to mirror
    /// arguments into headers (`x-mcp-header`) is handed over, and only when the caller (set
    /// around rmcp's handling, `auth::as_caller`) may see it: for anyone else the headers are
    /// not checked, and the call gets the answer it would get with the right ones.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let routed = self.state.registry.external()?.resolve(name)?;
        let tool = routed.definition();
        let sees = auth::caller_passes(|caller| {
            caller.may(routed.verb()) && caller.may_use(routed.name(), routed.server())
        });
        (sees && mirrors_arguments(&tool.input_schema)).then(|| tool.clone())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        let principal = self.principal(&context)?;
        match self.state.tasks.get(&request.task_id, &principal) {
            Err(unknown) => match self.lost_task(&request.task_id, &principal).await {
                Some((lost, _)) => Ok(lost),
                None => Err(unknown),
            },
            found => found,
        }
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let principal = self.principal(&context)?;
        let updated =
            self.state.tasks.update(&request.task_id, request.input_responses, &principal);
        self.unless_lost(updated, &request.task_id, &principal).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let principal = self.principal(&context)?;
        let cancelled = self.state.tasks.cancel(&request.task_id, &principal);
        self.unless_lost(cancelled, &request.task_id, &principal).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let principal = self.principal(&context)?;
        let reach = self.servers_in_reach(&principal);
        let mut prompts = if principal.may(Verb::Read) && in_reach(reach.as_ref(), "data") {
            self.state.registry.prompts()
        } else {
            Vec::new()
        };
        let external = self.readable_external(&context)?;
        if let Some(external) = external {
            prompts.extend(external.prompts().into_iter().filter(|prompt| {
                external
                    .prompt_server(&prompt.name)
                    .is_some_and(|server| in_reach(reach.as_ref(), &server))
            }));
        }
        let hint = || self.list_hint(external, ListKind::Prompts, reach.as_ref());
        Ok(hints::with(ListPromptsResult::with_all_items(prompts), hint, &context))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let unknown =
            || McpError::invalid_params(format!("unknown prompt: {}", shown(&request.name)), None);
        let principal = self.principal(&context)?;
        let reach = self.servers_in_reach(&principal);
        if principal.may(Verb::Read)
            && in_reach(reach.as_ref(), "data")
            && let Some(filled) =
                self.state.registry.get_prompt(&request.name, request.arguments.as_ref())
        {
            let mut outgoing =
                Outgoing::new(&self.state.config, &principal, Origin::internal("data"));
            return match filled {
                Ok(mut prompt) => {
                    outgoing.prompt(&mut prompt);
                    outgoing.tell_in(&mut prompt.meta);
                    Ok(GetPromptResponse::Complete(prompt))
                }
                Err(mut message) => {
                    outgoing.text(&mut message);
                    Err(McpError::invalid_params(message, None))
                }
            };
        }
        let Some(external) = self.readable_external(&context)? else {
            return Err(unknown());
        };
        if !external
            .prompt_server(&request.name)
            .is_some_and(|server| in_reach(reach.as_ref(), &server))
        {
            return Err(unknown());
        }
        self.prompt_in_rounds(request, context, &principal).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let principal = self.principal(&context)?;
        let mut resources =
            if principal.may(Verb::Read) { self.state.registry.resources().0 } else { Vec::new() };
        let reach = self.servers_in_reach(&principal);
        let external = self.readable_external(&context)?;
        if let Some(external) = external {
            resources.extend(external.resources());
        }
        resources.retain(|resource| self.resource_in_reach(reach.as_ref(), &resource.uri));
        if self.offers_results_app(&principal, &context) {
            resources.insert(0, apps::results_resource());
        }
        let hint = || self.list_hint(external, ListKind::Resources, reach.as_ref());
        Ok(hints::with(ListResourcesResult::with_all_items(resources), hint, &context))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let principal = self.principal(&context)?;
        let mut templates =
            if principal.may(Verb::Read) { self.state.registry.resources().1 } else { Vec::new() };
        let reach = self.servers_in_reach(&principal);
        let external = self.readable_external(&context)?;
        if let Some(external) = external {
            templates.extend(external.resource_templates());
        }
        templates.retain(|template| self.resource_in_reach(reach.as_ref(), &template.uri_template));
        let hint = || self.list_hint(external, ListKind::Templates, reach.as_ref());
        Ok(hints::with(ListResourceTemplatesResult::with_all_items(templates), hint, &context))
    }

    /// Relayed to the external server that owns the resource; orca's own resources do not
    /// change under a client, so there is nothing to subscribe to.
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let principal = self.principal(&context)?;
        let unknown = || {
            McpError::resource_not_found(format!("unknown resource: {}", shown(&request.uri)), None)
        };
        // orca's own resources are read fresh each time; there is nothing to subscribe to.
        if self.state.registry.resource_server(&request.uri).is_some() {
            return Err(McpError::invalid_params(
                format!("{} cannot be subscribed to: it is orca's own", shown(&request.uri)),
                None,
            ));
        }
        let Some(external) = self.readable_external(&context)? else { return Err(unknown()) };
        let reach = self.servers_in_reach(&principal);
        match external.resource_server(&request.uri) {
            Some(server) if in_reach(reach.as_ref(), &server) => {}
            _ => return Err(unknown()),
        }
        let target = crate::external::SubscriptionTarget::Session(context.peer.clone());
        match external.subscribe_resource(&request.uri, self.session, target).await {
            Some(outcome) => outcome.map_err(|error| error::protocol_error(&error, "")),
            None => Err(unknown()),
        }
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let Some(external) = self.readable_external(&context)? else { return Ok(()) };
        if self.state.registry.resource_server(&request.uri).is_some() {
            return Ok(());
        }
        match external.unsubscribe_resource(&request.uri, self.session).await {
            Some(outcome) => outcome.map_err(|error| error::protocol_error(&error, "")),
            None => Ok(()),
        }
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let started = Instant::now();
        let principal = self.principal(&context)?;
        self.read_in_rounds(request, context, started, principal).await
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = Instant::now();
        let principal = self.principal(&context)?;
        if matches!(&*request.name, search::SEARCH_TOOLS | search::CALL_TOOL) {
            let visible = self.visible_tools_by_server(&principal);
            if search::offered(&self.state.config.catalog, &principal, &context, visible.len()) {
                if request.name == search::CALL_TOOL {
                    search::unwrap_call(&mut request)?;
                } else {
                    // Boxed: a search (with embeddings, a provider's call) is a large future
                    // that a direct call should not carry.
                    let answer = Box::pin(
                        self.answer_search(&principal, &visible, &request, &context, started),
                    )
                    .await?;
                    let mut answer = answer;
                    answer.result_type = Some(rmcp::model::ResultType::COMPLETE);
                    return Ok(CallToolResponse::Complete(answer));
                }
            }
        }
        self.call_in_rounds(request, context, started, principal).await
    }
}

/// The longest argument name, value and context a completion request may carry.
const MAX_COMPLETION_NAME: usize = 256;
const MAX_COMPLETION_VALUE: usize = 4096;
const MAX_COMPLETION_CONTEXT: usize = 64;

/// Refuse a completion request no honest client sends, before any server sees it.
fn check_completion(request: &CompleteRequestParams) -> Result<(), McpError> {
    let argument = &request.argument;
    let context = request.context.as_ref().and_then(|context| context.arguments.as_ref());
    let problem = if argument.name.is_empty() || argument.name.len() > MAX_COMPLETION_NAME {
        Some(format!("argument.name must be 1 to {MAX_COMPLETION_NAME} bytes"))
    } else if argument.value.len() > MAX_COMPLETION_VALUE {
        Some(format!("argument.value must be at most {MAX_COMPLETION_VALUE} bytes"))
    } else if context.is_some_and(|arguments| {
        arguments.len() > MAX_COMPLETION_CONTEXT
            || arguments.iter().any(|(name, value)| {
                name.len() > MAX_COMPLETION_NAME || value.len() > MAX_COMPLETION_VALUE
            })
    }) {
        Some(format!(
            "context.arguments may hold at most {MAX_COMPLETION_CONTEXT} names of at most \
             {MAX_COMPLETION_NAME} bytes with values of at most {MAX_COMPLETION_VALUE} bytes"
        ))
    } else {
        None
    };
    match problem {
        Some(message) => Err(McpError::invalid_params(message, None)),
        None => Ok(()),
    }
}

fn shown(text: &str) -> String {
    text.chars().take(128).collect()
}

/// Whether an input schema asks clients to mirror an argument into an `Mcp-Param-*` header:
/// an `x-mcp-header` on a property, at any depth of `properties`.
fn mirrors_arguments(schema: &serde_json::Map<String, serde_json::Value>) -> bool {
    schema.get("properties").and_then(serde_json::Value::as_object).is_some_and(|properties| {
        properties
            .values()
            .filter_map(serde_json::Value::as_object)
            .any(|property| property.contains_key("x-mcp-header") || mirrors_arguments(property))
    })
}
