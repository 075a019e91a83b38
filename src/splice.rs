//! Large JSON that reaches the wire without a `serde_json::Value` tree.
//!
//! rmcp carries a tool result's structured content as a `Value`, and serializes the whole
//! JSON-RPC message into one buffer. For a big read that means the rows exist three times
//! (a tree of about 170 bytes per narrow row, the text block, the message buffer). Here the rows
//! are encoded once, straight to bytes ([`RawJson`]), and the result carries a placeholder
//! instead: a string `orca-splice-<128 random bits>` registered with those bytes
//! ([`register`]). Every transport that writes a gateway's answers (stdio, Streamable HTTP,
//! the in-process one of `orca tools`) serializes the small message rmcp hands it, looks for the
//! placeholder ([`split`]) and writes the message in [`Part`]s: the placeholder in structured
//! content becomes the bytes themselves, the one inside the text block (a JSON string) becomes
//! the same bytes escaped as they are written, a chunk at a time.
//!
//! The placeholder is unguessable, so a value from a client, an upstream or the database that
//! looks like one is left as it is; an entry that no transport took within [`MAX_AGE`] (its
//! connection went away) is dropped by a sweep once a minute.
//!
//! # Design notes
//!
//! Big results written without a `Value` tree. rmcp's `CallToolResult` holds structured content as
//! a `serde_json::Value` and its transports serialize a whole message into one buffer, so a
//! 1,000,000-row read existed as a tree (about 170 bytes a narrow row), a text block and a message
//! buffer. `execute_sql` now encodes its rows as they stream in (`sql::EncodedRows`, the same JSON
//! `serde_json` writes, with each column's first 50 non-null values kept for the semantic hints)
//! and returns them as `ToolOutput::spliced`. The gateway (`error::place`) registers the bytes
//! under an unguessable placeholder `orca-splice-<128 random bits>` and puts that string where the
//! rows belong; every transport that writes a gateway's answers (`external::BatchedTransport` for
//! stdio and the in-process gateway of `orca tools`/`orca call`, and `http.rs`'s `splice_body` for
//! stateless Streamable HTTP, JSON or SSE) serializes rmcp's small message, cuts it at the
//! placeholders (`splice::split`; only answers a server writes, never what orca sends to an
//! upstream) and writes the parts: in structured content the bytes themselves, inside the text
//! block (a JSON string) the same bytes escaped 64 KiB at a time as they are written. Tracking
//! stores the result with the bytes in place (`tracking::stored_response`), cut without joining it
//! whole. `--stateful` HTTP keeps sent messages to replay them on reconnection, so its gateway
//! decodes the rows back into the result (`Gateway::without_splicing`). A placeholder no transport
//! took within 10 minutes (its connection went away) is dropped by a sweep once a minute; a string
//! that looks like one but was not registered is left alone.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

/// What every placeholder starts with.
const PREFIX: &[u8] = b"orca-splice-";
/// The length of a placeholder's id: 128 bits in hex.
const ID_LEN: usize = 32;
/// How long an entry waits for its transport before it is dropped.
const MAX_AGE: Duration = Duration::from_secs(600);
/// The size of the escaped pieces written for a text block.
const ESCAPED_CHUNK: usize = 64 * 1024;

/// One JSON value, already encoded (compact, as `serde_json` writes it), in the chunks it was
/// written in: a growing result is never copied into a bigger buffer.
#[derive(Debug, Clone)]
pub(crate) struct RawJson(Vec<Bytes>);

impl RawJson {
    /// `chunks`, joined, must be one JSON value as `serde_json` writes it: compact, with every
    /// control character inside strings escaped (the text block's escaping relies on it). A
    /// chunk may end anywhere, even inside a character.
    pub(crate) fn from_chunks(chunks: Vec<Vec<u8>>) -> RawJson {
        RawJson(chunks.into_iter().filter(|chunk| !chunk.is_empty()).map(Bytes::from).collect())
    }

