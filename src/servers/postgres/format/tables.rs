//! The dataset as text: a Markdown table, RFC 4180 CSV and JSON objects with unique keys.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::{Map, Value};

use super::cells::{ColumnKind, cell, cell_text, column_kind};
use super::{Column, Dataset};

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

pub(super) fn unique_names(columns: &[Column]) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::testing::data;
    use super::*;

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
}
