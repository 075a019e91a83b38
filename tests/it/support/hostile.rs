//! A hostile HTTP party for orca's OAuth client: an MCP upstream that answers every request to
//! `/mcp` with a 401 whose challenge points wherever a test wants, and serves whatever metadata
//! documents the test gives it (protected-resource metadata, authorization-server metadata
//! naming endpoints anywhere). It answers a token request with `invalid_client`, and it
//! records every request it gets (method, path with query, `Authorization` header), so that a
//! test can say what orca fetched and what credential it sent where. The same server stands in
//! for an internal service that must never be reached: it records, and the test asserts it
//! recorded nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// How the server answers one path.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// 401 with `WWW-Authenticate: <challenge>`.
    Unauthorized(String),
    /// 200 with this JSON.
    Json(Value),
    /// 400 `{"error": "invalid_client"}`, as a token endpoint refusing the client.
    RefuseToken,
}

/// One request the server got.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) method: String,
    /// The path with its query.
    pub(crate) target: String,
    pub(crate) authorization: Option<String>,
}

type Shared = (Mutex<HashMap<String, Answer>>, Mutex<Vec<Seen>>);

/// The server, serving on `127.0.0.1` until dropped.
pub(crate) struct Hostile {
    base: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

impl Hostile {
    /// Listen on a free port and answer the paths `answers` gives for the server's own base
    /// URL (`http://127.0.0.1:PORT`); any other path is a 404.
    pub(crate) async fn start(answers: impl FnOnce(&str) -> Vec<(String, Answer)>) -> Hostile {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let answers = answers(&base).into_iter().collect();
        let shared: Arc<Shared> = Arc::new((Mutex::new(answers), Mutex::new(Vec::new())));
        let app = axum::Router::new().fallback(answer).with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Hostile { base, shared, server }
    }

    /// An upstream whose `/mcp` answers 401 pointing at `resource_metadata`.
    pub(crate) async fn upstream_pointing_at(resource_metadata: &str) -> Hostile {
        let challenge = format!(r#"Bearer resource_metadata="{resource_metadata}""#);
        Hostile::start(|_| vec![("/mcp".to_owned(), Answer::Unauthorized(challenge))]).await
    }

    /// An upstream that is its own authorization server, as an attacker runs one: `/mcp`
    /// answers 401 pointing at its protected-resource metadata, which names `authorization`
    /// (its own base URL when `None`); its authorization-server metadata names its own token
    /// and registration endpoints.
    pub(crate) async fn own_authorization_server(authorization: Option<&str>) -> Hostile {
        let authorization = authorization.map(str::to_owned);
        Hostile::start(move |base| {
            let authorization = authorization.unwrap_or_else(|| base.to_owned());
            vec![
                (
                    "/mcp".to_owned(),
                    Answer::Unauthorized(format!(
                        r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp""#
                    )),
                ),
                (
                    "/.well-known/oauth-protected-resource/mcp".to_owned(),
                    Answer::Json(json!({
                        "resource": format!("{base}/mcp"),
                        "authorization_servers": [authorization],
                    })),
                ),
                (
                    "/.well-known/oauth-authorization-server".to_owned(),
                    Answer::Json(authorization_server(base, base)),
                ),
                ("/token".to_owned(), Answer::RefuseToken),
            ]
        })
        .await
    }

    /// Answer `path` with `answer` from now on.
    pub(crate) fn set(&self, path: &str, answer: Answer) {
        self.shared.0.lock().unwrap().insert(path.to_owned(), answer);
    }

    /// `http://127.0.0.1:PORT` and `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `127.0.0.1:PORT`.
    pub(crate) fn host(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// Every request so far, in order.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.shared.1.lock().unwrap().clone()
    }

    /// The requests so far to `path` (without query).
    pub(crate) fn seen_at(&self, path: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|seen| seen.target.split('?').next() == Some(path)).collect()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Authorization-server metadata for the issuer `issuer` whose endpoints are on `endpoints`.
pub(crate) fn authorization_server(issuer: &str, endpoints: &str) -> Value {
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{endpoints}/authorize"),
        "token_endpoint": format!("{endpoints}/token"),
        "registration_endpoint": format!("{endpoints}/register"),
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "grant_types_supported": ["client_credentials", "authorization_code"],
        "code_challenge_methods_supported": ["S256"],
    })
}

async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let target = request.uri().path_and_query().map(ToString::to_string).unwrap_or_default();
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    shared.1.lock().unwrap().push(Seen {
        method: request.method().to_string(),
        target: target.clone(),
        authorization,
    });
    let path = target.split('?').next().unwrap_or_default();
    let found = shared.0.lock().unwrap().get(path).cloned();
    match found {
        Some(Answer::Unauthorized(challenge)) => {
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge)]).into_response()
        }
        Some(Answer::Json(document)) => axum::Json(document).into_response(),
        Some(Answer::RefuseToken) => {
            (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_client"})))
                .into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
