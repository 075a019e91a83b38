//! The rules a tool's parameter schema must follow, checked twice: the schema a server lists
//! against the JSON Schema meta-schema of its draft, and every converted schema against what
//! its provider accepts before it is offered (draft 2020-12's meta-schema and OpenAI's function
//! parameter rules, with strict mode's subset for a strict tool; Anthropic's `input_schema`, an
//! object schema; Gemini's Schema object, an OpenAPI subset). A schema that breaks one is never
//! emitted: its tool is set aside with the first problem found.
//!
//! # Design notes
//!
//! `rules.rs`: what each provider accepts, checked on every converted schema before it is emitted
//! (draft 2020-12's meta-schema and OpenAI's parameter rules, strict mode's subset for a strict
//! tool; Anthropic's object `input_schema`; Gemini's Schema fields, types and formats): a strict
//! form that fails falls back to the plain one, and a plain one that fails sets the tool aside, so
//! a malformed tool never makes a provider refuse the whole request.

use serde_json::{Map, Value};

use super::provider::Provider;

/// The fields of Gemini's Schema object.
pub(crate) const GEMINI_FIELDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// The values of Gemini's `type`.
const GEMINI_TYPES: &[&str] =
    &["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"];

/// The keywords OpenAI's strict mode supports.
pub(crate) const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// The string formats OpenAI's strict mode supports.
pub(crate) const STRICT_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// How deep strict mode lets schemas nest.
pub(crate) const STRICT_MAX_DEPTH: usize = 10;
/// How many properties strict mode takes in one schema, all levels together.
pub(crate) const STRICT_MAX_PROPERTIES: usize = 5000;
/// How many values strict mode takes in one enum.
pub(crate) const STRICT_MAX_ENUM: usize = 1000;

/// The formats Gemini takes, by type (others are left out of its schemas).
pub(crate) fn gemini_formats(kind: Option<&str>) -> &'static [&'static str] {
    match kind {
        Some("string" | "STRING") => &["enum", "date-time"],
        Some("integer" | "INTEGER") => &["int32", "int64"],
        Some("number" | "NUMBER") => &["float", "double"],
        _ => &[],
    }
}

/// Why `schema`, a tool's input schema as its server lists it, is not valid JSON Schema under
/// the meta-schema of the draft its `$schema` names (draft 2020-12, MCP's default, when it
/// names none or one this crate does not know).
///
/// # Errors
///
/// The first place where the schema breaks its meta-schema, and how.
pub(crate) fn check_original(schema: &Value) -> Result<(), String> {
    let named = schema.get("$schema").and_then(Value::as_str).unwrap_or_default();
    let result = if named.contains("draft-04") {
        jsonschema::draft4::meta::validate(schema)
    } else if named.contains("draft-06") {
        jsonschema::draft6::meta::validate(schema)
    } else if named.contains("draft-07") {
        jsonschema::draft7::meta::validate(schema)
    } else if named.contains("2019-09") {
        jsonschema::draft201909::meta::validate(schema)
    } else {
        jsonschema::draft202012::meta::validate(schema)
    };
    result
        .map_err(|error| format!("the input schema is not valid JSON Schema: {}", located(&error)))
}

/// Whether `schema`, converted for `provider` (as a strict OpenAI tool when `strict`), is one
/// that provider accepts.
///
/// # Errors
///
/// The first rule the schema breaks, and where.
pub(crate) fn check_converted(
    provider: Provider,
    schema: &Value,
    strict: bool,
) -> Result<(), String> {
    let mut found = Vec::new();
    match provider {
        Provider::OpenAi | Provider::Anthropic => {
            if let Err(error) = jsonschema::draft202012::meta::validate(schema) {
                found.push(format!("not valid JSON Schema: {}", located(&error)));
            }
            if schema.get("type").and_then(Value::as_str) != Some("object") {
                found.push("the top level is not of type object".to_owned());
            }
            if provider == Provider::OpenAi {
                for keyword in ["anyOf", "oneOf", "allOf", "enum", "not"] {
                    if schema.get(keyword).is_some() {
                        found.push(format!("`{keyword}` at the top level"));
                    }
                }
            }
            let mut properties = 0;
            json_schema_node(schema, "", strict, 0, &mut properties, &mut found);
            if strict && properties > STRICT_MAX_PROPERTIES {
                found.push(format!(
                    "{properties} properties, more than strict mode's {STRICT_MAX_PROPERTIES}"
                ));
            }
        }
        Provider::Gemini => {
            // As JSON Schema (lower-case types), the Schema object must still be valid.
            if let Err(error) = jsonschema::draft202012::meta::validate(&lower_case_types(schema)) {
                found.push(format!("not valid as a schema: {}", located(&error)));
            }
            if schema.get("type").and_then(Value::as_str) != Some("OBJECT") {
                found.push("the top level is not of type OBJECT".to_owned());
            }
            gemini_node(schema, "", true, &mut found);
        }
    }
    match found.into_iter().next() {
        None => Ok(()),
        Some(problem) => Err(format!(
            "the schema converted for {} breaks its rules: {problem}",
            provider.as_str()
        )),
    }
}

