//! The sessions of an upstream with `oauth: {mode: per_user}` (`per_user.rs` keeps them): a
//! user's own, opened on their first call with their sign-in from the vault, and the error of
//! a call by a user who has not signed in.

use std::sync::Arc;
use std::time::Duration;

use super::super::calls::Calls;
use super::super::connection::Connection;
use super::super::handler::UpstreamClient;
use super::super::per_user::console_link;
use super::Upstream;
use crate::client::auth::AuthorizedHttpClient;
use crate::config::{ExternalTransport, SignInMode};
use crate::tool::{ErrorCode, ToolError};

impl Upstream {
    /// The error of a call by a user who has not signed in (`expired`: whose sign-in was
    /// refused or revoked), with the console's sign-in link and the command.
    pub(crate) fn sign_in_error(&self, expired: bool) -> ToolError {
        let key = &self.config.key;
        let link = console_link(self.public_url.as_deref(), key);
        let command = format!("orca login {key}");
        let why = if expired {
            "your sign-in has expired or was revoked"
        } else {
            "you have not signed in"
        };
        let mut error = ToolError::new(
            ErrorCode::Unauthorized,
            format!(
                "external server `{key}` needs each user's own sign-in and {why}: sign in at {link} (the console's \"Sign in\"), or over stdio run `{command}`"
            ),
        )
        .with_hint("sign in, then call the tool again")
        .not_retryable();
        error.details = Some(Box::new(serde_json::json!({
            "upstream": key,
            "needs_sign_in": true,
            "sign_in_url": link,
            "sign_in_command": command,
        })));
        error
    }

    /// `user`'s session with this per-user upstream, opened with their sign-in when there is
    /// none (one opening at a time per user).
    pub(crate) async fn user_connection(&self, user: &str) -> Result<Arc<Connection>, ToolError> {
        self.users.get_or_open(user, || self.open_user_connection(user)).await
    }

    async fn open_user_connection(&self, user: &str) -> Result<Arc<Connection>, ToolError> {
        let key = &self.config.key;
        let ExternalTransport::Http { url, oauth: Some(oauth), .. } = &self.config.transport else {
            return Err(ToolError::new(ErrorCode::Internal, "not a per-user upstream"));
        };
        debug_assert_eq!(oauth.mode, SignInMode::PerUser);
        let unavailable = |reason: String| {
            ToolError::upstream_unavailable(format!(
                "cannot reach external server `{key}` with your sign-in: {reason}"
            ))
        };
        let authorizer = self.authorizer(url, oauth, user).map_err(unavailable)?;
        if !authorizer.signed_in().await.map_err(|error| unavailable(error.to_string()))? {
            return Err(self.sign_in_error(false));
        }
        let (transport_config, client) = self.http_parts().map_err(unavailable)?;
        let client = super::super::traced::Traced(AuthorizedHttpClient::new(
            client,
            authorizer.clone(),
            crate::client::auth::DEFAULT_STEP_UPS,
        ));
        let transport =
            rmcp::transport::StreamableHttpClientTransport::with_client(client, transport_config);
        let (events, _) = tokio::sync::mpsc::unbounded_channel();
        let calls = Arc::new(Calls::default());
        // A log message outside this user's calls would reach every reading session: it is
        // dropped (one during a call still reaches its caller).
        let handler = UpstreamClient {
            events,
            server: Arc::from(key.as_str()),
            logs: tokio::sync::broadcast::Sender::new(1),
            calls: calls.clone(),
            subscriptions: Arc::default(),
        };
        let timeout = self.config.timeout;
        let service = match tokio::time::timeout(timeout, self.start(handler, transport)).await {
            Ok(Ok(service)) => service,
            outcome => {
                if !authorizer.signed_in().await.unwrap_or(true) {
                    return Err(self.sign_in_error(true));
                }
                return Err(unavailable(match outcome {
                    Ok(Err(error)) => format!("the MCP handshake failed: {error}"),
                    _ => format!("no answer to the MCP handshake within {}s", timeout.as_secs()),
                }));
            }
        };
        let connection = Arc::new(Connection::new(service.peer().clone(), calls, Some(authorizer)));
        let cancel = connection.cancel.clone();
        let server = key.clone();
        tokio::spawn(async move {
            let session_cancel = service.cancellation_token();
            let waiting = service.waiting();
            tokio::pin!(waiting);
            tokio::select! {
                _ = &mut waiting => {}
                () = cancel.cancelled() => {
                    session_cancel.cancel();
                    let _ = tokio::time::timeout(Duration::from_secs(2), &mut waiting).await;
                }
            }
            cancel.cancel();
            tracing::debug!(server = %server, "a user's session closed");
        });
        tracing::debug!(server = %key, "a user's session opened");
        Ok(connection)
    }
}
