//! What the SQL servers (`postgres` and `data`) share, so that neither imports the other: the
//! target databases (`databases.rs`) and the `database` argument that chooses one, the cached
//! schema, results as the TabularResult of the data-provider specification, the tool error for an
//! SQL error, and the caller's masking of a read.

mod databases;

pub(crate) use databases::{Database, DatabaseSettings, Databases, detect as detect_features};

use std::sync::Arc;

use serde_json::{Map, Value, json};
use sqlx::PgPool;

use crate::privacy::session::{MaskedSession, MaskedSessions};
use crate::sql;
use crate::tool::{ErrorCode, ToolError};

/// A database the SQL tools work on.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) pool: PgPool,
    /// `catalog@host:port/database`: what confirmation and page tokens are bound to, so that a
    /// token from one database is refused on another.
    pub(crate) label: String,
    /// `postgres:catalog`: the `source` of results.
    pub(crate) source: String,
    /// The catalog name clients use.
    pub(crate) catalog: Arc<str>,
    /// Where the statements of callers whose role masks columns run (`privacy::session`).
    pub(crate) masked: MaskedSessions,
}

impl Target {
    /// The database `pool` reaches, served as the catalog `catalog`.
    pub(crate) fn named(pool: PgPool, catalog: &str) -> Target {
        let options = pool.connect_options();
        let database = options.get_database().unwrap_or("postgres").to_owned();
        let label = format!("{catalog}@{}:{}/{database}", options.get_host(), options.get_port());
        let size = sql::PoolSize { max: pool.options().get_max_connections(), min: 0 };
        let masked = MaskedSessions::new(pool.clone(), size);
        Target {
            pool,
            label,
            source: format!("postgres:{catalog}"),
            catalog: Arc::from(catalog),
            masked,
        }
    }

    /// orca's own connections, for reads whose values never reach the caller (hints and PII
    /// kinds computed from samples).
    pub(crate) fn own_reader(&self) -> Reader {
        Reader { pool: self.pool.clone(), masked: None }
    }

    /// Where `principal`'s statements run: orca's own connections, or, when its role masks
    /// columns, connections logged in as the masking policy's own database role, which can read
    /// masked values only (`privacy::setup`).
    ///
    /// # Errors
    ///
    /// `UNAUTHORIZED` when the caller's masking cannot be set up on this database (it is never
    /// served unmasked), `UPSTREAM_UNAVAILABLE` while the database cannot be reached.
    pub(crate) async fn reader(
        &self,
        principal: &crate::config::Principal,
    ) -> Result<Reader, ToolError> {
        let Some(policy) = &principal.masking else {
            return Ok(Reader { pool: self.pool.clone(), masked: None });
        };
        let session = self.masked.session(policy).await.map_err(|error| masking_refused(&error))?;
        Ok(Reader {
            pool: session.pool.clone(),
            masked: Some(Masked { session, policy: policy.clone(), sessions: self.masked.clone() }),
        })
    }
}

/// The tool error of a masked caller whose masking cannot be served.
fn masking_refused(error: &crate::privacy::setup::SetupError) -> ToolError {
    if error.is_transient() {
        return ToolError::new(ErrorCode::UpstreamUnavailable, error.to_string())
            .with_hint("the database may be restarting; try again shortly");
    }
    ToolError::new(
        ErrorCode::Unauthorized,
        format!("reads under masking are refused here: {error}"),
    )
    .not_retryable()
    .with_hint("an administrator can see what is missing with `orca doctor`")
}

/// Where one caller's statements run on one database: orca's own connections, or a masked
/// session's, whose SQL reads the masked relations.
#[derive(Debug, Clone)]
pub(crate) struct Reader {
    pub(crate) pool: PgPool,
    masked: Option<Masked>,
}

/// A masked caller's session, and what prepares it again.
#[derive(Debug, Clone)]
struct Masked {
    session: Arc<MaskedSession>,
    policy: Arc<crate::privacy::mask::MaskingPolicy>,
    sessions: MaskedSessions,
}

impl Reader {
    /// Whether the caller reads under masking.
    pub(crate) fn masked(&self) -> bool {
        self.masked.is_some()
    }

    /// Whether the caller's masking covers columns named `column` (their values are then the
    /// masked text).
    pub(crate) fn masks(&self, column: &str) -> bool {
        self.masked.as_ref().is_some_and(|masked| masked.policy.rule_for(column).is_some())
    }

