//! One external server, supervised: a single shared connection, restarted with exponential
//! backoff when it drops, and put in a crash-loop state (still retried, slowly) after repeated
//! fast failures. Children run in their own process group, which is killed whenever the child
//! goes away, so nothing it started outlives it. Calls wait briefly for a restart in progress,
//! retry only what is safe to repeat, and come back in orca's error taxonomy.
//!
//! # Design notes
//!
//! `upstream.rs`: one `Upstream` per server with a supervisor task that keeps one rmcp client
//! connection (stdio child, Streamable HTTP, or `sse.rs`'s HTTP+SSE transport), restarts it with
//! exponential backoff, marks a crash loop, kills the child's process group whenever it goes, and
//! re-lists tools, prompts and resources on `list_changed`; `upstream/call.rs` holds `call_tool`
//! (timeout per attempt, retries only when the request never reached the server or the tool is
//! read-only or idempotent, errors translated to the taxonomy; `send_rounds` for a 2026-07-28
//! server's input rounds; the lane for a stdio session begun with `initialize`); `upstream/task.rs`
//! follows a 2026-07-28 server's own task (SEP-2663) when it answers a call with one:
//! `calls::declared` (beside `own_capabilities`, what orca declares for itself) adds the tasks
//! extension to the capabilities such a request declares, `follow_task` polls `tasks/get`, asks the
//! caller each new `input_required` request through `calls::answer_round` and answers with
//! `tasks/update`, hands the task's `statusMessage` to the caller's `Exchange` (which
//! `gateway/tasks.rs`'s `follow` sets on the caller's own task), and cancels the task
//! (`tasks/cancel`) when dropped before its end; `upstream/relay.rs` holds the rest of what a
//! server is asked (resources read, subscribed and unsubscribed, prompts, completions), each within
//! its timeout and, where a client waits, noted in flight for that client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    Implementation, Prompt, ProtocolVersion, Resource, ResourceTemplate, SubscribeRequestParams,
    Tool,
};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use secrecy::ExposeSecret;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::calls::{self, Calls};
use super::child::{Child, describe_exit, inherited, log_stderr};
use super::connection::Connection;
use super::frame::{LineLimit, OVERSIZED_CODE, StreamStats};
use super::freshness::{Freshness, ListsFreshness, all_pages};
use super::handler::{Lists, UpstreamClient};
use super::lane::{Answers, Lane};
use super::logs::ExternalLog;
use super::names;
use super::per_user::{self, UserConnections};
use super::pins::{Notice, Pins};
use super::subscriptions::Subscriptions;
use super::tokens::TokenVault;
use crate::client::auth::{
    self, AuthorizedHttpClient, Authorizer, AuthorizerConfig, ClientIdentity, Confinement, Grant,
};
use crate::config::{
    ExternalServerConfig, ExternalTransport, SignInMode, UpstreamOAuth, UpstreamProtocol,
};
use crate::tool::{ErrorCode, ToolError, Verb};

mod call;
mod pinned;
mod relay;
mod task;
mod users;

/// Failures in a row, each within [`STABLE_AFTER`] of its start, that make a crash loop.
const CRASH_LOOP_AFTER: u32 = 5;
/// A connection that lasted this long resets the count of fast failures.
const STABLE_AFTER: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often a server in a crash loop is tried again.
const CRASH_LOOP_RETRY: Duration = Duration::from_secs(60);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a call waits for a (re)starting server before giving up.
const MAX_START_WAIT: Duration = Duration::from_secs(10);

/// Where a server is in its life.
#[derive(Debug, Clone)]
pub(crate) enum Status {
    Starting,
    Running(Arc<Connection>),
    Restarting {
        reason: String,
        attempt: u32,
    },
    CrashLoop {
        reason: String,
    },
    /// Not configured to run: `enabled: false` or missing credentials.
    Disabled(String),
    /// An OAuth upstream whose shared sign-in is missing, expired or revoked: how to sign in.
    NeedsSignIn(String),
    Stopped,
}

impl Status {
    /// One word, for metrics.
    pub(crate) fn state(&self) -> &'static str {
        match self {
            Status::Starting => "starting",
            Status::Running(_) => "running",
            Status::Restarting { .. } => "restarting",
            Status::CrashLoop { .. } => "crash_loop",
            Status::Disabled(_) => "disabled",
            Status::NeedsSignIn(_) => "needs_sign_in",
            Status::Stopped => "stopped",
        }
    }

    /// For `list_servers`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Status::Starting => "starting".to_owned(),
            Status::Running(_) => "running".to_owned(),
            Status::Restarting { reason, attempt } => {
                format!("restarting (attempt {attempt}): {reason}")
            }
            Status::CrashLoop { reason } => format!(
                "crash loop: failed {CRASH_LOOP_AFTER} times in a row, retried every {}s; last: {reason}",
                CRASH_LOOP_RETRY.as_secs()
            ),
            Status::Disabled(reason) => reason.clone(),
            Status::NeedsSignIn(how) => format!("needs_sign_in: {how}"),
            Status::Stopped => "stopped".to_owned(),
        }
    }
}

