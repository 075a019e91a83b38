//! The profiling tools of the `data` server (spec 002, "Profiling"): `profile_table` (row
//! count, null rates, histograms and most frequent values, in at most three queries),
//! `detect_pii` (kinds of personal data from column names and up to 1000 values per column, in
//! one query) and `preview_masked` (the first rows with a masking policy applied after reading,
//! so that the original values never leave orca).
//!
//! Tables larger than `data.sample_rows` (by the planner's estimate) are read through
//! `TABLESAMPLE SYSTEM` with a fixed seed, so that every query of one call sees the same rows;
//! views, foreign tables and tables never analyzed are read up to that many rows. The SQL is
//! built here from quoted identifiers and numbers computed here, never from client text, and
//! runs through the same classified, read-only, timed and capped path as `query_sql`, in the
//! caller's masked session when its role masks columns (its values, bins and top values are
//! then the masked ones, and its masked columns profile as text); `detect_pii` reads the
//! originals, since it shows kinds and confidences only.

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::DataServer;
use super::table::{ResolvedTable, TableRef, quote};
use crate::privacy::mask::MaskingPolicy;
use crate::servers::sql_common::{Reader, sql_error};
use crate::servers::{CallContext, ToolSpec};
use crate::sql::introspect::{Column, Relation, RelationKind};
use crate::sql::pii;
use crate::sql::{self, ReadLimits, ReadOnlyQuery, ReadResult};
use crate::tool::{ErrorCode, ToolError, ToolOutput, Verb, parse_arguments};

/// The tools of this file.
pub(super) const NAMES: &[&str] = &["profile_table", "detect_pii", "preview_masked"];

/// The most histogram bins (and categories) `profile_table` accepts.
const MAX_BINS: u32 = 200;

/// How many most frequent values `topk` lists per column.
const TOP_VALUES: u32 = 10;

/// Values in `topk` and categorical distributions are cut to this many characters.
const VALUE_CHARACTERS: u32 = 200;

/// How many non-null values per column `detect_pii` reads.
const PII_VALUES: u32 = 1000;

/// Values read by `detect_pii` are cut to this many characters (longer than any e-mail address,
/// IBAN or phone number).
const PII_VALUE_CHARACTERS: u32 = 256;

/// The most output columns of the summary query (PostgreSQL allows 1664): one per column and
/// three more per numeric column.
const MAX_SUMMARY_OUTPUTS: usize = 1600;

/// The most rows `preview_masked` returns.
const MAX_PREVIEW_ROWS: u32 = 1000;

/// The size of the intermediate results a profile or PII scan may read into orca (they are
/// summarised, never returned as they are).
const INTERNAL_MAX_BYTES: usize = 16 * 1024 * 1024;

/// The seed of `TABLESAMPLE ... REPEATABLE`: every query of a call, and every call on an
/// unchanged table, reads the same pages.
const SAMPLE_SEED: u32 = 20_261_122;

pub(super) fn tools() -> Vec<ToolSpec> {
    let read = || ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
    vec![
        ToolSpec::new::<ProfileTableParams>(
            "profile_table",
            "Profile a table or view. Returns {summary: {row_count, null_rate: {COLUMN: fraction of nulls}}, distributions: {COLUMN: {type, bins: [{lo, hi, count}]}}, topk: {COLUMN: [{value, count}]}, sampled, sample_rows}. Numeric columns and date/timestamp columns get type \"numeric\": `bins` equal-width bins from the smallest to the largest value (lo and hi are numbers, or ISO-8601 text for dates and timestamps; a column with one distinct value gets one bin). Text, boolean, enum and other columns get type \"categorical\": their `bins` most frequent values as bins with lo = hi = the value, and other_count for the rest. topk lists the 10 most frequent values of every column with their counts (values in text form, cut to 200 characters). Counts leave out nulls. Arguments: ref {catalog?, schema?, table}; columns: column names to profile (all when absent); bins: 1 to 200 (default 20). Tables whose planner estimate exceeds data.sample_rows (orca.yaml, default 100000) are profiled on a TABLESAMPLE of about that many rows, views and never-analyzed tables on their first rows: then sampled is true, sample_rows is the number of rows read, null rates and counts describe the sample, and row_count is the planner's estimate of the whole table (null when unknown).",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<DetectPiiParams>(
            "detect_pii",
            "Find columns of a table or view that hold personal data (PII), judged from each column's name and up to 1000 of its non-null values in text form (numbers included, so card numbers stored as bigint are found; boolean, date/time, float, uuid and binary columns are skipped). Kinds: email, phone, credit_card (issuer prefix and Luhn checksum), iban (ISO 13616 checksum), ip_address (IPv4/IPv6), national_id (US SSN, UK NINO, German tax id), person_name, address. Returns {columns: {COLUMN: {pii: kind, confidence: 0.5 to 0.99}}, sampled_rows}: only columns where PII was detected are listed; sampled_rows is the most values read for one column. Arguments: ref {catalog?, schema?, table}; columns: the column names to check (all when absent); locale: auto (default, every convention), en (US/UK phone numbers and ids) or de (German phone numbers and tax ids). Large tables are read through TABLESAMPLE (see profile_table).",
            Verb::Read,
            read(),
        ),
        ToolSpec::new::<PreviewMaskedParams>(
            "preview_masked",
            "Show the first rows of a table or view (in primary-key order when it has one) with a masking policy from orca.yaml (masking: {POLICY_ID: {COLUMN: rule}}) applied before the rows leave orca: each column the policy names (matched case-insensitively) is redacted, hashed (salted; equal values get equal hashes), set to null, cut to its last N characters (keep_last:N) or to its e-mail domain (keep_email_domain). Returns a TabularResult plus policy_applied {policy_id, columns: the masked columns, missing_columns: columns of the policy that the table does not have}. Arguments: ref {catalog?, schema?, table}; policy_id: the policy's id; limit: rows to show, 1 to 1000 (default 50). An unknown policy_id is NOT_FOUND and names the configured policies.",
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
        "profile_table" => {
            server.profile_table(arguments, &server.target.reader(&context.principal).await?).await
        }
        // Its result names a kind of PII and a confidence per column, never a value: it reads
        // the originals.
        "detect_pii" => server.detect_pii(arguments).await,
        _ => {
            let reader = server.target.reader(&context.principal).await?;
            server.preview_masked(arguments, &reader, context.principal.masking.as_deref()).await
        }
    }
}

fn default_bins() -> u32 {
    20
}

fn default_preview_limit() -> u32 {
    50
}

/// Arguments of `profile_table`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ProfileTableParams {
    /// The table or view to profile.
    #[serde(rename = "ref")]
    table: TableRef,
    /// The columns to profile, by name; every column when absent.
    columns: Option<Vec<String>>,
    /// Equal-width histogram bins of numeric and date columns, and the number of most frequent
    /// values in the distribution of other columns (1 to 200).
    #[serde(default = "default_bins")]
    #[schemars(range(min = 1, max = 200))]
    bins: u32,
}

/// Arguments of `detect_pii`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DetectPiiParams {
    /// The table or view to check.
    #[serde(rename = "ref")]
    table: TableRef,
    /// The columns to check, by name; every column when absent.
    columns: Option<Vec<String>>,
    /// Whose phone number and national id conventions apply: `auto` (all), `en` (US and UK)
    /// or `de` (Germany).
    #[serde(default)]
    locale: LocaleParam,
}

