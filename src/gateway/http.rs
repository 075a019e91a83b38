//! The HTTP face of the gateway: Streamable HTTP at `/mcp` (stateless by default, sessions with
//! `--stateful`), `POST /mcp/feedback`, `/healthz` and `/metrics`, behind Host/Origin checks,
//! a request-body limit and bearer-key authentication. The web console is served at `/`, and a
//! request carrying the server's own origin (the console's) passes the Origin check, as does a
//! loopback origin when the server itself is bound to a loopback address.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::bail;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::auth::AuthFailure;
use super::edge::{self, Admission, AuthGate};
use super::oauth::Refusal;
use super::respond::error_response;
use super::{AppState, Gateway, Transport};
use crate::config::{Config, HealthDetails, Principal, is_loopback};
use crate::splice::{self, Part};
use crate::tool::ErrorCode;
use crate::tracking::{FeedbackError, FeedbackInput, submit_feedback};

/// How the HTTP server runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpOptions {
    /// Keep MCP sessions (`Mcp-Session-Id`) instead of serving each request on its own.
    pub(crate) stateful: bool,
}

/// Refuse to serve anonymous callers anywhere but on a loopback address.
///
/// # Errors
///
/// When no API key is configured and `addr` is not loopback.
pub(crate) fn check_bind(config: &Config, addr: SocketAddr) -> anyhow::Result<()> {
    if !config.auth.required() && !is_loopback(&addr) {
        bail!(
            "refusing to serve {addr} without API keys: anonymous callers are served on loopback addresses only; \
             add auth.api_keys to orca.yaml (`orca key new` prints one) or bind to 127.0.0.1"
        );
    }
    Ok(())
}

/// The host names a request may carry in `Host` (DNS-rebinding protection).
fn allowed_hosts(config: &Config, addr: SocketAddr) -> Vec<String> {
    match &config.http.allowed_hosts {
        Some(hosts) => hosts.iter().map(|host| host.to_ascii_lowercase()).collect(),
        None => {
            let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
            if !addr.ip().is_unspecified() {
                hosts.push(addr.ip().to_string());
            }
            hosts
        }
    }
}

#[derive(Debug)]
struct Guard {
    hosts: Vec<String>,
    origins: Vec<String>,
    /// Bound to a loopback address: pages served from this machine may call it.
    loopback: bool,
    /// The port orca listens on: a `Host` naming another one is not orca's own address.
    port: u16,
}

/// The request's `Host` when it is orca's own address: a name that `http.allowed_hosts` (or the
/// loopback default) lists by name, not through `*`, with the port orca listens on. Only such a
/// `Host` may go into a URL that orca hands out (the redirect URI of an upstream sign-in without
/// `http.public_url`); the guard puts it in the request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct OwnHost(pub(crate) String);

