//! The domain logic of the `format_results` tool: it reads result data in whatever shape an LLM
//! client passes it back (a `TabularResult`, an array of row objects, CSV or JSON text) and renders
//! it as a Markdown table, CSV text, JSON objects, column statistics or a chart, so that the tool
//! adapter only has to pick the output and map [`FormatError`] to `INVALID_INPUT`.
//!
//! Nothing here does I/O, and every function is total: hostile input (huge numbers, `NaN` strings, ragged rows,
//! megabytes of text) yields an error or a degraded rendering, never a panic. Charts come as a
//! Vega-Lite v5 spec for clients that can draw one and as a PNG drawn in memory with an embedded
//! font, so nothing depends on fonts or libraries installed on the host.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::OnceLock;

use plotters::backend::{BitMapBackend, DrawingBackend, RGBPixel};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::drawing::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea};
use plotters::element::{Circle, PathElement, Rectangle};
use plotters::prelude::{Cartesian2d, ChartBuilder, ChartContext};
use plotters::style::{Color, FontStyle, RGBColor, WHITE};
use serde::Deserialize;
use serde_json::{Map, Number, Value, json};

/// The most columns a dataset may have.
const MAX_COLUMNS: usize = 1_000;
/// The most cells (rows times columns) a dataset may have; an array of sparse row objects would
/// otherwise expand a small request into gigabytes of nulls.
const MAX_CELLS: usize = 5_000_000;
/// How many of the most frequent values the summary lists per column.
const MAX_TOP_VALUES: usize = 5;
/// Strings longer than this many characters are cut in the summary.
const MAX_SUMMARY_TEXT: usize = 200;
/// How many categories a bar chart shows, the largest first.
const MAX_BAR_CATEGORIES: usize = 30;
/// How many points a line or scatter chart plots; larger series are sampled evenly.
const MAX_CHART_POINTS: usize = 5_000;
/// How many equal-width bins a histogram has.
const HISTOGRAM_BINS: usize = 20;
/// Values whose magnitude exceeds this are left out of charts: the axis arithmetic would overflow.
const MAX_PLOT_MAGNITUDE: f64 = 1e250;
/// The size of the PNG, in pixels.
const PNG_WIDTH: u32 = 800;
const PNG_HEIGHT: u32 = 500;
/// How many characters of a name or label a chart shows.
const MAX_TITLE_CHARS: usize = 80;
const MAX_LABEL_CHARS: usize = 28;
const MILLIS_PER_DAY: i64 = 86_400_000;
const VEGA_LITE_SCHEMA: &str = "https://vega.github.io/schema/vega-lite/v5.json";
/// The family plotters asks for by default, which the embedded font is registered under.
const FONT_FAMILY: &str = "sans-serif";
const BAR_COLOR: RGBColor = RGBColor(31, 119, 180);
const GRID_COLOR: RGBColor = RGBColor(230, 230, 230);

/// DejaVu Sans (fonts-dejavu-core), embedded so the PNG needs no system fonts; its licence is in
/// `data/fonts/LICENSE-DejaVu.txt`.
static DEJAVU_SANS: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/fonts/DejaVuSans.ttf"));

static NULL: Value = Value::Null;

/// The presentations `format_results` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OutputFormat {
    Table,
    Chart,
    Summary,
    Csv,
    Json,
}

/// Why result data could not be read or charted; the adapter reports it as `INVALID_INPUT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FormatError {
    /// `data` is neither a result object, an array, nor a non-empty string.
    UnsupportedData { found: &'static str },
    /// A result object lacks `schema` or `rows`, or one of them has the wrong shape.
    InvalidResultObject { reason: String },
    /// An element of an array of row objects is not an object.
    RowNotObject { index: usize, found: &'static str },
    /// A row of a result object has a different number of values than the schema has columns.
    RowWidth { index: usize, found: usize, expected: usize },
    /// The `data` string looks like JSON but does not parse.
    InvalidJson { reason: String },
    /// The `data` string is CSV that does not parse.
    InvalidCsv { reason: String },
    /// The dataset has more columns or cells than this module accepts.
    TooLarge { rows: usize, columns: usize },
    /// A chart was asked for a dataset without rows.
    EmptyDataset,
    /// No combination of the dataset's column types can be charted.
    NotPlottable { found: String },
    /// The chosen columns never hold plottable values in the same row.
    NoPlottableRows { columns: String },
    /// The plotting library or the PNG encoder failed.
    Render { reason: String },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::UnsupportedData { found } => write!(
                f,
                "data is {found}; expected a result object with `schema` and `rows`, an array of \
                 row objects, or a string of CSV (with a header row) or JSON"
            ),
            FormatError::InvalidResultObject { reason } => write!(
                f,
                "{reason}; a result object needs `schema` (an array of objects with a string \
                 `name`) and `rows` (an array of arrays)"
            ),
            FormatError::RowNotObject { index, found } => {
                write!(f, "data[{index}] is {found}; an array of rows must hold one object per row")
            }
            FormatError::RowWidth { index, found, expected } => write!(
                f,
                "rows[{index}] has {} but the schema has {}; every row needs one value per column",
                counted(*found, "value", "values"),
                counted(*expected, "column", "columns"),
            ),
            FormatError::InvalidJson { reason } => write!(
                f,
                "data is not valid JSON ({reason}); a string must hold a result object, an array \
                 of row objects, or CSV text with a header row"
            ),
            FormatError::InvalidCsv { reason } => write!(
                f,
                "data is not valid CSV ({reason}); CSV text needs a header row and the same \
                 number of fields on every line"
            ),
            FormatError::TooLarge { rows, columns } => write!(
                f,
                "data has {rows} rows of {columns} columns; at most {MAX_COLUMNS} columns and \
                 {MAX_CELLS} cells (rows times columns) are accepted"
            ),
            FormatError::EmptyDataset => {
                f.write_str("data has no rows; a chart needs at least one row")
            }
            FormatError::NotPlottable { found } => write!(
                f,
                "no columns can be charted (found {found}); a chart needs a numeric column, \
                 optionally with a date or text column"
            ),
            FormatError::NoPlottableRows { columns } => write!(
                f,
                "no row has plottable values in {columns}; a chart needs rows where these \
                 columns are not null and numbers stay within 1e250"
            ),
            FormatError::Render { reason } => write!(f, "chart could not be drawn: {reason}"),
        }
    }
}

impl std::error::Error for FormatError {}

/// A table of values with named columns; every row has one value per column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dataset {
    pub(crate) columns: Vec<Column>,
    pub(crate) rows: Vec<Vec<Value>>,
}

/// One column of a [`Dataset`]: its name and, when the source said, its database type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) type_name: Option<String>,
}

/// The kinds of chart [`chart`] draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChartKind {
    Bar,
    Line,
    Scatter,
    Histogram,
}

impl ChartKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ChartKind::Bar => "bar",
            ChartKind::Line => "line",
            ChartKind::Scatter => "scatter",
            ChartKind::Histogram => "histogram",
        }
    }
}

/// A chart in two forms: a Vega-Lite v5 spec with the plotted values inline, and the same chart
/// drawn as a PNG (raw bytes; the adapter base64-encodes them).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chart {
    pub(crate) kind: ChartKind,
    pub(crate) vega_lite: Value,
    pub(crate) png: Vec<u8>,
}

/// Reads the `data` argument of `format_results` into a [`Dataset`].
///
/// Three shapes are accepted. A `TabularResult` object needs `schema` (objects with a string
/// `name` and an optional `type`, or plain name strings; `columns` is accepted as another name
/// for it) and `rows` (arrays of one value per column, or objects keyed by column name); its other
/// fields are ignored. An array of objects gives one row per object, with the union of their keys
/// as columns in first-seen order and null where a key is missing. A string holding JSON (it
/// starts with `{` or `[`) is read as one of those; any other string is CSV with a header row
/// (RFC 4180: quoted fields, doubled quotes, embedded newlines), where an empty field is null and
/// every other field stays a string.
///
/// # Errors
///
/// Returns a [`FormatError`] naming what is wrong when `data` has another shape, a row does not
/// match the schema, the text does not parse, or the dataset exceeds 1,000 columns or 5,000,000
/// cells.
pub(crate) fn parse_dataset(data: &Value) -> Result<Dataset, FormatError> {
    match data {
        Value::String(text) => parse_text(text),
        other => parse_structured(other),
    }
}

fn parse_structured(data: &Value) -> Result<Dataset, FormatError> {
    match data {
        Value::Object(object) => parse_result_object(object),
        Value::Array(items) => parse_row_objects(items),
        other => Err(FormatError::UnsupportedData { found: describe_value(other) }),
    }
}

fn parse_text(text: &str) -> Result<Dataset, FormatError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(FormatError::UnsupportedData { found: "an empty string" });
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: Value = serde_json::from_str(trimmed)
            .map_err(|error| FormatError::InvalidJson { reason: error.to_string() })?;
        return parse_structured(&value);
    }
    parse_csv(text)
}

fn parse_result_object(object: &Map<String, Value>) -> Result<Dataset, FormatError> {
    let invalid = |reason: String| FormatError::InvalidResultObject { reason };
    let schema = match object.get("schema").or_else(|| object.get("columns")) {
        Some(Value::Array(schema)) => schema,
        Some(other) => return Err(invalid(format!("`schema` is {}", describe_value(other)))),
        None => return Err(invalid("the object has no `schema`".to_owned())),
    };
    let rows = match object.get("rows") {
        Some(Value::Array(rows)) => rows,
        Some(other) => return Err(invalid(format!("`rows` is {}", describe_value(other)))),
        None => return Err(invalid("the object has no `rows`".to_owned())),
    };
    let columns = schema
        .iter()
        .enumerate()
        .map(|(index, entry)| match entry {
            Value::String(name) => Ok(Column { name: name.clone(), type_name: None }),
            Value::Object(field) => match field.get("name") {
                Some(Value::String(name)) => Ok(Column {
                    name: name.clone(),
                    type_name: field.get("type").and_then(Value::as_str).map(str::to_owned),
                }),
                _ => Err(invalid(format!("`schema[{index}]` has no string `name`"))),
            },
            other => Err(invalid(format!("`schema[{index}]` is {}", describe_value(other)))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    check_size(rows.len(), columns.len())?;
    let rows = rows
        .iter()
        .enumerate()
        .map(|(index, row)| match row {
            Value::Array(values) if values.len() == columns.len() => Ok(values.clone()),
            Value::Array(values) => {
                Err(FormatError::RowWidth { index, found: values.len(), expected: columns.len() })
            }
            Value::Object(values) => Ok(columns
                .iter()
                .map(|column| values.get(&column.name).cloned().unwrap_or(Value::Null))
                .collect()),
            other => Err(invalid(format!("`rows[{index}]` is {}", describe_value(other)))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Dataset { columns, rows })
}

fn parse_row_objects(items: &[Value]) -> Result<Dataset, FormatError> {
    let mut names: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut objects = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Value::Object(object) = item else {
            return Err(FormatError::RowNotObject { index, found: describe_value(item) });
        };
        for key in object.keys() {
            if seen.insert(key.as_str()) {
                names.push(key.as_str());
            }
        }
        objects.push(object);
    }
    check_size(objects.len(), names.len())?;
    let rows = objects
        .iter()
        .map(|object| {
            names.iter().map(|name| object.get(*name).cloned().unwrap_or(Value::Null)).collect()
        })
        .collect();
    let columns =
        names.iter().map(|name| Column { name: (*name).to_owned(), type_name: None }).collect();
    Ok(Dataset { columns, rows })
}

fn parse_csv(text: &str) -> Result<Dataset, FormatError> {
    let invalid = |reason: String| FormatError::InvalidCsv { reason };
    let mut reader =
        csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|error| invalid(error.to_string()))?.clone();
    if headers.is_empty() {
        return Err(invalid("there is no header row".to_owned()));
    }
    check_size(0, headers.len())?;
    let columns =
        headers.iter().map(|name| Column { name: name.to_owned(), type_name: None }).collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|error| invalid(error.to_string()))?;
        if record.len() != headers.len() {
            let line = record.position().map_or(0, csv::Position::line);
            return Err(invalid(format!(
                "the record on line {line} has {} but the header has {}",
                counted(record.len(), "field", "fields"),
                headers.len()
            )));
        }
        check_size(rows.len() + 1, headers.len())?;
        rows.push(record.iter().map(csv_field).collect());
    }
    Ok(Dataset { columns, rows })
}

/// A CSV field as a value: empty is null (that is how [`csv_text`] writes null), anything else
/// stays a string.
fn csv_field(field: &str) -> Value {
    if field.is_empty() { Value::Null } else { Value::String(field.to_owned()) }
}

fn check_size(rows: usize, columns: usize) -> Result<(), FormatError> {
    if columns > MAX_COLUMNS || rows.saturating_mul(columns) > MAX_CELLS {
        return Err(FormatError::TooLarge { rows, columns });
    }
    Ok(())
}

fn describe_value(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Renders the dataset as a GitHub-flavoured Markdown table.
///
/// Numeric columns are right-aligned (`---:`). In cells, `\` and `|` are escaped, line breaks
/// become `<br>`, other control characters become spaces, null is empty and nested JSON is shown
/// as its JSON text. A dataset without columns gives an empty string; one without rows gives the
/// header alone.
pub(crate) fn markdown_table(data: &Dataset) -> String {
    if data.columns.is_empty() {
        return String::new();
    }
    let mut out = String::from("|");
    for column in &data.columns {
        out.push(' ');
        push_markdown_cell(&mut out, &column.name);
        out.push_str(" |");
    }
    out.push_str("\n|");
    for (index, column) in data.columns.iter().enumerate() {
        let numeric = column_kind(data, index, column) == ColumnKind::Number;
        out.push_str(if numeric { " ---: |" } else { " --- |" });
    }
    out.push('\n');
    for row in &data.rows {
        out.push('|');
        for index in 0..data.columns.len() {
            out.push(' ');
            push_markdown_cell(&mut out, &cell_text(cell(row, index)));
            out.push_str(" |");
        }
        out.push('\n');
    }
    out
}

fn push_markdown_cell(out: &mut String, text: &str) {
    let mut chars = text.chars().peekable();
    while let Some(character) = chars.next() {
        match character {
            '\\' => out.push_str("\\\\"),
            '|' => out.push_str("\\|"),
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push_str("<br>");
            }
            '\n' => out.push_str("<br>"),
            control if control.is_control() => out.push(' '),
            other => out.push(other),
        }
    }
}

/// Renders the dataset as RFC 4180 CSV: a header row, CRLF line ends, and quotes around fields
/// that hold a comma, a quote, CR or LF (quotes inside doubled).
///
/// Null is an empty field (quoted as `""` when it is a row's only field, so the line is not
/// skipped as blank) and nested JSON is its JSON text. A dataset without columns gives an empty
/// string.
pub(crate) fn csv_text(data: &Dataset) -> String {
    let mut out = String::new();
    if data.columns.is_empty() {
        return out;
    }
    let width = data.columns.len();
    push_csv_record(&mut out, data.columns.iter().map(|column| Cow::from(column.name.as_str())));
    for row in &data.rows {
        push_csv_record(&mut out, (0..width).map(|index| cell_text(cell(row, index))));
    }
    out
}

fn push_csv_record<'a>(out: &mut String, fields: impl ExactSizeIterator<Item = Cow<'a, str>>) {
    let alone = fields.len() == 1;
    for (index, field) in fields.enumerate() {
        if index > 0 {
            out.push(',');
        }
        if field.contains([',', '"', '\r', '\n']) || (alone && field.is_empty()) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&field);
        }
    }
    out.push_str("\r\n");
}

