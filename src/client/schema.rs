//! Input schemas made acceptable to each provider, on a deep copy of a schema that is valid
//! JSON Schema: local `$ref`s inlined (recursion expanded to a bounded depth, then cut, never
//! left dangling; references that only refer to each other refused), `allOf` merged,
//! `oneOf` read as `anyOf`, nullable types and unions brought to one form, `properties: {}`
//! added to bare objects, a top-level union of objects merged into one object; then the
//! provider's own rules: OpenAI's strict mode when the schema allows it, Gemini's Schema
//! object (its fields only, upper-case types, enums on strings only); the result is checked
//! against the provider's rules (`rules`) before it is given out. A schema that cannot be made
//! acceptable is an error naming why; the caller sets that one tool aside.
//!
//! # Design notes
//!
//! `schema.rs`: the schema pipeline (the original checked against its draft's meta-schema first;
//! inline local references with a bounded recursion, a chain of references that only refers back to
//! itself refused; one canonical form for `allOf`/`oneOf`/nullable/`const`, top-level unions
//! merged), then per provider (strict-mode check and closing for OpenAI, Gemini's Schema object,
//! with what it cannot describe offered as JSON text at recorded paths that the executor parses
//! back); an error string sets the tool aside.

use serde_json::{Map, Value, json};

use super::provider::Provider;
use super::rules::{
    self, GEMINI_FIELDS, STRICT_FORMATS, STRICT_KEYWORDS, STRICT_MAX_DEPTH, STRICT_MAX_ENUM,
    STRICT_MAX_PROPERTIES,
};

/// How many times one `$ref` may be expanded inside itself before the branch is cut.
const MAX_REF_REPEAT: usize = 2;
/// Deeper schemas are cut at this depth.
const MAX_DEPTH: usize = 32;
/// Marks an object that had no `properties` of its own (removed before output).
const BARE: &str = "$orcaBare";
/// Marks a schema that also accepts `null` (Gemini's own keyword, rewritten for the others).
const NULLABLE: &str = "nullable";

/// A schema ready for one provider.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Normalized {
    /// The schema; `None` for Gemini when the tool takes no parameters.
    pub(crate) schema: Option<Value>,
    /// OpenAI only: the schema follows strict mode's rules.
    pub(crate) strict: bool,
    /// Gemini only: the paths (property names, `[]` for array items) of values that Gemini's
    /// Schema cannot describe (an object with any keys, an array of anything, a value of any
    /// type), offered as a JSON text instead; the executor parses them back.
    pub(crate) json_text: Vec<Vec<String>>,
}

/// The input schema `input` made acceptable to `provider`, and checked against that
/// provider's rules before it is given out.
///
/// # Errors
///
/// Why the schema cannot be made acceptable (not valid JSON Schema, a reference outside the
/// schema, to nothing or to itself through references only, a top level that is not an
/// object, a required part the provider cannot express, a result the provider would refuse).
pub(crate) fn normalize(
    input: &Map<String, Value>,
    provider: Provider,
) -> Result<Normalized, String> {
    let root = Value::Object(input.clone());
    rules::check_original(&root)?;
    let mut state = Inline { root: &root, stack: Vec::new(), cut: false };
    let inlined = state.inline(&root, 0)?;
    let mut schema = simplify(inlined)?;
    schema = top_level_object(schema)?;
    let normalized = match provider {
        Provider::OpenAi => {
            // Strict when the strict form follows strict mode's rules, else the plain form.
            let strict = (if state.cut { None } else { strict_form(&schema) })
                .map(ordered)
                .filter(|strict| rules::check_converted(provider, strict, true).is_ok());
            match strict {
                Some(strict) => {
                    Normalized { schema: Some(strict), strict: true, json_text: vec![] }
                }
                None => Normalized {
                    schema: Some(ordered(json_schema_form(schema))),
                    strict: false,
                    json_text: vec![],
                },
            }
        }
        Provider::Anthropic => Normalized {
            schema: Some(ordered(json_schema_form(schema))),
            strict: false,
            json_text: vec![],
        },
        Provider::Gemini => {
            let mut json_text = Vec::new();
            let schema = gemini_form(schema, "parameters", &[], &mut json_text)?;
            let empty =
                schema.get("properties").and_then(Value::as_object).is_none_or(Map::is_empty);
            Normalized {
                schema: if empty { None } else { Some(ordered(schema)) },
                strict: false,
                json_text,
            }
        }
    };
    if let Some(schema) = &normalized.schema {
        rules::check_converted(provider, schema, normalized.strict)?;
    }
    Ok(normalized)
}

