//! The metadata tools of the `data` server (spec 002 "Metadata" and `sample_table`):
//! `list_schemas`, `list_tables`, `get_table_schema`, `get_stats` and `sample_table`.
//!
//! Schemas, tables and columns come from the cached introspection; whatever reads rows (hint
//! samples, counts and per-column aggregates, samples) is SQL built here from quoted identifiers
//! of the introspected relation and run like any client read: classified, then run by
//! [`sql::run_read`] in a read-only transaction with the configured timeout and size cap. A
//! masked caller's counts, aggregates and samples run in its masked session, over the masked
//! view of the relation (which TABLESAMPLE cannot sample: it reads the first rows instead); hint
//! samples read the originals with orca's own connections, since hints name kinds, never values.

use std::time::Duration;

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::DataServer;
use super::table::{TableRef, quote};
use crate::servers::sql_common::Reader;
use crate::servers::{CallContext, ToolSpec};
use crate::sql::introspect::{Column, Relation, RelationKind};
use crate::sql::{self, DatabaseSchema, ReadLimits, ReadOnlyQuery, ReadResult};
use crate::tool::{ErrorCode, ToolError, ToolOutput, Verb, parse_arguments};

/// The tools of this file.
pub(super) const NAMES: &[&str] =
    &["list_schemas", "list_tables", "get_table_schema", "get_stats", "sample_table"];

pub(super) fn tools() -> Vec<ToolSpec> {
    let read = || ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
    vec![
        ToolSpec::new::<ListSchemasParams>(
            "list_schemas",
            "List the schemas of the target PostgreSQL database, whose name is the only catalog: {items: [{catalog, schema}]}. catalog: optional; any name other than the served database is NOT_FOUND. Next: list_tables to see the tables of a schema.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<ListTablesParams>(
            "list_tables",
            "List the tables and views of the target database, ordered by schema and name: {items: [{catalog, schema, table, type, kind, comment}], truncated}. type is TABLE (tables, partitioned tables, partitions, foreign tables) or VIEW (views, materialized views); kind is the precise kind: table, partitioned_table, foreign_table, view or materialized_view. schema: only this schema (all when absent). pattern: filter on the table name, ignoring case: `*` matches any characters and `?` one character (`_` is then literal); a pattern containing `%` is SQL LIKE instead (`%` any characters, `_` one character, `\\` escapes). limit: at most this many items, 1 to 1000 (default 100); truncated is true when more tables matched. Next: get_table_schema for the columns of one.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<GetTableSchemaParams>(
            "get_table_schema",
            "Describe the columns of one table or view: {table: {catalog, schema, table}, schema: [{name, type, nullable, default, comment, hints: {semantic}}]}. type is PostgreSQL's type (`character varying(40)`, `numeric(10,2)`); default is the default expression or null; hints.semantic, when present, guesses what the values mean (email, phone, url, ip, id, latlon, currency, timestamp) from the column name, its type and up to 100 sampled values. ref: {catalog?, schema?, table}; schema may be left out when the table name is unique; an ambiguous name is INVALID_INPUT with the candidates (ask the user with the ask_for_disambiguation prompt), an unknown one NOT_FOUND with the closest names.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<GetStatsParams>(
            "get_stats",
            "Row count and per-column statistics of one table or view: {row_count, row_count_exact, sampled, columns: {COL: {min, max, null_rate, ndv}}}. A table the planner estimates below data.exact_count_max_rows rows (default 1,000,000), or has no estimate for, is counted and scanned exactly (row_count_exact true, sampled false). A larger one gets the planner's estimate (row_count_exact false, with a note) and column statistics from a TABLESAMPLE of about data.sample_rows rows (sampled true, sample_rows: the rows in the sample; ndv is then the number of distinct values in the sample, a lower bound). min and max are text, null for types without a meaningful order (json, jsonb, xml, geometric types, tsvector ...); null_rate is the share of nulls, 0 to 1 (null when there are no rows); ndv counts the distinct non-null values. ref: the table, as in get_table_schema. columns: the column names to describe (all when absent); an unknown name is INVALID_INPUT listing the table's columns.",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<SampleTableParams>(
            "sample_table",
            "Read a few rows of one table or view as a TabularResult {schema, rows, row_count, has_more, page_token, source, truncated}, without paging: has_more is false and page_token null; truncated is true only when the result size cap cut rows off. method: head (default) returns the first rows in storage order; random returns randomly chosen rows: on a large table TABLESAMPLE SYSTEM reads about four times limit rows and ORDER BY random() picks among them, on small tables and views ORDER BY random() over all rows; _meta.sample says {method, tablesample}. limit: rows to return, 1 to the configured sql.hard_max_rows (default 100). ref: the table, as in get_table_schema. Use query_sql to filter, join or page.",
            Verb::Read,
            read(),
        ),
    ]
}

pub(super) async fn call(
    server: &DataServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
    context: &CallContext,
) -> Result<ToolOutput, ToolError> {
    match tool {
        "list_schemas" => list_schemas(server, arguments).await,
        "list_tables" => list_tables(server, arguments).await,
        "get_table_schema" => get_table_schema(server, arguments).await,
        "get_stats" => {
            get_stats(server, arguments, &server.target.reader(&context.principal).await?).await
        }
        "sample_table" => {
            sample_table(server, arguments, &server.target.reader(&context.principal).await?).await
        }
        other => Err(ToolError::not_found(format!("the data server has no tool `{other}`"))),
    }
}

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/// Arguments of `list_schemas`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListSchemasParams {
    /// The catalog (database name); the target database when absent. Any other name is
    /// NOT_FOUND.
    #[serde(default)]
    catalog: Option<String>,
}