    /// The statement as it runs for this caller: a masked caller's relations named with their
    /// schema read the masked ones (unqualified names find them through the search path).
    ///
    /// # Errors
    ///
    /// `Parse` when the text does not parse.
    pub(crate) fn statement(
        &self,
        statement: sql::Statement,
    ) -> Result<sql::Statement, sql::Error> {
        let Some(masked) = &self.masked else { return Ok(statement) };
        let redirected = masked.session.redirect(&statement.text).map_err(sql::Error::Parse)?;
        if redirected == statement.text {
            return Ok(statement);
        }
        sql::single_statement(&redirected)
    }

    /// `text` as it runs for this caller (as [`Reader::statement`]); a text that does not parse
    /// is left as it is, for the database to refuse.
    pub(crate) fn text(&self, text: &str) -> String {
        match &self.masked {
            Some(masked) => masked.session.redirect(text).unwrap_or_else(|_| text.to_owned()),
            None => text.to_owned(),
        }
    }

    /// `schema.name` quoted, as this caller reads it (its masked relation under masking).
    pub(crate) fn relation(&self, schema: &str, name: &str) -> String {
        match &self.masked {
            Some(masked) => masked.session.relation(schema, name),
            None => format!("{}.{}", sql::quote_identifier(schema), sql::quote_identifier(name)),
        }
    }

    /// The reader of a statement orca writes over the relation `schema.name`: under masking,
    /// when the relation was created after the session was prepared, the session prepared
    /// again first, so that the new relation is read (masked) at once rather than refused.
    pub(crate) async fn knowing(&self, schema: &str, name: &str) -> Reader {
        let Some(masked) = self.masked.as_ref().filter(|m| !m.session.knows(schema, name)) else {
            return self.clone();
        };
        match masked.sessions.refresh(&masked.policy).await {
            Ok(session) => Reader {
                pool: session.pool.clone(),
                masked: Some(Masked { session, ..masked.clone() }),
            },
            Err(_) => self.clone(),
        }
    }

    /// After `error` of a masked statement that met a relation or column its session does not
    /// have (created since it was prepared), the session prepared again, for one more try.
    /// `None` otherwise.
    pub(crate) async fn refreshed_after(&self, error: &sql::Error) -> Option<Reader> {
        let masked = self.masked.as_ref()?;
        let sql::Error::Query { code: Some(code), .. } = error else { return None };
        // undefined_table, undefined_column, insufficient_privilege.
        if !matches!(code.as_str(), "42P01" | "42703" | "42501") {
            return None;
        }
        let session = masked.sessions.refresh(&masked.policy).await.ok()?;
        Some(Reader {
            pool: session.pool.clone(),
            masked: Some(Masked { session, ..masked.clone() }),
        })
    }

    /// The tool error of a database error of this caller's: under masking, a relation the
    /// masked role may not read says why.
    pub(crate) fn error(&self, error: sql::Error) -> ToolError {
        if let (Some(masked), sql::Error::Query { message, code: Some(code) }) =
            (&self.masked, &error)
            && code == "42501"
        {
            let relation = message
                .strip_prefix("permission denied for ")
                .and_then(|rest| rest.split_whitespace().nth(1))
                .unwrap_or_default();
            let reason = masked.session.hidden_reason(relation).unwrap_or_else(|| {
                format!(
                    "{relation} is not readable under masking: masked callers read each relation through its masked view, found by the relation's own name (with or without its schema, never with the database's name)"
                )
            });
            return ToolError::new(ErrorCode::Unauthorized, reason).not_retryable();
        }
        sql_error(error)
    }
}

/// The `database` argument of every SQL tool, added to a tool's input schema: the catalog to
/// work on, one of `names` (optional when there is only one).
pub(crate) fn with_database_parameter(tool: &mut crate::servers::ToolSpec, names: &[String]) {
    let mut schema = (*tool.tool.input_schema).clone();
    let mut property = json!({
        "type": "string",
        "description": "The database (catalog) to work on; optional when only one is served. res://catalogs lists them.",
    });
    if !names.is_empty() {
        property["enum"] = json!(names);
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert("database".to_owned(), property);
    } else {
        schema.insert("properties".to_owned(), json!({ "database": property }));
    }
    tool.tool.input_schema = Arc::new(schema);
}

/// Take the `database` argument out of a call's arguments (the tools' own parameters do not
/// know it).
///
/// # Errors
///
/// `INVALID_INPUT` when it is not a string.
pub(crate) fn take_database(
    arguments: &mut Option<Map<String, Value>>,
) -> Result<Option<String>, ToolError> {
    match arguments.as_mut().and_then(|arguments| arguments.remove("database")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Ok(Some(name)),
        Some(_) => Err(ToolError::invalid_input("`database` must be a string: a database's name")),
    }
}

