//! Protections at the HTTP edge that sit below the routes: the accept loop with its connection
//! limit (one more connection is answered 503 and closed), header read timeout, body read
//! timeout (`http.body_timeout_ms`, 408) and refusal of a body declared over the limit (413
//! before anything reads it, so no `100 Continue`), the throttle on failed authentication (429
//! with `Retry-After`, per client address and per presented key, for keys that fail only), and
//! the checks of a JSON-RPC body before rmcp parses it (UTF-8, nesting depth, no batches).
//!
//! # Design notes
//!
//! `edge.rs` holds the protections below the routes: `serve_connections`, the accept loop (hyper's
//! HTTP/1 connections with a header read timeout, a semaphore of `http.max_connections` slots, one
//! more connection answered 503 and closed, graceful shutdown of open connections, bounded by
//! `http.drain_timeout_ms`, after which the connections still open are dropped and their calls
//! cancelled), `AuthGate` with its `AuthThrottle` (the key is checked first, the same constant-time
//! way for every request, and a valid key is served whatever its address; failures are counted per
//! client address and per presented key for a minute, and past `http.auth_failures_per_minute` a
//! failing key gets 429 with `Retry-After`, the same answer whatever the key, instead of 401; one
//! lock checks and counts, so requests in flight at once cannot overrun the limit), and
//! `check_json_rpc` (a `/mcp` body must be UTF-8, nest no deeper than `http.max_json_depth`, parse
//! as JSON and not be a batch, else 400 with a JSON-RPC error), used by `http.rs`'s middleware.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::Service;

use super::auth::{AuthFailure, authenticate};
use super::forwarded::client_address;
use super::oauth::{Refusal, TokenIdentity, Verifier};
use crate::cluster::Cluster;
use crate::cluster::limits::SharedLimits;
use crate::config::{Config, HttpConfig, Principal};
use crate::tool::{ErrorCode, ToolError};

/// How many throttle entries are kept at most; past it, expired ones are dropped first and new
/// keys are then left untracked (the per-address limit still holds).
const MAX_THROTTLE_ENTRIES: usize = 100_000;

/// The window failed authentications are counted in.
const THROTTLE_WINDOW: Duration = Duration::from_secs(60);

/// Serve `app` on `listener` until `shutdown` resolves, then stop accepting, let open
/// connections finish their requests (for at most `http.drain_timeout_ms`) and return.
///
/// # Errors
///
/// Never today; accept errors are logged and the loop goes on.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: &HttpConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let cut_off = CancellationToken::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, mostly: wait a little rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tokio::spawn(refuse(stream));
            continue;
        };
        let router = app.clone();
        let (max_body_bytes, body_timeout) = (limits.max_body_bytes, limits.body_timeout);
        let service =
            hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                let mut router = router.clone();
                async move {
                    // Refused before anything reads the body, so no `100 Continue` invites it.
                    if declared_length(&request).is_some_and(|length| length > max_body_bytes) {
                        return Ok(too_large());
                    }
                    let request = request.map(|body| Body::new(Deadline::new(body, body_timeout)));
                    Ok::<_, Infallible>(router.call(request).await.into_response())
                }
            });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        let cut_off = cut_off.clone();
        tokio::spawn(async move {
            // The cut-off is looked at first: once the drain is over, a call that ends meanwhile
            // (its upstream stopped at shutdown) is not answered on a connection being dropped.
            tokio::select! {
                biased;
                () = cut_off.cancelled() => {}
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%error, "an HTTP connection ended with an error");
                },
            }
            drop(slot);
        });
    }
    drop(listener);
    // Requests already being served get `http.drain_timeout_ms` to finish; the connections
    // still open then are dropped, which cancels their calls.
    let drained = tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await;
    if drained.is_err() {
        cut_off.cancel();
        tracing::warn!(
            "open requests did not finish within http.drain_timeout_ms ({} ms); cancelling them",
            limits.drain_timeout.as_millis()
        );
    }
    Ok(())
}