/// Arguments of `list_tables`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListTablesParams {
    /// The catalog (database name); the target database when absent.
    #[serde(default)]
    catalog: Option<String>,
    /// Only tables of this schema; all schemas when absent.
    #[serde(default)]
    schema: Option<String>,
    /// Table-name filter, ignoring case: `*` any characters and `?` one character (`_` is
    /// literal), or SQL LIKE (`%` any characters, `_` one character) when it contains `%`.
    #[serde(default)]
    pattern: Option<String>,
    /// The most tables to list, 1 to 1000 (default 100).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<i64>,
}

/// Arguments of `get_table_schema`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetTableSchemaParams {
    /// The table or view: {catalog?, schema?, table}.
    #[serde(rename = "ref")]
    table: TableRef,
}

/// Arguments of `get_stats`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetStatsParams {
    /// The table or view: {catalog?, schema?, table}.
    #[serde(rename = "ref")]
    table: TableRef,
    /// The columns to describe, by name; every column when absent.
    #[serde(default)]
    columns: Option<Vec<String>>,
}

/// Arguments of `sample_table`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SampleTableParams {
    /// The table or view: {catalog?, schema?, table}.
    #[serde(rename = "ref")]
    table: TableRef,
    /// Rows to return, 1 to the configured maximum (sql.hard_max_rows); default 100.
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<i64>,
    /// `head` (default): the first rows in storage order; `random`: randomly chosen rows.
    #[serde(default)]
    method: SampleMethod,
}

/// How `sample_table` picks rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum SampleMethod {
    #[default]
    Head,
    Random,
}

impl SampleMethod {
    fn as_str(self) -> &'static str {
        match self {
            SampleMethod::Head => "head",
            SampleMethod::Random => "random",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// list_schemas and list_tables
// ---------------------------------------------------------------------------------------------

/// NOT_FOUND unless `catalog` is absent or the served database.
fn check_catalog(schema: &DatabaseSchema, catalog: Option<&str>) -> Result<(), ToolError> {
    match catalog {
        Some(catalog) if catalog != schema.database => Err(ToolError::not_found(format!(
            "catalog `{catalog}` is not served here; the catalog is `{}`",
            schema.database
        ))
        .with_hint("leave catalog out, or pass the served catalog")),
        _ => Ok(()),
    }
}

async fn list_schemas(
    server: &DataServer,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    let params: ListSchemasParams = parse_arguments(arguments)?;
    let schema = server.database_schema().await?;
    check_catalog(&schema, params.catalog.as_deref())?;
    let items: Vec<Value> = schema
        .schemas
        .iter()
        .map(|namespace| json!({"catalog": schema.database, "schema": namespace.name}))
        .collect();
    Ok(ToolOutput::new(json!({ "items": items })))
}

/// The spec's `type` of a relation: `TABLE` for what stores rows, `VIEW` for views and
/// materialized views.
fn spec_type(kind: RelationKind) -> &'static str {
    match kind {
        RelationKind::Table | RelationKind::PartitionedTable | RelationKind::ForeignTable => {
            "TABLE"
        }
        RelationKind::View | RelationKind::MaterializedView => "VIEW",
    }
}

/// The precise kind of a relation, as `list_tables` reports it.
fn kind_name(kind: RelationKind) -> &'static str {
    match kind {
        RelationKind::Table => "table",
        RelationKind::View => "view",
        RelationKind::MaterializedView => "materialized_view",
        RelationKind::PartitionedTable => "partitioned_table",
        RelationKind::ForeignTable => "foreign_table",
    }
}

/// The schema a client named: the exact name, or else the one name equal to it ignoring case.
fn find_schema<'a>(schema: &'a DatabaseSchema, wanted: &str) -> Result<&'a str, ToolError> {
    if let Some(found) = schema.schemas.iter().find(|namespace| namespace.name == wanted) {
        return Ok(&found.name);
    }
    let loose: Vec<&str> = schema
        .schemas
        .iter()
        .filter(|namespace| namespace.name.to_lowercase() == wanted.to_lowercase())
        .map(|namespace| namespace.name.as_str())
        .collect();
    if let [only] = loose.as_slice() {
        return Ok(only);
    }
    let mut closest: Vec<(usize, &str)> = schema
        .schemas
        .iter()
        .map(|namespace| {
            let distance = sql::introspect::edit_distance(
                &wanted.to_lowercase(),
                &namespace.name.to_lowercase(),
            );
            (distance, namespace.name.as_str())
        })
        .filter(|(distance, _)| *distance <= (wanted.chars().count() / 3).max(2))
        .collect();
    closest.sort_unstable();
    let suggestion = if closest.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            closest.iter().take(3).map(|(_, name)| *name).collect::<Vec<_>>().join(", ")
        )
    };
    Err(ToolError::not_found(format!("no schema named `{wanted}`{suggestion}"))
        .with_hint("call list_schemas to see the schemas"))
}

