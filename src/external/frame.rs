//! The guard between a child's stdout and the MCP codec. A message (one line) longer than the
//! limit is never buffered whole: its bytes are dropped as they arrive, the JSON-RPC `id` is
//! picked out of the stream on the way, and the line is replaced by an error response for that
//! id, so the caller waiting for it gets RESULT_TRUNCATED at once instead of a timeout or a
//! broken connection. Lines that are not JSON at all are counted (and dropped by the codec).
//!
//! It also takes out the answers to the calls orca sent on its own lane (`lane`), by their id,
//! and hands each to its caller when the codec next asks for bytes after every line before it:
//! the codec asks only once it has passed on every whole line it holds, so whatever the server
//! sent before the answer (a call's progress, its log messages) has reached rmcp's service loop
//! first, as when rmcp read the answer itself.
//!
//! # Design notes
//!
//! `frame.rs` sits between a child's stdout and rmcp's codec: a line over `max_response_bytes` is
//! dropped as it streams and replaced by a JSON-RPC error for its `id`, so the waiting call gets
//! `RESULT_TRUNCATED` at once; and it takes out the answers to `lane.rs`'s calls by their id, each
//! handed over only once the codec has read every line before it (so a call's progress and log
//! messages are passed on before its answer arrives, as when rmcp read the answer). `heard.rs`
//! wraps every upstream transport (stdio, Streamable HTTP, HTTP+SSE, a user's own session): each
//! progress notification or log message it reads is counted for the call it belongs to
//! (`Calls::hear` puts a counting guard in the notification's extensions, which rmcp moves into the
//! task that relays it), and `Registered::settle` makes the call's answer wait until those relayed,
//! since rmcp relays notifications from tasks of their own but hands the answer straight back.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use super::lane::Answers;

/// The JSON-RPC error code orca puts in place of an oversized response.
pub(crate) const OVERSIZED_CODE: i32 = -32099;

/// What the guard saw, shared with the supervisor.
#[derive(Debug, Default)]
pub(crate) struct StreamStats {
    pub(crate) oversized: AtomicU64,
    pub(crate) not_json: AtomicU64,
}

pub(crate) struct LineLimit<R> {
    inner: R,
    limit: usize,
    stats: Arc<StreamStats>,
    /// The current line, while it is within the limit.
    line: Vec<u8>,
    discarding: bool,
    /// Bytes ready for the reader.
    out: Vec<u8>,
    out_position: usize,
    scanner: IdScanner,
    chunk: Box<[u8]>,
    /// Where the lane's answers go; `None` when orca sends nothing on a lane of its own.
    answers: Option<Arc<Answers>>,
    /// Answers taken out, each with the length `out` had when it was taken: it is handed over
    /// when the reader, having had every byte before it, asks for more.
    taken: std::collections::VecDeque<(usize, u64, Vec<u8>)>,
}

impl<R> LineLimit<R> {
    pub(crate) fn new(inner: R, limit: usize, stats: Arc<StreamStats>) -> LineLimit<R> {
        LineLimit {
            inner,
            limit,
            stats,
            line: Vec::new(),
            discarding: false,
            out: Vec::new(),
            out_position: 0,
            scanner: IdScanner::default(),
            chunk: vec![0; 64 * 1024].into_boxed_slice(),
            answers: None,
            taken: std::collections::VecDeque::new(),
        }
    }

    /// Take out the answers to the lane's calls (`lane::Answers`) and hand them over there.
    pub(crate) fn with_answers(mut self, answers: Arc<Answers>) -> LineLimit<R> {
        self.answers = Some(answers);
        self
    }

    /// The lane's call a line answers, when it is an answer (no `method`) to one of them.
    fn lane_call(&self) -> Option<u64> {
        self.answers.as_ref()?;
        if self.scanner.method {
            return None;
        }
        super::lane::call_of(self.scanner.found.as_deref()?)
    }

    /// End the line in `self.line`: queue it for the reader, or take it out for the lane's call
    /// it answers.
    fn end_line(&mut self) {
        self.line.push(b'\n');
        match self.lane_call() {
            Some(call) => {
                let line = std::mem::take(&mut self.line);
                self.taken.push_back((self.out.len(), call, line));
            }
            None => {
                self.out.extend_from_slice(&self.line);
                self.line.clear();
            }
        }
    }