/// Renders the dataset as a JSON array with one object per row.
///
/// Values are passed through unchanged. Keys are the column names, made unique: an empty name
/// becomes `column_N` (N counting from 1) and a repeated one gets `_2`, `_3`, ... appended, since
/// SQL happily returns two columns called `id`.
pub(crate) fn json_objects(data: &Dataset) -> Value {
    let names = unique_names(&data.columns);
    let rows = data.rows.iter().map(|row| {
        let object = names
            .iter()
            .enumerate()
            .map(|(index, name)| (name.clone(), cell(row, index).clone()))
            .collect::<Map<_, _>>();
        Value::Object(object)
    });
    Value::Array(rows.collect())
}

fn unique_names(columns: &[Column]) -> Vec<String> {
    let taken: HashSet<&str> = columns.iter().map(|column| column.name.as_str()).collect();
    let mut first_seen: HashSet<&str> = HashSet::new();
    let mut generated: HashSet<String> = HashSet::new();
    let mut names = Vec::with_capacity(columns.len());
    for (index, column) in columns.iter().enumerate() {
        if !column.name.is_empty() && first_seen.insert(column.name.as_str()) {
            names.push(column.name.clone());
            continue;
        }
        let base = if column.name.is_empty() {
            format!("column_{}", index + 1)
        } else {
            column.name.clone()
        };
        let mut candidate = base.clone();
        let mut suffix = 2;
        while taken.contains(candidate.as_str()) || generated.contains(&candidate) {
            candidate = format!("{base}_{suffix}");
            suffix += 1;
        }
        generated.insert(candidate.clone());
        names.push(candidate);
    }
    names
}

/// Computes deterministic statistics for every column.
///
/// The result is `{"row_count", "column_count", "columns": [...]}` where each column has `name`,
/// `type` (`number`, `text`, `boolean`, `date`, `mixed` or `empty`), `count` (non-null values),
/// `nulls`, `distinct` (by text), `min` and `max` (the original values, in the type's order; null
/// for `mixed` and `empty`), `mean` (numbers only) and `top_values`: up to five `{value, count}`,
/// the most frequent first and ties in the type's order. Strings holding numbers (a Postgres
/// `numeric` such as `"12.50"`) count as numbers when every non-null value of the column parses,
/// and ISO dates and timestamps count as dates. Strings longer than 200 characters are cut and
/// end with `…`.
pub(crate) fn summary(data: &Dataset) -> Value {
    let columns: Vec<Value> = data
        .columns
        .iter()
        .enumerate()
        .map(|(index, column)| column_summary(data, index, column))
        .collect();
    json!({
        "row_count": data.rows.len(),
        "column_count": data.columns.len(),
        "columns": columns,
    })
}

fn column_summary(data: &Dataset, index: usize, column: &Column) -> Value {
    let kind = column_kind(data, index, column);
    let present: Vec<(&Value, Cell)> = data
        .rows
        .iter()
        .map(|row| cell(row, index))
        .filter(|value| !value.is_null())
        .map(|value| (value, classify(value)))
        .collect();
    let nulls = data.rows.len() - present.len();

    let mut tallies: HashMap<Cow<'_, str>, (usize, usize)> = HashMap::new();
    for (position, (value, _)) in present.iter().enumerate() {
        tallies.entry(cell_text(value)).or_insert((0, position)).0 += 1;
    }
    let distinct = tallies.len();
    let mut ranked: Vec<(usize, usize)> = tallies.into_values().collect();
    ranked.sort_by(|(count_a, first_a), (count_b, first_b)| {
        count_b.cmp(count_a).then_with(|| compare_cells(kind, present[*first_a], present[*first_b]))
    });
    let top_values: Vec<Value> = ranked
        .iter()
        .take(MAX_TOP_VALUES)
        .map(|(count, first)| json!({"value": summary_value(present[*first].0), "count": count}))
        .collect();

    let (min, max) = if matches!(kind, ColumnKind::Mixed | ColumnKind::Empty) {
        (Value::Null, Value::Null)
    } else {
        let mut extremes =
            present.iter().copied().filter(|(_, cell)| typed_key(kind, *cell).0 == 0);
        let first = extremes.next();
        let (min, max) = extremes.fold((first, first), |(min, max), item| {
            let smaller = min.filter(|low| compare_cells(kind, *low, item).is_le());
            let larger = max.filter(|high| compare_cells(kind, *high, item).is_ge());
            (smaller.or(Some(item)), larger.or(Some(item)))
        });
        let as_value =
            |item: Option<(&Value, Cell)>| item.map_or(Value::Null, |i| summary_value(i.0));
        (as_value(min), as_value(max))
    };

    let mut summary = Map::new();
    summary.insert("name".to_owned(), Value::String(column.name.clone()));
    summary.insert("type".to_owned(), Value::String(kind.as_str().to_owned()));
    summary.insert("count".to_owned(), present.len().into());
    summary.insert("nulls".to_owned(), nulls.into());
    summary.insert("distinct".to_owned(), distinct.into());
    summary.insert("min".to_owned(), min);
    summary.insert("max".to_owned(), max);
    if kind == ColumnKind::Number {
        let numbers: Vec<f64> = present.iter().filter_map(|(_, cell)| cell.number()).collect();
        summary.insert("mean".to_owned(), number_value(mean(&numbers)));
    }
    summary.insert("top_values".to_owned(), Value::Array(top_values));
    Value::Object(summary)
}

/// Orders two non-null cells of a column of `kind`: cells of the column's type first, by number,
/// instant or truth value, then the others (`NaN`, `infinity`), then by text. The order is total
/// whatever the cells hold, which sorting needs.
fn compare_cells(
    kind: ColumnKind,
    (value_a, cell_a): (&Value, Cell),
    (value_b, cell_b): (&Value, Cell),
) -> Ordering {
    let (rank_a, key_a) = typed_key(kind, cell_a);
    let (rank_b, key_b) = typed_key(kind, cell_b);
    rank_a
        .cmp(&rank_b)
        .then(key_a.total_cmp(&key_b))
        .then_with(|| cell_text(value_a).cmp(&cell_text(value_b)))
}

/// Whether a cell has its column's type (0) or not (1), and its value as a sort key.
fn typed_key(kind: ColumnKind, cell: Cell) -> (u8, f64) {
    match (kind, cell) {
        (ColumnKind::Number, Cell::Number(number)) => (0, number),
        (ColumnKind::Date, Cell::Date(instant)) => (0, instant.millis as f64),
        (ColumnKind::Boolean, Cell::Boolean(truth)) => (0, f64::from(u8::from(truth))),
        (ColumnKind::Text, _) => (0, 0.0),
        _ => (1, 0.0),
    }
}

fn summary_value(value: &Value) -> Value {
    match value {
        Value::String(text) => match truncate_chars(text, MAX_SUMMARY_TEXT) {
            Cow::Borrowed(_) => value.clone(),
            Cow::Owned(cut) => Value::String(cut),
        },
        Value::Array(_) | Value::Object(_) => {
            let text = value.to_string();
            match truncate_chars(&text, MAX_SUMMARY_TEXT) {
                Cow::Borrowed(_) => value.clone(),
                Cow::Owned(cut) => Value::String(cut),
            }
        }
        other => other.clone(),
    }
}

/// The arithmetic mean, without overflowing when the values are near `f64::MAX`.
fn mean(numbers: &[f64]) -> f64 {
    if numbers.is_empty() {
        return f64::NAN;
    }
    let count = numbers.len() as f64;
    let plain = numbers.iter().sum::<f64>() / count;
    if plain.is_finite() { plain } else { numbers.iter().map(|number| number / count).sum() }
}

fn number_value(number: f64) -> Value {
    Number::from_f64(number).map_or(Value::Null, Value::Number)
}