/// How often an upstream waiting for a sign-in looks for one.
const SIGN_IN_POLL: Duration = Duration::from_secs(10);

fn sign_in_hint(key: &str) -> String {
    format!("not signed in: run `orca login {key}` (the sign-in is shared by every replica)")
}

/// orca's identity toward an OAuth upstream's authorization server.
pub(crate) fn identity_of(oauth: &UpstreamOAuth) -> ClientIdentity {
    ClientIdentity {
        client_id: oauth.client_id.clone(),
        client_secret: oauth.client_secret.clone(),
        private_key: oauth.private_key.clone().map(|key| (key, oauth.signing_algorithm.clone())),
        metadata_url: oauth.client_metadata_url.clone(),
        client_name: "orca".to_owned(),
        issuer: oauth.issuer.clone(),
    }
}

/// Where the URLs an OAuth upstream's challenges and metadata name may be fetched: its own
/// origin, its `oauth.issuer`'s, its `oauth.allowed_hosts`.
pub(crate) fn confinement_of(oauth: &UpstreamOAuth) -> Confinement {
    Confinement { allowed_hosts: oauth.allowed_hosts.clone() }
}

/// A tool of this server as orca exposes it.
#[derive(Debug, Clone)]
pub(crate) struct ExternalTool {
    /// The tool under its exposed name.
    pub(crate) tool: Tool,
    pub(crate) upstream_name: String,
    pub(crate) verb: Verb,
    /// Annotated read-only or idempotent: a repeat cannot do harm.
    pub(crate) repeatable: bool,
}

pub(crate) use pinned::{HeldTool, held_error};

/// What the server offers, under exposed names; kept while the server restarts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    /// The tools served: pinned as they are, or served with a warning (`pin: warn`).
    pub(crate) tools: Vec<Arc<ExternalTool>>,
    /// Tools held until a person approves them (`pin: hold`): neither listed nor callable.
    pub(crate) held: Vec<Arc<HeldTool>>,
    /// Tools served with a warning (`pin: warn`).
    pub(crate) warned: Vec<Notice>,
    pub(crate) prompts: Vec<Prompt>,
    /// Exposed prompt name -> upstream name.
    pub(crate) prompt_names: HashMap<String, String>,
    pub(crate) resources: Vec<Resource>,
    pub(crate) templates: Vec<ResourceTemplate>,
    pub(crate) server_info: Option<Implementation>,
    /// What the server said of each list's freshness when orca listed it.
    pub(crate) freshness: ListsFreshness,
}

/// Something the set should react to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event {
    Status,
    Catalog,
}

/// The failed attempts of a call that were retried, for tracking.
pub(crate) type Attempts = Vec<ToolError>;

#[derive(Debug)]
pub(crate) struct Upstream {
    pub(crate) index: usize,
    pub(crate) config: Arc<ExternalServerConfig>,
    status: watch::Sender<Status>,
    catalog: RwLock<Arc<Catalog>>,
    events: mpsc::UnboundedSender<Event>,
    logs: broadcast::Sender<ExternalLog>,
    /// The calls in flight, with the clients they are made for.
    calls: Arc<Calls>,
    subscriptions: Arc<Subscriptions>,
    pub(crate) restarts: AtomicU64,
    /// Where OAuth sign-ins live (orca's database), for an upstream with `oauth:`.
    pub(super) vault: Option<TokenVault>,
    /// Set by a connection attempt that failed for want of a sign-in.
    needs_sign_in: std::sync::atomic::AtomicBool,
    /// The current connection's sign-in, for a shared OAuth upstream.
    authorizer: std::sync::Mutex<Option<Arc<Authorizer>>>,
    /// Each user's session, for a per-user OAuth upstream.
    pub(super) users: UserConnections,
    /// Whose sign-in the supervised connection of a per-user upstream lists tools with.
    listing: std::sync::Mutex<Option<String>>,
    /// Told when someone signs in or out, so that a waiting upstream looks at once.
    sign_in_changed: tokio::sync::Notify,
    /// orca's public URL (`http.public_url`), for sign-in links.
    pub(super) public_url: Option<String>,
    /// Where its tool definitions are pinned (`None`: nothing is pinned, as with `pin: off`).
    pins: Option<Pins>,
    /// Told when a hold or an approval of its tools was made (on any replica): list again.
    pub(super) relist: tokio::sync::Notify,
}

