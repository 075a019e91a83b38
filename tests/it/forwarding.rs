//! What orca forwards between an external server and its clients beyond what the conformance
//! suite checks (`conformance.rs`: progress, log messages, sampling, elicitation, subscribing):
//! a client's cancellation of a call, and the server's resource updates to the subscribed
//! session.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, ResourceUpdatedNotificationParam, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient};

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

/// A client that keeps the URIs of the resource updates it is sent.
#[derive(Clone, Default)]
struct UpdateCollector {
    uris: Arc<Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for UpdateCollector {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("updates", "1"))
    }

    async fn on_resource_updated(
        &self,
        updated: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.uris.lock().unwrap().push(updated.uri);
    }
}

#[tokio::test]
#[expect(deprecated, reason = "resources/subscribe is what the 2025 revisions speak")]
async fn a_subscribed_client_hears_of_the_upstream_resource_changing_under_its_own_uri() {
    let database = TestDatabase::create().await;
    let setup =
        OrcaSetup::new(&database.url).with_external(&crate::conformance::conformance_yaml());
    let collector = UpdateCollector::default();
    let client = setup.stdio_client_with(collector.clone()).await;
    let resources = client.peer_info().unwrap().capabilities.resources.clone().unwrap();
    assert_eq!(resources.subscribe, Some(true), "{resources:?}");
    let watched = "test://watched-resource";
    client.subscribe(SubscribeRequestParams::new(watched)).await.unwrap();
    eventually("notifications/resources/updated", Duration::from_secs(10), || async {
        collector.uris.lock().unwrap().iter().any(|uri| uri == watched)
    })
    .await;
    client.unsubscribe(UnsubscribeRequestParams::new(watched)).await.unwrap();
    // orca's own resources never reach the upstream that takes URIs no one else claims.
    let own = client.subscribe(SubscribeRequestParams::new("res://catalogs")).await;
    assert!(own.unwrap_err().to_string().contains("it is orca's own"));
    client.cancel().await.unwrap();
}
