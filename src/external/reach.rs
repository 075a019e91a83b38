//! How what an external server sends during a call reaches the client that made it: through
//! the client's MCP session (rmcp's peer), or onto the answer of the one HTTP request that
//! carried a call orca serves without rmcp's server side (`gateway::direct`).
#![expect(
    deprecated,
    reason = "logging is deprecated by SEP-2577, but the protocol versions clients speak today have it"
)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientResult, LoggingMessageNotification, LoggingMessageNotificationParam,
    ProgressNotification, ProgressNotificationParam, RequestId, ServerJsonRpcMessage,
    ServerNotification, ServerRequest,
};
use rmcp::service::{Peer, RoleServer, ServiceError};
use tokio::sync::{mpsc, oneshot};

/// The prefix of the ids of requests written on a stateless request's answer that wait for the
/// client's reply (`Replies`).
const REPLY_PREFIX: &str = "orca-reply-";
/// At most this many such requests wait at once.
const MAX_AWAITED: usize = 1024;

/// What a stateless client posts back for a request orca wrote on its answer.
pub(crate) type Reply = Result<serde_json::Value, rmcp::ErrorData>;

/// The requests written on stateless answers that wait for their client's reply, posted to
/// `/mcp` as a JSON-RPC response of its own: under an id of orca's (`orca-reply-` and a random
/// UUID), for the principal whose call it is.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    awaited: Mutex<HashMap<String, (String, oneshot::Sender<Reply>)>>,
}

impl Replies {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, oneshot::Sender<Reply>)>> {
        self.awaited.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Hand `reply` to the request `id` awaits, when `owner` made the call; `false` when no
    /// request of that owner awaits it (the body is then served as before).
    pub(crate) fn deliver(&self, id: &str, owner: &str, reply: Reply) -> bool {
        let mut awaited = self.lock();
        if !id.starts_with(REPLY_PREFIX) || awaited.get(id).is_none_or(|(who, _)| who != owner) {
            return false;
        }
        let Some((_, sender)) = awaited.remove(id) else { return false };
        let _ = sender.send(reply);
        true
    }
}

/// Takes an awaited request off the list when its caller stops waiting.
struct Unawait<'a>(&'a Replies, String);

impl Drop for Unawait<'_> {
    fn drop(&mut self) {
        self.0.lock().remove(&self.1);
    }
}

/// Where a call's client hears from its external server during the call.
#[derive(Clone)]
pub(crate) enum Reach {
    /// The client's MCP session, as rmcp keeps it.
    Session(Peer<RoleServer>),
    /// The answer of one stateless HTTP request: the messages are written to it in order, the
    /// call's own answer last.
    Answer(AnswerStream),
}

/// The writing end of one request's answer.
#[derive(Clone)]
pub(crate) struct AnswerStream {
    messages: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    next_id: Arc<AtomicI64>,
    /// Where the client's replies to orca's own requests arrive, and whose call it is.
    replies: Option<(Arc<Replies>, String)>,
}

impl AnswerStream {
    /// A stream and the end its messages are read from.
    pub(crate) fn new() -> (AnswerStream, mpsc::UnboundedReceiver<ServerJsonRpcMessage>) {
        let (messages, receiver) = mpsc::unbounded_channel();
        (AnswerStream { messages, next_id: Arc::new(AtomicI64::new(0)), replies: None }, receiver)
    }

    /// A stream whose client may reply to orca's own requests (`Reach::ask_for_reply`), as
    /// `owner` (`Principal::identity`).
    pub(crate) fn with_replies(mut self, replies: Arc<Replies>, owner: String) -> AnswerStream {
        self.replies = Some((replies, owner));
        self
    }

    /// Write `message`; `false` once nobody reads the answer.
    pub(crate) fn send(&self, message: ServerJsonRpcMessage) -> bool {
        self.messages.send(message).is_ok()
    }
}

