//! Input schemas made acceptable to each provider, on a deep copy: local `$ref`s inlined
//! (recursion expanded to a bounded depth, then cut, never left dangling), `allOf` merged,
//! `oneOf` read as `anyOf`, nullable types and unions brought to one form, `properties: {}`
//! added to bare objects, a top-level union of objects merged into one object; then the
//! provider's own rules: OpenAI's strict mode when the schema allows it, Gemini's Schema
//! object (its fields only, upper-case types, enums on strings only). A schema that cannot be
//! made acceptable is an error naming why; the caller sets that one tool aside.

use serde_json::{Map, Value, json};

use super::provider::Provider;

/// How many times one `$ref` may be expanded inside itself before the branch is cut.
const MAX_REF_REPEAT: usize = 2;
/// Deeper schemas are cut at this depth.
const MAX_DEPTH: usize = 32;
/// Marks an object that had no `properties` of its own (removed before output).
const BARE: &str = "$orcaBare";
/// Marks a schema that also accepts `null` (Gemini's own keyword, rewritten for the others).
const NULLABLE: &str = "nullable";

/// The fields of Gemini's Schema object.
const GEMINI_FIELDS: &[&str] = &[
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

/// The keywords OpenAI's strict mode supports.
const STRICT_KEYWORDS: &[&str] = &[
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
const STRICT_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

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

/// The input schema `input` made acceptable to `provider`.
///
/// # Errors
///
/// Why the schema cannot be made acceptable (a reference outside the schema or to nothing, a
/// top level that is not an object, a required part the provider cannot express).
pub(crate) fn normalize(
    input: &Map<String, Value>,
    provider: Provider,
) -> Result<Normalized, String> {
    let root = Value::Object(input.clone());
    let mut state = Inline { root: &root, stack: Vec::new(), cut: false };
    let inlined = state.inline(&root, 0)?;
    let mut schema = simplify(inlined)?;
    schema = top_level_object(schema)?;
    match provider {
        Provider::OpenAi => {
            let strict = if state.cut { None } else { strict_form(&schema) };
            match strict {
                Some(strict) => Ok(Normalized {
                    schema: Some(ordered(strict)),
                    strict: true,
                    json_text: vec![],
                }),
                None => Ok(Normalized {
                    schema: Some(ordered(json_schema_form(schema))),
                    strict: false,
                    json_text: vec![],
                }),
            }
        }
        Provider::Anthropic => Ok(Normalized {
            schema: Some(ordered(json_schema_form(schema))),
            strict: false,
            json_text: vec![],
        }),
        Provider::Gemini => {
            let mut json_text = Vec::new();
            let schema = gemini_form(schema, "parameters", &[], &mut json_text)?;
            let empty =
                schema.get("properties").and_then(Value::as_object).is_none_or(Map::is_empty);
            Ok(Normalized {
                schema: if empty { None } else { Some(ordered(schema)) },
                strict: false,
                json_text,
            })
        }
    }
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

impl Inline<'_> {
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
                    let Some(pointer) = reference.strip_prefix('#') else {
                        return Err(format!(
                            "`$ref` {reference} points outside the schema; only references inside it are followed"
                        ));
                    };
                    let target = self
                        .root
                        .pointer(pointer)
                        .ok_or_else(|| format!("`$ref` {reference} points to nothing"))?;
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
    (properties <= 5000).then_some(json_schema_form(strict))
}

fn strict_node(schema: &Value, depth: usize, root: bool, properties: &mut usize) -> Option<Value> {
    if depth > 10 {
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
                if item.as_array()?.len() > 1000 {
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
                let allowed: &[&str] = match kind.as_deref() {
                    Some("string") => &["enum", "date-time"],
                    Some("integer") => &["int32", "int64"],
                    Some("number") => &["float", "double"],
                    _ => &[],
                };
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
    let describable = match schema.get("type").and_then(Value::as_str) {
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
    };
    if describable {
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