/// Keywords in the order a person reads them; the others follow in their own order.
const KEY_ORDER: &[&str] = &[
    "type",
    "title",
    "description",
    "nullable",
    "enum",
    "format",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
];

/// Every schema node's keywords in [`KEY_ORDER`] (property names keep their order).
fn ordered(schema: Value) -> Value {
    let Value::Object(mut object) = schema else { return schema };
    let mut out = Map::new();
    for key in KEY_ORDER {
        if let Some(item) = object.shift_remove(*key) {
            out.insert((*key).to_owned(), item);
        }
    }
    out.extend(object);
    for (key, item) in &mut out {
        match key.as_str() {
            "properties" => {
                if let Value::Object(properties) = item {
                    for property in properties.values_mut() {
                        *property = ordered(std::mem::take(property));
                    }
                }
            }
            "items" | "additionalProperties" => *item = ordered(std::mem::take(item)),
            "anyOf" => {
                if let Value::Array(branches) = item {
                    for branch in branches {
                        *branch = ordered(std::mem::take(branch));
                    }
                }
            }
            _ => {}
        }
    }
    Value::Object(out)
}

struct Inline<'a> {
    root: &'a Value,
    /// The references being expanded, outermost first.
    stack: Vec<String>,
    /// Whether a recursive or too deep branch was cut.
    cut: bool,
}

impl<'a> Inline<'a> {
    /// What the local reference `reference` points to. A chain of references that comes back
    /// to one of its own before reaching a schema (`A` is `$ref: B`, `B` is `$ref: A`) admits
    /// nothing a model could send, and is an error like a dangling reference.
    fn resolve(&self, reference: &str) -> Result<&'a Value, String> {
        let mut chain = vec![reference];
        let mut pointed = None;
        loop {
            let current = chain[chain.len() - 1];
            let Some(pointer) = current.strip_prefix('#') else {
                return Err(format!(
                    "`$ref` {current} points outside the schema; only references inside it are followed"
                ));
            };
            let target = self
                .root
                .pointer(pointer)
                .ok_or_else(|| format!("`$ref` {current} points to nothing"))?;
            let first = *pointed.get_or_insert(target);
            match target.get("$ref").and_then(Value::as_str) {
                Some(next) if chain.contains(&next) => {
                    return Err(format!(
                        "`$ref` {reference} refers to itself through references only ({} -> {next})",
                        chain.join(" -> ")
                    ));
                }
                Some(next) => chain.push(next),
                None => return Ok(first),
            }
        }
    }

    /// A copy of `value` with every local `$ref` replaced by what it points to; a branch that
    /// recurses too often or goes too deep becomes `Value::Null` (removed by `simplify`).
    fn inline(&mut self, value: &Value, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            self.cut = true;
            return Ok(Value::Null);
        }
        match value {
            Value::Object(object) => {
                if let Some(reference) = object.get("$ref") {
                    let Some(reference) = reference.as_str() else {
                        return Err("a `$ref` is not a string".to_owned());
                    };
                    let target = self.resolve(reference)?;
                    if self.stack.iter().filter(|seen| *seen == reference).count() >= MAX_REF_REPEAT
                    {
                        self.cut = true;
                        return Ok(Value::Null);
                    }
                    self.stack.push(reference.to_owned());
                    let expanded = self.inline(target, depth + 1);
                    self.stack.pop();
                    let mut expanded = expanded?;
                    // Keywords next to the `$ref` (a description, say) win over the target's.
                    if let Value::Object(expanded) = &mut expanded {
                        for (key, sibling) in object.iter().filter(|(key, _)| *key != "$ref") {
                            expanded.insert(key.clone(), self.inline(sibling, depth + 1)?);
                        }
                    }
                    return Ok(expanded);
                }
                let mut copy = Map::new();
                for (key, item) in object {
                    if matches!(
                        key.as_str(),
                        "$defs" | "definitions" | "$schema" | "$id" | "$comment"
                    ) {
                        continue;
                    }
                    // `properties` maps names to schemas: its keys are never keywords.
                    copy.insert(key.clone(), self.inline(item, depth + 1)?);
                }
                Ok(Value::Object(copy))
            }
            Value::Array(items) => items
                .iter()
                .map(|item| self.inline(item, depth + 1))
                .collect::<Result<_, _>>()
                .map(Value::Array),
            other => Ok(other.clone()),
        }
    }
}