    /// The value in one buffer, for the rare reader that needs it whole.
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.0.concat()
    }

    /// The chunks, as they were written (for a scan that reads them in place).
    pub(crate) fn chunks(&self) -> &[Bytes] {
        &self.0
    }

    /// The same value made of other chunks (a rewritten one), which must join to one JSON
    /// value as [`RawJson::from_chunks`] requires.
    pub(crate) fn from_bytes(chunks: Vec<Bytes>) -> RawJson {
        RawJson(chunks.into_iter().filter(|chunk| !chunk.is_empty()).collect())
    }
}

/// Where a placeholder's bytes wait for their transport.
struct Registry {
    entries: Mutex<HashMap<[u8; ID_LEN], (RawJson, Instant)>>,
    /// How many entries there are, read without the lock on every message written.
    count: AtomicUsize,
}

static REGISTRY: std::sync::LazyLock<Registry> = std::sync::LazyLock::new(|| Registry {
    entries: Mutex::new(HashMap::new()),
    count: AtomicUsize::new(0),
});

fn entries() -> std::sync::MutexGuard<'static, HashMap<[u8; ID_LEN], (RawJson, Instant)>> {
    REGISTRY.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Register `json` and return the placeholder to put where it belongs in a result.
pub(crate) fn register(json: &RawJson) -> String {
    let id = hex::encode(rand::random::<[u8; ID_LEN / 2]>());
    let mut key = [0u8; ID_LEN];
    key.copy_from_slice(id.as_bytes());
    let now = Instant::now();
    let mut entries = entries();
    sweep(&mut entries, now);
    entries.insert(key, (json.clone(), now));
    REGISTRY.count.store(entries.len(), Ordering::Release);
    drop(entries);
    start_sweeper();
    format!("{}{id}", std::str::from_utf8(PREFIX).expect("ASCII"))
}

/// Drop the entries no transport took in time.
fn sweep(entries: &mut HashMap<[u8; ID_LEN], (RawJson, Instant)>, now: Instant) {
    entries.retain(|_, (_, registered)| now.duration_since(*registered) < MAX_AGE);
}

/// Sweep once a minute, so that the bytes of a result whose connection went away do not wait
/// for the next registration. Started once, on the runtime of the first registration.
fn start_sweeper() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    STARTED.call_once(|| {
        runtime.spawn(async {
            let mut ticks = tokio::time::interval(Duration::from_secs(60));
            loop {
                ticks.tick().await;
                let mut entries = entries();
                sweep(&mut entries, Instant::now());
                REGISTRY.count.store(entries.len(), Ordering::Release);
            }
        });
    });
}

/// Whether any placeholder waits for a transport: when not, a message needs no search.
pub(crate) fn any_pending() -> bool {
    REGISTRY.count.load(Ordering::Acquire) > 0
}

/// A piece of a message as it is written.
#[derive(Debug, Clone)]
pub(crate) enum Part {
    /// Bytes of the message as serialized.
    Plain(Bytes),
    /// A registered value, written as it is (in place of a placeholder string).
    Raw(RawJson),
    /// A registered value inside a JSON string (the text block), escaped as it is written.
    Escaped(RawJson),
}

impl Part {
    /// The bytes to write, in order; an escaped part is escaped a piece at a time, as it is
    /// asked for.
    pub(crate) fn chunks(self) -> Box<dyn Iterator<Item = Bytes> + Send> {
        match self {
            Part::Plain(bytes) => Box::new(std::iter::once(bytes)),
            Part::Raw(json) => Box::new(json.0.into_iter()),
            Part::Escaped(json) => Box::new(json.0.into_iter().flat_map(|chunk| {
                let mut at = 0;
                std::iter::from_fn(move || {
                    if at >= chunk.len() {
                        return None;
                    }
                    let end = (at + ESCAPED_CHUNK).min(chunk.len());
                    let escaped = escape(&chunk[at..end]);
                    at = end;
                    Some(Bytes::from(escaped))
                })
            })),
        }
    }
}

/// `raw` as it appears inside a JSON string: compact JSON from `serde_json` holds no control
/// characters (they are escaped inside its strings), so only quotes and backslashes change.
fn escape(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + raw.len() / 8);
    let mut start = 0;
    for at in memchr::memchr2_iter(b'"', b'\\', raw) {
        out.extend_from_slice(&raw[start..at]);
        out.push(b'\\');
        out.push(raw[at]);
        start = at + 1;
    }
    out.extend_from_slice(&raw[start..]);
    out
}

