//! Checking SQL that a model wrote before anyone sees it: PostgreSQL's grammar, exactly one
//! statement, a kind orca would run at all, nothing denied, and, when the statement can be
//! planned, `EXPLAIN` against the live database in a read-only transaction so that unknown
//! tables, columns and type errors are caught with PostgreSQL's own message.
//!
//! # Design notes
//!
//! `validate.rs` checks SQL a model wrote: one statement, a kind orca runs, nothing denied, the
//! read check, and `EXPLAIN` against the live database.

use std::time::Duration;

use sqlx::PgPool;

use super::Error;
use super::read::{ReadOnlyQuery, check_read, single_statement};
use super::statement::{Statement, StatementKind};
use super::write::{explain, explainable};

/// A statement that passed every check.
#[derive(Debug, Clone)]
pub(crate) struct Validated {
    pub(crate) statement: Statement,
    /// Whether the statement was planned against the database (DDL cannot be).
    pub(crate) explained: bool,
    /// The planner's estimate: rows returned for a read, rows touched for a write.
    pub(crate) estimated_rows: Option<f64>,
}

impl Validated {
    pub(crate) fn is_write(&self) -> bool {
        self.statement.writes()
    }
}

/// Which check a statement failed, for the failure record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The grammar, the statement count, the kind, denied functions.
    Parse,
    /// The database: planning, function volatility.
    Database,
}

impl Stage {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Database => "database",
        }
    }
}

/// Why a statement failed validation.
#[derive(Debug)]
pub(crate) struct Invalid {
    pub(crate) stage: Stage,
    pub(crate) error: Error,
}

/// Validate `sql` as something orca could run: a read (checked like `execute_sql` checks
/// reads, then planned) or a data change or DDL (planned when PostgreSQL can plan it). Session
/// settings, transaction control and utility statements are refused.
///
/// # Errors
///
/// [`Invalid`] with the stage and the error; `Error::Unavailable` and `Error::Timeout` mean the
/// database, not the statement, is at fault.
pub(crate) async fn validate(
    pool: &PgPool,
    sql: &str,
    as_run: Option<&str>,
    timeout: Duration,
    format: super::PlanFormat,
) -> Result<Validated, Invalid> {
    let parse = |error| Invalid { stage: Stage::Parse, error };
    let database = |error| Invalid { stage: Stage::Database, error };
    let statement = single_statement(sql).map_err(parse)?;
    // What the database checks: the statement as it would run for the caller.
    let run = match as_run {
        Some(text) => single_statement(text).map_err(parse)?,
        None => statement.clone(),
    };
    match statement.kind {
        StatementKind::Transaction | StatementKind::Session | StatementKind::Utility(_) => {
            return Err(parse(Error::Denied {
                reasons: vec![format!(
                    "a {} statement is not something orca runs; write one SELECT (or one INSERT, UPDATE, DELETE or DDL statement)",
                    statement.kind
                )],
            }));
        }
        _ => {}
    }
    if !statement.denied.is_empty() {
        return Err(parse(Error::Denied { reasons: statement.denied }));
    }
    if !statement.writes() {
        let query = ReadOnlyQuery::from_statement(run.clone()).map_err(parse)?;
        check_read(pool, &query, timeout).await.map_err(database)?;
    }
    if !explainable(&statement) {
        return Ok(Validated { statement, explained: false, estimated_rows: None });
    }
    let plan = explain(pool, &run, timeout, format).await.map_err(database)?;
    Ok(Validated { statement, explained: true, estimated_rows: plan.estimated_rows })
}
