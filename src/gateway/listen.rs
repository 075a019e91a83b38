//! The external servers' list changes, told to orca's clients: to a session as plain
//! `notifications/*/list_changed` (2025 revisions), and on a 2026-07-28 `subscriptions/listen`
//! stream, where rmcp's sink tags each with the stream's subscription id and keeps to the
//! categories the stream accepted. The changes are merged: every upstream's `list_changed` rebuilds
//! orca's one catalog, and a change of it (debounced, and only when a list really changed) is
//! told once, whichever server caused it.
//!
//!
//! A listen stream's resource URIs (2026-07-28's replacement of `resources/subscribe`) are
//! accepted when an external server owns them, and subscribed at that server for as long as the
//! stream lasts, for those of the caller's servers; each update comes on the stream under the
//! URI the client named. orca's own resources do not change under a client and are left out.
//!
//! # Design notes
//!
//! `listen.rs` tells orca's clients of the external servers' merged list changes: a session by
//! plain `notifications/*/list_changed`, a 2026-07-28 `subscriptions/listen` stream through rmcp's
//! `SubscriptionSink` (tagged with its subscription id, only the categories it accepted); the
//! resource URIs a stream names, when an external server owns them, are subscribed there through
//! `external::subscriptions` with the stream as the target (`Target::Listen`) and taken off when it
//! ends. `get_tool` hands the transport an external tool only when its schema mirrors an argument
//! into a header (`x-mcp-header`) and the caller may see it, so that rmcp checks a 2026-07-28
//! request's `Mcp-Param-*` headers against its body for those callers only (anyone else learns
//! nothing of the tool's arguments from a mismatch).

use std::collections::HashSet;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::SubscriptionFilter;
use rmcp::service::{Peer, RoleServer, SubscriptionContext, SubscriptionSink};
use tokio::sync::watch;

use crate::external::{Changes, ExternalServers, SubscriptionTarget};

/// What a listen stream may carry: the list changes it asks for, and of the resources it names
/// those an external server owns (not orca's own, which `own` tells), when external servers can
/// change orca's lists at all (`None` otherwise: orca's own lists never change, and it does not
/// advertise `listChanged`).
pub(super) fn accepted(
    requested: &SubscriptionFilter,
    external: Option<&ExternalServers>,
    own: impl Fn(&str) -> bool,
) -> Option<SubscriptionFilter> {
    let external = external.filter(|external| external.any_enabled())?;
    let mut accepted = requested.clone();
    accepted.resource_subscriptions = requested
        .resource_subscriptions
        .as_ref()
        .map(|uris| {
            let external_only =
                |uri: &&String| !own(uri) && external.resource_server(uri).is_some();
            uris.iter().filter(external_only).cloned().collect()
        })
        .filter(|uris: &Vec<String>| !uris.is_empty());
    Some(accepted)
}

/// The resource subscriptions of one listen stream, taken off their servers when it ends
/// however it ends.
struct Subscribed {
    external: Arc<ExternalServers>,
    session: u64,
    uris: Vec<String>,
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        let uris = std::mem::take(&mut self.uris);
        if uris.is_empty() {
            return;
        }
        let external = self.external.clone();
        let session = self.session;
        tokio::spawn(async move {
            for uri in uris {
                let _ = external.unsubscribe_resource(&uri, session).await;
            }
        });
    }
}

/// Subscribe `sink` to the resources it accepted that are in `reach`.
async fn subscribe_resources(
    external: &Arc<ExternalServers>,
    sink: &SubscriptionSink,
    reach: Option<&HashSet<String>>,
) -> Subscribed {
    let mut subscribed =
        Subscribed { external: external.clone(), session: super::next_session(), uris: Vec::new() };
    let uris = sink.accepted().resource_subscriptions.clone().unwrap_or_default();
    for uri in uris {
        let reachable =
            external.resource_server(&uri).is_some_and(|server| super::in_reach(reach, &server));
        if !reachable {
            continue;
        }
        let target = SubscriptionTarget::Listen(sink.clone());
        match external.subscribe_resource(&uri, subscribed.session, target).await {
            Some(Ok(())) => subscribed.uris.push(uri),
            Some(Err(error)) => {
                tracing::warn!(uri = %uri, error = %error.message, "a listen stream's resource subscription failed");
            }
            None => {}
        }
    }
    subscribed
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
    reach: Option<HashSet<String>>,
) -> Result<(), McpError> {
    let _subscribed = subscribe_resources(&external, context.sink(), reach.as_ref()).await;
    let mut changes = external.subscribe();
    tokio::select! {
        () = context.cancelled() => {}
        () = relay(context.sink(), &mut changes) => {}
    }
    Ok(())
}