impl Reach {
    pub(crate) fn is_transport_closed(&self) -> bool {
        match self {
            Reach::Session(peer) => peer.is_transport_closed(),
            Reach::Answer(stream) => stream.messages.is_closed(),
        }
    }

    pub(crate) async fn notify_progress(&self, progress: ProgressNotificationParam) {
        self.notify(ServerNotification::ProgressNotification(ProgressNotification::new(progress)))
            .await;
    }

    pub(crate) async fn notify_logging_message(&self, message: LoggingMessageNotificationParam) {
        let notification = LoggingMessageNotification::new(message);
        self.notify(ServerNotification::LoggingMessageNotification(notification)).await;
    }

    async fn notify(&self, notification: ServerNotification) {
        match self {
            Reach::Session(peer) => {
                let _ = peer.send_notification(notification).await;
            }
            Reach::Answer(stream) => {
                stream.send(ServerJsonRpcMessage::notification(notification));
            }
        }
    }

    /// Ask the client for orca itself, waiting for its reply: on a stateless request's answer
    /// the request goes under an id of orca's, and the client posts its reply to `/mcp`
    /// (`Replies::deliver`). The caller bounds the wait.
    pub(crate) async fn ask_for_reply(
        &self,
        request: ServerRequest,
    ) -> Result<ClientResult, ServiceError> {
        let Reach::Answer(stream) = self else { return self.send_request(request).await };
        let Some((replies, owner)) = &stream.replies else {
            return self.send_request(request).await;
        };
        let id = format!("{REPLY_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let (sender, receiver) = oneshot::channel();
        {
            let mut awaited = replies.lock();
            if awaited.len() >= MAX_AWAITED {
                return Err(ServiceError::TransportClosed);
            }
            awaited.insert(id.clone(), (owner.clone(), sender));
        }
        let _unawait = Unawait(replies, id.clone());
        let message = ServerJsonRpcMessage::request(request, RequestId::String(id.into()));
        if !stream.send(message) {
            return Err(ServiceError::TransportClosed);
        }
        match receiver.await {
            Ok(Ok(result)) => {
                serde_json::from_value(result).map_err(|_| ServiceError::UnexpectedResponse)
            }
            Ok(Err(error)) => Err(ServiceError::McpError(error)),
            Err(_) => Err(ServiceError::TransportClosed),
        }
    }

    /// Ask the client. On a stateless request's answer the request is written and never
    /// answered, as over rmcp's own stateless transport: such a client has nowhere to post its
    /// answer, and the call's timeout or cancellation ends the wait.
    pub(crate) async fn send_request(
        &self,
        request: ServerRequest,
    ) -> Result<ClientResult, ServiceError> {
        match self {
            Reach::Session(peer) => peer.send_request(request).await,
            Reach::Answer(stream) => {
                let id = RequestId::Number(stream.next_id.fetch_add(1, Ordering::Relaxed));
                if !stream.send(ServerJsonRpcMessage::request(request, id)) {
                    return Err(ServiceError::TransportClosed);
                }
                std::future::pending().await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{LoggingLevel, NumberOrString, ProgressToken};

    #[tokio::test]
    async fn an_answer_stream_carries_notifications_in_order_and_closes_with_its_reader() {
        let (stream, mut receiver) = AnswerStream::new();
        let reach = Reach::Answer(stream);
        let token = ProgressToken(NumberOrString::Number(7));
        reach.notify_progress(ProgressNotificationParam::new(token, 1.0)).await;
        let log = LoggingMessageNotificationParam::new(LoggingLevel::Info, "hello".into());
        reach.notify_logging_message(log).await;
        let first = serde_json::to_value(receiver.recv().await.unwrap()).unwrap();
        assert_eq!(first["method"], "notifications/progress");
        assert_eq!(first["params"]["progressToken"], 7);
        let second = serde_json::to_value(receiver.recv().await.unwrap()).unwrap();
        assert_eq!(second["method"], "notifications/message");
        assert!(!reach.is_transport_closed());
        drop(receiver);
        assert!(reach.is_transport_closed());
    }
}