/// Draws the dataset as a chart, choosing the kind from the column types.
///
/// Column types are inferred as in [`summary`]; the first column of each type is used. The
/// rules, in order:
/// - a date column and a numeric column give a **line** chart over time, the values summed per
///   instant and sorted by time;
/// - a text (or boolean, or mixed) column and a numeric column give a horizontal **bar** chart,
///   the values summed per category and the 30 largest sums shown (the title says so when more
///   categories exist);
/// - two numeric columns give a **scatter** chart of the second against the first;
/// - a single numeric column gives a **histogram** of 20 equal-width bins.
///
/// Rows with a null in a plotted column, and numbers beyond ±1e250, are left out. Line and
/// scatter charts plot at most 5,000 points, sampled evenly (the description says so). The
/// Vega-Lite spec holds the plotted values inline (histograms as pre-computed bins); the PNG is
/// 800×500 pixels.
///
/// # Errors
///
/// Returns [`FormatError::EmptyDataset`] without rows, [`FormatError::NotPlottable`] when no
/// combination above exists (for instance only text columns), [`FormatError::NoPlottableRows`]
/// when the chosen columns are never filled in the same row, and [`FormatError::Render`] when
/// drawing or encoding fails.
pub(crate) fn chart(data: &Dataset) -> Result<Chart, FormatError> {
    if data.rows.is_empty() {
        return Err(FormatError::EmptyDataset);
    }
    let kinds: Vec<ColumnKind> = data
        .columns
        .iter()
        .enumerate()
        .map(|(index, column)| column_kind(data, index, column))
        .collect();
    let plan = plan_chart(&kinds)
        .ok_or_else(|| FormatError::NotPlottable { found: describe_columns(data, &kinds) })?;
    let names = unique_names(&data.columns);
    let figure = build_figure(data, &names, plan)?;
    let vega_lite = vega_lite_spec(&figure);
    let png = render_png(&figure)?;
    Ok(Chart { kind: figure.kind(), vega_lite, png })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChartPlan {
    Line { x: usize, y: usize },
    Bar { category: usize, value: usize },
    Scatter { x: usize, y: usize },
    Histogram { value: usize },
}

fn plan_chart(kinds: &[ColumnKind]) -> Option<ChartPlan> {
    let numeric: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter_map(|(index, kind)| (*kind == ColumnKind::Number).then_some(index))
        .collect();
    let temporal = kinds.iter().position(|kind| *kind == ColumnKind::Date);
    let categorical = kinds.iter().position(|kind| {
        matches!(kind, ColumnKind::Text | ColumnKind::Boolean | ColumnKind::Mixed)
    });
    match (temporal, categorical, numeric.as_slice()) {
        (Some(x), _, [y, ..]) => Some(ChartPlan::Line { x, y: *y }),
        (None, Some(category), [value, ..]) => Some(ChartPlan::Bar { category, value: *value }),
        (None, None, [x, y, ..]) => Some(ChartPlan::Scatter { x: *x, y: *y }),
        (None, None, [value]) => Some(ChartPlan::Histogram { value: *value }),
        _ => None,
    }
}

fn describe_columns(data: &Dataset, kinds: &[ColumnKind]) -> String {
    const LISTED: usize = 10;
    let mut listed: Vec<String> = data
        .columns
        .iter()
        .zip(kinds)
        .take(LISTED)
        .map(|(column, kind)| format!("{} ({})", quoted(&column.name), kind.as_str()))
        .collect();
    if data.columns.len() > LISTED {
        listed.push(format!("and {} more", data.columns.len() - LISTED));
    }
    if listed.is_empty() { "no columns".to_owned() } else { listed.join(", ") }
}

/// What a chart shows, independent of how it is drawn.
struct Figure {
    title: String,
    description: String,
    x_name: String,
    y_name: String,
    series: Series,
}

enum Series {
    Line { points: Vec<(f64, f64)>, date_only: bool },
    Bar { bars: Vec<(String, f64)> },
    Scatter { points: Vec<(f64, f64)> },
    Histogram { bins: Vec<Bin> },
}

struct Bin {
    start: f64,
    end: f64,
    count: usize,
}

impl Figure {
    fn kind(&self) -> ChartKind {
        match self.series {
            Series::Line { .. } => ChartKind::Line,
            Series::Bar { .. } => ChartKind::Bar,
            Series::Scatter { .. } => ChartKind::Scatter,
            Series::Histogram { .. } => ChartKind::Histogram,
        }
    }
}

fn build_figure(data: &Dataset, names: &[String], plan: ChartPlan) -> Result<Figure, FormatError> {
    let name = |index: usize| names.get(index).cloned().unwrap_or_default();
    let no_rows = |columns: &[usize]| {
        let listed: Vec<String> = columns.iter().map(|index| quoted(&name(*index))).collect();
        FormatError::NoPlottableRows { columns: listed.join(" and ") }
    };
    match plan {
        ChartPlan::Line { x, y } => {
            let mut sums: BTreeMap<i64, f64> = BTreeMap::new();
            let mut date_only = true;
            let mut rows = 0usize;
            for row in &data.rows {
                let (Cell::Date(instant), Some(value)) =
                    (classify(cell(row, x)), plottable(classify(cell(row, y))))
                else {
                    continue;
                };
                date_only &= instant.date_only;
                rows += 1;
                *sums.entry(instant.millis).or_insert(0.0) += value;
            }
            if sums.is_empty() {
                return Err(no_rows(&[x, y]));
            }
            let instants = sums.len();
            let points = sample_evenly(sums.into_iter().map(|(t, v)| (t as f64, v)).collect());
            let (x_name, y_name) = (name(x), name(y));
            let summed = rows > instants;
            let title = if summed {
                format!("sum of {} per {}", short(&y_name), short(&x_name))
            } else {
                format!("{} over {}", short(&y_name), short(&x_name))
            };
            let mut description =
                format!("Line chart of {} over {}", quoted(&y_name), quoted(&x_name));
            if summed {
                description.push_str(&format!(
                    ", summing the {rows} rows into one value per instant ({instants} instants)"
                ));
            }
            description.push_str(&left_out_note(data.rows.len(), rows));
            description.push_str(&sampling_note(instants, points.len()));
            Ok(Figure {
                title,
                description,
                x_name,
                y_name,
                series: Series::Line { points, date_only },
            })
        }
        ChartPlan::Bar { category, value } => {
            let mut sums: HashMap<Cow<'_, str>, f64> = HashMap::new();
            let mut rows = 0usize;
            for row in &data.rows {
                let label = cell(row, category);
                let Some(number) = plottable(classify(cell(row, value))) else {
                    continue;
                };
                if label.is_null() {
                    continue;
                }
                rows += 1;
                *sums.entry(cell_text(label)).or_insert(0.0) += number;
            }
            if sums.is_empty() {
                return Err(no_rows(&[category, value]));
            }
            let total = sums.len();
            let mut bars: Vec<(String, f64)> =
                sums.into_iter().map(|(label, sum)| (label.into_owned(), sum)).collect();
            bars.sort_by(|(label_a, sum_a), (label_b, sum_b)| {
                sum_b.total_cmp(sum_a).then_with(|| label_a.cmp(label_b))
            });
            bars.truncate(MAX_BAR_CATEGORIES);
            let (x_name, y_name) = (name(category), name(value));
            let summed = rows > total;
            let mut title = if summed {
                format!("sum of {} by {}", short(&y_name), short(&x_name))
            } else {
                format!("{} by {}", short(&y_name), short(&x_name))
            };
            let mut description =
                format!("Bar chart of {} by {}", quoted(&y_name), quoted(&x_name));
            if summed {
                description.push_str(&format!(", summed per category over {rows} rows"));
            }
            description.push_str(&left_out_note(data.rows.len(), rows));
            if total > bars.len() {
                title.push_str(&format!(" (top {} of {total})", bars.len()));
                description.push_str(&format!(
                    "; only the {} largest of {total} categories are shown",
                    bars.len()
                ));
            }
            Ok(Figure { title, description, x_name, y_name, series: Series::Bar { bars } })
        }
        ChartPlan::Scatter { x, y } => {
            let all: Vec<(f64, f64)> = data
                .rows
                .iter()
                .filter_map(|row| {
                    let x = plottable(classify(cell(row, x)))?;
                    let y = plottable(classify(cell(row, y)))?;
                    Some((x, y))
                })
                .collect();
            if all.is_empty() {
                return Err(no_rows(&[x, y]));
            }
            let available = all.len();
            let points = sample_evenly(all);
            let (x_name, y_name) = (name(x), name(y));
            let title = format!("{} vs {}", short(&y_name), short(&x_name));
            let description = format!(
                "Scatter chart of {} against {}{}{}",
                quoted(&y_name),
                quoted(&x_name),
                left_out_note(data.rows.len(), available),
                sampling_note(available, points.len())
            );
            Ok(Figure { title, description, x_name, y_name, series: Series::Scatter { points } })
        }
        ChartPlan::Histogram { value } => {
            let values: Vec<f64> =
                data.rows.iter().filter_map(|row| plottable(classify(cell(row, value)))).collect();
            if values.is_empty() {
                return Err(no_rows(&[value]));
            }
            let bins = histogram_bins(&values);
            let x_name = name(value);
            let title = format!("distribution of {}", short(&x_name));
            let description = format!(
                "Histogram of {}: {} in {} of equal width{}",
                quoted(&x_name),
                counted(values.len(), "value", "values"),
                counted(bins.len(), "bin", "bins"),
                left_out_note(data.rows.len(), values.len())
            );
            let series = Series::Histogram { bins };
            Ok(Figure { title, description, x_name, y_name: "count".to_owned(), series })
        }
    }
}

/// A column name in backquotes for a message, cut to a readable length.
fn quoted(name: &str) -> String {
    format!("`{}`", truncate_chars(name, MAX_LABEL_CHARS))
}

fn plottable(cell: Cell) -> Option<f64> {
    cell.number().filter(|number| number.abs() <= MAX_PLOT_MAGNITUDE)
}

fn sample_evenly(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if points.len() <= MAX_CHART_POINTS {
        return points;
    }
    let step = points.len().div_ceil(MAX_CHART_POINTS);
    points.into_iter().step_by(step).collect()
}

fn left_out_note(rows: usize, used: usize) -> String {
    match rows.saturating_sub(used) {
        0 => String::new(),
        1 => "; 1 row with a null or unplottable value is left out".to_owned(),
        left_out => format!("; {left_out} rows with a null or unplottable value are left out"),
    }
}

fn counted(count: usize, singular: &str, plural: &str) -> String {
    format!("{count} {}", if count == 1 { singular } else { plural })
}

fn sampling_note(available: usize, plotted: usize) -> String {
    if plotted < available {
        format!("; {plotted} of {available} points are plotted, sampled evenly")
    } else {
        String::new()
    }
}

fn histogram_bins(values: &[f64]) -> Vec<Bin> {
    let (min, max) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| (low.min(*v), high.max(*v)));
    let width = (max - min) / HISTOGRAM_BINS as f64;
    if !(width > 0.0 && width.is_finite()) {
        return vec![Bin { start: min - 0.5, end: max + 0.5, count: values.len() }];
    }
    let mut counts = [0usize; HISTOGRAM_BINS];
    for value in values {
        let slot = ((value - min) / width).floor();
        let slot = if slot.is_finite() && slot > 0.0 { slot as usize } else { 0 };
        counts[slot.min(HISTOGRAM_BINS - 1)] += 1;
    }
    counts
        .iter()
        .enumerate()
        .map(|(index, count)| Bin {
            start: min + width * index as f64,
            end: if index + 1 == HISTOGRAM_BINS { max } else { min + width * (index + 1) as f64 },
            count: *count,
        })
        .collect()
}

fn vega_lite_spec(figure: &Figure) -> Value {
    let x_field = vega_field(&figure.x_name);
    let y_field = vega_field(&figure.y_name);
    let pair = |x: Value, y: Value| {
        let mut object = Map::new();
        object.insert(figure.x_name.clone(), x);
        object.insert(figure.y_name.clone(), y);
        Value::Object(object)
    };
    let (values, mark, encoding): (Vec<Value>, Value, Value) = match &figure.series {
        Series::Line { points, date_only } => (
            points
                .iter()
                .map(|(t, v)| pair(Value::String(format_instant(*t, *date_only)), number_value(*v)))
                .collect(),
            json!({"type": "line", "point": points.len() <= 100}),
            json!({
                "x": {"field": x_field, "type": "temporal", "title": figure.x_name},
                "y": {"field": y_field, "type": "quantitative", "title": figure.y_name},
            }),
        ),
        Series::Bar { bars } => (
            bars.iter()
                .map(|(label, v)| pair(Value::String(label.clone()), number_value(*v)))
                .collect(),
            json!("bar"),
            json!({
                "y": {"field": x_field, "type": "nominal", "sort": "-x", "title": figure.x_name},
                "x": {"field": y_field, "type": "quantitative", "title": figure.y_name},
            }),
        ),
        Series::Scatter { points } => (
            points.iter().map(|(x, y)| pair(number_value(*x), number_value(*y))).collect(),
            json!("point"),
            json!({
                "x": {"field": x_field, "type": "quantitative", "title": figure.x_name},
                "y": {"field": y_field, "type": "quantitative", "title": figure.y_name},
            }),
        ),
        Series::Histogram { bins } => (
            bins.iter()
                .map(|bin| {
                    json!({
                        "bin_start": number_value(bin.start),
                        "bin_end": number_value(bin.end),
                        "count": bin.count,
                    })
                })
                .collect(),
            json!("bar"),
            json!({
                "x": {
                    "field": "bin_start",
                    "bin": {"binned": true},
                    "type": "quantitative",
                    "title": figure.x_name,
                },
                "x2": {"field": "bin_end"},
                "y": {"field": "count", "type": "quantitative", "title": "count"},
            }),
        ),
    };
    json!({
        "$schema": VEGA_LITE_SCHEMA,
        "title": figure.title,
        "description": figure.description,
        "data": {"values": values},
        "mark": mark,
        "encoding": encoding,
    })
}

/// Escapes the characters Vega reads as a path into nested data, so a column called `a.b` is
/// one field and not `b` inside `a`.
fn vega_field(name: &str) -> String {
    let mut field = String::with_capacity(name.len());
    for character in name.chars() {
        if matches!(character, '\\' | '.' | '[' | ']' | '"' | '\'') {
            field.push('\\');
        }
        field.push(character);
    }
    field
}