/// Build the router. `cancel` stops the MCP service's streams on shutdown.
pub(crate) fn router(
    state: AppState,
    addr: SocketAddr,
    options: HttpOptions,
    cancel: CancellationToken,
) -> Router {
    let config = state.config.clone();
    let mcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(options.stateful)
        .with_json_response(!options.stateful)
        .with_max_request_body_bytes(config.http.max_body_bytes)
        .with_cancellation_token(cancel)
        // Host and Origin are checked by `guard` for every route, in one place.
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let factory_state = state.clone();
    let stateful = options.stateful;
    let sessions = Arc::new(LocalSessionManager::default());
    let mcp = StreamableHttpService::new(
        move || {
            let gateway = Gateway::new(factory_state.clone(), Transport::Http);
            // A session's stream keeps what it sent, to send it again to a client that
            // reconnects: its messages carry whole results.
            Ok(if stateful { gateway.without_splicing() } else { gateway })
        },
        sessions.clone(),
        mcp_config,
    );
    let guard = Arc::new(Guard {
        hosts: allowed_hosts(&config, addr),
        origins: config.http.allowed_origins.clone(),
        loopback: addr.ip().is_loopback(),
        port: addr.port(),
    });

    let gate = AuthGate::new(config.clone(), &state.cluster, &state.limits);
    // Stateless, a plain `tools/call` is served without rmcp's server side (`direct`).
    let direct = (!stateful).then(|| Gateway::new(state.clone(), Transport::Http));
    let mcp_route =
        Router::new().route_service("/mcp", SharedMcp(Arc::new(Mcp { service: mcp, direct })));
    let mcp_route = if stateful {
        mcp_route
    } else {
        mcp_route.route_layer(middleware::map_response(splice_body))
    };
    let authenticated = Router::new()
        .merge(mcp_route)
        .route("/mcp/feedback", post(feedback))
        .route("/approvals/{id}", post(approve))
        .route("/console/api/executions", get(super::console::executions))
        .route("/console/api/approvals", get(super::console::approvals))
        .route("/console/api/held-tools", get(super::held_tools::list))
        .route("/console/api/held-tools/approve", post(super::held_tools::approve))
        .route("/console/api/upstreams", get(super::upstream_sign_in::list))
        .route(
            "/console/api/upstreams/{name}/sign-in",
            post(super::upstream_sign_in::start).delete(super::upstream_sign_in::forget),
        )
        .route_layer(middleware::from_fn_with_state(
            BodyCheck {
                max_depth: config.http.max_json_depth,
                max_body_bytes: config.http.max_body_bytes,
                calls: Arc::new(edge::CallLimiter::default()),
                state: state.clone(),
                sessions: stateful.then_some(sessions),
                tokens: (!stateful).then(|| state.session_tokens.clone()),
            },
            check_mcp_body,
        ))
        .route_layer(middleware::from_fn_with_state(
            (gate.clone(), state.clone()),
            require_principal,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), time_request))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            super::replicas::accept_forwarded,
        ));
    Router::new()
        .merge(authenticated)
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/", get(super::console::index))
        .route("/favicon.ico", get(super::console::favicon))
        .route("/console/{file}", get(super::console::asset))
        .route("/console/api/session", get(super::console::session).with_state(gate.clone()))
        .route("/console/api/token", post(super::sign_in::token).with_state(gate.clone()))
        .route("/oauth/upstream/callback", get(super::upstream_sign_in::callback))
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource).with_state(gate.clone()),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource).with_state(gate),
        )
        .merge(client_metadata_documents(&config))
        .layer(DefaultBodyLimit::max(config.http.max_body_bytes))
        .layer(middleware::from_fn_with_state(guard, check_host_and_origin))
        .with_state(state)
}

/// orca's Client ID Metadata Documents, each at the path of an OAuth upstream's
/// `client_metadata_url` (a path ending in `.json`, checked at load), with the console's
/// callback among the redirect URIs when `http.public_url` is set.
fn client_metadata_documents(config: &crate::config::Config) -> Router<AppState> {
    let mut router = Router::new();
    let mut served = std::collections::HashSet::new();
    for server in &config.external.servers {
        let crate::config::ExternalTransport::Http { oauth: Some(oauth), .. } = &server.transport
        else {
            continue;
        };
        let Some(url) = &oauth.client_metadata_url else { continue };
        let Ok(parsed) = url::Url::parse(url) else { continue };
        let path = parsed.path().to_owned();
        if !path.ends_with(".json") || !served.insert(path.clone()) {
            continue;
        }
        let mut document = crate::client::auth::client_metadata_document(url, "orca");
        // People also sign in through the console, which the browser leaves for orca's callback.
        if let Some(base) = &config.http.public_url
            && let Some(uris) = document["redirect_uris"].as_array_mut()
        {
            uris.push(Value::from(format!("{base}/oauth/upstream/callback")));
        }
        router = router.route(&path, get(move || async move { axum::Json(document) }));
    }
    router
}

/// Serve until `shutdown` resolves, then stop accepting, finish open requests and return.
///
/// # Errors
///
/// When the server fails.
pub(crate) async fn serve(
    listener: TcpListener,
    state: AppState,
    options: HttpOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    let cancel = CancellationToken::new();
    let limits = state.config.http.clone();
    let stateful = options.stateful;
    let app = router(state, addr, options, cancel.clone());
    let stop = cancel.clone();
    let served = edge::serve_connections(listener, app, &limits, async move {
        shutdown.await;
        // Stateful sessions keep SSE streams open that would hold the drain to its end, so
        // they are ended at once; stateless calls in flight are left to finish in the drain.
        if stateful {
            stop.cancel();
        }
    })
    .await;
    cancel.cancel();
    served
}