/// One canonical form, bottom-up: `allOf` merged, `oneOf` as `anyOf`, `null` in types and
/// unions turned into `nullable`, `const` as a one-value `enum`, objects with `properties`,
/// cut branches removed.
fn simplify(value: Value) -> Result<Value, String> {
    let mut object = match value {
        Value::Bool(true) => return Ok(json!({})),
        Value::Bool(false) => return Err("a schema is `false` (it admits nothing)".to_owned()),
        Value::Object(object) => object,
        Value::Null => return Ok(Value::Null),
        other => return Err(format!("a schema is {other}, not an object")),
    };
    // Children first.
    if let Some(Value::Object(properties)) = object.remove("properties") {
        let mut simplified = Map::new();
        for (name, property) in properties {
            let property = simplify(property)?;
            if !property.is_null() {
                simplified.insert(name, property);
            }
        }
        object.insert("properties".to_owned(), Value::Object(simplified));
    }
    if let Some(items) = object.remove("items") {
        let items = simplify(items)?;
        if !items.is_null() {
            object.insert("items".to_owned(), items);
        }
    }
    if let Some(Value::Object(additional)) = object.remove("additionalProperties") {
        let additional = simplify(Value::Object(additional))?;
        // A cut schema for extra keys admits anything.
        object.insert(
            "additionalProperties".to_owned(),
            if additional.is_null() { json!(true) } else { additional },
        );
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = object.remove(key) {
            let mut simplified = Vec::new();
            for branch in branches {
                let branch = simplify(branch)?;
                if !branch.is_null() {
                    simplified.push(branch);
                }
            }
            object.insert(key.to_owned(), Value::Array(simplified));
        }
    }
    // allOf: every branch must hold, so properties and requirements add up.
    if let Some(Value::Array(branches)) = object.remove("allOf") {
        for branch in branches {
            merge_all(&mut object, branch);
        }
    }
    // oneOf as anyOf: looser for the model; the executor validates against the original.
    if let Some(Value::Array(branches)) = object.remove("oneOf") {
        let any = object.entry("anyOf").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(any) = any {
            any.extend(branches);
        }
    }
    if let Some(Value::Array(branches)) = object.remove("anyOf") {
        let (nulls, others): (Vec<Value>, Vec<Value>) =
            branches.into_iter().partition(is_null_type);
        if !nulls.is_empty() {
            object.insert(NULLABLE.to_owned(), Value::Bool(true));
        }
        match others.len() {
            0 if nulls.is_empty() => {}
            0 => {
                object.insert("type".to_owned(), json!("null"));
            }
            1 => {
                let Some(Value::Object(only)) = others.into_iter().next() else { unreachable!() };
                for (key, item) in only {
                    object.entry(key).or_insert(item);
                }
            }
            _ => {
                object.insert("anyOf".to_owned(), Value::Array(others));
            }
        }
    }
    if let Some(Value::Array(types)) = object.get("type").cloned() {
        let (nulls, others): (Vec<Value>, Vec<Value>) =
            types.into_iter().partition(|kind| kind == "null");
        if !nulls.is_empty() {
            object.insert(NULLABLE.to_owned(), Value::Bool(true));
        }
        match others.len() {
            0 => {
                object.insert("type".to_owned(), json!("null"));
            }
            1 => {
                object.insert("type".to_owned(), others[0].clone());
            }
            _ => {
                object.remove("type");
                let branches: Vec<Value> =
                    others.into_iter().map(|kind| json!({"type": kind})).collect();
                object.insert("anyOf".to_owned(), Value::Array(branches));
            }
        }
    }
    if let Some(constant) = object.remove("const") {
        object.insert("enum".to_owned(), Value::Array(vec![constant]));
    }
    if let Some(Value::Array(values)) = object.get_mut("enum")
        && values.iter().any(Value::is_null)
    {
        values.retain(|value| !value.is_null());
        object.insert(NULLABLE.to_owned(), Value::Bool(true));
    }
    let is_object =
        object.get("type") == Some(&json!("object")) || object.contains_key("properties");
    if is_object {
        object.entry("type").or_insert_with(|| json!("object"));
        if !object.contains_key("properties") {
            object.insert("properties".to_owned(), json!({}));
            object.insert(BARE.to_owned(), Value::Bool(true));
        }
        let names: Vec<String> = object["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        if let Some(Value::Array(required)) = object.get_mut("required") {
            required.retain(|name| {
                name.as_str().is_some_and(|name| names.iter().any(|known| known == name))
            });
            let mut seen = Vec::new();
            required.retain(|name| {
                if seen.contains(name) {
                    false
                } else {
                    seen.push(name.clone());
                    true
                }
            });
        }
    }
    Ok(Value::Object(object))
}

