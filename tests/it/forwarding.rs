//! What orca forwards between an external server and its clients beyond what the conformance
//! suite checks (`conformance.rs`: progress, log messages, sampling, elicitation, subscribing):
//! a client's cancellation of a call, and the server's resource updates to the subscribed
//! session, and to a 2026-07-28 `subscriptions/listen` stream that names the resource; and a
//! stateless call served without rmcp's server side (`gateway::direct`), which must answer as
//! rmcp does and be cancelled, and recorded, when its client goes away.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    Implementation, ResourceUpdatedNotificationParam, ServerNotification, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient};

use crate::support::{Modern, OrcaSetup, TestDatabase, eventually};

/// orca with the test upstream as `fx`, which writes what it is called with and what is
/// cancelled to the returned file; its timeout is far beyond any test's patience, so only the
/// client's cancellation can end a call of `fx_hang`.
fn logging_fixture(database: &TestDatabase) -> (OrcaSetup, tempfile::NamedTempFile) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let fixture = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    let yaml = format!(
        "mcps:\n  fx:\n    command: {}\n    timeout: 120s\n    env:\n      FIXTURE_CALL_LOG: {}\n",
        fixture.display(),
        log.path().display()
    );
    (OrcaSetup::new(&database.url).with_external(&yaml), log)
}

