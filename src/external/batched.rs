//! A newline-delimited JSON-RPC transport whose writes are combined: each message is encoded
//! when it is handed over, in the order it is handed over, and whichever send gets to the pipe
//! first writes every message queued by then in one `write`. Under concurrent calls the pipe then
//! sees one system call (and the reader one wake-up) for many messages, where rmcp's own
//! transport writes and flushes each message on its own. Reading is rmcp's.
//!
//! A message holding the placeholder of a pre-encoded result (`splice`) is queued in parts and
//! written part by part, so that a big result is never joined into one buffer.
//!
//! # Design notes
//!
//! `batched.rs`: `BatchedTransport`, newline-delimited JSON-RPC over a pair of pipes for orca's own
//! stdio face and for stdio upstreams: each message is encoded when rmcp hands it over, in that
//! order, and whichever send reaches the pipe first writes every message queued by then in one
//! `write` (reading is rmcp's).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::splice::{self, Part};

/// Messages encoded and waiting for the pipe.
#[derive(Debug, Default)]
struct Queue {
    /// Messages with pre-encoded parts (`splice`), and whatever was queued before them; they
    /// are written before `bytes`.
    parts: Vec<Part>,
    bytes: Vec<u8>,
    /// How many messages have been queued, ever.
    queued: u64,
}

struct Shared<W> {
    queue: Mutex<Queue>,
    /// How many messages have reached the pipe, ever.
    written: AtomicU64,
    /// The pipe; `None` once closed. Held by the one send that writes.
    writer: tokio::sync::Mutex<Option<W>>,
    broken: AtomicBool,
}

impl<W: AsyncWrite + Unpin> Shared<W> {
    /// Queue one encoded message (ending in a newline); returns its number.
    fn push(&self, message: &[u8]) -> u64 {
        let mut queue = self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        queue.bytes.extend_from_slice(message);
        queue.queued += 1;
        queue.queued
    }

    /// Queue one message in parts (the last ending in a newline); returns its number.
    fn push_parts(&self, parts: Vec<Part>) -> u64 {
        let mut queue = self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !queue.bytes.is_empty() {
            let before = Bytes::from(std::mem::take(&mut queue.bytes));
            queue.parts.push(Part::Plain(before));
        }
        queue.parts.extend(parts);
        queue.queued += 1;
        queue.queued
    }

    /// Encode `item` and queue it; returns its number. A result with a pre-encoded member is
    /// queued in parts, written without joining them.
    fn enqueue<Role: ServiceRole>(&self, item: &TxJsonRpcMessage<Role>) -> std::io::Result<u64> {
        let mut bytes = serde_json::to_vec(item).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        // Only a server's answers carry results; what orca sends to an upstream is never
        // searched for placeholders.
        if !Role::IS_CLIENT && splice::any_pending() {
            let bytes = Bytes::from(bytes);
            return Ok(match splice::split(&bytes) {
                Some(parts) => self.push_parts(parts),
                None => self.push(&bytes),
            });
        }
        Ok(self.push(&bytes))
    }

    /// Make sure message `number` is written: write the whole queue, unless another send
    /// already did while this one waited for the pipe.
    async fn write_through(&self, number: u64) -> std::io::Result<()> {
        let mut writer = self.writer.lock().await;
        if self.written.load(Ordering::Acquire) >= number {
            return Ok(());
        }
        if self.broken.load(Ordering::Acquire) {
            return Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the pipe failed"));
        }
        let Some(pipe) = writer.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the transport is closed",
            ));
        };
        let (parts, bytes, upto) = {
            let mut queue = self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            (std::mem::take(&mut queue.parts), std::mem::take(&mut queue.bytes), queue.queued)
        };
        let written = async {
            for part in parts {
                for chunk in part.chunks() {
                    pipe.write_all(&chunk).await?;
                }
            }
            pipe.write_all(&bytes).await?;
            pipe.flush().await
        }
        .await;
        match written {
            Ok(()) => {
                self.written.store(upto, Ordering::Release);
                // Hand the allocation back for the next batch when nothing was queued meanwhile.
                let mut queue = self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if queue.bytes.is_empty() {
                    let mut bytes = bytes;
                    bytes.clear();
                    queue.bytes = bytes;
                }
                Ok(())
            }
            Err(error) => {
                self.broken.store(true, Ordering::Release);
                Err(error)
            }
        }
    }
}

