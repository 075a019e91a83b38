//! The execution record and its failures as they travel to the database (and, on an outage,
//! through the spill file), plus the redaction and truncation applied before storing them.
//!
//! # Design notes
//!
//! `record.rs` holds the records (`Execution`, `Failure`; `Failure::for_attempts` makes one row per
//! failed attempt of a call, for the gateway and `orca eval` alike) and the redaction and
//! truncation applied before storing them. An `Execution` says who made the call from the caller's
//! `config::Principal`: `principal` (its name: an API key's, or a token's user), `client_id` and
//! `role` (a token's client and the `auth.roles` it holds, filled by
//! `gateway::edge::AuthGate::token_principal`; `None` otherwise). `Execution::of` starts a row from
//! an `Origin` (who and how: the gateway's `carried::origin` reads it off the principal and the
//! request, `orca eval` makes its own) with a success that used no model, and each call sets its
//! own fields over it (`with_llm` adds what its model requests came to). Fields added later carry
//! `#[serde(default)]`, so spill files written by an older orca still read;
//! `copy::EXECUTION_COLUMNS` and the `UNNEST` of `store::insert_batch` list the same columns.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::splice::{self, RawJson};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ExecutionStatus {
    Success,
    Error,
    Timeout,
}

impl ExecutionStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::Success => "success",
            ExecutionStatus::Error => "error",
            ExecutionStatus::Timeout => "timeout",
        }
    }
}

/// Where a call came from: a client of the gateway, or an `orca eval` run measuring
/// `generate_sql` (recorded like any call, but kept apart in exports and lessons).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    #[default]
    Mcp,
    Eval,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Mcp => "mcp",
            Source::Eval => "eval",
        }
    }
}

/// One tool call, whichever server answered it. The id is a UUID v7 minted by the gateway, so
/// replaying a record that may already be stored is harmless.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Execution {
    pub(crate) id: Uuid,
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) upstream_tool: Option<String>,
    pub(crate) principal: String,
    pub(crate) user_id: Option<String>,
    pub(crate) agent_id: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) transport: String,
    pub(crate) trace_id: String,
    /// Arguments with secrets redacted.
    pub(crate) request_data: Value,
    /// The response, cut at the configured size, as the JSON text that is stored.
    pub(crate) response_data: Option<Payload>,
    /// The full size of the serialized response, even when `response_data` was cut.
    pub(crate) response_bytes: i64,
    pub(crate) llm_provider: Option<String>,
    pub(crate) llm_model: Option<String>,
    pub(crate) llm_prompt_tokens: Option<i64>,
    pub(crate) llm_completion_tokens: Option<i64>,
    /// Records spilled before this field existed have none.
    #[serde(default)]
    pub(crate) llm_latency_ms: Option<i32>,
    pub(crate) execution_time_ms: i32,
    pub(crate) status: ExecutionStatus,
    pub(crate) error_code: Option<String>,
    pub(crate) error_message: Option<String>,
    pub(crate) feedback_token: Uuid,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) failures: Vec<Failure>,
    /// Records spilled before this field existed came from the gateway.
    #[serde(default)]
    pub(crate) source: Source,
    /// The OAuth client the call came through (`client_id`, else `azp`); `None` for API keys,
    /// stdio, and records spilled before this field existed.
    #[serde(default)]
    pub(crate) client_id: Option<String>,
    /// The roles of `auth.roles` that allowed the call (`Principal::role`); `None` likewise.
    #[serde(default)]
    pub(crate) role: Option<String>,
    /// The target database (catalog) an SQL tool worked on; `None` for other tools and records
    /// spilled before this field existed.
    #[serde(default)]
    pub(crate) database: Option<String>,
    /// Who made the call by identity (`Principal::identity`), which tells an API key from a
    /// token user of the same `principal`; `None` for refused requests and records spilled
    /// before this field existed.
    #[serde(default)]
    pub(crate) principal_id: Option<String>,
    /// The call's span, of which tracking's write is a child; `None` with traces off. Neither
    /// stored nor spilled.
    #[serde(skip)]
    pub(crate) span: Option<opentelemetry::trace::SpanContext>,
}

/// Who made a call and how it came, as its row says.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origin {
    pub(crate) principal: String,
    /// `Principal::identity`; `None` for a request refused before it had a principal.
    pub(crate) principal_id: Option<String>,
    pub(crate) client_id: Option<String>,
    pub(crate) role: Option<String>,
    pub(crate) user_id: Option<String>,
    pub(crate) agent_id: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) transport: String,
    pub(crate) source: Source,
}

