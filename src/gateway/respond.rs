//! The JSON error answer every HTTP route of the gateway gives (the taxonomy's object with a
//! fresh trace id), in a module of its own so that the routes, the console and the edge
//! protections all use it without depending on one another.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::tool::{ErrorCode, ToolError};

/// An HTTP answer with `status` and the taxonomy's error object as its JSON body.
pub(crate) fn error_response(
    status: StatusCode,
    code: ErrorCode,
    message: &str,
    hint: Option<&str>,
) -> Response {
    let mut error = ToolError::new(code, message);
    if let Some(hint) = hint {
        error = error.with_hint(hint);
    }
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    (status, axum::Json(error.to_json(&trace_id))).into_response()
}

/// The answer to a console request that reached its route without a caller.
pub(super) fn missing_principal() -> Response {
    error_response(
        StatusCode::UNAUTHORIZED,
        ErrorCode::Unauthorized,
        "an API key is required",
        None,
    )
}