type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;
type Canvas<'a> = DrawingArea<BitMapBackend<'a, RGBPixel>, Shift>;
type Plot<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b, RGBPixel>, Cartesian2d<TickedAxis, TickedAxis>>;

/// A linear axis whose ticks are given up front, so plotters' own tick search (which asserts
/// and loops on odd ranges) is never used.
#[derive(Debug, Clone)]
struct TickedAxis {
    low: f64,
    high: f64,
    ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, (start, end): (i32, i32)) -> i32 {
        let span = self.high - self.low;
        let ratio = if span > 0.0 { (value - self.low) / span } else { 0.5 };
        let pixel = f64::from(start) + ratio * (f64::from(end) - f64::from(start));
        // Out-of-range values land off the canvas; the clamp keeps the cast meaningful.
        if pixel.is_nan() { start } else { pixel.round().clamp(-1e6, 1e6) as i32 }
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() { Vec::new() } else { self.ticks.clone() }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.low..self.high
    }
}

fn render_png(figure: &Figure) -> Result<Vec<u8>, FormatError> {
    register_font()?;
    let mut pixels = vec![255u8; PNG_WIDTH as usize * PNG_HEIGHT as usize * 3];
    // Plotters is third-party drawing code with internal `expect`s; the inputs are sanitised
    // (finite, bounded, non-empty ranges), and this turns any panic left into an error instead
    // of taking the request down.
    let drawn = panic::catch_unwind(AssertUnwindSafe(|| draw_figure(figure, &mut pixels)));
    match drawn {
        Ok(Ok(())) => encode_png(&pixels),
        Ok(Err(reason)) => Err(FormatError::Render { reason }),
        Err(_) => Err(FormatError::Render { reason: "the plotting library failed".to_owned() }),
    }
}

fn register_font() -> Result<(), FormatError> {
    // Plotters keeps its fonts in a process-wide table; registering once is enough.
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let registered = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok()
    });
    if registered {
        Ok(())
    } else {
        Err(FormatError::Render { reason: "the embedded font could not be loaded".to_owned() })
    }
}

fn draw_figure(figure: &Figure, pixels: &mut [u8]) -> Result<(), String> {
    let backend =
        BitMapBackend::<RGBPixel>::with_buffer_and_format(pixels, (PNG_WIDTH, PNG_HEIGHT))
            .map_err(|error| error.to_string())?;
    let root = backend.into_drawing_area();
    let drawn = root.fill(&WHITE).and_then(|()| match &figure.series {
        Series::Line { points, .. } => draw_line(&root, figure, points),
        Series::Bar { bars } => draw_bars(&root, figure, bars),
        Series::Scatter { points } => draw_scatter(&root, figure, points),
        Series::Histogram { bins } => draw_histogram(&root, figure, bins),
    });
    drawn.and_then(|()| root.present()).map_err(|error| error.to_string())
}

/// One axis of a plot: its range, where its ticks go, how they read and what it shows.
struct Axis<'f> {
    low: f64,
    high: f64,
    ticks: Vec<f64>,
    label: Box<dyn Fn(&f64) -> String + 'f>,
    title: String,
    grid: bool,
}

impl Axis<'_> {
    /// A numeric axis over `low..high` with about `ticks` round ticks.
    fn numeric(low: f64, high: f64, ticks: usize, title: String) -> Axis<'static> {
        let ticks = nice_ticks(low, high, ticks);
        let format = number_format(&ticks);
        let label = Box::new(move |value: &f64| format_number(*value, format));
        Axis { low, high, ticks, label, title, grid: true }
    }
}

/// Draws the title, axes, ticks and grid, and returns the plot to draw the series in. Ticks are
/// always given explicitly: plotters' own tick search is never asked to cope with odd ranges.
fn plot_area<'a, 'b>(
    root: &'a Canvas<'b>,
    title: &str,
    x: Axis<'_>,
    y: Axis<'_>,
    y_label_area: u32,
) -> Result<Plot<'a, 'b>, DrawError> {
    let mut plot = ChartBuilder::on(root)
        .caption(short_title(title), (FONT_FAMILY, 22))
        .margin(16)
        .margin_right(40)
        .x_label_area_size(44)
        .y_label_area_size(y_label_area)
        .build_cartesian_2d(
            TickedAxis { low: x.low, high: x.high, ticks: x.ticks },
            TickedAxis { low: y.low, high: y.high, ticks: y.ticks },
        )?;
    let mut mesh = plot.configure_mesh();
    mesh.light_line_style(WHITE)
        .bold_line_style(GRID_COLOR)
        .x_label_formatter(&*x.label)
        .y_label_formatter(&*y.label)
        .label_style((FONT_FAMILY, 13))
        .axis_desc_style((FONT_FAMILY, 15))
        .x_desc(short(&x.title))
        .y_desc(short(&y.title));
    if !x.grid {
        mesh.disable_x_mesh();
    }
    if !y.grid {
        mesh.disable_y_mesh();
    }
    mesh.draw()?;
    Ok(plot)
}

fn draw_line(root: &Canvas<'_>, figure: &Figure, points: &[(f64, f64)]) -> Result<(), DrawError> {
    let (x_min, x_max) = bounds(points.iter().map(|point| point.0));
    let (x_low, x_high) = if x_max - x_min < 1_000.0 {
        (x_min - MILLIS_PER_DAY as f64, x_max + MILLIS_PER_DAY as f64)
    } else {
        padded_range(x_min, x_max, false)
    };
    let (ticks, step) = time_ticks(x_low, x_high);
    let x = Axis {
        low: x_low,
        high: x_high,
        ticks,
        label: Box::new(move |millis: &f64| format_time_label(*millis, step)),
        title: figure.x_name.clone(),
        grid: true,
    };
    let (y_min, y_max) = bounds(points.iter().map(|point| point.1));
    let (y_low, y_high) = padded_range(y_min, y_max, false);
    let y = Axis::numeric(y_low, y_high, 8, figure.y_name.clone());
    let mut plot = plot_area(root, &figure.title, x, y, 84)?;
    if points.len() <= 100 {
        plot.draw_series(points.iter().map(|point| Circle::new(*point, 3, BAR_COLOR.filled())))?;
    }
    plot.draw_series(std::iter::once(PathElement::new(
        points.to_vec(),
        BAR_COLOR.stroke_width(2),
    )))?;
    Ok(())
}

fn draw_bars(root: &Canvas<'_>, figure: &Figure, bars: &[(String, f64)]) -> Result<(), DrawError> {
    let (low, high) = bounds(bars.iter().map(|bar| bar.1));
    let (x_low, x_high) = padded_range(low, high, true);
    let x = Axis::numeric(x_low, x_high, 8, figure.y_name.clone());
    // Bar `rank` (0 is the largest) sits in slot `count - 1 - rank`, so the largest is on top.
    let count = bars.len();
    let labels: Vec<String> = bars.iter().map(|bar| short_label(&bar.0)).collect();
    let label = |slot: &f64| {
        let rank = (count as f64 - 1.0 - slot).round();
        let exact = (count as f64 - 1.0 - slot - rank).abs() < 1e-6 && rank >= 0.0;
        let found = if exact { labels.get(rank as usize) } else { None };
        found.cloned().unwrap_or_default()
    };
    let slots = (0..count).map(|slot| slot as f64).collect();
    let y = Axis {
        low: -0.5,
        high: count as f64 - 0.5,
        ticks: slots,
        label: Box::new(label),
        title: figure.x_name.clone(),
        grid: false,
    };
    let longest = labels.iter().map(|label| label.chars().count()).max().unwrap_or(0);
    let label_area = (longest as u32 * 7 + 48).clamp(80, 260);
    let mut plot = plot_area(root, &figure.title, x, y, label_area)?;
    // About 380 pixels are left for the bars: thin gaps when there are many, at most 48 pixels
    // of bar when there are few.
    let slot_pixels = 380 / count.max(1) as u32;
    let margin = (slot_pixels * 15 / 100).max(slot_pixels.saturating_sub(48) / 2).max(1);
    plot.draw_series(bars.iter().enumerate().map(|(rank, (_, value))| {
        let slot = (count - 1 - rank) as f64;
        let mut bar = Rectangle::new([(0.0, slot - 0.5), (*value, slot + 0.5)], BAR_COLOR.filled());
        bar.set_margin(margin, margin, 0, 0);
        bar
    }))?;
    Ok(())
}

fn draw_scatter(
    root: &Canvas<'_>,
    figure: &Figure,
    points: &[(f64, f64)],
) -> Result<(), DrawError> {
    let (x_min, x_max) = bounds(points.iter().map(|point| point.0));
    let (y_min, y_max) = bounds(points.iter().map(|point| point.1));
    let (x_low, x_high) = padded_range(x_min, x_max, false);
    let (y_low, y_high) = padded_range(y_min, y_max, false);
    let x = Axis::numeric(x_low, x_high, 8, figure.x_name.clone());
    let y = Axis::numeric(y_low, y_high, 8, figure.y_name.clone());
    let mut plot = plot_area(root, &figure.title, x, y, 84)?;
    let style = BAR_COLOR.mix(0.6).filled();
    plot.draw_series(points.iter().map(|point| Circle::new(*point, 3, style)))?;
    Ok(())
}

fn draw_histogram(root: &Canvas<'_>, figure: &Figure, bins: &[Bin]) -> Result<(), DrawError> {
    let (x_min, _) = bounds(bins.iter().map(|bin| bin.start));
    let (_, x_max) = bounds(bins.iter().map(|bin| bin.end));
    let (x_low, x_high) = padded_range(x_min, x_max, false);
    let tallest = bins.iter().map(|bin| bin.count).max().unwrap_or(0) as f64;
    let (_, y_high) = padded_range(0.0, tallest, true);
    let mut x = Axis::numeric(x_low, x_high, 8, figure.x_name.clone());
    x.grid = false;
    let y = Axis::numeric(0.0, y_high, 8, "count".to_owned());
    let mut plot = plot_area(root, &figure.title, x, y, 84)?;
    plot.draw_series(bins.iter().map(|bin| {
        let mut bar =
            Rectangle::new([(bin.start, 0.0), (bin.end, bin.count as f64)], BAR_COLOR.filled());
        bar.set_margin(0, 0, 1, 1);
        bar
    }))?;
    Ok(())
}

/// Round tick values (multiples of 1, 2 or 5 times a power of ten) within `low..=high`, about
/// `target` of them; none when the range is degenerate.
fn nice_ticks(low: f64, high: f64, target: usize) -> Vec<f64> {
    let span = high - low;
    if !(span > 0.0 && span.is_finite()) || target == 0 {
        return Vec::new();
    }
    let magnitude = 10f64.powf((span / target as f64).log10().floor());
    let Some(step) = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|step| *step > 0.0 && span / step <= target as f64)
    else {
        return Vec::new();
    };
    ticks_every(low, high, step)
}

/// The multiples of `step` within `low..=high`, or none when there would be more than 100.
fn ticks_every(low: f64, high: f64, step: f64) -> Vec<f64> {
    let (first, last) = ((low / step).ceil(), (high / step).floor());
    if !(first.is_finite() && last.is_finite() && first <= last && last - first <= 100.0) {
        return Vec::new();
    }
    (0..=(last - first) as usize).map(|index| (first + index as f64) * step).collect()
}

/// The spacing of ticks on a time axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimeStep {
    Millis(i64),
    Months(i64),
    Years(i64),
}

