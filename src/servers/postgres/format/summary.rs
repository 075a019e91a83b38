//! Column statistics: type, counts, extremes, mean and the most frequent values.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;

use serde_json::{Map, Number, Value, json};

use super::cells::{Cell, ColumnKind, cell, cell_text, classify, column_kind};
use super::text::truncate_chars;
use super::{Column, Dataset, MAX_SUMMARY_TEXT, MAX_TOP_VALUES};

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
pub(super) fn mean(numbers: &[f64]) -> f64 {
    if numbers.is_empty() {
        return f64::NAN;
    }
    let count = numbers.len() as f64;
    let plain = numbers.iter().sum::<f64>() / count;
    if plain.is_finite() { plain } else { numbers.iter().map(|number| number / count).sum() }
}

pub(super) fn number_value(number: f64) -> Value {
    Number::from_f64(number).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::data;
    use super::*;

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
}
