//! The comparison behind execution accuracy: a generated result is right when it holds the same
//! rows as the gold result. Rows are compared as multisets (order ignored unless the question
//! says it matters or the gold SQL has a top-level `ORDER BY`), column names are ignored, and
//! columns are matched in order or, failing that, by a permutation. Numbers are equal within a
//! relative 1e-6 whatever their type, NULL equals NULL, and timestamps are compared as instants.
//!
//! # Design notes
//!
//! `compare.rs` is the comparator (normalised cells: numbers within a relative 1e-6, instants,
//! NULL; rows sorted and paired as multisets, or in order; column permutations searched among
//! columns holding the same values).

use std::cmp::Ordering;

use serde_json::Value;

/// A query result as the comparator sees it: each column's PostgreSQL type name (as
/// `sql::ReadResult` reports it, `INT4`, `NUMERIC`, `TIMESTAMPTZ` ...) and the rows as JSON.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResultTable {
    pub(crate) types: Vec<String>,
    pub(crate) rows: Vec<Vec<Value>>,
}

/// Whether two results agree, and why not when they do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Equal,
    Different(String),
}

/// The relative tolerance of numbers.
const RELATIVE_TOLERANCE: f64 = 1e-6;
/// How many column permutations are tried at most.
const MAX_PERMUTATIONS: usize = 1_000;
/// Up to this many rows, rows that sorting could not pair are matched one by one.
const MAX_ROWS_FOR_MATCHING: usize = 2_000;

/// One value, normalised so that equal things compare equal.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Bool(bool),
    Number(f64),
    /// Microseconds since the Unix epoch (timestamps without a zone are taken as UTC).
    Instant(i64),
    Text(String),
}

impl Cell {
    fn rank(&self) -> u8 {
        match self {
            Cell::Null => 0,
            Cell::Bool(_) => 1,
            Cell::Number(_) => 2,
            Cell::Instant(_) => 3,
            Cell::Text(_) => 4,
        }
    }

    /// A total order, used to sort rows before pairing them.
    fn order(&self, other: &Cell) -> Ordering {
        match (self, other) {
            (Cell::Bool(a), Cell::Bool(b)) => a.cmp(b),
            (Cell::Number(a), Cell::Number(b)) => a.total_cmp(b),
            (Cell::Instant(a), Cell::Instant(b)) => a.cmp(b),
            (Cell::Text(a), Cell::Text(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }

    fn matches(&self, other: &Cell) -> bool {
        match (self, other) {
            (Cell::Null, Cell::Null) => true,
            (Cell::Bool(a), Cell::Bool(b)) => a == b,
            (Cell::Number(a), Cell::Number(b)) => numbers_equal(*a, *b),
            (Cell::Instant(a), Cell::Instant(b)) => a == b,
            (Cell::Text(a), Cell::Text(b)) => a == b,
            _ => false,
        }
    }
}

fn numbers_equal(a: f64, b: f64) -> bool {
    #[allow(clippy::float_cmp, reason = "exact equality first, infinities included")]
    let exact = a == b;
    exact || (a - b).abs() <= RELATIVE_TOLERANCE * a.abs().max(b.abs())
}

fn is_numeric_type(type_name: &str) -> bool {
    matches!(
        type_name.to_ascii_uppercase().as_str(),
        "INT2" | "INT4" | "INT8" | "NUMERIC" | "FLOAT4" | "FLOAT8" | "OID"
    )
}

fn is_time_type(type_name: &str) -> bool {
    matches!(type_name.to_ascii_uppercase().as_str(), "TIMESTAMP" | "TIMESTAMPTZ" | "DATE")
}

/// `2024-01-31`, `2024-01-31T10:00:00.5` or `2024-01-31T10:00:00Z` as microseconds since the
/// epoch (a space instead of the `T`, and an offset such as `+02:00`, are read too).
fn instant(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(time) = chrono::DateTime::parse_from_rfc3339(&text.replacen(' ', "T", 1)) {
        return Some(time.timestamp_micros());
    }
    let bare = text.strip_suffix('Z').unwrap_or(text);
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(time) = chrono::NaiveDateTime::parse_from_str(bare, format) {
            return Some(time.and_utc().timestamp_micros());
        }
    }
    chrono::NaiveDate::parse_from_str(bare, "%Y-%m-%d")
        .ok()
        .and_then(|date| date.and_hms_opt(0, 0, 0))
        .map(|time| time.and_utc().timestamp_micros())
}

fn cell(value: &Value, type_name: &str) -> Cell {
    match value {
        Value::Null => Cell::Null,
        Value::Bool(flag) => Cell::Bool(*flag),
        Value::Number(number) => {
            number.as_f64().map_or_else(|| Cell::Text(number.to_string()), Cell::Number)
        }
        Value::String(text) if is_numeric_type(type_name) => match text.parse::<f64>() {
            Ok(number) if !number.is_nan() => Cell::Number(number),
            _ => Cell::Text(text.clone()),
        },
        Value::String(text) if is_time_type(type_name) => {
            instant(text).map_or_else(|| Cell::Text(text.clone()), Cell::Instant)
        }
        Value::String(text) => Cell::Text(text.clone()),
        other => Cell::Text(other.to_string()),
    }
}

fn cells(table: &ResultTable) -> Vec<Vec<Cell>> {
    table
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(index, value)| {
                    cell(value, table.types.get(index).map_or("", String::as_str))
                })
                .collect()
        })
        .collect()
}