/// One element of a table-name pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatternToken {
    /// Any run of characters, also empty (`*`, `%`).
    Any,
    /// Exactly one character (`?`, `_` in LIKE).
    One,
    /// This character, compared in lower case.
    Literal(char),
}

/// Parses a `list_tables` pattern: SQL LIKE when it contains `%`, else a `*`/`?` glob in which
/// `_` is an ordinary character. Matching ignores case, so the pattern is lowered here.
fn parse_pattern(pattern: &str) -> Vec<PatternToken> {
    let lower = pattern.to_lowercase();
    let like = lower.contains('%');
    let mut tokens = Vec::with_capacity(lower.len());
    let mut chars = lower.chars();
    while let Some(c) = chars.next() {
        let token = match c {
            '%' if like => PatternToken::Any,
            '_' if like => PatternToken::One,
            '\\' if like => PatternToken::Literal(chars.next().unwrap_or('\\')),
            '*' if !like => PatternToken::Any,
            '?' if !like => PatternToken::One,
            other => PatternToken::Literal(other),
        };
        tokens.push(token);
    }
    tokens
}

/// Tells whether `name`, in lower case, matches the pattern (greedy matching that backtracks to
/// the last `Any`, linear in practice).
fn pattern_matches(tokens: &[PatternToken], name: &str) -> bool {
    let text: Vec<char> = name.to_lowercase().chars().collect();
    let (mut position, mut index) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while position < text.len() {
        match tokens.get(index) {
            Some(PatternToken::Any) => {
                backtrack = Some((index, position));
                index += 1;
            }
            Some(PatternToken::One) => {
                index += 1;
                position += 1;
            }
            Some(PatternToken::Literal(c)) if *c == text[position] => {
                index += 1;
                position += 1;
            }
            _ => match backtrack {
                Some((any_index, any_position)) => {
                    index = any_index + 1;
                    position = any_position + 1;
                    backtrack = Some((any_index, any_position + 1));
                }
                None => return false,
            },
        }
    }
    tokens[index.min(tokens.len())..].iter().all(|token| *token == PatternToken::Any)
}

async fn list_tables(
    server: &DataServer,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    let params: ListTablesParams = parse_arguments(arguments)?;
    let limit = match params.limit {
        None => 100,
        Some(limit) if (1..=1000).contains(&limit) => usize::try_from(limit).unwrap_or(1000),
        Some(limit) => {
            return Err(ToolError::invalid_input(format!(
                "limit must be between 1 and 1000, not {limit}"
            ))
            .with_hint("narrow the listing with schema or pattern instead"));
        }
    };
    let schema = server.database_schema().await?;
    check_catalog(&schema, params.catalog.as_deref())?;
    let schema_name = match params.schema.as_deref() {
        Some(wanted) => Some(find_schema(&schema, wanted)?),
        None => None,
    };
    let pattern = params
        .pattern
        .as_deref()
        .map(str::trim)
        .filter(|pattern| !pattern.is_empty())
        .map(parse_pattern);
    let mut matching = schema.relations.iter().filter(|relation| {
        schema_name.is_none_or(|name| relation.schema == name)
            && pattern.as_ref().is_none_or(|tokens| pattern_matches(tokens, &relation.name))
    });
    let items: Vec<Value> = matching
        .by_ref()
        .take(limit)
        .map(|relation| {
            json!({
                "catalog": schema.database,
                "schema": relation.schema,
                "table": relation.name,
                "type": spec_type(relation.kind),
                "kind": kind_name(relation.kind),
                "comment": relation.comment,
            })
        })
        .collect();
    let truncated = matching.next().is_some();
    Ok(ToolOutput::new(json!({ "items": items, "truncated": truncated })))
}

// ---------------------------------------------------------------------------------------------
// Running the SQL built here
// ---------------------------------------------------------------------------------------------

/// Classifies and runs SQL built in this file, through the same checks as a client's read, on
/// `pool`: the caller's reader's for what the caller sees, orca's own for what only becomes
/// hints (kinds of values, never values).
async fn run(
    server: &DataServer,
    pool: &sqlx::PgPool,
    text: &str,
    max_rows: usize,
    timeout: Duration,
) -> Result<ReadResult, sql::Error> {
    let statement = sql::single_statement(text)?;
    let query = ReadOnlyQuery::from_statement(statement)?;
    let limits = ReadLimits { max_rows, max_bytes: server.config.max_result_bytes, timeout };
    sql::run_read(pool, &query, limits).await
}

/// A failure of SQL orca built itself, with a hint that fits the tool rather than the
/// client-SQL hints of [`sql_error`].
fn built_sql_error(reader: &Reader, error: sql::Error, timeout_hint: &str) -> ToolError {
    let mut tool_error = reader.error(error);
    match tool_error.code {
        ErrorCode::Timeout => tool_error.hint = Some(timeout_hint.to_owned()),
        ErrorCode::QueryFailed => {
            tool_error.hint = Some(
                "the table may have changed or be unreadable (an unpopulated materialized view, a view whose query fails); call get_table_schema again, or read it with query_sql".to_owned(),
            );
        }
        _ => {}
    }
    tool_error
}