/// Split a serialized message at its registered placeholders, taking them out of the registry.
/// `None` when it holds none (the message is written as it is).
pub(crate) fn split(message: &Bytes) -> Option<Vec<Part>> {
    if !any_pending() {
        return None;
    }
    let mut parts = Vec::new();
    let mut taken = Vec::new();
    let mut written = 0;
    {
        let entries = entries();
        for at in memchr::memmem::find_iter(message, PREFIX) {
            if at < written {
                continue;
            }
            let id_end = at + PREFIX.len() + ID_LEN;
            let Some(id) = message.get(at + PREFIX.len()..id_end) else { continue };
            let Some((bytes, _)) = entries.get(id) else { continue };
            let before = &message[..at];
            let after = &message[id_end..];
            // In structured content: `"<placeholder>"`; in the text block, a JSON string
            // inside the message: `\"<placeholder>\"`.
            let (start, end, part) = if before.ends_with(b"\\\"") && after.starts_with(b"\\\"") {
                (at - 2, id_end + 2, Part::Escaped(bytes.clone()))
            } else if before.ends_with(b"\"") && after.starts_with(b"\"") {
                (at - 1, id_end + 1, Part::Raw(bytes.clone()))
            } else {
                continue;
            };
            if start > written {
                parts.push(Part::Plain(message.slice(written..start)));
            }
            parts.push(part);
            written = end;
            taken.push(<[u8; ID_LEN]>::try_from(id).expect("ID_LEN bytes"));
        }
    }
    if parts.is_empty() {
        return None;
    }
    if written < message.len() {
        parts.push(Part::Plain(message.slice(written..)));
    }
    let mut entries = entries();
    for id in taken {
        entries.remove(&id);
    }
    REGISTRY.count.store(entries.len(), Ordering::Release);
    Some(parts)
}

