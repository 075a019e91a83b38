//! An API key and an OAuth token user of the same name are two owners: a token whose `sub` is
//! `admin-app`, from a real provider (`tests/oauth/provider.mjs`), next to the API key named
//! `admin-app`, cannot redeem the key's confirmation token, resume its `requestState`, read its
//! task or see its calls in the console, and their `calls_per_minute` are counted apart.

use rmcp::model::{CallToolRequestParams, CallToolResponse, GetTaskParams};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::input_required::{Elicits, TakesTasks, input_required, refused, round};
use crate::oauth::Provider;
use crate::support::orca::HttpServer;
use crate::support::{OrcaSetup, call, meta_of, samples};

const RESOURCE: &str = "https://orca.test/mcp";
const KEY: &str = "orca_test_key_named_like_a_token_user";
const WRITE: &str = "UPDATE artist SET name = 'AC/DC (written)' WHERE artist_id = 1";

fn structured(result: &rmcp::model::CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

/// The execution ids `/console/api/executions` lists to `bearer`.
async fn listed_executions(server: &HttpServer, bearer: &str) -> Vec<String> {
    let answer: Value = reqwest::Client::new()
        .get(server.url("/console/api/executions?limit=200"))
        .bearer_auth(bearer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = answer["executions"].as_array().unwrap_or_else(|| panic!("{answer}"));
    rows.iter().map(|row| row["id"].as_str().unwrap().to_owned()).collect()
}

/// `list_servers` through `client`: whether it was answered (else 429 for the caller's rate).
async fn within_rate(server: &HttpServer, bearer: &str) -> bool {
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .bearer_auth(bearer)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "list_servers", "arguments": {}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    match response.status().as_u16() {
        200 => true,
        429 => false,
        other => panic!("list_servers answered {other}: {}", response.text().await.unwrap()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_user_named_like_an_api_key_owns_nothing_of_the_keys() {
    let provider = Provider::start("key-1", "RS256", 300);
    let database = samples::chinook().await;
    let fixture = crate::conformance::DirectFixture::start();
    let hash = hex::encode(Sha256::digest(KEY.as_bytes()));
    let setup = OrcaSetup::new(&database.url)
        .with_config(&format!(
            "auth:\n  api_keys:\n    - name: admin-app\n      sha256: {hash}\n      role: admin\n  oauth:\n    issuer: {}\n    resource: {RESOURCE}\n    scopes_supported: [orca.read, orca.write]\n    required_scopes: [orca.read]\n    roles_claim: groups\n    leeway_seconds: 0\n    jwks_min_refresh_seconds: 0\n  roles:\n    admin:\n      verbs: [read, create, update, delete]\n      calls_per_minute: 6\n",
            provider.issuer()
        ))
        .with_external(&format!(
            "mcps:\n  conformance:\n    url: {}\n    prefix: \"\"\n    timeout: 30s\n",
            fixture.url
        ));
    let server = setup.http_server(&[]);
    // The provider names a client-credentials token's user after its client: `admin-app`,
    // holding the role `admin` as the key does.
    let token = provider.token("admin-app", "orca.read orca.write", RESOURCE).await;
    let key_client = server.client(Some(KEY)).await;
    let token_client = server.client(Some(&token)).await;

    // Who each is, by name: the same.
    for client in [&key_client, &token_client] {
        let listed = structured(&call(client, "list_servers", json!({}), None).await.unwrap());
        assert_eq!(listed["caller"]["principal"], "admin-app", "{listed}");
    }

    // The key's confirmation token is the key's: the token user's write with it is refused.
    let dry = call(&key_client, "execute_sql", json!({"sql": WRITE}), None).await.unwrap();
    let dry_run_id = meta_of(&dry)["execution_id"].as_str().unwrap().to_owned();
    let confirmation = structured(&dry)["confirmation_token"].as_str().unwrap().to_owned();
    let write = json!({"sql": WRITE, "dry_run": false, "read_only": false,
                       "confirmation_token": confirmation});
    let stolen =
        structured(&call(&token_client, "execute_sql", write.clone(), None).await.unwrap());
    assert_eq!(
        stolen["error"]["code"], "CONFIRMATION_REQUIRED",
        "the token user's write ran: {stolen}"
    );
    assert!(
        stolen["error"]["message"].as_str().unwrap().contains("different statement, principal"),
        "{stolen}"
    );
    let pool = database.connect().await;
    let name = || async {
        sqlx::query_scalar::<_, String>("SELECT name FROM artist WHERE artist_id = 1")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(name().await, "AC/DC");
    let own = structured(&call(&key_client, "execute_sql", write, None).await.unwrap());
    assert_eq!(own["rows_affected"], 1, "the key's own write: {own}");

    // The key's requestState resumes nothing for the token user; it does for the key. (Here the
    // token's client is sealed in too; `gateway::input_required`'s unit test shows a token
    // without a client claim refused by its identity alone.)
    let url = server.url("/mcp");
    let key_modern = crate::support::modern_client(Elicits, &url, Some(KEY)).await;
    let token_modern = crate::support::modern_client(Elicits, &url, Some(&token)).await;
    let first = input_required(round(&key_modern, &[], None).await.unwrap());
    let state = first.request_state.clone().unwrap();
    let answer = [("step1", json!({"action": "accept", "content": {"name": "Alice"}}))];
    refused(round(&token_modern, &answer, Some(&state)).await);
    let second = input_required(round(&key_modern, &answer, Some(&state)).await.unwrap());
    assert!(second.input_requests.unwrap().contains_key("step2"));

    // The key's task is unknown to the token user.
    let key_tasks = crate::support::modern_client(TakesTasks, &url, Some(KEY)).await;
    let token_tasks = crate::support::modern_client(TakesTasks, &url, Some(&token)).await;
    let params = CallToolRequestParams::new("confirm_delete")
        .with_arguments(json!({"filename": "a.txt"}).as_object().unwrap().clone());
    let CallToolResponse::Task(created) = key_tasks.call_tool_once(params).await.unwrap() else {
        panic!("expected a task");
    };
    let task = created.task.task_id.clone();
    let unknown = token_tasks.get_task(GetTaskParams::new(&task)).await.unwrap_err();
    assert!(unknown.to_string().contains("unknown task"), "{unknown}");
    assert!(key_tasks.get_task(GetTaskParams::new(&task)).await.is_ok());

    // The console lists each its own calls: the key's dry run to the key only.
    crate::support::eventually(
        "the key's dry run is recorded",
        std::time::Duration::from_secs(20),
        || async { listed_executions(&server, KEY).await.contains(&dry_run_id) },
    )
    .await;
    let theirs = listed_executions(&server, &token).await;
    assert!(!theirs.contains(&dry_run_id), "the token user sees the key's call");
    assert!(!theirs.is_empty(), "the token user's own calls are listed");

    // Their rates are counted apart: the key has made its six tool calls of the minute (a
    // list_servers, two execute_sql, two rounds and the confirm_delete), the token user three
    // (a list_servers, the refused write and the refused round).
    assert!(!within_rate(&server, KEY).await, "the key is over its six calls a minute");
    for call_number in 4..=6 {
        assert!(within_rate(&server, &token).await, "the token user's call {call_number}");
    }
    assert!(!within_rate(&server, &token).await, "the token user is over its own six");

    for client in [key_client, token_client] {
        client.cancel().await.unwrap();
    }
    for client in [key_modern, token_modern] {
        client.cancel().await.unwrap();
    }
    for client in [key_tasks, token_tasks] {
        client.cancel().await.unwrap();
    }
}
