//! What orca forwards between an external server and its clients beyond what the conformance
//! suite checks (`conformance.rs`: progress, log messages, sampling, elicitation, subscribing):
//! a client's cancellation of a call, and the server's resource updates to the subscribed
//! session, and to a 2026-07-28 `subscriptions/listen` stream that names the resource.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, ProtocolVersion, ResourceUpdatedNotificationParam, ServerNotification,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
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

/// A 2026-07-28 client with nothing to offer.
#[derive(Clone)]
struct Modern;

impl rmcp::ClientHandler for Modern {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("modern", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_listen_stream_hears_of_the_upstream_resource_it_names_changing() {
    let database = TestDatabase::create().await;
    let setup =
        OrcaSetup::new(&database.url).with_external(&crate::conformance::conformance_yaml());
    let server = setup.http_server(&[]);
    let client = crate::support::modern_client(Modern, &server.url("/mcp"), None).await;
    let watched = "test://watched-resource";
    let mut filter = SubscriptionFilter::default();
    filter.resource_subscriptions = Some(vec![watched.to_owned(), "res://catalogs".to_owned()]);
    let mut stream = client.peer().listen(filter).await.expect("subscriptions/listen");
    // orca's own resources do not change under a client: only the upstream's is accepted.
    assert_eq!(
        stream.acknowledged().resource_subscriptions.as_deref(),
        Some(&[watched.to_owned()][..]),
        "{:?}",
        stream.acknowledged()
    );
    let notification = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an update within 10 s")
        .expect("the stream")
        .expect("a notification");
    match notification {
        ServerNotification::ResourceUpdatedNotification(update) => {
            assert_eq!(update.params.uri, watched);
        }
        other => panic!("expected notifications/resources/updated, got {other:?}"),
    }
    client.cancel().await.unwrap();
}
