//! Running a read: one statement over the extended protocol, in `BEGIN READ ONLY` with local
//! statement, lock and idle timeouts, rows decoded as they stream in and capped by count and by
//! size (never silently), and the connection rolled back (or closed) before anyone else gets it.
//!
//! # Design notes
//!
//! `read.rs`'s `single_statement`, through which every tool that takes SQL classifies, refuses a
//! statement with parameter placeholders (orca sends no values). `read.rs` runs a `ReadOnlyQuery`
//! (only `ReadOnlyQuery::from_statement` builds one): `BEGIN READ ONLY`, `SET LOCAL` timeouts
//! through `set_config`, the volatility check, a describe (column names, types, `NOT NULL`
//! origins), then `SELECT .. FROM (<statement>) AS q(..) LIMIT max_rows+1` so the database stops at
//! the row cap, rows decoded from the binary protocol by `encode.rs` (types without a decoder are
//! cast to text in that wrapper), the byte cap applied while streaming, and `ROLLBACK` with
//! `pg_advisory_unlock_all()` (a lock taken by a function inside a view would otherwise outlive the
//! call on the pooled connection).

use std::time::Duration;

use futures::TryStreamExt;
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgRow, PgTypeKind};
use sqlx::{Column, PgPool, Postgres, Row, TypeInfo, ValueRef};

use super::Error;
use super::classify::classify;
use super::encode;
use super::policy;
use super::statement::Statement;

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

