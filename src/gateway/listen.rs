//! The external servers' list changes, told to orca's clients: to a session as plain
//! `notifications/*/list_changed` (2025 revisions), and on a 2026-07-28 `subscriptions/listen`
//! stream, where rmcp's sink tags each with the stream's subscription id and keeps to the
//! categories the stream accepted. The changes are merged: every upstream's `list_changed` rebuilds
//! orca's one catalog, and a change of it (debounced, and only when a list really changed) is
//! told once, whichever server caused it.
//!
//! Resource subscriptions on a listen stream are not accepted yet (the acknowledgment says so);
//! `resources/subscribe` relays them for the 2025 revisions.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::SubscriptionFilter;
use rmcp::service::{Peer, RoleServer, SubscriptionContext, SubscriptionSink};
use tokio::sync::watch;

use crate::external::{Changes, ExternalServers};

/// What a listen stream may carry: the list changes it asks for, when external servers can
/// change orca's lists at all (`None` otherwise: orca's own lists never change, and it does not
/// advertise `listChanged`).
pub(super) fn accepted(
    requested: &SubscriptionFilter,
    external: Option<&ExternalServers>,
) -> Option<SubscriptionFilter> {
    external.filter(|external| external.any_enabled())?;
    let mut accepted = requested.clone();
    accepted.resource_subscriptions = None;
    Some(accepted)
}

/// Where a change is told; each method says whether the listener is still there.
trait Listener {
    async fn tools_changed(&self) -> bool;
    async fn prompts_changed(&self) -> bool;
    async fn resources_changed(&self) -> bool;
}

impl Listener for Peer<RoleServer> {
    async fn tools_changed(&self) -> bool {
        self.notify_tool_list_changed().await.is_ok()
    }
    async fn prompts_changed(&self) -> bool {
        self.notify_prompt_list_changed().await.is_ok()
    }
    async fn resources_changed(&self) -> bool {
        self.notify_resource_list_changed().await.is_ok()
    }
}

/// A listen stream is told only the categories it accepted.
impl Listener for SubscriptionSink {
    async fn tools_changed(&self) -> bool {
        self.accepted().tools_list_changed != Some(true)
            || self.notify_tool_list_changed().await.is_ok()
    }
    async fn prompts_changed(&self) -> bool {
        self.accepted().prompts_list_changed != Some(true)
            || self.notify_prompt_list_changed().await.is_ok()
    }
    async fn resources_changed(&self) -> bool {
        self.accepted().resources_list_changed != Some(true)
            || self.notify_resource_list_changed().await.is_ok()
    }
}

/// Tells `listener` of each change seen on `changes` until the listener is gone.
async fn relay(listener: &impl Listener, changes: &mut watch::Receiver<Changes>) {
    let mut seen = *changes.borrow_and_update();
    while changes.changed().await.is_ok() {
        let now = *changes.borrow_and_update();
        let there = (now.tools == seen.tools || listener.tools_changed().await)
            && (now.prompts == seen.prompts || listener.prompts_changed().await)
            && (now.resources == seen.resources || listener.resources_changed().await);
        if !there {
            return;
        }
        seen = now;
    }
}

/// A session (stdio, or HTTP with sessions) hears of every change for as long as it lasts.
pub(super) fn follow_for_session(external: &ExternalServers, peer: Peer<RoleServer>) {
    let mut changes = external.subscribe();
    tokio::spawn(async move { relay(&peer, &mut changes).await });
}

/// A `subscriptions/listen` stream, open until the client cancels it or goes away.
pub(super) async fn listen(
    external: Arc<ExternalServers>,
    context: SubscriptionContext,
) -> Result<(), McpError> {
    let mut changes = external.subscribe();
    tokio::select! {
        () = context.cancelled() => {}
        () = relay(context.sink(), &mut changes) => {}
    }
    Ok(())
}