impl Execution {
    /// The row of a call from `origin` to `server`'s `tool`, made now: a success that used no
    /// model, stored nothing and took no time, until the call's own fields are set over it
    /// (`Execution { status, .., ..Execution::of(..) }`).
    pub(crate) fn of(origin: Origin, server: String, tool: String, trace_id: String) -> Execution {
        Execution {
            id: Uuid::now_v7(),
            server,
            tool,
            upstream_tool: None,
            principal: origin.principal,
            principal_id: origin.principal_id,
            user_id: origin.user_id,
            agent_id: origin.agent_id,
            session_id: origin.session_id,
            transport: origin.transport,
            trace_id,
            request_data: Value::Null,
            response_data: None,
            response_bytes: 0,
            llm_provider: None,
            llm_model: None,
            llm_prompt_tokens: None,
            llm_completion_tokens: None,
            llm_latency_ms: None,
            execution_time_ms: 0,
            status: ExecutionStatus::Success,
            error_code: None,
            error_message: None,
            feedback_token: Uuid::new_v4(),
            created_at: Utc::now(),
            failures: Vec::new(),
            source: origin.source,
            client_id: origin.client_id,
            role: origin.role,
            database: None,
            span: None,
        }
    }

    /// The row with what the call's model requests came to.
    pub(crate) fn with_llm(mut self, usage: Option<&crate::tool::LlmUsage>) -> Execution {
        if let Some(usage) = usage {
            self.llm_provider = Some(usage.provider.clone());
            self.llm_model = Some(usage.model.clone());
            self.llm_prompt_tokens = usage.prompt_tokens;
            self.llm_completion_tokens = usage.completion_tokens;
            self.llm_latency_ms = usage.latency_ms;
        }
        self
    }
}

/// A JSON value as stored: the text it serialized to when the record was made. It is written to
/// the database as it is and never parsed again on the way; in the spill file it is an ordinary
/// JSON value, so spill files of every version read alike.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Payload(String);

impl Payload {
    pub(crate) fn of(value: &Value) -> Payload {
        Payload(json_text(value))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Only the spill file takes this path: parsing the text back costs nothing that matters.
        serde_json::from_str::<Value>(&self.0)
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Payload, D::Error> {
        Value::deserialize(deserializer).map(|value| Payload::of(&value))
    }
}

/// One failed attempt within an execution (a failed call has at least one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Failure {
    pub(crate) id: Uuid,
    pub(crate) error_type: String,
    pub(crate) error_code: Option<String>,
    pub(crate) error_details: Value,
    pub(crate) retry_attempt: i32,
    pub(crate) created_at: DateTime<Utc>,
}

impl Failure {
    /// The failure rows of one call: one per earlier failed attempt (`retry_attempt` 1, 2, ...),
    /// then one for the error the call ended with, if it ended with one.
    pub(crate) fn for_attempts(
        earlier: &[crate::tool::ToolError],
        last: Option<&crate::tool::ToolError>,
        trace_id: &str,
        now: DateTime<Utc>,
    ) -> Vec<Failure> {
        earlier
            .iter()
            .chain(last)
            .enumerate()
            .map(|(index, error)| Failure {
                id: Uuid::now_v7(),
                error_type: error.error_type().to_owned(),
                error_code: Some(error.code.as_str().to_owned()),
                error_details: error.to_json(trace_id),
                retry_attempt: i32::try_from(index + 1).unwrap_or(i32::MAX),
                created_at: now,
            })
            .collect()
    }
}

const REDACTED: &str = "[REDACTED]";

/// Whether an argument name looks like it holds a secret.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('-', "_");
    const EXACT_SUFFIXES: [&str; 9] = [
        "token",
        "api_key",
        "apikey",
        "authorization",
        "credentials",
        "credential",
        "private_key",
        "access_key",
        "passwd",
    ];
    key.contains("password")
        || key.contains("secret")
        || EXACT_SUFFIXES.iter().any(|suffix| key.ends_with(suffix))
}

/// Arguments as stored: values under secret-looking keys (password, token, secret, api_key,
/// authorization ...) are replaced, and passwords inside connection URLs are masked.
pub(crate) fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => redact_object(map),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        Value::String(text) if text.contains("://") && text.contains('@') => {
            Value::from(crate::config::mask_url(text))
        }
        other => other.clone(),
    }
}

/// A tool result as stored: when a secret-looking top-level field holds something (a
/// confirmation token in a dry run, a page token), the result is redacted like arguments;
/// anything else is kept as it is, without copying large results. (A tabular result's
/// `page_token` is `null` when there is no next page: nothing to hide, and no copy.)
pub(crate) fn redact_response(value: Value) -> Value {
    match &value {
        Value::Object(map) if holds_secret(map) => redact_object(map),
        _ => value,
    }
}

