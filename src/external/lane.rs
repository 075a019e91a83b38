//! orca's own lane to a stdio server for `tools/call`, beside rmcp's client on the same pipes.
//!
//! Through rmcp a call crosses its service loop and a task per message on the way out, and its
//! answer is decoded by trying each of `ServerResult`'s untagged variants in turn. On the lane
//! the calling task encodes the request and writes it into the transport's queue itself
//! (`batched::Outbox`, in order with rmcp's messages), and `frame::LineLimit` takes the answer
//! out of the server's output by its id (`"orca~<n>"`, which rmcp's numeric ids never are)
//! and hands the line to the waiting call, which decodes it as the one thing it can be.
//!
//! Everything else stays rmcp's: what the server sends during the call (progress under the
//! call's token, log messages, sampling and elicitation requests) reaches orca's handler as
//! before and is relayed by `calls`, and a call dropped before its answer is cancelled at the
//! server with `notifications/cancelled`, by rmcp's peer.
//!
//! # Design notes
//!
//! `lane.rs`: `Lane`, orca's own way for a stdio server's `tools/call` beside rmcp's client on the
//! same pipes (sessions begun with `initialize`): the calling task encodes the request under an id
//! of its own (`"orca~<n>"`, which rmcp's numeric ids never are, with the same string as its
//! progress token) and writes it into `BatchedTransport`'s queue through an `Outbox`, then waits
//! for `frame.rs` to hand it the answer line, read as the call result or error it must be, with no
//! pass through rmcp's service loop and no decoding of `ServerResult`'s untagged variants. The call
//! is noted in `Calls` as rmcp's are, so what the server sends during it is relayed as before, and
//! `CancelOnDrop` cancels it through rmcp's peer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientRequest,
    GetMeta as _, ProgressToken, RequestId,
};
use rmcp::service::{Peer, RoleClient, ServiceError};
use rmcp::transport::DynamicTransportError;
use serde::Deserialize;
use tokio::process::ChildStdin;
use tokio::sync::oneshot;

use super::batched::Outbox;
use super::calls::{Caller, Calls, CancelOnDrop};

/// How the lane's request ids begin, as the JSON string's first bytes.
const PREFIX: &[u8] = b"\"orca~";

/// The lane's call a JSON-RPC id (its raw JSON text) names, if it is one of the lane's.
pub(super) fn call_of(id: &[u8]) -> Option<u64> {
    let id = id.trim_ascii();
    let number = id.strip_prefix(PREFIX)?.strip_suffix(b"\"")?;
    if number.is_empty() || number.len() > 20 || !number.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(number).ok()?.parse().ok()
}

/// The lane's calls waiting for their answer, shared with the reader that takes the answers out.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    waiting: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    calls: HashMap<u64, oneshot::Sender<Vec<u8>>>,
    /// The server's output ended: no answer will come.
    closed: bool,
}

impl Answers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Hand `line` to call `call`; an answer nobody waits for (any more) is dropped.
    pub(super) fn deliver(&self, call: u64, line: Vec<u8>) {
        if let Some(waiting) = self.lock().calls.remove(&call) {
            let _ = waiting.send(line);
        }
    }

    /// The server's output ended: every waiting call learns it now, and later ones at once.
    pub(super) fn close(&self) {
        let mut waiting = self.lock();
        waiting.closed = true;
        waiting.calls.clear();
    }

    pub(super) fn wait(self: &Arc<Self>, call: u64) -> Option<Waiter> {
        let (sender, receiver) = oneshot::channel();
        let mut waiting = self.lock();
        if waiting.closed {
            return None;
        }
        waiting.calls.insert(call, sender);
        Some(Waiter { answers: self.clone(), call, receiver })
    }
}

/// A call's wait for its answer; dropped, it stops waiting.
pub(super) struct Waiter {
    answers: Arc<Answers>,
    call: u64,
    pub(super) receiver: oneshot::Receiver<Vec<u8>>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.answers.lock().calls.remove(&self.call);
    }
}

/// A JSON-RPC answer to `tools/call`.
#[derive(Deserialize)]
struct Answer {
    result: Option<CallToolResult>,
    error: Option<McpError>,
}

/// The lane of one stdio session.
pub(crate) struct Lane {
    next: AtomicU64,
    answers: Arc<Answers>,
    outbox: Outbox<ChildStdin>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Lane").finish_non_exhaustive()
    }
}

impl Lane {
    pub(super) fn new(answers: Arc<Answers>, outbox: Outbox<ChildStdin>) -> Lane {
        Lane { next: AtomicU64::new(1), answers, outbox }
    }

