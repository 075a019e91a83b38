//! The domain logic of the `format_results` tool: it reads result data in whatever shape an LLM
//! client passes it back (a `TabularResult`, an array of row objects, CSV or JSON text) and renders
//! it as a Markdown table, CSV text, JSON objects, column statistics or a chart, so that the tool
//! adapter only has to pick the output and map [`FormatError`] to `INVALID_INPUT`.
//!
//! Nothing here does I/O, and every function is total: hostile input (huge numbers, `NaN` strings, ragged rows,
//! megabytes of text) yields an error or a degraded rendering, never a panic. Charts come as a
//! Vega-Lite v5 spec for clients that can draw one and as a PNG drawn in memory with an embedded
//! font, so nothing depends on fonts or libraries installed on the host.

mod cells;
mod chart;
mod drawing;
mod figure;
mod parse;
mod summary;
mod tables;
mod text;

use std::fmt;

use plotters::style::RGBColor;
use serde::Deserialize;
use serde_json::Value;

use chart::counted;

pub(crate) use chart::chart;
pub(crate) use drawing::render_png;
pub(crate) use figure::{BarGroup, Figure, Series};
pub(crate) use parse::parse_dataset;
pub(crate) use summary::summary;
pub(crate) use tables::{csv_text, json_objects, markdown_table};

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
/// The colours of the runs of a grouped bar chart, the first being the plain bars' colour.
const SERIES_COLORS: [RGBColor; 4] =
    [BAR_COLOR, RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40)];
const GRID_COLOR: RGBColor = RGBColor(230, 230, 230);

/// DejaVu Sans (fonts-dejavu-core), embedded so the PNG needs no system fonts; its licence is in
/// `data/fonts/LICENSE-DejaVu.txt`.
static DEJAVU_SANS: &[u8] =
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/data/fonts/DejaVuSans.ttf"));

static NULL: Value = Value::Null;

/// The presentations `format_results` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutputFormat {
    Table,
    Chart,
    Summary,
    Csv,
    Json,
}

/// A format is one of the five lowercase names; anything else is refused with the names, so that
/// the argument is refused where the arguments are read, as the tool's input schema says.
impl<'de> Deserialize<'de> for OutputFormat {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        match value.as_str() {
            Some("table") => Ok(OutputFormat::Table),
            Some("chart") => Ok(OutputFormat::Chart),
            Some("summary") => Ok(OutputFormat::Summary),
            Some("csv") => Ok(OutputFormat::Csv),
            Some("json") => Ok(OutputFormat::Json),
            other => {
                let shown = other.map_or_else(|| value.to_string(), str::to_owned);
                let shown: String = shown.chars().take(64).collect();
                Err(serde::de::Error::custom(format!(
                    "`{shown}` is not one of: table, chart, summary, csv, json"
                )))
            }
        }
    }
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

#[cfg(test)]
mod testing;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testing::check_png;
    use super::*;

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
}