/// A response of `/mcp` with the pre-encoded parts of a result written into it (`splice`): the
/// message as rmcp serialized it, cut at the placeholders, with the bytes (or, in the text block,
/// their escaping, a chunk at a time) in between. Such a body has no length announced beforehand.
async fn splice_body(response: Response) -> Response {
    use axum::body::HttpBody as _;
    use futures::StreamExt;
    let (mut parts, body) = response.into_parts();
    if !splice::any_pending() && body.size_hint().exact().is_some() {
        return Response::from_parts(parts, body);
    }
    let stream = body.into_data_stream().flat_map(|chunk| {
        type Pieces = Box<dyn Iterator<Item = Result<Bytes, axum::Error>> + Send>;
        let pieces: Pieces = match chunk {
            Ok(bytes) => match splice::split(&bytes) {
                Some(spliced) => Box::new(spliced.into_iter().flat_map(Part::chunks).map(Ok)),
                None => Box::new(std::iter::once(Ok(bytes))),
            },
            Err(error) => Box::new(std::iter::once(Err(error))),
        };
        futures::stream::iter(pieces)
    });
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from_stream(stream))
}

async fn check_host_and_origin(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    // Two `Host` headers name two servers: which one a proxy in front routed by is unknown.
    if request.headers().get_all(header::HOST).iter().nth(1).is_some() {
        return error_response(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidInput,
            "the request has more than one Host header",
            Some("send exactly one Host header"),
        );
    }
    let host_header = request.headers().get(header::HOST).and_then(|value| value.to_str().ok());
    let host = host_header.map(host_name);
    let named =
        host.as_deref().is_some_and(|host| guard.hosts.iter().any(|allowed| allowed == host));
    let host_ok = named || guard.hosts.iter().any(|allowed| allowed == "*");
    if !host_ok {
        return error_response(
            StatusCode::FORBIDDEN,
            ErrorCode::Unauthorized,
            "this Host is not allowed",
            Some("add the host name to http.allowed_hosts in orca.yaml"),
        );
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
        let own = host_header.is_some_and(|host| is_own_origin(&origin, host))
            || (guard.loopback && is_loopback_origin(&origin));
        if !own && !guard.origins.iter().any(|allowed| origin_matches(allowed, &origin)) {
            return error_response(
                StatusCode::FORBIDDEN,
                ErrorCode::Unauthorized,
                "this Origin is not allowed",
                Some("add the origin to http.allowed_origins in orca.yaml"),
            );
        }
    }
    let own_host = host_header
        .filter(|host| named && host_port(host) == Some(guard.port))
        .map(|host| OwnHost(host.trim().to_ascii_lowercase()));
    if let Some(own_host) = own_host {
        request.extensions_mut().insert(own_host);
    }
    next.run(request).await
}

/// The port of a `Host` header value: the one it names, else 80; `None` when it names one that
/// is not a port number.
fn host_port(value: &str) -> Option<u16> {
    let value = value.trim();
    let port = match value.strip_prefix('[') {
        Some(rest) => match rest.split_once(']')?.1 {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        },
        None => value.rsplit_once(':').map(|(_, port)| port),
    };
    match port {
        None => Some(80),
        Some(port) if !port.is_empty() && port.bytes().all(|byte| byte.is_ascii_digit()) => {
            port.parse().ok()
        }
        Some(_) => None,
    }
}

/// The host part of a `Host` header value, without port or IPv6 brackets, lowercased.
fn host_name(value: &str) -> String {
    let value = value.trim().to_ascii_lowercase();
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_owned();
    }
    match value.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|byte| byte.is_ascii_digit()) => host.to_owned(),
        _ => value,
    }
}

/// Whether `origin` is this server's own, as the browser reached it: the scheme and exactly the
/// `Host` the request carries (already checked against the allowed hosts), as for the console.
fn is_own_origin(origin: &str, host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    !host.is_empty()
        && ["http://", "https://"]
            .iter()
            .any(|scheme| origin.strip_prefix(scheme).is_some_and(|rest| rest == host))
}

/// Whether `origin` is `http(s)://` a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`) on any
/// port: a page on this machine, which may call a server bound to loopback. A DNS-rebinding page
/// carries its own site's origin, which this refuses.
fn is_loopback_origin(origin: &str) -> bool {
    let Some(authority) =
        ["http://", "https://"].iter().find_map(|scheme| origin.strip_prefix(scheme))
    else {
        return false;
    };
    let (host, port) = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((host, after)) => (host, after),
            None => return false,
        },
        None => match authority.find(':') {
            Some(colon) => authority.split_at(colon),
            None => (authority, ""),
        },
    };
    let port_ok = port.is_empty()
        || port.strip_prefix(':').is_some_and(|digits| {
            !digits.is_empty()
                && digits.len() <= 5
                && digits.bytes().all(|byte| byte.is_ascii_digit())
        });
    let host_ok =
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    port_ok && host_ok
}

