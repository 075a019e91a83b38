//! The calls in flight on one external server, each with the client it is made for, so that what
//! the server sends during a call reaches that client and its answers come back: progress (by
//! the progress token orca sent with the call, rewritten to the client's own), log messages,
//! and the server's requests (sampling, elicitation, roots). A request that came on a call's
//! own HTTP response stream belongs to that call; otherwise (stdio, or the standalone stream) it
//! belongs to the one call in flight, and with several in flight it is refused rather than
//! guessed. The client's cancellation of a call is forwarded by the caller's token, and a call
//! orca stops waiting for is cancelled at the server (`CancelOnDrop`).
//!
//! # Design notes
//!
//! `calls.rs`: `Calls`, the calls in flight on one server, each with its `Caller` (where the client
//! hears from the server, `reach.rs`'s `Reach`: its rmcp session's peer, or the answer stream of a
//! stateless request served by `gateway::direct`; its request id, its progress token, its
//! cancellation token, its log filter): a progress notification goes to the call whose progress
//! token orca sent, under the client's token; a log message, and a `sampling/createMessage`,
//! `elicitation/create` or `roots/list` request, to the call it came with (its HTTP response
//! stream), else to the one call in flight, else (several in flight) the request is refused and the
//! log message goes to every reading session; a request goes out on the calling client's own stream
//! (rmcp's `OriginatingRequestId`, from a task of its own so the upstream's request id does not
//! take its place) and its answer back. Before a call's answer is returned, notifications still
//! being relayed for it finish (rmcp hands each notification to a task of its own). `CancelOnDrop`
//! cancels a call at the server when orca stops waiting for it (its timeout, or the client's
//! cancellation, which `Upstream::call_tool` watches through the caller's token).
#![expect(
    deprecated,
    reason = "sampling, roots and logging are deprecated by SEP-2577, but the protocol versions clients speak today have them"
)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, ClientRequest, ClientResult, CreateMessageRequest,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
    ElicitResult, GetExtensions as _, GetMeta as _, InputRequest, InputRequiredResult,
    InputResponses, ListRootsRequest, ListRootsResult, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken, RequestId,
    RequestMetaObject, ServerNotification, ServerRequest, ServerResult,
};
use rmcp::service::{
    InboundStreamOrigin, OriginatingRequestId, Peer, PeerRequestOptions, RequestContext,
    RoleClient, ServiceError,
};
use tokio_util::sync::CancellationToken;

use super::exchange::{Exchange, INPUT_KEY, Kind};
use super::reach::Reach;

/// A request orca sent that is cancelled upstream if it is dropped before its answer.
pub(super) struct CancelOnDrop {
    /// `None` once answered.
    pub(super) peer: Option<Peer<RoleClient>>,
    pub(super) id: rmcp::model::RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let id = self.id.clone();
        tokio::spawn(async move {
            let reason = "the client cancelled, or orca stopped waiting".to_owned();
            let cancelled = rmcp::model::CancelledNotificationParam::new(Some(id), Some(reason));
            let _ = peer.notify_cancelled(cancelled).await;
        });
    }
}

/// Whether a client admits a log message of a level (its `logging/setLevel`).
pub(crate) type LogFilter = Arc<dyn Fn(LoggingLevel) -> bool + Send + Sync>;

/// The client a call is made for.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) reach: Reach,
    /// The client's id for its `tools/call`: requests made during the call go on its stream.
    pub(crate) request_id: RequestId,
    /// The client's progress token, if it asked for progress.
    pub(crate) progress_token: Option<ProgressToken>,
    /// Cancelled when the client cancels its call.
    pub(crate) cancelled: CancellationToken,
    pub(crate) admits: LogFilter,
    /// For a client that cannot be asked during its call (2026-07-28), where the server's
    /// requests wait for the client to answer them by retrying its request.
    pub(crate) exchange: Option<Arc<Exchange>>,
    /// What a stateless 2025 client declared in its `initialize`, carried by its request
    /// (`gateway::session_token`).
    pub(crate) declared: Option<ClientCapabilities>,
}

