//! How what an external server sends during a call reaches the client that made it: through
//! the client's MCP session (rmcp's peer), or onto the answer of the one HTTP request that
//! carried a call orca serves without rmcp's server side (`gateway::direct`).
#![expect(
    deprecated,
    reason = "logging is deprecated by SEP-2577, but the protocol versions clients speak today have it"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use rmcp::model::{
    ClientResult, LoggingMessageNotification, LoggingMessageNotificationParam,
    ProgressNotification, ProgressNotificationParam, RequestId, ServerJsonRpcMessage,
    ServerNotification, ServerRequest,
};
use rmcp::service::{Peer, RoleServer, ServiceError};
use tokio::sync::mpsc;

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
}

impl AnswerStream {
    /// A stream and the end its messages are read from.
    pub(crate) fn new() -> (AnswerStream, mpsc::UnboundedReceiver<ServerJsonRpcMessage>) {
        let (messages, receiver) = mpsc::unbounded_channel();
        (AnswerStream { messages, next_id: Arc::new(AtomicI64::new(0)) }, receiver)
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