/// Answer a connection over the limit with 503 and close it, reading what the client sent
/// meanwhile so that the close does not reset the answer away.
async fn refuse(mut stream: TcpStream) {
    let body = ToolError::new(ErrorCode::UpstreamUnavailable, "too many open connections")
        .with_hint("retry shortly; the limit is http.max_connections in orca.yaml")
        .to_json(&uuid::Uuid::new_v4().simple().to_string())
        .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// The length a request's `Content-Length` declares (hyper has refused a request with two that
/// differ, or one that is not a number).
fn declared_length<B>(request: &Request<B>) -> Option<usize> {
    let value = request.headers().get(header::CONTENT_LENGTH)?.to_str().ok()?;
    Some(
        value
            .trim()
            .parse::<u64>()
            .ok()
            .map_or(usize::MAX, |length| usize::try_from(length).unwrap_or(usize::MAX)),
    )
}

/// The 413 answer to a body larger than `http.max_body_bytes`, declared or read.
pub(crate) fn too_large() -> Response {
    let mut response = super::respond::error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::InvalidInput,
        "the request body is too large",
        Some("the limit is http.max_body_bytes in orca.yaml"),
    );
    // The body is left unread: the connection cannot carry another request.
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request body that fails with [`BodyTimedOut`] once `timeout` has passed since it was first
/// asked for a frame, so that a client that announces a body and never sends it holds its
/// connection for `http.body_timeout_ms` at most. The clock starts at the first read, not at the
/// request's arrival: authentication (a key set fetched from an issuer) comes before the body is
/// read and does not eat into its time; a request refused before its body is read is answered
/// without it, and its connection is closed.
struct Deadline<B> {
    inner: B,
    timeout: Duration,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    timed_out: bool,
}

impl<B> Deadline<B> {
    fn new(inner: B, timeout: Duration) -> Deadline<B> {
        Deadline { inner, timeout, sleep: None, timed_out: false }
    }
}

/// The error of a body that did not arrive within `http.body_timeout_ms`.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time (http.body_timeout_ms)")]
pub(crate) struct BodyTimedOut;

impl<B> http_body::Body for Deadline<B>
where
    B: http_body::Body<Data = axum::body::Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(None);
        }
        let timeout = this.timeout;
        let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if let Poll::Ready(frame) = std::pin::Pin::new(&mut this.inner).poll_frame(context) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if sleep.as_mut().poll(context).is_ready() {
            this.timed_out = true;
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.timed_out || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Whether reading a body failed because it did not arrive within `http.body_timeout_ms`.
pub(crate) fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<BodyTimedOut>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// The answer to a body that could not be read: 408 when it did not arrive in time, 413 when
/// it is larger than `http.max_body_bytes` (or was cut off).
pub(crate) fn unreadable_body(error: &axum::Error) -> Response {
    if !timed_out(error) {
        return too_large();
    }
    let mut response = super::respond::error_response(
        StatusCode::REQUEST_TIMEOUT,
        ErrorCode::Timeout,
        "the request body did not arrive in time",
        Some("send the body with the request; the limit is http.body_timeout_ms in orca.yaml"),
    );
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ThrottleKey {
    Address(IpAddr),
    Key([u8; 32]),
}

/// What happened in one minute: failed authentications, or tool calls.
#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    count: usize,
}

/// Failed authentications counted per client address and per presented key over a minute;
/// past the limit, a further failure from that address or with that key is answered 429 until
/// the minute ends. Only failures are looked at here: a valid key never reaches the throttle.
#[derive(Debug)]
pub(crate) struct AuthThrottle {
    limit: usize,
    entries: Mutex<HashMap<ThrottleKey, Window>>,
}

impl AuthThrottle {
    pub(crate) fn new(limit: usize) -> AuthThrottle {
        AuthThrottle { limit, entries: Mutex::new(HashMap::new()) }
    }

    /// The keys a failure counts under, as the replicas name them together.
    fn shared_keys(client: Option<IpAddr>, authorization: Option<&str>) -> Vec<String> {
        Self::keys(client, authorization)
            .into_iter()
            .map(|key| match key {
                ThrottleKey::Address(address) => format!("auth-address:{address}"),
                ThrottleKey::Key(hash) => format!("auth-key:{}", hex::encode(hash)),
            })
            .collect()
    }

    fn keys(client: Option<IpAddr>, authorization: Option<&str>) -> Vec<ThrottleKey> {
        let mut keys = Vec::with_capacity(2);
        if let Some(client) = client {
            keys.push(ThrottleKey::Address(client));
        }
        if let Some(value) = authorization {
            keys.push(ThrottleKey::Key(Sha256::digest(value.trim().as_bytes()).into()));
        }
        keys
    }

    /// A failed authentication: when the address or the key is already over the limit, the
    /// seconds until it may try again (and the failure is not counted); else the failure is
    /// counted against both and `None` returned. One lock for both, so that requests in flight
    /// at once cannot all pass the check before any is counted.
    /// The seconds `client` must still wait when its address is over the limit, without
    /// counting anything.
    fn waiting(&self, client: Option<IpAddr>) -> Option<u64> {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let window = entries.get(&ThrottleKey::Address(client?))?;
        let elapsed = now.duration_since(window.started);
        (window.count >= self.limit && elapsed < THROTTLE_WINDOW)
            .then(|| THROTTLE_WINDOW.saturating_sub(elapsed).as_secs() + 1)
    }

    pub(crate) fn fail(&self, client: Option<IpAddr>, authorization: Option<&str>) -> Option<u64> {
        let now = Instant::now();
        let keys = Self::keys(client, authorization);
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let wait = keys
            .iter()
            .filter_map(|key| entries.get(key))
            .filter(|window| {
                window.count >= self.limit && now.duration_since(window.started) < THROTTLE_WINDOW
            })
            .map(|window| {
                let left = THROTTLE_WINDOW.saturating_sub(now.duration_since(window.started));
                left.as_secs() + 1
            })
            .max();
        if wait.is_some() {
            return wait;
        }
        if entries.len() >= MAX_THROTTLE_ENTRIES {
            entries.retain(|_, window| now.duration_since(window.started) < THROTTLE_WINDOW);
        }
        for key in keys {
            let tracked = entries.contains_key(&key);
            if !tracked
                && entries.len() >= MAX_THROTTLE_ENTRIES
                && matches!(key, ThrottleKey::Key(_))
            {
                continue;
            }
            let window = entries.entry(key).or_insert(Window { started: now, count: 0 });
            if now.duration_since(window.started) >= THROTTLE_WINDOW {
                *window = Window { started: now, count: 0 };
            }
            window.count += 1;
        }
        None
    }
}

/// What a request presents to authentication, taken from it before any waiting.
#[derive(Debug)]
pub(crate) struct Presented {
    authorization: Option<String>,
    /// The `DPoP` header, when there is exactly one, with the request as the proof must name
    /// it (taken only then: most requests carry no proof).
    dpop: Option<(String, super::dpop::Target)>,
    client: Option<IpAddr>,
    /// Forwarded by another replica, which checked its proof and counted it.
    forwarded: bool,
}

/// What is decided about a request's key.
#[derive(Debug)]
pub(crate) enum Admission {
    /// The key is valid (or orca has no keys): the caller is served, whatever the throttle holds
    /// for its address.
    Admitted(Principal),
    /// The key failed, and the failure was counted.
    Refused(AuthFailure),
    /// The key failed from an address, or is one, over the limit: the same answer for any key
    /// that fails, so it says nothing a 401 would not.
    Throttled { retry_after: u64 },
    /// A bearer JWT that is not acceptable, and why; counted like a wrong key.
    RefusedToken(String),
    /// A valid token without the scopes orca requires (403, so the client can step up).
    InsufficientScope(Vec<String>),
    /// The issuer's keys cannot be had, so the token cannot be checked (503).
    Unavailable(String),
    /// The memory of seen DPoP proofs is full (429 with `Retry-After`); not counted as a
    /// failure: the caller's proof may be good.
    ProofsFull { retry_after: u64 },
}

/// Authentication with the throttle: the key is checked first, always the same way (SHA-256 and
/// a constant-time comparison with every configured hash), and only a failure meets the
/// throttle, so that callers sharing an address (a NAT, a reverse proxy) cannot lock each other
/// out with wrong keys.
/// With `auth.oauth`, a bearer credential shaped like a JWT is checked as an OAuth access token
/// (`oauth::Verifier`) and an invalid one counts toward the throttle like a wrong key.
/// With other replicas (`cluster.advertise_url`), failures are counted with theirs in
/// PostgreSQL (`cluster::limits`), and so are the DPoP proofs seen.
#[derive(Debug, Clone)]
pub(crate) struct AuthGate {
    config: Arc<Config>,
    throttle: Arc<AuthThrottle>,
    /// The counters the replicas share, when there are other replicas.
    shared: Option<Arc<SharedLimits>>,
    verifier: Option<Arc<Verifier>>,
}

impl AuthGate {
    pub(crate) fn new(
        config: Arc<Config>,
        cluster: &Cluster,
        limits: &Arc<SharedLimits>,
    ) -> AuthGate {
        let throttle = Arc::new(AuthThrottle::new(config.http.auth_failures_per_minute));
        let shared = cluster.is_clustered().then(|| limits.clone());
        let verifier = config.auth.oauth.clone().map(|oauth| {
            let verifier = Verifier::new(oauth);
            Arc::new(if cluster.is_clustered() {
                verifier.with_shared_replays(cluster.pool().clone())
            } else {
                verifier
            })
        });
        AuthGate { config, throttle, shared, verifier }
    }

    /// Count a failed authentication: `Some(seconds to wait)` when the address or the key is
    /// over the limit (counted by this replica alone, or by every replica together).
    async fn fail(&self, client: Option<IpAddr>, authorization: Option<&str>) -> Option<u64> {
        let Some(shared) = &self.shared else { return self.throttle.fail(client, authorization) };
        let limit = u32::try_from(self.config.http.auth_failures_per_minute).unwrap_or(u32::MAX);
        let keys = AuthThrottle::shared_keys(client, authorization);
        if let Some(wait) = keys.iter().filter_map(|key| shared.exhausted(key)).max() {
            return Some(wait);
        }
        let mut wait = None;
        for key in &keys {
            wait = wait.max(shared.fail(key, limit).await);
        }
        wait
    }

    /// Whether callers need an API key or a token.
    pub(crate) fn keys_required(&self) -> bool {
        self.config.auth.required()
    }

    /// The OAuth verifier, when orca accepts tokens.
    pub(crate) fn verifier(&self) -> Option<&Verifier> {
        self.verifier.as_deref()
    }

    /// What `request` presents: its `Authorization` and the address its failures count under.
    pub(crate) fn presented(&self, request: &Request) -> Presented {
        let headers = request.headers();
        let mut proofs = headers.get_all("dpop").iter();
        let proof = match (proofs.next(), proofs.next()) {
            (Some(proof), None) => proof.to_str().ok(),
            _ => None,
        };
        let dpop = proof.map(|proof| {
            let target = super::dpop::Target {
                method: request.method().as_str().to_owned(),
                // HTTP/2 names the authority in the URI rather than a Host header.
                host: headers
                    .get(header::HOST)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned)
                    .or_else(|| request.uri().authority().map(ToString::to_string)),
                path: request.uri().path().to_owned(),
            };
            (proof.to_owned(), target)
        });
        Presented {
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            dpop,
            client: self.client(request),
            forwarded: request.extensions().get::<super::replicas::Forwarded>().is_some(),
        }
    }

    /// The decision for a request; a missing or malformed `Authorization` counts as a failure.
    pub(crate) async fn admit(&self, presented: Presented) -> Admission {
        let Presented { authorization, dpop, client, forwarded } = presented;
        let authorization = authorization.as_deref();
        if let Some(verifier) = &self.verifier
            && let Some((scheme, token)) = authorization.and_then(token_of)
            && Verifier::looks_like_jwt(token)
        {
            let nowhere = super::dpop::Target::default();
            let (proof, target) = match &dpop {
                Some((proof, target)) => (Some(proof.as_str()), target),
                None => (None, &nowhere),
            };
            let presentation = super::dpop::Presentation { scheme, token, proof, target };
            return match verifier.verify_presented(presentation, forwarded).await {
                Ok(identity) => Admission::Admitted(self.token_principal(&identity)),
                Err(Refusal::InsufficientScope(scopes)) => Admission::InsufficientScope(scopes),
                Err(Refusal::Unavailable(reason)) => Admission::Unavailable(reason),
                Err(Refusal::ProofsFull { retry_after }) => Admission::ProofsFull { retry_after },
                Err(Refusal::Invalid(reason)) => match self.fail(client, authorization).await {
                    Some(retry_after) => Admission::Throttled { retry_after },
                    None => Admission::RefusedToken(reason),
                },
            };
        }
        match authenticate(&self.config.auth, authorization) {
            Ok(principal) => Admission::Admitted(principal),
            Err(failure) => match self.fail(client, authorization).await {
                Some(retry_after) => Admission::Throttled { retry_after },
                None => Admission::Refused(failure),
            },
        }
    }

    /// The principal of a valid token: its user, with the verbs, tools and rate limit of the
    /// roles it holds among `auth.roles` (`read` and every tool when no roles are configured),
    /// its client, and those roles (see [`held_roles`]).
    fn token_principal(&self, identity: &TokenIdentity) -> Principal {
        let roles = &self.config.auth.roles;
        let mut principal = if roles.is_empty() {
            Principal::new(
                identity.user.clone(),
                std::collections::BTreeSet::from([crate::tool::Verb::Read]),
            )
        } else {
            Principal::with_roles(
                identity.user.clone(),
                identity.roles.iter().filter_map(|role| roles.get(role)),
            )
        };
        principal.client = identity.client.clone();
        principal.role = held_roles(&identity.roles, roles);
        principal.issuer = self.config.auth.oauth.as_ref().map(|oauth| oauth.issuer.clone());
        principal.kind = crate::config::PrincipalKind::Token;
        principal
    }

    /// The decision for a request that may carry no key at all (the console asking whether one
    /// is needed): without an `Authorization` header nothing is guessed, so nothing is counted.
    pub(crate) async fn admit_presented(&self, presented: Presented) -> Admission {
        if presented.authorization.is_some() {
            return self.admit(presented).await;
        }
        match authenticate(&self.config.auth, None) {
            Ok(principal) => Admission::Admitted(principal),
            Err(failure) => Admission::Refused(failure),
        }
    }

    /// For the console's code exchange: the seconds the address of `request` must still wait,
    /// when it is over the failed-authentication limit.
    pub(crate) fn waiting(&self, client: Option<IpAddr>) -> Option<u64> {
        match &self.shared {
            Some(shared) => shared.exhausted(&AuthThrottle::shared_keys(client, None).pop()?),
            None => self.throttle.waiting(client),
        }
    }

    /// Count a failed code exchange from `client` as a failed authentication.
    pub(crate) async fn count_failure(&self, client: Option<IpAddr>) {
        let _ = self.fail(client, None).await;
    }

    /// The address failures are counted under: the peer, or the client a trusted proxy names.
    pub(crate) fn client(&self, request: &Request) -> Option<IpAddr> {
        if let Some(forwarded) = request.extensions().get::<super::replicas::Forwarded>() {
            return forwarded.client;
        }
        let peer = request.extensions().get::<ConnectInfo<SocketAddr>>()?.0.ip();
        Some(client_address(peer, request.headers(), &self.config.http.trusted_proxies))
    }
}

