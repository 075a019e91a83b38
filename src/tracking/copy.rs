//! Batches of records in PostgreSQL's binary `COPY` format, the cheapest way into a table: no
//! statement to plan, no arrays to unpack, and rows inserted several at a time.
//!
//! A buffer holds the header, then one tuple per record (a field count, then each field as its
//! length and its bytes in the type's binary send format, `-1` for NULL), then the trailer.
//!
//! # Design notes
//!
//! `copy.rs` encodes a batch in the binary `COPY` format. Payloads (`request_data`,
//! `response_data`) are `json` columns holding the text orca serialized (`record::Payload` for
//! responses, serialized once when the call ends), compressed with lz4 above PostgreSQL's threshold
//! of about 2 kB; nothing parses them on the way in.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::record::{Execution, Failure, Payload};

/// The columns of `orca.mcp_executions` in the order [`executions`] writes them.
pub(super) const EXECUTION_COLUMNS: &str = "id, mcp_name, tool_name, upstream_tool_name, principal, user_id, agent_id, \
     session_id, transport, trace_id, request_data, response_data, response_bytes, llm_provider, llm_model, \
     llm_prompt_tokens, llm_completion_tokens, execution_time_ms, status, error_code, error_message, \
     feedback_token, created_at, llm_latency_ms, source, client_id, role, database_name, principal_id";

/// The columns of `orca.mcp_failures` in the order [`failures`] writes them.
pub(super) const FAILURE_COLUMNS: &str = "id, execution_id, error_type, error_code, error_details, retry_attempt, created_at, execution_created_at";

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00:00 UTC).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// The `COPY` data of a batch of executions. The payloads go to `json` columns as their JSON
/// text (the binary form of `json` is its text): the arguments serialized straight into the
/// buffer, the response copied as it was serialized when the call ended.
pub(super) fn executions(executions: &[Execution]) -> Vec<u8> {
    // The buffer is sized once: growing it would copy every payload again.
    let payloads: usize = executions
        .iter()
        .map(|execution| execution.response_data.as_ref().map_or(0, |data| data.as_str().len()))
        .sum();
    let mut copy = CopyBuffer::with_capacity(payloads + executions.len() * 512);
    for execution in executions {
        copy.tuple(29);
        copy.uuid(execution.id);
        copy.text(Some(&execution.server));
        copy.text(Some(&execution.tool));
        copy.text(execution.upstream_tool.as_deref());
        copy.text(Some(&execution.principal));
        copy.text(execution.user_id.as_deref());
        copy.text(execution.agent_id.as_deref());
        copy.text(execution.session_id.as_deref());
        copy.text(Some(&execution.transport));
        copy.text(Some(&execution.trace_id));
        copy.json(&execution.request_data, false);
        copy.text(execution.response_data.as_ref().map(Payload::as_str));
        copy.int8(Some(execution.response_bytes));
        copy.text(execution.llm_provider.as_deref());
        copy.text(execution.llm_model.as_deref());
        copy.int8(execution.llm_prompt_tokens);
        copy.int8(execution.llm_completion_tokens);
        copy.int4(Some(execution.execution_time_ms));
        copy.text(Some(execution.status.as_str()));
        copy.text(execution.error_code.as_deref());
        copy.text(execution.error_message.as_deref());
        copy.uuid(execution.feedback_token);
        copy.timestamptz(execution.created_at);
        copy.int4(execution.llm_latency_ms);
        copy.text(Some(execution.source.as_str()));
        copy.text(execution.client_id.as_deref());
        copy.text(execution.role.as_deref());
        copy.text(execution.database.as_deref());
        copy.text(execution.principal_id.as_deref());
    }
    copy.finish()
}