/// Classify `sql` and return its one statement, which may hold no parameter placeholders: orca
/// binds no values, so `$1` is the caller's mistake (sent as it is, the database would answer
/// with a protocol error that reads like an outage).
///
/// # Errors
///
/// `Parse`, `Empty`, `MultipleStatements` or `Placeholders`.
pub(crate) fn single_statement(sql: &str) -> Result<Statement, Error> {
    let mut classification = classify(sql).map_err(Error::Parse)?;
    let statement = match classification.statements.len() {
        0 => return Err(Error::Empty),
        1 => classification.statements.remove(0),
        count => {
            return Err(Error::MultipleStatements {
                count,
                kinds: classification.statements.iter().map(|s| s.kind.as_str()).collect(),
            });
        }
    };
    if !statement.parameters.is_empty() {
        return Err(Error::Placeholders { numbers: statement.parameters });
    }
    Ok(statement)
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

/// The rows of a read: decoded values by default, or already encoded ([`EncodedRows`]).
#[derive(Debug, Clone)]
pub(crate) struct ReadResult<R = Vec<Vec<Value>>> {
    pub(crate) columns: Vec<ResultColumn>,
    pub(crate) rows: R,
    /// JSON size of `rows`.
    pub(crate) bytes: usize,
    pub(crate) truncated: Option<Truncation>,
}

/// Where the rows of a read go as they are decoded.
pub(crate) trait RowSink: Default + Send {
    fn push(&mut self, row: Vec<Value>);
    fn len(&self) -> usize;
}

impl RowSink for Vec<Vec<Value>> {
    fn push(&mut self, row: Vec<Value>) {
        Vec::push(self, row);
    }

    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// How many non-null values of each column the semantic hints look at.
pub(crate) const HINT_SAMPLES: usize = 50;

/// A value as the semantic hints read it: strings as they are, the rest as JSON.
pub(crate) fn sample_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// Rows encoded as they stream in, as one JSON array of arrays (what `serde_json` writes of
/// the decoded rows) in chunks of about [`ENCODED_CHUNK`] bytes, with the first
/// [`HINT_SAMPLES`] non-null values of each column kept for the semantic hints. A big result
/// then never exists as a `Value` tree, nor is it copied into bigger buffers as it grows.
#[derive(Debug, Default)]
pub(crate) struct EncodedRows {
    chunks: Vec<Vec<u8>>,
    current: Vec<u8>,
    count: usize,
    pub(crate) samples: Vec<Vec<String>>,
}

/// The size of the chunks rows are encoded into.
const ENCODED_CHUNK: usize = 1 << 20;

impl EncodedRows {
    /// The JSON array of the rows, in chunks that join to it.
    pub(crate) fn into_chunks(mut self) -> Vec<Vec<u8>> {
        if self.count == 0 {
            self.current.push(b'[');
        }
        self.current.push(b']');
        self.chunks.push(self.current);
        self.chunks
    }
}

impl RowSink for EncodedRows {
    fn push(&mut self, row: Vec<Value>) {
        if self.samples.len() < row.len() {
            self.samples.resize_with(row.len(), Vec::new);
        }
        for (samples, value) in self.samples.iter_mut().zip(&row) {
            if samples.len() < HINT_SAMPLES {
                samples.extend(sample_text(value));
            }
        }
        // The first chunk grows as small results need; later ones start at their full size.
        if self.current.len() >= ENCODED_CHUNK {
            let next = Vec::with_capacity(ENCODED_CHUNK + ENCODED_CHUNK / 4);
            self.chunks.push(std::mem::replace(&mut self.current, next));
        }
        self.current.push(if self.count == 0 { b'[' } else { b',' });
        serde_json::to_writer(&mut self.current, &row).expect("a JSON value always serializes");
        self.count += 1;
    }

    fn len(&self) -> usize {
        self.count
    }
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
    run_read_into(pool, query, limits).await
}

/// [`run_read`], with the rows going into a sink of the caller's choice.
///
/// # Errors
///
/// As [`run_read`].
pub(crate) async fn run_read_into<R: RowSink>(
    pool: &PgPool,
    query: &ReadOnlyQuery,
    limits: ReadLimits,
) -> Result<ReadResult<R>, Error> {
    super::traced(None, &query.statement, read_rows(pool, query, limits)).await
}

/// [`run_read_into`] inside its span.
async fn read_rows<R: RowSink>(
    pool: &PgPool,
    query: &ReadOnlyQuery,
    limits: ReadLimits,
) -> Result<ReadResult<R>, Error> {
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

async fn read_in_transaction<R: RowSink>(
    connection: &mut PoolConnection<Postgres>,
    query: &ReadOnlyQuery,
    limits: ReadLimits,
) -> Result<ReadResult<R>, Error> {
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

/// The result columns of a prepared statement, their decoders, and which come straight from a
/// table column (output position, table oid, attribute number).
struct Described {
    columns: Vec<ResultColumn>,
    decoders: Vec<Decoder>,
    origins: Vec<(usize, u32, i16)>,
    type_oids: Vec<Option<u32>>,
}

async fn describe(
    connection: &mut PoolConnection<Postgres>,
    text: &str,
) -> Result<Described, Error> {
    use sqlx::Executor;
    let text = text.to_owned();
    let prepared = (&mut **connection)
        .prepare(sqlx::SqlSafeStr::into_sql_str(sqlx::AssertSqlSafe(text)))
        .await
        .map_err(Error::from_query)?;
    let described = sqlx::Statement::columns(&prepared);
    let mut columns = Vec::with_capacity(described.len());
    let mut decoders = Vec::with_capacity(described.len());
    let mut origins = Vec::new();
    let mut type_oids = Vec::with_capacity(described.len());
    for column in described {
        let type_info = column.type_info();
        decoders.push(decoder_for(type_info));
        type_oids.push(type_info.oid().map(|oid| oid.0));
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
    Ok(Described { columns, decoders, origins, type_oids })
}

async fn fetch_rows<R: RowSink>(
    connection: &mut PoolConnection<Postgres>,
    statement: &Statement,
    limits: ReadLimits,
) -> Result<ReadResult<R>, Error> {
    let Described { columns, decoders, .. } = describe(connection, &statement.text).await?;
    let sql = if statement.is_cursor_query() {
        wrapped_select(&statement.text, &decoders, limits.max_rows)
    } else {
        statement.text.clone()
    };
    let mut rows = R::default();
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

/// What a paged read continues from, and the time filter it applies.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageRequest {
    /// The last page's boundary: sort-key values (text) and how many rows equal to them were
    /// returned. `None` for the first page.
    pub(crate) after: Option<(Vec<Option<String>>, u64)>,
    pub(crate) window: Option<TimeFilter>,
}

/// Keep rows whose time column is in `[from, to)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimeFilter {
    /// An output column by name; `None`: the first timestamp or date column.
    pub(crate) column: Option<String>,
    pub(crate) from: Option<chrono::DateTime<chrono::Utc>>,
    pub(crate) to: Option<chrono::DateTime<chrono::Utc>>,
}

/// How a result was paged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Paging {
    /// Keyset continuation; the tie-breaker that makes the order total.
    Keyset { tie_breaker: &'static str },
    /// The statement cannot be continued page by page; why.
    Unavailable(String),
}

/// A page of rows and where the next one starts.
#[derive(Debug, Clone)]
pub(crate) struct PagedResult {
    pub(crate) result: ReadResult,
    /// The boundary of the next page, when there are more rows.
    pub(crate) next: Option<(Vec<Option<String>>, u64)>,
    pub(crate) paging: Paging,
    /// The time column filtered on, when a window was applied.
    pub(crate) time_column: Option<String>,
}

/// Run one page of a read (see `page.rs` for the strategy).
///
/// # Errors
///
/// As [`run_read`], plus `InvalidPaging` when a time window names no usable column or is
/// asked of a query that cannot be filtered from outside.
pub(crate) async fn run_paged_read(
    pool: &PgPool,
    query: &ReadOnlyQuery,
    limits: ReadLimits,
    request: &PageRequest,
) -> Result<PagedResult, Error> {
    super::traced(None, &query.statement, read_page(pool, query, limits, request)).await
}

/// [`run_paged_read`] inside its span.
async fn read_page(
    pool: &PgPool,
    query: &ReadOnlyQuery,
    limits: ReadLimits,
    request: &PageRequest,
) -> Result<PagedResult, Error> {
    let mut connection = pool.acquire().await.map_err(Error::from_connect)?;
    let guard = limits.timeout + Duration::from_secs(5);
    let work = async {
        sqlx::query("BEGIN READ ONLY")
            .execute(&mut *connection)
            .await
            .map_err(Error::from_query)?;
        let outcome = async {
            set_local_timeouts(&mut connection, limits.timeout).await?;
            let calls = policy::volatile_calls(&mut connection, &query.statement)
                .await
                .map_err(Error::from_query)?;
            if !calls.is_empty() {
                return Err(Error::Volatile { calls });
            }
            fetch_page(&mut connection, &query.statement, limits, request).await
        }
        .await;
        if let Err(error) = roll_back(&mut connection).await {
            connection.close_on_drop();
            return Err(outcome.err().unwrap_or_else(|| Error::from_query(error)));
        }
        outcome
    };
    match tokio::time::timeout(guard, work).await {
        Ok(result) => result.map_err(|error| error.with_timeout(limits.timeout)),
        Err(_) => {
            drop(connection.detach());
            Err(Error::Timeout { after: limits.timeout })
        }
    }
}

async fn fetch_page(
    connection: &mut PoolConnection<Postgres>,
    statement: &Statement,
    limits: ReadLimits,
    request: &PageRequest,
) -> Result<PagedResult, Error> {
    use super::page::{at_or_after, order_by, shape};
    let shape = if statement.is_cursor_query() {
        shape(&statement.text)
    } else {
        super::page::Shape::unpageable("only a SELECT or VALUES can be paged")
    };
    if let Some(reason) = shape.unpageable.clone().or_else(|| shape.order.clone().err()) {
        return unpaged(connection, statement, limits, request, &reason).await;
    }
    let order = shape.order.as_deref().unwrap_or_default();
    let paged = match paged_query(connection, statement, order).await? {
        Ok(paged) => paged,
        Err(reason) => return unpaged(connection, statement, limits, request, &reason).await,
    };
    let PagedQuery { text, described, visible, hidden } = paged;
    let Described { mut columns, mut decoders, origins, type_oids } = described;

    let Some(mut keys) = order_keys(order, &hidden, visible, &columns) else {
        return unpaged(
            connection,
            statement,
            limits,
            request,
            "ORDER BY names a column position that the output does not have",
        )
        .await;
    };
    let primary = primary_key_columns(connection, statement, &shape, &origins).await?;
    let tie_breaker = add_tie_breaker(&mut keys, primary, &columns, visible);
    name_key_types(connection, &mut keys, &type_oids).await?;

    let mut conditions: Vec<String> = Vec::new();
    let mut parameters: Vec<String> = Vec::new();
    let time_column =
        window_conditions(request, &columns, visible, &mut conditions, &mut parameters)?;
    let mut skip = 0u64;
    if let Some((boundary, equal_returned)) = &request.after {
        if boundary.len() != keys.len() {
            return Err(Error::InvalidPaging {
                message: "the page token does not fit this query".to_owned(),
            });
        }
        let (condition, bound) = at_or_after(&keys, boundary, parameters.len() + 1);
        parameters.extend(bound);
        conditions.push(condition);
        skip = *equal_returned;
    }
    let aliases: Vec<String> = (1..=columns.len()).map(|i| format!("\"c{i}\"")).collect();
    decoders.truncate(visible);
    let mut select: Vec<String> = decoders
        .iter()
        .zip(&aliases)
        .map(|(decoder, alias)| match decoder {
            Decoder::Text => format!("q.{alias}::text"),
            Decoder::Scalar(_) | Decoder::Array | Decoder::EnumArray => format!("q.{alias}"),
        })
        .collect();
    select.extend(keys.iter().map(|key| format!("q.\"c{}\"::text", key.column + 1)));
    let limit =
        u64::try_from(limits.max_rows).unwrap_or(u64::MAX).saturating_add(skip).saturating_add(1);
    let sql = format!(
        "SELECT {} FROM (\n{}\n) AS q({}){} ORDER BY {} LIMIT {limit}",
        select.join(", "),
        text,
        aliases.join(", "),
        if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        },
        order_by(&keys),
    );

    let boundary_before = request.after.as_ref().map(|(boundary, _)| boundary.clone());
    let mut rows = Vec::new();
    let mut row_keys: Vec<Vec<Option<String>>> = Vec::new();
    let mut bytes = 2usize;
    let mut truncated = None;
    let mut skipped = 0u64;
    {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
        for parameter in &parameters {
            query = query.bind(parameter.clone());
        }
        let mut stream = query.fetch(&mut **connection);
        while let Some(row) = stream.try_next().await.map_err(Error::from_query)? {
            let key_values: Vec<Option<String>> = (0..keys.len())
                .map(|index| row.try_get::<Option<String>, _>(visible + index))
                .collect::<Result<_, _>>()
                .map_err(Error::from_query)?;
            if skipped < skip && boundary_before.as_ref() == Some(&key_values) {
                skipped += 1;
                continue;
            }
            skipped = skip;
            if rows.len() == limits.max_rows {
                truncated = Some(Truncation::MaxRows);
                break;
            }
            let values = decode_row(&row, &decoders)?;
            let size = values.iter().map(encode::json_size).sum::<usize>() + values.len() + 2;
            if bytes + size > limits.max_bytes && !rows.is_empty() {
                truncated = Some(Truncation::MaxBytes);
                break;
            }
            bytes += size;
            rows.push(values);
            row_keys.push(key_values);
        }
    }
    let next = match (truncated, row_keys.last()) {
        (Some(_), Some(last)) => {
            let trailing = row_keys.iter().rev().take_while(|keys| *keys == last).count() as u64;
            // A run of equal rows that began on an earlier page counts those rows too.
            let before = match &request.after {
                Some((boundary, equal))
                    if boundary == last && trailing == row_keys.len() as u64 =>
                {
                    *equal
                }
                _ => 0,
            };
            Some((last.clone(), before + trailing))
        }
        _ => None,
    };
    columns.truncate(visible);
    Ok(PagedResult {
        result: ReadResult { columns, rows, bytes, truncated },
        next,
        paging: Paging::Keyset { tie_breaker },
        time_column,
    })
}

/// The query's own order as sort keys, on output columns or hidden ones; `None` when an item
/// names a column position the output does not have.
fn order_keys(
    order: &[super::page::OrderItem],
    hidden: &[usize],
    visible: usize,
    columns: &[ResultColumn],
) -> Option<Vec<super::page::SortKey>> {
    let mut keys = Vec::new();
    for (index, item) in order.iter().enumerate() {
        let column = match (hidden.iter().position(|&item| item == index), &item.target) {
            (Some(slot), _) => Some(visible + slot),
            (None, super::page::OrderTarget::Position(position)) => {
                position.checked_sub(1).filter(|i| *i < visible)
            }
            (None, super::page::OrderTarget::Name(name)) => {
                columns[..visible].iter().position(|column| &column.name == name)
            }
            (None, super::page::OrderTarget::Expression) => None,
        }?;
        keys.push(super::page::SortKey {
            column,
            descending: item.descending,
            nulls_first: item.nulls_first.unwrap_or(item.descending),
            type_name: Some(String::new()),
            nullable: columns[column].nullable,
        });
    }
    Some(keys)
}

/// The tie-breaker after the query's own order: the primary key of the one table a simple
/// query reads, when every primary-key column is in the output (`primary`); else every column.
/// Returns which it is.
fn add_tie_breaker(
    keys: &mut Vec<super::page::SortKey>,
    primary: Option<Vec<usize>>,
    columns: &[ResultColumn],
    visible: usize,
) -> &'static str {
    use super::page::SortKey;
    if let Some(primary) = primary {
        for column in primary {
            keys.push(SortKey {
                column,
                descending: false,
                nulls_first: false,
                type_name: Some(String::new()),
                nullable: columns[column].nullable,
            });
        }
        "primary key"
    } else {
        for (column, described) in columns[..visible].iter().enumerate() {
            keys.push(SortKey {
                column,
                descending: false,
                nulls_first: false,
                type_name: None,
                nullable: described.nullable,
            });
        }
        "all columns"
    }
}

/// Typed keys compare as their column's type, named by the catalog. (Page tokens carry the sort
/// keys' values in the clear, signed, not encrypted: a masked caller's are the masked values its
/// session reads.)
async fn name_key_types(
    connection: &mut PoolConnection<Postgres>,
    keys: &mut [super::page::SortKey],
    type_oids: &[Option<u32>],
) -> Result<(), Error> {
    let typed: Vec<i64> = keys
        .iter()
        .filter(|key| key.type_name.is_some())
        .map(|key| i64::from(type_oids[key.column].unwrap_or(25)))
        .collect();
    let names: Vec<String> = sqlx::query_scalar("SELECT format_type(t::oid, NULL) FROM unnest($1::int8[]) WITH ORDINALITY AS u(t, n) ORDER BY n")
        .bind(&typed)
        .fetch_all(&mut **connection)
        .await
        .map_err(Error::from_query)?;
    let mut names = names.into_iter();
    for key in keys.iter_mut().filter(|key| key.type_name.is_some()) {
        key.type_name = names.next();
    }
    Ok(())
}

/// The time window, on a named or the first time-typed column: its conditions and their
/// parameters added, and the column's name returned.
fn window_conditions(
    request: &PageRequest,
    columns: &[ResultColumn],
    visible: usize,
    conditions: &mut Vec<String>,
    parameters: &mut Vec<String>,
) -> Result<Option<String>, Error> {
    let Some(window) = &request.window else { return Ok(None) };
    let index = match &window.column {
        Some(name) => columns[..visible]
            .iter()
            .position(|column| &column.name == name)
            .or_else(|| columns[..visible].iter().position(|column| column.name.eq_ignore_ascii_case(name)))
            .ok_or_else(|| Error::InvalidPaging {
                message: format!("time_range.column `{name}` is not a column of the result"),
            })?,
        None => columns[..visible]
            .iter()
            .position(|column| matches!(column.type_name.as_str(), "TIMESTAMPTZ" | "TIMESTAMP" | "DATE"))
            .ok_or_else(|| Error::InvalidPaging {
                message: "the result has no timestamp or date column to apply time_range to; name one with time_range.column".to_owned(),
            })?,
    };
    let column = format!("q.\"c{}\"", index + 1);
    if let Some(from) = window.from {
        parameters.push(from.to_rfc3339());
        conditions.push(format!("{column} >= ${}::timestamptz", parameters.len()));
    }
    if let Some(to) = window.to {
        parameters.push(to.to_rfc3339());
        conditions.push(format!("{column} < ${}::timestamptz", parameters.len()));
    }
    Ok(Some(columns[index].name.clone()))
}

/// What a paged read runs: the statement's own text, or, when its `ORDER BY` uses what it does
/// not select, the statement with those items (`hidden`, indexes into the `ORDER BY`) appended
/// to its select list as hidden output columns after the `visible` ones, which are all the
/// caller gets (see `page::with_hidden_keys`).
struct PagedQuery<'a> {
    text: std::borrow::Cow<'a, str>,
    described: Described,
    visible: usize,
    hidden: Vec<usize>,
}

/// Describe `statement` for paging in `order`; the inner `Err` says why it cannot be paged. (A
/// masked caller's hidden keys are masked values too: its statement reads masked relations.)
async fn paged_query<'a>(
    connection: &mut PoolConnection<Postgres>,
    statement: &'a Statement,
    order: &[super::page::OrderItem],
) -> Result<Result<PagedQuery<'a>, String>, Error> {
    let described = describe(connection, &statement.text).await?;
    let visible = described.columns.len();
    let names: Vec<&str> = described.columns.iter().map(|column| column.name.as_str()).collect();
    let hidden = super::page::hidden_items(order, &names);
    if hidden.is_empty() {
        let text = std::borrow::Cow::Borrowed(statement.text.as_str());
        return Ok(Ok(PagedQuery { text, described, visible, hidden }));
    }
    let rewritten = match super::page::with_hidden_keys(statement, &hidden) {
        Ok(rewritten) => rewritten,
        Err(reason) => return Ok(Err(reason)),
    };
    let described = describe(connection, &rewritten).await?;
    if described.columns.len() != visible + hidden.len() {
        return Ok(Err("the query's ORDER BY could not be carried with its pages".to_owned()));
    }
    let text = std::borrow::Cow::Owned(rewritten);
    Ok(Ok(PagedQuery { text, described, visible, hidden }))
}