/// The locales of `detect_pii`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum LocaleParam {
    #[default]
    Auto,
    En,
    De,
}

impl From<LocaleParam> for pii::Locale {
    fn from(locale: LocaleParam) -> pii::Locale {
        match locale {
            LocaleParam::Auto => pii::Locale::Auto,
            LocaleParam::En => pii::Locale::En,
            LocaleParam::De => pii::Locale::De,
        }
    }
}

/// Arguments of `preview_masked`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PreviewMaskedParams {
    /// The table or view to preview.
    #[serde(rename = "ref")]
    table: TableRef,
    /// The id of a masking policy configured under `masking:` in orca.yaml.
    policy_id: String,
    /// How many rows to show (1 to 1000, and at most the database's row cap; default 50, or
    /// the cap when lower).
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u32>,
}

// ---------------------------------------------------------------------------------------------
// What is read: the columns, their shapes, and the rows (all or a sample)
// ---------------------------------------------------------------------------------------------

/// How a column is profiled, from its type as `format_type` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A number: a histogram of its `float8` value (`money` through `numeric`).
    Number { money: bool },
    /// A date or timestamp: a histogram of its epoch seconds, edges shown as ISO-8601 text.
    Time(TimeKind),
    /// Anything else: its most frequent values.
    Category,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeKind {
    Date,
    Timestamp,
    TimestampWithTimeZone,
}

impl Shape {
    fn of(data_type: &str) -> Shape {
        let data_type = data_type.trim().to_ascii_lowercase();
        match data_type.as_str() {
            "smallint" | "integer" | "bigint" | "real" | "double precision" | "numeric" => {
                Shape::Number { money: false }
            }
            "money" => Shape::Number { money: true },
            "date" => Shape::Time(TimeKind::Date),
            "timestamp without time zone" => Shape::Time(TimeKind::Timestamp),
            "timestamp with time zone" => Shape::Time(TimeKind::TimestampWithTimeZone),
            other if other.starts_with("numeric(") && other.ends_with(')') => {
                Shape::Number { money: false }
            }
            other if other.starts_with("timestamp(") && other.ends_with(") without time zone") => {
                Shape::Time(TimeKind::Timestamp)
            }
            other if other.starts_with("timestamp(") && other.ends_with(") with time zone") => {
                Shape::Time(TimeKind::TimestampWithTimeZone)
            }
            _ => Shape::Category,
        }
    }

    /// The column's value as `float8`, for numbers and times.
    fn number_expression(self, column: &str) -> Option<String> {
        let reference = quote(column);
        match self {
            Shape::Number { money: false } => Some(format!("{reference}::float8")),
            Shape::Number { money: true } => Some(format!("{reference}::numeric::float8")),
            Shape::Time(_) => Some(format!("extract(epoch FROM {reference})::float8")),
            Shape::Category => None,
        }
    }
}

/// Whether `detect_pii` reads the values of a column of this type: not booleans, dates and
/// times, floats, uuids and binary data, whose values are never personal data in text form.
fn holds_text_pii(data_type: &str) -> bool {
    let data_type = data_type.trim().to_ascii_lowercase();
    let skipped = matches!(
        data_type.as_str(),
        "boolean" | "date" | "real" | "double precision" | "uuid" | "bytea" | "interval"
    ) || data_type.starts_with("timestamp")
        || data_type.starts_with("time ")
        || data_type.starts_with("time(")
        || data_type == "time"
        || data_type.starts_with("interval");
    !skipped
}