impl Caller {
    /// What the client declared it can answer, when known: a 2026-07-28 client's from its
    /// request, a stateless 2025 client's from the token its request carries, a session's from
    /// its `initialize`.
    fn capabilities(&self) -> Option<ClientCapabilities> {
        if let Some(exchange) = &self.exchange {
            return exchange.capabilities().cloned();
        }
        if let Some(declared) = &self.declared {
            return Some(declared.clone());
        }
        match &self.reach {
            Reach::Session(peer) => peer.peer_info().map(|info| info.capabilities.clone()),
            Reach::Answer(_) => None,
        }
    }

    /// Whether the client declared it answers sampling requests; `None` when orca cannot know
    /// (a stateless request of a 2025 revision without a valid token).
    pub(crate) fn offers_sampling(&self) -> Option<bool> {
        self.capabilities().map(|capabilities| capabilities.sampling.is_some())
    }

    /// Ask the client's model during its call, for orca itself: on its session (its call's
    /// stream), on its request's answer, or, for a client that answers by retrying, in the
    /// call's next input round.
    ///
    /// # Errors
    ///
    /// The client's own error (a decline), or why it could not be asked.
    pub(crate) async fn create_message(
        &self,
        params: CreateMessageRequestParams,
    ) -> Result<CreateMessageResult, McpError> {
        if let Some(exchange) = &self.exchange {
            let request = InputRequest::CreateMessage(CreateMessageRequest::new(params));
            let answer = exchange.ask(Kind::Sampling, None, request).await?;
            return from_answer(answer);
        }
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match ask(self, request, &CancellationToken::new(), true).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            other => Err(unexpected(&other)),
        }
    }

    /// Whether the call still has a client: one that answers by retrying its request needs no
    /// open transport between rounds.
    fn is_live(&self) -> bool {
        !self.cancelled.is_cancelled()
            && (self.exchange.is_some() || !self.reach.is_transport_closed())
    }
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Caller")
            .field("request_id", &self.request_id)
            .field("progress_token", &self.progress_token)
            .finish_non_exhaustive()
    }
}

struct InFlight {
    key: u64,
    /// Notifications of the call read and not yet relayed to its caller.
    relaying: Arc<Pending>,
    /// orca's id for the call on the upstream connection, and its progress token there; `None`
    /// from its registration until the request is handed to the connection.
    upstream_request: Option<RequestId>,
    upstream_token: Option<ProgressToken>,
    caller: Arc<Caller>,
}

/// The calls in flight on one server.
#[derive(Default)]
pub(crate) struct Calls {
    next: AtomicU64,
    in_flight: Mutex<Vec<InFlight>>,
}

impl std::fmt::Debug for Calls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Calls").finish_non_exhaustive()
    }
}

/// A call's place among those in flight, given up when dropped.
pub(crate) struct Registered {
    calls: Arc<Calls>,
    key: u64,
    relaying: Arc<Pending>,
}

impl Registered {
    /// Note the id and progress token the call was sent upstream with.
    pub(crate) fn sent(&self, upstream_request: RequestId, upstream_token: ProgressToken) {
        if let Some(call) = self.calls.lock().iter_mut().find(|call| call.key == self.key) {
            call.upstream_request = Some(upstream_request);
            call.upstream_token = Some(upstream_token);
        }
    }

    /// Wait (briefly) for the call's notifications to reach its caller before its answer does:
    /// rmcp hands each notification to a task of its own but the answer straight back, so a
    /// notification the server sent before its answer could otherwise arrive after it, when
    /// the client no longer listens for the call's progress. Each was counted when it was read
    /// (`heard`), before the answer behind it, so none is missed however late its task runs;
    /// a client too slow to take them is not waited for past a second.
    pub(crate) async fn settle(&self) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            let drained = self.relaying.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.relaying.count.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return;
            }
        }
    }
}

/// A call's notifications read from the server and not yet relayed to its caller.
#[derive(Default)]
struct Pending {
    count: AtomicUsize,
    /// Told when the count falls to zero.
    drained: tokio::sync::Notify,
}

/// Counts a notification as pending until dropped: it travels with the notification (in its
/// extensions, from the moment it is read) into the task that relays it.
pub(crate) struct Relaying(Arc<Pending>);