/// A meta-schema error with the place in the schema where it occurred.
fn located(error: &jsonschema::ValidationError<'_>) -> String {
    let at = error.instance_path().as_str();
    if at.is_empty() { format!("at the top: {error}") } else { format!("at {at}: {error}") }
}

/// `at`, or the top.
fn place(at: &str) -> &str {
    if at.is_empty() { "the top" } else { at }
}

/// One node of a JSON Schema for OpenAI or Anthropic: a schema object (or `true`, outside
/// strict mode), objects with `properties`, and in strict mode strict mode's rules.
fn json_schema_node(
    schema: &Value,
    at: &str,
    strict: bool,
    depth: usize,
    properties: &mut usize,
    found: &mut Vec<String>,
) {
    let Some(object) = schema.as_object() else {
        if strict || schema != &Value::Bool(true) {
            found.push(format!("at {}: the schema {schema} is not an object", place(at)));
        }
        return;
    };
    if strict && depth > STRICT_MAX_DEPTH {
        found.push(format!("at {}: nested deeper than {STRICT_MAX_DEPTH} levels", place(at)));
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"object") {
        let names: Vec<&String> = object
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        if !object.get("properties").is_some_and(Value::is_object) {
            found.push(format!("at {}: an object schema without `properties`", place(at)));
        }
        if strict {
            if object.get("additionalProperties") != Some(&Value::Bool(false)) {
                found.push(format!(
                    "at {}: strict mode needs `additionalProperties: false`",
                    place(at)
                ));
            }
            let required: Vec<&str> = object
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for name in names.iter().filter(|name| !required.contains(&name.as_str())) {
                found.push(format!("at {}: strict mode needs `{name}` in `required`", place(at)));
            }
        }
    }
    if strict {
        for key in object.keys().filter(|key| !STRICT_KEYWORDS.contains(&key.as_str())) {
            found.push(format!("at {}: strict mode does not support `{key}`", place(at)));
        }
        if let Some(format) = object.get("format")
            && !format.as_str().is_some_and(|format| STRICT_FORMATS.contains(&format))
        {
            found.push(format!(
                "at {}: strict mode does not support the format {format}",
                place(at)
            ));
        }
        if let Some(values) = object.get("enum").and_then(Value::as_array)
            && values.len() > STRICT_MAX_ENUM
        {
            found.push(format!("at {}: an enum of more than {STRICT_MAX_ENUM} values", place(at)));
        }
    }
    if let Some(children) = object.get("properties").and_then(Value::as_object) {
        *properties += children.len();
        for (name, child) in children {
            json_schema_node(
                child,
                &format!("{at}/properties/{name}"),
                strict,
                depth + 1,
                properties,
                found,
            );
        }
    }
    if let Some(items) = object.get("items") {
        json_schema_node(items, &format!("{at}/items"), strict, depth + 1, properties, found);
    }
    if let Some(additional) = object.get("additionalProperties").filter(|item| item.is_object()) {
        json_schema_node(
            additional,
            &format!("{at}/additionalProperties"),
            strict,
            depth + 1,
            properties,
            found,
        );
    }
    for (index, branch) in
        object.get("anyOf").and_then(Value::as_array).into_iter().flatten().enumerate()
    {
        json_schema_node(
            branch,
            &format!("{at}/anyOf/{index}"),
            strict,
            depth + 1,
            properties,
            found,
        );
    }
}