/// How the rows of a relation are read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sampling {
    /// Every row.
    All,
    /// `TABLESAMPLE SYSTEM (percent)`: whole pages holding about `sample_rows` rows of the
    /// `estimate` rows the planner expects.
    Pages { percent: f64, estimate: i64 },
    /// The first `limit` rows (views, foreign tables, tables never analyzed). `limit` is one
    /// more than `data.sample_rows`, so reading all of them means the relation has more.
    Head { limit: u64 },
}

/// The FROM item of a profile: the relation, sampled or not, as `"src"`.
#[derive(Debug, Clone, PartialEq)]
struct Source {
    from: String,
    sampling: Sampling,
}

impl Source {
    /// `tablesample`: whether the database supports `TABLESAMPLE` (else large tables are read
    /// from their first rows).
    fn new(relation: &Relation, quoted: &str, sample_rows: u64, tablesample: bool) -> Source {
        let pages_can_be_sampled = tablesample
            && matches!(
                relation.kind,
                RelationKind::Table
                    | RelationKind::MaterializedView
                    | RelationKind::PartitionedTable
            );
        let estimate = relation.row_estimate.filter(|_| pages_can_be_sampled);
        let sampling = match estimate {
            Some(estimate) if u64::try_from(estimate).unwrap_or(0) > sample_rows => {
                let percent = (sample_rows as f64 / estimate as f64 * 100.0).clamp(1e-9, 100.0);
                Sampling::Pages { percent, estimate }
            }
            Some(_) => Sampling::All,
            None => Sampling::Head { limit: sample_rows.saturating_add(1) },
        };
        let from = match sampling {
            Sampling::All => format!("{quoted} AS \"src\""),
            Sampling::Pages { percent, .. } => format!(
                "{quoted} AS \"src\" TABLESAMPLE SYSTEM ({percent}) REPEATABLE ({SAMPLE_SEED})"
            ),
            Sampling::Head { limit } => {
                format!("(SELECT * FROM {quoted} LIMIT {limit}) AS \"src\"")
            }
        };
        Source { from, sampling }
    }

    /// Whether `rows_read` rows are fewer than the relation holds.
    fn sampled(&self, rows_read: u64) -> bool {
        match self.sampling {
            Sampling::All => false,
            Sampling::Pages { .. } => true,
            Sampling::Head { limit } => rows_read >= limit,
        }
    }

    /// The row count to report: exact when every row was read, else the planner's estimate
    /// (unknown for the head of a view).
    fn row_count(&self, rows_read: u64) -> Value {
        match self.sampling {
            Sampling::Pages { estimate, .. } => Value::from(estimate),
            Sampling::Head { .. } if self.sampled(rows_read) => Value::Null,
            Sampling::All | Sampling::Head { .. } => Value::from(rows_read),
        }
    }
}

/// The columns named in `requested` (exactly, else case-insensitively), or every column of the
/// relation; each once.
fn chosen_columns<'a>(
    relation: &'a Relation,
    requested: Option<&[String]>,
) -> Result<Vec<&'a Column>, ToolError> {
    let Some(requested) = requested else {
        return Ok(relation.columns.iter().collect());
    };
    if requested.is_empty() {
        return Err(ToolError::invalid_input("columns is empty")
            .with_hint("leave columns out to use every column"));
    }
    let mut chosen: Vec<&Column> = Vec::with_capacity(requested.len());
    for name in requested {
        let found = relation.columns.iter().find(|column| &column.name == name).or_else(|| {
            let lower = name.to_lowercase();
            let mut matches =
                relation.columns.iter().filter(|column| column.name.to_lowercase() == lower);
            let first = matches.next();
            if matches.next().is_some() { None } else { first }
        });
        let Some(column) = found else {
            let available: Vec<&str> =
                relation.columns.iter().map(|column| column.name.as_str()).collect();
            return Err(ToolError::invalid_input(format!(
                "`{}` has no column `{name}`; its columns: {}",
                relation.name,
                available.join(", ")
            ))
            .with_hint("pass column names as get_table_schema lists them"));
        };
        if !chosen.iter().any(|known| std::ptr::eq(*known, column)) {
            chosen.push(column);
        }
    }
    Ok(chosen)
}

// ---------------------------------------------------------------------------------------------
// profile_table
// ---------------------------------------------------------------------------------------------

/// A column of a profile and what the summary query found about it.
#[derive(Debug, Clone)]
struct Profiled<'a> {
    name: &'a str,
    shape: Shape,
    non_null: u64,
    /// The smallest and largest finite value (as `float8`) and how many values are finite.
    range: Option<(f64, f64, u64)>,
}

/// How one numeric column's histogram is found.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Histogram {
    /// `bins` equal-width bins from `lo` to `hi`, counted by the histogram query.
    Bins { lo: f64, hi: f64 },
    /// A single value (or a range too wide for `float8`): one bin holding every finite value.
    Single { lo: f64, hi: f64, count: u64 },
}

impl Histogram {
    fn of(range: (f64, f64, u64)) -> Histogram {
        let (lo, hi, count) = range;
        if lo < hi && (hi - lo).is_finite() {
            Histogram::Bins { lo, hi }
        } else {
            Histogram::Single { lo, hi, count }
        }
    }
}