/// Ticks on calendar boundaries (whole seconds, minutes, hours, days, months or years, in UTC)
/// within `low..=high` milliseconds, at most seven of them, and the step they use.
fn time_ticks(low: f64, high: f64) -> (Vec<f64>, TimeStep) {
    const SECOND: i64 = 1_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    const FIXED: [i64; 20] = [
        SECOND,
        2 * SECOND,
        5 * SECOND,
        10 * SECOND,
        15 * SECOND,
        30 * SECOND,
        MINUTE,
        2 * MINUTE,
        5 * MINUTE,
        10 * MINUTE,
        15 * MINUTE,
        30 * MINUTE,
        HOUR,
        2 * HOUR,
        3 * HOUR,
        6 * HOUR,
        12 * HOUR,
        MILLIS_PER_DAY,
        2 * MILLIS_PER_DAY,
        7 * MILLIS_PER_DAY,
    ];
    const MAX_TICKS: f64 = 7.0;
    let span = high - low;
    if !(span > 0.0 && span.is_finite() && low.abs() < 1e15 && high.abs() < 1e15) {
        return (Vec::new(), TimeStep::Millis(MILLIS_PER_DAY));
    }
    if let Some(step) = FIXED.into_iter().find(|step| span / *step as f64 <= MAX_TICKS) {
        return (ticks_every(low, high, step as f64), TimeStep::Millis(step));
    }
    let month = 30.44 * MILLIS_PER_DAY as f64;
    let step = [1, 2, 3, 6]
        .into_iter()
        .map(TimeStep::Months)
        .find(|step| matches!(step, TimeStep::Months(months) if span / (*months as f64 * month) <= MAX_TICKS))
        .unwrap_or_else(|| {
            let years = span / (12.0 * month) / MAX_TICKS;
            let magnitude = 10f64.powf(years.log10().floor().max(0.0));
            let factor = [1.0, 2.0, 5.0, 10.0].into_iter().find(|f| f * magnitude >= years).unwrap_or(10.0);
            TimeStep::Years((factor * magnitude) as i64)
        });
    let months_per_tick = match step {
        TimeStep::Months(months) => months,
        TimeStep::Years(years) => years.saturating_mul(12),
        TimeStep::Millis(_) => 1,
    }
    .max(1);
    let (year, month_of_year, _) = civil_from_days((low as i64).div_euclid(MILLIS_PER_DAY));
    // Count months from year 0 and start at the first multiple of the step, so that ticks land
    // on round months and years.
    let mut index = (year * 12 + month_of_year - 1).div_euclid(months_per_tick) * months_per_tick;
    let mut ticks = Vec::new();
    for _ in 0..100 {
        let (tick_year, tick_month) = (index.div_euclid(12), index.rem_euclid(12) + 1);
        let millis = (days_from_civil(tick_year, tick_month, 1) * MILLIS_PER_DAY) as f64;
        if millis > high {
            break;
        }
        if millis >= low {
            ticks.push(millis);
        }
        index += months_per_tick;
    }
    (ticks, step)
}

/// The smallest and largest of finite values, or `(0, 0)` when there are none.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) = values
        .filter(|value| value.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| (low.min(v), high.max(v)));
    if low <= high { (low, high) } else { (0.0, 0.0) }
}

/// An axis range around `min..max` with 5% padding, widened when it would be empty or too thin
/// for the axis arithmetic; with `include_zero` it also reaches zero (and is not padded there).
fn padded_range(min: f64, max: f64, include_zero: bool) -> (f64, f64) {
    let (mut low, mut high) = if include_zero { (min.min(0.0), max.max(0.0)) } else { (min, max) };
    let span = high - low;
    let magnitude = low.abs().max(high.abs());
    if span <= magnitude * 1e-9 {
        let pad = if magnitude > 1e-200 { magnitude * 0.05 } else { 1.0 };
        low -= pad;
        high += pad;
    } else {
        let pad = span * 0.05;
        if !(include_zero && low == 0.0) {
            low -= pad;
        }
        if !(include_zero && high == 0.0) {
            high += pad;
        }
    }
    (low, high)
}

/// How the ticks of a numeric axis are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumberFormat {
    /// Fixed-point with this many decimals.
    Decimals(usize),
    /// Scientific notation with this many digits after the point.
    Scientific(usize),
}

/// Picks a format that tells neighbouring ticks apart: as many decimals as the step between
/// them needs, or scientific notation when they are very large or very small.
fn number_format(ticks: &[f64]) -> NumberFormat {
    let largest = ticks.iter().fold(0.0f64, |largest, tick| largest.max(tick.abs()));
    let step = ticks
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).abs())
        .filter(|step| *step > 0.0)
        .fold(f64::INFINITY, f64::min);
    let step = if step.is_finite() { step } else { largest.max(1.0) };
    let exponent = |value: f64| value.log10().floor();
    if largest >= 1e7 || (largest > 0.0 && largest < 1e-3) || step < 1e-6 {
        NumberFormat::Scientific((exponent(largest) - exponent(step)).clamp(0.0, 6.0) as usize)
    } else {
        NumberFormat::Decimals((-exponent(step)).clamp(0.0, 6.0) as usize)
    }
}

/// Writes a tick value in `format`; zero is `0` (or `0.00`), never `-0` or `0e0`.
fn format_number(value: f64, format: NumberFormat) -> String {
    let text = match format {
        NumberFormat::Decimals(decimals) => format!("{value:.decimals$}"),
        NumberFormat::Scientific(digits) => format!("{value:.digits$e}"),
    };
    let unsigned = text.strip_prefix('-').unwrap_or(&text);
    if !unsigned.parse::<f64>().is_ok_and(|number| number == 0.0) {
        return text;
    }
    match format {
        NumberFormat::Decimals(_) => unsigned.to_owned(),
        NumberFormat::Scientific(_) => "0".to_owned(),
    }
}

/// A tick label on a time axis, as precise as the step between ticks.
fn format_time_label(millis: f64, step: TimeStep) -> String {
    let Some((date, time)) = split_instant(millis) else {
        return String::new();
    };
    let part =
        |text: &str, range: std::ops::Range<usize>| text.get(range).unwrap_or_default().to_owned();
    match step {
        TimeStep::Years(_) => part(&date, 0..4),
        TimeStep::Months(_) => part(&date, 0..7),
        TimeStep::Millis(step) if step >= MILLIS_PER_DAY => date,
        TimeStep::Millis(step) if step >= 60_000 => {
            format!("{} {}", part(&date, 5..10), part(&time, 0..5))
        }
        TimeStep::Millis(_) => part(&time, 0..8),
    }
}

/// Formats milliseconds since the Unix epoch as ISO 8601 in UTC (`YYYY-MM-DD` when `date_only`).
fn format_instant(millis: f64, date_only: bool) -> String {
    match split_instant(millis) {
        Some((date, _)) if date_only => date,
        Some((date, time)) => format!("{date}T{time}Z"),
        None => String::new(),
    }
}

/// Splits an instant into `YYYY-MM-DD` and `HH:MM:SS` (with `.mmm` when not whole seconds).
fn split_instant(millis: f64) -> Option<(String, String)> {
    if !millis.is_finite() || millis.abs() > 1e15 {
        return None;
    }
    let millis = millis.floor() as i64;
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (of_day / 3_600_000, of_day / 60_000 % 60);
    let (second, milli) = (of_day / 1_000 % 60, of_day % 1_000);
    let date = format!("{year:04}-{month:02}-{day:02}");
    let time = if milli == 0 {
        format!("{hour:02}:{minute:02}:{second:02}")
    } else {
        format!("{hour:02}:{minute:02}:{second:02}.{milli:03}")
    };
    Some((date, time))
}

fn short(name: &str) -> String {
    truncate_chars(name, MAX_LABEL_CHARS).into_owned()
}

fn short_title(title: &str) -> String {
    truncate_chars(title, MAX_TITLE_CHARS).into_owned()
}

/// A category label for the bar chart: control characters as spaces, and long labels cut in
/// the middle, since categories often differ only at the end.
fn short_label(label: &str) -> String {
    let count = label.chars().count();
    let cut: String = if count <= MAX_LABEL_CHARS {
        label.to_owned()
    } else {
        let head = (MAX_LABEL_CHARS - 1) / 2;
        let tail = MAX_LABEL_CHARS - 1 - head;
        let mut cut: String = label.chars().take(head).collect();
        cut.push('…');
        cut.extend(label.chars().skip(count - tail));
        cut
    };
    cut.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// Cuts `text` to `limit` characters, the last being `…`, when it is longer.
fn truncate_chars(text: &str, limit: usize) -> Cow<'_, str> {
    match text.char_indices().nth(limit) {
        None => Cow::Borrowed(text),
        Some(_) => {
            let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
            cut.push('…');
            Cow::Owned(cut)
        }
    }
}

fn encode_png(pixels: &[u8]) -> Result<Vec<u8>, FormatError> {
    let failed = |error: png::EncodingError| FormatError::Render { reason: error.to_string() };
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, PNG_WIDTH, PNG_HEIGHT);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Balanced);
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(pixels).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(bytes)
}

/// The type a column's values share, as reported by [`summary`] and used to pick a chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnKind {
    Number,
    Text,
    Boolean,
    Date,
    Mixed,
    Empty,
}

impl ColumnKind {
    fn as_str(self) -> &'static str {
        match self {
            ColumnKind::Number => "number",
            ColumnKind::Text => "text",
            ColumnKind::Boolean => "boolean",
            ColumnKind::Date => "date",
            ColumnKind::Mixed => "mixed",
            ColumnKind::Empty => "empty",
        }
    }
}

/// What one value is, read leniently: strings holding numbers, ISO dates or `true`/`false`
/// count as those.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    Null,
    Number(f64),
    Date(Timestamp),
    Boolean(bool),
    /// `NaN` or an infinity, as Postgres writes them for `float8`, `numeric` and dates.
    NonFinite,
    Text,
    Nested,
}

impl Cell {
    fn number(self) -> Option<f64> {
        match self {
            Cell::Number(number) => Some(number),
            _ => None,
        }
    }
}

/// A point in time in milliseconds since the Unix epoch (UTC), and whether it was written as a
/// bare date.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Timestamp {
    millis: i64,
    date_only: bool,
}

fn cell(row: &[Value], index: usize) -> &Value {
    row.get(index).unwrap_or(&NULL)
}

fn cell_text(value: &Value) -> Cow<'_, str> {
    match value {
        Value::Null => Cow::Borrowed(""),
        Value::String(text) => Cow::Borrowed(text),
        Value::Bool(true) => Cow::Borrowed("true"),
        Value::Bool(false) => Cow::Borrowed("false"),
        Value::Number(number) => Cow::Owned(number.to_string()),
        Value::Array(_) | Value::Object(_) => Cow::Owned(value.to_string()),
    }
}

fn classify(value: &Value) -> Cell {
    match value {
        Value::Null => Cell::Null,
        Value::Bool(truth) => Cell::Boolean(*truth),
        Value::Number(number) => {
            number.as_f64().filter(|n| n.is_finite()).map_or(Cell::Text, Cell::Number)
        }
        Value::String(text) => {
            if let Some(number) = parse_number(text) {
                Cell::Number(number)
            } else if is_non_finite(text) {
                Cell::NonFinite
            } else if let Some(instant) = parse_timestamp(text) {
                Cell::Date(instant)
            } else if text.eq_ignore_ascii_case("true") {
                Cell::Boolean(true)
            } else if text.eq_ignore_ascii_case("false") {
                Cell::Boolean(false)
            } else {
                Cell::Text
            }
        }
        Value::Array(_) | Value::Object(_) => Cell::Nested,
    }
}

/// Whether `text` is how Postgres writes a non-finite number or date (`NaN`, `Infinity`,
/// `-infinity`, ...).
fn is_non_finite(text: &str) -> bool {
    let text = text.trim();
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    text.eq_ignore_ascii_case("nan") || unsigned.eq_ignore_ascii_case("infinity")
}

/// Infers a column's kind from its values. A declared text type (`text`, `varchar`, `uuid`, ...)
/// keeps strings that look like numbers or booleans as text, so zip codes stay labels.
fn column_kind(data: &Dataset, index: usize, column: &Column) -> ColumnKind {
    let (mut numbers, mut dates, mut booleans, mut others) = (false, false, false, false);
    let mut non_finite = false;
    let mut all_strings = true;
    let mut any = false;
    for row in &data.rows {
        let value = cell(row, index);
        let class = classify(value);
        if class == Cell::Null {
            continue;
        }
        any = true;
        all_strings &= matches!(value, Value::String(_) | Value::Array(_) | Value::Object(_));
        match class {
            Cell::Number(_) => numbers = true,
            Cell::Date(_) => dates = true,
            Cell::Boolean(_) => booleans = true,
            Cell::NonFinite => non_finite = true,
            Cell::Null | Cell::Text | Cell::Nested => others = true,
        }
    }
    // `NaN` and `infinity` belong to numeric and date columns; anywhere else they are text.
    if non_finite && (booleans || numbers == dates) {
        others = true;
    }
    let declared_text = column.type_name.as_deref().is_some_and(is_text_type);
    match (any, numbers, dates, booleans, others) {
        (false, ..) => ColumnKind::Empty,
        (true, true, false, false, false) | (true, false, false, true, false)
            if declared_text && all_strings =>
        {
            ColumnKind::Text
        }
        (true, true, false, false, false) => ColumnKind::Number,
        (true, false, true, false, false) => ColumnKind::Date,
        (true, false, false, true, false) => ColumnKind::Boolean,
        _ if all_strings => ColumnKind::Text,
        _ => ColumnKind::Mixed,
    }
}

fn is_text_type(type_name: &str) -> bool {
    let lower = type_name.trim().to_ascii_lowercase();
    let base = lower.split('(').next().unwrap_or_default().trim();
    matches!(
        base,
        "text"
            | "varchar"
            | "character varying"
            | "char"
            | "character"
            | "bpchar"
            | "name"
            | "citext"
            | "uuid"
            | "string"
    )
}

