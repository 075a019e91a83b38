//! What orca forwards to an external server on behalf of the client that made a call, beyond
//! the call itself: here, the client's cancellation. (Progress, log messages, sampling,
//! elicitation and resource subscriptions are proven by the conformance suite through orca, in
//! `conformance.rs`.)

use std::path::Path;
use std::time::Duration;

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
use rmcp::service::PeerRequestOptions;

use crate::support::{OrcaSetup, TestDatabase, eventually};

#[tokio::test]
async fn a_client_cancelling_a_proxied_call_cancels_it_at_the_upstream() {
    let database = TestDatabase::create().await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let fixture = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    // A timeout far beyond the test's patience: only the client's cancellation can end the call.
    let yaml = format!(
        "mcps:\n  fx:\n    command: {}\n    timeout: 120s\n    env:\n      FIXTURE_CALL_LOG: {}\n",
        fixture.display(),
        log.path().display()
    );
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let client = setup.stdio_client().await;
    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams::new("fx_hang")));
    let handle =
        client.send_cancellable_request(request, PeerRequestOptions::no_options()).await.unwrap();
    let logged = || std::fs::read_to_string(log.path()).unwrap_or_default();
    eventually("the call at the upstream", Duration::from_secs(10), || async {
        logged().contains("hang")
    })
    .await;
    handle.cancel(Some("no longer needed".to_owned())).await.unwrap();
    eventually("notifications/cancelled at the upstream", Duration::from_secs(10), || async {
        logged().contains("cancelled hang")
    })
    .await;
    client.cancel().await.unwrap();
}
