//! The fake Weaviate's GraphQL endpoint: every query is parsed with `graphql-parser`, then
//! checked the way Weaviate's schema would (known collections, arguments and their types, enum
//! operators in `where`, known properties and `_additional` fields, tenant rules, the
//! vectorizer's key header) and answered from the stored objects. Query-level problems come back
//! as HTTP 200 with `errors`, as Weaviate does; anything orca should never send (a syntax error,
//! a wrongly typed argument) is also recorded as a violation.

use std::collections::BTreeMap;

use graphql_parser::query::{Definition, Document, OperationDefinition, Selection, Value as Gql};
use serde_json::{Map, Value, json};

use super::fake_weaviate::{Store, Stored, VECTORIZER_KEY, check_tenant, find_class};

type Field = graphql_parser::query::Field<'static, String>;

/// A query-level error, and whether orca broke a rule by causing it.
struct Refusal {
    message: String,
    violation: bool,
}

fn refuse(message: impl Into<String>) -> Refusal {
    Refusal { message: message.into(), violation: false }
}

fn violation(message: impl Into<String>) -> Refusal {
    Refusal { message: message.into(), violation: true }
}

/// The JSON answer to one GraphQL query.
pub(crate) fn answer(state: &mut Store, query: &str, headers: &BTreeMap<String, String>) -> Value {
    let document: Document<'static, String> = match graphql_parser::parse_query::<String>(query) {
        Ok(document) => document.into_static(),
        Err(error) => {
            state.violations.push(format!("GraphQL syntax error: {error} in {query}"));
            return json!({"data": null, "errors": [{"message": format!("Syntax Error GraphQL request: {error}"), "locations": [{"line": 1, "column": 1}], "path": null}]});
        }
    };
    match run(state, &document, headers) {
        Ok(data) => json!({"data": data}),
        Err(refusal) => {
            if refusal.violation {
                state.violations.push(format!("GraphQL: {} in {query}", refusal.message));
            }
            json!({"data": null, "errors": [{"locations": [{"line": 1, "column": 3}], "path": null, "message": refusal.message}]})
        }
    }
}

fn run(
    state: &mut Store,
    document: &Document<'static, String>,
    headers: &BTreeMap<String, String>,
) -> Result<Value, Refusal> {
    let [Definition::Operation(operation)] = document.definitions.as_slice() else {
        return Err(violation("expected exactly one operation"));
    };
    let selection = match operation {
        OperationDefinition::SelectionSet(set) => set,
        OperationDefinition::Query(query) => &query.selection_set,
        _ => return Err(violation("only queries are served")),
    };
    let [Selection::Field(top)] = selection.items.as_slice() else {
        return Err(violation("expected one top-level field"));
    };
    let [Selection::Field(class_field)] = top.selection_set.items.as_slice() else {
        return Err(violation(format!("expected one collection under {}", top.name)));
    };
    let class = class_field.name.clone();
    let schema = match find_class(state, &class) {
        Some(schema) => schema.clone(),
        None => {
            let holder = if top.name == "Get" { "GetObjectsObj" } else { "AggregateObjectsObj" };
            return Err(refuse(format!("Cannot query field \"{class}\" on type \"{holder}\".")));
        }
    };
    match top.name.as_str() {
        "Get" => {
            get(state, class_field, &schema, headers).map(|items| json!({"Get": {class: items}}))
        }
        "Aggregate" => aggregate(state, class_field, &schema)
            .map(|group| json!({"Aggregate": {class: [group]}})),
        other => Err(refuse(format!("Cannot query field \"{other}\" on type \"WeaviateObj\"."))),
    }
}

fn argument<'f>(field: &'f Field, name: &str) -> Option<&'f Gql<'static, String>> {
    field.arguments.iter().find(|(key, _)| key == name).map(|(_, value)| value)
}

fn object_fields<'v>(
    value: &'v Gql<'static, String>,
    at: &str,
) -> Result<&'v BTreeMap<String, Gql<'static, String>>, Refusal> {
    match value {
        Gql::Object(fields) => Ok(fields),
        _ => {
            Err(violation(format!("Argument \"{at}\" has invalid value: expected an input object")))
        }
    }
}