/// Whether a result has a secret-looking top-level field that is not `null`.
fn holds_secret(map: &Map<String, Value>) -> bool {
    map.iter().any(|(key, value)| !value.is_null() && is_secret_key(key))
}

/// A tool result as stored by the gateway: redacted like [`redact_response`] and cut like
/// [`cut_response`], serialized straight from the result rather than from a copy of it. `text`,
/// when given, must be `value` serialized (the text block the gateway made of it): it is stored
/// as it is when nothing needs redacting, so that the result is not serialized a second time.
///
/// `spliced`, when given, is the placeholder that stands in `value` and `text` for a member
/// encoded beforehand, and its bytes (see `splice`): what is stored is the result with those
/// bytes in place, cut without being put together whole.
pub(crate) fn stored_response(
    value: &Value,
    text: Option<&str>,
    spliced: Option<(&str, &RawJson)>,
    max_bytes: usize,
) -> (Payload, i64) {
    match (value, text, spliced) {
        (Value::Object(map), _, _) if holds_secret(map) => {
            let mut redacted = redact_object(map);
            if let (Some((placeholder, raw)), Value::Object(redacted)) = (spliced, &mut redacted) {
                for member in redacted.values_mut() {
                    if member.as_str() == Some(placeholder) {
                        let decoded: Value = serde_json::from_slice(&raw.to_vec())
                            .expect("pre-encoded JSON was written by serde_json");
                        *member = redact(&decoded);
                    }
                }
            }
            cut_response(&redacted, max_bytes)
        }
        (_, Some(text), Some((placeholder, raw))) => {
            cut_pieces(&splice::resolved(text, placeholder, raw), max_bytes)
        }
        (_, Some(text), None) => cut_text(text.to_owned(), max_bytes),
        (_, None, _) => cut_response(value, max_bytes),
    }
}

/// [`cut_text`] of the text made of `pieces` (UTF-8 once joined, each piece too), joined only
/// as far as it is stored.
fn cut_pieces(pieces: &[&[u8]], max_bytes: usize) -> (Payload, i64) {
    let total: usize = pieces.iter().map(|piece| piece.len()).sum();
    let size = i64::try_from(total).unwrap_or(i64::MAX);
    let mut kept = Vec::with_capacity(total.min(max_bytes));
    for piece in pieces {
        let room = max_bytes.min(total) - kept.len();
        kept.extend_from_slice(&piece[..piece.len().min(room)]);
    }
    // The pieces are whole UTF-8: only a cut at the end can split a character, and then the
    // text stops before it.
    let text = String::from_utf8(kept).unwrap_or_else(|error| {
        let valid = error.utf8_error().valid_up_to();
        let mut bytes = error.into_bytes();
        bytes.truncate(valid);
        String::from_utf8(bytes).expect("valid up to here")
    });
    if total <= max_bytes {
        return (Payload(text), size);
    }
    let preview = serde_json::json!({ "truncated": true, "size_bytes": size, "preview": text });
    (Payload::of(&preview), size)
}

/// An argument object as stored, redacted like [`redact`].
pub(crate) fn redact_object(map: &Map<String, Value>) -> Value {
    let mut out = Map::with_capacity(map.len());
    for (key, inner) in map {
        let stored = if is_secret_key(key) && !inner.is_null() {
            Value::from(REDACTED)
        } else {
            redact(inner)
        };
        out.insert(key.clone(), stored);
    }
    Value::Object(out)
}

/// A response as stored: whole when it fits in `max_bytes`, otherwise a preview of its start.
/// Returns the stored text and the full serialized size.
pub(crate) fn cut_response(value: &Value, max_bytes: usize) -> (Payload, i64) {
    cut_text(json_text(value), max_bytes)
}

