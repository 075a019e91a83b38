//! Running a read: one statement over the extended protocol, in `BEGIN READ ONLY` with local
//! statement, lock and idle timeouts, rows decoded as they stream in and capped by count and by
//! size (never silently), and the connection rolled back (or closed) before anyone else gets it.

use std::time::Duration;

use futures::TryStreamExt;
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgRow, PgTypeKind};
use sqlx::{Column, PgPool, Postgres, Row, TypeInfo, ValueRef};

use super::Error;
use super::classify::{Statement, classify};
use super::encode;
use super::policy;

/// Bounds on one read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadLimits {
    pub(crate) max_rows: usize,
    pub(crate) max_bytes: usize,
    pub(crate) timeout: Duration,
}

/// A statement the classifier accepted as a read. Only [`ReadOnlyQuery::from_statement`] builds one, so a
/// function that takes it cannot be handed a write.
#[derive(Debug, Clone)]
pub(crate) struct ReadOnlyQuery {
    statement: Statement,
}

impl ReadOnlyQuery {
    /// Keep an already classified statement only if it is a read that uses nothing denied.
    ///
    /// # Errors
    ///
    /// `Denied` or `NotARead`.
    pub(crate) fn from_statement(statement: Statement) -> Result<ReadOnlyQuery, Error> {
        if !statement.denied.is_empty() {
            return Err(Error::Denied { reasons: statement.denied });
        }
        if statement.writes() {
            return Err(Error::NotARead { statement: Box::new(statement) });
        }
        Ok(ReadOnlyQuery { statement })
    }

    pub(crate) fn statement(&self) -> &Statement {
        &self.statement
    }
}

/// Classify `sql` and return its one statement.
///
/// # Errors
///
/// `Parse`, `Empty` or `MultipleStatements`.
pub(crate) fn single_statement(sql: &str) -> Result<Statement, Error> {
    let mut classification = classify(sql).map_err(Error::Parse)?;
    match classification.statements.len() {
        0 => Err(Error::Empty),
        1 => Ok(classification.statements.remove(0)),
        count => Err(Error::MultipleStatements {
            count,
            kinds: classification.statements.iter().map(|s| s.kind.as_str()).collect(),
        }),
    }
}

/// A result column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultColumn {
    pub(crate) name: String,
    pub(crate) type_name: String,
    /// False only when the column comes straight from a `NOT NULL` table column.
    pub(crate) nullable: bool,
}

/// Why a result stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Truncation {
    MaxRows,
    MaxBytes,
}

impl Truncation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Truncation::MaxRows => "max_rows",
            Truncation::MaxBytes => "max_bytes",
        }
    }
}

/// The rows of a read.
#[derive(Debug, Clone)]
pub(crate) struct ReadResult {
    pub(crate) columns: Vec<ResultColumn>,
    pub(crate) rows: Vec<Vec<Value>>,
    /// Approximate JSON size of `rows`.
    pub(crate) bytes: usize,
    pub(crate) truncated: Option<Truncation>,
}

/// How one result column is turned into JSON.
#[derive(Debug, Clone, Copy)]
enum Decoder {
    Scalar(u32),
    Array,
    /// An array of an enum: binary arrays whose elements are the labels' text.
    EnumArray,
    Text,
}

/// Run a read with `limits`.
///
/// # Errors
///
/// `Volatile` when the statement calls a volatile function, `Timeout`, `Query` for a database
/// error, `Unavailable` when no connection can be had.
pub(crate) async fn run_read(
    pool: &PgPool,
    query: &ReadOnlyQuery,
    limits: ReadLimits,
) -> Result<ReadResult, Error> {
    let mut connection = pool.acquire().await.map_err(Error::from_connect)?;
    // The statement timeout stops the query inside the database; this one guards against a
    // stalled network, and then the connection is closed rather than reused.
    let guard = limits.timeout + Duration::from_secs(5);
    match tokio::time::timeout(guard, read_in_transaction(&mut connection, query, limits)).await {
        Ok(result) => result.map_err(|error| error.with_timeout(limits.timeout)),
        Err(_) => {
            drop(connection.detach());
            Err(Error::Timeout { after: limits.timeout })
        }
    }
}