/// The text `text` stands for once `placeholder` (a string value in it) is replaced by `raw`,
/// as the pieces to read in order.
pub(crate) fn resolved<'a>(text: &'a str, placeholder: &str, raw: &'a RawJson) -> Vec<&'a [u8]> {
    let quoted = format!("\"{placeholder}\"");
    match text.find(&quoted) {
        Some(at) => std::iter::once(&text.as_bytes()[..at])
            .chain(raw.0.iter().map(|chunk| &chunk[..]))
            .chain(std::iter::once(&text.as_bytes()[at + quoted.len()..]))
            .collect(),
        None => vec![text.as_bytes()],
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// How many bytes a part writes.
    fn written_len(part: &Part) -> usize {
        match part {
            Part::Plain(bytes) => bytes.len(),
            Part::Raw(json) => json.to_vec().len(),
            Part::Escaped(json) => {
                let bytes = json.to_vec();
                bytes.len() + bytes.iter().filter(|byte| matches!(byte, b'"' | b'\\')).count()
            }
        }
    }

    /// `bytes` cut into chunks of `size`, even through a character.
    fn chunked(bytes: Vec<u8>, size: usize) -> RawJson {
        RawJson::from_chunks(bytes.chunks(size).map(<[u8]>::to_vec).collect())
    }

    fn written(parts: Vec<Part>) -> Vec<u8> {
        parts.into_iter().flat_map(Part::chunks).flat_map(|bytes| bytes.to_vec()).collect()
    }

    /// A message as rmcp would write it, with `rows` in structured content and, serialized,
    /// in the text block.
    fn message(rows: &Value) -> Value {
        let structured = json!({"schema": [], "rows": rows, "row_count": 2});
        json!({
            "jsonrpc": "2.0",
            "id": 7,
            "result": {
                "content": [{"type": "text", "text": serde_json::to_string(&structured).unwrap()}],
                "structuredContent": structured,
                "isError": false,
            }
        })
    }

    #[test]
    fn a_placeholder_becomes_the_bytes_in_structured_content_and_their_escaping_in_the_text() {
        let rows = json!([
            [1, "quote \" and backslash \\ and newline \n and tab \t", null],
            [2, "ünïcødé \u{1} \u{2028}", {"nested": ["\"x\""]}],
        ]);
        // Chunks of 5 bytes: some end inside an escape sequence or a character.
        let raw = chunked(serde_json::to_vec(&rows).unwrap(), 5);
        let placeholder = register(&raw);
        let serialized = Bytes::from(serde_json::to_vec(&message(&json!(placeholder))).unwrap());
        let parts = split(&serialized).expect("the placeholder is found");
        let expected_len: usize = parts.iter().map(written_len).sum();
        let bytes = written(parts);
        assert_eq!(bytes.len(), expected_len);
        let spliced: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(spliced, message(&rows));
        // Byte for byte what serde_json writes of the whole message.
        assert_eq!(bytes, serde_json::to_vec(&message(&rows)).unwrap());
        // Taken: the same message again is written as it is.
        assert!(split(&serialized).is_none());
    }

    #[test]
    fn a_placeholder_nobody_registered_is_left_as_it_is() {
        let raw = RawJson::from_chunks(vec![b"[1]".to_vec()]);
        let _pending = register(&raw);
        let forged = format!("{}{}", "orca-splice-", "0".repeat(ID_LEN));
        let serialized = Bytes::from(serde_json::to_vec(&message(&json!(forged))).unwrap());
        assert!(split(&serialized).is_none());
        let short = Bytes::from_static(b"{\"a\":\"orca-splice-12\"}");
        assert!(split(&short).is_none());
    }

    #[test]
    fn large_text_is_escaped_in_chunks_that_join_to_the_whole() {
        let rows: Vec<Value> = (0..20_000).map(|n| json!([n, format!("\"row\" {n} \\")])).collect();
        let rows = Value::Array(rows);
        let bytes = serde_json::to_vec(&rows).unwrap();
        assert!(bytes.len() > 4 * ESCAPED_CHUNK);
        let raw = chunked(bytes, 100_000);
        let placeholder = register(&raw);
        let serialized = Bytes::from(serde_json::to_vec(&message(&json!(placeholder))).unwrap());
        let bytes = written(split(&serialized).unwrap());
        assert_eq!(bytes, serde_json::to_vec(&message(&rows)).unwrap());
    }

    /// Strings made to confuse the search: quotes, backslashes, the prefix with and without an
    /// id, a placeholder nobody registered, and any characters.
    fn tricky_string() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("orca-splice-".to_owned()),
            Just(format!("orca-splice-{}", "a".repeat(ID_LEN))),
            Just("\\\"".to_owned()),
            Just("\\".to_owned()),
            Just("\"".to_owned()),
            "[0-9a-f]{0,40}",
            any::<String>(),
        ];
        prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn whatever_surrounds_a_placeholder_the_message_is_written_as_with_the_value_in_place(
            before in tricky_string(),
            after in tricky_string(),
            cells in prop::collection::vec(tricky_string(), 0..8),
            chunk in 1usize..64,
        ) {
            let rows = Value::from(cells);
            let raw = RawJson::from_chunks(
                serde_json::to_vec(&rows).unwrap().chunks(chunk).map(<[u8]>::to_vec).collect(),
            );
            let placeholder = register(&raw);
            let message = |rows: &Value| {
                let structured = json!({"before": before, "rows": rows, "after": after});
                json!({
                    "jsonrpc": "2.0", "id": 1,
                    "result": {
                        "content": [{"type": "text", "text": serde_json::to_string(&structured).unwrap()}],
                        "structuredContent": structured,
                        "_meta": {"note": format!("{before}{after}")},
                    }
                })
            };
            let serialized = Bytes::from(serde_json::to_vec(&message(&json!(placeholder))).unwrap());
            let bytes = written(split(&serialized).expect("the placeholder is found"));
            prop_assert_eq!(bytes, serde_json::to_vec(&message(&rows)).unwrap());
        }
    }

    #[test]
    fn resolved_text_reads_as_the_value_with_the_bytes_in_place() {
        let raw = chunked(b"[[1,\"a\"]]".to_vec(), 3);
        let text = r#"{"rows":"orca-splice-x","n":1}"#;
        let pieces = resolved(text, "orca-splice-x", &raw);
        let joined: Vec<u8> = pieces.concat();
        assert_eq!(joined, br#"{"rows":[[1,"a"]],"n":1}"#.to_vec());
    }
}