/// A row count as JSON (bigint, or its text), 0 when absent.
fn count_of(value: Option<&Value>) -> u64 {
    match value {
        Some(Value::Number(number)) => number.as_u64().unwrap_or(0),
        Some(Value::String(text)) => text.parse().unwrap_or(0),
        _ => 0,
    }
}

/// Whether TABLESAMPLE applies to a relation of this kind.
fn can_tablesample(kind: RelationKind) -> bool {
    matches!(
        kind,
        RelationKind::Table | RelationKind::PartitionedTable | RelationKind::MaterializedView
    )
}

/// The planner's row estimate of a relation; for a partitioned table without one (autovacuum
/// never analyzes them), the sum of its partitions' estimates when each has one.
fn row_estimate(schema: &DatabaseSchema, relation: &Relation) -> Option<u64> {
    fn estimate(schema: &DatabaseSchema, relation: &Relation, depth: usize) -> Option<u64> {
        if let Some(rows) = relation.row_estimate {
            return u64::try_from(rows).ok();
        }
        if relation.kind != RelationKind::PartitionedTable || depth > 8 {
            return None;
        }
        let mut total = 0u64;
        let mut any = false;
        for partition in schema.relations.iter().filter(|candidate| {
            candidate.partition_of.as_ref().is_some_and(|parent| {
                parent.schema == relation.schema && parent.name == relation.name
            })
        }) {
            total = total.saturating_add(estimate(schema, partition, depth + 1)?);
            any = true;
        }
        any.then_some(total)
    }
    estimate(schema, relation, 0)
}

/// The TABLESAMPLE SYSTEM percentage that reads about `wanted` of `estimate` rows, or `None`
/// when that is the whole relation.
fn sample_percent(wanted: u64, estimate: u64) -> Option<f64> {
    if estimate == 0 || wanted >= estimate {
        return None;
    }
    let percent = (wanted as f64 / estimate as f64 * 100.0).clamp(0.000_001, 100.0);
    (percent < 100.0).then_some(percent)
}

// ---------------------------------------------------------------------------------------------
// get_table_schema
// ---------------------------------------------------------------------------------------------

/// The most rows read for semantic hints, and the longest value kept of each.
const HINT_SAMPLE_ROWS: usize = 100;
const HINT_VALUE_CHARS: usize = 200;

/// The longest hint-sample read.
const HINT_SAMPLE_TIMEOUT: Duration = Duration::from_secs(5);

async fn get_table_schema(
    server: &DataServer,
    arguments: Option<Map<String, Value>>,
) -> Result<ToolOutput, ToolError> {
    let params: GetTableSchemaParams = parse_arguments(arguments)?;
    let resolved = server.resolve_table(&params.table).await?;
    let relation = resolved.relation();
    // Up to 100 rows of every column as text, for the hints: `SELECT left(("c")::text, 200) ...
    // FROM "s"."t" LIMIT 100`. A view whose query fails, or a slow one, costs the hints only.
    let (samples, sample_meta) = if relation.columns.is_empty() {
        (Vec::new(), json!({"rows": 0}))
    } else {
        let select: Vec<String> = relation
            .columns
            .iter()
            .enumerate()
            .map(|(index, column)| {
                format!(
                    "left(({})::text, {HINT_VALUE_CHARS}) AS \"c{}\"",
                    quote(&column.name),
                    index + 1
                )
            })
            .collect();
        let text = format!(
            "SELECT {} FROM {} LIMIT {HINT_SAMPLE_ROWS}",
            select.join(", "),
            resolved.quoted()
        );
        let timeout = server.config.default_timeout.min(HINT_SAMPLE_TIMEOUT);
        // Hints name kinds of values, never values: they read the originals.
        match run(server, &server.target.pool, &text, HINT_SAMPLE_ROWS, timeout).await {
            Ok(result) => {
                let rows = result.rows.len();
                (result.rows, json!({"rows": rows}))
            }
            Err(error) => (Vec::new(), json!({"rows": 0, "error": error.to_string()})),
        }
    };
    let columns: Vec<Value> = relation
        .columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            let values: Vec<&str> =
                samples.iter().filter_map(|row| row.get(index).and_then(Value::as_str)).collect();
            let hints = match sql::hints::semantic_hint(&column.name, &column.data_type, &values) {
                Some(semantic) => json!({"semantic": semantic.as_str()}),
                None => json!({}),
            };
            json!({
                "name": column.name,
                "type": column.data_type,
                "nullable": column.nullable,
                "default": column.default,
                "comment": column.comment,
                "hints": hints,
            })
        })
        .collect();
    let mut output = ToolOutput::new(json!({
        "table": resolved.table_ref(),
        "schema": columns,
    }));
    output.meta.insert("hint_sample".into(), sample_meta);
    Ok(output)
}

// ---------------------------------------------------------------------------------------------
// get_stats
// ---------------------------------------------------------------------------------------------