/// `allowed` is `scheme://host[:port]`, `scheme://host:*` for any port, or `null`.
fn origin_matches(allowed: &str, origin: &str) -> bool {
    let allowed = allowed.to_ascii_lowercase();
    match allowed.strip_suffix(":*") {
        Some(prefix) => {
            origin == prefix
                || origin.strip_prefix(prefix).and_then(|rest| rest.strip_prefix(':')).is_some_and(
                    |port| !port.is_empty() && port.bytes().all(|byte| byte.is_ascii_digit()),
                )
        }
        None => origin == allowed,
    }
}

/// What `check_mcp_body` needs: the limits of a body and the per-principal call counts.
type McpService = StreamableHttpService<Gateway, LocalSessionManager>;
type McpResponse = <McpService as tower::Service<Request>>::Response;

/// `/mcp`: rmcp's service, and the gateway that serves a stateless `tools/call` itself.
struct Mcp {
    service: McpService,
    direct: Option<Gateway>,
}

/// `/mcp` behind an `Arc`. axum clones a route's service for every request, and so does rmcp's
/// own `call`; each clone of rmcp's service copies its configuration, whose cancellation token
/// takes a lock to clone and again to drop. One `Arc` is cloned instead.
#[derive(Clone)]
struct SharedMcp(Arc<Mcp>);

impl tower::Service<Request> for SharedMcp {
    type Response = McpResponse;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<McpResponse, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let mcp = Arc::clone(&self.0);
        Box::pin(async move {
            let request = match &mcp.direct {
                Some(gateway) => match super::direct::serve(gateway, request).await {
                    Ok(answer) => return Ok(answer),
                    Err(request) => request,
                },
                None => request,
            };
            // rmcp's `get_tool` hook sees the caller through this (`Gateway::get_tool`).
            let caller = request.extensions().get::<Principal>().cloned();
            Ok(super::auth::as_caller(caller, mcp.service.handle(request)).await)
        })
    }
}

#[derive(Clone)]
struct BodyCheck {
    max_depth: usize,
    max_body_bytes: usize,
    /// `calls_per_minute` counted by this replica alone (without `cluster.advertise_url`).
    calls: Arc<edge::CallLimiter>,
    state: AppState,
    /// The sessions of `--stateful` HTTP.
    sessions: Option<Arc<LocalSessionManager>>,
    /// Stateless, the tokens that carry a client's capabilities (`session_token`).
    tokens: Option<super::session_token::Tokens>,
}

