//! Dry runs and confirmed writes. A dry run plans the statement with `EXPLAIN (FORMAT JSON)`
//! (never `ANALYZE`) inside a transaction that is always rolled back; a write runs only from an
//! [`ApprovedWrite`], in its own transaction with local timeouts.
//!
//! # Design notes
//!
//! `write.rs` plans with `EXPLAIN (FORMAT JSON)` in a rolled-back read-only transaction and runs an
//! `ApprovedWrite` (only redeeming a token or an approval builds one) in its own transaction.

use std::time::Duration;

use serde_json::Value;
use sqlx::PgPool;

use super::Error;
use super::confirm::ApprovedWrite;
use super::read::{roll_back, set_local_timeouts};
use super::statement::{Statement, StatementKind};

/// `explain_sql`'s answer: the plan in the asked format, and the planner's estimates.
#[derive(Debug, Clone)]
pub(crate) struct Explained {
    /// A string for the text format, the JSON plan for the json format.
    pub(crate) explain: Value,
    pub(crate) estimated_rows: Option<f64>,
    pub(crate) estimated_cost: Option<f64>,
}

/// Explain a read as text or JSON; with `analyze`, run it too (in a read-only transaction
/// that is rolled back, with local timeouts), for actual rows and times.
///
/// # Errors
///
/// `Query`, `Timeout`, `Unavailable`.
pub(crate) async fn explain_read(
    pool: &PgPool,
    query: &super::ReadOnlyQuery,
    json: bool,
    analyze: bool,
    timeout: Duration,
    format: PlanFormat,
) -> Result<Explained, Error> {
    let statement = query.statement();
    if json && format == PlanFormat::Text {
        return Err(Error::Query {
            message: "this database does not answer EXPLAIN (FORMAT JSON); ask for the text plan"
                .to_owned(),
            code: None,
        });
    }
    let mut connection = pool.acquire().await.map_err(Error::from_connect)?;
    sqlx::query("BEGIN READ ONLY").execute(&mut *connection).await.map_err(Error::from_query)?;
    let outcome = async {
        set_local_timeouts(&mut connection, timeout).await?;
        if format == PlanFormat::Text {
            let sql = if analyze {
                format!("EXPLAIN ANALYZE {}", statement.text)
            } else {
                format!("EXPLAIN {}", statement.text)
            };
            let lines: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .persistent(false)
                .fetch_all(&mut *connection)
                .await
                .map_err(Error::from_query)?;
            let (estimated_rows, estimated_cost) = text_estimates(&lines);
            return Ok(Explained {
                explain: Value::from(lines.join("\n")),
                estimated_rows,
                estimated_cost,
            });
        }
        // The estimates come from a plain JSON plan (planning only).
        let estimate_sql = format!("EXPLAIN (FORMAT JSON) {}", statement.text);
        let (estimate,): (Value,) = sqlx::query_as(sqlx::AssertSqlSafe(estimate_sql))
            .persistent(false)
            .fetch_one(&mut *connection)
            .await
            .map_err(Error::from_query)?;
        let top = &estimate[0]["Plan"];
        let estimated_rows = top["Plan Rows"].as_f64();
        let estimated_cost = top["Total Cost"].as_f64();
        let explain = match (json, analyze) {
            (true, false) => estimate,
            (json, analyze) => {
                let options = match (json, analyze) {
                    (true, _) => "ANALYZE, FORMAT JSON",
                    (false, true) => "ANALYZE, FORMAT TEXT",
                    (false, false) => "FORMAT TEXT",
                };
                let sql = format!("EXPLAIN ({options}) {}", statement.text);
                if json {
                    let (plan,): (Value,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                        .persistent(false)
                        .fetch_one(&mut *connection)
                        .await
                        .map_err(Error::from_query)?;
                    plan
                } else {
                    let lines: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                        .persistent(false)
                        .fetch_all(&mut *connection)
                        .await
                        .map_err(Error::from_query)?;
                    Value::from(lines.join("\n"))
                }
            }
        };
        Ok(Explained { explain, estimated_rows, estimated_cost })
    }
    .await;
    if let Err(error) = roll_back(&mut connection).await {
        connection.close_on_drop();
        return Err(outcome.err().unwrap_or_else(|| Error::from_query(error)));
    }
    outcome.map_err(|error| error.with_timeout(timeout))
}

/// How a database answers `EXPLAIN`: with a JSON plan, or (some PostgreSQL-compatible
/// databases) only with text, whose top lines give the estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlanFormat {
    Json,
    Text,
}

