//! SQL on the target PostgreSQL database: classification with the real grammar, the read check,
//! read execution with caps, and writes behind confirmation tokens. Knows nothing of MCP or
//! HTTP: callers get plain data or an `Error`.
//!
//! # Design notes
//!
//! SQL on the target database, knowing nothing of MCP (public so that the fuzz target and
//! benchmarks can call `classify`).
//!
//! A `ReadOnlyQuery` may carry a `CellMask` (`with_mask`): `read.rs` asks it, after the describe,
//! which output columns (by name) it covers, and masks their cells as each row is decoded, before
//! the row is counted, encoded or sampled; a paged read whose keys would include a covered column
//! is not paged (page tokens carry key values), and a time window on one is refused. `sql` defines
//! the trait and knows no policy.
//!
//! `explain_read` in `write.rs` explains a read as text or JSON, with `ANALYZE` inside the
//! rolled-back read-only transaction.

mod classify;
mod confirm;
mod encode;
pub mod hints;
pub(crate) mod introspect;
pub(crate) mod materialize;
pub(crate) mod page;
pub mod pii;
mod policy;
mod read;
pub(crate) mod records;
mod redirect;
mod statement;
pub mod substrait;
pub mod time_range;
mod tree;
mod validate;
mod write;

use std::future::Future;
use std::time::Duration;

pub use classify::classify;
pub(crate) use confirm::{
    ApprovalRequest, ApproveError, Binding, ConfirmError, Minted, Secret, approve, mint,
    pending_approvals, redeem_approval, redeem_token,
};
pub(crate) use confirm::{TokenCheck, check_token, token_text};
pub(crate) use introspect::{DatabaseSchema, introspect};
pub(crate) use policy::{STATE_SCHEMA, VolatileCall};
pub(crate) use read::{
    EncodedRows, HINT_SAMPLES, PageRequest, Paging, ReadLimits, ReadOnlyQuery, ReadResult,
    ResultColumn, RowSink, TimeFilter, Truncation, check_read, run_paged_read, run_read,
    run_read_into, sample_text, single_statement,
};
pub(crate) use redirect::{quote_identifier, redirect_schemas};
pub use statement::{Classification, Effect, ParseError, QualifiedName, Statement, StatementKind};
pub(crate) use validate::{Validated, validate};
pub(crate) use write::{PlanFormat, explain, explain_read, explainable, run_write};

/// What can go wrong with SQL, in terms a caller can branch on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("the SQL does not parse: {0}")]
    Parse(ParseError),
    #[error("the text holds no SQL statement")]
    Empty,
    #[error("the text holds {count} statements ({}); send exactly one", kinds.join(", "))]
    MultipleStatements { count: usize, kinds: Vec<&'static str> },
    #[error("the statement is not allowed: {}", reasons.join("; "))]
    Denied { reasons: Vec<String> },
    #[error(
        "the statement holds parameter placeholders {}; orca sends no parameter values",
        placeholder_list(numbers)
    )]
    Placeholders { numbers: Vec<u32> },
    #[error("the statement is a {} statement, not a read", statement.kind)]
    NotARead { statement: Box<Statement> },
    #[error("a read may not call volatile {}", calls.iter().map(|c| format!("{} {}", c.what, c.name)).collect::<Vec<_>>().join(", "))]
    Volatile { calls: Vec<VolatileCall> },
    #[error("the statement ran longer than the {} ms timeout and was cancelled", after.as_millis())]
    Timeout { after: Duration },
    #[error("the statement tried to change data inside a read-only transaction")]
    ReadOnlyViolation,
    #[error("{message}")]
    Query { message: String, code: Option<String> },
    #[error("result column {column} could not be decoded: {message}")]
    Decode { column: usize, message: String },
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("{message}")]
    InvalidPaging { message: String },
}

impl Error {
    /// A database error from a statement: timeouts and read-only violations by SQLSTATE, lost
    /// connections and a server shutting down (classes 08 and 57P) as unavailable, everything else with PostgreSQL's own message (which names
    /// objects of the caller's query, never the connection string).
    pub(crate) fn from_query(error: sqlx::Error) -> Error {
        match &error {
            sqlx::Error::Database(database) => {
                let code = database.code().map(|code| code.into_owned());
                match code.as_deref() {
                    Some("57014" | "55P03") => Error::Timeout { after: Duration::ZERO },
                    Some("25006") => Error::ReadOnlyViolation,
                    // The server shutting down, crashed or still starting, or the connection
                    // broken: the database is unavailable, not the query wrong.
                    Some(code) if code.starts_with("08") || code.starts_with("57P") => {
                        Error::Unavailable(database.message().to_owned())
                    }
                    _ => {
                        let mut message = database.message().to_owned();
                        if let Some(pg) =
                            database.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                        {
                            if let Some(detail) = pg.detail() {
                                message.push_str(" (");
                                message.push_str(detail);
                                message.push(')');
                            }
                            if let Some(hint) = pg.hint() {
                                message.push_str("; hint: ");
                                message.push_str(hint);
                            }
                        }
                        Error::Query { message, code }
                    }
                }
            }
            _ => {
                tracing::debug!(%error, "statement failed outside the database");
                Error::from_connect(error)
            }
        }
    }