/// Refuses a write (or a tool that writes: a table or view from a query) to a caller with
/// masked columns: a write can copy a masked column into a table, or rename it, where the
/// mask no longer knows it.
///
/// # Errors
///
/// `UNAUTHORIZED` when the caller's role masks columns.
pub(crate) fn refuse_masked_write(
    principal: &crate::config::Principal,
    what: &str,
) -> Result<(), ToolError> {
    match &principal.masking {
        None => Ok(()),
        Some(policy) => Err(ToolError::new(
            ErrorCode::Unauthorized,
            format!(
                "{what} is refused: principal `{}` reads under the masking policy `{}`, and a write could copy or rename a masked column past the mask",
                principal.name, policy.id
            ),
        )
        .not_retryable()
        .with_hint("ask for a role without masking to change data")),
    }
}

/// The courtesy check of a masked caller's SQL (`sql.refuse_masked_sql`, on by default): a
/// statement that uses a masked column other than as itself (`lower(email)`, `WHERE email =`,
/// a join on it ...) is refused with a clear error, since it would only ever see masked values.
/// The guarantee does not depend on it: the statement runs in the caller's masked session
/// either way ([`Target::reader`]).
///
/// # Errors
///
/// `UNAUTHORIZED` naming the masked column, or what could carry one.
pub(crate) fn refuse_masked_sql(
    sql_text: &str,
    principal: &crate::config::Principal,
    refuse: bool,
) -> Result<(), ToolError> {
    let Some(policy) = principal.masking.as_ref().filter(|_| refuse) else { return Ok(()) };
    crate::privacy::reads::check(sql_text, &|name| policy.rule_for(name).is_some()).map_err(
        |refusal| {
            ToolError::new(ErrorCode::Unauthorized, refusal.to_string()).not_retryable().with_hint(
                "masked columns read as masked values only: select them by name or with * in the top-level SELECT list, without renaming them or using them elsewhere in the query",
            )
        },
    )
}

/// The introspected schema, kept for a while and dropped when DDL runs through orca. It is
/// named after its catalog and shows only the configured schemas.
#[derive(Debug, Clone, Default)]
pub(crate) struct SchemaCache {
    inner: Arc<std::sync::Mutex<Option<CachedSchema>>>,
    /// The catalog name the schema carries (else the database's own name).
    catalog: Option<Arc<str>>,
    /// Globs over the schemas shown (all when empty).
    schemas: Arc<[String]>,
}

#[derive(Debug, Clone)]
struct CachedSchema {
    taken: std::time::Instant,
    generated_at: chrono::DateTime<chrono::Utc>,
    schema: Arc<sql::DatabaseSchema>,
}

impl SchemaCache {
    /// The cache of the catalog `catalog`, showing the schemas that match `schemas`.
    pub(crate) fn for_catalog(catalog: &str, schemas: Vec<String>) -> SchemaCache {
        SchemaCache {
            inner: Arc::default(),
            catalog: Some(Arc::from(catalog)),
            schemas: schemas.into(),
        }
    }

    /// The introspected schema as this catalog shows it.
    fn shown(&self, mut schema: sql::DatabaseSchema) -> sql::DatabaseSchema {
        if let Some(catalog) = &self.catalog {
            schema.database = catalog.to_string();
        }
        if !self.schemas.is_empty() {
            let shown =
                |name: &str| self.schemas.iter().any(|glob| crate::config::glob_match(glob, name));
            schema.schemas.retain(|item| shown(&item.name));
            schema.relations.retain(|item| shown(&item.schema));
            schema.enums.retain(|item| shown(&item.schema));
            schema.domains.retain(|item| shown(&item.schema));
            schema.sequences.retain(|item| shown(&item.schema));
        }
        schema
    }