    /// Hand over the answers with nothing unread before them.
    fn hand_over(&mut self) {
        let Some(answers) = &self.answers else { return };
        while let Some((at, ..)) = self.taken.front()
            && *at <= self.out_position
        {
            let (_, call, line) = self.taken.pop_front().expect("a front");
            answers.deliver(call, line);
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.scanner.feed(byte);
            if byte == b'\n' {
                if self.discarding {
                    self.stats.oversized.fetch_add(1, Ordering::Relaxed);
                    if let Some(id) = self.scanner.id() {
                        let response = serde_json::json!({
                            "jsonrpc": "2.0",
                            "id": id,
                            "error": {
                                "code": OVERSIZED_CODE,
                                "message": format!("the response is larger than {} bytes", self.limit),
                            }
                        });
                        self.line = response.to_string().into_bytes();
                        self.end_line();
                    }
                    self.discarding = false;
                } else {
                    let first = self.line.iter().find(|byte| !byte.is_ascii_whitespace());
                    if first.is_some_and(|byte| *byte != b'{' && *byte != b'[') {
                        self.stats.not_json.fetch_add(1, Ordering::Relaxed);
                    }
                    self.end_line();
                }
                self.scanner = IdScanner::default();
            } else if !self.discarding {
                self.line.push(byte);
                if self.line.len() > self.limit {
                    self.discarding = true;
                    self.line = Vec::new();
                }
            }
        }
    }
}

impl<R> Drop for LineLimit<R> {
    fn drop(&mut self) {
        if let Some(answers) = &self.answers {
            answers.close();
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimit<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            // The reader asks for more only once it has passed on every whole line it was given:
            // the answers behind those lines may go now.
            this.hand_over();
            if this.out_position == this.out.len() {
                this.out.clear();
                this.out_position = 0;
            }
            if this.out_position < this.out.len() {
                let ready = &this.out[this.out_position..];
                let n = ready.len().min(buf.remaining());
                buf.put_slice(&ready[..n]);
                this.out_position += n;
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut chunk) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => {
                    if let Some(answers) = &this.answers {
                        answers.close();
                    }
                    return Poll::Ready(Err(error));
                }
                Poll::Ready(Ok(())) => {
                    let filled = chunk.filled().len();
                    if filled == 0 {
                        // End of stream; a trailing partial line has no delimiter and is dropped.
                        // Calls still waiting on the lane will get no answer now.
                        if let Some(answers) = &this.answers {
                            answers.close();
                        }
                        return Poll::Ready(Ok(()));
                    }
                    // Borrow the chunk out of `this` while `feed` updates the rest of it.
                    let chunk = std::mem::take(&mut this.chunk);
                    this.feed(&chunk[..filled]);
                    this.chunk = chunk;
                }
            }
        }
    }
}

/// Finds the value of the top-level `"id"` member of a JSON object streamed byte by byte,
/// keeping at most a few bytes.
#[derive(Debug, Default)]
struct IdScanner {
    depth: u32,
    in_string: bool,
    escaped: bool,
    expect_key: bool,
    key: Vec<u8>,
    reading_key: bool,
    id_next: bool,
    capturing: bool,
    value: Vec<u8>,
    found: Option<Vec<u8>>,
    /// Whether the object has a top-level `method`: a request or a notification.
    method: bool,
}

impl IdScanner {
    const MAX: usize = 128;

