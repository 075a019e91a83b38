//! What the `metabase` tools hand back: client errors as orca's taxonomy with the specification's
//! structure in `details` (`status_code`, `error_type`, `metabase_error`, `request_info`,
//! `raw_response`), and answers trimmed to fit a model's context (query rows capped, columns
//! reduced to name, display name and base type, fingerprints and other bulk dropped; ids kept).

use serde_json::{Map, Value, json};

use super::client::{self, Error, RequestInfo};
use crate::tool::{ErrorCode, ToolError};

/// The keys dropped from metadata answers unless `verbose` is asked for: field fingerprints
/// and values, and other bulk a model does not need to write a query.
const METADATA_BULK: [&str; 12] = [
    "fingerprint",
    "fingerprint_version",
    "values",
    "field_values",
    "dimension_options",
    "default_dimension_option",
    "last_analyzed",
    "caveats",
    "points_of_interest",
    "details",
    "features",
    "settings",
];

/// Keys dropped from a stored card or dashboard unless `verbose` is asked for.
const CARD_BULK: [&str; 3] = ["result_metadata", "fingerprint", "last-edit-info"];

/// `value` without `keys`, at any depth.
fn drop_keys(value: &mut Value, keys: &[&str]) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !keys.contains(&key.as_str()));
            for inner in map.values_mut() {
                drop_keys(inner, keys);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| drop_keys(item, keys)),
        _ => {}
    }
}

/// Database or table metadata, without fingerprints and values unless `verbose`.
pub(crate) fn metadata(mut value: Value, verbose: bool) -> Value {
    if !verbose {
        drop_keys(&mut value, &METADATA_BULK);
    }
    value
}

/// A card, dashboard or search answer without result metadata unless `verbose`.
pub(crate) fn entity(mut value: Value, verbose: bool) -> Value {
    if !verbose {
        drop_keys(&mut value, &CARD_BULK);
    }
    value
}