fn row_order(a: &[Cell], b: &[Cell]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(x, y)| x.order(y))
        .find(|ordering| ordering.is_ne())
        .unwrap_or_else(|| a.len().cmp(&b.len()))
}

fn rows_match(a: &[Cell], b: &[Cell]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.matches(y))
}

/// Whether two lists of rows hold the same rows, in order or as multisets.
fn same_rows(gold: &[Vec<Cell>], generated: &[Vec<Cell>], ordered: bool) -> bool {
    if gold.len() != generated.len() {
        return false;
    }
    if ordered {
        return gold.iter().zip(generated).all(|(a, b)| rows_match(a, b));
    }
    let mut gold: Vec<&Vec<Cell>> = gold.iter().collect();
    let mut generated: Vec<&Vec<Cell>> = generated.iter().collect();
    gold.sort_by(|a, b| row_order(a, b));
    generated.sort_by(|a, b| row_order(a, b));
    if gold.iter().zip(&generated).all(|(a, b)| rows_match(a, b)) {
        return true;
    }
    // Numbers within the tolerance may sort differently: pair the rest one by one.
    if gold.len() > MAX_ROWS_FOR_MATCHING {
        return false;
    }
    let mut used = vec![false; generated.len()];
    gold.iter().all(|row| {
        let found = generated
            .iter()
            .enumerate()
            .position(|(index, candidate)| !used[index] && rows_match(row, candidate));
        found.map(|index| used[index] = true).is_some()
    })
}

fn column(rows: &[Vec<Cell>], index: usize) -> Vec<Cell> {
    let mut values: Vec<Cell> = rows.iter().map(|row| row[index].clone()).collect();
    values.sort_by(Cell::order);
    values
}

fn permuted(rows: &[Vec<Cell>], permutation: &[usize]) -> Vec<Vec<Cell>> {
    rows.iter().map(|row| permutation.iter().map(|&index| row[index].clone()).collect()).collect()
}

/// Compare a generated result with the gold one.
pub(crate) fn compare(gold: &ResultTable, generated: &ResultTable, ordered: bool) -> Verdict {
    let (gold_columns, generated_columns) = (gold.types.len(), generated.types.len());
    if gold_columns != generated_columns {
        return Verdict::Different(format!(
            "{generated_columns} column(s) where the gold result has {gold_columns}"
        ));
    }
    if gold.rows.len() != generated.rows.len() {
        return Verdict::Different(format!(
            "{} row(s) where the gold result has {}",
            generated.rows.len(),
            gold.rows.len()
        ));
    }
    let gold_cells = cells(gold);
    let generated_cells = cells(generated);
    if same_rows(&gold_cells, &generated_cells, ordered) {
        return Verdict::Equal;
    }
    // Columns in another order: each gold column may map to a generated column holding the
    // same values; try those assignments.
    let gold_values: Vec<Vec<Cell>> = (0..gold_columns).map(|i| column(&gold_cells, i)).collect();
    let generated_values: Vec<Vec<Cell>> =
        (0..gold_columns).map(|i| column(&generated_cells, i)).collect();
    let candidates: Vec<Vec<usize>> = gold_values
        .iter()
        .map(|values| {
            (0..gold_columns)
                .filter(|&j| {
                    values.len() == generated_values[j].len()
                        && values.iter().zip(&generated_values[j]).all(|(a, b)| a.matches(b))
                })
                .collect()
        })
        .collect();
    let mut tried = 0;
    let mut permutation = Vec::with_capacity(gold_columns);
    let mut taken = vec![false; gold_columns];
    let found = search(
        &candidates,
        &mut permutation,
        &mut taken,
        &mut tried,
        &mut |permutation: &[usize]| {
            permutation.iter().enumerate().any(|(i, &j)| i != j)
                && same_rows(&gold_cells, &permuted(&generated_cells, permutation), ordered)
        },
    );
    if found {
        return Verdict::Equal;
    }
    if ordered && same_rows(&gold_cells, &generated_cells, false) {
        return Verdict::Different("the same rows in another order".to_owned());
    }
    Verdict::Different("the rows differ".to_owned())
}

