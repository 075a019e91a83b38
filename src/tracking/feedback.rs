//! Feedback on an execution: `{feedback_token, rating, rating_score?, comment?}`, shared by
//! `POST /mcp/feedback` and the `submit_feedback` tool. A second submission for the same token
//! replaces the first, keeping `created_at` and setting `updated_at`.
//!
//! # Design notes
//!
//! `feedback.rs` validates and upserts ratings; `export.rs` writes the CSV files; `lessons.rs`
//! reads the SQL tools' failed, retried and down-rated calls of a range for `orca context suggest`;
//! `recent.rs` lists the latest calls with their ratings for the web console; `store.rs` holds the
//! pool and the migrations (`migrations/`, history in `orca._sqlx_migrations`).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use super::Tracker;

const MAX_COMMENT_CHARS: usize = 10_000;

/// A validated feedback submission.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FeedbackInput {
    pub(crate) feedback_token: Uuid,
    pub(crate) rating: Rating,
    pub(crate) rating_score: Option<i32>,
    pub(crate) comment: Option<String>,
    /// The target database the rated call worked on, when the rater names it: a token of a call
    /// on another database is then refused.
    pub(crate) database: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rating {
    Up,
    Down,
}

impl Rating {
    fn as_str(self) -> &'static str {
        match self {
            Rating::Up => "up",
            Rating::Down => "down",
        }
    }
}