/// The planner's row estimate and total cost from a text plan: the top node's, or for a write
/// (whose top node is the modification, estimated at 0 rows) its input's.
fn text_estimates<T: AsRef<str>>(lines: &[T]) -> (Option<f64>, Option<f64>) {
    let numbers = |line: &str| -> (Option<f64>, Option<f64>) {
        let Some(start) = line.find("(cost=") else { return (None, None) };
        let rest = &line[start + 6..];
        let cost = rest
            .split_whitespace()
            .next()
            .and_then(|range| range.split("..").nth(1))
            .and_then(|total| total.parse().ok());
        let rows = rest
            .split_whitespace()
            .find_map(|field| field.strip_prefix("rows="))
            .and_then(|rows| rows.parse().ok());
        (rows, cost)
    };
    let mut planned = lines.iter().map(AsRef::as_ref).filter(|line| line.contains("(cost="));
    let Some(top) = planned.next() else { return (None, None) };
    let (rows, cost) = numbers(top);
    let modifies = ["Insert on", "Update on", "Delete on", "Merge on"]
        .iter()
        .any(|prefix| top.trim_start().starts_with(prefix));
    if modifies && let Some(input) = planned.next() {
        return (numbers(input).0, cost);
    }
    (rows, cost)
}

/// What `EXPLAIN` said about a statement.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The JSON plan as PostgreSQL returned it.
    pub(crate) plan: Value,
    /// The planner's row estimate: rows returned for a read, rows affected for a write.
    pub(crate) estimated_rows: Option<f64>,
    pub(crate) total_cost: Option<f64>,
}

/// Whether orca can plan this statement with `EXPLAIN`: a top-level `SELECT` or `VALUES`
/// (not `SHOW`, however it is written, nor an `EXPLAIN` of either kind) or a data change that is
/// not itself inside `EXPLAIN ANALYZE`.
pub(crate) fn explainable(statement: &Statement) -> bool {
    match statement.kind {
        StatementKind::Read => statement.cursor_capable,
        StatementKind::Insert
        | StatementKind::Update
        | StatementKind::Delete
        | StatementKind::Merge => !statement.explain_analyze,
        _ => false,
    }
}

/// Plan `statement` without running it: `EXPLAIN (FORMAT JSON)` in a read-only transaction
/// that is rolled back.
///
/// # Errors
///
/// `Query` when PostgreSQL rejects the statement (unknown table, type error ...), `Timeout`,
/// `Unavailable`.
pub(crate) async fn explain(
    pool: &PgPool,
    statement: &Statement,
    timeout: Duration,
    format: PlanFormat,
) -> Result<Plan, Error> {
    super::traced(Some("EXPLAIN"), statement, plan(pool, statement, timeout, format)).await
}