/// The query for the row count, each column's non-null count and each numeric column's finite
/// range: `count(*)`, then per column `count(c)` and, for numbers and times, `min`, `max` and
/// `count` of the finite values.
fn summary_sql(source: &Source, columns: &[(&str, Shape)]) -> String {
    let mut select = vec!["count(*)".to_owned()];
    for (name, shape) in columns {
        select.push(format!("count({})", quote(name)));
        if let Some(value) = shape.number_expression(name) {
            let finite = format!("{value} > '-Infinity'::float8 AND {value} < 'Infinity'::float8");
            select.push(format!("min({value}) FILTER (WHERE {finite})"));
            select.push(format!("max({value}) FILTER (WHERE {finite})"));
            select.push(format!("count(*) FILTER (WHERE {finite})"));
        }
    }
    format!("SELECT {} FROM {}", select.join(", "), source.from)
}

/// The query for every histogram in one scan: each row of the relation yields one (column
/// position, bin) pair per histogram column through a lateral VALUES list; non-finite values
/// and nulls yield no bin. `width_bucket` puts the largest value in bin `bins + 1`, hence the
/// clamp.
fn histogram_sql(source: &Source, histograms: &[(usize, String, f64, f64)], bins: u32) -> String {
    let pairs: Vec<String> = histograms
        .iter()
        .map(|(position, value, lo, hi)| {
            format!(
                "({position}, CASE WHEN {value} > '-Infinity'::float8 AND {value} < 'Infinity'::float8 \
                 THEN least(greatest(width_bucket({value}, {lo}::float8, {hi}::float8, {bins}), 1), {bins}) END)"
            )
        })
        .collect();
    format!(
        "SELECT \"profile_bins\".\"profile_column\", \"profile_bins\".\"profile_bin\", count(*) \
         FROM {} CROSS JOIN LATERAL (VALUES {}) AS \"profile_bins\"(\"profile_column\", \"profile_bin\") \
         WHERE \"profile_bins\".\"profile_bin\" IS NOT NULL GROUP BY 1, 2",
        source.from,
        pairs.join(", ")
    )
}

/// The query for the `keep` most frequent values of every column in one scan: the text form
/// of each value, counted per column, ranked by count (then by value).
fn top_values_sql(source: &Source, columns: &[(usize, &str)], keep: u32) -> String {
    let pairs: Vec<String> = columns
        .iter()
        .map(|(position, name)| format!("({position}, {}::text)", quote(name)))
        .collect();
    format!(
        "SELECT \"profile_top\".\"profile_column\", left(\"profile_top\".\"profile_value\", {VALUE_CHARACTERS}), \
                \"profile_top\".\"profile_count\", \"profile_top\".\"profile_rank\" \
         FROM (SELECT \"profile_values\".\"profile_column\", \"profile_values\".\"profile_value\", \
                      count(*) AS \"profile_count\", \
                      row_number() OVER (PARTITION BY \"profile_values\".\"profile_column\" \
                                         ORDER BY count(*) DESC, \"profile_values\".\"profile_value\") AS \"profile_rank\" \
                 FROM {} CROSS JOIN LATERAL (VALUES {}) AS \"profile_values\"(\"profile_column\", \"profile_value\") \
                WHERE \"profile_values\".\"profile_value\" IS NOT NULL \
                GROUP BY \"profile_values\".\"profile_column\", \"profile_values\".\"profile_value\") AS \"profile_top\" \
         WHERE \"profile_top\".\"profile_rank\" <= {keep}",
        source.from,
        pairs.join(", ")
    )
}

/// `x` with at most 12 significant digits, so that bin edges read `4.6` rather than
/// `4.6000000000000005`.
fn tidy(x: f64) -> f64 {
    format!("{x:.11e}").parse().unwrap_or(x)
}

/// The edges of `bins` equal-width bins from `lo` to `hi`; the last ends at `hi` exactly.
fn bin_edges(lo: f64, hi: f64, bins: u32) -> Vec<(f64, f64)> {
    let width = (hi - lo) / f64::from(bins);
    (0..bins)
        .map(|index| {
            let start = if index == 0 { lo } else { lo + width * f64::from(index) };
            let end = if index + 1 == bins { hi } else { lo + width * f64::from(index + 1) };
            (start, end)
        })
        .collect()
}

/// A bin edge as JSON: a number, or ISO-8601 text for times (whole seconds; a date column's
/// edge at midnight as a plain date).
fn edge(shape: Shape, x: f64) -> Value {
    let Shape::Time(kind) = shape else {
        return json!(tidy(x));
    };
    let seconds = x.round() as i64;
    let Some(instant) = chrono::DateTime::from_timestamp(seconds, 0) else {
        return json!(tidy(x));
    };
    let text = match kind {
        TimeKind::Date if seconds.rem_euclid(86_400) == 0 => instant.format("%Y-%m-%d"),
        TimeKind::Date | TimeKind::Timestamp => instant.format("%Y-%m-%dT%H:%M:%S"),
        TimeKind::TimestampWithTimeZone => instant.format("%Y-%m-%dT%H:%M:%SZ"),
    };
    Value::String(text.to_string())
}

/// `part / whole`, rounded to six decimals; 0 for an empty whole.
fn rate(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { (part as f64 / whole as f64 * 1e6).round() / 1e6 }
}

fn count_at(row: &[Value], index: usize) -> u64 {
    row.get(index).and_then(Value::as_u64).unwrap_or(0)
}

fn finite_at(row: &[Value], index: usize) -> Option<f64> {
    row.get(index).and_then(Value::as_f64).filter(|x| x.is_finite())
}

