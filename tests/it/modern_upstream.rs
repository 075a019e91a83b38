//! orca speaking 2026-07-28 to an external server (`protocol: 2026-07-28`): the server asks
//! for input by answering an `InputRequiredResult`, and orca gets the answers from whoever made
//! the call, a 2025 client as requests during its call, a 2026-07-28 client as an
//! `InputRequiredResult` of orca's own, and calls the server again with them.
#![expect(
    deprecated,
    reason = "roots are deprecated by SEP-2577, but the revisions spoken today have them"
)]

use std::path::Path;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitResult,
    ElicitationAction, Implementation, InputResponses, ListRootsResult, ProtocolVersion, Root,
};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::json;

use crate::support::{
    OrcaSetup, TestDatabase, call, eventually, recorded_under, text_of, tool_names,
};

/// The test upstream over stdio as `fx`, asking the 2026-07-28 way (`ask_name`), spoken to on
/// that revision.
fn asking_setup(database: &TestDatabase) -> OrcaSetup {
    asking_setup_with(database, "")
}

/// `asking_setup` with `extra` lines in the server's entry.
fn asking_setup_with(database: &TestDatabase, extra: &str) -> OrcaSetup {
    let fixture = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    OrcaSetup::new(&database.url).with_external(&format!(
        "mcps:\n  fx:\n    command: {}\n    protocol: 2026-07-28\n    timeout: 10s\n{extra}    env:\n      FIXTURE_ASKS: \"1\"\n",
        fixture.display()
    ))
}

/// A 2025 client that gives its name and two roots when asked.
#[derive(Clone)]
struct Answers;

impl rmcp::ClientHandler for Answers {
    fn get_info(&self) -> ClientConfig {
        let capabilities =
            ClientCapabilities::builder().enable_elicitation().enable_roots().build();
        ClientConfig::new(capabilities, Implementation::new("answers", "1"))
    }

    async fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let asked = serde_json::to_value(&params).unwrap();
        assert_eq!(asked["message"], "What is your name?", "{asked}");
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({"name": "Ada"}));
        Ok(result)
    }

    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        Ok(ListRootsResult::new(vec![Root::new("file:///a"), Root::new("file:///b")]))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_upstreams_questions_reach_a_2025_caller_as_requests_and_its_answers_go_back() {
    let database = TestDatabase::create().await;
    let setup = asking_setup(&database);
    let client = setup.stdio_client_with(Answers).await;
    let result = client.peer().call_tool(CallToolRequestParams::new("fx_ask_name")).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text_of(&result), "Hello, Ada; 2 roots");

    // Both rounds with the server are one call, recorded under the tool's name.
    let (rows, status) = recorded_under(&database, &result, "fx_ask_name").await;
    assert_eq!((rows, status.as_str()), (1, "success"));
    client.cancel().await.unwrap();
}

/// A 2026-07-28 client that answers by retrying its call.
#[derive(Clone)]
struct Modern;