/// Where rmcp's reader writes its rare own replies (to a line it cannot parse): into the queue,
/// written out by a task of its own.
struct QueueWriter<W> {
    shared: Arc<Shared<W>>,
    pending: Option<u64>,
}

impl<W: AsyncWrite + Unpin + Send + 'static> AsyncWrite for QueueWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let number = self.shared.push(buf);
        self.pending = Some(number);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if let Some(number) = self.pending.take() {
            let shared = self.shared.clone();
            tokio::spawn(async move {
                if let Err(error) = shared.write_through(number).await {
                    tracing::debug!(%error, "could not write a reply to an unreadable message");
                }
            });
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// Line-delimited MCP over a pair of pipes, with combined writes.
pub(crate) struct BatchedTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead,
    W: AsyncWrite + Unpin + Send + 'static,
{
    reader: AsyncRwTransport<Role, R, QueueWriter<W>>,
    shared: Arc<Shared<W>>,
}

impl<Role, R, W> BatchedTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// `max_line_length` bounds an incoming message, as in rmcp's transport.
    pub(crate) fn new(read: R, write: W, max_line_length: usize) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            written: AtomicU64::new(0),
            writer: tokio::sync::Mutex::new(Some(write)),
            broken: AtomicBool::new(false),
        });
        let queue_writer = QueueWriter { shared: shared.clone(), pending: None };
        let reader =
            AsyncRwTransport::new(read, queue_writer).with_max_line_length(max_line_length);
        BatchedTransport { reader, shared }
    }
}

impl<Role, R, W> BatchedTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A handle that writes into this transport's queue, for messages sent beside rmcp's.
    pub(crate) fn outbox(&self) -> Outbox<W> {
        Outbox { shared: self.shared.clone() }
    }
}

/// Writes messages into a `BatchedTransport`'s queue, in order with the transport's own.
pub(crate) struct Outbox<W> {
    shared: Arc<Shared<W>>,
}

impl<W: AsyncWrite + Unpin + Send + 'static> Outbox<W> {
    pub(crate) async fn send<Role: ServiceRole>(
        &self,
        item: TxJsonRpcMessage<Role>,
    ) -> std::io::Result<()> {
        let number = self.shared.enqueue::<Role>(&item)?;
        self.shared.write_through(number).await
    }
}