impl Relaying {
    fn start(pending: &Arc<Pending>) -> Relaying {
        pending.count.fetch_add(1, Ordering::AcqRel);
        Relaying(pending.clone())
    }
}

impl Clone for Relaying {
    fn clone(&self) -> Relaying {
        Relaying::start(&self.0)
    }
}

impl Drop for Relaying {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.drained.notify_waiters();
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.lock().retain(|call| call.key != self.key);
    }
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<InFlight>> {
        self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Note a call about to be sent upstream for `caller`. It counts as in flight from now, before
    /// the request reaches the server: a fast server's request during the call (an elicitation)
    /// can otherwise arrive before the call is noted and find no call to belong to.
    pub(crate) fn register(self: &Arc<Self>, caller: Arc<Caller>) -> Registered {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let relaying = Arc::new(Pending::default());
        let call = InFlight {
            key,
            relaying: relaying.clone(),
            upstream_request: None,
            upstream_token: None,
            caller,
        };
        self.lock().push(call);
        Registered { calls: self.clone(), key, relaying }
    }

    fn by_token(&self, token: &ProgressToken) -> Option<(Arc<Caller>, Relaying)> {
        let calls = self.lock();
        let call = calls.iter().find(|call| call.upstream_token.as_ref() == Some(token))?;
        Some((call.caller.clone(), Relaying::start(&call.relaying)))
    }

    fn by_request(&self, id: &RequestId) -> Option<Arc<Caller>> {
        self.by_request_relaying(id).map(|(caller, _)| caller)
    }

    fn by_request_relaying(&self, id: &RequestId) -> Option<(Arc<Caller>, Relaying)> {
        let calls = self.lock();
        let call = calls.iter().find(|call| call.upstream_request.as_ref() == Some(id))?;
        Some((call.caller.clone(), Relaying::start(&call.relaying)))
    }

    /// The call a log message belongs to: the one whose HTTP response stream it came on
    /// (`origin`, see `traced.rs`), else the one call in flight whose client listens.
    fn log_call(&self, origin: Option<&RequestId>) -> Option<(Arc<Caller>, Relaying)> {
        origin.and_then(|id| self.by_request_relaying(id)).or_else(|| self.sole_relaying(listening))
    }

    /// The one call in flight, if there is exactly one.
    fn sole(&self) -> Option<Arc<Caller>> {
        self.sole_relaying(Caller::is_live).map(|(caller, _)| caller)
    }

    /// The one call in flight among those `counts` admits: a call whose client has cancelled it
    /// or gone away no longer counts.
    fn sole_relaying(&self, counts: fn(&Caller) -> bool) -> Option<(Arc<Caller>, Relaying)> {
        let calls = self.lock();
        let mut live = calls.iter().filter(|call| counts(&call.caller));
        match (live.next(), live.next()) {
            (Some(only), None) => Some((only.caller.clone(), Relaying::start(&only.relaying))),
            _ => None,
        }
    }

    /// Count a notification just read from the server as pending for the call it belongs to
    /// (progress by its token, a log message as `log_call` finds its call), so that the call's
    /// answer, read after it, waits for it to be relayed (`Registered::settle`).
    pub(super) fn hear(&self, notification: &mut ServerNotification) {
        let origin = super::traced::origin(Some(notification.get_meta()));
        let relaying = match notification {
            ServerNotification::ProgressNotification(progress) => {
                self.by_token(&progress.params.progress_token).map(|(_, relaying)| relaying)
            }
            ServerNotification::LoggingMessageNotification(_) => {
                self.log_call(origin.as_ref()).map(|(_, relaying)| relaying)
            }
            _ => None,
        };
        if let Some(relaying) = relaying {
            notification.extensions_mut().insert(relaying);
        }
    }

    /// The caller a request from the server belongs to.
    fn caller_of(
        &self,
        server: &str,
        context: &RequestContext<RoleClient>,
    ) -> Result<Arc<Caller>, McpError> {
        let origin = context.extensions.get::<InboundStreamOrigin>();
        let found = match origin {
            Some(InboundStreamOrigin::OutboundRequest(id)) => self.by_request(id),
            _ => self.sole(),
        };
        found.ok_or_else(|| {
            tracing::warn!(server, in_flight = self.lock().len(), "a request of an external server matches no single call in flight");
            McpError::invalid_request(
                format!(
                    "orca relays a request of external server `{server}` to the client whose call is in flight, and it cannot tell which: {}",
                    if self.lock().is_empty() { "no call is" } else { "several calls are" }
                ),
                None,
            )
        })
    }

    /// Progress of a call, to its caller under the caller's token; `false` when it is no
    /// call's.
    pub(crate) async fn progress(&self, mut progress: ProgressNotificationParam) -> bool {
        let Some((caller, _relaying)) = self.by_token(&progress.progress_token) else {
            return false;
        };
        if let Some(token) = caller.progress_token.clone() {
            progress.progress_token = token;
            caller.reach.notify_progress(progress).await;
        }
        true
    }

    /// A log message of a call goes to its caller (at the caller's level): the call whose HTTP
    /// response stream it came on (`origin`), else the one call in flight; `false` when it is no
    /// one call's and the message is everyone's.
    pub(crate) async fn log(
        &self,
        message: &LoggingMessageNotificationParam,
        origin: Option<&RequestId>,
    ) -> bool {
        let Some((caller, _relaying)) = self.log_call(origin) else { return false };
        if !listening(&caller) {
            // Its client has no stream to hear it on between rounds; it is still no one else's.
            return true;
        }
        if (caller.admits)(message.level) {
            caller.reach.notify_logging_message(message.clone()).await;
        }
        true
    }

    pub(crate) async fn create_message(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let caller = self.caller_of(server, &context)?;
        if let Some(exchange) = &caller.exchange {
            let named = named_key(&params, &context);
            let request = InputRequest::CreateMessage(CreateMessageRequest::new(params));
            let answer = exchange.ask(Kind::Sampling, named.as_deref(), request).await?;
            return from_answer(answer);
        }
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match ask(&caller, request, &context.ct, false).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            other => Err(unexpected(&other)),
        }
    }

    pub(crate) async fn create_elicitation(
        &self,
        server: &str,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let caller = self.caller_of(server, &context)?;
        if let Some(exchange) = &caller.exchange {
            let named = named_key(&params, &context);
            let request = InputRequest::Elicitation(ElicitRequest::new(params));
            let answer = exchange.ask(Kind::Elicitation, named.as_deref(), request).await?;
            return from_answer(answer);
        }
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match ask(&caller, request, &context.ct, false).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            other => Err(unexpected(&other)),
        }
    }

    pub(crate) async fn list_roots(
        &self,
        server: &str,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        let caller = self.caller_of(server, &context)?;
        if let Some(exchange) = &caller.exchange {
            let named = named_key(&(), &context);
            let request = InputRequest::ListRoots(ListRootsRequest::default());
            let answer = exchange.ask(Kind::Roots, named.as_deref(), request).await?;
            return from_answer(answer);
        }
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        match ask(&caller, request, &context.ct, false).await? {
            ClientResult::ListRootsResult(result) => Ok(result),
            other => Err(unexpected(&other)),
        }
    }
}