/// How min and max are taken for a column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extremes {
    /// `min(c)` and `max(c)`: the type has those aggregates (numbers, text, times, enums, arrays ...).
    Aggregate,
    /// `bool_and(c)` and `bool_or(c)`: booleans have no `min`.
    Boolean,
    /// `percentile_disc(0|1) WITHIN GROUP (ORDER BY c)`: ordered, but without `min` (uuid ...).
    Sorted,
    /// None: no order, or no meaningful one (json, xml, geometric types, tsvector ...).
    Unordered,
}

/// What the aggregate query can do with a column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TypeTraits {
    extremes: Extremes,
    /// Whether `count(DISTINCT c)` works on the type itself (it has an equality the executor
    /// can sort or hash); otherwise distinct values are counted on the text form.
    distinct: bool,
}

impl TypeTraits {
    const fn new(extremes: Extremes, distinct: bool) -> TypeTraits {
        TypeTraits { extremes, distinct }
    }
}

/// Splits a type name as `format_type` prints it into its dot-separated parts, unquoted, with
/// type modifiers (`(40)`, `(10,2)`) dropped and runs of spaces folded. Unquoted parts are
/// lowered.
fn type_name_parts(type_name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    let mut depth = 0usize;
    let mut chars = type_name.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                current.push('"');
            }
            '"' => quoted = !quoted,
            _ if quoted => current.push(c),
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth > 0 => {}
            '.' => parts.push(std::mem::take(&mut current).trim_end().to_owned()),
            c if c.is_whitespace() => {
                if !current.is_empty() && !current.ends_with(' ') {
                    current.push(' ');
                }
            }
            c => current.extend(c.to_lowercase()),
        }
    }
    parts.push(current.trim_end().to_owned());
    parts
}

/// What the aggregate query can do with a column of this type: built-in types by name, arrays
/// by their element type, enums and domains (by their base type) from the introspected schema.
/// Types it does not know get neither min nor max, and have their distinct values counted on
/// their text form, so that no column can make the query fail.
fn type_traits(schema: &DatabaseSchema, type_name: &str, depth: usize) -> TypeTraits {
    const UNKNOWN: TypeTraits = TypeTraits::new(Extremes::Unordered, false);
    let trimmed = type_name.trim();
    if let Some(element) = trimmed.strip_suffix("[]") {
        let element = type_traits(schema, element, depth + 1);
        return match element.extremes {
            Extremes::Unordered if !element.distinct => UNKNOWN,
            Extremes::Unordered => TypeTraits::new(Extremes::Unordered, true),
            _ => TypeTraits::new(Extremes::Aggregate, true),
        };
    }
    let parts = type_name_parts(trimmed);
    if let [name] = parts.as_slice() {
        let builtin = match name.as_str() {
            "smallint"
            | "integer"
            | "bigint"
            | "int"
            | "int2"
            | "int4"
            | "int8"
            | "real"
            | "double precision"
            | "float4"
            | "float8"
            | "numeric"
            | "decimal"
            | "money"
            | "text"
            | "character varying"
            | "varchar"
            | "character"
            | "bpchar"
            | "name"
            | "date"
            | "time without time zone"
            | "time with time zone"
            | "time"
            | "timetz"
            | "timestamp without time zone"
            | "timestamp with time zone"
            | "timestamp"
            | "timestamptz"
            | "interval"
            | "oid"
            | "inet"
            | "cidr"
            | "pg_lsn" => Some(TypeTraits::new(Extremes::Aggregate, true)),
            "boolean" | "bool" => Some(TypeTraits::new(Extremes::Boolean, true)),
            "uuid" | "bytea" | "citext" | "macaddr" | "macaddr8" | "bit" | "bit varying"
            | "varbit" => Some(TypeTraits::new(Extremes::Sorted, true)),
            "jsonb" | "tsvector" | "tsquery" | "int4range" | "int8range" | "numrange"
            | "tsrange" | "tstzrange" | "daterange" | "int4multirange" | "int8multirange"
            | "nummultirange" | "tsmultirange" | "tstzmultirange" | "datemultirange" => {
                Some(TypeTraits::new(Extremes::Unordered, true))
            }
            _ => None,
        };
        if let Some(traits) = builtin {
            return traits;
        }
    }
    if depth > 8 {
        return UNKNOWN;
    }
    // A user type, qualified or not (format_type qualifies types outside the search path).
    let (type_schema, bare) = match parts.as_slice() {
        [bare] => (None, bare.as_str()),
        [type_schema, bare] => (Some(type_schema.as_str()), bare.as_str()),
        _ => return UNKNOWN,
    };
    let fits = |object_schema: &str, object_name: &str| {
        object_name.eq_ignore_ascii_case(bare)
            && type_schema.is_none_or(|wanted| object_schema.eq_ignore_ascii_case(wanted))
    };
    if schema.enums.iter().any(|enumeration| fits(&enumeration.schema, &enumeration.name)) {
        return TypeTraits::new(Extremes::Aggregate, true);
    }
    if let Some(domain) = schema.domains.iter().find(|domain| fits(&domain.schema, &domain.name)) {
        return type_traits(schema, &domain.base_type, depth + 1);
    }
    UNKNOWN
}

/// The most columns described by one aggregate query (four outputs each, under PostgreSQL's
/// 1664 target-list entries).
const STATS_COLUMNS_PER_QUERY: usize = 300;

/// The longest min or max kept, in characters.
const EXTREME_CHARS: usize = 256;