/// [`explain`] inside its span.
async fn plan(
    pool: &PgPool,
    statement: &Statement,
    timeout: Duration,
    format: PlanFormat,
) -> Result<Plan, Error> {
    let mut connection = pool.acquire().await.map_err(Error::from_connect)?;
    sqlx::query("BEGIN READ ONLY").execute(&mut *connection).await.map_err(Error::from_query)?;
    if format == PlanFormat::Text {
        let outcome = async {
            set_local_timeouts(&mut connection, timeout).await?;
            let sql = format!("EXPLAIN {}", statement.text);
            sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
                .persistent(false)
                .fetch_all(&mut *connection)
                .await
                .map_err(Error::from_query)
        }
        .await;
        let rolled_back = roll_back(&mut connection).await;
        let lines = outcome.map_err(|error: Error| error.with_timeout(timeout))?;
        rolled_back.map_err(Error::from_query)?;
        let (estimated_rows, total_cost) = text_estimates(&lines);
        return Ok(Plan { plan: Value::from(lines.join("\n")), estimated_rows, total_cost });
    }
    let outcome = async {
        set_local_timeouts(&mut connection, timeout).await?;
        let sql = format!("EXPLAIN (FORMAT JSON) {}", statement.text);
        let (plan,): (Value,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .persistent(false)
            .fetch_one(&mut *connection)
            .await
            .map_err(Error::from_query)?;
        Ok(plan)
    }
    .await;
    let rolled_back = roll_back(&mut connection).await;
    let plan = outcome.map_err(|error: Error| error.with_timeout(timeout))?;
    rolled_back.map_err(Error::from_query)?;
    let top = plan.get(0).and_then(|p| p.get("Plan"));
    // A write's top node is ModifyTable; what it would touch is its input's estimate.
    let estimate_node = match top {
        Some(node) if node.get("Node Type").and_then(Value::as_str) == Some("ModifyTable") => {
            node.get("Plans").and_then(|plans| plans.get(0)).or(Some(node))
        }
        other => other,
    };
    Ok(Plan {
        estimated_rows: estimate_node.and_then(|n| n.get("Plan Rows")).and_then(Value::as_f64),
        total_cost: top.and_then(|n| n.get("Total Cost")).and_then(Value::as_f64),
        plan,
    })
}

/// What a write did.
#[derive(Debug, Clone)]
pub(crate) struct WriteResult {
    pub(crate) rows_affected: u64,
}

/// Run a confirmed write in its own transaction, with local timeouts, and commit it.
///
/// # Errors
///
/// `Query` (the transaction is rolled back), `Timeout`, `Unavailable`.
pub(crate) async fn run_write(
    pool: &PgPool,
    write: ApprovedWrite,
    timeout: Duration,
) -> Result<WriteResult, Error> {
    let statement = write.statement.clone();
    super::traced(None, &statement, write_approved(pool, write, timeout)).await
}

/// [`run_write`] inside its span.
async fn write_approved(
    pool: &PgPool,
    write: ApprovedWrite,
    timeout: Duration,
) -> Result<WriteResult, Error> {
    tracing::info!(
        confirmation = %write.confirmation_id,
        kind = %write.statement.kind,
        "running a confirmed write"
    );
    let mut connection = pool.acquire().await.map_err(Error::from_connect)?;
    let guard = timeout + Duration::from_secs(5);
    let work = async {
        sqlx::query("BEGIN").execute(&mut *connection).await.map_err(Error::from_query)?;
        let outcome = async {
            set_local_timeouts(&mut connection, timeout).await?;
            // The extended protocol: one statement, whatever the text holds.
            let result = sqlx::query(sqlx::AssertSqlSafe(write.statement.text.clone()))
                .persistent(false)
                .execute(&mut *connection)
                .await
                .map_err(Error::from_query)?;
            Ok(WriteResult { rows_affected: result.rows_affected() })
        }
        .await;
        match outcome {
            Ok(result) => {
                sqlx::query("COMMIT").execute(&mut *connection).await.map_err(Error::from_query)?;
                Ok(result)
            }
            Err(error) => {
                let _ = sqlx::query("ROLLBACK").execute(&mut *connection).await;
                Err(error)
            }
        }
    };
    match tokio::time::timeout(guard, work).await {
        Ok(result) => result.map_err(|error: Error| error.with_timeout(timeout)),
        Err(_) => {
            drop(connection.detach());
            Err(Error::Timeout { after: timeout })
        }
    }
}

#[cfg(test)]
mod plan_text_tests {
    use super::text_estimates;

    #[test]
    fn a_text_plan_gives_the_estimates_of_its_top_node_or_of_a_writes_input() {
        let read = ["Seq Scan on artist  (cost=0.00..5.75 rows=275 width=19)"];
        assert_eq!(text_estimates(&read), (Some(275.0), Some(5.75)));
        let write = [
            "Update on artist  (cost=0.00..6.44 rows=0 width=0)",
            "  ->  Seq Scan on artist  (cost=0.00..6.44 rows=1 width=10)",
            "        Filter: (artist_id = 1)",
        ];
        assert_eq!(text_estimates(&write), (Some(1.0), Some(6.44)));
        assert_eq!(text_estimates(&["Result"]), (None, None));
        let empty: [&str; 0] = [];
        assert_eq!(text_estimates(&empty), (None, None));
    }
}