/// Refuse a JSON-RPC body sent to `/mcp` that is not UTF-8, nests too deep, is not JSON or is
/// a batch, with a clear 400, before rmcp parses it; a `tools/call` past the caller's
/// `calls_per_minute` with 429; then send what continues another replica's session, task or
/// input round there (`replicas`). Stateless, a client's token of its capabilities is taken
/// off its request (`session_token`), and the answer to its `initialize` carries one.
async fn check_mcp_body(State(check): State<BodyCheck>, request: Request, next: Next) -> Response {
    if request.uri().path() != "/mcp" {
        return next.run(request).await;
    }
    let sessions = check.sessions.as_deref();
    if request.method() != axum::http::Method::POST {
        let (mut parts, body) = request.into_parts();
        let state = &check.state;
        if let Some(answer) =
            super::replicas::continue_elsewhere(state, sessions, &parts, &Bytes::new()).await
        {
            return answer;
        }
        if let Some(tokens) = &check.tokens {
            tokens.admit(&mut parts);
        }
        return next.run(Request::from_parts(parts, body)).await;
    }
    let BodyCheck { max_depth, max_body_bytes, .. } = check;
    let (mut parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return edge::unreadable_body(&error),
    };
    if let Err(problem) = edge::check_json_rpc(&bytes, max_depth) {
        return edge::bad_body(&problem);
    }
    // A stateless client's reply to a request orca wrote on its call's answer.
    if let Some(principal) = parts.extensions.get::<Principal>()
        && super::sampling::delivered(&check.state, principal, &bytes)
    {
        return axum::response::IntoResponse::into_response(StatusCode::ACCEPTED);
    }
    if let Some(principal) = parts.extensions.get::<Principal>()
        && let Some(limit) = principal.calls_per_minute
        && parts.extensions.get::<super::replicas::Forwarded>().is_none()
        && edge::is_tool_call(&bytes)
        && let Some(retry_after) = over_limit(&check, principal, limit).await
    {
        let mut response = error_response(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
            &format!("`{}` may make {limit} tool calls a minute", principal.name),
            Some(
                "wait for Retry-After seconds; the limit is calls_per_minute of the caller's role in auth.roles",
            ),
        );
        if let Ok(value) = HeaderValue::from_str(&retry_after.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let state = &check.state;
    if let Some(answer) = super::replicas::continue_elsewhere(state, sessions, &parts, &bytes).await
    {
        return answer;
    }
    let Some(tokens) = &check.tokens else {
        let starts_session = !parts.headers.contains_key("mcp-session-id");
        let principal = parts.extensions.get::<Principal>().cloned();
        let response = next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await;
        if starts_session {
            super::replicas::note_session(state, principal.as_ref(), response.headers()).await;
        }
        return response;
    };
    tokens.admit(&mut parts);
    let initialize = super::session_token::initialize(&bytes);
    let response = next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await;
    match initialize {
        Some(initialize) => tokens.on_initialize(&initialize, response).await,
        None => response,
    }
}

/// Count one tool call of `principal` against its role's `limit` a minute: with this
/// replica's own count, or, with other replicas, with theirs (`cluster::limits`).
async fn over_limit(check: &BodyCheck, principal: &Principal, limit: u32) -> Option<u64> {
    let identity = principal.identity();
    if check.state.cluster.is_clustered() {
        check.state.limits.admit(&format!("calls:{identity}"), limit).await
    } else {
        check.calls.admit(&identity, limit)
    }
}

/// Record how long the server took to answer an MCP request, authentication included.
async fn time_request(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if request.uri().path() != "/mcp" {
        return next.run(request).await;
    }
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    state.metrics.observe_http_request(started.elapsed());
    response
}

/// Serve a caller whose key is valid; refuse one whose key fails with 401, or with 429 once its
/// address or key is over `http.auth_failures_per_minute`.
async fn require_principal(
    State((gate, state)): State<(AuthGate, AppState)>,
    mut request: Request,
    next: Next,
) -> Response {
    match gate.admit(gate.presented(&request)).await {
        Admission::Admitted(principal) => {
            request.extensions_mut().insert::<Principal>(principal);
            next.run(request).await
        }
        refused @ (Admission::RefusedToken(_) | Admission::InsufficientScope(_)) => {
            record_refused(&state, &request, &refused);
            refusal(&gate, refused)
        }
        refused => refusal(&gate, refused),
    }
}

/// Record a request whose token was refused (at most the throttle's failures per minute and
/// address get this far), naming what it asked for as its `Mcp-Method` and `Mcp-Name` headers
/// say, else its path: the body of a refused request is never read, so that a caller without a
/// credential cannot hold a connection open by announcing a body and not sending it.
fn record_refused(state: &AppState, request: &Request, refused: &Admission) {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.chars().take(200).collect::<String>())
    };
    let method = header("mcp-method").unwrap_or_else(|| request.uri().path().to_owned());
    let tool =
        header("mcp-name").filter(|_| method == "tools/call").unwrap_or_else(|| method.clone());
    let reason = match refused {
        Admission::RefusedToken(reason) => format!("the access token is not valid: {reason}"),
        Admission::InsufficientScope(scopes) => {
            format!("the access token lacks the scope(s) {}", scopes.join(", "))
        }
        _ => return,
    };
    super::record_refused_token(state, &tool, &method, &reason);
}