/// `SELECT count(*), count(c), count(DISTINCT c), min, max ... FROM <from>`: one row with
/// the count first, then four outputs per column.
fn aggregate_sql(schema: &DatabaseSchema, columns: &[&Column], from: &str) -> String {
    let mut select = vec!["count(*) AS \"rows\"".to_owned()];
    for (index, column) in columns.iter().enumerate() {
        let name = quote(&column.name);
        let traits = type_traits(schema, &column.data_type, 0);
        let n = index + 1;
        select.push(format!("count({name}) AS \"values{n}\""));
        if traits.distinct {
            select.push(format!("count(DISTINCT {name}) AS \"distinct{n}\""));
        } else {
            select.push(format!("count(DISTINCT ({name})::text) AS \"distinct{n}\""));
        }
        let (low, high) = match traits.extremes {
            Extremes::Aggregate => (format!("min({name})"), format!("max({name})")),
            Extremes::Boolean => (format!("bool_and({name})"), format!("bool_or({name})")),
            Extremes::Sorted => (
                format!("percentile_disc(0) WITHIN GROUP (ORDER BY {name})"),
                format!("percentile_disc(1) WITHIN GROUP (ORDER BY {name})"),
            ),
            Extremes::Unordered => ("NULL".to_owned(), "NULL".to_owned()),
        };
        select.push(format!("left(({low})::text, {EXTREME_CHARS}) AS \"min{n}\""));
        select.push(format!("left(({high})::text, {EXTREME_CHARS}) AS \"max{n}\""));
    }
    format!("SELECT {} FROM {from}", select.join(", "))
}

/// The columns `get_stats` was asked about: every column, or the named ones (exact names
/// first, then names equal ignoring case), without repeats.
fn requested_columns<'a>(
    relation: &'a Relation,
    requested: Option<&[String]>,
    table: &str,
) -> Result<Vec<&'a Column>, ToolError> {
    let Some(requested) = requested else {
        return Ok(relation.columns.iter().collect());
    };
    let mut chosen: Vec<&Column> = Vec::with_capacity(requested.len());
    let mut unknown: Vec<&str> = Vec::new();
    for wanted in requested {
        let exact = relation.columns.iter().find(|column| &column.name == wanted);
        let found = exact.or_else(|| {
            let loose: Vec<&Column> = relation
                .columns
                .iter()
                .filter(|column| column.name.to_lowercase() == wanted.to_lowercase())
                .collect();
            match loose.as_slice() {
                [only] => Some(*only),
                _ => None,
            }
        });
        match found {
            Some(column) if !chosen.iter().any(|seen| std::ptr::eq(*seen, column)) => {
                chosen.push(column);
            }
            Some(_) => {}
            None => unknown.push(wanted),
        }
    }
    if unknown.is_empty() {
        return Ok(chosen);
    }
    let names: Vec<&str> = relation.columns.iter().map(|column| column.name.as_str()).collect();
    let quoted: Vec<String> = unknown.iter().map(|name| format!("`{name}`")).collect();
    let mut error = ToolError::invalid_input(format!(
        "{table} has no column {}; its columns are: {}",
        quoted.join(", "),
        names.join(", ")
    ))
    .with_hint("pass column names as get_table_schema lists them, or leave columns out");
    error.details = Some(Box::new(json!({"unknown_columns": unknown, "columns": names})));
    Err(error)
}

/// Where `get_stats` reads the column statistics from.
#[derive(Debug, Clone, PartialEq)]
enum StatsSource {
    /// The whole relation, counted exactly.
    Exact,
    /// A TABLESAMPLE SYSTEM sample of this percentage (the same sample in every query).
    Tablesample(f64),
    /// The first rows in storage order (relations without TABLESAMPLE, or an empty sample).
    FirstRows(u64),
}