impl DataServer {
    /// Classify and run SQL built by this file through the read path of `query_sql`.
    async fn read_profile(
        &self,
        reader: &Reader,
        sql_text: &str,
        max_rows: usize,
        max_bytes: usize,
    ) -> Result<ReadResult, ToolError> {
        let statement = sql::single_statement(sql_text).map_err(sql_error)?;
        let query = ReadOnlyQuery::from_statement(statement).map_err(sql_error)?;
        let limits = ReadLimits { max_rows, max_bytes, timeout: self.config.default_timeout };
        sql::run_read(&reader.pool, &query, limits).await.map_err(|error| {
            let mut error = reader.error(error);
            if error.code == ErrorCode::Timeout {
                error.hint = Some(
                    "name fewer columns, or lower data.sample_rows or raise sql.default_timeout_ms in orca.yaml"
                        .to_owned(),
                );
            } else if error.code == ErrorCode::QueryFailed {
                error.hint = Some("the relation may have changed; call get_table_schema".to_owned());
            }
            error
        })
    }

    /// [`DataServer::read_profile`] for intermediate results that must arrive whole.
    async fn read_whole(
        &self,
        reader: &Reader,
        sql_text: &str,
        max_rows: usize,
    ) -> Result<ReadResult, ToolError> {
        let result = self.read_profile(reader, sql_text, max_rows, INTERNAL_MAX_BYTES).await?;
        if result.truncated.is_some() {
            return Err(ToolError::new(
                ErrorCode::ResultTruncated,
                "the values to examine are larger than orca reads for one call",
            )
            .with_hint("name fewer columns with `columns`"));
        }
        Ok(result)
    }

    async fn profile_table(
        &self,
        arguments: Option<Map<String, Value>>,
        reader: &Reader,
    ) -> Result<ToolOutput, ToolError> {
        let params: ProfileTableParams = parse_arguments(arguments)?;
        if !(1..=MAX_BINS).contains(&params.bins) {
            return Err(ToolError::invalid_input(format!("bins must be between 1 and {MAX_BINS}")));
        }
        let bins = params.bins;
        let table: ResolvedTable = self.resolve_table(&params.table).await?;
        let relation = table.relation();
        let reader = &reader.knowing(&relation.schema, &relation.name).await;
        let columns = chosen_columns(relation, params.columns.as_deref())?;
        // A masked caller profiles the masked view: its masked columns are text, and a view
        // cannot be sampled by pages.
        let source = Source::new(
            relation,
            &reader.relation(&relation.schema, &relation.name),
            self.data.sample_rows,
            self.database.features().tablesample && !reader.masked(),
        );
        let shaped: Vec<(&str, Shape)> = columns
            .iter()
            .map(|column| {
                let shape = if reader.masks(&column.name) {
                    Shape::of("text")
                } else {
                    Shape::of(&column.data_type)
                };
                (column.name.as_str(), shape)
            })
            .collect();

        let outputs: usize = 1 + shaped
            .iter()
            .map(|(name, shape)| if shape.number_expression(name).is_some() { 4 } else { 1 })
            .sum::<usize>();
        if outputs > MAX_SUMMARY_OUTPUTS {
            return Err(ToolError::invalid_input(format!(
                "{} columns are too many to profile in one call",
                shaped.len()
            ))
            .with_hint(
                "name up to 400 columns with `columns` and profile the rest in another call",
            ));
        }

        // 1. Row count, non-null counts, ranges.
        let summary = self.read_whole(reader, &summary_sql(&source, &shaped), 1).await?;
        let row = summary.rows.first().cloned().unwrap_or_default();
        let profile = Profile::from_summary(&source, bins, &row, &shaped);
        // 2. Every histogram, in one scan.
        let bin_counts = self.bin_counts(reader, &profile).await?;
        // 3. The most frequent values of every column, in one scan.
        let top = self.top_values(reader, &profile).await?;
        Ok(ToolOutput::new(profile.result(&top, &bin_counts)))
    }

    /// Each column's count per bin, from one scan of every numeric column with a range.
    async fn bin_counts(
        &self,
        reader: &Reader,
        profile: &Profile<'_>,
    ) -> Result<Vec<Vec<u64>>, ToolError> {
        let bins = profile.bins;
        let counted: Vec<(usize, String, f64, f64)> = profile
            .columns
            .iter()
            .zip(&profile.histograms)
            .enumerate()
            .filter_map(|(position, (column, histogram))| match histogram {
                Some(Histogram::Bins { lo, hi }) => {
                    Some((position, column.shape.number_expression(column.name)?, *lo, *hi))
                }
                _ => None,
            })
            .collect();
        let mut bin_counts: Vec<Vec<u64>> = vec![vec![0; bins as usize]; profile.columns.len()];
        if !counted.is_empty() && profile.rows_read > 0 {
            let max_rows = counted.len() * bins as usize + 1;
            let sql_text = histogram_sql(profile.source, &counted, bins);
            let result = self.read_whole(reader, &sql_text, max_rows).await?;
            for row in &result.rows {
                let position = count_at(row, 0) as usize;
                let bin = count_at(row, 1) as usize;
                if let Some(slot) = bin_counts
                    .get_mut(position)
                    .and_then(|counts| counts.get_mut(bin.wrapping_sub(1)))
                {
                    *slot = count_at(row, 2);
                }
            }
        }
        Ok(bin_counts)
    }

