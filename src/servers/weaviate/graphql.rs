//! GraphQL assembled from typed values, never from spliced text: names are checked against
//! `^[A-Za-z_][A-Za-z0-9_]*$` before they go in, strings are written as GraphQL string literals
//! (quotes, backslashes and control characters escaped; other characters sent as UTF-8, since
//! Weaviate's parser turns an escaped surrogate pair into U+FFFD), numbers must be finite.
//! Also reads the answers back: `_additional` values that Weaviate types as strings become
//! numbers.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// An identifier that may go into a query: a collection, property or vector name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Name(String);

impl Name {
    /// Check `text` as a name; `what` says which argument it came from.
    ///
    /// # Errors
    ///
    /// A message naming the argument when `text` is not a GraphQL name.
    pub(crate) fn parse(text: &str, what: &str) -> Result<Name, String> {
        let mut chars = text.chars();
        let valid_start = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if valid_start && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') && text.len() <= 256
        {
            Ok(Name(text.to_owned()))
        } else {
            Err(format!(
                "{what} `{}` is not a valid name: use letters, digits and underscores, starting with a letter or underscore",
                text.chars().take(80).collect::<String>()
            ))
        }
    }

    /// A collection name: checked, then with its first letter upper-cased, as Weaviate stores it.
    ///
    /// # Errors
    ///
    /// As [`Name::parse`].
    pub(crate) fn collection(text: &str) -> Result<Name, String> {
        let name = Name::parse(text, "collection_name")?;
        let mut chars = name.0.chars();
        let first = chars.next().map(|c| c.to_ascii_uppercase()).unwrap_or_default();
        Ok(Name(std::iter::once(first).chain(chars).collect()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `text` as a GraphQL string literal, quotes included.
pub(crate) fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A GraphQL input value. Object keys are argument names chosen by orca's code.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Input {
    String(String),
    Int(i64),
    /// Finite only; checked where the number comes in.
    Float(f64),
    Bool(bool),
    Enum(&'static str),
    List(Vec<Input>),
    Object(Vec<(&'static str, Input)>),
}

impl Input {
    fn write(&self, out: &mut String) {
        match self {
            Input::String(text) => out.push_str(&string_literal(text)),
            Input::Int(number) => {
                let _ = write!(out, "{number}");
            }
            Input::Float(number) => {
                // Debug keeps a fractional part (`1.0`), so the literal is a Float.
                let number = if number.is_finite() { *number } else { 0.0 };
                let _ = write!(out, "{number:?}");
            }
            Input::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
            Input::Enum(name) => out.push_str(name),
            Input::List(items) => {
                out.push('[');
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        out.push_str(", ");
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Input::Object(fields) => {
                out.push('{');
                for (index, (key, value)) in fields.iter().enumerate() {
                    if index > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(key);
                    out.push_str(": ");
                    value.write(out);
                }
                out.push('}');
            }
        }
    }

    pub(crate) fn strings(items: &[String]) -> Input {
        Input::List(items.iter().cloned().map(Input::String).collect())
    }

    pub(crate) fn names(items: &[Name]) -> Input {
        Input::List(items.iter().map(|name| Input::String(name.0.clone())).collect())
    }
}

/// One selected property of a result, by its data type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Field {
    Plain(Name),
    /// `geoCoordinates`: `{ latitude longitude }`.
    Geo(Name),
    /// `phoneNumber`: its parsed parts.
    Phone(Name),
}

impl Field {
    fn write(&self, out: &mut String) {
        match self {
            Field::Plain(name) => out.push_str(name.as_str()),
            Field::Geo(name) => {
                let _ = write!(out, "{name} {{ latitude longitude }}");
            }
            Field::Phone(name) => {
                let _ = write!(
                    out,
                    "{name} {{ input internationalFormatted nationalFormatted national countryCode defaultCountry valid }}"
                );
            }
        }
    }
}

/// `{ Get { Class(arguments) { fields _additional { metadata } } } }`.
pub(crate) fn get_query(
    collection: &Name,
    arguments: &[(&'static str, Input)],
    fields: &[Field],
    additional: &[&'static str],
) -> String {
    let mut out = format!("{{ Get {{ {collection}");
    write_arguments(arguments, &mut out);
    out.push_str(" {");
    for field in fields {
        out.push(' ');
        field.write(&mut out);
    }
    if !additional.is_empty() {
        out.push_str(" _additional {");
        for name in additional {
            out.push(' ');
            out.push_str(name);
        }
        out.push_str(" }");
    }
    out.push_str(" } } }");
    out
}

/// What an aggregation selects for one property.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AggregateField {
    pub(crate) property: Name,
    /// Metric names (`count`, `mean`, ...), from orca's closed list.
    pub(crate) metrics: Vec<&'static str>,
    /// `topOccurrences(limit: n) { value occurs }` when set.
    pub(crate) top_occurrences: Option<i64>,
}

/// `{ Aggregate { Class(arguments) { meta { count } property { metrics } } } }`.
pub(crate) fn aggregate_query(
    collection: &Name,
    arguments: &[(&'static str, Input)],
    fields: &[AggregateField],
) -> String {
    let mut out = format!("{{ Aggregate {{ {collection}");
    write_arguments(arguments, &mut out);
    out.push_str(" { meta { count }");
    for field in fields {
        let _ = write!(out, " {} {{", field.property);
        for metric in &field.metrics {
            out.push(' ');
            out.push_str(metric);
        }
        if let Some(limit) = field.top_occurrences {
            let _ = write!(out, " topOccurrences(limit: {limit}) {{ value occurs }}");
        }
        out.push_str(" }");
    }
    out.push_str(" } } }");
    out
}

fn write_arguments(arguments: &[(&'static str, Input)], out: &mut String) {
    if arguments.is_empty() {
        return;
    }
    out.push('(');
    for (index, (key, value)) in arguments.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        out.push_str(key);
        out.push_str(": ");
        value.write(out);
    }
    out.push(')');
}

/// One result of a search, in orca's shape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hit {
    pub(crate) class: String,
    pub(crate) id: Option<String>,
    pub(crate) properties: Map<String, Value>,
    pub(crate) additional: Map<String, Value>,
}

/// Read `data.Get.<Class>` into hits; `requested` is the metadata the caller asked for (the
/// rest of `_additional`, such as the `id` orca always asks for, is not repeated there).
///
/// # Errors
///
/// A description of what was missing when the answer does not have the GraphQL shape.
pub(crate) fn read_hits(
    data: &Value,
    collection: &Name,
    requested: &[&'static str],
) -> Result<Vec<Hit>, String> {
    let items = data
        .get("Get")
        .and_then(|get| get.get(collection.as_str()))
        .ok_or_else(|| format!("the answer has no data.Get.{collection}"))?;
    let Some(items) = items.as_array() else {
        return if items.is_null() {
            Ok(Vec::new())
        } else {
            Err(format!("data.Get.{collection} is not a list"))
        };
    };
    let mut hits = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(object) = item else {
            return Err(format!("an item of data.Get.{collection} is not an object"));
        };
        let mut properties = object.clone();
        let extra = match properties.remove("_additional") {
            Some(Value::Object(extra)) => extra,
            _ => Map::new(),
        };
        let id = extra.get("id").and_then(Value::as_str).map(str::to_owned);
        let additional = extra
            .into_iter()
            .filter(|(key, _)| requested.contains(&key.as_str()))
            .map(|(key, value)| {
                let value = numeric_metadata(&key, value);
                (key, value)
            })
            .collect();
        hits.push(Hit { class: collection.to_string(), id, properties, additional });
    }
    Ok(hits)
}

/// Weaviate types `score`, `creationTimeUnix` and `lastUpdateTimeUnix` as GraphQL strings;
/// they are numbers.
fn numeric_metadata(key: &str, value: Value) -> Value {
    let Value::String(text) = &value else { return value };
    match key {
        "score" | "distance" | "certainty" => text
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(value, Value::Number),
        "creationTimeUnix" | "lastUpdateTimeUnix" => {
            text.trim().parse::<i64>().map_or(value, Value::from)
        }
        _ => value,
    }
}

/// Read `data.Aggregate.<Class>[0]` into `{count, properties: {name: metrics}}`.
///
/// # Errors
///
/// A description of what was missing when the answer does not have the GraphQL shape.
pub(crate) fn read_aggregate(data: &Value, collection: &Name) -> Result<Value, String> {
    let groups = data
        .get("Aggregate")
        .and_then(|aggregate| aggregate.get(collection.as_str()))
        .and_then(Value::as_array)
        .ok_or_else(|| format!("the answer has no data.Aggregate.{collection} list"))?;
    let Some(Value::Object(group)) = groups.first() else {
        return Ok(serde_json::json!({"count": 0, "properties": {}}));
    };
    let mut group = group.clone();
    let count = group.remove("meta").and_then(|meta| meta.get("count").cloned());
    Ok(serde_json::json!({"count": count.unwrap_or(Value::from(0)), "properties": group}))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strings_are_escaped_as_graphql_literals() {
        let cases = [
            ("plain", "\"plain\""),
            ("say \"hi\"", "\"say \\\"hi\\\"\""),
            ("a\\b", "\"a\\\\b\""),
            ("line\nnext\r\ttab", "\"line\\nnext\\r\\ttab\""),
            ("bell\u{7}", "\"bell\\u0007\""),
            ("{ } ) ( #", "\"{ } ) ( #\""),
            ("café 😀 \u{2028}", "\"café 😀 \u{2028}\""),
        ];
        for (input, expected) in cases {
            assert_eq!(string_literal(input), expected, "{input:?}");
        }
    }

    #[test]
    fn names_are_checked_before_they_go_in() {
        for good in ["Article", "_x", "a1_b"] {
            assert!(Name::parse(good, "x").is_ok(), "{good}");
        }
        for bad in ["", "1a", "a-b", "a b", "a{b", "Article) { x", "é"] {
            assert!(Name::parse(bad, "x").is_err(), "{bad}");
        }
        assert_eq!(Name::collection("article").unwrap().as_str(), "Article");
    }

    #[test]
    fn a_query_is_built_from_typed_parts() {
        let collection = Name::collection("Article").unwrap();
        let query = get_query(
            &collection,
            &[
                (
                    "hybrid",
                    Input::Object(vec![
                        ("query", Input::String("a \"b\"".into())),
                        ("alpha", Input::Float(1.0)),
                    ]),
                ),
                ("limit", Input::Int(3)),
                ("where", Input::Object(vec![("operator", Input::Enum("Equal"))])),
            ],
            &[Field::Plain(Name::parse("title", "p").unwrap())],
            &["id", "score"],
        );
        assert_eq!(
            query,
            "{ Get { Article(hybrid: {query: \"a \\\"b\\\"\", alpha: 1.0}, limit: 3, where: {operator: Equal}) { title _additional { id score } } } }"
        );
    }

    #[test]
    fn metadata_strings_become_numbers() {
        let data = json!({"Get": {"Article": [{"title": "x", "_additional": {
            "id": "u", "score": "0.8", "distance": null, "creationTimeUnix": "1767225600000",
            "explainScore": "text"}}]}});
        let collection = Name::collection("Article").unwrap();
        let hits =
            read_hits(&data, &collection, &["score", "creationTimeUnix", "explainScore"]).unwrap();
        assert_eq!(hits[0].id.as_deref(), Some("u"));
        assert_eq!(
            Value::Object(hits[0].additional.clone()),
            json!({"score": 0.8, "creationTimeUnix": 1767225600000_i64, "explainScore": "text"})
        );
        assert_eq!(Value::Object(hits[0].properties.clone()), json!({"title": "x"}));
    }
}