/// Parses a decimal number (`-12.50`, `.5`, `1e3`), rejecting `NaN`, infinities, overflow and
/// integers with leading zeros (`007` is an identifier, not seven).
fn parse_number(text: &str) -> Option<f64> {
    let bytes = text.trim().as_bytes();
    let mut at = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits_from = |at: usize| bytes.iter().skip(at).take_while(|b| b.is_ascii_digit()).count();
    let integer = digits_from(at);
    if integer > 1 && bytes.get(at) == Some(&b'0') {
        return None;
    }
    at += integer;
    let mut fraction = 0;
    if bytes.get(at) == Some(&b'.') {
        fraction = digits_from(at + 1);
        at += 1 + fraction;
    }
    if integer + fraction == 0 {
        return None;
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) {
        at += 1 + usize::from(matches!(bytes.get(at + 1), Some(b'+' | b'-')));
        let exponent = digits_from(at);
        if exponent == 0 {
            return None;
        }
        at += exponent;
    }
    if at != bytes.len() {
        return None;
    }
    text.trim().parse::<f64>().ok().filter(|number| number.is_finite())
}

/// Parses an ISO 8601 date (`2024-01-31`) or timestamp (`2024-01-31T12:00`,
/// `2024-01-31 12:00:00.5+02`, `...Z`) as Postgres and JSON write them.
fn parse_timestamp(text: &str) -> Option<Timestamp> {
    let bytes = text.trim().as_bytes();
    let number = |from: usize, len: usize| -> Option<i64> {
        let digits = bytes.get(from..from + len)?;
        digits.iter().try_fold(0i64, |total, byte| {
            byte.is_ascii_digit().then(|| total * 10 + i64::from(byte - b'0'))
        })
    };
    let expect = |at: usize, wanted: &[u8]| bytes.get(at).is_some_and(|byte| wanted.contains(byte));
    let year = number(0, 4)?;
    let month = number(5, 2)?;
    let day = number(8, 2)?;
    if !expect(4, b"-") || !expect(7, b"-") || !(1..=12).contains(&month) {
        return None;
    }
    if !(1..=days_in_month(year, month)).contains(&day) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    if bytes.len() == 10 {
        return Some(Timestamp { millis: days * MILLIS_PER_DAY, date_only: true });
    }
    if !expect(10, b"Tt ") || !expect(13, b":") {
        return None;
    }
    let hour = number(11, 2)?;
    let minute = number(14, 2)?;
    let (mut second, mut milli, mut at) = (0, 0, 16);
    if expect(16, b":") {
        second = number(17, 2)?;
        at = 19;
        if expect(19, b".,") {
            let digits = bytes.iter().skip(20).take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 {
                return None;
            }
            let fraction = bytes.iter().skip(20).take(digits.min(3));
            milli = fraction
                .chain(std::iter::repeat(&b'0'))
                .take(3)
                .fold(0, |total, byte| total * 10 + i64::from(byte - b'0'));
            at = 20 + digits;
        }
    }
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let offset = parse_offset(bytes.get(at..)?)?;
    let seconds = ((days * 24 + hour) * 60 + minute) * 60 + second - offset;
    Some(Timestamp { millis: seconds * 1_000 + milli, date_only: false })
}