impl Upstream {
    pub(crate) fn new(
        index: usize,
        config: Arc<ExternalServerConfig>,
        initial: Status,
        events: mpsc::UnboundedSender<Event>,
        logs: broadcast::Sender<ExternalLog>,
        vault: Option<TokenVault>,
        public_url: Option<String>,
    ) -> Upstream {
        Upstream {
            index,
            config,
            status: watch::Sender::new(initial),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            events,
            logs,
            calls: Arc::default(),
            subscriptions: Arc::default(),
            restarts: AtomicU64::new(0),
            vault,
            needs_sign_in: std::sync::atomic::AtomicBool::new(false),
            authorizer: std::sync::Mutex::new(None),
            users: UserConnections::default(),
            listing: std::sync::Mutex::new(None),
            sign_in_changed: tokio::sync::Notify::new(),
            public_url,
            pins: None,
            relist: tokio::sync::Notify::new(),
        }
    }

    /// Pin its tool definitions in `pins` (`None`: nothing is pinned, as with `pin: off`).
    pub(crate) fn with_pins(mut self, pins: Option<Pins>) -> Upstream {
        self.pins = pins;
        self
    }

    /// How this upstream signs in, when it does with OAuth.
    pub(crate) fn sign_in_mode(&self) -> Option<SignInMode> {
        match &self.config.transport {
            ExternalTransport::Http { oauth: Some(oauth), .. } => Some(oauth.mode),
            _ => None,
        }
    }

    fn per_user(&self) -> bool {
        self.sign_in_mode() == Some(SignInMode::PerUser)
    }

    /// Someone signed in to this upstream as `subject` (`""`: the shared sign-in) or out: a
    /// waiting upstream looks again at once, and a session with the old sign-in is closed.
    pub(crate) fn sign_in_changed(&self, subject: &str) {
        self.users.close(subject);
        let listing = self.listing.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let ends_listing = listing.as_deref() == Some(subject)
            || (subject.is_empty() && self.sign_in_mode() == Some(SignInMode::Shared));
        if ends_listing && let Status::Running(connection) = self.status() {
            connection.cancel.cancel();
        }
        self.sign_in_changed.notify_one();
    }

