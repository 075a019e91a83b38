//! The web console: its files, embedded in the binary and served at `/` and `/console/`, and the
//! two read-only JSON endpoints it lists from (`/console/api/executions`, the recent calls, and
//! `/console/api/approvals`, the writes waiting for a person), behind the same auth as `/mcp`,
//! and `/console/api/session`, which checks a key under the same failed-authentication throttle
//! and, with `auth.oauth.console_client_id`, tells the page how to sign in through the issuer.
//!
//! # Design notes
//!
//! `console.rs` serves the web console's files (embedded with `include_str!`, with a
//! `Content-Security-Policy` that allows this origin only; signing in is a top-level navigation to
//! the issuer and back, which the policy does not restrict) at `/` and `/console/<file>`, and its
//! JSON endpoints (`upstream_sign_in.rs` holds those of the sign-ins to OAuth upstreams: `GET
//! /console/api/upstreams`, `POST`/`DELETE /console/api/upstreams/<name>/sign-in`, listing and
//! starting only the servers in the caller's reach, `visible::servers_in_reach`, or for a server
//! whose tools are not known yet `ToolPolicy::could_admit_a_tool_of`, another answering 404 as
//! unknown, and `GET /oauth/upstream/callback`, which sends the browser back to the console page
//! only): `/console/api/session` (whether a key is needed and valid, and with `console_client_id`
//! the `sign_in` offer from `sign_in.rs`; 200, so the page asks for a key without a failed request,
//! except that a key that fails meets the same `AuthGate` as at `/mcp`: it counts toward the
//! throttle and past the limit gets 429), and behind the same auth as `/mcp`
//! `/console/api/executions` (`tracking::recent_executions`: the key's own calls, everyone's when
//! orca has no keys) and `/console/api/approvals` (`sql::pending_approvals` filtered to what the
//! key asked for or may approve).
//!
//! Plain HTML, CSS and ES modules, no framework and no build step: `index.html` (the page's
//! landmarks), `mcp.js` (JSON-RPC over Streamable HTTP to `/mcp`, JSON or SSE answers, session id
//! when the server keeps sessions, the tab's key in `sessionStorage`), `form.js` (a form generated
//! from a tool's JSON Schema: `$ref`s and nullable wrappers resolved, one labelled control per
//! parameter, values checked before sending), `upstreams.js` (the sign-ins to OAuth upstreams: the
//! list, **Sign in**, which navigates to the authorization URL orca answers, and **Sign out**, and
//! what the way back says), `signin.js` (the sign-in through the issuer: a PKCE verifier and a
//! state kept in `sessionStorage`, the navigation to the authorization endpoint, and on the way
//! back the state and `iss` checked, the code removed from the address with `history.replaceState`
//! and exchanged through `/console/api/token`), `results.js` (tables for TabularResults and arrays
//! of objects, the first 100 rows at once and the rest in batches after the first frame, CSV and
//! JSON downloads, errors, the feedback controls), `app.js` (the accordion from `tools/list` and
//! `list_servers` with each server's version when it reports one and its status cut short with the
//! whole text on hover, runs, paging, the JSON view built when first opened, the failure counter
//! and feedback dialog, the manual SQL fallback, closed once its write or read has run or another
//! tool is chosen, approvals, recent executions) and `style.css`.
//!
//! No framework because the console is a handful of views over one protocol: the DOM API and native
//! elements (`<dialog>`, `<details>`, buttons, labels, radio groups) give the roles, keyboard
//! handling and focus return the tests rely on, the files are embedded as they are written (no
//! Node.js at build or run time), and a reader can follow every line.
//!
//! *Architecture Invariant*: the console is built from what the gateway reports and addresses
//! people and tests through roles and names; it never names a server or tool except
//! `generate_sql`/`execute_sql` for the manual fallback, and it loads nothing from another origin
//! (the sign-in leaves the page for the issuer's, by navigation only, and the code is exchanged by
//! orca).

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
/// loopback is the machine's owner), else only its own, by identity (`Principal::identity`: an
/// API key's rows are not a token user's of the same name).
fn visible_principal(state: &AppState, principal: &Principal) -> Option<String> {
    state.config.auth.required().then(|| principal.identity())
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
    match crate::tracking::recent_executions(&state.state_pool, whose.as_deref(), limit).await {
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
    let identity = principal.identity();
    let approvals: Vec<_> = pending
        .into_iter()
        .filter_map(|request| {
            let can_approve = request.owner.as_deref() != Some(identity.as_str())
                && request
                    .required_verbs
                    .iter()
                    .all(|verb| principal.verbs.iter().any(|held| held.as_str() == verb));
            let visible =
                whose.as_deref().is_none_or(|whose| request.owner.as_deref() == Some(whose))
                    || can_approve;
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
        Admission::ProofsFull { retry_after } => Err(super::edge::proofs_full(retry_after)),
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