    /// Each column's most frequent values with their counts, most frequent first, from one scan
    /// of every column that holds a value.
    async fn top_values(
        &self,
        reader: &Reader,
        profile: &Profile<'_>,
    ) -> Result<Vec<Vec<(Value, u64)>>, ToolError> {
        let keep = profile.bins.max(TOP_VALUES);
        let mut top: Vec<Vec<(Value, u64)>> = vec![Vec::new(); profile.columns.len()];
        let with_values: Vec<(usize, &str)> = profile
            .columns
            .iter()
            .enumerate()
            .filter(|(_, column)| column.non_null > 0)
            .map(|(position, column)| (position, column.name))
            .collect();
        if !with_values.is_empty() {
            let max_rows = with_values.len() * keep as usize + 1;
            let sql_text = top_values_sql(profile.source, &with_values, keep);
            let result = self.read_whole(reader, &sql_text, max_rows).await?;
            let mut ranked: Vec<(u64, u64, Value, u64)> = result
                .rows
                .iter()
                .map(|row| {
                    let value = row.get(1).cloned().unwrap_or(Value::Null);
                    (count_at(row, 0), count_at(row, 3), value, count_at(row, 2))
                })
                .collect();
            ranked.sort_by_key(|(position, rank, _, _)| (*position, *rank));
            for (position, _, value, count) in ranked {
                if let Some(values) = top.get_mut(position as usize) {
                    values.push((value, count));
                }
            }
        }
        Ok(top)
    }
}

/// A table's profile once the summary query has run: what the histogram and top-values scans
/// read, and what the result is made of.
struct Profile<'a> {
    source: &'a Source,
    bins: u32,
    rows_read: u64,
    columns: Vec<Profiled<'a>>,
    /// Each column's histogram; `None` for a column without finite numbers.
    histograms: Vec<Option<Histogram>>,
}

