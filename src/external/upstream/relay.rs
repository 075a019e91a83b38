//! What an external server is asked beside tool calls: resources (read, subscribe,
//! unsubscribe), prompts and completions, each within the server's timeout and, where a client
//! waits for it, noted in flight for that client so that what the server asks meanwhile reaches
//! it.

use std::sync::Arc;

use rmcp::model::{
    ClientRequest, CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequest,
    GetPromptRequestParams, GetPromptResult, ReadResourceRequest, ReadResourceRequestParams,
    ReadResourceResult, ServerResult, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::ServiceError;
use serde_json::{Map, Value};

use super::super::calls::{self, Caller};
use super::super::names;
use super::super::subscriptions::{self, Subscriber};
use super::Upstream;
use crate::tool::{ErrorCode, ToolError};

impl Upstream {
    /// A resource, noted in flight for `caller` as a prompt is.
    pub(crate) async fn read_resource(
        &self,
        uri: &str,
        caller: Option<Arc<Caller>>,
    ) -> Result<ReadResourceResult, ToolError> {
        let params = ReadResourceRequestParams::new(uri);
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        let ServerResult::ReadResourceResult(mut result) =
            self.request_for(request, caller).await?
        else {
            return Err(self.unexpected("resources/read"));
        };
        for content in &mut result.contents {
            names::rewrite_content_uri(content, &self.config.prefix);
        }
        Ok(result)
    }

    /// Subscribe a client session to `uri` (the server's own); the server itself is subscribed
    /// while any session is.
    #[expect(deprecated, reason = "resources/subscribe is what the 2025 revisions speak")]
    pub(crate) async fn subscribe(
        &self,
        uri: &str,
        subscriber: Subscriber,
    ) -> Result<(), ToolError> {
        self.shared_session_only()?;
        let connection = self.connection(self.config.timeout, None).await?;
        let resources = connection.capabilities.resources.as_ref();
        if resources.and_then(|resources| resources.subscribe) != Some(true) {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                format!("external server `{}` offers no resource subscriptions", self.config.key),
            ));
        }
        let session = subscriber.session;
        // A 2026-07-28 server is subscribed through its listen stream's filter (`handler::listen`
        // opens it again when the URIs change).
        let relayed = connection.began_with_initialize();
        if self.subscriptions.add(uri, subscriber) == subscriptions::Upstream::Subscribe && relayed
        {
            let subscribed =
                self.bounded(connection.peer.subscribe(SubscribeRequestParams::new(uri)));
            if let Err(error) = subscribed.await {
                self.subscriptions.remove(uri, session);
                return Err(error);
            }
        }
        Ok(())
    }

    /// Take a client session off `uri`; the server is unsubscribed when nobody is left.
    #[expect(deprecated, reason = "resources/unsubscribe is what the 2025 revisions speak")]
    pub(crate) async fn unsubscribe(&self, uri: &str, session: u64) -> Result<(), ToolError> {
        if self.subscriptions.remove(uri, session) == subscriptions::Upstream::Unsubscribe {
            let connection = self.connection(self.config.timeout, None).await?;
            if !connection.began_with_initialize() {
                return Ok(());
            }
            let params = UnsubscribeRequestParams::new(uri);
            self.bounded(connection.peer.unsubscribe(params)).await?;
        }
        Ok(())
    }

    /// A prompt, noted in flight for `caller` so that what the server asks during it reaches
    /// that client.
    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        caller: Option<Arc<Caller>>,
    ) -> Result<GetPromptResult, ToolError> {
        let mut params = GetPromptRequestParams::new(name);
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        match self.request_for(request, caller).await? {
            ServerResult::GetPromptResult(result) => Ok(result),
            _ => Err(self.unexpected("prompts/get")),
        }
    }

    /// A request to the server within its timeout, noted in flight for `caller` so that what the
    /// server asks during it reaches that client, and ended by the client's cancellation. A
    /// 2026-07-28 server's questions (`InputRequiredResult`) go to the caller and the request is
    /// sent again with the answers, as a tool call's are.
    async fn request_for(
        &self,
        request: ClientRequest,
        caller: Option<Arc<Caller>>,
    ) -> Result<ServerResult, ToolError> {
        self.shared_session_only()?;
        let connection = self.connection(self.config.timeout, None).await?;
        let sent = async {
            let mut request = request;
            for _ in 0..super::call::MAX_INPUT_ROUNDS {
                let this_round = request.clone();
                let answer = calls::send_for(
                    &connection.peer,
                    &connection.calls,
                    this_round,
                    caller.as_ref(),
                    !connection.began_with_initialize(),
                )
                .await?;
                let ServerResult::InputRequiredResult(asked) = answer else {
                    return Ok(answer);
                };
                let (answers, state) =
                    calls::answer_round(&self.config.key, caller.as_ref(), asked)
                        .await
                        .map_err(|error| ServiceError::McpError(super::call::unanswered(error)))?;
                if !calls::answer_in(&mut request, answers, state) {
                    return Err(ServiceError::UnexpectedResponse);
                }
            }
            Err(ServiceError::InputRequiredRoundsExceeded {
                max_rounds: super::call::MAX_INPUT_ROUNDS,
            })
        };
        let cancelled = async {
            match &caller {
                Some(caller) => caller.cancelled.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = self.bounded(sent) => answer,
            () = cancelled => {
                Err(ToolError::new(ErrorCode::InvalidInput, "the client cancelled its request"))
            }
        }
    }

    fn unexpected(&self, method: &str) -> ToolError {
        ToolError::upstream_unavailable(format!(
            "external server `{}` answered {method} with something else",
            self.config.key
        ))
    }

    /// Completions for a prompt or resource-template argument (names already upstream's); a
    /// server without the `completions` capability has none to offer. At most the protocol's
    /// 100 values are relayed, the rest announced by `hasMore`.
    pub(crate) async fn complete(
        &self,
        request: CompleteRequestParams,
    ) -> Result<CompleteResult, ToolError> {
        self.shared_session_only()?;
        let connection = self.connection(self.config.timeout, None).await?;
        if connection.capabilities.completions.is_none() {
            return Ok(CompleteResult::default());
        }
        let mut result = self.bounded(connection.peer.complete(request)).await?;
        let completion = &mut result.completion;
        if completion.values.len() > CompletionInfo::MAX_VALUES {
            completion.values.truncate(CompletionInfo::MAX_VALUES);
            completion.has_more = Some(true);
        }
        Ok(result)
    }
}