/// The read check that needs the database: the volatility of every function the statement
/// calls, asked in a read-only transaction that is rolled back.
///
/// # Errors
///
/// `Volatile`, `Timeout`, `Query`, `Unavailable`.
pub(crate) async fn check_read(
    pool: &PgPool,
    query: &ReadOnlyQuery,
    timeout: Duration,
) -> Result<(), Error> {
    let mut connection = pool.acquire().await.map_err(Error::from_connect)?;
    sqlx::query("BEGIN READ ONLY").execute(&mut *connection).await.map_err(Error::from_query)?;
    let outcome = async {
        set_local_timeouts(&mut connection, timeout).await?;
        policy::volatile_calls(&mut connection, &query.statement).await.map_err(Error::from_query)
    }
    .await;
    sqlx::query("ROLLBACK").execute(&mut *connection).await.map_err(Error::from_query)?;
    let calls = outcome.map_err(|error| error.with_timeout(timeout))?;
    if calls.is_empty() { Ok(()) } else { Err(Error::Volatile { calls }) }
}

async fn read_in_transaction(
    connection: &mut PoolConnection<Postgres>,
    query: &ReadOnlyQuery,
    limits: ReadLimits,
) -> Result<ReadResult, Error> {
    sqlx::query("BEGIN READ ONLY").execute(&mut **connection).await.map_err(Error::from_query)?;
    let outcome = async {
        set_local_timeouts(connection, limits.timeout).await?;
        let calls = policy::volatile_calls(connection, &query.statement)
            .await
            .map_err(Error::from_query)?;
        if !calls.is_empty() {
            return Err(Error::Volatile { calls });
        }
        fetch_rows(connection, &query.statement, limits).await
    }
    .await;
    // Whatever happened, the connection goes back clean, or not at all.
    if let Err(error) = roll_back(connection).await {
        connection.close_on_drop();
        return Err(outcome.err().unwrap_or_else(|| Error::from_query(error)));
    }
    outcome
}

/// End a read-only transaction in which the caller's SQL ran (or was planned) and release the
/// session-level advisory locks that a function no parser sees (inside a view, or folded while
/// planning) may have taken: a rollback keeps them, and the connection goes back to the pool.
/// One round trip: the simple protocol runs both statements.
pub(crate) async fn roll_back(connection: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::raw_sql("ROLLBACK; SELECT pg_catalog.pg_advisory_unlock_all()")
        .execute(connection)
        .await
        .map(|_| ())
}

/// `SET LOCAL` the statement, lock and idle-in-transaction timeouts (bound, not spliced).
pub(crate) async fn set_local_timeouts(
    connection: &mut PoolConnection<Postgres>,
    timeout: Duration,
) -> Result<(), Error> {
    let statement_ms = timeout.as_millis().max(1);
    let lock_ms = statement_ms.min(10_000);
    let idle_ms = statement_ms.saturating_mul(2).max(10_000);
    sqlx::query(
        "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true), \
                set_config('idle_in_transaction_session_timeout', $3, true)",
    )
    .bind(format!("{statement_ms}ms"))
    .bind(format!("{lock_ms}ms"))
    .bind(format!("{idle_ms}ms"))
    .execute(&mut **connection)
    .await
    .map_err(Error::from_query)?;
    Ok(())
}

async fn fetch_rows(
    connection: &mut PoolConnection<Postgres>,
    statement: &Statement,
    limits: ReadLimits,
) -> Result<ReadResult, Error> {
    use sqlx::Executor;
    let text = statement.text.clone();
    let prepared = (&mut **connection)
        .prepare(sqlx::SqlSafeStr::into_sql_str(sqlx::AssertSqlSafe(text)))
        .await
        .map_err(Error::from_query)?;
    let described = sqlx::Statement::columns(&prepared);
    let mut columns = Vec::with_capacity(described.len());
    let mut decoders = Vec::with_capacity(described.len());
    let mut origins = Vec::new();
    for column in described {
        let type_info = column.type_info();
        decoders.push(decoder_for(type_info));
        columns.push(ResultColumn {
            name: column.name().to_owned(),
            type_name: type_info.name().to_owned(),
            nullable: true,
        });
        if let (Some(relation), Some(attribute)) =
            (column.relation_id(), column.relation_attribute_no())
        {
            origins.push((column.ordinal(), relation.0, attribute));
        }
    }
    mark_not_null(connection, &mut columns, &origins).await?;

    let sql = if statement.is_cursor_query() {
        wrapped_select(&statement.text, &decoders, limits.max_rows)
    } else {
        statement.text.clone()
    };
    let mut rows = Vec::new();
    let mut bytes = 2usize;
    let mut truncated = None;
    {
        let mut stream =
            sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false).fetch(&mut **connection);
        while let Some(row) = stream.try_next().await.map_err(Error::from_query)? {
            if rows.len() == limits.max_rows {
                truncated = Some(Truncation::MaxRows);
                break;
            }
            let values = decode_row(&row, &decoders)?;
            let size = values.iter().map(encode::json_size).sum::<usize>() + values.len() + 2;
            if bytes + size > limits.max_bytes {
                truncated = Some(Truncation::MaxBytes);
                break;
            }
            bytes += size;
            rows.push(values);
        }
    }
    Ok(ReadResult { columns, rows, bytes, truncated })
}