impl<'a> Profile<'a> {
    /// Read the summary query's row: the row count, then per column its non-null count and,
    /// for numbers and times, the smallest and largest finite value and how many are finite.
    fn from_summary(
        source: &'a Source,
        bins: u32,
        row: &[Value],
        shaped: &[(&'a str, Shape)],
    ) -> Profile<'a> {
        let rows_read = count_at(row, 0);
        let mut profiled: Vec<Profiled<'a>> = Vec::with_capacity(shaped.len());
        let mut index = 1;
        for (name, shape) in shaped {
            let non_null = count_at(row, index);
            index += 1;
            let mut range = None;
            if shape.number_expression(name).is_some() {
                let finite = count_at(row, index + 2);
                if let (Some(lo), Some(hi)) = (finite_at(row, index), finite_at(row, index + 1))
                    && finite > 0
                {
                    range = Some((lo, hi, finite));
                }
                index += 3;
            }
            profiled.push(Profiled { name, shape: *shape, non_null, range });
        }
        let histograms = profiled.iter().map(|column| column.range.map(Histogram::of)).collect();
        Profile { source, bins, rows_read, columns: profiled, histograms }
    }

    /// The result, in column order, with each column's `top` values and `bin_counts`.
    fn result(&self, top: &[Vec<(Value, u64)>], bin_counts: &[Vec<u64>]) -> Value {
        let rows_read = self.rows_read;
        let mut null_rate = Map::new();
        let mut distributions = Map::new();
        let mut topk = Map::new();
        for (position, column) in self.columns.iter().enumerate() {
            null_rate.insert(
                column.name.to_owned(),
                json!(rate(rows_read.saturating_sub(column.non_null), rows_read)),
            );
            let values = &top[position];
            let distribution = self.distribution(position, values, &bin_counts[position]);
            distributions.insert(column.name.to_owned(), distribution);
            let listed: Vec<Value> = values
                .iter()
                .take(TOP_VALUES as usize)
                .map(|(value, count)| json!({"value": value.clone(), "count": count}))
                .collect();
            topk.insert(column.name.to_owned(), Value::Array(listed));
        }
        let sampled = self.source.sampled(rows_read);
        let mut value = json!({
            "summary": {"row_count": self.source.row_count(rows_read), "null_rate": null_rate},
            "distributions": distributions,
            "topk": topk,
            "sampled": sampled,
        });
        if sampled {
            value["sample_rows"] = json!(rows_read);
        }
        value
    }

    /// The distribution of the column at `position`: its most frequent `values` for a category,
    /// else its histogram's bins with their `counts`.
    fn distribution(&self, position: usize, values: &[(Value, u64)], counts: &[u64]) -> Value {
        let bins = self.bins;
        let column = &self.columns[position];
        match (column.shape, self.histograms[position]) {
            (Shape::Category, _) => {
                let shown: Vec<Value> = values
                    .iter()
                    .take(bins as usize)
                    .map(|(value, count)| {
                        json!({"lo": value.clone(), "hi": value.clone(), "count": count})
                    })
                    .collect();
                let in_bins: u64 = values.iter().take(bins as usize).map(|(_, count)| count).sum();
                json!({
                    "type": "categorical",
                    "bins": shown,
                    "other_count": column.non_null.saturating_sub(in_bins),
                })
            }
            (shape, Some(Histogram::Bins { lo, hi })) => {
                let shown: Vec<Value> = bin_edges(lo, hi, bins)
                    .into_iter()
                    .zip(counts)
                    .map(|((start, end), count)| {
                        json!({"lo": edge(shape, start), "hi": edge(shape, end), "count": count})
                    })
                    .collect();
                json!({"type": "numeric", "bins": shown})
            }
            (shape, Some(Histogram::Single { lo, hi, count })) => json!({
                "type": "numeric",
                "bins": [{"lo": edge(shape, lo), "hi": edge(shape, hi), "count": count}],
            }),
            (_, None) => json!({"type": "numeric", "bins": []}),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// detect_pii
// ---------------------------------------------------------------------------------------------

/// One query reading, per column, up to [`PII_VALUES`] non-null values in text form (each
/// column's scan stops once it has them).
fn pii_sql(source: &Source, columns: &[&str]) -> String {
    let select: Vec<String> = columns
        .iter()
        .map(|name| {
            let reference = quote(name);
            format!(
                "(SELECT array_agg(\"pii_value\") FROM (SELECT left({reference}::text, {PII_VALUE_CHARACTERS}) AS \"pii_value\" \
                 FROM {} WHERE {reference} IS NOT NULL LIMIT {PII_VALUES}) AS \"pii_sample\")",
                source.from
            )
        })
        .collect();
    format!("SELECT {}", select.join(", "))
}

impl DataServer {
    async fn detect_pii(
        &self,
        arguments: Option<Map<String, Value>>,
    ) -> Result<ToolOutput, ToolError> {
        let params: DetectPiiParams = parse_arguments(arguments)?;
        let table = self.resolve_table(&params.table).await?;
        let relation = table.relation();
        let columns: Vec<&str> = chosen_columns(relation, params.columns.as_deref())?
            .into_iter()
            .filter(|column| holds_text_pii(&column.data_type))
            .map(|column| column.name.as_str())
            .collect();
        let source = Source::new(
            relation,
            &table.quoted(),
            self.data.sample_rows,
            self.database.features().tablesample,
        );
        let samples: Vec<Vec<String>> = if columns.is_empty() {
            Vec::new()
        } else {
            let result =
                self.read_whole(&self.target.own_reader(), &pii_sql(&source, &columns), 1).await?;
            let row = result.rows.into_iter().next().unwrap_or_default();
            (0..columns.len())
                .map(|index| match row.get(index) {
                    Some(Value::Array(values)) => values
                        .iter()
                        .filter_map(|value| value.as_str().map(str::to_owned))
                        .collect(),
                    _ => Vec::new(),
                })
                .collect()
        };
        let locale = pii::Locale::from(params.locale);
        let mut detected = Map::new();
        let mut sampled_rows = 0;
        for (index, name) in columns.iter().enumerate() {
            let values: Vec<&str> = samples
                .get(index)
                .map(|values| values.iter().map(String::as_str).collect())
                .unwrap_or_default();
            sampled_rows = sampled_rows.max(values.len());
            if let Some(detection) = pii::detect_column(name, &values, locale) {
                detected.insert(
                    (*name).to_owned(),
                    json!({"pii": detection.kind.as_str(), "confidence": detection.confidence}),
                );
            }
        }
        Ok(ToolOutput::new(json!({"columns": detected, "sampled_rows": sampled_rows})))
    }
}

// ---------------------------------------------------------------------------------------------
// preview_masked
// ---------------------------------------------------------------------------------------------

/// The first `limit` rows of every column, in primary-key order when there is one.
fn preview_sql(relation: &Relation, quoted: &str, limit: u32) -> String {
    let columns: Vec<String> = relation.columns.iter().map(|column| quote(&column.name)).collect();
    let order = match &relation.primary_key {
        Some(key) if !key.columns.is_empty() => {
            let keys: Vec<String> = key.columns.iter().map(|name| quote(name)).collect();
            format!(" ORDER BY {}", keys.join(", "))
        }
        _ => String::new(),
    };
    format!("SELECT {} FROM {quoted}{order} LIMIT {limit}", columns.join(", "))
}

/// The policy's columns that no result column matches (case-insensitively).
fn missing_columns(policy: &MaskingPolicy, columns: &[String]) -> Vec<String> {
    policy
        .columns
        .keys()
        .filter(|name| {
            let lower = name.to_lowercase();
            !columns.iter().any(|column| column.to_lowercase() == lower)
        })
        .cloned()
        .collect()
}

impl DataServer {
    fn masking_policy(&self, id: &str) -> Result<&MaskingPolicy, ToolError> {
        if let Some(policy) = self.masking.get(id) {
            return Ok(policy);
        }
        if self.masking.is_empty() {
            return Err(ToolError::not_found(format!(
                "masking policy `{id}` does not exist: no masking policies are configured"
            ))
            .with_hint(
                "add one to orca.yaml: `masking: {<policy_id>: {<column>: <rule>}}` with rules redact, hash, null, keep_email_domain or keep_last:4",
            ));
        }
        let known: Vec<&str> = self.masking.keys().map(String::as_str).collect();
        Err(ToolError::not_found(format!(
            "masking policy `{id}` does not exist; configured policies: {}",
            known.join(", ")
        ))
        .with_hint("pass one of the configured policy ids as policy_id"))
    }

    async fn preview_masked(
        &self,
        arguments: Option<Map<String, Value>>,
        reader: &Reader,
        masking: Option<&MaskingPolicy>,
    ) -> Result<ToolOutput, ToolError> {
        let params: PreviewMaskedParams = parse_arguments(arguments)?;
        let most = (MAX_PREVIEW_ROWS as usize).min(self.config.hard_max_rows);
        let limit = params.limit.unwrap_or_else(|| {
            default_preview_limit().min(u32::try_from(most).unwrap_or(u32::MAX))
        });
        if limit == 0 || limit as usize > most {
            return Err(ToolError::invalid_input(format!("limit must be between 1 and {most}")));
        }
        let policy = self.masking_policy(&params.policy_id)?;
        let table = self.resolve_table(&params.table).await?;
        let relation = table.relation();
        let reader = &reader.knowing(&relation.schema, &relation.name).await;
        let sql_text =
            preview_sql(relation, &reader.relation(&relation.schema, &relation.name), limit);
        let mut result = self
            .read_profile(reader, &sql_text, limit as usize, self.config.max_result_bytes)
            .await?;
        let names: Vec<String> = result.columns.iter().map(|column| column.name.clone()).collect();
        // The caller's own masking (its role's) is the database's: the rows come masked from
        // its session. The policy asked for is applied here, before anything of the rows is
        // returned or recorded.
        let role_masked = masking.map(|role_policy| {
            let covered: Vec<&String> =
                names.iter().filter(|name| role_policy.rule_for(name).is_some()).collect();
            json!({ "policy_id": role_policy.id, "columns": covered })
        });
        let masked = policy.apply(&names, &mut result.rows);
        let missing = missing_columns(policy, &names);
        let mut value = crate::servers::sql_common::tabular_result(result, &self.target.source);
        value["policy_applied"] = json!({
            "policy_id": policy.id,
            "columns": masked,
            "missing_columns": missing,
        });
        if let Some(role_masked) = role_masked {
            value["policy_applied"]["caller_policy"] = role_masked;
        }
        Ok(ToolOutput::new(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_types_map_to_profile_shapes() {
        let cases = [
            ("integer", Shape::Number { money: false }),
            ("bigint", Shape::Number { money: false }),
            ("numeric(10,2)", Shape::Number { money: false }),
            ("numeric", Shape::Number { money: false }),
            ("double precision", Shape::Number { money: false }),
            ("money", Shape::Number { money: true }),
            ("date", Shape::Time(TimeKind::Date)),
            ("timestamp without time zone", Shape::Time(TimeKind::Timestamp)),
            ("timestamp(3) without time zone", Shape::Time(TimeKind::Timestamp)),
            ("timestamp with time zone", Shape::Time(TimeKind::TimestampWithTimeZone)),
            ("integer[]", Shape::Category),
            ("numeric(10,2)[]", Shape::Category),
            ("numeric_code", Shape::Category),
            ("character varying(40)", Shape::Category),
            ("boolean", Shape::Category),
            ("mpaa_rating", Shape::Category),
            ("time without time zone", Shape::Category),
        ];
        for (data_type, expected) in cases {
            assert_eq!(Shape::of(data_type), expected, "{data_type}");
        }
    }

    #[test]
    fn pii_detection_reads_text_and_numbers_but_not_times_or_flags() {
        let cases = [
            ("character varying(60)", true),
            ("text", true),
            ("bigint", true),
            ("numeric(20,0)", true),
            ("jsonb", true),
            ("boolean", false),
            ("date", false),
            ("timestamp with time zone", false),
            ("time without time zone", false),
            ("double precision", false),
            ("uuid", false),
            ("bytea", false),
        ];
        for (data_type, expected) in cases {
            assert_eq!(holds_text_pii(data_type), expected, "{data_type}");
        }
    }

    #[test]
    fn bins_split_the_range_evenly_and_end_at_the_maximum() {
        let edges = bin_edges(1.0, 25.0, 20);
        assert_eq!(edges.len(), 20);
        assert_eq!(edges[0].0, 1.0);
        assert_eq!(edges[19].1, 25.0);
        assert_eq!(tidy(edges[3].1), 5.8);
        for pair in edges.windows(2) {
            assert_eq!(pair[0].1, pair[1].0);
        }
        assert_eq!(bin_edges(0.0, 1.0, 1), vec![(0.0, 1.0)]);
    }

    #[test]
    fn time_edges_are_iso_text() {
        let day = 86_400.0 * 19_000.0;
        let cases = [
            (Shape::Time(TimeKind::Date), day, json!("2022-01-08")),
            (Shape::Time(TimeKind::Date), day + 3600.0, json!("2022-01-08T01:00:00")),
            (Shape::Time(TimeKind::Timestamp), day, json!("2022-01-08T00:00:00")),
            (
                Shape::Time(TimeKind::TimestampWithTimeZone),
                day + 0.4,
                json!("2022-01-08T00:00:00Z"),
            ),
            (Shape::Number { money: false }, 4.600_000_000_000_000_5, json!(4.6)),
        ];
        for (shape, x, expected) in cases {
            assert_eq!(edge(shape, x), expected, "{shape:?} {x}");
        }
    }

    #[test]
    fn large_tables_are_sampled_by_pages_and_views_by_their_head() {
        let relation = |kind: RelationKind, estimate: Option<i64>| Relation {
            row_estimate: estimate,
            ..Relation::empty("public", "t", kind)
        };
        let quoted = "\"public\".\"t\"";
        let small = Source::new(&relation(RelationKind::Table, Some(500)), quoted, 1000, true);
        assert_eq!(small.from, "\"public\".\"t\" AS \"src\"");
        assert!(!small.sampled(500));
        assert_eq!(small.row_count(500), json!(500));

        let large =
            Source::new(&relation(RelationKind::Table, Some(200_000)), quoted, 10_000, true);
        assert_eq!(
            large.from,
            "\"public\".\"t\" AS \"src\" TABLESAMPLE SYSTEM (5) REPEATABLE (20261122)"
        );
        assert!(large.sampled(9_876));
        assert_eq!(large.row_count(9_876), json!(200_000));

        let view = Source::new(&relation(RelationKind::View, None), quoted, 100, true);
        assert_eq!(view.from, "(SELECT * FROM \"public\".\"t\" LIMIT 101) AS \"src\"");
        assert!(!view.sampled(100));
        assert_eq!(view.row_count(100), json!(100));
        assert!(view.sampled(101));
        assert_eq!(view.row_count(101), Value::Null);
    }
}
