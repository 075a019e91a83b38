//! Reading result data in the shapes a client passes it back: a `TabularResult`, an array of row
//! objects, CSV or JSON text, checked against the size limits.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::chart::counted;
use super::{Column, Dataset, FormatError, MAX_CELLS, MAX_COLUMNS};

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

/// A CSV field as a value: empty is null (that is how [`csv_text`](super::csv_text) writes null),
/// anything else stays a string.
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::shape;
    use super::*;

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
}