fn is_null_type(schema: &Value) -> bool {
    schema.get("type") == Some(&json!("null"))
        || schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| values.iter().all(Value::is_null))
}

/// Merge an `allOf` branch into its parent: properties and requirements add up, other
/// keywords of the parent win.
fn merge_all(object: &mut Map<String, Value>, branch: Value) {
    let Value::Object(branch) = branch else { return };
    for (key, item) in branch {
        match (key.as_str(), object.get_mut(&key), item) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, property) in theirs {
                    mine.entry(name).or_insert(property);
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            (BARE, _, _) => {}
            (_, Some(_), _) => {}
            (_, None, item) => {
                object.insert(key, item);
            }
        }
    }
    if object.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty()) {
        object.remove(BARE);
    }
}

/// The top level as one object: a union of objects becomes one object with every property
/// (required: what every branch requires); a schema without a type is taken as an object.
fn top_level_object(schema: Value) -> Result<Value, String> {
    let Value::Object(mut object) = schema else {
        return Err("the input schema is not an object".to_owned());
    };
    if let Some(Value::Array(branches)) = object.remove("anyOf") {
        if !branches.iter().all(|branch| branch.get("type") == Some(&json!("object"))) {
            return Err("the input schema is a union of things that are not all objects".to_owned());
        }
        let mut properties =
            object.remove("properties").and_then(|p| p.as_object().cloned()).unwrap_or_default();
        let mut required: Option<Vec<Value>> = None;
        for branch in &branches {
            if let Some(theirs) = branch.get("properties").and_then(Value::as_object) {
                for (name, property) in theirs {
                    properties.entry(name.clone()).or_insert_with(|| property.clone());
                }
            }
            let theirs: Vec<Value> =
                branch.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            required = Some(match required {
                None => theirs,
                Some(mine) => mine.into_iter().filter(|name| theirs.contains(name)).collect(),
            });
        }
        object.insert("type".to_owned(), json!("object"));
        object.insert("properties".to_owned(), Value::Object(properties));
        object.remove(BARE);
        let required = required.unwrap_or_default();
        if required.is_empty() {
            object.remove("required");
        } else {
            object.insert("required".to_owned(), Value::Array(required));
        }
    }
    match object.get("type") {
        None => {
            object.insert("type".to_owned(), json!("object"));
            object.entry("properties").or_insert_with(|| json!({}));
        }
        Some(kind) if kind == "object" => {}
        Some(kind) => return Err(format!("the input schema is of type {kind}, not an object")),
    }
    // A tool's arguments are never null.
    object.remove(NULLABLE);
    Ok(Value::Object(object))
}

/// The canonical form as JSON Schema: `nullable` written as a `null` type or branch, markers
/// removed.
fn json_schema_form(schema: Value) -> Value {
    map_schema(schema, &mut |mut object| {
        object.remove(BARE);
        if object.remove(NULLABLE) == Some(Value::Bool(true)) {
            if let Some(kind) = object.get("type").cloned().filter(|kind| kind != "null") {
                object.insert("type".to_owned(), json!([kind, "null"]));
                if let Some(Value::Array(values)) = object.get_mut("enum") {
                    values.push(Value::Null);
                }
            } else if let Some(Value::Array(branches)) = object.get_mut("anyOf") {
                branches.push(json!({"type": "null"}));
            } else if !object.contains_key("type") && !object.is_empty() {
                let description = object.remove("description");
                let mut wrapped = Map::new();
                if let Some(description) = description {
                    wrapped.insert("description".to_owned(), description);
                }
                wrapped
                    .insert("anyOf".to_owned(), json!([Value::Object(object), {"type": "null"}]));
                return wrapped;
            }
        }
        object
    })
}