/// Depth-first over the candidate columns of each gold column, each generated column used once.
fn search(
    candidates: &[Vec<usize>],
    permutation: &mut Vec<usize>,
    taken: &mut [bool],
    tried: &mut usize,
    accept: &mut dyn FnMut(&[usize]) -> bool,
) -> bool {
    if *tried >= MAX_PERMUTATIONS {
        return false;
    }
    let position = permutation.len();
    if position == candidates.len() {
        *tried += 1;
        return accept(permutation);
    }
    for &choice in &candidates[position] {
        if taken[choice] {
            continue;
        }
        taken[choice] = true;
        permutation.push(choice);
        let found = search(candidates, permutation, taken, tried, accept);
        permutation.pop();
        taken[choice] = false;
        if found {
            return true;
        }
    }
    false
}

/// Whether a statement's top level has an `ORDER BY` (then the order of its rows is part of
/// the answer).
pub(crate) fn has_top_level_order_by(sql: &str) -> bool {
    use pg_query::NodeEnum;
    let Ok(parsed) = pg_query::parse(sql, 0) else { return false };
    let first = parsed
        .protobuf
        .stmts
        .first()
        .and_then(|raw| raw.stmt.as_ref())
        .and_then(|node| node.node.as_ref());
    let Some(NodeEnum::SelectStmt(select)) = first else { return false };
    !select.sort_clause.is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn table(types: &[&str], rows: Value) -> ResultTable {
        let rows =
            rows.as_array().unwrap().iter().map(|row| row.as_array().unwrap().clone()).collect();
        ResultTable { types: types.iter().map(|name| (*name).to_owned()).collect(), rows }
    }

    /// A result in a case: its column types and rows.
    type Side<'a> = (&'a [&'a str], Value);

    fn check(gold: Side<'_>, generated: Side<'_>, ordered: bool, expected: bool, case: &str) {
        let verdict = compare(&table(gold.0, gold.1), &table(generated.0, generated.1), ordered);
        assert_eq!(verdict == Verdict::Equal, expected, "{case}: {verdict:?}");
    }

    #[test]
    fn results_are_compared_by_the_rules_of_execution_accuracy() {
        let int_text: &[&str] = &["INT4", "TEXT"];
        let text_int: &[&str] = &["TEXT", "INT4"];
        let cases: Vec<(&str, Side<'_>, Side<'_>, bool, bool)> = vec![
            (
                "same rows, same order",
                (int_text, json!([[1, "a"], [2, "b"]])),
                (int_text, json!([[1, "a"], [2, "b"]])),
                false,
                true,
            ),
            (
                "order ignored by default",
                (int_text, json!([[1, "a"], [2, "b"]])),
                (int_text, json!([[2, "b"], [1, "a"]])),
                false,
                true,
            ),
            (
                "order counts when it matters",
                (int_text, json!([[1, "a"], [2, "b"]])),
                (int_text, json!([[2, "b"], [1, "a"]])),
                true,
                false,
            ),
            (
                "columns in another order",
                (int_text, json!([[1, "a"], [2, "b"]])),
                (text_int, json!([["a", 1], ["b", 2]])),
                false,
                true,
            ),
            (
                "columns in another order, rows in order",
                (int_text, json!([[1, "a"], [2, "b"]])),
                (text_int, json!([["a", 1], ["b", 2]])),
                true,
                true,
            ),
            (
                "a permutation must keep rows together",
                (&["INT4", "INT4"], json!([[1, 2], [3, 4]])),
                (&["INT4", "INT4"], json!([[1, 4], [3, 2]])),
                false,
                false,
            ),
            (
                "swapped columns of one type",
                (&["INT4", "INT4"], json!([[1, 2], [3, 4]])),
                (&["INT4", "INT4"], json!([[2, 1], [4, 3]])),
                false,
                true,
            ),
            (
                "integer, numeric and float are numbers",
                (&["INT8", "NUMERIC"], json!([[3, "2.50"]])),
                (&["NUMERIC", "FLOAT8"], json!([["3", 2.5]])),
                false,
                true,
            ),
            (
                "numbers within a relative 1e-6",
                (&["NUMERIC"], json!([["1000000.00"]])),
                (&["FLOAT8"], json!([[1_000_000.4]])),
                false,
                true,
            ),
            (
                "numbers beyond a relative 1e-6",
                (&["NUMERIC"], json!([["1000000.00"]])),
                (&["FLOAT8"], json!([[1_000_002.0]])),
                false,
                false,
            ),
            (
                "a rounded average is a different number",
                (&["NUMERIC"], json!([["5.6516"]])),
                (&["NUMERIC"], json!([["5.65"]])),
                false,
                false,
            ),
            (
                "NULL equals NULL",
                (int_text, json!([[1, null]])),
                (int_text, json!([[1, null]])),
                false,
                true,
            ),
            (
                "NULL is not an empty string",
                (int_text, json!([[1, null]])),
                (int_text, json!([[1, ""]])),
                false,
                false,
            ),
            (
                "duplicates count",
                (int_text, json!([[1, "a"], [1, "a"], [2, "b"]])),
                (int_text, json!([[1, "a"], [2, "b"], [2, "b"]])),
                false,
                false,
            ),
            (
                "duplicates in another order",
                (int_text, json!([[1, "a"], [1, "a"], [2, "b"]])),
                (int_text, json!([[1, "a"], [2, "b"], [1, "a"]])),
                false,
                true,
            ),
            (
                "a missing row",
                (int_text, json!([[1, "a"], [2, "b"]])),
                (int_text, json!([[1, "a"]])),
                false,
                false,
            ),
            (
                "an extra column",
                (&["INT4"], json!([[1], [2]])),
                (int_text, json!([[1, "a"], [2, "b"]])),
                false,
                false,
            ),
            (
                "timestamps as instants",
                (&["TIMESTAMP"], json!([["2024-01-31T10:00:00"]])),
                (&["TIMESTAMPTZ"], json!([["2024-01-31T10:00:00Z"]])),
                false,
                true,
            ),
            (
                "a date is its midnight",
                (&["DATE"], json!([["2024-01-31"]])),
                (&["TIMESTAMP"], json!([["2024-01-31T00:00:00"]])),
                false,
                true,
            ),
            (
                "different instants",
                (&["TIMESTAMP"], json!([["2024-01-31T10:00:00"]])),
                (&["TIMESTAMPTZ"], json!([["2024-01-31T11:00:00Z"]])),
                false,
                false,
            ),
            (
                "a number is not its text",
                (&["INT4"], json!([[5]])),
                (&["TEXT"], json!([["5"]])),
                false,
                false,
            ),
            ("two empty results", (&["INT4"], json!([])), (&["INT8"], json!([])), false, true),
        ];
        for (case, gold, generated, ordered, expected) in cases {
            check(gold, generated, ordered, expected, case);
        }
    }

    #[test]
    fn a_top_level_order_by_is_found_and_an_inner_one_is_not() {
        let cases = [
            ("SELECT name FROM artist ORDER BY name", true),
            ("SELECT name FROM artist", false),
            ("SELECT * FROM (SELECT name FROM artist ORDER BY name) a", false),
            ("SELECT 1 UNION SELECT 2 ORDER BY 1", true),
            ("WITH a AS (SELECT 1 AS x) SELECT x FROM a ORDER BY x DESC", true),
            ("SELECT row_number() OVER (ORDER BY name) FROM artist", false),
        ];
        for (sql, expected) in cases {
            assert_eq!(has_top_level_order_by(sql), expected, "{sql}");
        }
    }
}