/// One node of Gemini's Schema object: its fields only, each of the type Gemini reads, types
/// in upper case, enums on strings only, arrays with `items`, and (below the top) objects with
/// at least one property.
fn gemini_node(schema: &Value, at: &str, top: bool, found: &mut Vec<String>) {
    let here = place(at);
    let Some(object) = schema.as_object() else {
        found.push(format!("at {here}: the schema {schema} is not an object"));
        return;
    };
    for key in object.keys().filter(|key| !GEMINI_FIELDS.contains(&key.as_str())) {
        found.push(format!("at {here}: Gemini's Schema has no field `{key}`"));
    }
    let kind = match object.get("type") {
        None => None,
        Some(Value::String(kind)) if GEMINI_TYPES.contains(&kind.as_str()) => Some(kind.as_str()),
        Some(kind) => {
            found.push(format!("at {here}: {kind} is not one of Gemini's types"));
            None
        }
    };
    if kind.is_none() && !object.contains_key("anyOf") {
        found.push(format!("at {here}: neither a type nor `anyOf`"));
    }
    for (key, item) in object {
        let fits = match key.as_str() {
            "format" => item.as_str().is_some_and(|format| gemini_formats(kind).contains(&format)),
            "title" | "description" | "pattern" => item.is_string(),
            "nullable" => item.is_boolean(),
            "enum" => {
                kind == Some("STRING")
                    && item.as_array().is_some_and(|values| values.iter().all(Value::is_string))
            }
            "minItems" | "maxItems" | "minProperties" | "maxProperties" | "minLength"
            | "maxLength" => item.is_u64(),
            "minimum" | "maximum" => item.is_number(),
            "properties" => item.is_object(),
            "required" | "propertyOrdering" => {
                let names: Option<&Map<String, Value>> =
                    object.get("properties").and_then(Value::as_object);
                item.as_array().is_some_and(|listed| {
                    listed.iter().all(|name| {
                        name.as_str()
                            .is_some_and(|name| names.is_some_and(|names| names.contains_key(name)))
                    })
                })
            }
            "anyOf" => item.as_array().is_some_and(|branches| !branches.is_empty()),
            "items" => item.is_object(),
            _ => true,
        };
        if !fits {
            found.push(format!("at {here}: Gemini cannot read `{key}`: {item}"));
        }
    }
    if kind == Some("ARRAY") && !object.contains_key("items") {
        found.push(format!("at {here}: an ARRAY without `items`"));
    }
    if kind == Some("OBJECT")
        && !top
        && object.get("properties").and_then(Value::as_object).is_none_or(Map::is_empty)
    {
        found.push(format!("at {here}: an OBJECT without properties"));
    }
    if let Some(children) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in children {
            gemini_node(child, &format!("{at}/properties/{name}"), false, found);
        }
    }
    if let Some(items) = object.get("items") {
        gemini_node(items, &format!("{at}/items"), false, found);
    }
    for (index, branch) in
        object.get("anyOf").and_then(Value::as_array).into_iter().flatten().enumerate()
    {
        gemini_node(branch, &format!("{at}/anyOf/{index}"), false, found);
    }
}

