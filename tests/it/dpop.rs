//! DPoP (RFC 9449) end to end: a real `oidc-provider` (which takes DPoP proofs by default) in
//! front of orca as the resource server, and orca's own client (`orca::client::auth`, the code
//! the proxy and the CLI use). orca's protected-resource metadata says it takes DPoP, so the
//! client asks for a token bound to a key of its own and presents it with a fresh proof on each
//! request; orca refuses the same token as a bearer token, without a proof, with a proof used
//! before, and with a proof for another URL or another key.

use std::sync::Arc;

use base64::Engine;
use orca::client::auth::{
    AuthorizedHttpClient, Authorizer, AuthorizerConfig, ClientIdentity, Credential, DpopKey, Grant,
};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::oauth::{Provider, setup_for};
use crate::oauth_upstream::free_port;
use crate::support::TestDatabase;

/// `POST url` of `tools/list` with `Authorization: authorization` and `DPoP: proof`: the status
/// and the `WWW-Authenticate` header.
async fn list_tools(url: &str, authorization: &str, proof: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .header("authorization", authorization)
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string());
    if let Some(proof) = proof {
        request = request.header("dpop", proof);
    }
    let response = request.send().await.unwrap();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (response.status().as_u16(), challenge)
}

#[tokio::test]
async fn a_dpop_bound_token_from_a_real_provider_works_only_with_a_fresh_proof_of_its_key() {
    let provider = Provider::start("key-1", "RS256", 300);
    let database = TestDatabase::create().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let setup = setup_for(
        &database,
        &provider.issuer(),
        &url,
        "    admin:\n      verbs: [read, create, update, delete]\n",
        "verbs: [read]",
    );
    let _server = setup.http_command(&["serve", "--http", &format!("127.0.0.1:{port}")]);

    let mut config = AuthorizerConfig::new(&url, Grant::ClientCredentials);
    config.identity = ClientIdentity {
        client_id: Some("admin-app".to_owned()),
        client_secret: Some(SecretString::from("admin-app-secret")),
        ..config.identity
    };
    let authorizer = Arc::new(Authorizer::new(config).unwrap());
    let http = AuthorizedHttpClient::new(reqwest::Client::new(), authorizer.clone(), 2);
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.as_str()),
    );
    let client = ().serve(transport).await.expect("orca's client signs in and initializes");
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "list_servers"), "{tools:?}");
    client.cancel().await.unwrap();

    // The provider bound the token to the client's key: `cnf.jkt` is its thumbprint.
    let credential = authorizer.credential().await.unwrap().expect("signed in");
    let key = credential.dpop.clone().expect("a DPoP-bound token, not a bearer token");
    let payload = credential.token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap(),
    )
    .unwrap();
    assert_eq!(claims["cnf"]["jkt"], key.thumbprint().as_str(), "{claims}");

    let token = &credential.token;
    let (authorization, proof) = credential.headers("POST", &url).unwrap();
    let proof = proof.unwrap();
    assert!(authorization.starts_with("DPoP "));
    assert_eq!(list_tools(&url, &authorization, Some(&proof)).await.0, 200, "a fresh proof");

    let stranger =
        Credential { token: token.clone(), dpop: Some(Arc::new(DpopKey::generate().unwrap())) };
    let elsewhere = format!("http://127.0.0.1:{port}/elsewhere");
    for (what, authorization, proof, reason) in [
        ("as a bearer token", format!("Bearer {token}"), None, "DPoP scheme"),
        ("without a proof", authorization.clone(), None, "DPoP proof"),
        ("with a proof used before", authorization.clone(), Some(proof.clone()), "used before"),
        (
            "with a proof for another URL",
            authorization.clone(),
            credential.headers("POST", &elsewhere).unwrap().1,
            "htu",
        ),
        (
            "with a proof of another key",
            authorization.clone(),
            stranger.headers("POST", &url).unwrap().1,
            "another key",
        ),
    ] {
        let (status, challenge) = list_tools(&url, &authorization, proof.as_deref()).await;
        assert_eq!(status, 401, "{what}");
        assert!(
            challenge.contains("invalid_token") && challenge.contains(reason),
            "{what}: {challenge}"
        );
    }
}
