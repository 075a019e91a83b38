//! The question file of `orca eval`: YAML (a list) or JSON Lines of
//! `{id, question, gold_sql, tags?, order_matters?}`. Everything is checked before any model is
//! called: an unreadable file, a malformed entry, a missing or empty field or a duplicate id is
//! an error naming the line (JSON Lines) or the entry and its id (YAML).
//!
//! # Design notes
//!
//! `questions.rs` reads and checks the question file (YAML or JSON Lines; errors name the line or
//! the entry and its id).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// One question with its gold SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Question {
    pub(crate) id: String,
    pub(crate) question: String,
    pub(crate) gold_sql: String,
    pub(crate) tags: Vec<String>,
    pub(crate) order_matters: bool,
}

/// Why a question file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QuestionsError {
    #[error("cannot read the question file {path}: {error}")]
    Unreadable { path: String, error: std::io::Error },
    #[error("{path}: not valid YAML: {message}")]
    Yaml { path: String, message: String },
    #[error("{path}: the YAML must be a list of questions")]
    NotAList { path: String },
    #[error("{path}: {place}: {message}")]
    Entry { path: String, place: String, message: String },
    #[error("{path}: {place}: duplicate id `{id}` (first used by {first})")]
    Duplicate { path: String, place: String, id: String, first: String },
    #[error("{path}: holds no questions")]
    Empty { path: String },
}

/// An entry as written; `id` may be a number in YAML.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuestion {
    id: RawId,
    question: String,
    gold_sql: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    order_matters: bool,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawId {
    Text(String),
    Number(i64),
}

/// Read and check a question file.
///
/// # Errors
///
/// See [`QuestionsError`].
pub(crate) fn load(path: &Path) -> Result<Vec<Question>, QuestionsError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|error| QuestionsError::Unreadable { path: shown.clone(), error })?;
    parse(&text, &shown, is_json_lines(path, &text))
}

/// JSON Lines by extension (`.jsonl`, `.ndjson`), YAML by extension (`.yaml`, `.yml`), else by
/// the first character that is not blank.
fn is_json_lines(path: &Path, text: &str) -> bool {
    match path.extension().and_then(|extension| extension.to_str()) {
        Some("jsonl" | "ndjson") => true,
        Some("yaml" | "yml") => false,
        _ => text.trim_start().starts_with('{'),
    }
}