#[tokio::test]
async fn a_client_cancelling_a_proxied_call_cancels_it_at_the_upstream() {
    let database = TestDatabase::create().await;
    let (setup, log) = logging_fixture(&database);
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
async fn a_subscribed_client_hears_of_the_upstream_resource_changing_under_its_own_uri() {
    subscribed_client_hears_of_the_change("").await;
}

/// The same when orca speaks 2026-07-28 to the server: it is subscribed by the resource URIs of
/// the listen stream orca keeps open to it, and the update comes on that stream.
#[tokio::test]
async fn a_2026_upstreams_resource_change_reaches_the_2025_client_subscribed_to_it() {
    subscribed_client_hears_of_the_change("    protocol: 2026-07-28\n").await;
}

#[expect(deprecated, reason = "resources/subscribe is what the 2025 revisions speak")]
async fn subscribed_client_hears_of_the_change(protocol: &str) {
    let database = TestDatabase::create().await;
    let yaml = format!("{}{protocol}", crate::conformance::conformance_yaml());
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
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

/// A stateless `tools/call` to `url`, with `extra` headers, and its answer: the media type and
/// the JSON-RPC messages it carried, each without the `_meta` orca adds to a result (its ids
/// differ from call to call).
async fn stateless_call(
    url: &str,
    tool: &str,
    arguments: serde_json::Value,
    extra: &[(&str, &str)],
) -> (String, Vec<serde_json::Value>) {
    stateless_call_on(url, Some("2025-11-25"), tool, arguments, extra).await
}

/// `stateless_call` with `MCP-Protocol-Version: revision`, or without that header.
async fn stateless_call_on(
    url: &str,
    revision: Option<&str>,
    tool: &str,
    arguments: serde_json::Value,
    extra: &[(&str, &str)],
) -> (String, Vec<serde_json::Value>) {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 41, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    });
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(revision) = revision {
        request = request.header("mcp-protocol-version", revision);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let media = response.headers()["content-type"].to_str().unwrap().to_owned();
    let text = response.text().await.unwrap();
    let mut messages: Vec<serde_json::Value> = if media.starts_with("text/event-stream") {
        text.split("\n\n")
            .filter_map(|event| {
                let data = event.lines().find_map(|line| line.strip_prefix("data:"))?;
                serde_json::from_str(data.trim()).ok()
            })
            .collect()
    } else {
        vec![serde_json::from_str(&text).unwrap()]
    };
    for message in &mut messages {
        if let Some(result) = message.get_mut("result").and_then(|result| result.as_object_mut()) {
            assert!(result.remove("_meta").is_some(), "orca's _meta on {result:?}");
        }
    }
    (media, messages)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_call_served_without_rmcp_says_exactly_what_rmcp_says() {
    let database = TestDatabase::create().await;
    let fixture = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    let yaml = format!("mcps:\n  fx:\n    command: {}\n", fixture.display());
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let server = setup.http_server(&[]);
    let url = server.url("/mcp");
    // `Mcp-Method` and `Mcp-Name` are checked by rmcp, so a request carrying them goes its way.
    let cases = [
        ("fx_echo", serde_json::json!({"text": "hello"}), "application/json"),
        ("fx_log", serde_json::json!({"level": "warning", "text": "hi"}), "text/event-stream"),
        ("fx_nothing_here", serde_json::json!({}), "application/json"),
        ("list_servers", serde_json::json!({}), "application/json"),
    ];
    for (tool, arguments, media) in cases {
        let through_rmcp = [("mcp-method", "tools/call"), ("mcp-name", tool)];
        let direct = stateless_call(&url, tool, arguments.clone(), &[]).await;
        let rmcp = stateless_call(&url, tool, arguments, &through_rmcp).await;
        assert!(direct.0.starts_with(media), "{tool}: {}", direct.0);
        assert_eq!(direct.0, rmcp.0, "{tool}");
        assert_eq!(direct.1, rmcp.1, "{tool}");
    }
    // Without `MCP-Protocol-Version` (2025-03-26 to rmcp) too.
    let echo = serde_json::json!({"text": "plain"});
    let through_rmcp = [("mcp-method", "tools/call"), ("mcp-name", "fx_echo")];
    let direct = stateless_call_on(&url, None, "fx_echo", echo.clone(), &[]).await;
    let rmcp = stateless_call_on(&url, None, "fx_echo", echo, &through_rmcp).await;
    assert_eq!(direct, rmcp);
    let (_, log) =
        stateless_call(&url, "fx_log", serde_json::json!({"level": "info", "text": "x"}), &[])
            .await;
    assert_eq!(log.len(), 2, "the log message, then the answer: {log:?}");
    assert_eq!(log[0]["method"], "notifications/message");
    assert_eq!(log[1]["id"], 41);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_client_that_goes_away_cancels_its_proxied_call_which_is_still_recorded() {
    let database = TestDatabase::create().await;
    let (setup, log) = logging_fixture(&database);
    let server = setup.http_server(&[]);
    let url = server.url("/mcp");
    let call =
        tokio::spawn(
            async move { stateless_call(&url, "fx_hang", serde_json::json!({}), &[]).await },
        );
    let logged = || std::fs::read_to_string(log.path()).unwrap_or_default();
    eventually("the call at the upstream", Duration::from_secs(10), || async {
        logged().contains("hang")
    })
    .await;
    // The client gives up: its connection closes.
    call.abort();
    eventually("notifications/cancelled at the upstream", Duration::from_secs(10), || async {
        logged().contains("cancelled hang")
    })
    .await;
    let pool = database.connect().await;
    eventually("the call's record", Duration::from_secs(10), || async {
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT status, error_message FROM orca.mcp_executions WHERE tool_name = 'fx_hang'",
        )
        .fetch_optional(&pool)
        .await
        .unwrap();
        row.is_some_and(|(status, message)| {
            status == "error" && message.is_some_and(|message| message.contains("cancelled"))
        })
    })
    .await;
}

/// A stdio client that answers elicitations and keeps the progress it is sent.
#[derive(Clone, Default)]
struct Answering {
    progress: Arc<Mutex<Vec<(serde_json::Value, f64)>>>,
}

impl rmcp::ClientHandler for Answering {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(capabilities, Implementation::new("answering", "1"))
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let token = serde_json::to_value(&params.progress_token).unwrap();
        self.progress.lock().unwrap().push((token, params.progress));
    }

    async fn create_elicitation(
        &self,
        _: rmcp::model::ElicitRequestParams,
        _: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let mut result = rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept);
        result.content = Some(serde_json::json!({"username": "ada", "email": "ada@example.com"}));
        Ok(result)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn over_stdio_a_proxied_calls_progress_and_elicitation_reach_the_client_and_back() {
    let database = TestDatabase::create().await;
    let setup =
        OrcaSetup::new(&database.url).with_external(&crate::conformance::conformance_yaml());
    let handler = Answering::default();
    let client = setup.stdio_client_with(handler.clone()).await;
    let params = CallToolRequestParams::new("test_tool_with_progress");
    let result = client.peer().call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    // Under the client's own token (rmcp's client sends its request id; the upstream was sent
    // orca's, and answers with it).
    let upstreams = result.content[0].as_text().unwrap().text.clone();
    // orca sends the progress before the answer, but rmcp's client hands each notification to
    // a task of its own, which may run after the answer is back.
    let heard = || async { handler.progress.lock().unwrap().len() >= 3 };
    eventually("three progress steps", Duration::from_secs(5), heard).await;
    let progress = handler.progress.lock().unwrap().clone();
    let steps: Vec<f64> = progress.iter().map(|(_, step)| *step).collect();
    assert_eq!(steps, [0.0, 50.0, 100.0]);
    assert!(progress.iter().all(|(token, _)| *token == progress[0].0), "{progress:?}");
    assert_ne!(progress[0].0.to_string(), upstreams, "the client hears its own token");
    let mut elicit = CallToolRequestParams::new("test_elicitation");
    elicit = elicit.with_arguments(
        serde_json::json!({"message": "who are you?"}).as_object().unwrap().clone(),
    );
    let answer = client.peer().call_tool(elicit).await.unwrap();
    let text = answer.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("action=accept") && text.contains("ada@example.com"), "{text}");
    client.cancel().await.unwrap();
}