    /// For a per-user upstream, the tools, prompts and resources other than tool calls are
    /// not relayed: they would go through another user's session.
    fn shared_session_only(&self) -> Result<(), ToolError> {
        if self.per_user() {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                format!(
                    "external server `{}` signs each user in separately (oauth.mode: per_user): only its tools are relayed",
                    self.config.key
                ),
            ));
        }
        Ok(())
    }

    pub(crate) fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn set_status(&self, status: Status) {
        self.status.send_replace(status);
        let _ = self.events.send(Event::Status);
    }

    /// Wait until the first connection attempt has ended either way, or `deadline` passes.
    pub(crate) async fn wait_first_attempt(&self, deadline: Duration) {
        let mut receiver = self.status.subscribe();
        let _ = tokio::time::timeout(
            deadline,
            receiver.wait_for(|status| !matches!(status, Status::Starting)),
        )
        .await;
    }

    /// Keep the server connected until `shutdown`.
    pub(crate) async fn supervise(self: Arc<Self>, shutdown: CancellationToken) {
        let mut fast_failures: u32 = 0;
        loop {
            let started = Instant::now();
            // run_once watches `shutdown` itself, so that a running server is closed in order.
            let reason = self.run_once(&shutdown).await;
            if shutdown.is_cancelled() {
                break;
            }
            if self.needs_sign_in.swap(false, Ordering::Relaxed) {
                // Someone signs in with `orca login` (on any replica): look again now and then.
                tracing::warn!(server = %self.config.key, %reason, "external server needs a sign-in");
                self.set_status(Status::NeedsSignIn(reason));
                tokio::select! {
                    () = tokio::time::sleep(SIGN_IN_POLL) => {}
                    () = self.sign_in_changed.notified() => {}
                    () = shutdown.cancelled() => break,
                }
                continue;
            }
            self.restarts.fetch_add(1, Ordering::Relaxed);
            if started.elapsed() >= STABLE_AFTER {
                fast_failures = 0;
            }
            fast_failures += 1;
            let (delay, status) = if fast_failures >= CRASH_LOOP_AFTER {
                (CRASH_LOOP_RETRY, Status::CrashLoop { reason: reason.clone() })
            } else {
                let backoff =
                    FIRST_BACKOFF.saturating_mul(1 << (fast_failures - 1)).min(MAX_BACKOFF);
                (backoff, Status::Restarting { reason: reason.clone(), attempt: fast_failures })
            };
            tracing::warn!(server = %self.config.key, %reason, retry_in_ms = delay.as_millis() as u64, "external server is down");
            self.set_status(status);
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = shutdown.cancelled() => break,
            }
        }
        self.users.close_all();
        self.set_status(Status::Stopped);
    }

    /// Connect, serve until the connection ends, and say why it ended.
    async fn run_once(&self, shutdown: &CancellationToken) -> String {
        let (events_sender, mut events) = mpsc::unbounded_channel();
        let handler = UpstreamClient {
            events: events_sender.clone(),
            server: Arc::from(self.config.key.as_str()),
            logs: self.logs.clone(),
            calls: self.calls.clone(),
            subscriptions: self.subscriptions.clone(),
        };
        let connected = tokio::select! {
            connected = self.connect(handler) => connected,
            // Dropping a half-made connection kills the child's group (`Child`'s drop).
            () = shutdown.cancelled() => return "shut down".to_owned(),
        };
        let mut session = match connected {
            Ok(session) => session,
            Err(reason) => return reason,
        };
        let mut connection =
            Connection::new(session.service.peer().clone(), self.calls.clone(), None);
        // A session begun on a revision with a handshake: the lane's plain requests are its.
        let legacy = connection.began_with_initialize();
        if legacy {
            connection.lane = session.lane.clone();
        }
        let connection = Arc::new(connection);
        // A 2026-07-28 server tells of list changes on a listen stream only.
        let _listening = (!legacy).then(|| {
            let listening = super::handler::listen(
                connection.peer.clone(),
                events_sender,
                Arc::from(self.config.key.as_str()),
                self.subscriptions.clone(),
            );
            calls::AbortOnDrop(tokio::spawn(listening).abort_handle())
        });
        self.refresh(&connection, Lists::ALL).await;
        // A new connection knows nothing of the subscriptions of the last one.
        #[expect(deprecated, reason = "resources/subscribe is what the 2025 revisions speak")]
        for uri in self.subscriptions.uris().into_iter().filter(|_| legacy) {
            let subscribed = connection.peer.subscribe(SubscribeRequestParams::new(uri));
            if let Err(error) = self.bounded(subscribed).await {
                tracing::warn!(server = %self.config.key, %error, "resources/subscribe failed");
            }
        }
        tracing::info!(server = %self.config.key, tools = self.catalog().tools.len(), "external server connected");
        self.set_status(Status::Running(connection.clone()));

        let cancel = session.service.cancellation_token();
        let waiting = session.service.waiting();
        tokio::pin!(waiting);
        let mut child = session.child.take();
        let mut sweep = tokio::time::interval(per_user::IDLE_AFTER / 5);
        let reason = {
            let exited = async {
                match &mut child {
                    Some(child) => child.wait().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(exited);
            loop {
                tokio::select! {
                    quit = &mut waiting => {
                        break match quit {
                            Ok(_) => "the connection closed".to_owned(),
                            Err(error) => format!("the connection failed: {error}"),
                        };
                    }
                    status = &mut exited => {
                        cancel.cancel();
                        break describe_exit(status, &session.stats);
                    }
                    Some(lists) = events.recv() => {
                        // Coalesce a burst of notifications into one listing.
                        let mut lists: Lists = lists;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        while let Ok(more) = events.try_recv() {
                            lists = lists.union(more);
                        }
                        self.refresh(&connection, lists).await;
                    }
                    () = shutdown.cancelled() => {
                        cancel.cancel();
                        let _ = tokio::time::timeout(Duration::from_secs(2), &mut waiting).await;
                        break "shut down".to_owned();
                    }
                    _ = sweep.tick() => self.users.close_idle(),
                    () = self.relist.notified() => self.refresh(&connection, Lists::TOOLS).await,
                    () = until(self.catalog().freshness.stale_at()) => {
                        // The server said how long its lists stay fresh: list them again then.
                        let (tools, prompts, resources) =
                            self.catalog().freshness.stale(Instant::now());
                        self.refresh(&connection, Lists { tools, prompts, resources }).await;
                    }
                    () = connection.cancel.cancelled() => {
                        cancel.cancel();
                        let _ = tokio::time::timeout(Duration::from_secs(2), &mut waiting).await;
                        self.needs_sign_in.store(true, Ordering::Relaxed);
                        break self.waiting_hint();
                    }
                }
            }
        };
        if let Some(child) = &mut child {
            child.stop().await;
        }
        reason
    }

    async fn connect(&self, handler: UpstreamClient) -> Result<Session, String> {
        // A first `npx -y` start downloads the package: allow a minute for the handshake.
        let timeout = self.config.timeout.max(HANDSHAKE_TIMEOUT);
        match &self.config.transport {
            ExternalTransport::Stdio { command, args, env, cwd } => {
                let mut command_line = tokio::process::Command::new(command);
                command_line.args(args);
                // orca's own secrets (database URLs, ORCA_SECRET, other servers' credentials)
                // stay out of the child: it gets a baseline environment and what its entry sets.
                command_line.env_clear();
                for (name, value) in std::env::vars_os() {
                    if name.to_str().is_some_and(inherited) {
                        command_line.env(name, value);
                    }
                }
                for (name, value) in env {
                    command_line.env(name, value.expose_secret());
                }
                if let Some(cwd) = cwd {
                    command_line.current_dir(cwd);
                }
                command_line
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .kill_on_drop(true)
                    .process_group(0);
                let mut child = command_line.spawn().map_err(|error| {
                    format!("cannot start `{command}`: {error}; check `command` and PATH")
                })?;
                let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
                let stdout = child.stdout.take().expect("piped");
                let stdin = child.stdin.take().expect("piped");
                if let Some(stderr) = child.stderr.take() {
                    tokio::spawn(log_stderr(self.config.key.clone(), stderr));
                }
                let stats = Arc::new(StreamStats::default());
                let answers = Arc::new(Answers::default());
                let reader = LineLimit::new(stdout, self.config.max_response_bytes, stats.clone())
                    .with_answers(answers.clone());
                // `LineLimit` bounds the lines already.
                let transport =
                    super::BatchedTransport::<RoleClient, _, _>::new(reader, stdin, usize::MAX);
                let lane = Some(Arc::new(Lane::new(answers, transport.outbox())));
                let mut guard = Child { child, pid };
                match tokio::time::timeout(timeout, self.start(handler, transport)).await {
                    Ok(Ok(service)) => Ok(Session { service, child: Some(guard), stats, lane }),
                    Ok(Err(error)) => {
                        // The child may have died during the handshake: say how.
                        let status =
                            tokio::time::timeout(Duration::from_secs(3), guard.wait()).await;
                        guard.stop().await;
                        Err(match status {
                            Ok(status) => format!(
                                "{} during the MCP handshake",
                                describe_exit(status, &stats)
                            ),
                            Err(_) => format!("the MCP handshake failed: {error}"),
                        })
                    }
                    Err(_) => {
                        guard.stop().await;
                        Err(format!("no answer to the MCP handshake within {}s", timeout.as_secs()))
                    }
                }
            }
            ExternalTransport::Http { url, sse, headers, bearer, oauth } => {
                if *sse {
                    let transport = super::sse::SseTransport::connect(
                        url,
                        headers,
                        bearer.as_ref(),
                        timeout,
                        self.config.max_response_bytes,
                    )
                    .await?;
                    return self.handshake(handler, transport, timeout).await;
                }
                let (transport_config, client) = self.http_parts()?;
                if let Some(oauth) = oauth {
                    let subject = match oauth.mode {
                        SignInMode::PerUser => match self.listing_subject().await? {
                            Some(subject) => subject,
                            None => {
                                self.needs_sign_in.store(true, Ordering::Relaxed);
                                return Err(self.waiting_hint());
                            }
                        },
                        SignInMode::Service | SignInMode::Shared => String::new(),
                    };
                    let authorizer = self.authorizer(url, oauth, &subject)?;
                    let person = oauth.mode != SignInMode::Service;
                    if person {
                        *self.authorizer.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(authorizer.clone());
                        *self.listing.lock().unwrap_or_else(|e| e.into_inner()) = Some(subject);
                    }
                    if person && !authorizer.signed_in().await.map_err(|error| error.to_string())? {
                        self.needs_sign_in.store(true, Ordering::Relaxed);
                        return Err(self.waiting_hint());
                    }
                    let client = super::traced::Traced(AuthorizedHttpClient::new(
                        client,
                        authorizer.clone(),
                        auth::DEFAULT_STEP_UPS,
                    ));
                    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                        client,
                        transport_config,
                    );
                    let session = self.handshake(handler, transport, timeout).await;
                    // A refused refresh forgets the sign-in: someone must sign in again.
                    if session.is_err() && person && !authorizer.signed_in().await.unwrap_or(true) {
                        self.needs_sign_in.store(true, Ordering::Relaxed);
                        return Err(self.waiting_hint());
                    }
                    return session;
                }
                let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                    super::traced::Traced(client),
                    transport_config,
                );
                self.handshake(handler, transport, timeout).await
            }
        }
    }

    /// The Streamable HTTP settings (custom headers, a static bearer, the event size limit) and
    /// the HTTP client of an HTTP upstream.
    pub(super) fn http_parts(
        &self,
    ) -> Result<
        (
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
            reqwest::Client,
        ),
        String,
    > {
        let ExternalTransport::Http { url, headers, bearer, .. } = &self.config.transport else {
            return Err("not an HTTP server".to_owned());
        };
        let mut custom = HashMap::new();
        for (name, value) in headers {
            let name = http::HeaderName::try_from(name.as_str())
                .map_err(|_| format!("invalid header name `{name}`"))?;
            let value = http::HeaderValue::try_from(value.expose_secret())
                .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
            custom.insert(name, value);
        }
        let mut transport_config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url.as_str(),
            )
            .custom_headers(custom)
            .max_sse_event_size(self.config.max_response_bytes.saturating_add(64 * 1024))
            .reinit_on_expired_session(true);
        if let Some(token) = bearer {
            transport_config = transport_config.auth_header(token.expose_secret());
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
        Ok((transport_config, client))
    }

    /// What a person must do for an upstream waiting for a sign-in.
    fn waiting_hint(&self) -> String {
        if self.per_user() {
            per_user::nobody_signed_in(&self.config.key, self.public_url.as_deref())
        } else {
            sign_in_hint(&self.config.key)
        }
    }

    /// The user whose sign-in a per-user upstream lists its tools with: whoever signed in
    /// last.
    async fn listing_subject(&self) -> Result<Option<String>, String> {
        let vault = self.vault.as_ref().ok_or_else(|| {
            "signing in needs orca's database for the tokens, and there is none".to_owned()
        })?;
        vault.latest_subject(&self.config.key).await.map_err(|error| error.to_string())
    }

    /// Whether this is a shared OAuth upstream whose sign-in is gone.
    async fn sign_in_lost(&self) -> bool {
        let authorizer = self.authorizer.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match authorizer {
            Some(authorizer) => !authorizer.signed_in().await.unwrap_or(true),
            None => false,
        }
    }

    /// The sign-in of an OAuth upstream: its shared sign-in (or orca's own, for client
    /// credentials) kept in the vault under the server's key, or `subject`'s own (per user).
    pub(super) fn authorizer(
        &self,
        url: &str,
        oauth: &UpstreamOAuth,
        subject: &str,
    ) -> Result<Arc<Authorizer>, String> {
        let vault = self.vault.as_ref().ok_or_else(|| {
            "signing in needs orca's database for the tokens, and there is none".to_owned()
        })?;
        let grant = match oauth.mode {
            SignInMode::Service => Grant::ClientCredentials,
            SignInMode::Shared | SignInMode::PerUser => Grant::StoredOnly,
        };
        let mut config = AuthorizerConfig::new(url, grant);
        config.store = Arc::new(vault.store(&self.config.key, subject));
        config.identity = identity_of(oauth);
        config.confinement = Some(confinement_of(oauth));
        config.sign_in_hint = format!("run `orca login {}`", self.config.key);
        Authorizer::new(config).map(Arc::new).map_err(|error| error.to_string())
    }

    /// Begin the session on the revision configured for the server (`protocol:`).
    pub(super) async fn start<T, E, A>(
        &self,
        handler: UpstreamClient,
        transport: T,
    ) -> Result<RunningService<RoleClient, UpstreamClient>, rmcp::service::ClientInitializeError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        use rmcp::{ClientLifecycleMode, ClientServiceExt as _};
        let transport =
            super::heard::Heard { inner: transport.into_transport(), calls: handler.calls.clone() };
        let modern = vec![ProtocolVersion::V_2026_07_28];
        let lifecycle = match self.config.protocol {
            UpstreamProtocol::Session => return handler.serve(transport).await,
            UpstreamProtocol::Modern => {
                ClientLifecycleMode::Discover { preferred_versions: modern }
            }
            UpstreamProtocol::Auto => ClientLifecycleMode::Auto {
                preferred_versions: modern,
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
        };
        handler.serve_with_lifecycle(transport, lifecycle).await
    }

    async fn handshake<T, E, A>(
        &self,
        handler: UpstreamClient,
        transport: T,
        timeout: Duration,
    ) -> Result<Session, String>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        match tokio::time::timeout(timeout, self.start(handler, transport)).await {
            Ok(Ok(service)) => {
                Ok(Session { service, child: None, stats: Arc::default(), lane: None })
            }
            Ok(Err(error)) => Err(format!(
                "the MCP handshake failed: {}",
                describe_init_error(&error.to_string())
            )),
            Err(_) => Err(format!("no answer to the MCP handshake within {}s", timeout.as_secs())),
        }
    }

    /// List what the server offers and publish it under exposed names.
    async fn refresh(&self, connection: &Connection, lists: Lists) {
        let timeout = self.config.timeout;
        let prefix = &self.config.prefix;
        let mut catalog = (*self.catalog()).clone();
        catalog.server_info.clone_from(&connection.server_info);
        let capabilities = &connection.capabilities;
        // A per-user upstream's prompts and resources would be read through another user's
        // session: only its tools are listed.
        let lists = if self.per_user() {
            Lists { tools: lists.tools, prompts: false, resources: false }
        } else {
            lists
        };
        if lists.tools && capabilities.tools.is_some() {
            let peer = &connection.peer;
            let listed = all_pages(|page| peer.list_tools(Some(page)));
            match tokio::time::timeout(timeout, listed).await {
                Ok(Ok((tools, freshness))) => {
                    catalog.freshness.tools = freshness;
                    let judged = self.judged(tools).await;
                    catalog.tools = judged.served;
                    catalog.held = judged.held;
                    catalog.warned = judged.warned;
                }
                Ok(Err(error)) => {
                    catalog.freshness.tools = Freshness::unknown();
                    tracing::warn!(server = %self.config.key, %error, "tools/list failed");
                }
                Err(_) => {
                    catalog.freshness.tools = Freshness::unknown();
                    tracing::warn!(server = %self.config.key, "tools/list timed out");
                }
            }
        }
        if lists.prompts && capabilities.prompts.is_some() {
            let peer = &connection.peer;
            let listed = all_pages(|page| peer.list_prompts(Some(page)));
            match tokio::time::timeout(timeout, listed).await {
                Ok(Ok((prompts, freshness))) => {
                    catalog.freshness.prompts = freshness;
                    catalog.prompt_names.clear();
                    catalog.prompts = prompts
                        .into_iter()
                        .map(|mut prompt| {
                            let exposed = names::exposed_name(prefix, &prompt.name);
                            catalog.prompt_names.insert(exposed.clone(), prompt.name.clone());
                            prompt.name = exposed;
                            prompt
                        })
                        .collect();
                }
                Ok(Err(error)) => {
                    catalog.freshness.prompts = Freshness::unknown();
                    tracing::warn!(server = %self.config.key, %error, "prompts/list failed");
                }
                Err(_) => {
                    catalog.freshness.prompts = Freshness::unknown();
                    tracing::warn!(server = %self.config.key, "prompts/list timed out");
                }
            }
        }
        if lists.resources && capabilities.resources.is_some() {
            let peer = &connection.peer;
            let listed = tokio::time::timeout(timeout, async {
                let resources = all_pages(|page| peer.list_resources(Some(page)));
                let (resources, fresh) = resources.await?;
                let templates = all_pages(|page| peer.list_resource_templates(Some(page)));
                let templates = templates.await.unwrap_or_else(|_| (Vec::new(), fresh));
                Ok::<_, ServiceError>(((resources, fresh), templates))
            })
            .await;
            match listed {
                Ok(Ok(((resources, resources_fresh), (templates, templates_fresh)))) => {
                    catalog.freshness.resources = resources_fresh;
                    catalog.freshness.templates = templates_fresh;
                    catalog.resources = resources
                        .into_iter()
                        .map(|mut resource| {
                            resource.uri = names::exposed_uri(prefix, &resource.uri);
                            resource
                        })
                        .collect();
                    catalog.templates = templates
                        .into_iter()
                        .map(|mut template| {
                            template.uri_template =
                                names::exposed_uri(prefix, &template.uri_template);
                            template
                        })
                        .collect();
                }
                Ok(Err(error)) => {
                    catalog.freshness.resources = Freshness::unknown();
                    catalog.freshness.templates = Freshness::unknown();
                    tracing::warn!(server = %self.config.key, %error, "resources/list failed");
                }
                Err(_) => {
                    catalog.freshness.resources = Freshness::unknown();
                    catalog.freshness.templates = Freshness::unknown();
                    tracing::warn!(server = %self.config.key, "resources/list timed out");
                }
            }
        }
        *self.catalog.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(catalog);
        let _ = self.events.send(Event::Catalog);
    }

    /// The live connection, waiting up to `wait` for a (re)start in progress, or for a
    /// connection other than `broken` (one a call just saw fail).
    async fn connection(
        &self,
        wait: Duration,
        broken: Option<&Arc<Connection>>,
    ) -> Result<Arc<Connection>, ToolError> {
        // The common case, a live connection, is answered without a subscription or a timer.
        if let Status::Running(connection) = &*self.status.borrow()
            && !connection.peer.is_transport_closed()
            && broken.is_none_or(|broken| !Arc::ptr_eq(broken, connection))
        {
            return Ok(Arc::clone(connection));
        }
        let mut receiver = self.status.subscribe();
        let settled = tokio::time::timeout(
            wait.min(MAX_START_WAIT),
            receiver.wait_for(|status| match status {
                Status::Starting | Status::Restarting { .. } => false,
                Status::Running(connection) => {
                    broken.is_none_or(|broken| !Arc::ptr_eq(broken, connection))
                }
                Status::CrashLoop { .. }
                | Status::Disabled(_)
                | Status::NeedsSignIn(_)
                | Status::Stopped => true,
            }),
        )
        .await;
        let status = match settled {
            Ok(Ok(status)) => status.clone(),
            _ => self.status(),
        };
        match status {
            Status::Running(connection) if !connection.peer.is_transport_closed() => Ok(connection),
            Status::Running(_) => Err(ToolError::upstream_unavailable(format!(
                "external server `{}` lost its connection and has not come back yet",
                self.config.key
            ))
            .with_hint("it is restarted automatically; call list_servers for its status")),
            other => Err(ToolError::upstream_unavailable(format!(
                "external server `{}` is not serving: {}",
                self.config.key,
                other.describe()
            ))
            .with_hint("call list_servers for its status; it is retried automatically")),
        }
    }

    fn too_large(&self, size: usize) -> ToolError {
        let mut error = ToolError::new(
            ErrorCode::ResultTruncated,
            format!(
                "the result from external server `{}` is larger than its limit of {} bytes",
                self.config.key, self.config.max_response_bytes
            ),
        )
        .with_hint(
            "ask for less (narrower arguments), or raise `max_response_bytes` for this server",
        );
        error.details = Some(Box::new(serde_json::json!({
            "limit_bytes": self.config.max_response_bytes,
            "size_bytes": (size > 0).then_some(size),
        })));
        error
    }

    /// Map a client-side failure to the taxonomy, with whether the request reached the server.
    fn translate(&self, error: ServiceError) -> (ToolError, bool) {
        let key = &self.config.key;
        match error {
            ServiceError::McpError(data) if data.code.0 == OVERSIZED_CODE => (self.too_large(0), true),
            ServiceError::McpError(data) => {
                let message: String = data.message.chars().take(500).collect();
                let code = match data.code.0 {
                    -32602 | -32600 => ErrorCode::InvalidInput,
                    -32601 | -32002 => ErrorCode::NotFound,
                    _ => ErrorCode::UpstreamUnavailable,
                };
                let mut translated = ToolError::new(code, format!("external server `{key}` refused the call: {message}"));
                translated.retryable = false;
                translated.details = Some(Box::new(serde_json::json!({
                    "upstream": key,
                    "jsonrpc_code": data.code.0,
                })));
                (translated, true)
            }
            ServiceError::TransportSend(error) => (
                ToolError::upstream_unavailable(format!("could not send the call to external server `{key}`: {error}")),
                false,
            ),
            ServiceError::TransportClosed | ServiceError::Cancelled { .. } => (
                ToolError::upstream_unavailable(format!(
                    "the connection to external server `{key}` closed before it answered; the call may or may not have run"
                ))
                .with_hint("it restarts automatically; repeat the call only if running it twice is harmless"),
                true,
            ),
            ServiceError::Timeout { .. } => (
                ToolError::new(ErrorCode::Timeout, format!("external server `{key}` did not answer in time")),
                true,
            ),
            other => (
                ToolError::upstream_unavailable(format!("external server `{key}` failed: {other}")).not_retryable(),
                true,
            ),
        }
    }

    /// A request to the server within its timeout, its failure in the taxonomy.
    async fn bounded<T>(
        &self,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, ToolError> {
        match tokio::time::timeout(self.config.timeout, request).await {
            Err(_) => Err(self.timed_out(None)),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.translate(error).0),
        }
    }

    fn timed_out(&self, tool: Option<&str>) -> ToolError {
        let what = tool.map_or_else(String::new, |tool| format!("`{tool}` on "));
        ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{what}external server `{}` did not answer within {} ms",
                self.config.key,
                self.config.timeout.as_millis()
            ),
        )
        .with_hint("the server's `timeout` in external-mcps.yaml sets this limit")
    }
}