/// The 429 answer of a throttled caller.
pub(crate) fn throttled(retry_after: u64) -> Response {
    let mut response = super::respond::error_response(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
        "too many failed authentications from this address or with this key",
        Some(
            "wait for Retry-After seconds; the limit is http.auth_failures_per_minute in orca.yaml",
        ),
    );
    if let Ok(value) = HeaderValue::from_str(&retry_after.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The 429 answer of a request whose DPoP proof the memory of seen proofs cannot take.
pub(crate) fn proofs_full(retry_after: u64) -> Response {
    let mut response = super::respond::error_response(
        StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::RateLimited,
        "too many DPoP proofs were presented in the last five minutes for orca to remember another, so this one cannot be told from a replay",
        Some("retry after Retry-After seconds with a fresh proof"),
    );
    if let Ok(value) = HeaderValue::from_str(&retry_after.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// Why a JSON-RPC body is refused before parsing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum BodyProblem {
    #[error("the body is not valid UTF-8 (invalid byte at offset {0})")]
    NotUtf8(usize),
    #[error("the body nests arrays and objects deeper than {0} levels")]
    TooDeep(usize),
    #[error("the body is not valid JSON: {0}")]
    NotJson(String),
    #[error("JSON-RPC batches are not accepted: send one message per request")]
    Batch,
}

impl BodyProblem {
    /// The JSON-RPC error code: -32700 (parse error) or -32600 (invalid request).
    fn rpc_code(&self) -> i64 {
        match self {
            BodyProblem::Batch => -32600,
            _ => -32700,
        }
    }
}

/// Check a JSON-RPC body: valid UTF-8, nesting no deeper than `max_depth`, valid JSON, and one
/// message rather than a batch. The depth is measured before parsing, without recursion.
pub(crate) fn check_json_rpc(body: &[u8], max_depth: usize) -> Result<(), BodyProblem> {
    if let Err(error) = std::str::from_utf8(body) {
        return Err(BodyProblem::NotUtf8(error.valid_up_to()));
    }
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in body {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Err(BodyProblem::TooDeep(max_depth));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    // Checked for syntax without building a tree (rmcp parses the body next), numbers included:
    // `IgnoredAny` would skip a number like `1e999` that rmcp's parser then refuses.
    match serde_json::from_slice::<Checked>(body) {
        Ok(_) if body.trim_ascii_start().starts_with(b"[") => Err(BodyProblem::Batch),
        Ok(_) => Ok(()),
        Err(error) => Err(BodyProblem::NotJson(error.to_string())),
    }
}

/// Any JSON value, checked as a parser into `serde_json::Value` checks it (every number in
/// range) without building it.
struct Checked;

impl<'de> serde::Deserialize<'de> for Checked {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
        deserializer.deserialize_any(Checked)
    }
}

impl<'de> serde::de::Visitor<'de> for Checked {
    type Value = Checked;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Checked, A::Error> {
        while items.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut entries: A) -> Result<Checked, A::Error> {
        while entries.next_entry::<serde::de::IgnoredAny, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// The 400 answer for a refused body, as a JSON-RPC error whose data is the taxonomy's object.
pub(crate) fn bad_body(problem: &BodyProblem) -> Response {
    let error = ToolError::new(ErrorCode::InvalidInput, problem.to_string())
        .with_hint("send one JSON-RPC message per request, as UTF-8 JSON");
    let data = error.to_json(&uuid::Uuid::new_v4().simple().to_string());
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": problem.rpc_code(), "message": problem.to_string(), "data": data },
    });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// Tool calls per principal in the current minute, for roles with `calls_per_minute`.
#[derive(Debug, Default)]
pub(crate) struct CallLimiter {
    windows: Mutex<HashMap<String, Window>>,
}

impl CallLimiter {
    /// Count one call of the principal whose identity is `principal` (`Principal::identity`:
    /// an API key and a token user of one name are counted apart); `Some(seconds to wait)` when
    /// it is over `limit` this minute (the call is then not counted).
    pub(crate) fn admit(&self, principal: &str, limit: u32) -> Option<u64> {
        let now = Instant::now();
        let mut windows = self.windows.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if windows.len() >= MAX_THROTTLE_ENTRIES && !windows.contains_key(principal) {
            windows.retain(|_, window| now.duration_since(window.started) < THROTTLE_WINDOW);
        }
        let window =
            windows.entry(principal.to_owned()).or_insert(Window { started: now, count: 0 });
        if now.duration_since(window.started) >= THROTTLE_WINDOW {
            *window = Window { started: now, count: 0 };
        }
        if window.count >= usize::try_from(limit).unwrap_or(usize::MAX) {
            let left = THROTTLE_WINDOW.saturating_sub(now.duration_since(window.started));
            return Some(left.as_secs() + 1);
        }
        window.count += 1;
        None
    }
}

/// Whether a JSON-RPC body (already checked) is a `tools/call` request.
pub(crate) fn is_tool_call(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method<'_>>(body)
        .is_ok_and(|message| message.method.as_deref() == Some("tools/call"))
}

/// The roles of `configured` that a token holds, in the token's order and each once, joined
/// with `,`: together they gave the token its verbs, so one of them allowed each call it makes.
/// `None` when it holds none of them.
fn held_roles<Role>(
    token_roles: &[String],
    configured: &std::collections::BTreeMap<String, Role>,
) -> Option<String> {
    let mut held: Vec<&str> = Vec::new();
    for role in token_roles {
        if configured.contains_key(role) && !held.contains(&role.as_str()) {
            held.push(role);
        }
    }
    (!held.is_empty()).then(|| held.join(","))
}

/// The token of `Bearer <token>` or `DPoP <token>`, with its scheme.
fn token_of(authorization: &str) -> Option<(super::dpop::Scheme, &str)> {
    let (scheme, credential) = authorization.trim().split_once(' ')?;
    let scheme = if scheme.eq_ignore_ascii_case("bearer") {
        super::dpop::Scheme::Bearer
    } else if scheme.eq_ignore_ascii_case("dpop") {
        super::dpop::Scheme::Dpop
    } else {
        return None;
    };
    Some((scheme, credential.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_checked_for_utf8_depth_json_and_batches() {
        assert_eq!(check_json_rpc(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, 8), Ok(()));
        assert_eq!(check_json_rpc(b"{\"a\":\"\xff\"}", 8), Err(BodyProblem::NotUtf8(6)));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(check_json_rpc(deep.as_bytes(), 64), Err(BodyProblem::TooDeep(64)));
        assert_eq!(check_json_rpc(br#"{"a":"[[[[[[[[[[[["}"#, 2), Ok(()));
        assert_eq!(check_json_rpc(br#"{"a":"\"[[[[[[["}"#, 2), Ok(()));
        assert_eq!(check_json_rpc(br#"[{"jsonrpc":"2.0"}]"#, 8), Err(BodyProblem::Batch));
        assert!(matches!(check_json_rpc(b"{nope", 8), Err(BodyProblem::NotJson(_))));
        // A number out of range is refused here, as the parser behind the edge would refuse it
        // (found by fuzzing: fuzz/regressions/http_body/).
        let huge = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":2e222222222222}}"#;
        assert!(matches!(check_json_rpc(huge, 8), Err(BodyProblem::NotJson(_))));
        assert!(matches!(check_json_rpc(b"2e222222222222", 8), Err(BodyProblem::NotJson(_))));
    }

    #[test]
    fn a_tokens_role_names_the_configured_roles_it_holds_in_its_order() {
        let configured: std::collections::BTreeMap<String, ()> =
            ["admin", "analyst"].map(|name| (name.to_owned(), ())).into();
        let cases: [(&[&str], Option<&str>); 5] = [
            (&["analyst"], Some("analyst")),
            (&["admin", "staff"], Some("admin")),
            (&["staff", "analyst", "admin", "analyst"], Some("analyst,admin")),
            (&["staff"], None),
            (&[], None),
        ];
        for (token_roles, expected) in cases {
            let token_roles: Vec<String> =
                token_roles.iter().map(|role| (*role).to_owned()).collect();
            assert_eq!(
                held_roles(&token_roles, &configured).as_deref(),
                expected,
                "{token_roles:?}"
            );
        }
    }

    #[test]
    fn the_throttle_blocks_failures_from_an_address_or_with_a_key_past_the_limit() {
        let throttle = AuthThrottle::new(3);
        let guesser: IpAddr = "127.0.0.2".parse().unwrap();
        let other: IpAddr = "127.0.0.3".parse().unwrap();
        for attempt in 0..3 {
            assert_eq!(
                throttle.fail(Some(guesser), Some(&format!("Bearer guess-{attempt}"))),
                None
            );
        }
        let wait = throttle.fail(Some(guesser), Some("Bearer guess-3")).unwrap();
        assert!((1..=60).contains(&wait));
        assert!(throttle.fail(Some(guesser), None).is_some(), "a missing key is a failure too");
        assert_eq!(throttle.fail(Some(other), Some("Bearer guess-3")), None);
        for _ in 0..2 {
            throttle.fail(Some(other), Some("Bearer same"));
        }
        let third: IpAddr = "127.0.0.4".parse().unwrap();
        assert_eq!(throttle.fail(Some(third), Some("Bearer same")), None);
        assert!(throttle.fail(Some(third), Some("Bearer same")).is_some(), "the key is over");
        assert_eq!(throttle.fail(Some(third), Some("Bearer different")), None);
    }
}