/// The answer to a request that was not admitted: 401 with a `WWW-Authenticate` challenge (with
/// OAuth, naming the protected-resource metadata and the scope), 403 `insufficient_scope`, 429
/// or 503.
fn refusal(gate: &AuthGate, admission: Admission) -> Response {
    let oauth = gate.verifier();
    let (status, code, message, refusal) = match admission {
        Admission::Admitted(_) => unreachable!("an admitted request is served"),
        Admission::Throttled { retry_after } => return edge::throttled(retry_after),
        Admission::ProofsFull { retry_after } => return edge::proofs_full(retry_after),
        Admission::Unavailable(reason) => {
            tracing::warn!("cannot check a bearer token: {reason}");
            let mut response = error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::UpstreamUnavailable,
                "the authorization server cannot be reached to check the token",
                Some("try again shortly"),
            );
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return response;
        }
        Admission::Refused(AuthFailure::Missing) => (
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            if oauth.is_some() {
                "authorization is required: send `Authorization: Bearer <token>` with an access token from the authorization server named in the protected-resource metadata, or an API key".to_owned()
            } else {
                "an API key is required: send `Authorization: Bearer <key>`".to_owned()
            },
            None,
        ),
        Admission::Refused(AuthFailure::Invalid) => (
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "the API key is not valid".to_owned(),
            None,
        ),
        Admission::RefusedToken(reason) => (
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            format!("the access token is not valid: {reason}"),
            Some(Refusal::Invalid(reason)),
        ),
        Admission::InsufficientScope(scopes) => (
            StatusCode::FORBIDDEN,
            ErrorCode::Unauthorized,
            format!("the access token lacks the scope(s) {}", scopes.join(", ")),
            Some(Refusal::InsufficientScope(scopes)),
        ),
    };
    let mut response = error_response(status, code, &message, None);
    let challenge = match oauth {
        Some(verifier) => HeaderValue::from_str(&verifier.challenge(refusal.as_ref()))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer")),
        None => HeaderValue::from_static("Bearer"),
    };
    response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
    response
}

/// `GET /.well-known/oauth-protected-resource[/mcp]`: orca's protected-resource metadata
/// (RFC 9728), when it accepts OAuth tokens.
async fn protected_resource(State(gate): State<AuthGate>) -> Response {
    match gate.verifier() {
        Some(verifier) => axum::Json(verifier.metadata()).into_response(),
        None => error_response(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "this server accepts API keys, not OAuth tokens (auth.oauth is not configured)",
            None,
        ),
    }
}

async fn feedback(State(state): State<AppState>, request: Request) -> Response {
    let principal = request.extensions().get::<Principal>().cloned();
    let body =
        match axum::body::to_bytes(request.into_body(), state.config.http.max_body_bytes).await {
            Ok(body) => body,
            Err(error) => return edge::unreadable_body(&error),
        };
    feedback_body(&state, principal, &body).await
}

async fn feedback_body(state: &AppState, principal: Option<Principal>, body: &Bytes) -> Response {
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(error) => {
            return error_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidInput,
                &format!("the body is not valid JSON: {error}"),
                Some(
                    r#"send {"feedback_token": "<uuid>", "rating": "up"|"down", "rating_score"?: 1..5, "comment"?: "..."}"#,
                ),
            );
        }
    };
    let input = match FeedbackInput::parse(&value) {
        Ok(input) => input,
        Err(message) => {
            return error_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidInput,
                &message,
                None,
            );
        }
    };
    let user = principal.map(|principal| principal.name);
    match submit_feedback(&state.state_pool, &state.tracker, &input, user.as_deref()).await {
        Ok(row) => (StatusCode::CREATED, axum::Json(row)).into_response(),
        Err(FeedbackError::NotFound) => error_response(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "no execution has this feedback token",
            Some("use the _meta.feedback_token of a tool result"),
        ),
        Err(FeedbackError::Unavailable) => {
            let mut response = error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::UpstreamUnavailable,
                "the feedback store is unavailable",
                Some("try again shortly"),
            );
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            response
        }
        Err(error @ FeedbackError::OtherDatabase { .. }) => error_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidInput,
            &error.to_string(),
            Some(
                "rate a result with its own feedback token, naming the database its call worked on",
            ),
        ),
    }
}

/// `POST /approvals/<id>`: a person approves a write announced by a dry run (with
/// `sql.write_confirmation: human`). The API key must hold every verb the write needs and must
/// not be the one that asked for the write.
async fn approve(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
    request: Request,
) -> Response {
    let Some(principal) = request.extensions().get::<Principal>().cloned() else {
        return error_response(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "an API key is required",
            None,
        );
    };
    let Ok(id) = uuid::Uuid::try_parse(id.trim()) else {
        return error_response(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "no pending approval has this id",
            Some("use the approval_id of an execute_sql dry run"),
        );
    };
    let verbs: Vec<&str> = principal.verbs.iter().map(|verb| verb.as_str()).collect();
    let approver = principal.identity();
    match crate::sql::approve(&state.state_pool, id, (&approver, &principal.name), &verbs).await {
        Ok(request) => {
            (StatusCode::OK, axum::Json(json!({ "approved": true, "request": request })))
                .into_response()
        }
        Err(crate::sql::ApproveError::NotFound(_)) => error_response(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "no pending approval has this id (unknown, expired or already used)",
            Some("use the approval_id of a recent execute_sql dry run"),
        ),
        Err(error @ crate::sql::ApproveError::MissingVerbs(_)) => error_response(
            StatusCode::FORBIDDEN,
            ErrorCode::Unauthorized,
            &error.to_string(),
            Some("approve with an API key that holds these verbs"),
        ),
        Err(error @ crate::sql::ApproveError::OwnRequest(_)) => error_response(
            StatusCode::FORBIDDEN,
            ErrorCode::Unauthorized,
            &error.to_string(),
            Some("approve with the API key of another person who holds the write's verbs"),
        ),
        Err(crate::sql::ApproveError::Unavailable) => {
            let mut response = error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::UpstreamUnavailable,
                "the approval store is unavailable",
                Some("try again shortly"),
            );
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            response
        }
    }
}