fn string<'v>(value: &'v Gql<'static, String>, at: &str) -> Result<&'v str, Refusal> {
    match value {
        Gql::String(text) => Ok(text),
        other => Err(violation(format!(
            "Argument \"{at}\" has invalid value {other}.\nExpected type \"String\""
        ))),
    }
}

fn float(value: &Gql<'static, String>, at: &str) -> Result<f64, Refusal> {
    match value {
        Gql::Float(number) => Ok(*number),
        Gql::Int(number) => Ok(number.as_i64().unwrap_or_default() as f64),
        other => Err(violation(format!(
            "Argument \"{at}\" has invalid value {other}.\nExpected type \"Float\""
        ))),
    }
}

fn strings(value: &Gql<'static, String>, at: &str) -> Result<Vec<String>, Refusal> {
    match value {
        Gql::List(items) => items.iter().map(|item| string(item, at).map(str::to_owned)).collect(),
        other => Err(violation(format!(
            "Argument \"{at}\" has invalid value {other}.\nExpected type \"[String]\""
        ))),
    }
}

fn check_keys(
    fields: &BTreeMap<String, Gql<'static, String>>,
    allowed: &[&str],
    at: &str,
) -> Result<(), Refusal> {
    for key in fields.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(violation(format!(
                "Argument \"{at}\" has invalid value: unknown field \"{key}\""
            )));
        }
    }
    Ok(())
}

const OPERATORS: [&str; 13] = [
    "And",
    "Or",
    "Not",
    "Equal",
    "NotEqual",
    "Like",
    "GreaterThan",
    "GreaterThanEqual",
    "LessThan",
    "LessThanEqual",
    "ContainsAny",
    "ContainsAll",
    "IsNull",
];

/// A GraphQL `where` turned into the REST shape, with every type checked.
fn where_to_rest(value: &Gql<'static, String>) -> Result<Value, Refusal> {
    let fields = object_fields(value, "where")?;
    check_keys(
        fields,
        &[
            "operator",
            "operands",
            "path",
            "valueText",
            "valueInt",
            "valueNumber",
            "valueBoolean",
            "valueDate",
        ],
        "where",
    )?;
    let mut out = Map::new();
    match fields.get("operator") {
        Some(Gql::Enum(operator)) if OPERATORS.contains(&operator.as_str()) => {
            out.insert("operator".into(), Value::from(operator.clone()));
        }
        other => {
            return Err(violation(format!(
                "Argument \"where\" has invalid value: operator must be a WhereOperatorEnum, found {other:?}"
            )));
        }
    }
    if let Some(operands) = fields.get("operands") {
        let Gql::List(items) = operands else {
            return Err(violation("where.operands must be a list"));
        };
        let operands: Result<Vec<Value>, Refusal> = items.iter().map(where_to_rest).collect();
        out.insert("operands".into(), Value::Array(operands?));
    }
    if let Some(path) = fields.get("path") {
        out.insert("path".into(), json!(strings(path, "where.path")?));
    }
    for (key, expected) in [
        ("valueText", "s"),
        ("valueInt", "i"),
        ("valueNumber", "f"),
        ("valueBoolean", "b"),
        ("valueDate", "s"),
    ] {
        let Some(value) = fields.get(key) else { continue };
        let convert = |item: &Gql<'static, String>| -> Result<Value, Refusal> {
            match (expected, item) {
                ("s", Gql::String(text)) => Ok(Value::from(text.clone())),
                ("i", Gql::Int(number)) => Ok(Value::from(number.as_i64().unwrap_or_default())),
                ("f", Gql::Float(number)) => Ok(Value::from(*number)),
                ("f", Gql::Int(number)) => {
                    Ok(Value::from(number.as_i64().unwrap_or_default() as f64))
                }
                ("b", Gql::Boolean(flag)) => Ok(Value::from(*flag)),
                _ => Err(violation(format!(
                    "Argument \"where\" has invalid value: {key} of the wrong type: {item}"
                ))),
            }
        };
        match value {
            Gql::List(items) => {
                let items: Result<Vec<Value>, Refusal> = items.iter().map(convert).collect();
                out.insert(format!("{key}Array"), Value::Array(items?));
            }
            single => {
                out.insert(key.to_owned(), convert(single)?);
            }
        }
    }
    let rest = Value::Object(out);
    check_rest_filter(&rest).map_err(violation)?;
    Ok(rest)
}