/// `SELECT q."c1", q."c2"::text ... FROM (<statement>) AS q("c1", "c2") LIMIT n+1`: the row cap
/// is applied by the database (so a capped read never streams the whole table), and columns of
/// types without a binary decoder come back in their text form.
fn wrapped_select(text: &str, decoders: &[Decoder], max_rows: usize) -> String {
    let limit = max_rows.saturating_add(1);
    if decoders.is_empty() {
        return format!("SELECT FROM (\n{text}\n) AS q LIMIT {limit}");
    }
    let aliases: Vec<String> = (1..=decoders.len()).map(|i| format!("\"c{i}\"")).collect();
    let select: Vec<String> = decoders
        .iter()
        .zip(&aliases)
        .map(|(decoder, alias)| match decoder {
            Decoder::Text => format!("q.{alias}::text"),
            Decoder::Scalar(_) | Decoder::Array | Decoder::EnumArray => format!("q.{alias}"),
        })
        .collect();
    format!(
        "SELECT {} FROM (\n{text}\n) AS q({}) LIMIT {limit}",
        select.join(", "),
        aliases.join(", ")
    )
}

fn decoder_for(type_info: &sqlx::postgres::PgTypeInfo) -> Decoder {
    match type_info.kind() {
        PgTypeKind::Enum(_) => Decoder::Text,
        PgTypeKind::Array(element) if element_supported(element) => Decoder::Array,
        PgTypeKind::Array(element) if matches!(element.kind(), PgTypeKind::Enum(_)) => {
            Decoder::EnumArray
        }
        PgTypeKind::Simple | PgTypeKind::Domain(_) => match type_info.oid() {
            Some(oid) if encode::is_supported(oid.0) => Decoder::Scalar(oid.0),
            _ => Decoder::Text,
        },
        _ => Decoder::Text,
    }
}

fn element_supported(element: &sqlx::postgres::PgTypeInfo) -> bool {
    match element.kind() {
        PgTypeKind::Simple => element.oid().is_some_and(|oid| encode::is_supported(oid.0)),
        _ => false,
    }
}

fn decode_row(row: &PgRow, decoders: &[Decoder]) -> Result<Vec<Value>, Error> {
    let mut values = Vec::with_capacity(decoders.len());
    for (index, decoder) in decoders.iter().enumerate() {
        let raw = row.try_get_raw(index).map_err(Error::from_query)?;
        let bytes = if raw.is_null() { None } else { raw.as_bytes().ok() };
        let value = match decoder {
            Decoder::Scalar(oid) => encode::decode(*oid, bytes),
            Decoder::Array => encode::decode_array(bytes),
            Decoder::EnumArray => {
                encode::decode_array_with(bytes, |_, label| encode::decode_text(label))
            }
            Decoder::Text => encode::decode_text(bytes),
        }
        .map_err(|error| Error::Decode { column: index + 1, message: error.to_string() })?;
        values.push(value);
    }
    Ok(values)
}

#[derive(sqlx::FromRow)]
struct NotNull {
    ordinal: i32,
}

/// Mark columns that come straight from a `NOT NULL` table column, in one catalog query.
async fn mark_not_null(
    connection: &mut PoolConnection<Postgres>,
    columns: &mut [ResultColumn],
    origins: &[(usize, u32, i16)],
) -> Result<(), Error> {
    if origins.is_empty() {
        return Ok(());
    }
    let ordinals: Vec<i32> = origins.iter().map(|o| i32::try_from(o.0).unwrap_or(-1)).collect();
    let relations: Vec<i64> = origins.iter().map(|o| i64::from(o.1)).collect();
    let attributes: Vec<i16> = origins.iter().map(|o| o.2).collect();
    let not_null: Vec<NotNull> = sqlx::query_as(
        "SELECT o.ordinal FROM unnest($1::int4[], $2::int8[], $3::int2[]) AS o(ordinal, rel, att) \
           JOIN pg_catalog.pg_attribute a ON a.attrelid = o.rel::oid AND a.attnum = o.att \
          WHERE a.attnotnull",
    )
    .bind(&ordinals)
    .bind(&relations)
    .bind(&attributes)
    .fetch_all(&mut **connection)
    .await
    .map_err(Error::from_query)?;
    for row in not_null {
        if let Some(column) = usize::try_from(row.ordinal).ok().and_then(|i| columns.get_mut(i)) {
            column.nullable = false;
        }
    }
    Ok(())
}