    pub(crate) fn invalidate(&self) {
        *self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    /// The cached schema if younger than `ttl`, else a fresh one (and whether it was cached).
    pub(crate) async fn get(
        &self,
        pool: &PgPool,
        ttl: std::time::Duration,
        refresh: bool,
    ) -> Result<(Arc<sql::DatabaseSchema>, chrono::DateTime<chrono::Utc>, bool), sql::Error> {
        if !refresh {
            let cached = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
            if let Some(cached) = cached.filter(|cached| cached.taken.elapsed() < ttl) {
                return Ok((cached.schema, cached.generated_at, true));
            }
        }
        let schema =
            Arc::new(self.shown(sql::introspect(pool).await.map_err(sql::Error::from_query)?));
        let generated_at = chrono::Utc::now();
        *self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(CachedSchema {
            taken: std::time::Instant::now(),
            generated_at,
            schema: Arc::clone(&schema),
        });
        Ok((schema, generated_at, false))
    }
}

/// A read result as the TabularResult of the data-provider specification.
pub(crate) fn tabular_result(result: sql::ReadResult, source: &str) -> Value {
    let samples: Vec<Vec<String>> = (0..result.columns.len())
        .map(|index| {
            result
                .rows
                .iter()
                .filter_map(|row| row.get(index).and_then(sql::sample_text))
                .take(sql::HINT_SAMPLES)
                .collect()
        })
        .collect();
    let row_count = result.rows.len();
    // The rows move into the value (`json!` would copy them): a large result exists once.
    let rows: Vec<Value> = result.rows.into_iter().map(Value::Array).collect();
    tabular(&result.columns, &samples, Value::Array(rows), row_count, result.truncated, source)
}

/// A read whose rows were encoded as they streamed in, as the TabularResult: the value holds
/// `rows: null`, to be replaced by the returned bytes (see `splice`).
pub(crate) fn tabular_encoded(
    mut result: sql::ReadResult<sql::EncodedRows>,
    source: &str,
) -> (Value, crate::splice::RawJson) {
    use sql::RowSink as _;
    let row_count = result.rows.len();
    let samples = std::mem::take(&mut result.rows.samples);
    let value =
        tabular(&result.columns, &samples, Value::Null, row_count, result.truncated, source);
    (value, crate::splice::RawJson::from_chunks(result.rows.into_chunks()))
}

fn tabular(
    columns: &[sql::ResultColumn],
    samples: &[Vec<String>],
    rows: Value,
    row_count: usize,
    truncated: Option<sql::Truncation>,
    source: &str,
) -> Value {
    let schema: Vec<Value> = columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            // Semantic hints from the name, the type and up to 50 values of this result.
            let samples: Vec<&str> = samples
                .get(index)
                .map(|samples| samples.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let hints = match sql::hints::semantic_hint(&column.name, &column.type_name, &samples) {
                Some(semantic) => json!({"semantic": semantic.as_str()}),
                None => json!({}),
            };
            json!({
                "name": column.name,
                "type": column.type_name,
                "nullable": column.nullable,
                "hints": hints,
            })
        })
        .collect();
    let truncated = truncated.is_some();
    let row_count = if truncated { Value::Null } else { Value::from(row_count) };
    let mut value = Map::with_capacity(7);
    value.insert("schema".into(), Value::Array(schema));
    value.insert("rows".into(), rows);
    value.insert("row_count".into(), row_count);
    value.insert("has_more".into(), Value::Bool(truncated));
    value.insert("page_token".into(), Value::Null);
    value.insert("source".into(), Value::from(source));
    value.insert("truncated".into(), Value::Bool(truncated));
    Value::Object(value)
}

/// The tool error for an SQL error.
pub(crate) fn sql_error(error: sql::Error) -> ToolError {
    let message = error.to_string();
    match error {
        sql::Error::Parse(_) => ToolError::invalid_input(message)
            .with_hint("check the SQL syntax (PostgreSQL dialect)"),
        sql::Error::Empty => ToolError::invalid_input(message).with_hint("send one SQL statement"),
        sql::Error::MultipleStatements { .. } => ToolError::invalid_input(message)
            .with_hint("split the text and call once per statement"),
        sql::Error::Placeholders { ref numbers } => {
            let hint = format!(
                "write each value into the SQL as a literal (a quoted string, a number) in place of {}",
                sql::placeholder_list(numbers)
            );
            ToolError::invalid_input(message).with_hint(hint)
        }
        sql::Error::Denied { .. } => ToolError::invalid_input(message).with_hint(
            "these functions and relations reach files, the network, server processes or hidden data, or hold a connection asleep; orca never runs them",
        ),
        sql::Error::NotARead { .. } | sql::Error::ReadOnlyViolation => {
            ToolError::invalid_input(message).with_hint(
                "to change data, run it with dry_run=true to get a confirmation token, then with dry_run=false and read_only=false",
            )
        }
        sql::Error::Volatile { .. } => ToolError::invalid_input(message).with_hint(
            "volatile functions may change data; a read may call only stable or immutable functions",
        ),
        sql::Error::Timeout { .. } => ToolError::new(ErrorCode::Timeout, message)
            .with_hint("narrow the query (filters, LIMIT) or pass a larger timeout"),
        sql::Error::Query { .. } | sql::Error::Decode { .. } => {
            ToolError::new(ErrorCode::QueryFailed, message)
                .with_hint("fix the statement; generate_schema lists the tables and columns")
        }
        sql::Error::Unavailable(_) => ToolError::upstream_unavailable(message)
            .with_hint("the database may be restarting; try again shortly"),
        sql::Error::InvalidPaging { .. } => ToolError::invalid_input(message)
            .with_hint("run the query without page_token, or change it as the message says"),
    }
}
