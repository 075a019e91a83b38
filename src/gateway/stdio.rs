//! The stdio face of the gateway: MCP over stdin/stdout for clients that start orca themselves
//! (Claude Desktop, Cursor). stdout carries the protocol only; logs go to stderr. Replies are
//! written through `BatchedTransport`, so answers that are ready together leave in one write.
//!
//! Once the session is up, a plain `tools/call` line on a 2025 revision (`direct::decode`) is
//! taken out of stdin before rmcp's reader sees it and served by `direct` on a task of its own,
//! its answer written into the same queue as rmcp's; a `notifications/cancelled` for such a call
//! cancels it. Every other line reaches rmcp unchanged.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use anyhow::Context as _;
use rmcp::ServiceExt;
use rmcp::model::{ProtocolVersion, RequestId, RequestMetaObject};
use rmcp::service::{Peer, RoleServer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;

use super::direct::{self, Envelope};
use super::{AppState, Carried, Gateway, Transport};
use crate::external::{BatchedTransport, Outbox, Reach};

/// stdin and stdout as non-blocking pipes, when both are pipes (as when a client starts orca).
/// tokio's own stdin and stdout hand every read and write to a blocking thread; on pipes, epoll
/// does the same work with far fewer thread wake-ups per message.
fn pipes() -> Option<(tokio::net::unix::pipe::Receiver, tokio::net::unix::pipe::Sender)> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(stdin).ok()?;
    let sender = tokio::net::unix::pipe::Sender::from_owned_fd(stdout).ok()?;
    Some((receiver, sender))
}

/// Serve one client on stdin/stdout until it disconnects or `shutdown` resolves.
///
/// # Errors
///
/// When the MCP handshake fails.
pub(crate) async fn serve(
    state: AppState,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let gateway = Gateway::new(state, Transport::Stdio);
    match pipes() {
        Some((stdin, stdout)) => serve_on(gateway, stdin, stdout, shutdown).await,
        None => serve_on(gateway, tokio::io::stdin(), tokio::io::stdout(), shutdown).await,
    }
}

async fn serve_on<R, W>(
    gateway: Gateway,
    read: R,
    write: W,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let limit = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
    let slot: Arc<OnceLock<Arc<Direct<W>>>> = Arc::new(OnceLock::new());
    let taken = slot.clone();
    let take = Arc::new(move |line: &[u8]| taken.get().is_some_and(|direct| direct.take(line)));
    let transport =
        BatchedTransport::<RoleServer, _, _>::new(Intercept::new(read, take), write, limit);
    let outbox = transport.outbox();
    let service =
        gateway.clone().serve(transport).await.context("MCP handshake on stdio failed")?;
    let peer = service.peer().clone();
    // A 2026-07-28 session's calls go in rounds and may become tasks: rmcp's, as before.
    let revision = peer.peer_info().map(|info| info.protocol_version.clone());
    if revision.is_some_and(|revision| revision.as_str() < ProtocolVersion::V_2026_07_28.as_str()) {
        let direct = Direct { gateway, peer, outbox, in_flight: Mutex::default() };
        let _ = slot.set(Arc::new(direct));
    }
    let cancel = service.cancellation_token();
    tokio::select! {
        result = service.waiting() => {
            result.context("stdio session ended with an error")?;
        }
        () = shutdown => {
            cancel.cancel();
        }
    }
    Ok(())
}

/// The session's plain tool calls, served without rmcp's server side.
struct Direct<W> {
    gateway: Gateway,
    peer: Peer<RoleServer>,
    outbox: Outbox<W>,
    /// The calls being served, by the client's request id, to cancel them.
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
}

impl<W: AsyncWrite + Send + Unpin + 'static> Direct<W> {
    /// Serve `line` here when it is a plain call or cancels one served here.
    fn take(self: &Arc<Self>, line: &[u8]) -> bool {
        if let Some(envelope) = plain_call(line) {
            let cancelled = CancellationToken::new();
            self.lock().insert(envelope.id.clone(), cancelled.clone());
            let this = Arc::clone(self);
            tokio::spawn(async move { this.call(envelope, cancelled).await });
            return true;
        }
        memchr::memmem::find(line, b"notifications/cancelled").is_some() && self.cancel(line)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn cancel(&self, line: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Cancelled {
            params: Params,
        }
        #[derive(serde::Deserialize)]
        struct Params {
            #[serde(rename = "requestId")]
            request_id: RequestId,
        }
        let Ok(cancelled) = serde_json::from_slice::<Cancelled>(line) else { return false };
        let Some(token) = self.lock().remove(&cancelled.params.request_id) else { return false };
        token.cancel();
        true
    }

    async fn call(&self, envelope: Envelope, cancelled: CancellationToken) {
        let started = Instant::now();
        let Envelope { id, params, .. } = envelope;
        let progress_token = params.meta.as_ref().and_then(RequestMetaObject::get_progress_token);
        let reach = Reach::Session(self.peer.clone());
        let caller = self.gateway.plain_caller(reach, id.clone(), progress_token, cancelled);
        let meta = RequestMetaObject::default();
        let carried = Carried { head: None, meta: &meta };
        let principal = self.gateway.state.config.auth.stdio.clone();
        let message =
            direct::answer(&self.gateway, id.clone(), params, carried, caller, principal, started)
                .await;
        self.lock().remove(&id);
        if let Err(error) = self.outbox.send::<RoleServer>(message).await {
            tracing::debug!(%error, "could not write the answer of a call");
        }
    }
}