struct Session {
    service: RunningService<RoleClient, UpstreamClient>,
    child: Option<Child>,
    stats: Arc<StreamStats>,
    lane: Option<Arc<Lane>>,
}

fn describe_init_error(text: &str) -> String {
    let text = without_transport_type(text);
    let text: String = text.chars().take(300).collect();
    if says_401(&text) || text.to_ascii_lowercase().contains("unauthorized") {
        format!("{text} (check the server's credentials)")
    } else {
        text
    }
}

/// Whether `text` names the status 401: the number alone, not part of another number or a port
/// (`127.0.0.1:40123`).
fn says_401(text: &str) -> bool {
    text.match_indices("401").any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + 3..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit() || c == ':' || c == '.')
            && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// `text` without the Rust type rmcp names its transport by (`Transport [orca::...<...>]
/// error: Client error: `), which says nothing to a person and would push the reason out of the
/// status's 300 characters.
fn without_transport_type(text: &str) -> String {
    let Some(start) = text.find("Transport [") else { return text.to_owned() };
    let mut depth = 0usize;
    let mut end = None;
    for (at, character) in text[start..].char_indices() {
        match character {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(start + at + 1);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(end) = end else { return text.to_owned() };
    let rest = text[end..].trim_start();
    let rest = rest.strip_prefix("error:").unwrap_or(rest).trim_start();
    let rest = rest.strip_prefix("Client error:").unwrap_or(rest).trim_start();
    format!("{}{rest}", text[..start].trim_end_matches([' ', ':']).to_owned() + ": ")
}

/// Resolves at `at`, never without it.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::{says_401, without_transport_type};

    #[test]
    fn only_a_401_of_its_own_asks_to_check_the_credentials() {
        for (text, said) in [
            ("HTTP status client error (401 Unauthorized)", true),
            ("status 401", true),
            ("refused: 127.0.0.1:40123 is not", false),
            ("the port 14012 is busy", false),
            ("10.0.401.1", false),
        ] {
            assert_eq!(says_401(text), said, "{text}");
        }
    }

    #[test]
    fn an_init_error_loses_the_transports_type_name_and_keeps_its_reason() {
        for (text, expected) in [
            (
                "Send message error Transport [orca::x::Heard<rmcp::W<orca::A<[u8; 2]>>>] error: Client error: refused: the reason",
                "Send message error: refused: the reason",
            ),
            ("connection refused", "connection refused"),
            ("Transport [unclosed<", "Transport [unclosed<"),
        ] {
            assert_eq!(without_transport_type(text), expected);
        }
    }
}
