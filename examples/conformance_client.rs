//! The client the MCP conformance suite drives in client mode: `cargo run --example
//! conformance_client -- <server-url>`, with `MCP_CONFORMANCE_SCENARIO` naming the scenario and
//! `MCP_CONFORMANCE_CONTEXT` (JSON) carrying its pre-registered credentials or keys.
//!
//! A thin driver: signing in is `orca::client::auth`, the same code the CLI and the proxy's
//! HTTP upstreams use; this file only picks the grant and identity from the context, answers
//! elicitations with the schema's defaults, and makes the calls each scenario expects.

#![allow(clippy::print_stderr, reason = "what happened goes to stderr for the suite's log")]

use std::sync::Arc;

use orca::client::auth::{
    AuthorizedHttpClient, Authorizer, AuthorizerConfig, ClientIdentity, DEFAULT_STEP_UPS, Grant,
    HeadlessAgent,
};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData};
use secrecy::SecretString;
use serde_json::{Map, Value, json};

/// The Client ID Metadata Document URL the suite expects a client to present.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Where the headless agent says the server should send the code; never fetched.
const REDIRECT_URI: &str = "http://127.0.0.1:3000/callback";

/// Accepts every form elicitation with the defaults its schema gives; speaks the protocol
/// revision the suite asks for (`MCP_CONFORMANCE_PROTOCOL_VERSION`, set by its 0.2 releases).
struct Handler {
    version: ProtocolVersion,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({ "elicitation": { "form": {} } })).unwrap_or_default();
        ClientConfig::new(
            capabilities,
            Implementation::new("orca-conformance-client", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(self.version.clone())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { requested_schema, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        let mut content = Map::new();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                if let Some(default) = property.get("default") {
                    content.insert(name.clone(), default.clone());
                }
            }
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content)))
    }
}

fn text(context: &Value, key: &str) -> Option<String> {
    context.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The sign-in the scenario calls for.
fn authorizer(url: &str, scenario: &str, context: &Value) -> Result<Authorizer, String> {
    let grant = if scenario.starts_with("auth/client-credentials") {
        Grant::ClientCredentials
    } else if let Some(jwt) = text(context, "valid_jwt") {
        Grant::JwtBearer(SecretString::from(jwt))
    } else if let (Some(endpoint), Some(idp_client_id), Some(id_token)) = (
        text(context, "idp_token_endpoint"),
        text(context, "idp_client_id"),
        text(context, "idp_id_token"),
    ) {
        Grant::EnterpriseManaged {
            idp_token_endpoint: endpoint,
            idp_client_id,
            id_token: SecretString::from(id_token),
        }
    } else {
        Grant::AuthorizationCode(Arc::new(
            HeadlessAgent::new(REDIRECT_URI).map_err(|e| e.to_string())?,
        ))
    };
    let mut config = AuthorizerConfig::new(url, grant);
    config.identity = ClientIdentity {
        client_id: text(context, "client_id"),
        client_secret: text(context, "client_secret").map(SecretString::from),
        private_key: text(context, "private_key_pem").map(|pem| {
            let algorithm =
                text(context, "signing_algorithm").unwrap_or_else(|| "ES256".to_owned());
            (SecretString::from(pem), algorithm)
        }),
        metadata_url: Some(CLIENT_METADATA_URL.to_owned()),
        client_name: "orca conformance client".to_owned(),
    };
    Authorizer::new(config).map_err(|e| e.to_string())
}

async fn run(url: &str, scenario: &str, context: &Value) -> Result<(), String> {
    let authorizer = Arc::new(authorizer(url, scenario, context)?);
    let http = reqwest::Client::builder().build().map_err(|e| e.to_string())?;
    let client = AuthorizedHttpClient::new(http, authorizer, DEFAULT_STEP_UPS);
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let version = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").as_deref() {
        Ok("2026-07-28") => ProtocolVersion::V_2026_07_28,
        Ok("2025-06-18") => ProtocolVersion::V_2025_06_18,
        _ => ProtocolVersion::LATEST_WITH_INITIALIZE,
    };
    let lifecycle = if version.has_initialize() {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover { preferred_versions: vec![version.clone()] }
    };
    let service = Handler { version }
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| format!("initialize: {e}"))?;
    let tools = service.list_all_tools().await.map_err(|e| format!("tools/list: {e}"))?;
    eprintln!("{} tools: {:?}", tools.len(), tools.iter().map(|t| &t.name).collect::<Vec<_>>());
    let call = |name: &str, arguments: Value| {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Value::Object(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        params
    };
    // The calls the scenario expects: those its context lists, else its own.
    let listed = context.get("toolCalls").and_then(Value::as_array);
    let calls: Vec<CallToolRequestParams> = match (listed, scenario) {
        (Some(listed), _) => listed
            .iter()
            .map(|entry| {
                let name = entry.get("name").and_then(Value::as_str).unwrap_or_default();
                call(name, entry.get("arguments").cloned().unwrap_or(Value::Null))
            })
            .collect(),
        (None, "tools_call") => vec![call("add_numbers", json!({ "a": 5, "b": 3 }))],
        (None, "json-schema-2020-12-preservation") => {
            let focal = tools.iter().find(|tool| tool.name == "json_schema_2020_12_tool");
            let schema =
                focal.map_or(Value::Null, |tool| Value::Object((*tool.input_schema).clone()));
            vec![call("json_schema_echo", json!({ "schema": schema }))]
        }
        (None, "http-invalid-tool-headers") => vec![call("valid_tool", json!({}))],
        (None, "sep-2322-client-request-state") => {
            tools.iter().map(|tool| call(&tool.name, json!({}))).collect()
        }
        (None, "initialize" | "json-schema-ref-no-deref") => Vec::new(),
        (None, _) => tools.iter().take(1).map(|tool| call(&tool.name, json!({}))).collect(),
    };
    // Concurrently, so that the scenarios that check requests in parallel see them.
    let results = futures::future::join_all(calls.into_iter().map(|params| {
        let peer = service.peer().clone();
        async move {
            let name = params.name.clone();
            peer.call_tool(params)
                .await
                .map(|result| (name.clone(), result))
                .map_err(|e| format!("tools/call {name}: {e}"))
        }
    }))
    .await;
    for result in results {
        let (name, result) = result?;
        eprintln!("{name}: {}", serde_json::to_string(&result).unwrap_or_default());
    }
    service.cancel().await.map_err(|e| e.to_string())?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance_client <server-url>");
        return std::process::ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    match run(&url, &scenario, &context).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{scenario}: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
