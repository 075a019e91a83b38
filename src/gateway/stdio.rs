//! The stdio face of the gateway: MCP over stdin/stdout for clients that start orca themselves
//! (Claude Desktop, Cursor). stdout carries the protocol only; logs go to stderr. Replies are
//! written through `BatchedTransport`, so answers that are ready together leave in one write.

use std::future::Future;

use anyhow::Context;
use rmcp::{RoleServer, ServiceExt};

use super::{AppState, Gateway, Transport};
use crate::external::BatchedTransport;

/// stdin and stdout as non-blocking pipes, when both are pipes (as when a client starts orca).
/// tokio's own stdin and stdout hand every read and write to a blocking thread; on pipes, epoll
/// does the same work with far fewer thread wake-ups per message.
fn pipes() -> Option<(tokio::net::unix::pipe::Receiver, tokio::net::unix::pipe::Sender)> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned().ok()?;
    let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(stdin).ok()?;
    let sender = tokio::net::unix::pipe::Sender::from_owned_fd(stdout).ok()?;
    Some((receiver, sender))
}

/// Serve one client on stdin/stdout until it disconnects or `shutdown` resolves.
///
/// # Errors
///
/// When the MCP handshake fails.
pub(crate) async fn serve(
    state: AppState,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let gateway = Gateway::new(state, Transport::Stdio);
    let limit = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;
    let service = match pipes() {
        Some((stdin, stdout)) => {
            gateway.serve(BatchedTransport::<RoleServer, _, _>::new(stdin, stdout, limit)).await
        }
        None => {
            let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
            gateway.serve(BatchedTransport::<RoleServer, _, _>::new(stdin, stdout, limit)).await
        }
    }
    .context("MCP handshake on stdio failed")?;
    let cancel = service.cancellation_token();
    tokio::select! {
        result = service.waiting() => {
            result.context("stdio session ended with an error")?;
        }
        () = shutdown => {
            cancel.cancel();
        }
    }
    Ok(())
}