/// The first page of a query that cannot be continued, with the reason.
async fn unpaged(
    connection: &mut PoolConnection<Postgres>,
    statement: &Statement,
    limits: ReadLimits,
    request: &PageRequest,
    reason: &str,
) -> Result<PagedResult, Error> {
    if request.window.is_some() {
        return Err(Error::InvalidPaging {
            message: format!("a time_range cannot be applied to this query: {reason}"),
        });
    }
    if request.after.is_some() {
        return Err(Error::InvalidPaging {
            message: format!("this query cannot be paged: {reason}"),
        });
    }
    let result = fetch_rows(connection, statement, limits).await?;
    Ok(PagedResult {
        result,
        next: None,
        paging: Paging::Unavailable(reason.to_owned()),
        time_column: None,
    })
}

/// Output positions of the primary key of the one table a simple query reads, when all of
/// them are in the output and nothing in the query can repeat a row (a set-returning call).
async fn primary_key_columns(
    connection: &mut PoolConnection<Postgres>,
    statement: &Statement,
    shape: &super::page::Shape,
    origins: &[(usize, u32, i16)],
) -> Result<Option<Vec<usize>>, Error> {
    let Some((schema, table)) = &shape.single_table else { return Ok(None) };
    let Some(&(_, relation, _)) = origins.first() else { return Ok(None) };
    let functions: Vec<String> = statement.functions.iter().map(|name| name.name.clone()).collect();
    let name = match schema {
        Some(schema) => format!("{}.{}", quote_identifier(schema), quote_identifier(table)),
        None => quote_identifier(table),
    };
    let row: Option<(Vec<i16>,)> = sqlx::query_as(
        "SELECT string_to_array(i.indkey::text, ' ')::int2[] FROM pg_catalog.pg_index i \
           JOIN pg_catalog.pg_class c ON c.oid = i.indrelid \
          WHERE i.indrelid = $1::int8::oid AND i.indisprimary AND c.relkind IN ('r', 'p') \
            AND to_regclass($2) = $1::int8::oid \
            AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = ANY($3) AND p.proretset)",
    )
    .bind(i64::from(relation))
    .bind(&name)
    .bind(&functions)
    .fetch_optional(&mut **connection)
    .await
    .map_err(Error::from_query)?;
    let Some((attributes,)) = row else { return Ok(None) };
    let mut positions = Vec::with_capacity(attributes.len());
    for attribute in attributes {
        match origins.iter().find(|(_, rel, att)| *rel == relation && *att == attribute) {
            Some((ordinal, _, _)) => positions.push(*ordinal),
            None => return Ok(None),
        }
    }
    Ok(Some(positions))
}

fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{EncodedRows, HINT_SAMPLES, RowSink};

    fn encoded(rows: &[Vec<Value>]) -> EncodedRows {
        let mut sink = EncodedRows::default();
        for row in rows {
            sink.push(row.clone());
        }
        sink
    }

    #[test]
    fn encoded_rows_join_to_what_serde_json_writes_of_the_rows() {
        for count in [0usize, 1, 2, 80_000] {
            let rows: Vec<Vec<Value>> = (0..count)
                .map(|n| vec![json!(n), json!(format!("row \"{n}\" é")), Value::Null])
                .collect();
            let sink = encoded(&rows);
            assert_eq!(sink.len(), count);
            let chunks = sink.into_chunks();
            if count == 80_000 {
                assert!(chunks.len() > 1, "a result over a chunk is written in several");
            }
            assert_eq!(chunks.concat(), serde_json::to_vec(&rows).unwrap(), "{count} rows");
        }
    }

    #[test]
    fn encoded_rows_keep_the_first_non_null_values_of_each_column_for_the_hints() {
        let rows: Vec<Vec<Value>> = (0..200)
            .map(|n| vec![if n < 10 { Value::Null } else { json!(n) }, json!(format!("t{n}"))])
            .collect();
        let sink = encoded(&rows);
        assert_eq!(sink.samples[0].len(), HINT_SAMPLES);
        assert_eq!(sink.samples[0][0], "10");
        assert_eq!(sink.samples[1][0], "t0");
    }
}
