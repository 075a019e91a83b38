//! Resource subscriptions relayed to one external server (`resources/subscribe` and
//! `unsubscribe` of the 2025 revisions, and the resource URIs of a 2026-07-28
//! `subscriptions/listen` stream): the server is subscribed to a URI while at least one of
//! orca's client sessions or listen streams is, and each `notifications/resources/updated` it
//! sends goes to those under the URI they subscribed with. A session whose stream has closed is
//! forgotten the next time the URI is touched; a listen stream takes itself off when it ends.
//!
//! # Design notes
//!
//! `subscriptions.rs`: `Subscriptions`, the sessions subscribed to each of one server's resources:
//! the server is subscribed (`resources/subscribe`) while any session is, again after a reconnect,
//! and unsubscribed when the last leaves; its `notifications/resources/updated` go to the
//! subscribed sessions under the URI they used.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer, SubscriptionSink};

/// Where a resource's updates go.
#[derive(Clone)]
pub(crate) enum Target {
    /// A client session of the 2025 revisions (`resources/subscribe`).
    Session(Peer<RoleServer>),
    /// A 2026-07-28 `subscriptions/listen` stream, which tags each update with its id.
    Listen(SubscriptionSink),
}

impl Target {
    fn closed(&self) -> bool {
        match self {
            Target::Session(peer) => peer.is_transport_closed(),
            // A stream takes itself off when it ends.
            Target::Listen(_) => false,
        }
    }
}

/// One client session or listen stream subscribed to a resource.
#[derive(Clone)]
pub(crate) struct Subscriber {
    /// Which session or stream (unsubscribing takes it off by this).
    pub(crate) session: u64,
    pub(crate) target: Target,
    /// The URI as the client knows it.
    pub(crate) exposed_uri: String,
}

/// The sessions subscribed to each of one server's URIs (in the server's words).
#[derive(Default)]
pub(crate) struct Subscriptions {
    by_uri: Mutex<HashMap<String, Vec<Subscriber>>>,
    /// Bumped when a URI gains its first subscriber or loses its last: a 2026-07-28 server is
    /// subscribed by its listen stream's filter, which is then opened again.
    uris_changed: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Subscriptions").finish_non_exhaustive()
    }
}

/// What the server must be told after a change of subscribers.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Upstream {
    Subscribe,
    Unsubscribe,
    Nothing,
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Subscriber>>> {
        self.by_uri.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Add `subscriber` to `uri`: the server needs subscribing when it is the first.
    pub(crate) fn add(&self, uri: &str, subscriber: Subscriber) -> Upstream {
        let mut by_uri = self.lock();
        let list = by_uri.entry(uri.to_owned()).or_default();
        list.retain(|known| !known.target.closed() && known.session != subscriber.session);
        let first = list.is_empty();
        list.push(subscriber);
        if first {
            self.uris_changed.send_modify(|generation| *generation += 1);
            Upstream::Subscribe
        } else {
            Upstream::Nothing
        }
    }

    /// Take `session` off `uri`: the server needs unsubscribing when nobody is left.
    pub(crate) fn remove(&self, uri: &str, session: u64) -> Upstream {
        let mut by_uri = self.lock();
        let Some(list) = by_uri.get_mut(uri) else { return Upstream::Nothing };
        list.retain(|known| !known.target.closed() && known.session != session);
        if list.is_empty() {
            by_uri.remove(uri);
            self.uris_changed.send_modify(|generation| *generation += 1);
            Upstream::Unsubscribe
        } else {
            Upstream::Nothing
        }
    }

    /// Tell every session subscribed to `uri` that it changed.
    pub(crate) async fn updated(&self, uri: &str) {
        let subscribers = self.lock().get(uri).cloned().unwrap_or_default();
        for subscriber in subscribers {
            let notice = ResourceUpdatedNotificationParam::new(subscriber.exposed_uri.clone());
            match &subscriber.target {
                Target::Session(peer) => {
                    let _ = peer.notify_resource_updated(notice).await;
                }
                Target::Listen(sink) => {
                    let _ = sink.notify_resource_updated(notice.uri).await;
                }
            }
        }
    }

    /// Every URI with a subscriber, to subscribe again on a new connection.
    pub(crate) fn uris(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Told each time `uris` changes.
    pub(crate) fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.uris_changed.subscribe()
    }
}