impl StatsSource {
    fn relation_text(&self, quoted: &str) -> String {
        match self {
            StatsSource::Exact => quoted.to_owned(),
            StatsSource::Tablesample(percent) => {
                format!("{quoted} TABLESAMPLE SYSTEM ({percent:.6}) REPEATABLE (0)")
            }
            StatsSource::FirstRows(rows) => {
                format!("(SELECT * FROM {quoted} LIMIT {rows}) AS \"sample\"")
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            StatsSource::Exact => "the whole table".to_owned(),
            StatsSource::Tablesample(percent) => {
                format!("a TABLESAMPLE SYSTEM ({percent:.6} percent of the pages)")
            }
            StatsSource::FirstRows(rows) => format!("the first {rows} rows in storage order"),
        }
    }
}

/// The aggregate queries over `columns`, chunked: the row count (of the relation or the
/// sample) and one row of four values per column.
async fn aggregate(
    server: &DataServer,
    reader: &Reader,
    schema: &DatabaseSchema,
    quoted: &str,
    columns: &[&Column],
    source: &StatsSource,
) -> Result<(u64, Vec<Value>), ToolError> {
    let timeout_hint = "ask for fewer columns, or have the administrator lower data.exact_count_max_rows so that large tables are sampled";
    let from = source.relation_text(quoted);
    let mut rows = 0;
    let mut values = Vec::with_capacity(columns.len() * 4);
    let chunks: Vec<&[&Column]> = if columns.is_empty() {
        vec![&[]]
    } else {
        columns.chunks(STATS_COLUMNS_PER_QUERY).collect()
    };
    for chunk in chunks {
        let text = aggregate_sql(schema, chunk, &from);
        let result = run(server, &reader.pool, &text, 1, server.config.default_timeout)
            .await
            .map_err(|error| built_sql_error(reader, error, timeout_hint))?;
        let Some(row) = result.rows.into_iter().next() else {
            return Err(ToolError::new(
                ErrorCode::QueryFailed,
                "the statistics query returned no row (the result size cap may be too small)",
            ));
        };
        rows = count_of(row.first());
        values.extend(row.into_iter().skip(1));
    }
    Ok((rows, values))
}

async fn get_stats(
    server: &DataServer,
    arguments: Option<Map<String, Value>>,
    reader: &Reader,
) -> Result<ToolOutput, ToolError> {
    let params: GetStatsParams = parse_arguments(arguments)?;
    let resolved = server.resolve_table(&params.table).await?;
    let relation = resolved.relation();
    let reader = &reader.knowing(&relation.schema, &relation.name).await;
    let schema = &resolved.schema;
    // A masked caller reads the masked view, which a TABLESAMPLE cannot sample.
    let quoted = reader.relation(&relation.schema, &relation.name);
    let label = format!("{}.{}", relation.schema, relation.name);
    let columns = requested_columns(relation, params.columns.as_deref(), &label)?;
    let threshold = server.data.exact_count_max_rows;
    let estimate = row_estimate(schema, relation);
    let mut source = match estimate {
        Some(rows) if rows >= threshold => match sample_percent(server.data.sample_rows, rows) {
            None => StatsSource::Exact,
            Some(_)
                if !(can_tablesample(relation.kind)
                    && !reader.masked()
                    && server.database.features().tablesample) =>
            {
                StatsSource::FirstRows(server.data.sample_rows)
            }
            Some(percent) => StatsSource::Tablesample(percent),
        },
        _ => StatsSource::Exact,
    };
    let (mut rows, mut values) =
        aggregate(server, reader, schema, &quoted, &columns, &source).await?;
    if rows == 0 && matches!(source, StatsSource::Tablesample(_)) {
        // SYSTEM sampling picks whole pages: a small percentage of a table may pick none.
        source = StatsSource::FirstRows(server.data.sample_rows);
        (rows, values) = aggregate(server, reader, schema, &quoted, &columns, &source).await?;
    }
    let mut described = Map::new();
    for (index, column) in columns.iter().enumerate() {
        let base = index * 4;
        let non_null = count_of(values.get(base));
        let null_rate = if rows == 0 {
            Value::Null
        } else {
            json!((rows - non_null.min(rows)) as f64 / rows as f64)
        };
        // A masked caller's extremes are those of the masked values (the database's).
        let extreme = |offset: usize| values.get(base + offset).cloned().unwrap_or(Value::Null);
        described.insert(
            column.name.clone(),
            json!({
                "min": extreme(2),
                "max": extreme(3),
                "null_rate": null_rate,
                "ndv": count_of(values.get(base + 1)),
            }),
        );
    }
    let mut value = Map::new();
    match (&source, estimate) {
        (StatsSource::Exact, _) => {
            value.insert("row_count".into(), json!(rows));
            value.insert("row_count_exact".into(), json!(true));
            value.insert("sampled".into(), json!(false));
        }
        (_, estimate) => {
            value.insert("row_count".into(), json!(estimate));
            value.insert("row_count_exact".into(), json!(false));
            value.insert("sampled".into(), json!(true));
            value.insert("sample_rows".into(), json!(rows));
            value.insert(
                "note".into(),
                json!(format!(
                    "row_count is the planner's estimate from the last ANALYZE: the table is estimated at or above data.exact_count_max_rows ({threshold}) rows and was not counted; min, max, null_rate and ndv describe {} ({rows} rows), so ndv counts the distinct values of the sample only",
                    source.describe()
                )),
            );
        }
    }
    value.insert("columns".into(), Value::Object(described));
    Ok(ToolOutput::new(Value::Object(value)))
}

// ---------------------------------------------------------------------------------------------
// sample_table
// ---------------------------------------------------------------------------------------------

/// A relation estimated above this many times the limit is sampled with TABLESAMPLE.
const TABLESAMPLE_FACTOR: u64 = 10;

/// TABLESAMPLE reads about this many times the limit, for ORDER BY random() to choose from.
const OVERSAMPLE_FACTOR: u64 = 4;

async fn sample_table(
    server: &DataServer,
    arguments: Option<Map<String, Value>>,
    reader: &Reader,
) -> Result<ToolOutput, ToolError> {
    let params: SampleTableParams = parse_arguments(arguments)?;
    let maximum = server.config.hard_max_rows;
    let limit = match params.limit {
        None => 100.min(maximum),
        Some(limit) => match usize::try_from(limit) {
            Ok(limit) if (1..=maximum).contains(&limit) => limit,
            _ => {
                return Err(ToolError::invalid_input(format!(
                    "limit must be between 1 and {maximum}, not {limit}"
                ))
                .with_hint("use query_sql to page through more rows"));
            }
        },
    };
    let resolved = server.resolve_table(&params.table).await?;
    let relation = resolved.relation();
    let reader = &reader.knowing(&relation.schema, &relation.name).await;
    let quoted = reader.relation(&relation.schema, &relation.name);
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX);
    let timeout_hint = "use method head, or a smaller limit";
    let (result, percent) = match params.method {
        SampleMethod::Head => {
            let text = format!("SELECT * FROM {quoted} LIMIT {limit}");
            let result = run(server, &reader.pool, &text, limit, server.config.default_timeout)
                .await
                .map_err(|error| built_sql_error(reader, error, timeout_hint))?;
            (result, None)
        }
        SampleMethod::Random => {
            let percent = row_estimate(&resolved.schema, relation)
                .filter(|rows| {
                    can_tablesample(relation.kind)
                        && !reader.masked()
                        && server.database.features().tablesample
                        && *rows > limit_u64.saturating_mul(TABLESAMPLE_FACTOR)
                })
                .and_then(|rows| sample_percent(limit_u64.saturating_mul(OVERSAMPLE_FACTOR), rows));
            match percent {
                None => {
                    let text = format!("SELECT * FROM {quoted} ORDER BY random() LIMIT {limit}");
                    let result =
                        run(server, &reader.pool, &text, limit, server.config.default_timeout)
                            .await
                            .map_err(|error| built_sql_error(reader, error, timeout_hint))?;
                    (result, None)
                }
                Some(first) => {
                    // Whole pages are sampled: when too few rows come back, try once with ten
                    // times the percentage.
                    let mut percent = first;
                    loop {
                        let text = format!(
                            "SELECT * FROM {quoted} TABLESAMPLE SYSTEM ({percent:.6}) ORDER BY random() LIMIT {limit}"
                        );
                        let result =
                            run(server, &reader.pool, &text, limit, server.config.default_timeout)
                                .await
                                .map_err(|error| built_sql_error(reader, error, timeout_hint))?;
                        if result.rows.len() >= limit
                            || result.truncated.is_some()
                            || percent >= 100.0
                            || percent > first
                        {
                            break (result, Some(percent));
                        }
                        percent = (percent * 10.0).min(100.0);
                    }
                }
            }
        }
    };
    let returned = result.rows.len();
    let mut value = crate::servers::sql_common::tabular_result(result, &server.target.source);
    value["row_count"] = json!(returned);
    value["has_more"] = json!(false);
    value["page_token"] = Value::Null;
    let mut output = ToolOutput::new(value);
    let mut sample = json!({
        "method": params.method.as_str(),
        "tablesample": percent.is_some(),
    });
    if let Some(percent) = percent {
        sample["percent"] = json!(percent);
    }
    output.meta.insert("sample".into(), sample);
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_globs_unless_they_hold_a_percent_sign() {
        let names = ["invoice_line", "invoice", "invoiceXline", "playlist_track", "track", "Genre"];
        let cases: &[(&str, &[&str])] = &[
            ("*", &["invoice_line", "invoice", "invoiceXline", "playlist_track", "track", "Genre"]),
            ("invoice_line", &["invoice_line"]),
            ("invoice?line", &["invoice_line", "invoiceXline"]),
            ("*track", &["playlist_track", "track"]),
            ("%_track", &["playlist_track"]),
            ("invoice%", &["invoice_line", "invoice", "invoiceXline"]),
            ("invoice\\_%", &["invoice_line"]),
            ("%line", &["invoice_line", "invoiceXline"]),
            ("GENRE", &["Genre"]),
            ("?enre", &["Genre"]),
            ("g*e", &["Genre"]),
            ("*a*a*", &["playlist_track"]),
            ("tr", &[]),
            ("%", &["invoice_line", "invoice", "invoiceXline", "playlist_track", "track", "Genre"]),
        ];
        for (pattern, expected) in cases {
            let tokens = parse_pattern(pattern);
            let found: Vec<&str> =
                names.iter().copied().filter(|name| pattern_matches(&tokens, name)).collect();
            assert_eq!(&found, expected, "pattern {pattern:?}");
        }
    }

    #[test]
    fn type_names_are_split_unquoted_and_stripped_of_modifiers() {
        let cases: &[(&str, &[&str])] = &[
            ("character varying(40)", &["character varying"]),
            ("timestamp(3)  with time zone", &["timestamp with time zone"]),
            ("numeric(10,2)", &["numeric"]),
            ("public.year", &["public", "year"]),
            ("\"Odd.Name\"", &["Odd.Name"]),
            ("sales.\"My \"\"Type\"\"\"", &["sales", "My \"Type\""]),
            ("public.\"bıgınt\"", &["public", "bıgınt"]),
        ];
        for (type_name, expected) in cases {
            assert_eq!(&type_name_parts(type_name), expected, "{type_name}");
        }
    }

    #[test]
    fn sample_percentages_read_about_the_wanted_rows() {
        assert_eq!(sample_percent(500, 20_000), Some(2.5));
        assert_eq!(sample_percent(500, 500), None);
        assert_eq!(sample_percent(500, 0), None);
        assert_eq!(sample_percent(1, u64::MAX), Some(0.000_001));
    }
}