/// Weaviate's validation of a REST `where`.
pub(crate) fn check_rest_filter(filter: &Value) -> Result<(), String> {
    let operator = filter.get("operator").and_then(Value::as_str).unwrap_or_default();
    if !OPERATORS.contains(&operator) {
        return Err(format!("invalid operator {operator:?}"));
    }
    let operands = filter.get("operands").and_then(Value::as_array);
    if matches!(operator, "And" | "Or" | "Not") {
        let operands = operands.ok_or("operands are required for And, Or, Not")?;
        if operands.is_empty() || (operator == "Not" && operands.len() != 1) {
            return Err(format!("wrong number of operands for {operator}"));
        }
        return operands.iter().try_for_each(check_rest_filter);
    }
    if filter.get("path").and_then(Value::as_array).is_none_or(|path| path.is_empty()) {
        return Err("path is required".to_owned());
    }
    let values = filter
        .as_object()
        .map_or(0, |object| object.keys().filter(|key| key.starts_with("value")).count());
    if values != 1 {
        return Err(format!("exactly one value is required, found {values}"));
    }
    Ok(())
}

fn compare(left: &Value, right: &Value) -> Option<std::cmp::Ordering> {
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

fn like(pattern: &str, text: &str) -> bool {
    fn go(pattern: &[char], text: &[char]) -> bool {
        match (pattern.first(), text.first()) {
            (None, None) => true,
            (Some('*'), _) => {
                go(&pattern[1..], text) || (!text.is_empty() && go(pattern, &text[1..]))
            }
            (Some('?'), Some(_)) => go(&pattern[1..], &text[1..]),
            (Some(p), Some(t)) if p.eq_ignore_ascii_case(t) => go(&pattern[1..], &text[1..]),
            _ => false,
        }
    }
    go(&pattern.chars().collect::<Vec<_>>(), &text.chars().collect::<Vec<_>>())
}

/// Whether an object's properties satisfy a REST `where`.
pub(crate) fn matches(filter: &Value, properties: &Map<String, Value>) -> bool {
    let operator = filter["operator"].as_str().unwrap_or_default();
    let operands = || filter["operands"].as_array().into_iter().flatten();
    match operator {
        "And" => return operands().all(|operand| matches(operand, properties)),
        "Or" => return operands().any(|operand| matches(operand, properties)),
        "Not" => return !operands().all(|operand| matches(operand, properties)),
        _ => {}
    }
    let property = filter["path"][0].as_str().unwrap_or_default();
    let actual = properties.get(property).cloned().unwrap_or(Value::Null);
    let (key, expected) = filter
        .as_object()
        .and_then(|object| object.iter().find(|(key, _)| key.starts_with("value")))
        .map(|(key, value)| (key.clone(), value.clone()))
        .unwrap_or_default();
    let actual_items: Vec<Value> = match &actual {
        Value::Array(items) => items.clone(),
        Value::Null => Vec::new(),
        other => vec![other.clone()],
    };
    let expected_items: Vec<Value> = match &expected {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    let _ = key;
    use std::cmp::Ordering::{Equal, Greater, Less};
    match operator {
        "Equal" => actual_items.iter().any(|item| compare(item, &expected) == Some(Equal)),
        "NotEqual" => !actual_items.iter().any(|item| compare(item, &expected) == Some(Equal)),
        "GreaterThan" => compare(&actual, &expected) == Some(Greater),
        "GreaterThanEqual" => matches!(compare(&actual, &expected), Some(Greater | Equal)),
        "LessThan" => compare(&actual, &expected) == Some(Less),
        "LessThanEqual" => matches!(compare(&actual, &expected), Some(Less | Equal)),
        "Like" => actual_items.iter().any(|item| {
            item.as_str().zip(expected.as_str()).is_some_and(|(text, pattern)| like(pattern, text))
        }),
        "ContainsAny" => expected_items
            .iter()
            .any(|wanted| actual_items.iter().any(|item| compare(item, wanted) == Some(Equal))),
        "ContainsAll" => expected_items
            .iter()
            .all(|wanted| actual_items.iter().any(|item| compare(item, wanted) == Some(Equal))),
        "IsNull" => actual.is_null() == expected.as_bool().unwrap_or(false),
        _ => false,
    }
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn text_of(object: &Stored, properties: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in &object.properties {
        if !properties.is_empty() && !properties.contains(key) {
            continue;
        }
        match value {
            Value::String(text) => out.extend(words(text)),
            Value::Array(items) => {
                items.iter().filter_map(Value::as_str).for_each(|text| out.extend(words(text)))
            }
            _ => {}
        }
    }
    out
}

fn keyword_score(object: &Stored, query: &str, properties: &[String]) -> f64 {
    let haystack = text_of(object, properties);
    words(query)
        .iter()
        .map(|word| haystack.iter().filter(|item| *item == word).count() as f64)
        .sum()
}

fn cosine_distance(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let denominator = norm(a) * norm(b);
    (denominator > 0.0).then(|| 1.0 - dot / denominator)
}

/// The property names and types of a class.
fn property_types(schema: &Value) -> BTreeMap<String, String> {
    schema["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|property| {
            (
                property["name"].as_str().unwrap_or_default().to_owned(),
                property["dataType"][0].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn vectorizer_key(
    schema: &Value,
    headers: &BTreeMap<String, String>,
    class: &str,
) -> Result<(), Refusal> {
    match schema["vectorizer"].as_str() {
        Some("text2vec-openai") => match headers.get("x-openai-api-key") {
            None => Err(refuse(
                "API Key: no api key found neither in request header: X-Openai-Api-Key nor in environment variable under OPENAI_APIKEY",
            )),
            Some(key) if key == VECTORIZER_KEY => Ok(()),
            // The real error quotes the key it was given; orca must not pass it on.
            Some(key) => Err(refuse(format!(
                "connection to: OpenAI API failed with status: 401 error: Incorrect API key provided: {key}"
            ))),
        },
        _ => Err(refuse(format!(
            "could not vectorize input for collection {class} with search-type nearText. Make sure a vectorizer module is configured for this collection"
        ))),
    }
}

fn get(
    state: &mut Store,
    field: &Field,
    schema: &Value,
    headers: &BTreeMap<String, String>,
) -> Result<Value, Refusal> {
    let class = field.name.clone();
    for (name, _) in &field.arguments {
        if ![
            "hybrid",
            "nearText",
            "nearVector",
            "bm25",
            "where",
            "limit",
            "tenant",
            "offset",
            "autocut",
        ]
        .contains(&name.as_str())
        {
            return Err(violation(format!(
                "Unknown argument \"{name}\" on field \"{class}\" of type \"GetObjectsObj\"."
            )));
        }
    }
    let tenant = argument(field, "tenant")
        .map(|value| string(value, "tenant").map(str::to_owned))
        .transpose()?;
    let limit = match argument(field, "limit") {
        None => 10,
        Some(Gql::Int(number)) => number.as_i64().unwrap_or_default(),
        Some(other) => {
            return Err(violation(format!(
                "Argument \"limit\" has invalid value {other}.\nExpected type \"Int\", found {other}."
            )));
        }
    };
    let filter = argument(field, "where").map(where_to_rest).transpose()?;
    // Fields: properties of the class, or `_additional`.
    let types = property_types(schema);
    let mut selected = Vec::new();
    let mut additional = Vec::new();
    for item in &field.selection_set.items {
        let Selection::Field(child) = item else { return Err(violation("fragments are not used")) };
        if child.name == "_additional" {
            for extra in &child.selection_set.items {
                let Selection::Field(extra) = extra else {
                    return Err(violation("fragments are not used"));
                };
                if ![
                    "id",
                    "score",
                    "explainScore",
                    "distance",
                    "certainty",
                    "creationTimeUnix",
                    "lastUpdateTimeUnix",
                    "vector",
                    "vectors",
                ]
                .contains(&extra.name.as_str())
                {
                    return Err(refuse(format!(
                        "Cannot query field \"{}\" on type \"{class}AdditionalProps\".",
                        extra.name
                    )));
                }
                additional.push(extra.name.clone());
            }
            continue;
        }
        match types.get(&child.name) {
            None => {
                return Err(refuse(format!(
                    "Cannot query field \"{}\" on type \"{class}\".",
                    child.name
                )));
            }
            Some(data_type) if data_type.starts_with("object") => {
                return Err(refuse(format!(
                    "Field \"{}\" of type \"[{class}{}Object]\" must have a sub selection.",
                    child.name, child.name
                )));
            }
            Some(_) => selected.push(child.name.clone()),
        }
    }
    check_tenant(state, &class, tenant.as_deref()).map_err(|message| {
        refuse(format!(
            "explorer: list class: search: object search at index {}: {message}",
            class.to_lowercase()
        ))
    })?;
    if let Some(tenant) = &tenant {
        state.strings.push(tenant.clone());
    }
    let candidates: Vec<Stored> = state
        .objects
        .iter()
        .filter(|object| object.class == class && object.tenant == tenant)
        .filter(|object| filter.as_ref().is_none_or(|filter| matches(filter, &object.properties)))
        .cloned()
        .collect();
    // (object, score, distance)
    let mut ranked: Vec<(Stored, Option<f64>, Option<f64>)> = Vec::new();
    if let Some(hybrid) = argument(field, "hybrid") {
        let fields = object_fields(hybrid, "hybrid")?;
        check_keys(
            fields,
            &["query", "alpha", "properties", "targetVectors", "fusionType", "maxVectorDistance"],
            "hybrid",
        )?;
        let query = string(
            fields.get("query").ok_or_else(|| violation("hybrid.query is required"))?,
            "hybrid.query",
        )?
        .to_owned();
        let alpha = fields
            .get("alpha")
            .map(|value| float(value, "hybrid.alpha"))
            .transpose()?
            .unwrap_or(0.75);
        if !(0.0..=1.0).contains(&alpha) {
            return Err(violation(format!("alpha {alpha} out of range")));
        }
        let properties = fields
            .get("properties")
            .map(|value| strings(value, "hybrid.properties"))
            .transpose()?
            .unwrap_or_default();
        if let Some(vectors) = fields.get("targetVectors") {
            strings(vectors, "hybrid.targetVectors")?;
        }
        if alpha > 0.0 {
            vectorizer_key(schema, headers, &class)?;
        }
        state.strings.push(query.clone());
        let scores: Vec<f64> =
            candidates.iter().map(|object| keyword_score(object, &query, &properties)).collect();
        let best = scores.iter().copied().fold(0.0, f64::max).max(1.0);
        for (object, score) in candidates.into_iter().zip(scores) {
            let fused = (1.0 - alpha) * score / best + alpha * 0.5;
            if score > 0.0 || alpha > 0.0 {
                ranked.push((object, Some(fused), None));
            }
        }
    } else if let Some(bm25) = argument(field, "bm25") {
        let fields = object_fields(bm25, "bm25")?;
        check_keys(fields, &["query", "properties"], "bm25")?;
        let query = string(
            fields.get("query").ok_or_else(|| violation("bm25.query is required"))?,
            "bm25.query",
        )?
        .to_owned();
        let properties = fields
            .get("properties")
            .map(|value| strings(value, "bm25.properties"))
            .transpose()?
            .unwrap_or_default();
        state.strings.push(query.clone());
        for object in candidates {
            let score = keyword_score(&object, &query, &properties);
            if score > 0.0 {
                ranked.push((object, Some(score), None));
            }
        }
    } else if let Some(near) = argument(field, "nearText") {
        let fields = object_fields(near, "nearText")?;
        check_keys(fields, &["concepts", "distance", "certainty", "targetVectors"], "nearText")?;
        let concepts = strings(
            fields.get("concepts").ok_or_else(|| violation("nearText.concepts is required"))?,
            "nearText.concepts",
        )?;
        let max_distance =
            fields.get("distance").map(|value| float(value, "nearText.distance")).transpose()?;
        vectorizer_key(schema, headers, &class)?;
        state.strings.extend(concepts.iter().cloned());
        let query = concepts.join(" ");
        let query_words = words(&query).len().max(1) as f64;
        for object in candidates {
            let distance = 1.0 - (keyword_score(&object, &query, &[]) / query_words).min(1.0);
            if max_distance.is_none_or(|max| distance <= max) {
                ranked.push((object, None, Some(distance)));
            }
        }
    } else if let Some(near) = argument(field, "nearVector") {
        let fields = object_fields(near, "nearVector")?;
        check_keys(fields, &["vector", "distance", "certainty", "targetVectors"], "nearVector")?;
        let Some(Gql::List(items)) = fields.get("vector") else {
            return Err(violation("nearVector.vector must be a list"));
        };
        let vector: Result<Vec<f64>, Refusal> =
            items.iter().map(|item| float(item, "nearVector.vector")).collect();
        let vector = vector?;
        let target = fields
            .get("targetVectors")
            .map(|value| strings(value, "nearVector.targetVectors"))
            .transpose()?
            .and_then(|names| names.into_iter().next())
            .unwrap_or_else(|| "default".to_owned());
        let max_distance =
            fields.get("distance").map(|value| float(value, "nearVector.distance")).transpose()?;
        for object in candidates {
            let stored: Option<Vec<f64>> = object
                .vectors
                .get(&target)
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_f64).collect());
            let Some(distance) = stored.and_then(|stored| cosine_distance(&vector, &stored)) else {
                continue;
            };
            if max_distance.is_none_or(|max| distance <= max + 1e-9) {
                ranked.push((object, None, Some(distance)));
            }
        }
    } else {
        ranked = candidates.into_iter().map(|object| (object, None, None)).collect();
    }
    ranked.sort_by(|a, b| match (a.1, b.1) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        _ => a.2.unwrap_or(0.0).total_cmp(&b.2.unwrap_or(0.0)),
    });
    ranked.truncate(usize::try_from(limit).unwrap_or(0));
    let items = ranked
        .into_iter()
        .map(|(object, score, distance)| {
            let mut item = Map::new();
            for name in &selected {
                item.insert(
                    name.clone(),
                    object.properties.get(name).cloned().unwrap_or(Value::Null),
                );
            }
            if !additional.is_empty() {
                let mut extra = Map::new();
                for name in &additional {
                    let value = match name.as_str() {
                        "id" => Value::from(object.id.clone()),
                        // Weaviate's GraphQL types these as String.
                        "score" => {
                            score.map_or(Value::Null, |score| Value::from(format!("{score}")))
                        }
                        "explainScore" => Value::from(format!(
                            "\nHybrid (Result Set keyword,bm25) Document {}: original score {}",
                            object.id,
                            score.unwrap_or(0.0)
                        )),
                        "creationTimeUnix" => Value::from(object.created.to_string()),
                        "lastUpdateTimeUnix" => Value::from(object.updated.to_string()),
                        "distance" => distance.map_or(Value::Null, Value::from),
                        "certainty" => distance
                            .map_or(Value::Null, |distance| Value::from(1.0 - distance / 2.0)),
                        "vector" => object.vectors.get("default").cloned().unwrap_or(Value::Null),
                        _ => Value::Object(object.vectors.clone()),
                    };
                    extra.insert(name.clone(), value);
                }
                item.insert("_additional".into(), Value::Object(extra));
            }
            Value::Object(item)
        })
        .collect();
    Ok(Value::Array(items))
}

fn aggregate(state: &mut Store, field: &Field, schema: &Value) -> Result<Value, Refusal> {
    let class = field.name.clone();
    for (name, _) in &field.arguments {
        if !["where", "tenant", "groupBy", "objectLimit"].contains(&name.as_str()) {
            return Err(violation(format!(
                "Unknown argument \"{name}\" on field \"{class}\" of type \"AggregateObjectsObj\"."
            )));
        }
    }
    let tenant = argument(field, "tenant")
        .map(|value| string(value, "tenant").map(str::to_owned))
        .transpose()?;
    let filter = argument(field, "where").map(where_to_rest).transpose()?;
    check_tenant(state, &class, tenant.as_deref()).map_err(refuse)?;
    let objects: Vec<&Stored> = state
        .objects
        .iter()
        .filter(|object| object.class == class && object.tenant == tenant)
        .filter(|object| filter.as_ref().is_none_or(|filter| matches(filter, &object.properties)))
        .collect();
    let types = property_types(schema);
    let mut group = Map::new();
    for item in &field.selection_set.items {
        let Selection::Field(child) = item else { return Err(violation("fragments are not used")) };
        if child.name == "meta" {
            group.insert("meta".into(), json!({"count": objects.len()}));
            continue;
        }
        let Some(data_type) = types.get(&child.name) else {
            return Err(refuse(format!(
                "Cannot query field \"{}\" on type \"Aggregate{class}\".",
                child.name
            )));
        };
        let values: Vec<&Value> =
            objects.iter().filter_map(|object| object.properties.get(&child.name)).collect();
        let numbers: Vec<f64> = values.iter().filter_map(|value| value.as_f64()).collect();
        let numeric = matches!(data_type.as_str(), "int" | "number");
        let mut metrics = Map::new();
        for metric in &child.selection_set.items {
            let Selection::Field(metric) = metric else {
                return Err(violation("fragments are not used"));
            };
            let allowed = match data_type.as_str() {
                "int" | "number" => {
                    vec!["count", "type", "mean", "median", "mode", "maximum", "minimum", "sum"]
                }
                "boolean" => vec![
                    "count",
                    "type",
                    "totalTrue",
                    "totalFalse",
                    "percentageTrue",
                    "percentageFalse",
                ],
                _ => vec!["count", "type", "topOccurrences"],
            };
            if !allowed.contains(&metric.name.as_str()) {
                return Err(refuse(format!(
                    "Cannot query field \"{}\" on type \"Aggregate{class}{}Obj\".",
                    metric.name, child.name
                )));
            }
            let value = match metric.name.as_str() {
                "count" => Value::from(values.len()),
                "type" => Value::from(data_type.clone()),
                "mean" if numeric => {
                    Value::from(numbers.iter().sum::<f64>() / numbers.len().max(1) as f64)
                }
                "sum" => Value::from(numbers.iter().sum::<f64>()),
                "maximum" => {
                    numbers.iter().copied().reduce(f64::max).map_or(Value::Null, Value::from)
                }
                "minimum" => {
                    numbers.iter().copied().reduce(f64::min).map_or(Value::Null, Value::from)
                }
                "totalTrue" => {
                    Value::from(values.iter().filter(|value| value.as_bool() == Some(true)).count())
                }
                "totalFalse" => Value::from(
                    values.iter().filter(|value| value.as_bool() == Some(false)).count(),
                ),
                "topOccurrences" => {
                    let limit = match argument(metric, "limit") {
                        Some(Gql::Int(number)) => number.as_i64().unwrap_or(5) as usize,
                        None => 5,
                        Some(other) => {
                            return Err(violation(format!(
                                "topOccurrences limit must be an Int, found {other}"
                            )));
                        }
                    };
                    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
                    for value in &values {
                        let items: Vec<&Value> = match value {
                            Value::Array(items) => items.iter().collect(),
                            other => vec![other],
                        };
                        for item in items.into_iter().filter_map(Value::as_str) {
                            *counts.entry(item.to_owned()).or_default() += 1;
                        }
                    }
                    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
                    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    Value::Array(
                        counts
                            .into_iter()
                            .take(limit)
                            .map(|(value, occurs)| json!({"value": value, "occurs": occurs}))
                            .collect(),
                    )
                }
                _ => Value::Null,
            };
            metrics.insert(metric.name.clone(), value);
        }
        group.insert(child.name.clone(), Value::Object(metrics));
    }
    Ok(Value::Object(group))
}