/// Apply `change` to every schema object, children first.
fn map_schema(
    schema: Value,
    change: &mut impl FnMut(Map<String, Value>) -> Map<String, Value>,
) -> Value {
    let Value::Object(mut object) = schema else { return schema };
    if let Some(Value::Object(properties)) = object.remove("properties") {
        let properties = properties
            .into_iter()
            .map(|(name, property)| (name, map_schema(property, change)))
            .collect();
        object.insert("properties".to_owned(), Value::Object(properties));
    }
    if let Some(items) = object.remove("items") {
        object.insert("items".to_owned(), map_schema(items, change));
    }
    if let Some(additional) = object.remove("additionalProperties") {
        object.insert("additionalProperties".to_owned(), map_schema(additional, change));
    }
    if let Some(Value::Array(branches)) = object.remove("anyOf") {
        let branches = branches.into_iter().map(|branch| map_schema(branch, change)).collect();
        object.insert("anyOf".to_owned(), Value::Array(branches));
    }
    Value::Object(change(object))
}

/// The strict-mode form of an object schema, when it can have one: every object closed
/// (`additionalProperties: false`) with every property required, only supported keywords.
fn strict_form(schema: &Value) -> Option<Value> {
    let mut properties = 0;
    let strict = strict_node(schema, 0, true, &mut properties)?;
    (properties <= STRICT_MAX_PROPERTIES).then_some(json_schema_form(strict))
}

fn strict_node(schema: &Value, depth: usize, root: bool, properties: &mut usize) -> Option<Value> {
    if depth > STRICT_MAX_DEPTH {
        return None;
    }
    let object = schema.as_object()?;
    let mut out = Map::new();
    for (key, item) in object {
        match key.as_str() {
            BARE => {
                // An object that takes any keys cannot be closed; a tool taking none can.
                if !root {
                    return None;
                }
            }
            NULLABLE => {
                out.insert(key.clone(), item.clone());
            }
            "properties" => {
                let mut closed = Map::new();
                for (name, property) in item.as_object()? {
                    *properties += 1;
                    closed
                        .insert(name.clone(), strict_node(property, depth + 1, false, properties)?);
                }
                out.insert(key.clone(), Value::Object(closed));
            }
            "items" => {
                out.insert(key.clone(), strict_node(item, depth + 1, false, properties)?);
            }
            "anyOf" => {
                let branches = item
                    .as_array()?
                    .iter()
                    .map(|branch| strict_node(branch, depth + 1, false, properties))
                    .collect::<Option<Vec<_>>>()?;
                out.insert(key.clone(), Value::Array(branches));
            }
            "additionalProperties" => {
                if item != &Value::Bool(false) {
                    return None;
                }
            }
            "format" => {
                if !STRICT_FORMATS.contains(&item.as_str()?) {
                    return None;
                }
                out.insert(key.clone(), item.clone());
            }
            "enum" => {
                if item.as_array()?.len() > STRICT_MAX_ENUM {
                    return None;
                }
                out.insert(key.clone(), item.clone());
            }
            other if STRICT_KEYWORDS.contains(&other) => {
                out.insert(key.clone(), item.clone());
            }
            _ => return None,
        }
    }
    if out.get("type") == Some(&json!("object")) {
        let names: Vec<&String> = out
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        let required: Vec<&str> = out
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // An optional property would have to become required-but-nullable, which the original
        // schema may refuse; such tools stay non-strict.
        if names.iter().any(|name| !required.contains(&name.as_str())) {
            return None;
        }
        let required: Vec<Value> = names.iter().map(|name| json!(name)).collect();
        out.insert("required".to_owned(), Value::Array(required));
        out.insert("additionalProperties".to_owned(), Value::Bool(false));
    }
    Some(Value::Object(out))
}