/// Parse the text of a question file (`path` only names it in errors).
///
/// # Errors
///
/// See [`QuestionsError`].
pub(crate) fn parse(
    text: &str,
    path: &str,
    json_lines: bool,
) -> Result<Vec<Question>, QuestionsError> {
    let entries: Vec<(String, Value)> = if json_lines {
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let place = format!("line {}", index + 1);
            let value: Value =
                serde_json::from_str(line).map_err(|error| QuestionsError::Entry {
                    path: path.to_owned(),
                    place: place.clone(),
                    message: format!("not valid JSON: {error}"),
                })?;
            entries.push((place, value));
        }
        entries
    } else {
        let document: Value = serde_saphyr::from_str(text).map_err(|error| {
            QuestionsError::Yaml { path: path.to_owned(), message: error.to_string() }
        })?;
        match document {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(index, item)| {
                    let id = item.get("id").map(|id| match id {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    });
                    let place = match id {
                        Some(id) => format!("question {} (id `{id}`)", index + 1),
                        None => format!("question {}", index + 1),
                    };
                    (place, item)
                })
                .collect(),
            Value::Null => Vec::new(),
            _ => return Err(QuestionsError::NotAList { path: path.to_owned() }),
        }
    };
    let mut questions = Vec::with_capacity(entries.len());
    let mut seen: HashMap<String, String> = HashMap::new();
    for (place, value) in entries {
        let entry = |message: String| QuestionsError::Entry {
            path: path.to_owned(),
            place: place.clone(),
            message,
        };
        let raw: RawQuestion =
            serde_json::from_value(value).map_err(|error| entry(error.to_string()))?;
        let id = match raw.id {
            RawId::Text(text) => text.trim().to_owned(),
            RawId::Number(number) => number.to_string(),
        };
        if id.is_empty() {
            return Err(entry("`id` is empty".to_owned()));
        }
        for (field, value) in [("question", &raw.question), ("gold_sql", &raw.gold_sql)] {
            if value.trim().is_empty() {
                return Err(entry(format!("`{field}` is empty")));
            }
        }
        if let Some(first) = seen.get(&id) {
            return Err(QuestionsError::Duplicate {
                path: path.to_owned(),
                place,
                id,
                first: first.clone(),
            });
        }
        seen.insert(id.clone(), place.clone());
        let mut tags: Vec<String> = raw
            .tags
            .iter()
            .map(|tag| tag.trim().to_owned())
            .filter(|tag| !tag.is_empty())
            .collect();
        tags.dedup();
        questions.push(Question {
            id,
            question: raw.question.trim().to_owned(),
            gold_sql: raw.gold_sql.trim().trim_end_matches(';').trim().to_owned(),
            tags,
            order_matters: raw.order_matters,
        });
    }
    if questions.is_empty() {
        return Err(QuestionsError::Empty { path: path.to_owned() });
    }
    Ok(questions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_lines_give_the_same_questions() {
        let yaml = "- id: q1\n  question: How many artists?\n  gold_sql: |\n    SELECT count(*) FROM artist;\n  tags: [aggregation]\n- id: 2\n  question: Names\n  gold_sql: SELECT name FROM artist ORDER BY name\n  order_matters: true\n";
        let jsonl = "{\"id\": \"q1\", \"question\": \"How many artists?\", \"gold_sql\": \"SELECT count(*) FROM artist;\", \"tags\": [\"aggregation\"]}\n\n{\"id\": 2, \"question\": \"Names\", \"gold_sql\": \"SELECT name FROM artist ORDER BY name\", \"order_matters\": true}\n";
        let from_yaml = parse(yaml, "q.yaml", false).unwrap();
        let from_jsonl = parse(jsonl, "q.jsonl", true).unwrap();
        assert_eq!(from_yaml, from_jsonl);
        assert_eq!(from_yaml[0].gold_sql, "SELECT count(*) FROM artist");
        assert_eq!(from_yaml[1].id, "2");
        assert!(from_yaml[1].order_matters);
    }

    #[test]
    fn a_bad_entry_is_named_by_its_line_or_its_id() {
        let cases: [(&str, bool, &str); 7] = [
            (
                "{\"id\": \"a\", \"question\": \"x\", \"gold_sql\": \"SELECT 1\"}\n{\"id\": \"b\", \"question\": \"y\"}\n",
                true,
                "q: line 2: missing field `gold_sql`",
            ),
            ("{\"id\": \"a\", \"question\": \"x\",\n", true, "q: line 1: not valid JSON"),
            (
                "{\"id\": \"a\", \"question\": \"x\", \"gold_sql\": \"SELECT 1\"}\n{\"id\": \"a\", \"question\": \"y\", \"gold_sql\": \"SELECT 2\"}\n",
                true,
                "q: line 2: duplicate id `a` (first used by line 1)",
            ),
            (
                "- id: a\n  question: x\n  gold_sql: SELECT 1\n- id: b\n  gold_sql: SELECT 2\n",
                false,
                "q: question 2 (id `b`): missing field `question`",
            ),
            (
                "- id: a\n  question: x\n  gold_sql: SELECT 1\n  colour: red\n",
                false,
                "q: question 1 (id `a`): unknown field `colour`",
            ),
            ("- id: a\n  question: x\n  gold_sql: '  '\n", false, "`gold_sql` is empty"),
            ("id: a\n", false, "q: the YAML must be a list of questions"),
        ];
        for (text, json_lines, expected) in cases {
            let error = parse(text, "q", json_lines).unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        assert!(parse("", "q", false).unwrap_err().to_string().contains("holds no questions"));
    }
}
