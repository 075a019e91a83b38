//! A live MCP session with an external server, as the calls on it see it: rmcp's peer, what
//! the server said of itself in the handshake, the calls in flight, and, for a per-user
//! session, the user's sign-in; a stdio session also has orca's own lane for `tools/call`.
//!
//! # Design notes
//!
//! `connection.rs`: `Connection`, one live MCP session with a server (rmcp's peer, the handshake's
//! server info and capabilities, the calls in flight, a per-user session's sign-in, a stdio
//! session's lane), below both `upstream.rs` and `per_user.rs`.

use std::sync::Arc;

use rmcp::model::{Implementation, ServerCapabilities};
use rmcp::service::{Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use super::calls::Calls;
use super::lane::Lane;
use crate::client::auth::Authorizer;

/// A live MCP session with the server.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(super) peer: Peer<RoleClient>,
    /// Ends the session (its supervisor then connects again).
    pub(super) cancel: CancellationToken,
    pub(crate) server_info: Option<Implementation>,
    pub(crate) capabilities: ServerCapabilities,
    /// The calls in flight on this session (request ids are the session's own).
    pub(super) calls: Arc<Calls>,
    /// The user's sign-in of a per-user session; `None` for the supervised connection.
    pub(super) authorizer: Option<Arc<Authorizer>>,
    /// orca's own lane for `tools/call` beside rmcp's client (a stdio session).
    pub(super) lane: Option<Arc<Lane>>,
    /// Whether the session began with `initialize` (a 2025 revision), rather than
    /// `server/discover` (2026-07-28); read once, as rmcp keeps it behind a lock.
    initialized: bool,
}

impl Connection {
    /// Whether the session began with `initialize` (a 2025 revision), rather than
    /// `server/discover` (2026-07-28).
    pub(super) fn began_with_initialize(&self) -> bool {
        self.initialized
    }

    /// The connection of a session whose handshake `peer` completed.
    pub(super) fn new(
        peer: Peer<RoleClient>,
        calls: Arc<Calls>,
        authorizer: Option<Arc<Authorizer>>,
    ) -> Connection {
        let info = peer.peer_info();
        let server_info = info.as_ref().and_then(|info| info.server_info.clone());
        let initialized = info.as_ref().is_some_and(|info| info.protocol_version.has_initialize());
        let capabilities = info.map(|info| info.capabilities.clone()).unwrap_or_default();
        Connection {
            peer,
            cancel: CancellationToken::new(),
            server_info,
            capabilities,
            calls,
            authorizer,
            lane: None,
            initialized,
        }
    }
}