/// Parses a UTC offset suffix: nothing, `Z`, `+HH`, `+HHMM`, `+HH:MM` or `+HH:MM:SS` (Postgres
/// writes local mean time that way), returning seconds east of UTC.
fn parse_offset(rest: &[u8]) -> Option<i64> {
    let two = |from: usize| -> Option<i64> {
        let digits = rest.get(from..from + 2)?;
        digits.iter().try_fold(0i64, |total, byte| {
            byte.is_ascii_digit().then(|| total * 10 + i64::from(byte - b'0'))
        })
    };
    let sign = match rest.first() {
        None => return Some(0),
        Some(b'Z' | b'z') if rest.len() == 1 => return Some(0),
        Some(b'+') => 1,
        Some(b'-') => -1,
        Some(_) => return None,
    };
    let hours = two(1)?;
    let (minutes, seconds) = match rest.len() {
        3 => (0, 0),
        5 => (two(3)?, 0),
        6 if rest.get(3) == Some(&b':') => (two(4)?, 0),
        9 if rest.get(3) == Some(&b':') && rest.get(6) == Some(&b':') => (two(4)?, two(7)?),
        _ => return None,
    };
    if hours > 23 || minutes > 59 || seconds > 59 {
        return None;
    }
    Some(sign * ((hours * 60 + minutes) * 60 + seconds))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 { shifted_month + 3 } else { shifted_month - 9 };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

    /// Parses test data that is known to be valid.
    #[track_caller]
    fn data(input: Value) -> Dataset {
        match parse_dataset(&input) {
            Ok(data) => data,
            Err(error) => panic!("{input} did not parse: {error}"),
        }
    }

    /// The parts of a dataset a test compares: column names, declared types and rows.
    fn shape(data: &Dataset) -> Value {
        let names: Vec<&str> = data.columns.iter().map(|column| column.name.as_str()).collect();
        let types: Vec<Option<&str>> =
            data.columns.iter().map(|column| column.type_name.as_deref()).collect();
        json!({"columns": names, "types": types, "rows": data.rows})
    }

    #[track_caller]
    fn check_parse(input: Value, expect: Result<Value, &str>) {
        match (parse_dataset(&input), expect) {
            (Ok(data), Ok(expected)) => assert_eq!(shape(&data), expected, "input {input}"),
            (Err(error), Err(fragment)) => {
                let message = error.to_string();
                assert!(message.contains(fragment), "{message:?} lacks {fragment:?}");
            }
            (got, expected) => panic!("input {input}: got {got:?}, expected {expected:?}"),
        }
    }

    /// Checks that `png` is a PNG of the chart size, by its header and by decoding it.
    #[track_caller]
    fn check_png(png: &[u8]) {
        assert!(png.starts_with(PNG_SIGNATURE), "no PNG signature");
        assert_eq!(png.get(12..16), Some(&b"IHDR"[..]), "first chunk is not IHDR");
        let be = |range: std::ops::Range<usize>| {
            png.get(range).and_then(|bytes| bytes.try_into().ok()).map(u32::from_be_bytes)
        };
        assert_eq!((be(16..20), be(20..24)), (Some(PNG_WIDTH), Some(PNG_HEIGHT)));
        let mut reader = match png::Decoder::new(Cursor::new(png)).read_info() {
            Ok(reader) => reader,
            Err(error) => panic!("PNG does not decode: {error}"),
        };
        assert_eq!((reader.info().width, reader.info().height), (PNG_WIDTH, PNG_HEIGHT));
        let mut pixels = vec![0; reader.output_buffer_size().unwrap_or(0)];
        let frame = reader.next_frame(&mut pixels);
        assert!(frame.is_ok(), "PNG pixels do not decode: {frame:?}");
        assert!(pixels.iter().any(|byte| *byte != 255), "the PNG is blank");
    }

    #[test]
    fn parse_dataset_reads_every_documented_shape() {
        let cases: Vec<(Value, Result<Value, &str>)> = vec![
            (
                json!({
                    "schema": [{"name": "id", "type": "int4", "nullable": false}, {"name": "name"}],
                    "rows": [[1, "a"], [2, null]],
                    "row_count": 2, "has_more": false, "page_token": null,
                    "source": "postgres", "truncated": false,
                }),
                Ok(json!({"columns": ["id", "name"], "types": ["int4", null],
                    "rows": [[1, "a"], [2, null]]})),
            ),
            (
                json!({"schema": ["a", "b"], "rows": [{"b": 2, "a": 1}, {"a": 3}]}),
                Ok(json!({"columns": ["a", "b"], "types": [null, null],
                    "rows": [[1, 2], [3, null]]})),
            ),
            (
                json!({"columns": [{"name": "x"}], "rows": []}),
                Ok(json!({"columns": ["x"], "types": [null], "rows": []})),
            ),
            (
                json!([{"b": 1, "a": {"nested": [1]}}, {"c": true}]),
                Ok(json!({"columns": ["b", "a", "c"], "types": [null, null, null],
                    "rows": [[1, {"nested": [1]}, null], [null, null, true]]})),
            ),
            (json!([]), Ok(json!({"columns": [], "types": [], "rows": []}))),
            (
                json!("name,note\r\n\"Smith, J\",\"said \"\"hi\"\"\nthen left\"\r\nLee,\r\n"),
                Ok(json!({"columns": ["name", "note"], "types": [null, null],
                    "rows": [["Smith, J", "said \"hi\"\nthen left"], ["Lee", null]]})),
            ),
            (
                json!("\u{feff}a,b\n1,2.5\n"),
                Ok(json!({"columns": ["a", "b"], "types": [null, null],
                    "rows": [["1", "2.5"]]})),
            ),
            (
                json!("only,header"),
                Ok(json!({"columns": ["only", "header"],
                "types": [null, null], "rows": []})),
            ),
            (
                json!(" [{\"a\": 1}] "),
                Ok(json!({"columns": ["a"], "types": [null], "rows": [[1]]})),
            ),
            (
                json!("{\"schema\": [{\"name\": \"a\", \"type\": \"text\"}], \"rows\": [[\"x\"]]}"),
                Ok(json!({"columns": ["a"], "types": ["text"], "rows": [["x"]]})),
            ),
            (json!(null), Err("data is null; expected a result object")),
            (json!(42), Err("data is a number")),
            (json!("   "), Err("data is an empty string")),
            (
                json!("\"a quoted header\""),
                Ok(json!({"columns": ["a quoted header"], "types": [null], "rows": []})),
            ),
            (json!({"rows": []}), Err("the object has no `schema`")),
            (json!({"schema": []}), Err("the object has no `rows`")),
            (json!({"schema": "a,b", "rows": []}), Err("`schema` is a string")),
            (json!({"schema": [], "rows": {}}), Err("`rows` is an object")),
            (json!({"schema": [{"type": "int4"}], "rows": []}), Err("`schema[0]` has no string")),
            (json!({"schema": [7], "rows": []}), Err("`schema[0]` is a number")),
            (json!({"schema": ["a"], "rows": [[1], 2]}), Err("`rows[1]` is a number")),
            (
                json!({"schema": ["a", "b"], "rows": [[1, 2], [3]]}),
                Err("rows[1] has 1 value but the schema has 2 columns"),
            ),
            (json!([{"a": 1}, [1]]), Err("data[1] is an array; an array of rows")),
            (json!("{\"schema\": "), Err("data is not valid JSON (EOF while parsing")),
            (json!("a,b\n1,2\n3\n"), Err("the record on line 3 has 1 field but the header has 2")),
            (
                Value::String(format!("{}1{}", "[".repeat(1_000), "]".repeat(1_000))),
                Err("recursion limit exceeded"),
            ),
            (
                json!((0..1_001).map(|i| json!({format!("k{i}"): i})).collect::<Vec<_>>()),
                Err("data has 1001 rows of 1001 columns; at most 1000 columns"),
            ),
            (
                json!(
                    (0..5_001).map(|i| json!({format!("k{}", i % 1_000): i})).collect::<Vec<_>>()
                ),
                Err("data has 5001 rows of 1000 columns"),
            ),
        ];
        for (input, expect) in cases {
            check_parse(input, expect);
        }
    }

    #[test]
    fn markdown_tables_escape_cells_and_right_align_numbers() {
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"schema": ["name", "amount", "tags"],
                    "rows": [["a|b", "12.50", ["x"]], ["line\r\nbreak\\", 3, null]]}),
                "| name | amount | tags |\n| --- | ---: | --- |\n| a\\|b | 12.50 | [\"x\"] |\n\
                 | line<br>break\\\\ | 3 |  |\n",
            ),
            (
                json!({"schema": ["", "tab\there"], "rows": [["\u{7}", true]]}),
                "|  | tab here |\n| --- | --- |\n|   | true |\n",
            ),
            (json!({"schema": ["only"], "rows": []}), "| only |\n| --- |\n"),
            (json!({"schema": [], "rows": [[]]}), ""),
            (
                json!({"schema": [{"name": "zip", "type": "varchar(10)"}], "rows": [["1234"]]}),
                "| zip |\n| --- |\n| 1234 |\n",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(markdown_table(&data(input.clone())), expected, "input {input}");
        }
    }

    #[test]
    fn csv_text_follows_rfc_4180_and_reads_back() {
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"schema": ["name", "note", "n"],
                    "rows": [["Smith, J", "said \"hi\"", 1.5], ["multi\nline", null, {"a": [1]}]]}),
                "name,note,n\r\n\"Smith, J\",\"said \"\"hi\"\"\",1.5\r\n\"multi\nline\",,\"{\"\"a\"\":[1]}\"\r\n",
            ),
            (json!({"schema": ["solo"], "rows": [[null], ["x"]]}), "solo\r\n\"\"\r\nx\r\n"),
            (json!({"schema": ["cr"], "rows": [["a\rb"], [true]]}), "cr\r\n\"a\rb\"\r\ntrue\r\n"),
            (json!({"schema": [], "rows": []}), ""),
        ];
        for (input, expected) in cases {
            let dataset = data(input.clone());
            let text = csv_text(&dataset);
            assert_eq!(text, expected, "input {input}");
            if !dataset.columns.is_empty() {
                let again = data(Value::String(text));
                let names = |data: &Dataset| -> Vec<String> {
                    data.columns.iter().map(|column| column.name.clone()).collect()
                };
                assert_eq!(names(&again), names(&dataset));
                assert_eq!(again.rows.len(), dataset.rows.len(), "input {input}");
            }
        }
    }

    #[test]
    fn json_objects_keep_values_and_make_keys_unique() {
        let cases: Vec<(Value, Value)> = vec![
            (
                json!({"schema": ["id", "id", "", "id_2", ""], "rows": [[1, 2, 3, 4, 5]]}),
                json!([{"id": 1, "id_3": 2, "column_3": 3, "id_2": 4, "column_5": 5}]),
            ),
            (
                json!([{"a": "12.50", "b": {"c": null}}, {"b": [1]}]),
                json!([{"a": "12.50", "b": {"c": null}}, {"a": null, "b": [1]}]),
            ),
            (json!({"schema": ["a"], "rows": []}), json!([])),
        ];
        for (input, expected) in cases {
            assert_eq!(json_objects(&data(input.clone())), expected, "input {input}");
        }
    }

    #[test]
    fn summary_reports_types_counts_extremes_and_top_values() {
        let input = json!({
            "schema": [
                {"name": "city", "type": "text"}, {"name": "amount", "type": "numeric"},
                {"name": "day", "type": "date"}, {"name": "paid", "type": "bool"},
                {"name": "note", "type": "text"}, {"name": "zip", "type": "text"},
                {"name": "ratio", "type": "float8"}, {"name": "misc"},
            ],
            "rows": [
                ["Oslo", "12.50", "2024-01-02", true, null, "5003", 0.5, 1],
                ["Bergen", "7", "2024-01-01", false, null, "5003", "NaN", "one"],
                ["Oslo", 3, "2024-01-03T00:00:00Z", true, null, "1234", -1, true],
                [null, null, null, null, null, "0042", null, null],
            ],
        });
        let expected = json!({
            "row_count": 4,
            "column_count": 8,
            "columns": [
                {"name": "city", "type": "text", "count": 3, "nulls": 1, "distinct": 2,
                    "min": "Bergen", "max": "Oslo",
                    "top_values": [{"value": "Oslo", "count": 2}, {"value": "Bergen", "count": 1}]},
                {"name": "amount", "type": "number", "count": 3, "nulls": 1, "distinct": 3,
                    "min": 3, "max": "12.50", "mean": 7.5,
                    "top_values": [{"value": 3, "count": 1}, {"value": "7", "count": 1},
                        {"value": "12.50", "count": 1}]},
                {"name": "day", "type": "date", "count": 3, "nulls": 1, "distinct": 3,
                    "min": "2024-01-01", "max": "2024-01-03T00:00:00Z",
                    "top_values": [{"value": "2024-01-01", "count": 1},
                        {"value": "2024-01-02", "count": 1},
                        {"value": "2024-01-03T00:00:00Z", "count": 1}]},
                {"name": "paid", "type": "boolean", "count": 3, "nulls": 1, "distinct": 2,
                    "min": false, "max": true,
                    "top_values": [{"value": true, "count": 2}, {"value": false, "count": 1}]},
                {"name": "note", "type": "empty", "count": 0, "nulls": 4, "distinct": 0,
                    "min": null, "max": null, "top_values": []},
                {"name": "zip", "type": "text", "count": 4, "nulls": 0, "distinct": 3,
                    "min": "0042", "max": "5003",
                    "top_values": [{"value": "5003", "count": 2}, {"value": "0042", "count": 1},
                        {"value": "1234", "count": 1}]},
                {"name": "ratio", "type": "number", "count": 3, "nulls": 1, "distinct": 3,
                    "min": -1, "max": 0.5, "mean": -0.25,
                    "top_values": [{"value": -1, "count": 1}, {"value": 0.5, "count": 1},
                        {"value": "NaN", "count": 1}]},
                {"name": "misc", "type": "mixed", "count": 3, "nulls": 1, "distinct": 3,
                    "min": null, "max": null,
                    "top_values": [{"value": 1, "count": 1}, {"value": "one", "count": 1},
                        {"value": true, "count": 1}]},
            ],
        });
        assert_eq!(summary(&data(input)), expected);

        let empty = summary(&data(json!([])));
        assert_eq!(empty, json!({"row_count": 0, "column_count": 0, "columns": []}));

        let long = "x".repeat(500);
        let cut = summary(&data(json!([{"t": long}])));
        let top = &cut["columns"][0]["top_values"][0]["value"];
        assert_eq!(top.as_str().map(|text| text.chars().count()), Some(MAX_SUMMARY_TEXT));

        let huge = summary(&data(json!([{"n": f64::MAX}, {"n": f64::MAX}, {"n": 1}])));
        assert!(huge["columns"][0]["mean"].as_f64().is_some_and(f64::is_finite), "{huge}");
    }

    struct ChartCase {
        input: Value,
        expect: Result<(ChartKind, &'static str, usize), &'static str>,
    }

    #[track_caller]
    fn check_chart(case: ChartCase) {
        let ChartCase { input, expect } = case;
        match (chart(&data(input.clone())), expect) {
            (Ok(chart), Ok((kind, title, values))) => {
                assert_eq!(chart.kind, kind, "input {input}");
                let spec = &chart.vega_lite;
                assert_eq!(spec["$schema"], VEGA_LITE_SCHEMA);
                assert!(spec["title"].as_str().is_some_and(|t| t.contains(title)), "{spec}");
                assert!(spec["encoding"]["x"]["field"].is_string(), "{spec}");
                assert!(spec["encoding"]["y"]["type"].is_string(), "{spec}");
                assert!(!spec["mark"].is_null(), "{spec}");
                let plotted = spec["data"]["values"].as_array().map(Vec::len);
                assert_eq!(plotted, Some(values), "input {input}");
                check_png(&chart.png);
            }
            (Err(error), Err(fragment)) => {
                let message = error.to_string();
                assert!(message.contains(fragment), "{message:?} lacks {fragment:?}");
            }
            (Ok(chart), Err(fragment)) => {
                panic!("input {input}: got a {} chart, expected {fragment:?}", chart.kind.as_str())
            }
            (Err(error), Ok(_)) => panic!("input {input}: {error}"),
        }
    }

    #[test]
    fn charts_are_chosen_from_column_types() {
        let cases = vec![
            ChartCase {
                input: json!({"schema": [{"name": "day", "type": "date"}, {"name": "revenue"}],
                    "rows": [["2024-01-02", "20"], ["2024-01-01", "12.50"], ["2024-01-02", 5]]}),
                expect: Ok((ChartKind::Line, "sum of revenue per day", 2)),
            },
            ChartCase {
                input: json!([{"at": "2024-03-01T10:00:00Z", "v": 1},
                    {"at": "2024-03-01 11:30:00.25+01:00", "v": 3}, {"at": null, "v": 4}]),
                expect: Ok((ChartKind::Line, "v over at", 2)),
            },
            ChartCase {
                input: json!([{"day": "2024-05-05", "n": 1}]),
                expect: Ok((ChartKind::Line, "n over day", 1)),
            },
            ChartCase {
                input: json!([{"region": "north", "sales": 10}, {"region": "south", "sales": 25},
                    {"region": "north", "sales": 5}, {"region": "west", "sales": -3}]),
                expect: Ok((ChartKind::Bar, "sum of sales by region", 3)),
            },
            ChartCase {
                input: json!(
                    (0..40).map(|i| json!({"c": format!("c{i}"), "v": i})).collect::<Vec<_>>()
                ),
                expect: Ok((ChartKind::Bar, "v by c (top 30 of 40)", 30)),
            },
            ChartCase {
                input: json!([{"paid": true, "n": 2}, {"paid": false, "n": 1}]),
                expect: Ok((ChartKind::Bar, "n by paid", 2)),
            },
            ChartCase {
                input: json!([{"only": "one", "n": 0}]),
                expect: Ok((ChartKind::Bar, "n by only", 1)),
            },
            ChartCase {
                input: json!("x,y\n1,2\n2,4.5\n3,5\n"),
                expect: Ok((ChartKind::Scatter, "y vs x", 3)),
            },
            ChartCase {
                input: json!({"schema": ["price"], "rows": (0..100).map(|i| json!([i])).collect::<Vec<_>>()}),
                expect: Ok((ChartKind::Histogram, "distribution of price", HISTOGRAM_BINS)),
            },
            ChartCase {
                input: json!([{"same": 7}, {"same": 7}]),
                expect: Ok((ChartKind::Histogram, "distribution of same", 1)),
            },
            ChartCase {
                input: json!({"schema": ["a"], "rows": []}),
                expect: Err("data has no rows"),
            },
            ChartCase {
                input: json!([{"name": "a", "note": "b"}]),
                expect: Err("no columns can be charted (found `name` (text), `note` (text))"),
            },
            ChartCase {
                input: json!([{"day": "2024-01-01", "empty": null}]),
                expect: Err("a chart needs a numeric column"),
            },
            ChartCase { input: json!([{}]), expect: Err("(found no columns)") },
            ChartCase {
                input: json!([{"day": "2024-01-01", "n": null}, {"day": null, "n": 1}]),
                expect: Err("no row has plottable values in `day` and `n`"),
            },
            ChartCase {
                input: json!([{"n": 1e300}]),
                expect: Err("no row has plottable values in `n`"),
            },
        ];
        for case in cases {
            check_chart(case);
        }
    }

    #[test]
    fn vega_lite_fields_escape_path_characters_and_names_are_unique() {
        let input = json!({"schema": ["a.b", "a.b", "[q]"], "rows": [["x", 1, 2]]});
        let Ok(chart) = chart(&data(input)) else {
            panic!("the chart failed");
        };
        let spec = chart.vega_lite;
        assert_eq!(spec["encoding"]["y"]["field"], "a\\.b");
        assert_eq!(spec["encoding"]["x"]["field"], "a\\.b_2");
        assert_eq!(spec["data"]["values"], json!([{"a.b": "x", "a.b_2": 1.0}]));
    }

    #[test]
    fn large_series_are_sampled_and_summarised() {
        let rows: Vec<Value> = (0..100_000)
            .map(|i| json!([format!("2024-01-01T00:00:{:02}Z", i % 60), i, i % 7, format!("k{i}")]))
            .collect();
        let dataset = data(json!({"schema": ["at", "n", "m", "key"], "rows": rows}));

        let Ok(line) = chart(&dataset) else { panic!("the line chart failed") };
        assert_eq!(line.kind, ChartKind::Line);
        assert_eq!(line.vega_lite["data"]["values"].as_array().map(Vec::len), Some(60));
        check_png(&line.png);

        let numbers = Dataset {
            columns: dataset.columns.get(1..3).map(<[Column]>::to_vec).unwrap_or_default(),
            rows: dataset
                .rows
                .iter()
                .map(|row| row.get(1..3).unwrap_or_default().to_vec())
                .collect(),
        };
        let Ok(scatter) = chart(&numbers) else { panic!("the scatter chart failed") };
        assert_eq!(scatter.kind, ChartKind::Scatter);
        let plotted = scatter.vega_lite["data"]["values"].as_array().map_or(0, Vec::len);
        assert!(plotted <= MAX_CHART_POINTS && plotted > MAX_CHART_POINTS / 2, "{plotted}");
        let description = scatter.vega_lite["description"].as_str().unwrap_or_default();
        assert!(description.contains("of 100000 points are plotted"), "{description}");
        check_png(&scatter.png);

        let stats = summary(&dataset);
        assert_eq!(stats["row_count"], 100_000);
        assert_eq!(stats["columns"][1]["mean"], 49_999.5);
        assert_eq!(stats["columns"][3]["distinct"], 100_000);
        assert_eq!(stats["columns"][3]["top_values"][0], json!({"value": "k0", "count": 1}));
    }

    #[test]
    fn hostile_data_never_panics() {
        let long = "w".repeat(100_000);
        let inputs = vec![
            json!([{"a": "NaN", "b": "inf"}, {"a": "1e400", "b": "-Infinity"}]),
            json!([{"x": "NaN", "y": 1}, {"x": "Infinity", "y": 2}, {"x": 3, "y": "nan"}]),
            json!([{"x": f64::MAX}, {"x": -f64::MAX}, {"x": 0}]),
            json!([{"x": 1e250, "y": -1e250}, {"x": -1e250, "y": 1e250}]),
            json!([{"x": 5e-324}, {"x": 0}, {"x": -5e-324}]),
            json!([{"x": 1e16}, {"x": 1e16 + 2.0}, {"x": 1e16 + 4.0}]),
            json!([{"x": u64::MAX, "y": i64::MIN}, {"x": 0, "y": 0}]),
            json!([{"t": "0000-01-01", "v": 1}, {"t": "9999-12-31T23:59:59.999+23:59", "v": 2}]),
            json!([{"t": "2024-02-30", "v": 1}, {"t": "2024-13-01", "v": 2}]),
            json!([{"名前": "東京 ☃", "値": 3}, {"名前": "Zürich\u{202e}", "値": 4}]),
            json!([{"emoji 🎉": "👩‍👩‍👧", "n": 1}, {"emoji 🎉": "", "n": 2}]),
            json!([{"": "", "n": ""}, {"": "", "n": ""}]),
            json!([{"a": null, "b": null}, {"a": null, "b": null}]),
            json!([{"a": {"deep": [1, [2, [3]]]}, "n": 1}]),
            json!([{"label": long, "n": 1}, {"label": "\u{0}\u{1b}[31m", "n": 2}]),
            json!([{"n": "-0"}, {"n": "+.5"}, {"n": "5."}, {"n": "1e-400"}]),
            json!({"schema": ["", "", "a.b", "a[0]", "\\", "\"q\""], "rows": [[1, 2, 3, 4, 5, 6]]}),
            json!("a,b\n\"unterminated,1\n"),
            json!("\"\",\"\"\n,\n,\n"),
            json!(format!("{long}\n1\n")),
            json!((0..100_000).map(|i| json!({"v": (i as f64).sin() * 1e6})).collect::<Vec<_>>()),
            json!(
                (0..2_000).map(|i| json!({"c": i.to_string() + "x", "v": 1})).collect::<Vec<_>>()
            ),
        ];
        for input in inputs {
            let Ok(dataset) = parse_dataset(&input) else {
                continue;
            };
            let _ = markdown_table(&dataset);
            let _ = csv_text(&dataset);
            let _ = json_objects(&dataset);
            let _ = summary(&dataset);
            if let Ok(chart) = chart(&dataset) {
                check_png(&chart.png);
                assert!(serde_json::to_string(&chart.vega_lite).is_ok());
            }
        }

        // A hand-built dataset with ragged rows is read as if missing cells were null.
        let ragged = Dataset {
            columns: vec![Column { name: "n".to_owned(), type_name: None }],
            rows: vec![vec![], vec![json!(1), json!(2)]],
        };
        assert_eq!(csv_text(&ragged), "n\r\n\"\"\r\n1\r\n");
        assert_eq!(chart(&ragged).map(|chart| chart.kind), Ok(ChartKind::Histogram));
    }

    #[test]
    fn cells_are_classified_strictly() {
        let date = |millis: i64| Cell::Date(Timestamp { millis, date_only: false });
        let cases: Vec<(Value, Cell)> = vec![
            (json!(null), Cell::Null),
            (json!(1.5), Cell::Number(1.5)),
            (json!("12.50"), Cell::Number(12.5)),
            (json!(" -3e2 "), Cell::Number(-300.0)),
            (json!("+.5"), Cell::Number(0.5)),
            (json!("0"), Cell::Number(0.0)),
            (json!("007"), Cell::Text),
            (json!("1,000"), Cell::Text),
            (json!("1e400"), Cell::Text),
            (json!("0x10"), Cell::Text),
            (json!("."), Cell::Text),
            (json!("1e"), Cell::Text),
            (json!(""), Cell::Text),
            (json!("NaN"), Cell::NonFinite),
            (json!("-Infinity"), Cell::NonFinite),
            (json!("inf"), Cell::Text),
            (json!("TRUE"), Cell::Boolean(true)),
            (json!(false), Cell::Boolean(false)),
            (json!([1]), Cell::Nested),
            (
                json!("1970-01-02"),
                Cell::Date(Timestamp { millis: MILLIS_PER_DAY, date_only: true }),
            ),
            (json!("1969-12-31T23:59:59Z"), date(-1_000)),
            (json!("2000-01-01T00:00:00.5"), date(946_684_800_500)),
            (json!("2000-01-01 02:00:00+02"), date(946_684_800_000)),
            (json!("2000-01-01T00:00+0130"), date(946_679_400_000)),
            (json!("2000-01-01t00:00:00.123456789-01:00"), date(946_688_400_123)),
            (json!("1900-01-01 00:00:00+00:53:28"), date(-2_208_992_008_000)),
            (
                json!("2024-02-29"),
                Cell::Date(Timestamp { millis: 1_709_164_800_000, date_only: true }),
            ),
            (json!("2023-02-29"), Cell::Text),
            (json!("2024-01-01T24:00:00"), Cell::Text),
            (json!("2024-01-01T10:00:00 BC"), Cell::Text),
            (json!("2024-01-01T10"), Cell::Text),
            (json!("2024-1-01"), Cell::Text),
        ];
        for (input, expected) in cases {
            assert_eq!(classify(&input), expected, "input {input}");
        }
        for days in [-719_528, -1, 0, 1, 11_016, 19_782, 2_932_896] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days, "days {days}");
        }
        assert_eq!(format_instant(946_684_800_500.0, false), "2000-01-01T00:00:00.500Z");
        assert_eq!(format_instant(-1_000.0, false), "1969-12-31T23:59:59Z");
        assert_eq!(format_instant(0.0, true), "1970-01-01");
    }

    #[test]
    fn output_formats_deserialize_from_lowercase_names() {
        let cases = [
            ("table", Some(OutputFormat::Table)),
            ("chart", Some(OutputFormat::Chart)),
            ("summary", Some(OutputFormat::Summary)),
            ("csv", Some(OutputFormat::Csv)),
            ("json", Some(OutputFormat::Json)),
            ("Table", None),
            ("markdown", None),
        ];
        for (name, expected) in cases {
            let parsed = serde_json::from_value::<OutputFormat>(json!(name)).ok();
            assert_eq!(parsed, expected, "name {name}");
        }
    }

    #[test]
    fn error_messages_are_lowercase_without_a_trailing_period() {
        let errors = [
            FormatError::UnsupportedData { found: "null" },
            FormatError::InvalidResultObject { reason: "the object has no `rows`".to_owned() },
            FormatError::RowNotObject { index: 1, found: "a number" },
            FormatError::RowWidth { index: 0, found: 1, expected: 2 },
            FormatError::InvalidJson { reason: "EOF while parsing".to_owned() },
            FormatError::InvalidCsv { reason: "there is no header row".to_owned() },
            FormatError::TooLarge { rows: 1, columns: 2_000 },
            FormatError::EmptyDataset,
            FormatError::NotPlottable { found: "`a` (text)".to_owned() },
            FormatError::NoPlottableRows { columns: "`a`".to_owned() },
            FormatError::Render { reason: "oops".to_owned() },
        ];
        for error in errors {
            let message = error.to_string();
            let first = message.chars().next().unwrap_or('X');
            assert!(first.is_lowercase() || first == '`', "{message}");
            assert!(!message.ends_with('.'), "{message}");
        }
    }

    #[test]
    fn labels_and_numbers_are_shortened_for_the_png() {
        let cases: Vec<(Vec<f64>, NumberFormat, Vec<&str>)> = vec![
            (vec![0.0, 2.0, 4.0], NumberFormat::Decimals(0), vec!["0", "2", "4"]),
            (vec![-0.2, 0.0, 0.2], NumberFormat::Decimals(1), vec!["-0.2", "0.0", "0.2"]),
            (vec![0.1 + 0.2, 0.4], NumberFormat::Decimals(1), vec!["0.3", "0.4"]),
            (vec![0.0012, 0.0014], NumberFormat::Decimals(4), vec!["0.0012", "0.0014"]),
            (vec![0.00012, 0.00014], NumberFormat::Scientific(1), vec!["1.2e-4", "1.4e-4"]),
            (vec![1e7, 1.5e7, 2e7], NumberFormat::Scientific(1), vec!["1.0e7", "1.5e7", "2.0e7"]),
            (vec![-1e-9, 0.0], NumberFormat::Scientific(0), vec!["-1e-9", "0"]),
            (vec![1e250, 2e250], NumberFormat::Scientific(0), vec!["1e250", "2e250"]),
            (vec![5.0], NumberFormat::Decimals(0), vec!["5"]),
            (vec![], NumberFormat::Decimals(0), vec![]),
        ];
        for (ticks, format, labels) in cases {
            assert_eq!(number_format(&ticks), format, "{ticks:?}");
            let written: Vec<String> = ticks.iter().map(|t| format_number(*t, format)).collect();
            assert_eq!(written, labels, "{ticks:?}");
        }
        assert_eq!(format_number(-0.0001, NumberFormat::Decimals(1)), "0.0");
        assert_eq!(short_label("short"), "short");
        assert_eq!(
            short_label("category with a rather long name 79"),
            "category with…r long name 79"
        );
        assert_eq!(short_label("a\nb"), "a b");
        assert_eq!(truncate_chars("ab", 1), "…");
        assert_eq!(padded_range(5.0, 5.0, false), (4.75, 5.25));
        assert_eq!(padded_range(0.0, 0.0, true), (-1.0, 1.0));
        assert_eq!(padded_range(2.0, 12.0, true), (0.0, 12.6));
    }

    #[test]
    fn axis_ticks_are_round_and_bounded() {
        let cases: Vec<((f64, f64, usize), Vec<f64>)> = vec![
            ((0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
            ((-1.0, 1.0, 2), vec![-1.0, 0.0, 1.0]),
            ((0.25, 1.0, 3), vec![0.5, 1.0]),
            ((5.0, 5.0, 8), vec![]),
            ((0.0, f64::INFINITY, 8), vec![]),
            ((-f64::MAX, f64::MAX, 8), vec![]),
            ((0.0, 1.0, 0), vec![]),
        ];
        for ((low, high, target), expected) in cases {
            assert_eq!(nice_ticks(low, high, target), expected, "{low}..{high}");
        }
        assert!(nice_ticks(1e16, 1e16 + 4.0, 8).len() <= 101);
        assert!(nice_ticks(0.0, 5e-324, 8).len() <= 101);

        let day = |year, month, day| (days_from_civil(year, month, day) * MILLIS_PER_DAY) as f64;
        let cases: Vec<((f64, f64), TimeStep, Vec<&str>)> = vec![
            (
                (day(2024, 1, 1), day(2024, 1, 11)),
                TimeStep::Millis(2 * MILLIS_PER_DAY),
                vec!["2024-01-02", "2024-01-04", "2024-01-06", "2024-01-08", "2024-01-10"],
            ),
            (
                (day(2020, 1, 1), day(2020, 12, 31)),
                TimeStep::Months(2),
                vec!["2020-01", "2020-03", "2020-05", "2020-07", "2020-09", "2020-11"],
            ),
            (
                (day(1990, 6, 1), day(2023, 4, 1)),
                TimeStep::Years(5),
                vec!["1995", "2000", "2005", "2010", "2015", "2020"],
            ),
            (
                (day(2024, 3, 1) + 3_600_000.0, day(2024, 3, 1) + 4.0 * 3_600_000.0),
                TimeStep::Millis(30 * 60_000),
                vec![
                    "03-01 01:00",
                    "03-01 01:30",
                    "03-01 02:00",
                    "03-01 02:30",
                    "03-01 03:00",
                    "03-01 03:30",
                    "03-01 04:00",
                ],
            ),
            (
                (0.0, 4_000.0),
                TimeStep::Millis(1_000),
                vec!["00:00:00", "00:00:01", "00:00:02", "00:00:03", "00:00:04"],
            ),
        ];
        for ((low, high), step, expected) in cases {
            let (ticks, got) = time_ticks(low, high);
            assert_eq!(got, step, "{low}..{high}");
            let labels: Vec<String> = ticks.iter().map(|t| format_time_label(*t, got)).collect();
            assert_eq!(labels, expected, "{low}..{high}");
        }
        assert_eq!(time_ticks(0.0, f64::MAX).0, Vec::<f64>::new());
        assert!(time_ticks(day(0, 1, 1), day(9999, 12, 31)).0.len() <= 8);
    }
}
