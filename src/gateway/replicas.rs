//! Replicas at the HTTP edge: a request that continues what another replica holds (a
//! `--stateful` session, a task, an input round's `requestState`) is forwarded to it, and a
//! request another replica forwarded is accepted with the client's address it vouches for.
//!
//! The replica a load balancer picked authenticates the request, counts it against the
//! caller's limits and checks its body, then looks for what it continues (`cluster::Cluster`
//! says where each lives) and, when it lives elsewhere, sends it there signed (`Forwarded`):
//! that replica authenticates it again (without counting its DPoP proof or its call a second
//! time) and answers, and the answer streams back as it comes. When the replica that held it
//! is gone, the request is answered here at once: a session is 404 (the client starts a new
//! one), a task is `failed` and an input round refused, each saying why, and the call is
//! recorded (`tasks.rs`, `input_required.rs`).

use std::net::IpAddr;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt as _;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use sha2::{Digest, Sha256};

use super::AppState;
use super::respond::error_response;
use crate::cluster::{CLIENT_HEADER, Cluster, FORWARDED_HEADER, Item, Owner};
use crate::config::Principal;
use crate::tool::ErrorCode;

/// How long a forward waits to reach the other replica (its answer may take as long as the
/// call does).
const CONNECT_WITHIN: Duration = Duration::from_secs(2);

/// A request another replica of this orca forwarded, with the client's address it vouched for.
#[derive(Debug, Clone)]
pub(crate) struct Forwarded {
    pub(crate) client: Option<IpAddr>,
}

const SESSION_HEADER: &str = "mcp-session-id";

/// What a request's signature binds besides its method, path and address: the credential it
/// presents, so that the signature cannot vouch for another.
fn credential(headers: &HeaderMap) -> Vec<u8> {
    let mut hash = Sha256::new();
    for name in ["authorization", "dpop"] {
        for value in headers.get_all(name) {
            hash.update(value.as_bytes());
            hash.update([0]);
        }
        hash.update([1]);
    }
    hash.finalize().to_vec()
}

/// Accept a request another replica forwarded when its signature holds (403 when it does not:
/// the replicas must share `ORCA_SECRET`); the headers that vouch for it never reach anything
/// else, whoever sent them.
pub(crate) async fn accept_forwarded(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let signature = request.headers_mut().remove(FORWARDED_HEADER);
    let client = request.headers_mut().remove(CLIENT_HEADER);
    let Some(signature) = signature else { return next.run(request).await };
    let client = client.as_ref().and_then(|value| value.to_str().ok()).unwrap_or_default();
    let from = signature.to_str().ok().and_then(|signature| {
        state.cluster.verify(
            signature,
            request.method().as_str(),
            request.uri().path(),
            client,
            &credential(request.headers()),
        )
    });
    let Some(from) = from else {
        tracing::warn!(
            "refused a request signed as forwarded by another replica: the signature does not hold"
        );
        return error_response(
            StatusCode::FORBIDDEN,
            ErrorCode::Unauthorized,
            "the request is signed as forwarded by another replica, and the signature does not hold",
            Some("replicas of one orca must share ORCA_SECRET and their clocks"),
        );
    };
    tracing::debug!(from = %from, "serving a request another replica forwarded");
    let forwarded = Forwarded { client: client.parse().ok() };
    request.extensions_mut().insert(forwarded);
    next.run(request).await
}

/// Where a request goes: answered here, or forwarded to the replica `replica` at `url`.
enum Destination {
    Here,
    Elsewhere {
        replica: String,
        url: String,
    },
    /// A session whose replica is gone.
    SessionGone,
}

/// What a JSON-RPC request names that may live in another replica.
#[derive(serde::Deserialize)]
struct Peek {
    method: Option<String>,
    params: Option<PeekParams>,
}

#[derive(serde::Deserialize)]
struct PeekParams {
    #[serde(rename = "taskId")]
    task_id: Option<String>,
    #[serde(rename = "requestState")]
    request_state: Option<String>,
}

