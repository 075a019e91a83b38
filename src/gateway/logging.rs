//! MCP logging for orca's clients: `logging/setLevel` sets the level of one session, and the log
//! messages of external servers are relayed to every session that may read them (stdio, or HTTP
//! with sessions: a stateless request has no stream to carry them) and may see the server that
//! sent them, at that level or above.
//!
//! # Design notes
//!
//! `logging.rs` holds MCP logging for orca's clients: `SessionLevel`, the level a session set with
//! `logging/setLevel` (shared by the clones of its `Gateway`; everything passes until it is set),
//! and `relay`, the task `on_initialized` starts for a stdio client or an HTTP session (a stateless
//! request has no stream) whose principal may read, which forwards the external servers' log
//! messages at or above that level until the session ends, only those of servers in the principal's
//! reach (`servers_in_reach`, as the catalog stands when each message comes; `ExternalLog` carries
//! its server's key). `Gateway::complete` checks a completion request's sizes before relaying it to
//! `external`; orca's own prompts offer no completions. `Gateway::caller` makes the
//! `external::Caller` of a proxied call (the request's peer, id, progress token and cancellation
//! token; its log filter is the session's level, or for a 2026-07-28 request the `logLevel` in its
//! `_meta`, none without one); `subscribe`/`unsubscribe` relay resource subscriptions by session
//! (each `Gateway::new` gets a session number).
#![expect(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577, but the protocol versions clients speak today have it"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::LoggingLevel;
use rmcp::service::{Peer, RoleServer};
use tokio::sync::broadcast::error::RecvError;

use crate::external::{ExternalServers, severity};

/// No level set yet: every message the external servers send is relayed.
const UNSET: u8 = u8::MAX;

/// The level one session asked for, shared by the clones of its `Gateway`.
#[derive(Debug, Clone)]
pub(crate) struct SessionLevel(Arc<AtomicU8>);

impl SessionLevel {
    pub(crate) fn new() -> SessionLevel {
        SessionLevel(Arc::new(AtomicU8::new(UNSET)))
    }

    pub(crate) fn set(&self, level: LoggingLevel) {
        self.0.store(severity(level), Ordering::Relaxed);
    }

    pub(crate) fn admits(&self, level: LoggingLevel) -> bool {
        let minimum = self.0.load(Ordering::Relaxed);
        minimum == UNSET || severity(level) >= minimum
    }
}

/// Relay the external servers' log messages to `peer` until its session ends: those of the
/// servers `sees` (by key) admits.
pub(crate) fn relay(
    external: &ExternalServers,
    level: SessionLevel,
    peer: Peer<RoleServer>,
    sees: impl Fn(&str) -> bool + Send + 'static,
) {
    let mut logs = external.subscribe_logs();
    tokio::spawn(async move {
        loop {
            match logs.recv().await {
                Ok(log) => {
                    if peer.is_transport_closed() {
                        return;
                    }
                    if level.admits(log.message.level)
                        && sees(&log.server)
                        && peer.notify_logging_message(log.message).await.is_err()
                    {
                        // The client is gone.
                        return;
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "a client session missed external log messages");
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_relays_everything_until_it_sets_a_level() {
        let level = SessionLevel::new();
        assert!(level.admits(LoggingLevel::Debug));
        level.set(LoggingLevel::Warning);
        assert!(!level.admits(LoggingLevel::Info));
        assert!(level.admits(LoggingLevel::Warning));
        assert!(level.admits(LoggingLevel::Emergency));
    }
}
