//! The console's sign-ins to external servers that ask for OAuth, as HTTP routes over
//! `external`'s sign-in flow: `GET /console/api/upstreams` (each OAuth upstream the caller may
//! use, its mode, status and whether the caller is signed in), `POST /console/api/upstreams/<name>/sign-in`
//! (starts a sign-in; answers the authorization URL and sets the browser's binding cookie),
//! `DELETE` of the same (forgets it, as `orca logout` does), all behind the same authentication
//! as `/mcp`; and `GET /oauth/upstream/callback`, where the person's browser comes back: the
//! `state` and the cookie are checked, the code exchanged by orca, and the browser sent back to
//! orca's own console page, never elsewhere. For a `per_user` upstream the sign-in is the
//! caller's own; for a `shared` one only a caller holding every verb may sign in or out. A
//! caller sees and starts sign-ins only for the servers in its reach (those its role shows it a
//! tool of); another is unknown to it (404).

use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::respond::{error_response, missing_principal};
use crate::config::Principal;
use crate::external::SignInError;
use crate::tool::{ErrorCode, Verb};

/// The cookie that binds a sign-in to the browser that started it.
const BINDING_COOKIE: &str = "orca_upstream_sign_in";
const CALLBACK_PATH: &str = "/oauth/upstream/callback";

fn principal_of(request: &Request) -> Option<Principal> {
    request.extensions().get::<Principal>().cloned()
}

/// A caller who may sign in to a shared upstream: one holding every verb.
fn administrator(principal: &Principal) -> bool {
    Verb::ALL.into_iter().all(|verb| principal.may(verb))
}

fn refused(error: &SignInError) -> Response {
    let (status, code) = match error {
        SignInError::Unknown(_) | SignInError::NotOAuth(_) => {
            (StatusCode::NOT_FOUND, ErrorCode::NotFound)
        }
        SignInError::Service(_) => (StatusCode::CONFLICT, ErrorCode::InvalidInput),
        SignInError::NotAdministrator(_) => (StatusCode::FORBIDDEN, ErrorCode::Unauthorized),
        SignInError::Busy | SignInError::TooManyOfYours => {
            (StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited)
        }
        SignInError::Expired | SignInError::OtherBrowser => {
            (StatusCode::BAD_REQUEST, ErrorCode::InvalidInput)
        }
        SignInError::Failed(_) => (StatusCode::BAD_GATEWAY, ErrorCode::UpstreamUnavailable),
    };
    error_response(status, code, &error.to_string(), None)
}

/// Whether `principal` may sign in to `name`: the server is in its reach, by the policy that
/// hides a server's tools from it (`servers_in_reach`). A server whose tools nobody has listed
/// yet (a per-user upstream nobody has signed in to) is in reach when the caller's tool policy
/// could admit a tool of it.
fn in_reach(
    state: &AppState,
    principal: &Principal,
    external: &crate::external::ExternalServers,
    name: &str,
) -> bool {
    let Some(reach) = super::visible::servers_in_reach(&state.visible, &state.registry, principal)
    else {
        return true;
    };
    if reach.contains(name) {
        return true;
    }
    let (Some(prefix), Some(policies)) = (external.unlisted_prefix(name), &principal.tools) else {
        return false;
    };
    policies.iter().any(|policy| policy.could_admit_a_tool_of(name, prefix))
}

fn no_external() -> Response {
    error_response(StatusCode::NOT_FOUND, ErrorCode::NotFound, "orca has no external servers", None)
}

/// `GET /console/api/upstreams`.
pub(crate) async fn list(State(state): State<AppState>, request: Request) -> Response {
    let Some(principal) = principal_of(&request) else { return missing_principal() };
    let Some(external) = state.registry.external() else {
        return axum::Json(json!({ "upstreams": [] })).into_response();
    };
    match external.oauth_sign_ins(&principal.user_identity(), administrator(&principal)).await {
        Ok(mut upstreams) => {
            upstreams.retain(|upstream| in_reach(&state, &principal, external, &upstream.name));
            axum::Json(json!({ "upstreams": upstreams })).into_response()
        }
        Err(error) => refused(&error),
    }
}

