//! What the recent past teaches about SQL: the SQL tools' calls of a time range that failed,
//! were retried or were rated down, each with the question, the failed attempts (their SQL and
//! the database's error), the SQL that finally worked when one did, and the rating's comment.
//! `orca context suggest` hands these to a model to propose additions to the context file.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgPool;

use super::ExportRange;

/// The tools whose lessons concern the SQL a model writes.
const SQL_TOOLS: [&str; 3] = ["generate_sql", "execute_sql", "query_sql"];

/// One call worth learning from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Lesson {
    pub(crate) tool: String,
    pub(crate) at: DateTime<Utc>,
    /// The question, for `generate_sql`.
    pub(crate) question: Option<String>,
    pub(crate) model: Option<String>,
    /// `success` or `error`.
    pub(crate) status: String,
    /// Failed attempts in order: the SQL tried (when known) and the error.
    pub(crate) attempts: Vec<FailedSql>,
    /// The SQL that worked in the end (a successful call after failures, or a rated read).
    pub(crate) final_sql: Option<String>,
    pub(crate) rating: Option<String>,
    pub(crate) comment: Option<String>,
}

/// One failed attempt of a lesson.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FailedSql {
    pub(crate) sql: Option<String>,
    pub(crate) error: String,
}

/// The most recent `limit` lessons of `range`, newest first; calls made by `orca eval` only
/// when `include_eval`.
///
/// # Errors
///
/// When the state database cannot be read.
pub(crate) async fn recent_lessons(
    pool: &PgPool,
    range: ExportRange,
    limit: i64,
    include_eval: bool,
    database: Option<&str>,
) -> Result<Vec<Lesson>, sqlx::Error> {
    let rows: Vec<LessonRow> = sqlx::query_as(
        "SELECT e.tool_name, e.created_at, e.llm_model, e.status, e.error_message,
                e.request_data, e.response_data, f.rating, f.comment,
                coalesce((SELECT jsonb_agg(x.error_details ORDER BY x.retry_attempt, x.created_at)
                          FROM orca.mcp_failures x WHERE x.execution_id = e.id AND x.execution_created_at = e.created_at), '[]'::jsonb) AS failures
         FROM orca.mcp_executions e
         LEFT JOIN orca.mcp_feedback f ON f.execution_id = e.id AND f.execution_created_at = e.created_at
         WHERE e.created_at >= $1 AND e.created_at < $2
           AND e.tool_name = ANY($3)
           AND (e.source <> 'eval' OR $5)
           AND ($6::text IS NULL OR e.database_name = $6)
           AND (f.rating = 'down'
                OR EXISTS (SELECT 1 FROM orca.mcp_failures x WHERE x.execution_id = e.id AND x.execution_created_at = e.created_at))
         ORDER BY e.created_at DESC
         LIMIT $4",
    )
    .bind(range.since)
    .bind(range.until)
    .bind(SQL_TOOLS.map(str::to_owned).to_vec())
    .bind(limit)
    .bind(include_eval)
    .bind(database)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(LessonRow::into_lesson).collect())
}

#[derive(Debug, sqlx::FromRow)]
struct LessonRow {
    tool_name: String,
    created_at: DateTime<Utc>,
    llm_model: Option<String>,
    status: String,
    error_message: Option<String>,
    request_data: Option<Value>,
    response_data: Option<Value>,
    rating: Option<String>,
    comment: Option<String>,
    failures: Value,
}

impl LessonRow {
    fn into_lesson(self) -> Lesson {
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let request = self.request_data.unwrap_or(Value::Null);
        let response = self.response_data.unwrap_or(Value::Null);
        let mut attempts: Vec<FailedSql> = self
            .failures
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|failure| {
                let error = &failure["error"];
                let details = &error["details"];
                FailedSql {
                    sql: text(details.get("sql"))
                        .or_else(|| text(details.get("last_sql")))
                        .or_else(|| text(request.get("sql"))),
                    error: text(details.get("error"))
                        .or_else(|| text(details.get("last_error")))
                        .or_else(|| text(error.get("message")))
                        .unwrap_or_default(),
                }
            })
            .collect();
        if attempts.is_empty()
            && let Some(message) = &self.error_message
        {
            attempts.push(FailedSql { sql: text(request.get("sql")), error: message.clone() });
        }
        let final_sql = if self.status == "success" {
            text(response.get("sql")).or_else(|| text(request.get("sql")))
        } else {
            None
        };
        Lesson {
            tool: self.tool_name,
            at: self.created_at,
            question: text(request.get("prompt")),
            model: self.llm_model,
            status: self.status,
            attempts,
            final_sql,
            rating: self.rating,
            comment: self.comment,
        }
    }
}
