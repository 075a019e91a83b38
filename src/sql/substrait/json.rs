//! JSON access with the proto3 JSON mapping's leniencies (camelCase or snake_case keys, integers
//! as numbers or strings, enums by name or number) and the plan's error messages.

use serde_json::{Map, Value};

use super::{PlanError, Result};

pub(super) fn invalid(path: &str, message: impl std::fmt::Display) -> PlanError {
    PlanError::Invalid(format!("{path}: {message}"))
}

pub(super) fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// A short description of a JSON value for messages.
pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 40 => {
            format!("\"{}…\"", s.chars().take(40).collect::<String>())
        }
        Value::String(s) => format!("\"{s}\""),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

pub(super) fn snake(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>> {
    value
        .as_object()
        .ok_or_else(|| invalid(path, format!("expected an object, found {}", describe(value))))
}

/// A field by its camelCase name (or the snake_case one); `null` counts as absent.
pub(super) fn get<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).or_else(|| object.get(&snake(key))).filter(|value| !value.is_null())
}

pub(super) fn required<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a Value> {
    get(object, key).ok_or_else(|| invalid(&format!("{path}.{key}"), "missing"))
}

/// A repeated field; absent is empty.
pub(super) fn array<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a [Value]> {
    match get(object, key) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(invalid(
            &format!("{path}.{key}"),
            format!("expected an array, found {}", describe(other)),
        )),
    }
}

/// The one set field of a oneof message, by its camelCase name.
pub(super) fn oneof<'a>(
    object: &'a Map<String, Value>,
    path: &str,
    skip: &[&str],
    what: &str,
) -> Result<(String, &'a Value)> {
    let mut found: Option<(String, &Value)> = None;
    for (key, value) in object {
        let key = camel(key);
        if value.is_null() || skip.contains(&key.as_str()) {
            continue;
        }
        if let Some((first, _)) = &found {
            return Err(invalid(path, format!("expected {what}, found both {first} and {key}")));
        }
        found = Some((key, value));
    }
    found.ok_or_else(|| invalid(path, format!("expected {what}, found an empty object")))
}

pub(super) fn text<'a>(value: &'a Value, path: &str) -> Result<&'a str> {
    value
        .as_str()
        .ok_or_else(|| invalid(path, format!("expected a string, found {}", describe(value))))
}

pub(super) fn strings<'a>(values: &'a [Value], path: &str) -> Result<Vec<&'a str>> {
    values.iter().enumerate().map(|(i, value)| text(value, &format!("{path}[{i}]"))).collect()
}

/// An integer: a JSON number or a string holding one (as proto3 JSON writes 64-bit integers).
pub(super) fn int(value: &Value, path: &str) -> Result<i64> {
    let parsed = match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e18).map(|f| f as i64)
        }),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| invalid(path, format!("expected an integer, found {}", describe(value))))
}

pub(super) fn opt_int(object: &Map<String, Value>, key: &str, path: &str) -> Result<Option<i64>> {
    get(object, key).map(|value| int(value, &format!("{path}.{key}"))).transpose()
}

/// A non-negative index; absent is 0.
pub(super) fn index(object: &Map<String, Value>, key: &str, path: &str) -> Result<usize> {
    let n = opt_int(object, key, path)?.unwrap_or(0);
    usize::try_from(n).map_err(|_| invalid(&format!("{path}.{key}"), format!("negative index {n}")))
}

/// An unsigned 32-bit anchor or reference; absent is 0.
pub(super) fn unsigned(object: &Map<String, Value>, key: &str, path: &str) -> Result<u64> {
    let n = opt_int(object, key, path)?.unwrap_or(0);
    u32::try_from(n).map(u64::from).map_err(|_| {
        invalid(&format!("{path}.{key}"), format!("{n} is not an unsigned 32-bit integer"))
    })
}

/// An enum given by name or number, as its number.
pub(super) fn enum_value(value: &Value, path: &str, names: &[&str]) -> Result<usize> {
    let number = match value {
        Value::String(name) => names.iter().position(|n| n == name),
        _ => {
            int(value, path).ok().and_then(|n| usize::try_from(n).ok()).filter(|n| *n < names.len())
        }
    };
    number.ok_or_else(|| invalid(path, format!("unknown value {}", describe(value))))
}
