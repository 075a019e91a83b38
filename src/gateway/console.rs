//! The web console: its files, embedded in the binary and served at `/` and `/console/`, and the
//! two read-only JSON endpoints it lists from (`/console/api/executions`, the recent calls, and
//! `/console/api/approvals`, the writes waiting for a person), behind the same auth as `/mcp`,
//! and `/console/api/session`, which checks a key under the same failed-authentication throttle
//! and, with `auth.oauth.console_client_id`, tells the page how to sign in through the issuer.

use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::auth::AuthFailure;
use super::edge::{Admission, AuthGate, throttled};
use super::respond::{error_response, missing_principal};
use crate::config::Principal;
use crate::tool::ErrorCode;

/// The console's files: path under `/console/`, content type, content.
const ASSETS: [(&str, &str, &str); 8] = [
    ("app.js", "text/javascript; charset=utf-8", include_str!("../../console/app.js")),
    ("upstreams.js", "text/javascript; charset=utf-8", include_str!("../../console/upstreams.js")),
    ("signin.js", "text/javascript; charset=utf-8", include_str!("../../console/signin.js")),
    ("mcp.js", "text/javascript; charset=utf-8", include_str!("../../console/mcp.js")),
    ("form.js", "text/javascript; charset=utf-8", include_str!("../../console/form.js")),
    ("results.js", "text/javascript; charset=utf-8", include_str!("../../console/results.js")),
    ("style.css", "text/css; charset=utf-8", include_str!("../../console/style.css")),
    ("favicon.svg", "image/svg+xml", include_str!("../../console/favicon.svg")),
];

const INDEX: &str = include_str!("../../console/index.html");

/// Everything the page loads comes from this origin; nothing else may be fetched or framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data: blob:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; \
     base-uri 'none'";

fn asset_response(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers
        .insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    response
}

/// `GET /`: the console's page.
pub(crate) async fn index() -> Response {
    asset_response("text/html; charset=utf-8", INDEX)
}

/// `GET /favicon.ico`, for browsers that ask before reading the page's icon link.
pub(crate) async fn favicon() -> Response {
    asset(axum::extract::Path("favicon.svg".to_owned())).await
}

/// `GET /console/<file>`: one of the embedded files.
pub(crate) async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => asset_response(content_type, body),
        None => error_response(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "the console has no such file",
            None,
        ),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecentQuery {
    limit: Option<i64>,
}

/// Whose rows a caller sees: everyone's when orca has no API keys (the anonymous caller on
/// loopback is the machine's owner), else only the key's own principal's.
fn visible_principal<'a>(state: &AppState, principal: &'a Principal) -> Option<&'a str> {
    state.config.auth.required().then_some(principal.name.as_str())
}

fn unavailable(what: &str) -> Response {
    let mut response = error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::UpstreamUnavailable,
        &format!("the {what} store is unavailable"),
        Some("try again shortly"),
    );
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    response
}

fn principal_of(request: &Request) -> Option<Principal> {
    request.extensions().get::<Principal>().cloned()
}

/// `GET /console/api/executions?limit=N`: the caller's recent calls, newest first.
pub(crate) async fn executions(
    State(state): State<AppState>,
    query: Result<Query<RecentQuery>, axum::extract::rejection::QueryRejection>,
    request: Request,
) -> Response {
    let Some(principal) = principal_of(&request) else {
        return missing_principal();
    };
    let limit = match query {
        Ok(Query(RecentQuery { limit: None })) => 50,
        Ok(Query(RecentQuery { limit: Some(limit) }))
            if (1..=crate::tracking::MAX_RECENT).contains(&limit) =>
        {
            limit
        }
        _ => {
            return error_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidInput,
                &format!("limit must be a whole number from 1 to {}", crate::tracking::MAX_RECENT),
                Some("the only parameter is `limit`"),
            );
        }
    };
    let whose = visible_principal(&state, &principal);
    match crate::tracking::recent_executions(&state.state_pool, whose, limit).await {
        Ok(rows) => {
            let trace_url = state.config.trace_url.as_deref();
            axum::Json(json!({ "executions": rows, "trace_url": trace_url })).into_response()
        }
        Err(error) => {
            tracing::warn!("cannot read recent executions: {error}");
            unavailable("tracking")
        }
    }
}

/// `GET /console/api/approvals`: the writes waiting for a person that this caller may approve
/// or asked for, each with `can_approve` (the key holds every verb the write needs and did not
/// ask for it).
pub(crate) async fn approvals(State(state): State<AppState>, request: Request) -> Response {
    let Some(principal) = principal_of(&request) else {
        return missing_principal();
    };
    let pending = match crate::sql::pending_approvals(&state.state_pool).await {
        Ok(pending) => pending,
        Err(error) => {
            tracing::warn!("cannot read pending approvals: {error}");
            return unavailable("approval");
        }
    };
    let whose = visible_principal(&state, &principal);
    let approvals: Vec<_> = pending
        .into_iter()
        .filter_map(|request| {
            let can_approve = request.principal != principal.name
                && request
                    .required_verbs
                    .iter()
                    .all(|verb| principal.verbs.iter().any(|held| held.as_str() == verb));
            let visible = whose.is_none_or(|name| name == request.principal) || can_approve;
            visible.then(|| json!({ "request": request, "can_approve": can_approve }))
        })
        .collect();
    axum::Json(json!({ "approvals": approvals })).into_response()
}

/// `GET /console/api/session`: whether this server needs an API key and, for the key sent (if
/// any), whether it is valid and whose it is. It answers 200, so that the page can ask for a key
/// without a failed request, and tells nothing `/mcp` would not: a key that fails counts toward
/// the failed-authentication throttle as at `/mcp`, and past the limit gets the same 429.
/// With a console client at the issuer, `sign_in` says where and how to sign in.
pub(crate) async fn session(State(gate): State<AuthGate>, request: Request) -> Response {
    let mut document = match session_state(&gate, request).await {
        Ok(document) => document,
        Err(response) => return response,
    };
    // The issuer's metadata is discovered once and kept, so this is cheap after the first.
    if let Some(verifier) = gate.verifier() {
        match super::sign_in::offer(verifier).await {
            Some(Ok(sign_in)) => document["sign_in"] = sign_in,
            Some(Err(error)) => tracing::warn!("the console cannot offer a sign-in: {error}"),
            None => {}
        }
    }
    axum::Json(document).into_response()
}

/// The session's answer, or the refusal that replaces it.
async fn session_state(gate: &AuthGate, request: Request) -> Result<serde_json::Value, Response> {
    let required = gate.keys_required();
    match gate.admit_presented(gate.presented(&request)).await {
        Admission::Admitted(principal) => Ok(json!({
            "api_key_required": required,
            "authenticated": true,
            "principal": principal.name,
            "verbs": principal.verbs.iter().map(|verb| verb.as_str()).collect::<Vec<_>>(),
        })),
        Admission::Refused(failure) => Ok(json!({
            "api_key_required": required,
            "authenticated": false,
            "key_refused": failure == AuthFailure::Invalid,
        })),
        Admission::Throttled { retry_after } => Err(throttled(retry_after)),
        Admission::RefusedToken(_) | Admission::InsufficientScope(_) => Ok(json!({
            "api_key_required": required,
            "authenticated": false,
            "key_refused": true,
        })),
        Admission::Unavailable(_) => Err(super::respond::error_response(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            crate::tool::ErrorCode::UpstreamUnavailable,
            "the authorization server cannot be reached to check the token",
            Some("try again shortly"),
        )),
    }
}