impl rmcp::ClientHandler for Modern {
    fn get_info(&self) -> ClientConfig {
        let capabilities =
            ClientCapabilities::builder().enable_elicitation().enable_roots().build();
        ClientConfig::new(capabilities, Implementation::new("modern", "1"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_caller_is_asked_the_upstreams_questions_under_its_keys_and_retries_with_answers() {
    let database = TestDatabase::create().await;
    let server = asking_setup(&database).http_server(&[]);
    let client = crate::support::modern_client(Modern, &server.url("/mcp"), None).await;

    let first = client.call_tool_once(CallToolRequestParams::new("fx_ask_name")).await.unwrap();
    let CallToolResponse::InputRequired(asked) = first else {
        panic!("expected an InputRequiredResult, got {first:?}");
    };
    let requests = asked.input_requests.clone().unwrap();
    assert_eq!(requests.keys().collect::<Vec<_>>(), ["name", "roots"], "{asked:?}");
    let name = serde_json::to_value(&requests["name"]).unwrap();
    assert_eq!(name["method"], "elicitation/create", "{name}");
    assert_eq!(name["params"]["message"], "What is your name?", "{name}");
    // orca's own state, not the server's.
    let state = asked.request_state.clone().unwrap();
    assert_ne!(state, "asked");

    let answers: InputResponses = [
        ("name".to_owned(), json!({"action": "accept", "content": {"name": "Grace"}})),
        ("roots".to_owned(), json!({"roots": [{"uri": "file:///only"}]})),
    ]
    .into_iter()
    .collect();
    let again = CallToolRequestParams::new("fx_ask_name")
        .with_input_responses(answers)
        .with_request_state(state);
    let CallToolResponse::Complete(result) = client.call_tool_once(again).await.unwrap() else {
        panic!("expected the call's result");
    };
    assert_eq!(text_of(&result), "Hello, Grace; 1 roots");
    client.cancel().await.unwrap();
    let status = server.stop();
    assert!(status.success(), "orca exited with {status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_upstreams_list_change_is_heard_on_its_listen_stream() {
    let database = TestDatabase::create().await;
    // The tool added later is served at once (`pin: off`; held under `hold`).
    let client = asking_setup_with(&database, "    pin: off\n").stdio_client_with(Answers).await;
    let before = tool_names(&client).await;
    assert!(before.contains(&"fx_ask_name".to_owned()), "{before:?}");
    assert!(!before.contains(&"fx_extra".to_owned()), "{before:?}");
    let toggled = call(&client, "fx_toggle_extra", json!({}), None).await.unwrap();
    assert_eq!(text_of(&toggled), "extra on");
    eventually("fx_extra listed", Duration::from_secs(10), || async {
        tool_names(&client).await.contains(&"fx_extra".to_owned())
    })
    .await;
    assert_eq!(text_of(&call(&client, "fx_extra", json!({}), None).await.unwrap()), "extra!");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_upstream_over_streamable_http_is_asked_and_answers_the_same_way() {
    let database = TestDatabase::create().await;
    let (mut upstream, url) = crate::external::start_http_fixture_with(0, &[("FIXTURE_ASKS", "1")]);
    let setup = OrcaSetup::new(&database.url).with_external(&format!(
        "mcps:\n  web:\n    url: {url}\n    protocol: 2026-07-28\n    timeout: 10s\n"
    ));
    let client = setup.stdio_client_with(Answers).await;
    let echoed = call(&client, "web_echo", json!({"text": "hi"}), None).await.unwrap();
    assert_eq!(text_of(&echoed), "hi");
    let asked = client.peer().call_tool(CallToolRequestParams::new("web_ask_name")).await.unwrap();
    assert_eq!(text_of(&asked), "Hello, Ada; 2 roots");
    client.cancel().await.unwrap();
    upstream.kill().unwrap();
    let _ = upstream.wait();
}

/// `protocol: auto` falls back to `initialize` for a server that refuses `server/discover`;
/// `protocol: 2026-07-28` does not, and says why the server is not serving.
#[tokio::test(flavor = "multi_thread")]
async fn auto_falls_back_to_initialize_for_a_2025_only_server_and_2026_07_28_says_it_cannot() {
    let database = TestDatabase::create().await;
    let fast = Path::new(crate::support::orca::BINARY).with_file_name("orca-fast-upstream");
    let entry = |name: &str, protocol: &str| {
        format!(
            "  {name}:\n    command: {}\n    protocol: {protocol}\n    timeout: 5s\n",
            fast.display()
        )
    };
    let yaml = format!("mcps:\n{}{}", entry("auto", "auto"), entry("modern", "2026-07-28"));
    let client = OrcaSetup::new(&database.url).with_external(&yaml).stdio_client().await;
    let echoed = call(&client, "auto_echo", json!({"text": "hello"}), None).await.unwrap();
    assert_eq!(text_of(&echoed), "hello");
    // Its first attempt fails at `server/discover`; list_servers says so.
    eventually("the 2026-07-28 entry to say why it is down", Duration::from_secs(10), || async {
        let listed = call(&client, "list_servers", json!({}), None).await.unwrap();
        let servers = listed.structured_content.unwrap()["servers"].clone();
        servers.as_array().unwrap().iter().any(|server| {
            server["name"] == "modern"
                && server["status"].as_str().is_some_and(|status| {
                    status.contains("handshake") && status.contains("server/discover")
                })
        })
    })
    .await;
    client.cancel().await.unwrap();
}