/// A query answer (`POST /api/dataset`, `POST /api/card/:id/query`) for a model: `cols` as
/// name, display name and base type, at most `max_rows` rows, `row_count` (what Metabase
/// returned) and `truncated` (rows were cut here or by Metabase's own limit). `verbose` keeps
/// the columns whole and Metabase's other keys, but the row cap still applies.
pub(crate) fn query_result(body: Value, max_rows: usize, verbose: bool) -> Value {
    let Value::Object(mut body) = body else { return body };
    let mut data = match body.remove("data") {
        Some(Value::Object(data)) => data,
        _ => Map::new(),
    };
    let mut rows = match data.remove("rows") {
        Some(Value::Array(rows)) => rows,
        _ => Vec::new(),
    };
    let returned = rows.len();
    let metabase_truncated = data
        .get("rows_truncated")
        .and_then(Value::as_u64)
        .is_some_and(|limit| limit > 0 && returned as u64 >= limit);
    rows.truncate(max_rows);
    let cols: Vec<Value> = match data.remove("cols") {
        Some(Value::Array(cols)) if verbose => cols,
        Some(Value::Array(cols)) => cols
            .iter()
            .map(|col| {
                json!({
                    "name": col.get("name").cloned().unwrap_or(Value::Null),
                    "display_name": col.get("display_name").cloned().unwrap_or(Value::Null),
                    "base_type": col.get("base_type").cloned().unwrap_or(Value::Null),
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    let row_count = body.get("row_count").and_then(Value::as_u64).unwrap_or(returned as u64);
    let mut out = Map::new();
    out.insert("status".into(), body.remove("status").unwrap_or(Value::Null));
    out.insert("row_count".into(), Value::from(row_count));
    out.insert("returned_rows".into(), Value::from(rows.len()));
    out.insert("truncated".into(), Value::from(rows.len() < returned || metabase_truncated));
    if rows.len() < returned {
        out.insert("max_rows".into(), Value::from(max_rows));
    }
    out.insert("cols".into(), Value::Array(cols));
    out.insert("rows".into(), Value::Array(rows));
    for key in ["database_id", "started_at", "running_time", "context"] {
        if let Some(value) = body.remove(key) {
            out.insert(key.into(), value);
        }
    }
    if let Some(timezone) = data.remove("results_timezone") {
        out.insert("results_timezone".into(), timezone);
    }
    if let Some(native) = data.remove("native_form") {
        let query = native.get("query").cloned().unwrap_or(Value::Null);
        out.insert("native_form".into(), if verbose { native } else { json!({ "query": query }) });
    }
    if verbose {
        for (key, value) in data {
            out.insert(format!("data.{key}"), value);
        }
        for (key, value) in body {
            out.entry(key).or_insert(value);
        }
    }
    Value::Object(out)
}

/// The specification's `error_type` of a status.
fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication",
        403 => "permissions",
        404 => "not_found",
        429 => "rate_limited",
        400..=499 => "validation",
        _ => "server",
    }
}

/// The readable message of a Metabase error body: a JSON string, `message`, `error`, or the
/// `errors` map; the text itself otherwise.
fn metabase_message(parsed: &Value, text: &str) -> String {
    let message = match parsed {
        Value::String(message) => Some(message.clone()),
        Value::Object(map) => map
            .get("message")
            .or_else(|| map.get("error"))
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                map.get("errors").and_then(Value::as_object).map(|errors| {
                    errors
                        .iter()
                        .map(|(key, value)| match value.as_str() {
                            Some(text) => format!("{key}: {text}"),
                            None => format!("{key}: {value}"),
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                })
            }),
        _ => None,
    };
    let message = message.unwrap_or_else(|| text.trim().to_owned());
    message.chars().take(500).collect()
}

/// A Metabase body without stack traces (and without secret-looking keys).
fn without_stacktraces(value: &Value) -> Value {
    let mut value = client::scrub(value);
    drop_keys(&mut value, &["stacktrace", "trace"]);
    value
}

fn details(
    status: Option<u16>,
    error_type: &str,
    message: &str,
    metabase_error: Value,
    request: Option<&RequestInfo>,
    raw: Option<String>,
) -> Box<Value> {
    Box::new(json!({
        "status_code": status,
        "error_type": error_type,
        "message": message,
        "metabase_error": metabase_error,
        "request_info": request.map_or(Value::Null, RequestInfo::to_json),
        "raw_response": raw.map_or(Value::Null, |raw| Value::from(client::cut(&raw))),
    }))
}

/// A client error as a tool error of orca's taxonomy; `variables` names the credentials.
pub(crate) fn tool_error(error: Error, variables: &str) -> ToolError {
    match error {
        Error::Http { status, body, retry_after, request } => {
            let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::String(body.clone()));
            let message = metabase_message(&parsed, &body);
            let cleaned = without_stacktraces(&parsed);
            let raw = match &parsed {
                Value::Object(_) | Value::Array(_) => cleaned.to_string(),
                _ => body.clone(),
            };
            let code = match status {
                401 | 403 => ErrorCode::Unauthorized,
                404 => ErrorCode::NotFound,
                429 => ErrorCode::RateLimited,
                400..=499 => ErrorCode::InvalidInput,
                _ => ErrorCode::UpstreamUnavailable,
            };
            let hint = match status {
                401 => format!("the session was refused even after signing in again; check {variables}"),
                403 => "the Metabase user behind orca lacks the permission for this; ask a Metabase admin, or use a read tool".to_owned(),
                404 if message.contains("API endpoint does not exist") => "this Metabase version has no such endpoint".to_owned(),
                404 => "check the id; search_resources finds ids by name".to_owned(),
                429 => retry_after.map_or_else(
                    || "Metabase asks to slow down; try again shortly".to_owned(),
                    |wait| format!("try again in {} s", wait.as_secs().max(1)),
                ),
                400..=499 => "Metabase refused the request; metabase_error says which field".to_owned(),
                _ => "Metabase failed; try again shortly".to_owned(),
            };
            let mut tool_error =
                ToolError::new(code, format!("metabase answered HTTP {status}: {message}"))
                    .with_hint(hint);
            tool_error.details = Some(details(
                Some(status),
                error_type(status),
                &message,
                cleaned,
                Some(request.as_ref()),
                Some(raw),
            ));
            tool_error
        }
        Error::QueryFailed { status, body, request } => {
            let message = body
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("the query failed")
                .chars()
                .take(500)
                .collect::<String>();
            let cleaned = without_stacktraces(&body);
            let mut metabase_error = Map::new();
            for key in
                ["status", "error", "error_type", "error_code", "state", "class", "via", "ex-data"]
            {
                if let Some(value) = cleaned.get(key) {
                    metabase_error.insert(key.into(), value.clone());
                }
            }
            let mut tool_error =
                ToolError::new(ErrorCode::QueryFailed, format!("the query failed: {message}"))
                    .with_hint(
                        "fix the query (metabase_error has Metabase's reason) and run it again",
                    );
            tool_error.details = Some(details(
                Some(status),
                "query_failed",
                &message,
                Value::Object(metabase_error),
                Some(request.as_ref()),
                Some(cleaned.to_string()),
            ));
            tool_error
        }
        Error::Login { reason } => {
            let mut tool_error = ToolError::new(
                ErrorCode::Unauthorized,
                format!("cannot sign in to Metabase: {reason}"),
            )
            .with_hint(format!("check {variables}; orca signs in again on the next call"));
            tool_error.details =
                Some(details(None, "authentication", &reason, Value::Null, None, None));
            tool_error
        }
        Error::Throttled { retry_after } => {
            let seconds = retry_after.as_secs().max(1);
            let mut tool_error = ToolError::new(
                ErrorCode::RateLimited,
                format!("Metabase throttles logins; the next login is possible in {seconds} s"),
            )
            .with_hint(format!("try again in {seconds} s"));
            tool_error.details = Some(details(
                None,
                "rate_limited",
                "login throttled",
                json!({ "retry_after_seconds": seconds }),
                None,
                None,
            ));
            tool_error
        }
        Error::Unreachable { message, request } => {
            let mut tool_error =
                ToolError::upstream_unavailable(format!("cannot reach Metabase: {message}"))
                    .with_hint("check METABASE_URL and that Metabase is up");
            tool_error.details =
                Some(details(None, "server", &message, Value::Null, request.as_deref(), None));
            tool_error
        }
        Error::Timeout { after, request } => {
            let message = format!("Metabase did not answer within {} ms", after.as_millis());
            let mut tool_error = ToolError::new(ErrorCode::Timeout, message.clone())
                .with_hint("narrow the request, or raise metabase.timeout_ms");
            tool_error.details =
                Some(details(None, "server", &message, Value::Null, request.as_deref(), None));
            tool_error
        }
        Error::Malformed { status, body, request } => {
            let message = format!("Metabase answered HTTP {status} with a body that is not JSON");
            let mut tool_error = ToolError::upstream_unavailable(message.clone())
                .with_hint("check that METABASE_URL points at Metabase itself, not a proxy page");
            tool_error.details = Some(details(
                Some(status),
                "server",
                &message,
                Value::Null,
                Some(request.as_ref()),
                Some(body),
            ));
            tool_error
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Box<RequestInfo> {
        Box::new(RequestInfo {
            endpoint: "/api/card/123".to_owned(),
            method: client::Method::Put,
            params: json!({"name": "x"}),
        })
    }

    #[test]
    fn statuses_map_to_the_taxonomy_and_the_specification_types() {
        for (status, body, code, kind) in [
            (
                403,
                "\"You don't have permissions to do that.\"",
                ErrorCode::Unauthorized,
                "permissions",
            ),
            (404, "\"Not found.\"", ErrorCode::NotFound, "not_found"),
            (
                400,
                r#"{"errors":{"name":"value must be a non-blank string."}}"#,
                ErrorCode::InvalidInput,
                "validation",
            ),
            (429, "slow down", ErrorCode::RateLimited, "rate_limited"),
            (500, "\"Internal server error.\"", ErrorCode::UpstreamUnavailable, "server"),
        ] {
            let error = tool_error(
                Error::Http {
                    status,
                    body: body.to_owned(),
                    retry_after: None,
                    request: request(),
                },
                "METABASE_API_KEY",
            );
            assert_eq!(error.code, code, "{status}");
            let details = error.details.unwrap();
            assert_eq!(details["error_type"], kind, "{status}");
            assert_eq!(details["status_code"], status);
            assert_eq!(details["request_info"]["endpoint"], "/api/card/123");
        }
    }

    #[test]
    fn query_results_keep_a_few_rows_and_plain_columns() {
        let rows: Vec<Value> = (0..500).map(|n| json!([n])).collect();
        let body = json!({"status": "completed", "row_count": 500, "json_query": {},
            "data": {"rows": rows, "cols": [{"name": "n", "display_name": "N", "base_type": "type/Integer", "fingerprint": {}}],
                     "results_metadata": {"columns": []}}});
        let trimmed = query_result(body, 200, false);
        assert_eq!(trimmed["rows"].as_array().unwrap().len(), 200);
        assert_eq!(trimmed["truncated"], true);
        assert_eq!(trimmed["row_count"], 500);
        assert_eq!(
            trimmed["cols"],
            json!([{"name": "n", "display_name": "N", "base_type": "type/Integer"}])
        );
        assert!(trimmed.get("json_query").is_none());
    }

    #[test]
    fn metadata_loses_fingerprints_but_keeps_ids() {
        let value = json!({"id": 1, "tables": [{"id": 10, "fields": [{"id": 100, "fingerprint": {"global": {}}, "values": [1]}]}]});
        assert_eq!(
            metadata(value, false),
            json!({"id": 1, "tables": [{"id": 10, "fields": [{"id": 100}]}]})
        );
    }
}