/// orca's address as the browser reaches it: `http.public_url`, else the request's `Host` over
/// http when it is orca's own address (a name allowed by name, with the port orca listens on:
/// `http::OwnHost`); a `Host` let through by `*` or naming another port builds no URL.
fn base_url(state: &AppState, request: &Request) -> Option<String> {
    if let Some(url) = &state.config.http.public_url {
        return Some(url.clone());
    }
    let host = &request.extensions().get::<super::http::OwnHost>()?.0;
    let well_formed = !host.is_empty()
        && host.bytes().all(|byte| byte.is_ascii_alphanumeric() || b".-:[]".contains(&byte));
    well_formed.then(|| format!("http://{host}"))
}

/// `POST /console/api/upstreams/<name>/sign-in`.
pub(crate) async fn start(
    State(state): State<AppState>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let Some(principal) = principal_of(&request) else { return missing_principal() };
    let Some(external) = state.registry.external() else { return no_external() };
    // A server the caller may not use is unknown to it: no sign-in, no registration.
    if !in_reach(&state, &principal, external, &name) {
        return refused(&SignInError::Unknown(name));
    }
    let Some(base) = base_url(&state, &request) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidInput,
            "the request's Host is not orca's own address (a host named in http.allowed_hosts, on the port orca listens on), so no redirect URI can be built from it",
            Some("set http.public_url to the address people's browsers reach orca at"),
        );
    };
    let redirect_uri = format!("{base}{CALLBACK_PATH}");
    let started = external
        .start_sign_in(&name, &principal.user_identity(), administrator(&principal), redirect_uri)
        .await;
    match started {
        Ok(started) => {
            let secure = if base.starts_with("https://") { "; Secure" } else { "" };
            let cookie = format!(
                "{BINDING_COOKIE}={}; Path={CALLBACK_PATH}; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
                started.browser_binding,
                crate::external::SIGN_IN_EXPIRY.as_secs()
            );
            let mut response =
                axum::Json(json!({ "authorization_url": started.authorization_url }))
                    .into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(error) => refused(&error),
    }
}

/// `DELETE /console/api/upstreams/<name>/sign-in`.
pub(crate) async fn forget(
    State(state): State<AppState>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let Some(principal) = principal_of(&request) else { return missing_principal() };
    let Some(external) = state.registry.external() else { return no_external() };
    match external.sign_out(&name, &principal.user_identity(), administrator(&principal)).await {
        Ok(forgotten) => axum::Json(json!({ "signed_out": forgotten })).into_response(),
        Err(error) => refused(&error),
    }
}

/// The value of the binding cookie in `headers`, if any.
fn binding_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == BINDING_COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Back to the console page, on this origin only, with what happened (a fixed word or the
/// upstream's key, which the page shows as text).
fn back_to_console(query: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let location = format!("/?{query}");
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    let cleared =
        format!("{BINDING_COOKIE}=; Path={CALLBACK_PATH}; HttpOnly; SameSite=Lax; Max-Age=0");
    if let Ok(value) = HeaderValue::from_str(&cleared) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `GET /oauth/upstream/callback?code=..&state=..&iss=..`: where the person's browser comes
/// back from the authorization server.
pub(crate) async fn callback(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let query = query.unwrap_or_default();
    if query.len() > 8192 {
        return back_to_console("sign_in_error=failed");
    }
    let Some(external) = state.registry.external() else { return no_external() };
    let Some(sign_in_state) = url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "state")
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty() && value.len() <= 256)
    else {
        return back_to_console("sign_in_error=expired");
    };
    let Ok(redirected) = url::Url::parse(&format!("http://orca.invalid{CALLBACK_PATH}?{query}"))
    else {
        return back_to_console("sign_in_error=failed");
    };
    let binding = binding_cookie(&headers);
    match external.finish_sign_in(redirected, &sign_in_state, binding.as_deref()).await {
        Ok(name) => {
            let encoded: String = url::form_urlencoded::byte_serialize(name.as_bytes()).collect();
            back_to_console(&format!("upstream={encoded}&signed_in=1"))
        }
        Err(error) => {
            tracing::warn!(%error, "a sign-in to an external server did not finish");
            let word = match error {
                SignInError::Expired => "expired",
                SignInError::OtherBrowser => "other_browser",
                _ => "failed",
            };
            back_to_console(&format!("sign_in_error={word}"))
        }
    }
}