impl FeedbackInput {
    /// Validate a request body, with a message a person can act on for each problem.
    ///
    /// # Errors
    ///
    /// Every problem found, joined into one message.
    pub(crate) fn parse(body: &Value) -> Result<FeedbackInput, String> {
        let Value::Object(map) = body else {
            return Err("the body must be a JSON object with feedback_token and rating".into());
        };
        let mut problems = Vec::new();
        for key in map.keys() {
            if !["feedback_token", "rating", "rating_score", "comment", "database"]
                .contains(&key.as_str())
            {
                problems.push(format!(
                    "unknown field `{key}` (expected feedback_token, rating, rating_score, comment, database)"
                ));
            }
        }
        let feedback_token = match map.get("feedback_token") {
            None | Some(Value::Null) => {
                problems.push("`feedback_token` is required: the value of `_meta.feedback_token` of a tool result".into());
                None
            }
            Some(Value::String(text)) => match Uuid::parse_str(text) {
                Ok(token) => Some(token),
                Err(_) => {
                    problems.push("`feedback_token` must be a UUID".into());
                    None
                }
            },
            Some(_) => {
                problems.push("`feedback_token` must be a string".into());
                None
            }
        };
        let rating = match map.get("rating") {
            Some(Value::String(text)) if text == "up" => Some(Rating::Up),
            Some(Value::String(text)) if text == "down" => Some(Rating::Down),
            None | Some(Value::Null) => {
                problems.push("`rating` is required: \"up\" or \"down\"".into());
                None
            }
            Some(_) => {
                problems.push("`rating` must be \"up\" or \"down\"".into());
                None
            }
        };
        let rating_score = match map.get("rating_score") {
            None | Some(Value::Null) => None,
            Some(value) => match value.as_i64() {
                Some(score @ 1..=5) => Some(score as i32),
                _ => {
                    problems.push("`rating_score` must be a whole number from 1 to 5".into());
                    None
                }
            },
        };
        let comment = match map.get("comment") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.chars().count() > MAX_COMMENT_CHARS => {
                problems.push(format!("`comment` is longer than {MAX_COMMENT_CHARS} characters"));
                None
            }
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => {
                problems.push("`comment` must be a string".into());
                None
            }
        };
        let database = match map.get("database") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) if crate::config::valid_database_name(name) => {
                Some(name.clone())
            }
            Some(_) => {
                problems.push("`database` must be a database's name".into());
                None
            }
        };
        match (feedback_token, rating) {
            (Some(feedback_token), Some(rating)) if problems.is_empty() => {
                Ok(FeedbackInput { feedback_token, rating, rating_score, comment, database })
            }
            _ => Err(problems.join("; ")),
        }
    }

    /// Parse tool arguments (the same contract as the HTTP body).
    pub(crate) fn from_arguments(
        arguments: Option<&Map<String, Value>>,
    ) -> Result<FeedbackInput, String> {
        FeedbackInput::parse(&Value::Object(arguments.cloned().unwrap_or_default()))
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum FeedbackError {
    #[error("no execution has this feedback token")]
    NotFound,
    #[error("the feedback store is unavailable; try again shortly")]
    Unavailable,
    #[error("this feedback token belongs to a call on {}, not on database `{named}`", actual.as_deref().map_or_else(|| "no database".to_owned(), |name| format!("database `{name}`")))]
    OtherDatabase { named: String, actual: Option<String> },
}

/// Store feedback for the execution that issued `input.feedback_token`, replacing an earlier
/// submission for the same token. Returns the stored row.
///
/// # Errors
///
/// [`FeedbackError::NotFound`] for an unknown token, [`FeedbackError::Unavailable`] when the
/// database cannot be reached.
pub(crate) async fn submit_feedback(
    pool: &PgPool,
    tracker: &Tracker,
    input: &FeedbackInput,
    user_id: Option<&str>,
) -> Result<Value, FeedbackError> {
    if let Some(row) = upsert(pool, input, user_id).await? {
        return Ok(row);
    }
    refuse_other_database(pool, input).await?;
    // The execution may still be on its way to the database: flush and look again.
    tracker.flush().await;
    if let Some(row) = upsert(pool, input, user_id).await? {
        return Ok(row);
    }
    refuse_other_database(pool, input).await?;
    // It may also come from another replica, whose writer this one cannot flush: that writer
    // batches for up to 100 ms, so a result rated at once elsewhere gets a short grace.
    for wait in OTHER_REPLICA_GRACE {
        tokio::time::sleep(wait).await;
        if let Some(row) = upsert(pool, input, user_id).await? {
            return Ok(row);
        }
        refuse_other_database(pool, input).await?;
    }
    Err(FeedbackError::NotFound)
}

/// Refuse at once a token whose call is stored with another database than the one named.
async fn refuse_other_database(pool: &PgPool, input: &FeedbackInput) -> Result<(), FeedbackError> {
    let Some(named) = &input.database else { return Ok(()) };
    let stored: Option<(Option<String>,)> =
        sqlx::query_as("SELECT database_name FROM orca.mcp_executions WHERE feedback_token = $1")
            .bind(input.feedback_token)
            .fetch_optional(pool)
            .await
            .map_err(|_| FeedbackError::Unavailable)?;
    match stored {
        Some((actual,)) if actual.as_deref() != Some(named.as_str()) => {
            Err(FeedbackError::OtherDatabase { named: named.clone(), actual })
        }
        _ => Ok(()),
    }
}

/// The waits before a feedback token is called unknown, for an execution written by another
/// replica (about 1 s in all).
const OTHER_REPLICA_GRACE: [std::time::Duration; 4] = [
    std::time::Duration::from_millis(50),
    std::time::Duration::from_millis(150),
    std::time::Duration::from_millis(300),
    std::time::Duration::from_millis(500),
];

type FeedbackRow = (
    Uuid,
    Uuid,
    Uuid,
    Option<String>,
    String,
    Option<i32>,
    Option<String>,
    DateTime<Utc>,
    Option<DateTime<Utc>>,
);

async fn upsert(
    pool: &PgPool,
    input: &FeedbackInput,
    user_id: Option<&str>,
) -> Result<Option<Value>, FeedbackError> {
    let row: Option<FeedbackRow> = sqlx::query_as(
        "INSERT INTO orca.mcp_feedback (feedback_token, execution_id, execution_created_at, user_id, rating, rating_score, comment) \
         SELECT $1, e.id, e.created_at, $2, $3, $4, $5 FROM orca.mcp_executions e WHERE e.feedback_token = $1 \
         AND ($6::text IS NULL OR e.database_name = $6) \
         ON CONFLICT (feedback_token, execution_created_at) DO UPDATE SET user_id = EXCLUDED.user_id, rating = EXCLUDED.rating, \
         rating_score = EXCLUDED.rating_score, comment = EXCLUDED.comment, updated_at = now() \
         RETURNING id, feedback_token, execution_id, user_id, rating, rating_score, comment, created_at, updated_at",
    )
    .bind(input.feedback_token)
    .bind(user_id)
    .bind(input.rating.as_str())
    .bind(input.rating_score)
    .bind(&input.comment)
    .bind(&input.database)
    .fetch_optional(pool)
    .await
    .map_err(|error| {
        tracing::warn!("feedback not stored: {error}");
        FeedbackError::Unavailable
    })?;
    Ok(row.map(
        |(
            id,
            feedback_token,
            execution_id,
            user_id,
            rating,
            rating_score,
            comment,
            created_at,
            updated_at,
        )| {
            json!({
                "id": id,
                "feedback_token": feedback_token,
                "execution_id": execution_id,
                "user_id": user_id,
                "rating": rating,
                "rating_score": rating_score,
                "comment": comment,
                "created_at": created_at,
                "updated_at": updated_at,
            })
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(body: Value, expect: Result<(), &str>) {
        let result = FeedbackInput::parse(&body).map(|_| ());
        match (result, expect) {
            (Ok(()), Ok(())) => {}
            (Err(message), Err(expected)) => {
                assert!(message.contains(expected), "{message:?} lacks {expected:?}")
            }
            (result, expect) => panic!("got {result:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn feedback_bodies_are_validated_with_clear_messages() {
        let token = "0192f0a4-8b1c-7cc3-9d2e-3f4a5b6c7d8e";
        check(json!({"feedback_token": token, "rating": "up"}), Ok(()));
        check(
            json!({"feedback_token": token, "rating": "down", "rating_score": 5, "comment": "ok"}),
            Ok(()),
        );
        check(json!({"feedback_token": token, "rating": "down", "rating_score": null}), Ok(()));
        check(json!([]), Err("JSON object"));
        check(json!({"rating": "up"}), Err("`feedback_token` is required"));
        check(json!({"feedback_token": "nope", "rating": "up"}), Err("must be a UUID"));
        check(json!({"feedback_token": token}), Err("`rating` is required"));
        check(json!({"feedback_token": token, "rating": "meh"}), Err("\"up\" or \"down\""));
        check(
            json!({"feedback_token": token, "rating": "up", "rating_score": 6}),
            Err("from 1 to 5"),
        );
        check(
            json!({"feedback_token": token, "rating": "up", "rating_score": 2.5}),
            Err("from 1 to 5"),
        );
        check(
            json!({"feedback_token": token, "rating": "up", "comment": 3}),
            Err("`comment` must be a string"),
        );
        check(
            json!({"feedback_token": token, "rating": "up", "stars": 3}),
            Err("unknown field `stars`"),
        );
        check(json!({"feedback_token": token, "rating": "up", "database": "films"}), Ok(()));
        check(
            json!({"feedback_token": token, "rating": "up", "database": "Films!"}),
            Err("`database` must be a database's name"),
        );
    }
}