/// A copy of a Gemini schema with its types in lower case, as JSON Schema writes them.
fn lower_case_types(schema: &Value) -> Value {
    match schema {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, item)| {
                    let item = match (key.as_str(), item) {
                        ("type", Value::String(kind)) => Value::String(kind.to_ascii_lowercase()),
                        ("properties", Value::Object(children)) => Value::Object(
                            children
                                .iter()
                                .map(|(name, child)| (name.clone(), lower_case_types(child)))
                                .collect(),
                        ),
                        ("items", child) => lower_case_types(child),
                        ("anyOf", Value::Array(branches)) => {
                            Value::Array(branches.iter().map(lower_case_types).collect())
                        }
                        (_, item) => item.clone(),
                    };
                    (key.clone(), item)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_provider_refuses_what_its_api_refuses() {
        // (provider, strict, schema, a part of the problem reported)
        let refused = [
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {"a": {"type": "strnig"}}}),
                "/properties/a/type",
            ),
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {"a": {"type": 5}}}),
                "/properties/a/type",
            ),
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {"n": {"minimum": "x"}}}),
                "/properties/n/minimum",
            ),
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {"a": {"description": 7}}}),
                "/properties/a/description",
            ),
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {}, "required": "a"}),
                "/required",
            ),
            (Provider::OpenAi, false, json!({"type": "array", "items": {}}), "not of type object"),
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {}, "anyOf": [{}]}),
                "`anyOf` at the top",
            ),
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {"o": {"type": "object"}}}),
                "/properties/o: an object schema without `properties`",
            ),
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {"a": false}}),
                "/properties/a: the schema false",
            ),
            (
                Provider::OpenAi,
                true,
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
                "additionalProperties: false",
            ),
            (
                Provider::OpenAi,
                true,
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": [], "additionalProperties": false}),
                "`a` in `required`",
            ),
            (
                Provider::OpenAi,
                true,
                json!({"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}, "required": ["a"], "additionalProperties": false}),
                "does not support `minLength`",
            ),
            (
                Provider::OpenAi,
                true,
                json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}, "required": ["a"], "additionalProperties": false}),
                "the format \"uri\"",
            ),
            (
                Provider::Anthropic,
                false,
                json!({"type": "object", "properties": {"a": {"enum": 3}}}),
                "/properties/a/enum",
            ),
            (
                Provider::Anthropic,
                false,
                json!({"type": "object", "properties": ["a"]}),
                "/properties",
            ),
            (Provider::Anthropic, false, json!({"type": "string"}), "not of type object"),
            (
                Provider::Gemini,
                false,
                json!({"type": "object", "properties": {"a": {"type": "STRING"}}}),
                "the top level is not of type OBJECT",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "STRNIG"}}}),
                "/properties/a/type",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "INTEGER", "enum": [1, 2]}}}),
                "`enum`",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "ARRAY"}}}),
                "an ARRAY without `items`",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "OBJECT", "properties": {}}}}),
                "an OBJECT without properties",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "STRING", "additionalProperties": false}}}),
                "no field `additionalProperties`",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "STRING"}}, "required": ["b"]}),
                "`required`",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "STRING", "minimum": "x"}}}),
                "/properties/a/minimum",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "STRING", "format": "uri"}}}),
                "`format`",
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"description": "no type"}}}),
                "neither a type nor `anyOf`",
            ),
        ];
        for (provider, strict, schema, expected) in refused {
            let problem = check_converted(provider, &schema, strict)
                .expect_err(&format!("{provider:?} (strict: {strict}) refuses {schema}"));
            assert!(problem.contains(expected), "{provider:?}, {schema}: {problem}");
            assert!(problem.contains(provider.as_str()), "{problem}");
        }
    }

    #[test]
    fn each_provider_accepts_well_formed_schemas() {
        let accepted = [
            (
                Provider::OpenAi,
                false,
                json!({"type": "object", "properties": {"a": {"type": ["string", "null"], "format": "strnig-date"}, "b": true}}),
            ),
            (
                Provider::OpenAi,
                true,
                json!({"type": "object", "properties": {"a": {"type": ["string", "null"], "format": "email"}}, "required": ["a"], "additionalProperties": false}),
            ),
            (
                Provider::OpenAi,
                true,
                json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false}),
            ),
            (
                Provider::Anthropic,
                false,
                json!({"type": "object", "properties": {"p": {"type": "object", "properties": {}, "additionalProperties": true}}}),
            ),
            (
                Provider::Gemini,
                false,
                json!({"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": true, "enum": ["x"], "format": "enum"}, "b": {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}]}, "c": {"type": "ARRAY", "items": {"type": "NUMBER", "format": "double"}, "minItems": 1}}, "required": ["a"]}),
            ),
        ];
        for (provider, strict, schema) in accepted {
            assert_eq!(
                check_converted(provider, &schema, strict),
                Ok(()),
                "{provider:?}: {schema}"
            );
        }
    }

    #[test]
    fn an_original_schema_is_checked_against_the_meta_schema_of_its_draft() {
        // Tuple-form `items` is draft-07's, not 2020-12's.
        let tuple = json!({"type": "object", "properties": {"t": {"type": "array", "items": [{"type": "string"}]}}});
        let problem = check_original(&tuple).unwrap_err();
        assert!(problem.contains("/properties/t/items"), "{problem}");
        let mut draft7 = tuple.clone();
        draft7["$schema"] = json!("http://json-schema.org/draft-07/schema#");
        assert_eq!(check_original(&draft7), Ok(()));
        // A `$schema` this crate does not know is read as 2020-12.
        let unknown = json!({"$schema": "https://example.com/schema", "type": "object", "properties": {"a": {"type": "strnig"}}});
        assert!(check_original(&unknown).unwrap_err().contains("/properties/a/type"));
        assert_eq!(
            check_original(&json!({"type": "object", "properties": {"f": {"format": "strnig"}}})),
            Ok(())
        );
    }
}
