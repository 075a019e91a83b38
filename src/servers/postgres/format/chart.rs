//! Choosing a chart from the column types and building it as a figure and a Vega-Lite v5 spec.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::cells::{Cell, ColumnKind, cell, cell_text, classify, column_kind};
use super::drawing::render_png;
use super::figure::{Bin, Figure, Series};
use super::summary::number_value;
use super::tables::unique_names;
use super::text::{format_instant, short, truncate_chars};
use super::{
    Chart, Dataset, FormatError, HISTOGRAM_BINS, MAX_BAR_CATEGORIES, MAX_CHART_POINTS,
    MAX_LABEL_CHARS, MAX_PLOT_MAGNITUDE, VEGA_LITE_SCHEMA,
};

/// Draws the dataset as a chart, choosing the kind from the column types.
///
/// Column types are inferred as in [`summary`](super::summary); the first column of each type is
/// used. The rules, in order:
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
pub(super) fn quoted(name: &str) -> String {
    format!("`{}`", truncate_chars(name, MAX_LABEL_CHARS))
}

pub(super) fn plottable(cell: Cell) -> Option<f64> {
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

pub(super) fn counted(count: usize, singular: &str, plural: &str) -> String {
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
        Series::GroupedBar { runs, groups } => (
            groups
                .iter()
                .flat_map(|group| {
                    runs.iter().zip(&group.values).filter_map(|(run, value)| {
                        let mut entry = Map::new();
                        entry.insert(figure.x_name.clone(), Value::String(group.label.clone()));
                        entry.insert("run".to_owned(), Value::String(run.clone()));
                        entry.insert(figure.y_name.clone(), number_value((*value)?));
                        Some(Value::Object(entry))
                    })
                })
                .collect(),
            json!("bar"),
            json!({
                "y": {"field": x_field, "type": "nominal", "sort": null, "title": figure.x_name},
                "yOffset": {"field": "run", "sort": runs},
                "x": {"field": y_field, "type": "quantitative", "title": figure.y_name},
                "color": {"field": "run", "type": "nominal", "sort": runs, "title": "run"},
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::figure::BarGroup;
    use super::super::testing::{check_png, data};
    use super::super::{ChartKind, Column, summary};
    use super::*;

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
    fn grouped_bars_keep_each_categorys_runs_together_in_the_spec_and_the_png() {
        let group =
            |label: &str, values: Vec<Option<f64>>| BarGroup { label: label.to_owned(), values };
        let figure = Figure {
            title: "accuracy by tag".to_owned(),
            description: "grouped".to_owned(),
            x_name: "tag".to_owned(),
            y_name: "accuracy (%)".to_owned(),
            series: Series::GroupedBar {
                runs: vec!["with".to_owned(), "without".to_owned()],
                groups: vec![
                    group("joins", vec![Some(80.0), Some(40.0)]),
                    group("dates", vec![None, Some(50.0)]),
                ],
            },
        };
        assert_eq!(figure.kind(), ChartKind::Bar);
        let spec = vega_lite_spec(&figure);
        assert_eq!(
            spec["data"]["values"],
            json!([
                {"tag": "joins", "run": "with", "accuracy (%)": 80.0},
                {"tag": "joins", "run": "without", "accuracy (%)": 40.0},
                {"tag": "dates", "run": "without", "accuracy (%)": 50.0},
            ])
        );
        assert_eq!(spec["encoding"]["yOffset"]["field"], "run");
        assert_eq!(spec["encoding"]["color"]["sort"], json!(["with", "without"]));
        check_png(&render_png(&figure).unwrap());
    }
}
