//! The console's held external tools, behind the same authentication as `/mcp`, for a caller
//! whose role has `approve_tools: true`: `GET /console/api/held-tools` (every held tool with
//! what changed, its findings and its diff; for anyone else `may_approve: false` and nothing) and `POST /console/api/held-tools/approve`
//! (`{"server", "tool", "sha256"}`: the definition shown is pinned, the approval recorded under
//! the caller's identity and told to every replica, as `orca tools approve` does).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::respond::{error_response, missing_principal};
use crate::config::Principal;
use crate::external::{ApproveError, Approver};
use crate::tool::ErrorCode;

/// The largest approval body read.
const MAX_BODY: usize = 4096;

fn approver(request: &Request) -> Result<Principal, Box<Response>> {
    let principal = request
        .extensions()
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| Box::new(missing_principal()))?;
    if principal.approve_tools {
        Ok(principal)
    } else {
        Err(Box::new(error_response(
            StatusCode::FORBIDDEN,
            ErrorCode::Unauthorized,
            &format!("`{}` may not approve external tools", principal.name),
            Some(
                "a role with approve_tools: true in auth.roles may, or a person with `orca tools approve`",
            ),
        )))
    }
}

/// `GET /console/api/held-tools`: 200 for any caller (so that the console's page asks without
/// a failed request), with `may_approve` and, only when it may, the held tools.
pub(crate) async fn list(State(state): State<AppState>, request: Request) -> Response {
    let Some(principal) = request.extensions().get::<Principal>() else {
        return missing_principal();
    };
    if !principal.approve_tools {
        return axum::Json(json!({ "may_approve": false, "held_tools": [] })).into_response();
    }
    match crate::external::held_tools(&state.state_pool).await {
        Ok(held) => axum::Json(json!({ "may_approve": true, "held_tools": held })).into_response(),
        Err(error) => {
            tracing::warn!("cannot read the held tools: {error}");
            error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::UpstreamUnavailable,
                "the held tools cannot be read",
                Some("try again shortly"),
            )
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Approval {
    server: String,
    tool: String,
    /// The hash of the definition the person looked at.
    sha256: String,
}

/// `POST /console/api/held-tools/approve`.
pub(crate) async fn approve(State(state): State<AppState>, request: Request) -> Response {
    let principal = match approver(&request) {
        Ok(principal) => principal,
        Err(refused) => return *refused,
    };
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY).await {
        Ok(body) => body,
        // 408 past http.body_timeout_ms, 413 over 4 KiB.
        Err(error) => return super::edge::unreadable_body(&error),
    };
    let Ok(approval) = serde_json::from_slice::<Approval>(&body) else {
        return invalid("the body must be {\"server\", \"tool\", \"sha256\"}");
    };
    let identity = principal.identity();
    let outcome = crate::external::approve_tools(
        &state.state_pool,
        &approval.server,
        Some(&approval.tool),
        Some(&approval.sha256),
        Approver { identity: &identity, via: "console" },
    )
    .await;
    match outcome {
        Ok(approved) => axum::Json(json!({ "approved": approved })).into_response(),
        Err(error @ (ApproveError::NothingHeld(_) | ApproveError::NotHeld { .. })) => {
            error_response(StatusCode::NOT_FOUND, ErrorCode::NotFound, &error.to_string(), None)
        }
        Err(error @ ApproveError::Stale { .. }) => error_response(
            StatusCode::CONFLICT,
            ErrorCode::InvalidInput,
            &error.to_string(),
            Some("reload the held tools and look at the new definition"),
        ),
        Err(ApproveError::Database(error)) => {
            tracing::warn!("cannot approve a held tool: {error}");
            error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::UpstreamUnavailable,
                "the approval could not be stored",
                Some("try again shortly"),
            )
        }
    }
}

fn invalid(message: &str) -> Response {
    error_response(StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::InvalidInput, message, None)
}