/// The canonical form as Gemini's Schema object, at `at` (for messages) and `path` (for the
/// values offered as JSON text, collected in `json_text`).
fn gemini_form(
    schema: Value,
    at: &str,
    path: &[String],
    json_text: &mut Vec<Vec<String>>,
) -> Result<Value, String> {
    let Value::Object(object) = schema else {
        return Err(format!("{at} is not a schema object"));
    };
    let mut out = Map::new();
    let kind = object.get("type").and_then(Value::as_str).map(str::to_owned);
    let mut notes = Vec::new();
    for (key, item) in object {
        match key.as_str() {
            "type" => {
                let Some(kind) = item.as_str() else { continue };
                out.insert(key, json!(kind.to_ascii_uppercase()));
            }
            "properties" => {
                let mut converted = Map::new();
                for (name, property) in item.as_object().cloned().unwrap_or_default() {
                    let mut inner = path.to_vec();
                    inner.push(name.clone());
                    let property =
                        gemini_property(property, &format!("{at}.{name}"), &inner, json_text)?;
                    converted.insert(name, property);
                }
                out.insert(key, Value::Object(converted));
            }
            "items" => {
                let mut inner = path.to_vec();
                inner.push("[]".to_owned());
                let items = gemini_property(item, &format!("{at}[]"), &inner, json_text)?;
                out.insert(key, items);
            }
            "anyOf" => {
                let branches = item
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|branch| gemini_form(branch, at, path, &mut Vec::new()))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(key, Value::Array(branches));
            }
            "enum" => {
                let values = item.as_array().cloned().unwrap_or_default();
                if kind.as_deref() == Some("string") && values.iter().all(Value::is_string) {
                    out.insert(key, Value::Array(values));
                } else {
                    // Gemini takes enums on strings only: say the values in words instead.
                    let listed: Vec<String> = values.iter().map(Value::to_string).collect();
                    notes.push(format!("one of: {}", listed.join(", ")));
                }
            }
            "format" => {
                let allowed = rules::gemini_formats(kind.as_deref());
                if item.as_str().is_some_and(|format| allowed.contains(&format)) {
                    out.insert(key, item);
                }
            }
            "examples" => {
                if let Some(first) = item.as_array().and_then(|examples| examples.first()) {
                    out.insert("example".to_owned(), first.clone());
                }
            }
            "exclusiveMinimum" | "exclusiveMaximum" if item.is_number() => {
                let bound = if key == "exclusiveMinimum" { "above" } else { "below" };
                notes.push(format!("strictly {bound} {item}"));
            }
            other if GEMINI_FIELDS.contains(&other) => {
                out.insert(key, item);
            }
            _ => {}
        }
    }
    if !notes.is_empty() {
        let description = out.get("description").and_then(Value::as_str).unwrap_or_default();
        let joined = notes.join("; ");
        let text =
            if description.is_empty() { joined } else { format!("{description} ({joined})") };
        out.insert("description".to_owned(), Value::String(text));
    }
    if let Some(Value::Array(required)) = out.get("required")
        && required.is_empty()
    {
        out.remove("required");
    }
    if let (Some(Value::Array(required)), Some(Value::Object(properties))) =
        (out.get("required"), out.get("properties"))
    {
        let kept: Vec<Value> = required
            .iter()
            .filter(|name| name.as_str().is_some_and(|name| properties.contains_key(name)))
            .cloned()
            .collect();
        out.insert("required".to_owned(), Value::Array(kept));
    }
    Ok(Value::Object(out))
}

/// A property in Gemini's form. What Gemini's Schema cannot describe (an object with any keys,
/// an array of anything, a value of any type) is offered as a string holding its JSON, and its
/// path recorded so that the executor parses it back before validating.
fn gemini_property(
    schema: Value,
    at: &str,
    path: &[String],
    json_text: &mut Vec<Vec<String>>,
) -> Result<Value, String> {
    // The branches of a union are described whole or not at all: a value offered as JSON text
    // inside one branch could not be told apart from a string of another.
    let branches = schema.get("anyOf").and_then(Value::as_array);
    if gemini_describable(&schema)
        && branches.is_none_or(|branches| branches.iter().all(gemini_describable_throughout))
    {
        return gemini_form(schema, at, path, json_text);
    }
    json_text.push(path.to_vec());
    let what = match schema.get("type").and_then(Value::as_str) {
        Some("object") => "a JSON object",
        Some("array") => "a JSON array",
        _ => "a JSON value",
    };
    let description = schema.get("description").and_then(Value::as_str).unwrap_or_default();
    let text = if description.is_empty() {
        format!("{what}, written as a string")
    } else {
        format!("{description} ({what}, written as a string)")
    };
    let mut out = json!({"type": "STRING", "description": text});
    if schema.get(NULLABLE) == Some(&Value::Bool(true)) {
        out["nullable"] = Value::Bool(true);
    }
    Ok(out)
}