    fn feed(&mut self, byte: u8) {
        if self.capturing && self.depth == 1 {
            let ends_value = !self.in_string && matches!(byte, b',' | b'}');
            if !ends_value && self.value.len() < Self::MAX {
                self.value.push(byte);
            }
            if ends_value {
                self.capturing = false;
                self.found = Some(std::mem::take(&mut self.value));
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.id_next = self.key == b"id";
                    self.method |= self.key == b"method";
                }
            } else if self.reading_key && self.key.len() < 8 {
                self.key.push(byte);
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.reading_key = true;
                    self.expect_key = false;
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 && byte == b'{' {
                    self.expect_key = true;
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => self.expect_key = true,
            b':' if self.depth == 1 && self.id_next => {
                self.id_next = false;
                self.capturing = true;
                self.value.clear();
            }
            _ => {}
        }
    }

    /// The id, if it was a number or a string.
    fn id(&self) -> Option<serde_json::Value> {
        let text = std::str::from_utf8(self.found.as_deref()?).ok()?.trim();
        match serde_json::from_str::<serde_json::Value>(text).ok()? {
            id @ (serde_json::Value::Number(_) | serde_json::Value::String(_)) => Some(id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    async fn pass(input: &[u8], limit: usize) -> (String, Arc<StreamStats>) {
        let stats = Arc::new(StreamStats::default());
        let mut guard = LineLimit::new(input, limit, stats.clone());
        let mut out = String::new();
        guard.read_to_string(&mut out).await.unwrap();
        (out, stats)
    }

    #[tokio::test]
    async fn short_lines_pass_unchanged() {
        let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n{\"a\":[1,2]}\n";
        let (out, stats) = pass(input, 100).await;
        assert_eq!(out.as_bytes(), input);
        assert_eq!(stats.oversized.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn an_oversized_response_becomes_an_error_for_its_id_wherever_the_id_is() {
        let big = "x".repeat(1000);
        for (line, id) in [
            (format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"t\":\"{big}\"}}}}\n"), "7"),
            (
                format!(
                    "{{\"result\":{{\"id\":99,\"t\":\"{big}\\\"}}\"}},\"jsonrpc\":\"2.0\",\"id\":\"req-8\"}}\n"
                ),
                "\"req-8\"",
            ),
        ] {
            let (out, stats) = pass(format!("{line}{{\"ok\":1}}\n").as_bytes(), 100).await;
            let mut lines = out.lines();
            let error: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
            assert_eq!(error["id"].to_string(), id, "{out}");
            assert_eq!(error["error"]["code"], OVERSIZED_CODE);
            assert_eq!(lines.next(), Some("{\"ok\":1}"));
            assert_eq!(stats.oversized.load(Ordering::Relaxed), 1);
        }
    }

    #[tokio::test]
    async fn the_lanes_answers_are_taken_out_and_handed_over_after_every_line_before_them() {
        let notification = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"orca~1\",\"progress\":1}}\n";
        let answer = "{\"jsonrpc\":\"2.0\",\"result\":{\"content\":[]},\"id\":\"orca~1\"}\n";
        let rmcps = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n";
        // A request of the server's that happens to use such an id is not an answer.
        let request = "{\"id\":\"orca~2\",\"jsonrpc\":\"2.0\",\"method\":\"roots/list\"}\n";
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"orca~2\",\"result\":{{\"t\":\"{}\"}}}}\n",
            "x".repeat(500)
        );
        let input = format!("{notification}{answer}{rmcps}{request}{big}");
        let answers = Arc::new(Answers::default());
        let mut first = answers.wait(1).unwrap();
        let mut second = answers.wait(2).unwrap();
        let stats = Arc::new(StreamStats::default());
        let mut guard = LineLimit::new(input.as_bytes(), 400, stats).with_answers(answers.clone());

        let mut bytes = vec![0; notification.len() - 1];
        guard.read_exact(&mut bytes).await.unwrap();
        assert!(first.receiver.try_recv().is_err(), "handed over before the line ahead was read");
        let mut rest = String::new();
        guard.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, format!("\n{rmcps}{request}"));
        assert_eq!(first.receiver.try_recv().unwrap(), answer.as_bytes());
        let oversized: serde_json::Value =
            serde_json::from_slice(&second.receiver.try_recv().unwrap()).unwrap();
        assert_eq!(oversized["error"]["code"], OVERSIZED_CODE);
        assert_eq!(oversized["id"], "orca~2");
        // The output ended.
        assert!(answers.wait(3).is_none());
    }

    #[tokio::test]
    async fn lines_that_are_not_json_are_counted() {
        let (_, stats) = pass(b"hello there\n{\"id\":1}\n", 100).await;
        assert_eq!(stats.not_json.load(Ordering::Relaxed), 1);
    }
}