    /// Send `tools/call` and wait for its answer, the call noted in flight for `caller` so that
    /// what the server sends during it reaches the caller; dropped before the answer, it is
    /// cancelled at the server (through `peer`, rmcp's side of the same session).
    pub(super) async fn call(
        &self,
        peer: &Peer<RoleClient>,
        calls: &Arc<Calls>,
        params: CallToolRequestParams,
        caller: Option<&Arc<Caller>>,
    ) -> Result<CallToolResult, ServiceError> {
        let call = self.next.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::String(format!("orca~{call}").into());
        let token = ProgressToken(id.clone());
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        request.get_meta_mut().set_progress_token(token.clone());
        let registered = caller.map(|caller| calls.register(caller.clone()));
        let mut waiter = self.answers.wait(call).ok_or_else(|| {
            not_sent(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the server's output ended",
            ))
        })?;
        if let Some(registered) = &registered {
            registered.sent(id.clone(), token);
        }
        let message = ClientJsonRpcMessage::request(request, id.clone());
        // From here a call dropped before its answer is cancelled at the server: once queued,
        // the request is written even if this send is dropped half-way.
        let mut cancel = CancelOnDrop { peer: Some(peer.clone()), id };
        if let Err(error) = self.outbox.send::<RoleClient>(message).await {
            cancel.peer = None;
            return Err(not_sent(error));
        }
        let Ok(line) = (&mut waiter.receiver).await else {
            // The output ended: there is nobody left to cancel it with.
            cancel.peer = None;
            return Err(ServiceError::TransportClosed);
        };
        cancel.peer = None;
        if let Some(registered) = &registered {
            registered.settle().await;
        }
        decode(&line)
    }
}

/// A request that did not reach the server.
fn not_sent(error: std::io::Error) -> ServiceError {
    ServiceError::TransportSend(DynamicTransportError::from_parts(
        "stdio",
        std::any::TypeId::of::<Lane>(),
        Box::new(error),
    ))
}

/// The call's answer, as rmcp's client would have read it.
fn decode(line: &[u8]) -> Result<CallToolResult, ServiceError> {
    match serde_json::from_slice::<Answer>(line) {
        Ok(Answer { error: Some(error), .. }) => Err(ServiceError::McpError(error)),
        Ok(Answer { result: Some(result), error: None }) => Ok(result),
        Ok(Answer { result: None, error: None }) | Err(_) => Err(ServiceError::UnexpectedResponse),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lanes_own_ids_are_its_calls() {
        assert_eq!(call_of(b"\"orca~7\""), Some(7));
        assert_eq!(call_of(b" \"orca~18446744073709551615\" "), Some(u64::MAX));
        for id in [
            &b"7"[..],
            b"\"orca~\"",
            b"\"orca~7x\"",
            b"\"orca~-1\"",
            b"\"orca~99999999999999999999\"",
            b"\"xorca~7\"",
            b"\"orca~7",
            b"\"ORCA~7\"",
        ] {
            assert_eq!(call_of(id), None, "{}", String::from_utf8_lossy(id));
        }
    }

    #[test]
    fn an_answer_is_read_as_the_call_result_or_error_it_is() {
        let ok = br#"{"jsonrpc":"2.0","id":"orca~1","result":{"content":[{"type":"text","text":"hi"}]}}"#;
        let result = decode(ok).unwrap();
        assert_eq!(result.content.len(), 1);
        let refused = br#"{"jsonrpc":"2.0","id":"orca~1","error":{"code":-32602,"message":"no"}}"#;
        assert!(
            matches!(decode(refused), Err(ServiceError::McpError(error)) if error.code.0 == -32602)
        );
        for wrong in [
            &br#"{"jsonrpc":"2.0","id":"orca~1","result":{}}"#[..],
            br#"{"jsonrpc":"2.0","id":"orca~1"}"#,
            br#"{"jsonrpc":"2.0","id":"orca~1","result":{"content":7}}"#,
            b"not json",
        ] {
            assert!(matches!(decode(wrong), Err(ServiceError::UnexpectedResponse)));
        }
    }

    #[tokio::test]
    async fn a_closed_output_ends_every_wait_and_refuses_new_ones() {
        let answers = Arc::new(Answers::default());
        let mut waiter = answers.wait(1).unwrap();
        answers.close();
        assert!((&mut waiter.receiver).await.is_err());
        assert!(answers.wait(2).is_none());
    }

    #[test]
    fn a_call_that_stops_waiting_leaves_nothing_behind() {
        let answers = Arc::new(Answers::default());
        drop(answers.wait(1).unwrap());
        assert!(answers.lock().calls.is_empty());
        answers.deliver(1, b"late".to_vec());
    }
}
