//! The guard between a child's stdout and the MCP codec. A message (one line) longer than the
//! limit is never buffered whole: its bytes are dropped as they arrive, the JSON-RPC `id` is
//! picked out of the stream on the way, and the line is replaced by an error response for that
//! id, so the caller waiting for it gets RESULT_TRUNCATED at once instead of a timeout or a
//! broken connection. Lines that are not JSON at all are counted (and dropped by the codec).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

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
                        self.out.extend_from_slice(response.to_string().as_bytes());
                        self.out.push(b'\n');
                    }
                    self.discarding = false;
                } else {
                    let first = self.line.iter().find(|byte| !byte.is_ascii_whitespace());
                    if first.is_some_and(|byte| *byte != b'{' && *byte != b'[') {
                        self.stats.not_json.fetch_add(1, Ordering::Relaxed);
                    }
                    self.out.append(&mut self.line);
                    self.out.push(b'\n');
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

impl<R: AsyncRead + Unpin> AsyncRead for LineLimit<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_position < this.out.len() {
                let ready = &this.out[this.out_position..];
                let n = ready.len().min(buf.remaining());
                buf.put_slice(&ready[..n]);
                this.out_position += n;
                if this.out_position == this.out.len() {
                    this.out.clear();
                    this.out_position = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut chunk) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Ready(Ok(())) => {
                    let filled = chunk.filled().len();
                    if filled == 0 {
                        // End of stream; a trailing partial line has no delimiter and is dropped.
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
    async fn lines_that_are_not_json_are_counted() {
        let (_, stats) = pass(b"hello there\n{\"id\":1}\n", 100).await;
        assert_eq!(stats.not_json.load(Ordering::Relaxed), 1);
    }
}