/// Answer what a 2026-07-28 server asks for in an `InputRequiredResult`: each request goes to
/// the caller as a 2025 server's request during the call would (on its stream, or for a
/// 2026-07-28 caller into the `InputRequiredResult` orca answers it, under the server's key),
/// all at once. Returns the `inputResponses` and `requestState` to call the server again with.
pub(super) async fn answer_round(
    server: &str,
    caller: Option<&Arc<Caller>>,
    asked: InputRequiredResult,
) -> Result<(InputResponses, Option<String>), McpError> {
    let Some(caller) = caller else {
        return Err(McpError::invalid_request(
            format!(
                "external server `{server}` asks for input, and this call has no client to ask"
            ),
            None,
        ));
    };
    let never = CancellationToken::new();
    let asks = asked.input_requests.unwrap_or_default().into_iter().map(|(key, request)| {
        let never = &never;
        async move {
            let answer = match &caller.exchange {
                Some(exchange) => {
                    let kind = match &request {
                        InputRequest::CreateMessage(_) => Kind::Sampling,
                        InputRequest::Elicitation(_) => Kind::Elicitation,
                        InputRequest::ListRoots(_) => Kind::Roots,
                        _ => return Err(unknown_request(server, &key)),
                    };
                    exchange.ask(kind, Some(&key), request).await?
                }
                None => {
                    let request = match request {
                        InputRequest::CreateMessage(request) => {
                            ServerRequest::CreateMessageRequest(request)
                        }
                        InputRequest::Elicitation(request) => ServerRequest::ElicitRequest(request),
                        InputRequest::ListRoots(request) => {
                            ServerRequest::ListRootsRequest(request)
                        }
                        _ => return Err(unknown_request(server, &key)),
                    };
                    let answer = ask(caller, request, never, false).await?;
                    serde_json::to_value(answer).map_err(|error| {
                        McpError::internal_error(format!("the client's answer: {error}"), None)
                    })?
                }
            };
            Ok::<_, McpError>((key, answer))
        }
    });
    let answers = futures::future::try_join_all(asks).await?;
    Ok((answers.into_iter().collect(), asked.request_state))
}

