//! Targets for the two edges where clients send bytes: a `/mcp` body over HTTP and the lines of
//! stdin in stdio mode.
//!
//! # Design notes
//!
//! `edge.rs`: `http_body` (`gateway::edge::check_json_rpc` against an independent JSON parse: the
//! UTF-8 offset, the depth, the batch; refusals short enough never to quote the body; what passes
//! parsed by rmcp as its HTTP transport does and round-tripped) and `stdio_lines` (rmcp's
//! `AsyncRwTransport`, what `gateway::stdio` serves on, fed in pieces of 1 to 16 bytes, must
//! deliver exactly the messages of the complete lines a JSON parser accepts, lines over the limit
//! dropped whole, without hanging).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

use crate::gateway::{BodyProblem, Intercept, SCAN_LIMIT, Take, check_json_rpc, takes_directly};

/// `http.max_json_depth`'s default.
const MAX_JSON_DEPTH: usize = 64;

/// How long a refusal may be: it names the problem, it never quotes the body back.
const MAX_REFUSAL_CHARS: usize = 200;

/// A `/mcp` body: the edge's checks agree with a real JSON parser (UTF-8 offset, depth, batch,
/// JSON or not), a refusal does not quote the body, and a body that passes is parsed by rmcp as
/// the HTTP transport does, into a message that serializes and parses back to itself.
pub(super) fn http_body(data: &[u8]) {
    let verdict = check_json_rpc(data, MAX_JSON_DEPTH);
    let parsed = serde_json::from_slice::<Value>(data);
    match &verdict {
        Ok(()) => {
            let value = parsed.expect("a body that passed the edge is JSON");
            assert!(!value.is_array(), "a batch passed the edge");
            assert!(depth(&value) <= MAX_JSON_DEPTH, "a body deeper than the limit passed");
            if let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(data) {
                round_trip(&message);
            }
        }
        Err(BodyProblem::NotUtf8(offset)) => {
            let error = std::str::from_utf8(data).expect_err("valid UTF-8 refused as invalid");
            assert_eq!(error.valid_up_to(), *offset);
        }
        Err(BodyProblem::TooDeep(limit)) => {
            assert_eq!(*limit, MAX_JSON_DEPTH);
            if let Ok(value) = &parsed {
                assert!(depth(value) > MAX_JSON_DEPTH, "JSON within the depth limit refused");
            }
        }
        Err(BodyProblem::NotJson(_)) => assert!(parsed.is_err(), "valid JSON refused as invalid"),
        Err(BodyProblem::Batch) => {
            assert!(matches!(parsed, Ok(Value::Array(_))), "a non-array refused as a batch");
        }
    }
    if let Err(problem) = verdict {
        let message = problem.to_string();
        assert!(message.chars().count() <= MAX_REFUSAL_CHARS, "the refusal is too long: {message}");
    }
}

/// Nesting depth of arrays and objects, as the edge counts it.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(members) => 1 + members.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A message as JSON (rmcp's messages have no `PartialEq`; their JSON form is compared).
fn as_json(message: &ClientJsonRpcMessage) -> Value {
    serde_json::to_value(message).expect("a parsed message serializes")
}

/// Serialize a message and parse it back: it must come back the same.
#[track_caller]
fn round_trip(message: &ClientJsonRpcMessage) {
    let text = serde_json::to_string(message).expect("a parsed message serializes");
    let again: ClientJsonRpcMessage =
        serde_json::from_str(&text).expect("a serialized message parses back");
    assert_eq!(
        as_json(&again),
        as_json(message),
        "the message changed through a round trip: {text}"
    );
}

/// stdin in stdio mode: `gateway::stdio`'s `Intercept` takes the plain `tools/call` lines it
/// serves itself out of the input, delivered in small pieces, and rmcp's transport reads the
/// rest; together they must account for every complete line exactly once, in order: the taken
/// lines are those `takes_directly` accepts (within `SCAN_LIMIT`), and rmcp hands over exactly
/// the messages of the other complete lines that a JSON parser accepts: no line lost, merged or
/// split by where the reads end, a line longer than the limit dropped whole, an unterminated
/// last line never delivered, and no hang.
pub(super) fn stdio_lines(data: &[u8]) {
    let Some((&first, input)) = data.split_first() else {
        return;
    };
    let step = usize::from(first % 16) + 1;
    let max_line = 64 + usize::from(first) * 8;
    let (expected_taken, rest) = taken_lines(input);
    let expected = complete_lines(&rest, max_line);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime starts");
    let taken = Arc::new(Mutex::new(Vec::new()));
    let noted = taken.clone();
    let take: Take = Arc::new(move |line: &[u8]| {
        let served = takes_directly(line);
        if served {
            noted.lock().expect("not poisoned").push(line.to_vec());
        }
        served
    });
    let received = runtime.block_on(async {
        let reader = Intercept::new(Trickle { data: input.to_vec(), position: 0, step }, take);
        let mut transport = AsyncRwTransport::<RoleServer, _, _>::new(reader, tokio::io::sink())
            .with_max_line_length(max_line);
        let mut received = Vec::new();
        loop {
            let next = tokio::time::timeout(Duration::from_secs(10), transport.receive()).await;
            match next.expect("the stdio transport hung on a finite input") {
                Some(message) => received.push(message),
                None => break,
            }
        }
        received
    });
    assert_eq!(
        received.iter().map(as_json).collect::<Vec<_>>(),
        expected.iter().map(as_json).collect::<Vec<_>>()
    );
    for message in &received {
        round_trip(message);
    }
    assert_eq!(*taken.lock().expect("not poisoned"), expected_taken);
}

/// The complete lines (with their `\n`) `Intercept` takes from `input`, and `input` without
/// them.
fn taken_lines(input: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
    let (mut taken, mut rest) = (Vec::new(), Vec::new());
    for line in input.split_inclusive(|byte| *byte == b'\n') {
        if line.ends_with(b"\n") && line.len() <= SCAN_LIMIT && takes_directly(line) {
            taken.push(line.to_vec());
        } else {
            rest.extend_from_slice(line);
        }
    }
    (taken, rest)
}

/// The messages of `input` line by line: complete lines only, `\r\n` as a line end, a leading
/// byte-order mark ignored, lines longer than `max_line` (with their `\n`) dropped.
fn complete_lines(input: &[u8], max_line: usize) -> Vec<ClientJsonRpcMessage> {
    let mut messages = Vec::new();
    let mut rest = input;
    while let Some(newline) = rest.iter().position(|byte| *byte == b'\n') {
        let (line, after) = rest.split_at(newline + 1);
        rest = after;
        if line.len() > max_line {
            continue;
        }
        let line = &line[..newline];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(line);
        if let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(line) {
            messages.push(message);
        }
    }
    messages
}

/// A reader that hands out at most `step` bytes per read, as a pipe may.
struct Trickle {
    data: Vec<u8>,
    position: usize,
    step: usize,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let end = (self.position + self.step)
            .min(self.data.len())
            .min(self.position + buffer.remaining());
        let position = self.position;
        buffer.put_slice(&self.data[position..end]);
        self.position = end;
        Poll::Ready(Ok(()))
    }
}
