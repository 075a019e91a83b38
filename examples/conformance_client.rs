//! The client the MCP conformance suite drives in client mode: `cargo run --example
//! conformance_client -- <server-url>`, with `MCP_CONFORMANCE_SCENARIO` naming the scenario and
//! `MCP_CONFORMANCE_CONTEXT` (JSON) carrying its pre-registered credentials or keys.
//!
//! A thin driver over `orca::client`, the SDK the CLI uses: signing in is `orca::client::auth`
//! (the same code as the CLI and the proxy's HTTP upstreams), the session is an `McpClient` that
//! speaks the revision the suite asks for, answers elicitations with the schema's defaults and
//! follows multi round-trip `input_required` results; skills are listed, loaded and verified by
//! `McpClient`'s skills support. This file only picks the grant and identity from the context
//! and makes the calls each scenario expects.

#![allow(clippy::print_stderr, reason = "what happened goes to stderr for the suite's log")]

use std::sync::Arc;

use orca::client::auth::{Authorizer, AuthorizerConfig, ClientIdentity, Grant, HeadlessAgent};
use orca::client::{Elicitation, HttpOptions, McpClient, SessionOptions, SkillError};
use rmcp::model::ProtocolVersion;
use secrecy::SecretString;
use serde_json::{Value, json};

/// The Client ID Metadata Document URL the suite expects a client to present.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Where the headless agent says the server should send the code; never fetched.
const REDIRECT_URI: &str = "http://127.0.0.1:3000/callback";

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
        issuer: None,
    };
    Authorizer::new(config).map_err(|e| e.to_string())
}

async fn run(url: &str, scenario: &str, context: &Value) -> Result<(), String> {
    let authorizer = Arc::new(authorizer(url, scenario, context)?);
    // The revision the suite asks for (`MCP_CONFORMANCE_PROTOCOL_VERSION`, set by its 0.2
    // releases); elicitations are accepted with the defaults of their schemas.
    let protocol_version = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").as_deref() {
        Ok("2026-07-28") => Some(ProtocolVersion::V_2026_07_28),
        Ok("2025-06-18") => Some(ProtocolVersion::V_2025_06_18),
        _ => None,
    };
    let session = SessionOptions {
        protocol_version,
        elicitation: Elicitation::AcceptDefaults,
        ..SessionOptions::default()
    };
    let options = HttpOptions { session, ..HttpOptions::default() };
    let client = McpClient::http_authorized(url, options, authorizer)
        .await
        .map_err(|e| format!("initialize: {e}"))?;
    if scenario.starts_with("sep-2640-client-") {
        let outcome = skills(&client, scenario).await;
        client.close().await;
        return outcome;
    }
    let tools = client.list_tools().await.map_err(|e| format!("tools/list: {e}"))?;
    eprintln!("{} tools: {:?}", tools.len(), tools.iter().map(|t| &t.name).collect::<Vec<_>>());
    // The calls the scenario expects: those its context lists, else its own.
    let listed = context.get("toolCalls").and_then(Value::as_array);
    let calls: Vec<(String, Value)> = match (listed, scenario) {
        (Some(listed), _) => listed
            .iter()
            .map(|entry| {
                let name = entry.get("name").and_then(Value::as_str).unwrap_or_default();
                (name.to_owned(), entry.get("arguments").cloned().unwrap_or(Value::Null))
            })
            .collect(),
        (None, "tools_call") => vec![("add_numbers".to_owned(), json!({ "a": 5, "b": 3 }))],
        (None, "json-schema-2020-12-preservation") => {
            let focal = tools.iter().find(|tool| tool.name == "json_schema_2020_12_tool");
            let schema = focal.map_or(Value::Null, |tool| Value::Object(tool.input_schema.clone()));
            vec![("json_schema_echo".to_owned(), json!({ "schema": schema }))]
        }
        (None, "http-invalid-tool-headers") => vec![("valid_tool".to_owned(), json!({}))],
        (None, "sep-2322-client-request-state") => {
            tools.iter().map(|tool| (tool.name.clone(), json!({}))).collect()
        }
        (None, "initialize" | "json-schema-ref-no-deref") => Vec::new(),
        (None, _) => tools.iter().take(1).map(|tool| (tool.name.clone(), json!({}))).collect(),
    };
    // Concurrently, so that the scenarios that check requests in parallel see them.
    let results = futures::future::join_all(calls.into_iter().map(|(name, arguments)| {
        let client = client.clone();
        async move {
            client
                .call_tool(&name, arguments)
                .await
                .map(|result| (name.clone(), result))
                .map_err(|e| format!("tools/call {name}: {e}"))
        }
    }))
    .await;
    client.close().await;
    for result in results {
        let (name, result) = result?;
        eprintln!("{name}: {result:?}");
    }
    Ok(())
}

/// The skills scenarios: list the skills (and nothing more in `no-prefetch`); otherwise load the
/// first one, and read its supporting files only once it loaded. A refused skill is the expected
/// outcome of a tampered one, not a failure of the driver.
async fn skills(client: &McpClient, scenario: &str) -> Result<(), String> {
    let skills = client.list_skills().await.map_err(|e| format!("skills/list: {e}"))?;
    eprintln!("{} skills: {:?}", skills.len(), skills.iter().map(|s| &s.name).collect::<Vec<_>>());
    if scenario == "sep-2640-client-no-prefetch" {
        return Ok(());
    }
    let Some(first) = skills.first() else { return Ok(()) };
    let loaded = match client.load_skill(first).await {
        Ok(loaded) => loaded,
        Err(error @ SkillError::Mcp(_)) => return Err(format!("load {}: {error}", first.uri)),
        Err(refused) => {
            eprintln!("{refused}");
            return Ok(());
        }
    };
    let supporting = first.files.iter().flatten().filter(|file| file.uri != first.uri);
    for file in supporting {
        let bytes = client
            .read_skill_file(&loaded, &file.uri)
            .await
            .map_err(|e| format!("read {}: {e}", file.uri))?;
        eprintln!("{}: {} verified bytes", file.uri, bytes.len());
    }
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
