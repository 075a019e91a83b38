//! The connections of an upstream with `oauth: {mode: per_user}`, where each orca user signs in
//! for themselves: one MCP session per user who calls it, made on the user's first call with
//! that user's own sign-in from the vault (so the upstream sees each user as themselves, and one
//! user's session is never used for another), kept while it is used, closed after
//! [`IDLE_AFTER`] without a call, and at most [`MAX_USERS`] kept open (past that, the least
//! recently used idle one is closed). The supervised connection of such an upstream only lists
//! its tools, with the sign-in of the user who signed in last. A user without a sign-in (or whose
//! refresh was refused) gets `UNAUTHORIZED` with the way to sign in.
//!
//! # Design notes
//!
//! `per_user.rs` and `upstream/users.rs`: a per-user upstream's calls go each through the caller's
//! own MCP session (`per_user.rs`'s `UserConnections`, which keeps them, and `upstream/users.rs`,
//! which opens one with the user's sign-in: one per orca user, `Principal::user_identity`, opened
//! on the first call with that user's sign-in from the vault under (upstream, user), at most 64,
//! closed after 5 minutes unused), so one session never carries two people's tokens; its supervised
//! connection only lists tools, with the sign-in of whoever signed in last (until anyone has, its
//! tools are unknown); a caller without a sign-in, or whose refresh was refused, gets
//! `UNAUTHORIZED` with the console's link and `orca login`; prompts, resources and completions are
//! not relayed for it. Each `Connection` carries its own `Calls`, since request ids are a session's
//! own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::connection::Connection;
use crate::tool::ToolError;

/// At most this many users' sessions are kept open per upstream.
pub(crate) const MAX_USERS: usize = 64;
/// A user's session unused this long is closed (the next call opens another).
pub(crate) const IDLE_AFTER: Duration = Duration::from_secs(300);

struct Slot {
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    last_used: Mutex<Instant>,
}

impl Slot {
    /// Its open session, if nobody but the pool holds it (no call in flight on it).
    fn idle_connection(&self) -> Option<Option<Arc<Connection>>> {
        let guard = self.connection.try_lock().ok()?;
        match &*guard {
            Some(connection) if Arc::strong_count(connection) > 1 => None,
            other => Some(other.clone()),
        }
    }
}

/// The open sessions of one per-user upstream, by user identity.
#[derive(Default)]
pub(crate) struct UserConnections {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl std::fmt::Debug for UserConnections {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("UserConnections").finish_non_exhaustive()
    }
}

impl UserConnections {
    fn slot(&self, user: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = slots.get(user) {
            *slot.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
            return slot.clone();
        }
        if slots.len() >= MAX_USERS {
            let oldest = slots
                .iter()
                .filter_map(|(user, slot)| {
                    let idle = slot.idle_connection()?;
                    let used = *slot.last_used.lock().unwrap_or_else(|e| e.into_inner());
                    Some((used, user.clone(), idle))
                })
                .min_by_key(|(used, _, _)| *used);
            if let Some((_, user, connection)) = oldest {
                slots.remove(&user);
                if let Some(connection) = connection {
                    connection.cancel.cancel();
                }
            }
        }
        let slot = Arc::new(Slot {
            connection: tokio::sync::Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
        });
        slots.insert(user.to_owned(), slot.clone());
        slot
    }

    /// `user`'s open session, or the one `open` makes when there is none (one opening at a
    /// time per user).
    pub(crate) async fn get_or_open<Open>(
        &self,
        user: &str,
        open: impl FnOnce() -> Open,
    ) -> Result<Arc<Connection>, ToolError>
    where
        Open: Future<Output = Result<Arc<Connection>, ToolError>>,
    {
        let slot = self.slot(user);
        let mut guard = slot.connection.lock().await;
        if let Some(connection) = &*guard
            && !connection.peer.is_transport_closed()
            && !connection.cancel.is_cancelled()
        {
            return Ok(connection.clone());
        }
        *guard = None;
        let connection = open().await?;
        *guard = Some(connection.clone());
        Ok(connection)
    }

    /// Close `user`'s session (signed out, or signed in again).
    pub(crate) fn close(&self, user: &str) {
        let slot = self.slots.lock().unwrap_or_else(|e| e.into_inner()).remove(user);
        if let Some(slot) = slot
            && let Ok(guard) = slot.connection.try_lock()
            && let Some(connection) = &*guard
        {
            connection.cancel.cancel();
        }
    }

    /// Close the sessions unused for [`IDLE_AFTER`] with no call in flight.
    pub(crate) fn close_idle(&self) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.retain(|_, slot| {
            let used = *slot.last_used.lock().unwrap_or_else(|e| e.into_inner());
            if used.elapsed() < IDLE_AFTER {
                return true;
            }
            match slot.idle_connection() {
                None => true,
                Some(connection) => {
                    if let Some(connection) = connection {
                        connection.cancel.cancel();
                    }
                    false
                }
            }
        });
    }

    /// Close every session (shutting down).
    pub(crate) fn close_all(&self) {
        let users: Vec<String> =
            self.slots.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        for user in users {
            self.close(&user);
        }
    }
}

/// Where a person signs in to `key` from the console: `<public URL>/?upstream=<key>`, or the
/// path alone when orca's public URL is not configured.
pub(crate) fn console_link(public_url: Option<&str>, key: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(key.as_bytes()).collect();
    format!("{}/?upstream={encoded}", public_url.unwrap_or_default().trim_end_matches('/'))
}

/// The `list_servers` status of a per-user upstream nobody has signed in to.
pub(crate) fn nobody_signed_in(key: &str, public_url: Option<&str>) -> String {
    format!(
        "nobody has signed in yet, so its tools are unknown: each user signs in for themselves from the console ({}) or, over stdio, with `orca login {key}`",
        console_link(public_url, key)
    )
}

#[cfg(test)]
mod tests {
    use super::console_link;

    #[test]
    fn the_console_link_names_the_upstream_under_the_public_url_or_as_a_path() {
        for (public_url, key, link) in [
            (None, "up", "/?upstream=up"),
            (Some("https://orca.example.com"), "up", "https://orca.example.com/?upstream=up"),
            (
                Some("https://orca.example.com/"),
                "a b&c",
                "https://orca.example.com/?upstream=a+b%26c",
            ),
        ] {
            assert_eq!(console_link(public_url, key), link);
        }
    }
}