/// `GET /healthz`, which answers anyone: with `http.health_details: counts` (the default) how
/// many servers, databases and external servers are in each state; with `names`, each by name.
async fn healthz(State(state): State<AppState>) -> Response {
    let tracker = &state.tracker;
    let database_up = tracker
        .stats()
        .map(|stats| stats.database_healthy.load(std::sync::atomic::Ordering::Relaxed));
    let registry = &state.registry;
    let external = registry.external().map(|external| external.states()).unwrap_or_default();
    let (details, servers, server_status, databases, external) =
        match state.config.http.health_details {
            HealthDetails::Names => (
                "names",
                json!(registry.server_names()),
                Value::Object(registry.server_statuses()),
                Value::Object(registry.database_statuses()),
                Value::Array(external),
            ),
            HealthDetails::Counts => (
                "counts",
                json!(registry.server_names().len()),
                state_counts(registry.server_statuses().values()),
                state_counts(registry.database_statuses().values()),
                state_counts(external.iter().map(|server| &server["state"])),
            ),
        };
    // Which replica answered, and which context files it serves (by database with `names`).
    let mut replica = json!({
        "id": state.cluster.id(),
        "clustered": state.cluster.is_clustered(),
        "context_version": state.databases.context_version(),
    });
    if state.config.http.health_details == HealthDetails::Names {
        replica["context_versions"] = Value::Object(state.databases.context_versions());
    }
    axum::Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "details": details,
        "servers": servers,
        "server_status": server_status,
        "databases": databases,
        "external": external,
        "replica": replica,
        "tracking": {
            "enabled": tracker.is_enabled(),
            "database_up": database_up,
            "queue_depth": tracker.queue_depth(),
            "spill_pending": tracker.spill_pending(),
        }
    }))
    .into_response()
}

/// How many of `statuses` are in each state: a status's words before its first `:` (a status
/// such as `unreachable: cannot connect ...` carries details after it, which are left out).
fn state_counts<'a>(statuses: impl Iterator<Item = &'a Value>) -> Value {
    let mut counts = serde_json::Map::new();
    for status in statuses {
        let text = status.as_str().unwrap_or("unknown");
        let state = text.split(':').next().unwrap_or_default().trim();
        let state = if state.is_empty() { "unknown" } else { state };
        let count = counts.entry(state.to_owned()).or_insert(Value::from(0u64));
        *count = Value::from(count.as_u64().unwrap_or(0) + 1);
    }
    Value::Object(counts)
}

/// `GET /metrics`, which answers anyone: with `http.health_details: counts` (the default) tool
/// calls are summed over the tools and external servers counted by state; with `names`, each
/// tool and external server is named.
async fn metrics(State(state): State<AppState>) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    let names = state.config.http.health_details == HealthDetails::Names;
    let mut body = state.metrics.render(&state.tracker, names);
    if let Some(external) = state.registry.external() {
        if names {
            external.render_metrics(&mut body);
        } else {
            external_counts(&external.states(), &mut body);
        }
    }
    (headers, body).into_response()
}