/// The `COPY` data of the failures of a batch of executions (`error_details` is `jsonb`).
pub(super) fn failures(executions: &[Execution]) -> Option<Vec<u8>> {
    let failures: Vec<(&Execution, &Failure)> = executions
        .iter()
        .flat_map(|execution| execution.failures.iter().map(move |failure| (execution, failure)))
        .collect();
    if failures.is_empty() {
        return None;
    }
    let mut copy = CopyBuffer::with_capacity(failures.len() * 512);
    for (execution, failure) in failures {
        let execution_id = execution.id;
        copy.tuple(8);
        copy.uuid(failure.id);
        copy.uuid(execution_id);
        copy.text(Some(&failure.error_type));
        copy.text(failure.error_code.as_deref());
        copy.json(&failure.error_details, true);
        copy.int4(Some(failure.retry_attempt));
        copy.timestamptz(failure.created_at);
        // A failure lives in the partition of its execution's day.
        copy.timestamptz(execution.created_at);
    }
    Some(copy.finish())
}

struct CopyBuffer {
    bytes: Vec<u8>,
}

impl CopyBuffer {
    fn with_capacity(capacity: usize) -> CopyBuffer {
        let mut bytes = Vec::with_capacity(capacity + 32);
        bytes.extend_from_slice(SIGNATURE);
        // Flags, then the length of the header extension: none.
        bytes.extend_from_slice(&0_i32.to_be_bytes());
        bytes.extend_from_slice(&0_i32.to_be_bytes());
        CopyBuffer { bytes }
    }

    fn tuple(&mut self, fields: i16) {
        self.bytes.extend_from_slice(&fields.to_be_bytes());
    }

    fn field(&mut self, value: &[u8]) {
        let length = i32::try_from(value.len()).unwrap_or(i32::MAX);
        self.bytes.extend_from_slice(&length.to_be_bytes());
        self.bytes.extend_from_slice(value);
    }

    fn null(&mut self) {
        self.bytes.extend_from_slice(&(-1_i32).to_be_bytes());
    }

    fn uuid(&mut self, value: Uuid) {
        self.field(value.as_bytes());
    }

    fn text(&mut self, value: Option<&str>) {
        match value {
            Some(text) => self.field(text.as_bytes()),
            None => self.null(),
        }
    }

    fn int8(&mut self, value: Option<i64>) {
        match value {
            Some(number) => self.field(&number.to_be_bytes()),
            None => self.null(),
        }
    }

    fn int4(&mut self, value: Option<i32>) {
        match value {
            Some(number) => self.field(&number.to_be_bytes()),
            None => self.null(),
        }
    }

    fn timestamptz(&mut self, value: DateTime<Utc>) {
        let micros = value.timestamp_micros() - POSTGRES_EPOCH_MICROS;
        self.field(&micros.to_be_bytes());
    }

    /// A JSON value serialized in place: its length is written once its text is known. `jsonb`
    /// takes a version byte before the text.
    fn json(&mut self, value: &Value, jsonb: bool) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&0_i32.to_be_bytes());
        if jsonb {
            self.bytes.push(1);
        }
        // Writing a `Value` into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut self.bytes, value);
        let length = i32::try_from(self.bytes.len() - at - 4).unwrap_or(i32::MAX);
        self.bytes[at..at + 4].copy_from_slice(&length.to_be_bytes());
    }

    fn finish(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&(-1_i16).to_be_bytes());
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tuple_is_its_field_count_then_each_field_with_its_length() {
        let mut copy = CopyBuffer::with_capacity(0);
        copy.tuple(4);
        copy.text(Some("ab"));
        copy.text(None);
        copy.int4(Some(7));
        copy.json(&json!({"a": 1}), true);
        let bytes = copy.finish();
        let mut expected = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0\0\x04".to_vec();
        expected.extend_from_slice(b"\0\0\0\x02ab");
        expected.extend_from_slice(b"\xff\xff\xff\xff");
        expected.extend_from_slice(b"\0\0\0\x04\0\0\0\x07");
        expected.extend_from_slice(b"\0\0\0\x08\x01{\"a\":1}");
        expected.extend_from_slice(b"\xff\xff");
        assert_eq!(bytes, expected);
    }

    #[test]
    fn times_count_microseconds_from_the_year_2000() {
        let mut copy = CopyBuffer::with_capacity(0);
        let at = DateTime::parse_from_rfc3339("2000-01-01T00:00:01.000002Z").unwrap();
        copy.timestamptz(at.with_timezone(&Utc));
        assert_eq!(&copy.bytes[19..], &[0, 0, 0, 8, 0, 0, 0, 0, 0, 0x0f, 0x42, 0x42]);
    }
}
