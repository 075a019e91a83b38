//! The recent calls as the web console lists them: one row per execution with its tool, status,
//! latency, time, rating, who made it and its trace id, newest first, read from orca's tracking tables.
//! Nothing a call carried (arguments, results, error text) is part of it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

/// The most rows one request may ask for.
pub(crate) const MAX_RECENT: i64 = 200;

/// One recent call.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub(crate) struct RecentExecution {
    pub(crate) id: Uuid,
    pub(crate) server: String,
    pub(crate) tool: String,
    /// `success`, `error` or `timeout`.
    pub(crate) status: String,
    pub(crate) error_code: Option<String>,
    pub(crate) latency_ms: Option<i32>,
    pub(crate) at: DateTime<Utc>,
    pub(crate) llm_model: Option<String>,
    /// `up` or `down` when the result was rated.
    pub(crate) rating: Option<String>,
    pub(crate) rating_score: Option<i32>,
    /// Who made the call: the API key's name or the token's user.
    pub(crate) principal: String,
    /// The OAuth client the call came through; `None` for API keys.
    pub(crate) client_id: Option<String>,
    /// The roles that allowed the call; `None` for API keys.
    pub(crate) role: Option<String>,
    /// The W3C trace id (32 hex digits), the call's trace when traces are exported.
    pub(crate) trace_id: String,
}

/// The `limit` most recent calls, of the principal whose identity (`Principal::identity`) is
/// `principal` only when one is given.
///
/// # Errors
///
/// When the state database cannot be read.
pub(crate) async fn recent_executions(
    pool: &PgPool,
    principal: Option<&str>,
    limit: i64,
) -> Result<Vec<RecentExecution>, sqlx::Error> {
    sqlx::query_as(
        "SELECT e.id, e.mcp_name AS server, e.tool_name AS tool, e.status, e.error_code, \
                e.execution_time_ms AS latency_ms, e.created_at AS at, e.llm_model, \
                f.rating, f.rating_score, e.principal, e.client_id, e.role, e.trace_id \
           FROM orca.mcp_executions e \
           LEFT JOIN orca.mcp_feedback f ON f.execution_id = e.id AND f.execution_created_at = e.created_at \
          WHERE $1::text IS NULL OR e.principal_id = $1 \
          ORDER BY e.created_at DESC, e.id DESC \
          LIMIT $2",
    )
    .bind(principal)
    .bind(limit.clamp(1, MAX_RECENT))
    .fetch_all(pool)
    .await
}