/// How many external servers are in each state, without their names.
fn external_counts(states: &[Value], out: &mut String) {
    use std::fmt::Write as _;
    out.push_str("# HELP orca_external_servers External servers in each state.\n# TYPE orca_external_servers gauge\n");
    for state in ["starting", "running", "restarting", "crash_loop", "disabled", "stopped"] {
        let count = states.iter().filter(|server| server["state"] == state).count();
        let _ = writeln!(out, "orca_external_servers{{state=\"{state}\"}} {count}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_event_stream_answer_is_spliced_event_by_event() {
        let rows = json!([[1, "\"x\""], [2, null]]);
        let raw = splice::RawJson::from_chunks(vec![serde_json::to_vec(&rows).unwrap()]);
        let placeholder = splice::register(&raw);
        let structured = json!({"rows": placeholder});
        let message = |structured: &Value| {
            json!({"jsonrpc": "2.0", "id": 3, "result": {
                "content": [{"type": "text", "text": structured.to_string()}],
                "structuredContent": structured,
            }})
        };
        // rmcp's SSE body: one frame per event, a notification first, then the answer.
        let events = vec![
            Ok::<_, std::convert::Infallible>(Bytes::from(format!(
                "data: {}\n\n",
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": 1, "progress": 1}})
            ))),
            Ok(Bytes::from(format!("data: {}\n\n", message(&structured)))),
        ];
        let body = axum::body::Body::from_stream(futures::stream::iter(events));
        let response = Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .body(body)
            .unwrap();
        let spliced = splice_body(response).await;
        let bytes = axum::body::to_bytes(spliced.into_body(), usize::MAX).await.unwrap();
        let text = std::str::from_utf8(&bytes).unwrap();
        let answer = text.split("\n\n").nth(1).unwrap().strip_prefix("data: ").unwrap();
        let expected = message(&json!({"rows": rows}));
        assert_eq!(serde_json::from_str::<Value>(answer).unwrap(), expected);
        assert!(!text.contains("orca-splice-"), "{text}");
    }

    #[test]
    fn states_are_counted_without_their_details() {
        let statuses = [
            json!("running"),
            json!("unreachable: cannot connect to db.internal"),
            json!("running"),
            json!(""),
        ];
        assert_eq!(
            state_counts(statuses.iter()),
            json!({"running": 2, "unreachable": 1, "unknown": 1})
        );
    }

    #[test]
    fn host_ports_are_the_named_one_or_80() {
        for (value, port) in [
            ("localhost:9000", Some(9000)),
            ("localhost", Some(80)),
            ("[::1]:9000", Some(9000)),
            ("[::1]", Some(80)),
            ("[::1]x", None),
            ("localhost:", None),
            ("localhost:9x", None),
            ("localhost:99999", None),
        ] {
            assert_eq!(host_port(value), port, "{value}");
        }
    }

    #[test]
    fn host_names_lose_ports_and_brackets() {
        assert_eq!(host_name("LocalHost:9000"), "localhost");
        assert_eq!(host_name("[::1]:9000"), "::1");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("example.com"), "example.com");
    }

    #[test]
    fn the_servers_own_origin_is_the_scheme_and_the_exact_host() {
        assert!(is_own_origin("http://127.0.0.1:9000", "127.0.0.1:9000"));
        assert!(is_own_origin("http://localhost:9000", "LocalHost:9000"));
        assert!(is_own_origin("https://orca.internal", "orca.internal"));
        assert!(!is_own_origin("http://127.0.0.1:9001", "127.0.0.1:9000"));
        assert!(!is_own_origin("http://evil.example", "127.0.0.1:9000"));
        assert!(!is_own_origin("http://127.0.0.1:9000.evil.example", "127.0.0.1:9000"));
        assert!(!is_own_origin("null", "127.0.0.1:9000"));
        assert!(!is_own_origin("http://", ""));
    }

    #[test]
    fn loopback_origins_are_loopback_hosts_on_any_port_and_nothing_else() {
        for origin in [
            "http://127.0.0.1:9000",
            "http://localhost:5173",
            "https://localhost",
            "http://[::1]:8080",
            "http://127.1.2.3:80",
        ] {
            assert!(is_loopback_origin(origin), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:9000",
            "http://127.0.0.1:9000x",
            "http://127.0.0.1:9000/path",
            "http://user@127.0.0.1",
            "http://[::1].evil:80",
            "http://10.0.0.1:9000",
            "ftp://127.0.0.1",
            "null",
            "http://",
        ] {
            assert!(!is_loopback_origin(origin), "{origin}");
        }
    }

    #[test]
    fn origins_match_exactly_or_on_any_port() {
        assert!(origin_matches("http://localhost:*", "http://localhost:3000"));
        assert!(origin_matches("http://localhost:*", "http://localhost"));
        assert!(!origin_matches("http://localhost:*", "http://localhost.evil.com"));
        assert!(!origin_matches("http://localhost:*", "http://localhost:3000x"));
        assert!(origin_matches("https://app.example.com", "https://app.example.com"));
        assert!(!origin_matches("https://app.example.com", "https://app.example.com:8443"));
    }
}