async fn destination(
    cluster: &Cluster,
    sessions: Option<&LocalSessionManager>,
    parts: &Parts,
    body: &[u8],
) -> Destination {
    let session = parts.headers.get(SESSION_HEADER).and_then(|value| value.to_str().ok());
    // Stateless (no sessions), an `Mcp-Session-Id` is a token any replica verifies.
    if let Some(sessions) = sessions
        && let Some(session) = session
        && !sessions.has_session(&session.to_owned().into()).await.unwrap_or(true)
    {
        return match cluster.owner_of(Item::Session, session).await.0 {
            Owner::Here => Destination::Here,
            Owner::Elsewhere { replica, url } => Destination::Elsewhere { replica, url },
            Owner::Gone { .. } => Destination::SessionGone,
        };
    }
    let Ok(Peek { method, params: Some(params) }) = serde_json::from_slice::<Peek>(body) else {
        return Destination::Here;
    };
    let owner = if let Some(task) = params
        .task_id
        .filter(|_| method.as_deref().is_some_and(|method| method.starts_with("tasks/")))
    {
        cluster.owner_of(Item::Task, &task).await.0
    } else if let Some(state) = params.request_state
        && let Some((replica, _)) = crate::cluster::untag_state(&state)
    {
        cluster.replica(replica).await
    } else {
        return Destination::Here;
    };
    match owner {
        Owner::Elsewhere { replica, url } => Destination::Elsewhere { replica, url },
        // Gone: answered here, where what it continues is known to be lost.
        Owner::Here | Owner::Gone { .. } => Destination::Here,
    }
}

/// The answer to a request that continues what another replica holds, when it does; `None`:
/// serve it here. Requests another replica forwarded are always served here. `sessions`: those
/// of `--stateful` HTTP.
pub(crate) async fn continue_elsewhere(
    state: &AppState,
    sessions: Option<&LocalSessionManager>,
    parts: &Parts,
    body: &Bytes,
) -> Option<Response> {
    let cluster = &state.cluster;
    if !cluster.is_clustered() || parts.extensions.get::<Forwarded>().is_some() {
        return None;
    }
    match destination(cluster, sessions, parts, body).await {
        Destination::Here => None,
        Destination::SessionGone => Some(error_response(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "the session ended: the replica that held it has stopped",
            Some("initialize a new session"),
        )),
        // A replica that cannot be reached has stopped: what it held is answered here as lost.
        Destination::Elsewhere { replica, url } => {
            forward(state, parts, body.clone(), &replica, &url).await
        }
    }
}

/// Headers that belong to one connection, not to the request.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "upgrade"
            | "te"
            | "trailer"
            | "content-length"
            | "expect"
    )
}

/// Send the request to the replica `replica` at `url`, signed, and stream its answer back;
/// `None` when nothing listens there (it is then taken as gone).
async fn forward(
    state: &AppState,
    parts: &Parts,
    body: Bytes,
    replica: &str,
    url: &str,
) -> Option<Response> {
    let cluster = &state.cluster;
    let client = parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| {
            super::forwarded::client_address(
                info.0.ip(),
                &parts.headers,
                &state.config.http.trusted_proxies,
            )
            .to_string()
        })
        .unwrap_or_default();
    let path = parts.uri.path();
    let signature = cluster.sign(parts.method.as_str(), path, &client, &credential(&parts.headers));
    let target = format!("{url}{}", parts.uri.path_and_query().map_or(path, |path| path.as_str()));
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &parts.headers {
        if !hop_by_hop(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    let vouch = [(FORWARDED_HEADER, signature), (CLIENT_HEADER, client)];
    for (name, value) in vouch {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    let sent = forwarding_client()
        .request(parts.method.clone(), &target)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(error) if error.is_connect() => {
            tracing::warn!(replica, %error, "the replica that holds what a request continues cannot be reached: taken as gone");
            cluster.unreachable(replica);
            return None;
        }
        Err(error) => {
            tracing::warn!(replica, %error, "a request forwarded to another replica failed");
            return Some(error_response(
                StatusCode::BAD_GATEWAY,
                ErrorCode::UpstreamUnavailable,
                "the replica that holds what this request continues did not answer",
                Some("retry; if that replica has stopped, the next attempt says what was lost"),
            ));
        }
    };
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        for (name, value) in answer.headers() {
            if !hop_by_hop(name) {
                headers.append(name.clone(), value.clone());
            }
        }
    }
    let stream = answer.bytes_stream().map_err(std::io::Error::other);
    Some(
        response
            .body(Body::from_stream(stream))
            .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response()),
    )
}

/// The client replicas forward with: no redirects, a short wait to connect, none for the
/// answer (a forwarded call takes what it takes; the client's own timeout ends it).
fn forwarding_client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        crate::tls::install();
        reqwest::Client::builder()
            .connect_timeout(CONNECT_WITHIN)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default()
    })
}

/// Note the session a response starts (its `Mcp-Session-Id`), so that any replica can route
/// its later requests here; done before the client learns the id.
pub(crate) async fn note_session(
    state: &AppState,
    principal: Option<&Principal>,
    response: &HeaderMap,
) {
    if !state.cluster.is_clustered() {
        return;
    }
    let Some(session) = response.get(SESSION_HEADER).and_then(|value| value.to_str().ok()) else {
        return;
    };
    let owner = principal.map(Principal::identity).unwrap_or_default();
    state.cluster.note(Item::Session, session, &owner, None).await;
}