    /// A timeout reported by the database, with the limit that was set.
    pub(crate) fn with_timeout(self, timeout: Duration) -> Error {
        match self {
            Error::Timeout { after } if after.is_zero() => Error::Timeout { after: timeout },
            other => other,
        }
    }

    /// A failure to reach the database, without the connection string.
    pub(crate) fn from_connect(error: sqlx::Error) -> Error {
        let message = match error {
            sqlx::Error::PoolTimedOut => "no connection became available in time".to_owned(),
            sqlx::Error::PoolClosed => "the connection pool is closed".to_owned(),
            sqlx::Error::Io(io) => format!("connection failed: {}", io.kind()),
            sqlx::Error::Tls(_) => "the TLS handshake failed".to_owned(),
            sqlx::Error::Protocol(_) => "the server answered with a protocol error".to_owned(),
            sqlx::Error::Configuration(_) => "the connection settings are invalid".to_owned(),
            sqlx::Error::Database(database) => database.message().to_owned(),
            _ => "the connection failed".to_owned(),
        };
        Error::Unavailable(message)
    }
}

/// `$1, $2` for the placeholder numbers `[1, 2]`.
pub(crate) fn placeholder_list(numbers: &[u32]) -> String {
    numbers.iter().map(|n| format!("${n}")).collect::<Vec<_>>().join(", ")
}

/// Run one statement's database work (`operation`: `EXPLAIN`, or `None` for the statement's own
/// kind) inside a child span of the current call, named by a summary of the statement (its kind
/// and tables, never its text or values).
async fn traced<T>(
    operation: Option<&'static str>,
    statement: &Statement,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let span = crate::telemetry::Span::child(opentelemetry::trace::SpanKind::Client, || {
        let summary = statement.summary(operation);
        let name = operation.unwrap_or_else(|| statement.kind.keyword());
        let attributes = crate::telemetry::statement_attributes(name, &summary);
        (summary, attributes)
    });
    let outcome = span.run(work).await;
    if let Err(error) = &outcome {
        span.fail(error.kind(), "the statement failed");
    }
    outcome
}

impl Error {
    /// The error's kind for a span's `error.type`: the SQLSTATE of a database error, else the
    /// variant (never a message, which may quote values).
    fn kind(&self) -> &'static str {
        match self {
            Error::Parse(_) | Error::Empty | Error::MultipleStatements { .. } => "parse",
            Error::Placeholders { .. } => "placeholders",
            Error::Denied { .. } | Error::NotARead { .. } | Error::Volatile { .. } => "denied",
            Error::Timeout { .. } => "timeout",
            Error::ReadOnlyViolation => "read_only_violation",
            Error::Query { .. } => "query",
            Error::Decode { .. } => "decode",
            Error::Unavailable(_) => "unavailable",
            Error::InvalidPaging { .. } => "invalid_paging",
        }
    }
}

/// The size of a connection pool: at most `max` connections, never fewer than `min` once opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolSize {
    pub(crate) max: u32,
    pub(crate) min: u32,
}

/// A lazy pool on the target database, of the size `database:` gives. Connections identify as
/// `orca`.
///
/// # Errors
///
/// When the URL is not a PostgreSQL URL (the message never repeats the URL).
pub(crate) fn connect_target(url: &str, size: PoolSize) -> anyhow::Result<sqlx::PgPool> {
    use anyhow::Context;
    let options: sqlx::postgres::PgConnectOptions = url.parse().context("invalid DATABASE_URL")?;
    Ok(pool_options(size, Duration::from_secs(5))
        .connect_lazy_with(options.application_name("orca")))
}

/// The options of every pool orca opens: at most `size.max`, idle ones closed after five minutes
/// down to `size.min`.
pub(crate) fn pool_options(
    size: PoolSize,
    acquire_timeout: Duration,
) -> sqlx::postgres::PgPoolOptions {
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(size.max)
        .min_connections(size.min)
        .acquire_timeout(acquire_timeout)
        .idle_timeout(Duration::from_secs(300))
}

/// Open `size.min` connections of a lazy pool in the background, so that a pool
/// meant to be of fixed size is at that size from the start instead of growing with the load's
/// peaks. (sqlx keeps the minimum once it is reached, but a lazy pool does not reach it by
/// itself.) A database that is down is not an error here: the first calls find it down.
pub(crate) fn open_minimum(pool: &sqlx::PgPool, size: PoolSize) {
    let wanted = size.min;
    if wanted == 0 {
        return;
    }
    let pool = pool.clone();
    tokio::spawn(async move {
        // Each connection is held until all are open, so the pool cannot hand one out twice.
        let mut held = Vec::with_capacity(wanted as usize);
        for _ in 0..wanted {
            match pool.acquire().await {
                Ok(connection) => held.push(connection),
                Err(error) => {
                    tracing::debug!(%error, "could not open the pool's minimum of connections");
                    break;
                }
            }
        }
    });
}