/// Whether Gemini's Schema can describe `schema` itself: an object with properties of its own,
/// an array with `items`, a value of a stated type, or a union.
fn gemini_describable(schema: &Value) -> bool {
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            schema.get(BARE).is_none()
                && schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty())
        }
        Some("array") => schema.get("items").is_some(),
        Some(_) => true,
        None => schema.get("anyOf").is_some(),
    }
}

/// Whether Gemini's Schema can describe `schema` and every schema inside it.
fn gemini_describable_throughout(schema: &Value) -> bool {
    gemini_describable(schema)
        && schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(Map::values)
            .all(gemini_describable_throughout)
        && schema.get("items").is_none_or(gemini_describable_throughout)
        && schema
            .get("anyOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .all(gemini_describable_throughout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVIDERS: [Provider; 3] = [Provider::OpenAi, Provider::Anthropic, Provider::Gemini];

    fn normalized(schema: &Value, provider: Provider) -> Result<Normalized, String> {
        normalize(schema.as_object().expect("a schema object"), provider)
    }

    /// An object schema with the one property `name`.
    fn with_property(name: &str, property: Value) -> Value {
        json!({"type": "object", "properties": {name: property}, "required": [name]})
    }

    #[test]
    fn malformed_schemas_are_refused_for_every_provider_saying_where() {
        // (what is wrong, the schema, a part of the reason)
        let cases = [
            ("type is a number", with_property("a", json!({"type": 5})), "/properties/a/type"),
            (
                "type is misspelt",
                with_property("a", json!({"type": "strnig"})),
                "/properties/a/type",
            ),
            (
                "a type in a list is misspelt",
                with_property("a", json!({"type": ["string", "nul"]})),
                "/properties/a/type",
            ),
            (
                "minimum is text",
                with_property("n", json!({"type": "integer", "minimum": "x"})),
                "/properties/n/minimum",
            ),
            (
                "maxLength is negative",
                with_property("s", json!({"type": "string", "maxLength": -1})),
                "/properties/s/maxLength",
            ),
            ("enum is a number", with_property("e", json!({"enum": 3})), "/properties/e/enum"),
            (
                "description is a number",
                with_property("a", json!({"type": "string", "description": 7})),
                "/properties/a/description",
            ),
            (
                "the top description is a number",
                json!({"type": "object", "description": 7, "properties": {}}),
                "/description",
            ),
            (
                "properties is a list",
                json!({"type": "object", "properties": ["a", "b"]}),
                "/properties",
            ),
            ("properties is text", json!({"type": "object", "properties": "a"}), "/properties"),
            (
                "a property is a number",
                json!({"type": "object", "properties": {"a": 5}}),
                "/properties/a",
            ),
            (
                "required is text",
                json!({"type": "object", "properties": {"a": {}}, "required": "a"}),
                "/required",
            ),
            (
                "required holds a number",
                json!({"type": "object", "properties": {"a": {}}, "required": [1]}),
                "/required/0",
            ),
            (
                "required names one twice",
                json!({"type": "object", "properties": {"a": {}}, "required": ["a", "a"]}),
                "/required",
            ),
            (
                "format is a number",
                with_property("d", json!({"type": "string", "format": 5})),
                "/properties/d/format",
            ),
            (
                "pattern is a number",
                with_property("p", json!({"type": "string", "pattern": 5})),
                "/properties/p/pattern",
            ),
            (
                "items is a list (tuple form)",
                with_property(
                    "t",
                    json!({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}),
                ),
                "/properties/t/items",
            ),
            (
                "items is a list under draft-07",
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"t": {"type": "array", "items": [{"type": "string"}]}}}),
                "not an object",
            ),
            ("anyOf is empty", with_property("u", json!({"anyOf": []})), "/properties/u/anyOf"),
            (
                "anyOf is an object",
                with_property("u", json!({"anyOf": {"type": "string"}})),
                "/properties/u/anyOf",
            ),
            (
                "additionalProperties is text",
                json!({"type": "object", "properties": {}, "additionalProperties": "no"}),
                "/additionalProperties",
            ),
            ("a $ref is a number", with_property("r", json!({"$ref": 5})), "/properties/r/$ref"),
            (
                "a cycle of references",
                json!({"type": "object", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "properties": {"a": {"$ref": "#/$defs/A"}}}),
                "refers to itself through references only",
            ),
            (
                "a property that is a reference to itself",
                json!({"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}}),
                "refers to itself through references only",
            ),
            (
                "a top level that is a reference to itself",
                json!({"$ref": "#"}),
                "refers to itself through references only",
            ),
            (
                "a dangling reference",
                with_property("a", json!({"$ref": "#/$defs/Missing"})),
                "points to nothing",
            ),
            (
                "a top level that is an array",
                json!({"type": "array", "items": {"type": "string"}}),
                "not an object",
            ),
            ("a property that admits nothing", with_property("a", json!(false)), "admits nothing"),
        ];
        for (what, schema, expected) in cases {
            for provider in PROVIDERS {
                let reason = normalized(&schema, provider)
                    .expect_err(&format!("{what}: refused for {}", provider.as_str()));
                assert!(reason.contains(expected), "{what} for {}: {reason}", provider.as_str());
            }
        }
    }

    #[test]
    fn awkward_but_valid_schemas_convert_for_every_provider_within_its_rules() {
        let cases = [
            (
                "an unknown format",
                with_property("when", json!({"type": "string", "format": "strnig-date"})),
            ),
            (
                "a recursive schema",
                json!({"type": "object", "$defs": {"Node": {"type": "object", "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["label"]}}, "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"]}),
            ),
            (
                "a chain of references that ends",
                json!({"type": "object", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/A"}}}),
            ),
            (
                "a reference to the top",
                json!({"type": "object", "properties": {"name": {"type": "string"}, "parent": {"$ref": "#"}}}),
            ),
            (
                "nullable forms",
                json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}, "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "c": {"enum": ["x", null]}}}),
            ),
            (
                "enums on numbers and a const",
                json!({"type": "object", "properties": {"level": {"type": "integer", "enum": [1, 2]}, "kind": {"const": "fixed"}}}),
            ),
            (
                "true and empty schemas",
                json!({"type": "object", "properties": {"any": true, "also": {}}}),
            ),
            (
                "a free-form object",
                json!({"type": "object", "properties": {"payload": {"type": "object", "additionalProperties": true}}, "required": ["payload"]}),
            ),
            (
                "allOf and oneOf",
                json!({"type": "object", "properties": {"a": {"allOf": [{"type": "object", "properties": {"x": {"type": "string"}}}, {"properties": {"y": {"type": "number"}}}]}, "b": {"oneOf": [{"type": "string"}, {"type": "boolean"}]}}}),
            ),
            (
                "draft-07 definitions",
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"S": {"type": "string"}}, "type": "object", "properties": {"s": {"$ref": "#/definitions/S"}}}),
            ),
            ("no type at the top", json!({"properties": {"q": {"type": "string"}}})),
            ("nothing at all", json!({})),
            (
                "a union with a free-form branch",
                json!({"type": "object", "properties": {"data": {"anyOf": [{"type": "object", "additionalProperties": true}, {"type": "array", "items": {"type": "object"}}]}}}),
            ),
        ];
        for (what, schema) in cases {
            for provider in PROVIDERS {
                let converted = normalized(&schema, provider)
                    .unwrap_or_else(|reason| panic!("{what} for {}: {reason}", provider.as_str()));
                if let Some(out) = &converted.schema {
                    assert_eq!(
                        rules::check_converted(provider, out, converted.strict),
                        Ok(()),
                        "{what} for {}: {out}",
                        provider.as_str()
                    );
                }
            }
        }
        // An unknown format keeps an OpenAI tool out of strict mode and out of Gemini's schema.
        let unknown = with_property("when", json!({"type": "string", "format": "strnig-date"}));
        assert!(!normalized(&unknown, Provider::OpenAi).unwrap().strict);
        let gemini = normalized(&unknown, Provider::Gemini).unwrap().schema.unwrap();
        assert_eq!(gemini["properties"]["when"], json!({"type": "STRING"}));
        let known = with_property("when", json!({"type": "string", "format": "date"}));
        assert!(normalized(&known, Provider::OpenAi).unwrap().strict);
        // A union Gemini cannot describe in every branch is offered whole as JSON text.
        let union = json!({"type": "object", "properties": {"data": {"anyOf": [{"type": "object"}, {"type": "string"}]}}});
        let gemini = normalized(&union, Provider::Gemini).unwrap();
        assert_eq!(gemini.json_text, [vec!["data".to_owned()]]);
        assert_eq!(gemini.schema.unwrap()["properties"]["data"]["type"], "STRING");
    }
}