/// [`cut_response`] of a response already serialized to `text`.
pub(crate) fn cut_text(text: String, max_bytes: usize) -> (Payload, i64) {
    let size = i64::try_from(text.len()).unwrap_or(i64::MAX);
    if text.len() <= max_bytes {
        return (Payload(text), size);
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let preview =
        serde_json::json!({ "truncated": true, "size_bytes": size, "preview": &text[..end] });
    (Payload::of(&preview), size)
}

/// A JSON value's text, written straight into a buffer (`Value::to_string` goes through
/// `fmt::Write` a token at a time).
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serializes")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let input = json!({
            "sql": "select 1",
            "password": "hunter2",
            "nested": {"api_key": "k", "Authorization": "Bearer x", "max_tokens": 5, "list": [{"client-secret": "s"}]},
            "dsn": "postgres://app:pw@db:5432/x",
            "feedback_token": "t"
        });
        let expected = json!({
            "sql": "select 1",
            "password": REDACTED,
            "nested": {"api_key": REDACTED, "Authorization": REDACTED, "max_tokens": 5, "list": [{"client-secret": REDACTED}]},
            "dsn": "postgres://app:****@db:5432/x",
            "feedback_token": REDACTED
        });
        assert_eq!(redact(&input), expected);
    }

    #[test]
    fn large_responses_are_cut_with_their_full_size_kept() {
        let value = json!({"text": "é".repeat(100)});
        let (stored, size) = cut_response(&value, 50);
        assert_eq!(size, value.to_string().len() as i64);
        let stored: Value = serde_json::from_str(stored.as_str()).unwrap();
        assert_eq!(stored["truncated"], json!(true));
        assert!(stored["preview"].as_str().is_some_and(|preview| preview.len() <= 50));
        let (whole, _) = cut_response(&value, 10_000);
        assert_eq!(whole.as_str(), value.to_string());
    }

    #[test]
    fn a_stored_response_is_redacted_and_cut_like_a_copy_would_be() {
        let value = json!({"confirmation_token": "secret", "rows": [1, 2, 3]});
        let text = value.to_string();
        for serialized in [None, Some(text.as_str())] {
            // The text block, when given, is never stored over a redaction.
            let (stored, size) = stored_response(&value, serialized, None, 10_000);
            let expected = redact_response(value.clone());
            assert_eq!(stored.as_str(), expected.to_string());
            assert_eq!(size, expected.to_string().len() as i64);
        }
        // A secret-looking field that holds nothing hides nothing: the text is stored as it is
        // (a tabular result's `page_token` on the last page).
        let tabular = json!({"rows": [["a", 1]], "page_token": null});
        let tabular_text = tabular.to_string();
        assert_eq!(
            stored_response(&tabular, Some(&tabular_text), None, 10_000).0.as_str(),
            tabular_text
        );
        let paged = json!({"rows": [], "page_token": "next"});
        assert_eq!(
            stored_response(&paged, Some(&paged.to_string()), None, 10_000).0.as_str(),
            json!({"rows": [], "page_token": "[REDACTED]"}).to_string()
        );
        let plain = json!({"rows": "x".repeat(100)});
        let plain_text = plain.to_string();
        assert_eq!(stored_response(&plain, None, None, 50), cut_response(&plain, 50));
        assert_eq!(stored_response(&plain, Some(&plain_text), None, 50), cut_response(&plain, 50));
        assert_eq!(
            stored_response(&plain, Some(&plain_text), None, 10_000),
            cut_response(&plain, 10_000)
        );
    }

    #[test]
    fn a_spliced_response_is_stored_as_the_whole_result_would_be() {
        let rows = json!([[1, "é".repeat(40)], [2, "\"quoted\""]]);
        let bytes = serde_json::to_vec(&rows).unwrap();
        // In chunks that end inside characters.
        let raw = RawJson::from_chunks(bytes.chunks(7).map(<[u8]>::to_vec).collect());
        let whole = json!({"schema": [], "rows": rows, "row_count": 2});
        let placed = json!({"schema": [], "rows": "orca-splice-test", "row_count": 2});
        let text = placed.to_string();
        let spliced = Some(("orca-splice-test", &raw));
        // Whole, and cut at every length, even through a character.
        for max in [10_000, 60, 41, 40, 39, 20, 0] {
            assert_eq!(
                stored_response(&placed, Some(&text), spliced, max),
                cut_response(&whole, max),
                "cut at {max}"
            );
        }
        // Redacted: the bytes go back in place in the copy that is stored.
        let secret = json!({"password": "x", "rows": "orca-splice-test"});
        let (stored, _) = stored_response(&secret, Some(&secret.to_string()), spliced, 10_000);
        assert_eq!(
            stored.as_str(),
            redact_response(json!({"password": "x", "rows": rows})).to_string()
        );
    }

    #[test]
    fn a_payload_is_an_ordinary_json_value_in_the_spill_file() {
        let payload = Payload::of(&json!({"rows": [1, 2], "sql": "select \"a\""}));
        let line = serde_json::to_string(&payload).unwrap();
        assert_eq!(line, payload.as_str());
        let read: Payload = serde_json::from_str(&line).unwrap();
        assert_eq!(read, payload);
    }
}
