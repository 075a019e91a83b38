//! The stdio face of the gateway: MCP over stdin/stdout for clients that start orca themselves
//! (Claude Desktop, Cursor). stdout carries the protocol only; logs go to stderr.

use std::future::Future;

use anyhow::Context;
use rmcp::ServiceExt;

use super::{AppState, Gateway, Transport};

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
    let service =
        gateway.serve(rmcp::transport::stdio()).await.context("MCP handshake on stdio failed")?;
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