/// Put the answers to its server's questions, and the server's state, into `request` for its
/// next round; `false` for a request that cannot carry them.
pub(super) fn answer_in(
    request: &mut ClientRequest,
    answers: InputResponses,
    state: Option<String>,
) -> bool {
    let (responses, request_state) = match request {
        ClientRequest::CallToolRequest(request) => {
            (&mut request.params.input_responses, &mut request.params.request_state)
        }
        ClientRequest::GetPromptRequest(request) => {
            (&mut request.params.input_responses, &mut request.params.request_state)
        }
        ClientRequest::ReadResourceRequest(request) => {
            (&mut request.params.input_responses, &mut request.params.request_state)
        }
        _ => return false,
    };
    *responses = Some(answers);
    *request_state = state;
    true
}

fn unknown_request(server: &str, key: &str) -> McpError {
    McpError::invalid_request(
        format!("external server `{server}` asks `{key}` of a kind orca does not relay"),
        None,
    )
}

/// The key a server named for its request (`_meta["orca/inputKey"]`), if it named one.
fn named_key(
    params: &impl serde::Serialize,
    context: &RequestContext<RoleClient>,
) -> Option<String> {
    let params = serde_json::to_value(params).ok();
    let in_params = params.as_ref().and_then(|params| params.get("_meta")?.get(INPUT_KEY));
    in_params
        .or_else(|| context.meta.get(INPUT_KEY))
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

/// A client's answer, given as JSON in its retry, as the result the server asked for (the
/// exchange has checked its kind).
fn from_answer<T: serde::de::DeserializeOwned>(answer: serde_json::Value) -> Result<T, McpError> {
    serde_json::from_value(answer)
        .map_err(|error| McpError::invalid_params(format!("the client's answer: {error}"), None))
}

/// Send `request` to the server on `peer`, noted in flight for `caller` (so that what the server
/// sends during it reaches that client) from before it is handed to the connection; dropped
/// before its answer, it is cancelled at the server. `modern`: the session began with
/// `server/discover` (2026-07-28).
pub(super) async fn send_for(
    peer: &Peer<RoleClient>,
    calls: &Arc<Calls>,
    request: ClientRequest,
    caller: Option<&Arc<Caller>>,
    modern: bool,
) -> Result<ServerResult, ServiceError> {
    let (answer, _registered) = send_held(peer, calls, request, caller, modern).await?;
    Ok(answer)
}

/// As [`send_for`], with the call still noted in flight for its caller while the returned
/// registration lives: a server that answered with a task goes on sending the call's progress
/// (under the token orca sent it with) and log messages until the task ends.
pub(super) async fn send_held(
    peer: &Peer<RoleClient>,
    calls: &Arc<Calls>,
    request: ClientRequest,
    caller: Option<&Arc<Caller>>,
    modern: bool,
) -> Result<(ServerResult, Option<Registered>), ServiceError> {
    let registered = caller.map(|caller| calls.register(caller.clone()));
    let mut options = PeerRequestOptions::no_options();
    // A 2026-07-28 server (`modern`) learns from each request what its client can answer: the
    // caller's, so that it asks nothing the caller cannot (else orca's own), and that orca
    // follows tasks (`upstream/task.rs`).
    if modern {
        let capabilities = caller.and_then(|caller| caller.capabilities()).map(relayable);
        options.meta = Some(declared(capabilities));
    }
    let handle = peer.send_cancellable_request(request, options).await?;
    if let Some(registered) = &registered {
        registered.sent(handle.id.clone(), handle.progress_token.clone());
    }
    let mut cancel = CancelOnDrop { peer: Some(peer.clone()), id: handle.id.clone() };
    let answer = handle.await_response().await;
    cancel.peer = None;
    if let Some(registered) = &registered {
        registered.settle().await;
    }
    Ok((answer?, registered))
}

/// Whether a call's client hears its log messages: between rounds a client that answers by
/// retrying has no stream to hear them on.
fn listening(caller: &Caller) -> bool {
    caller.is_live() && !caller.reach.is_transport_closed()
}

/// What a call's client may be asked for, as orca declares it to a server; a client that lacks
/// it answers so itself.
pub(super) fn own_capabilities() -> ClientCapabilities {
    serde_json::from_value(serde_json::json!({
        "sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {},
    }))
    .expect("valid client capabilities")
}

/// What orca declares to a 2026-07-28 server in a request's `_meta`: what its caller can
/// answer (`capabilities`, else orca's own), and the tasks extension, which orca follows itself.
pub(super) fn declared(capabilities: Option<ClientCapabilities>) -> RequestMetaObject {
    let mut capabilities = capabilities.unwrap_or_else(own_capabilities);
    capabilities
        .extensions
        .get_or_insert_default()
        .insert(rmcp::model::TASKS_EXTENSION_ID.to_owned(), serde_json::Map::new());
    let mut meta = RequestMetaObject::default();
    meta.set_client_capabilities(capabilities);
    meta
}

/// What of a client's capabilities orca relays from a server: its answers to sampling,
/// elicitation and roots requests.
fn relayable(capabilities: ClientCapabilities) -> ClientCapabilities {
    let mut relayed = ClientCapabilities::default();
    relayed.sampling = capabilities.sampling;
    relayed.elicitation = capabilities.elicitation;
    relayed.roots = capabilities.roots;
    relayed
}

/// Send `request` to the caller on its call's stream; its answer, or its error as it gave it.
/// The server's cancellation (or the caller's) ends the wait.
async fn ask(
    caller: &Caller,
    mut request: ServerRequest,
    server_cancelled: &CancellationToken,
    for_reply: bool,
) -> Result<ClientResult, McpError> {
    request.extensions_mut().insert(OriginatingRequestId(caller.request_id.clone()));
    // A task of its own: within this handler rmcp would mark the request as made during the
    // server's request (a task-local), not during the client's call.
    let reach = caller.reach.clone();
    // orca's own requests wait for a stateless client's reply too (`Reach::ask_for_reply`).
    let mut sent = tokio::spawn(async move {
        if for_reply {
            reach.ask_for_reply(request).await
        } else {
            reach.send_request(request).await
        }
    });
    let _abort = AbortOnDrop(sent.abort_handle());
    let answer = tokio::select! {
        answer = &mut sent => answer.unwrap_or(Err(ServiceError::TransportClosed)),
        () = server_cancelled.cancelled() => {
            return Err(McpError::invalid_request("cancelled by the server", None));
        }
        () = caller.cancelled.cancelled() => {
            return Err(McpError::invalid_request("the client cancelled its call", None));
        }
    };
    answer.map_err(|error| match error {
        ServiceError::McpError(error) => error,
        other => McpError::internal_error(format!("the client did not answer: {other}"), None),
    })
}

/// Stops a task when dropped: a request no longer awaited, a connection's listen stream.
pub(super) struct AbortOnDrop(pub(super) tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn unexpected(result: &ClientResult) -> McpError {
    let kind = match result {
        ClientResult::CreateMessageResult(_) => "a sampling result",
        ClientResult::ListRootsResult(_) => "a list of roots",
        ClientResult::ElicitResult(_) => "an elicitation result",
        ClientResult::EmptyResult(_) => "an empty result",
        _ => "an unknown result",
    };
    McpError::internal_error(format!("the client answered with {kind}"), None)
}
