//! The transport under every connection to an external server, which counts each notification
//! of a call as it is read (`Calls::hear`). rmcp reads messages in order but relays each
//! notification from a task of its own, while it hands a call's answer straight to the call:
//! counted here, a call's progress and log messages sent before its answer are waited for
//! before the answer goes on, however late their tasks run.

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::TxJsonRpcMessage;
use rmcp::transport::Transport;

use super::calls::Calls;

/// A transport whose received notifications are counted for the calls they belong to.
pub(super) struct Heard<T> {
    pub(super) inner: T,
    pub(super) calls: Arc<Calls>,
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Heard<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        let mut message = self.inner.receive().await?;
        if let JsonRpcMessage::Notification(notification) = &mut message {
            self.calls.hear(&mut notification.notification);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use rmcp::model::{
        GetExtensions as _, NumberOrString, ProgressNotification, ProgressNotificationParam,
        ProgressToken, RequestId, ServerNotification,
    };
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::external::calls::{Caller, Relaying};
    use crate::external::reach::{AnswerStream, Reach};

    /// A server's output, already read.
    struct Read(VecDeque<ServerJsonRpcMessage>);

    impl Transport<RoleClient> for Read {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), std::io::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
            self.0.pop_front()
        }

        async fn close(&mut self) -> Result<(), std::io::Error> {
            Ok(())
        }
    }

    fn progress(token: &ProgressToken, step: f64) -> ServerJsonRpcMessage {
        let param = ProgressNotificationParam::new(token.clone(), step);
        ServerJsonRpcMessage::notification(ServerNotification::ProgressNotification(
            ProgressNotification::new(param),
        ))
    }

    #[tokio::test]
    async fn a_calls_answer_waits_for_the_progress_read_before_it_to_reach_the_caller() {
        let calls = Arc::new(Calls::default());
        let (stream, mut answer) = AnswerStream::new();
        let caller = Arc::new(Caller {
            reach: Reach::Answer(stream),
            request_id: RequestId::Number(1),
            progress_token: Some(ProgressToken(NumberOrString::Number(7))),
            cancelled: CancellationToken::new(),
            admits: Arc::new(|_| true),
            exchange: None,
            declared: None,
        });
        let registered = calls.register(caller);
        let upstream_token = ProgressToken(NumberOrString::String("orca~1".into()));
        registered.sent(RequestId::String("orca~1".into()), upstream_token.clone());
        let other = ProgressToken(NumberOrString::String("orca~2".into()));
        let read = Read(VecDeque::from([progress(&other, 1.0), progress(&upstream_token, 2.0)]));
        let mut heard = Heard { inner: read, calls: calls.clone() };
        let pending = |message: &ServerJsonRpcMessage| match message {
            JsonRpcMessage::Notification(notification) => {
                notification.notification.extensions().get::<Relaying>().is_some()
            }
            _ => panic!("a notification"),
        };

        // Another call's progress is not this call's to wait for.
        let unknown = heard.receive().await.unwrap();
        assert!(!pending(&unknown));
        // The call's own is counted from the moment it is read, before its relay starts.
        let JsonRpcMessage::Notification(mut own) = heard.receive().await.unwrap() else {
            panic!("a notification")
        };
        assert!(own.notification.extensions().get::<Relaying>().is_some());
        let waited = tokio::time::timeout(Duration::from_millis(100), registered.settle()).await;
        assert!(waited.is_err(), "the answer waits while the progress is not relayed");

        // Relayed (as rmcp's task does, holding the notification's extensions), it is done.
        let extensions = std::mem::take(own.notification.extensions_mut());
        let ServerNotification::ProgressNotification(relayed) = own.notification else {
            panic!("progress")
        };
        assert!(calls.progress(relayed.params).await);
        drop(extensions);
        tokio::time::timeout(Duration::from_millis(500), registered.settle())
            .await
            .expect("settled once relayed");
        let JsonRpcMessage::Notification(sent) = answer.recv().await.unwrap() else {
            panic!("a notification to the caller")
        };
        let ServerNotification::ProgressNotification(sent) = sent.notification else {
            panic!("progress")
        };
        assert_eq!(sent.params.progress_token, ProgressToken(NumberOrString::Number(7)));
        assert_eq!(sent.params.progress, 2.0);
    }
}