impl<Role, R, W> Transport<Role> for BatchedTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<Role>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Encoded now, so the queue keeps the order in which messages were handed over.
        let encoded = self.shared.enqueue::<Role>(&item);
        let shared = self.shared.clone();
        async move { shared.write_through(encoded?).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<Role>>> + Send {
        self.reader.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let queued =
            self.shared.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).queued;
        let flushed = if queued > self.shared.written.load(Ordering::Acquire) {
            self.shared.write_through(queued).await
        } else {
            Ok(())
        };
        // Dropping the pipe closes it: a child reading it sees the end of its input.
        drop(self.shared.writer.lock().await.take());
        let _ = self.reader.close().await;
        flushed
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
    use rmcp::{RoleClient, RoleServer};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    use super::*;

    fn request(id: i64) -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": format!("message {id} ") + &"x".repeat(id as usize % 300)}},
        }))
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_sends_arrive_whole_one_per_line_in_the_order_they_were_handed_over() {
        let (write, read) = tokio::io::duplex(512);
        let (_unused, idle) = tokio::io::duplex(64);
        let mut transport = BatchedTransport::<RoleClient, _, _>::new(idle, write, usize::MAX);
        let mut sends = Vec::new();
        for id in 0..2000 {
            sends.push(tokio::spawn(transport.send(request(id))));
        }
        let reader = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(read).lines();
            let mut ids = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                let message: serde_json::Value = serde_json::from_str(&line).unwrap();
                let id = message["id"].as_i64().unwrap();
                let text = message["params"]["arguments"]["text"].as_str().unwrap();
                assert!(text.starts_with(&format!("message {id} ")), "{line}");
                assert_eq!(text.len(), format!("message {id} ").len() + id as usize % 300);
                ids.push(id);
            }
            ids
        });
        for send in sends {
            send.await.unwrap().unwrap();
        }
        transport.close().await.unwrap();
        let ids = reader.await.unwrap();
        assert_eq!(ids, (0..2000).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_servers_answer_is_spliced_and_a_request_to_an_upstream_never_is() {
        let rows = serde_json::json!([[1, "a \"quoted\" row"], [2, null]]);
        let raw = crate::splice::RawJson::from_chunks(vec![serde_json::to_vec(&rows).unwrap()]);
        let placeholder = crate::splice::register(&raw);
        // To an upstream: the placeholder, even one that is registered, goes as it is.
        let (write, read) = tokio::io::duplex(1 << 16);
        let (_unused, idle) = tokio::io::duplex(64);
        let mut client = BatchedTransport::<RoleClient, _, _>::new(idle, write, usize::MAX);
        let to_upstream: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": placeholder}},
        }))
        .unwrap();
        client.send(to_upstream).await.unwrap();
        client.close().await.unwrap();
        let mut lines = tokio::io::BufReader::new(read).lines();
        let line: serde_json::Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(line["params"]["arguments"]["text"], placeholder.as_str());
        // From orca as a server: the rows in place, in structured content and in the text.
        let structured = serde_json::json!({"rows": placeholder, "row_count": 2});
        let answer: ServerJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 2, "result": {
                "content": [{"type": "text", "text": structured.to_string()}],
                "structuredContent": structured,
            },
        }))
        .unwrap();
        let (write, read) = tokio::io::duplex(1 << 16);
        let (_unused, idle) = tokio::io::duplex(64);
        let mut server = BatchedTransport::<RoleServer, _, _>::new(idle, write, usize::MAX);
        server.send(answer).await.unwrap();
        server.close().await.unwrap();
        let mut lines = tokio::io::BufReader::new(read).lines();
        let line: serde_json::Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let expected = serde_json::json!({"rows": rows, "row_count": 2});
        assert_eq!(line["result"]["structuredContent"], expected);
        assert_eq!(line["result"]["content"][0]["text"], expected.to_string());
    }

    #[tokio::test]
    async fn a_send_after_the_pipe_broke_fails_instead_of_hanging() {
        let (write, read) = tokio::io::duplex(64);
        let (_unused, idle) = tokio::io::duplex(64);
        let mut transport = BatchedTransport::<RoleClient, _, _>::new(idle, write, usize::MAX);
        drop(read);
        assert!(transport.send(request(1)).await.is_err());
        assert!(transport.send(request(2)).await.is_err());
    }

    #[tokio::test]
    async fn messages_are_read_and_an_unreadable_one_is_answered_on_the_same_pipe() {
        let (mut peer_write, read) = tokio::io::duplex(4096);
        let (write, peer_read) = tokio::io::duplex(4096);
        let mut transport = BatchedTransport::<RoleServer, _, _>::new(read, write, usize::MAX);
        peer_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":7}\n")
            .await
            .unwrap();
        peer_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let received = transport.receive().await.unwrap();
        assert!(
            matches!(received, ClientJsonRpcMessage::Request(ref request) if request.id.to_string() == "2")
        );
        let response: ServerJsonRpcMessage = ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            rmcp::model::NumberOrString::Number(2),
        );
        transport.send(response).await.unwrap();
        transport.close().await.unwrap();
        let mut lines = tokio::io::BufReader::new(peer_read).lines();
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(serde_json::from_str::<serde_json::Value>(&line).unwrap());
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0]["error"]["code"], -32600, "{seen:?}");
        assert_eq!(seen[1]["id"], 2, "{seen:?}");
    }
}