/// Whether a line of stdin is one `Direct` serves (once a 2025 session is up): a plain
/// `tools/call`. (A `notifications/cancelled` is taken only for a call served so.)
pub(crate) fn takes_directly(line: &[u8]) -> bool {
    plain_call(line).is_some()
}

fn plain_call(line: &[u8]) -> Option<Envelope> {
    memchr::memmem::find(line, b"tools/call")?;
    direct::decode(line)
}

/// A line (its newline included) longer than this is passed on as it arrives, never judged (a
/// call worth taking is far shorter).
pub(crate) const SCAN_LIMIT: usize = 64 * 1024;

/// Whether a line is served beside rmcp (and so left out of what rmcp reads).
pub(crate) type Take = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// stdin with the lines `take` serves left out: what reaches rmcp's reader is every other line,
/// unchanged and in order.
pub(crate) struct Intercept<R> {
    inner: R,
    take: Take,
    /// The line being read, not yet judged.
    line: Vec<u8>,
    /// Judged bytes for rmcp's reader; `handed` of them handed over.
    out: Vec<u8>,
    handed: usize,
    /// Within a line longer than `SCAN_LIMIT`: its bytes go on until its end.
    passing: bool,
    ended: bool,
}

impl<R> Intercept<R> {
    pub(crate) fn new(inner: R, take: Take) -> Intercept<R> {
        Intercept {
            inner,
            take,
            line: Vec::new(),
            out: Vec::new(),
            handed: 0,
            passing: false,
            ended: false,
        }
    }

    fn judge(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let Some(end) = memchr::memchr(b'\n', data) else {
                if self.passing {
                    self.out.extend_from_slice(data);
                } else {
                    self.line.extend_from_slice(data);
                    if self.line.len() > SCAN_LIMIT {
                        self.out.append(&mut self.line);
                        self.passing = true;
                    }
                }
                return;
            };
            let (line, rest) = data.split_at(end + 1);
            data = rest;
            if self.passing {
                self.out.extend_from_slice(line);
                self.passing = false;
                continue;
            }
            self.line.extend_from_slice(line);
            // Judged only within the limit, however the reads fell.
            if self.line.len() > SCAN_LIMIT || !(self.take)(&self.line) {
                self.out.extend_from_slice(&self.line);
            }
            self.line.clear();
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Intercept<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.handed < this.out.len() {
                let count = buf.remaining().min(this.out.len() - this.handed);
                buf.put_slice(&this.out[this.handed..this.handed + count]);
                this.handed += count;
                if this.handed == this.out.len() {
                    this.out.clear();
                    this.handed = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                // A last line without its newline goes on as it is; then the end.
                if this.line.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                this.out.append(&mut this.line);
                continue;
            }
            let mut chunk = [0_u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(context, &mut read))?;
            if read.filled().is_empty() {
                this.ended = true;
            } else {
                this.judge(read.filled());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn the_lines_taken_are_left_out_and_every_other_byte_goes_on_in_order() {
        let long = format!("{{\"take\": \"{}\"}}\n", "x".repeat(SCAN_LIMIT * 2));
        let input = format!("keep 1\n{{\"take\"}}\nkeep 2\n{long}keep 3\nlast without newline");
        let (mut write, read) = tokio::io::duplex(1000);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let noted = seen.clone();
        let take = Arc::new(move |line: &[u8]| {
            noted.lock().unwrap().push(line.len());
            line.starts_with(b"{\"take\"")
        });
        let mut intercept = Intercept::new(read, take);
        let writing = tokio::spawn(async move {
            // Written in small pieces, so lines arrive split across reads.
            for piece in input.as_bytes().chunks(7) {
                write.write_all(piece).await.unwrap();
            }
        });
        let mut passed = String::new();
        intercept.read_to_string(&mut passed).await.unwrap();
        writing.await.unwrap();
        assert_eq!(passed, format!("keep 1\nkeep 2\n{long}keep 3\nlast without newline"));
        // The long line was never judged: it went on as it came.
        assert_eq!(*seen.lock().unwrap(), vec![7, 9, 7, 7]);
    }
}
