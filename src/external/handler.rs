//! orca as the client of one external server (`UpstreamClient`, rmcp's `ClientHandler`): it
//! listens for list changes and log messages, and hands what the server sends during a call to
//! `calls` (progress, log messages, sampling, elicitation and roots requests) and resource
//! updates to `subscriptions`.
//!
//! # Design notes
//!
//! `handler.rs`: `UpstreamClient`, orca as the client of one server (rmcp's `ClientHandler`): list
//! changes, log messages, and what the server sends during a call, handed to `calls.rs`.

use std::sync::Arc;

use rmcp::model::{
    ClientConfig, ElicitRequestParams, ElicitResult, Implementation, ProgressNotificationParam,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ErrorData as McpError};
use tokio::sync::{broadcast, mpsc};

use super::calls::{Calls, own_capabilities};
use super::logs::ExternalLog;
use super::subscriptions::Subscriptions;

/// Which lists to fetch again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lists {
    pub(super) tools: bool,
    pub(super) prompts: bool,
    pub(super) resources: bool,
}

impl Lists {
    pub(super) const ALL: Lists = Lists { tools: true, prompts: true, resources: true };
    pub(super) const TOOLS: Lists = Lists { tools: true, prompts: false, resources: false };
    const PROMPTS: Lists = Lists { tools: false, prompts: true, resources: false };
    const RESOURCES: Lists = Lists { tools: false, prompts: false, resources: true };

    pub(super) fn union(self, other: Lists) -> Lists {
        Lists {
            tools: self.tools || other.tools,
            prompts: self.prompts || other.prompts,
            resources: self.resources || other.resources,
        }
    }
}

/// orca as a client of the external server: it listens for list changes and log messages, and
/// relays what the server sends during a call to the client that made it (`calls`).
#[derive(Debug, Clone)]
pub(super) struct UpstreamClient {
    pub(super) events: mpsc::UnboundedSender<Lists>,
    pub(super) server: Arc<str>,
    pub(super) logs: broadcast::Sender<ExternalLog>,
    pub(super) calls: Arc<Calls>,
    pub(super) subscriptions: Arc<Subscriptions>,
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            own_capabilities(),
            Implementation::new("orca", env!("CARGO_PKG_VERSION")),
        )
        // The session-based protocol every MCP server speaks today.
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Lists::TOOLS);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Lists::PROMPTS);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.events.send(Lists::RESOURCES);
    }

    #[expect(deprecated, reason = "MCP logging is deprecated by SEP-2577 but still spoken")]
    async fn on_logging_message(
        &self,
        message: rmcp::model::LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        // rmcp keeps a notification's `_meta` among the context's extensions, apart from the
        // params relayed to clients, so orca's mark goes no further.
        let origin = super::traced::origin(context.extensions.get());
        let log = ExternalLog::new(self.server.clone(), message);
        if self.calls.log(&log.message, origin.as_ref()).await {
            return;
        }
        // No session listening is not an error: the message is simply not relayed.
        let _ = self.logs.send(log);
    }

    async fn on_resource_updated(
        &self,
        updated: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.subscriptions.updated(&updated.uri).await;
    }

    async fn on_progress(
        &self,
        progress: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.calls.progress(progress).await;
    }

    #[expect(deprecated, reason = "sampling is deprecated by SEP-2577 but still spoken")]
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, McpError> {
        self.calls.create_message(&self.server, params, context).await
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        self.calls.create_elicitation(&self.server, params, context).await
    }

    #[expect(deprecated, reason = "roots are deprecated by SEP-2577 but still spoken")]
    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, McpError> {
        self.calls.list_roots(&self.server, context).await
    }
}

/// Hear a 2026-07-28 server's list changes, and the updates of the resources orca's clients
/// subscribed to, on a listen stream (`subscriptions/listen`), as a 2025 server's notifications
/// are heard, until the connection ends. When the subscribed URIs change, a stream with the new
/// filter is opened before the old one is cancelled.
pub(super) async fn listen(
    peer: rmcp::service::Peer<RoleClient>,
    events: mpsc::UnboundedSender<Lists>,
    server: Arc<str>,
    subscriptions: Arc<Subscriptions>,
) {
    use rmcp::model::{ServerNotification, SubscriptionFilter};
    let mut changes = subscriptions.changes();
    let mut current: Option<rmcp::service::Subscription> = None;
    loop {
        changes.mark_unchanged();
        let mut filter = SubscriptionFilter::builder()
            .tools_list_changed()
            .prompts_list_changed()
            .resources_list_changed()
            .build();
        let uris = subscriptions.uris();
        if !uris.is_empty() {
            filter.resource_subscriptions = Some(uris);
        }
        match peer.listen(filter).await {
            Ok(opened) => {
                if let Some(mut old) = current.replace(opened) {
                    let _ = old.cancel().await;
                }
            }
            Err(error) => {
                tracing::warn!(%server, %error, "subscriptions/listen failed: list changes and resource updates will not be heard");
                if current.is_none() {
                    return;
                }
            }
        }
        let Some(subscription) = current.as_mut() else { return };
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                notification = subscription.next() => {
                    let Ok(Some(notification)) = notification else { return };
                    let lists = match notification {
                        ServerNotification::ToolListChangedNotification(_) => Lists::TOOLS,
                        ServerNotification::PromptListChangedNotification(_) => Lists::PROMPTS,
                        ServerNotification::ResourceListChangedNotification(_) => Lists::RESOURCES,
                        ServerNotification::ResourceUpdatedNotification(updated) => {
                            subscriptions.updated(&updated.params.uri).await;
                            continue;
                        }
                        _ => continue,
                    };
                    if events.send(lists).is_err() {
                        return;
                    }
                }
            }
        }
    }
}
