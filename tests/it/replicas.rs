//! Replicas as one system on one PostgreSQL: what one replica changes, the others see at once;
//! three replicas behind HAProxy count one limit, remember one set of DPoP proofs, continue
//! each other's input rounds, tasks and sessions, and lose nothing when one is killed.

use std::time::Duration;

use serde_json::{Value, json};

use crate::oauth_upstream::free_port;
use crate::support::haproxy::Balancer;
use crate::support::orca::HttpServer;
use crate::support::{OrcaSetup, TestDatabase, call, eventually, samples};

type Client = rmcp::service::RunningService<rmcp::service::RoleClient, ()>;

/// The table names `list_tables` shows.
async fn tables(client: &Client) -> Vec<String> {
    let result = call(client, "list_tables", json!({"limit": 1000}), None).await.unwrap();
    let listing = result.structured_content.unwrap_or(Value::Null);
    listing["items"]
        .as_array()
        .map(|items| {
            items.iter().filter_map(|item| item["table"].as_str().map(str::to_owned)).collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn ddl_through_one_replica_is_seen_by_the_next_request_on_another() {
    let database = samples::chinook().await;
    // Two replicas on one database, the schema cache kept far longer than the test.
    let first =
        OrcaSetup::new(&database.url).with_config("sql:\n  schema_cache_ttl_seconds: 3600\n");
    let second =
        OrcaSetup::new(&database.url).with_config("sql:\n  schema_cache_ttl_seconds: 3600\n");
    let (one, two) = (first.http_server(&[]), second.http_server(&[]));
    let (a, b) = (one.client(None).await, two.client(None).await);
    assert!(!tables(&b).await.contains(&"rock_tracks".to_owned()), "cached without it");
    let sql = "SELECT track_id, name FROM track WHERE genre_id = 1";
    let made = call(
        &a,
        "materialize_sql",
        json!({"sql": sql, "target": {"schema": "public", "table": "rock_tracks"}}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(made.is_error, Some(false), "{made:?}");
    // The other replica was told through PostgreSQL: its cache of an hour is dropped.
    eventually("the other replica to see the new table", Duration::from_secs(10), || async {
        tables(&b).await.contains(&"rock_tracks".to_owned())
    })
    .await;
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// The key the replicas of one orca share (`ORCA_SECRET`): they vouch for what they forward
/// with it.
const SECRET: &str = "orca-replicas-test-secret-0123456789abcdef0123";

/// Three replicas on one PostgreSQL behind HAProxy (round robin), each with the address the
/// others reach it at (`ORCA_ADVERTISE_URL`).
struct Replicas {
    setups: Vec<OrcaSetup>,
    ports: Vec<u16>,
    servers: Vec<Option<HttpServer>>,
    args: Vec<String>,
    balancer: Balancer,
}

impl Replicas {
    async fn start(make: impl Fn() -> OrcaSetup, args: &[&str]) -> Replicas {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let setups: Vec<OrcaSetup> = ports
            .iter()
            .map(|port| {
                make()
                    .with_env("ORCA_ADVERTISE_URL", &format!("http://127.0.0.1:{port}"))
                    .with_env("ORCA_SECRET", SECRET)
            })
            .collect();
        let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        let balancer = Balancer::start(&ports);
        let mut replicas = Replicas { setups, ports, servers: Vec::new(), args, balancer };
        for index in 0..3 {
            let server = replicas.launch(index);
            replicas.servers.push(Some(server));
        }
        replicas.ready().await;
        replicas
    }

    /// Wait until HAProxy sends requests to every replica (its health checks see them up).
    async fn ready(&self) {
        eventually("HAProxy to reach the three replicas", Duration::from_secs(20), || async {
            let mut seen = std::collections::HashSet::new();
            for _ in 0..6 {
                let health = fresh_client().get(self.url("/healthz")).send().await;
                if let Ok(health) = health
                    && let Ok(health) = health.json::<Value>().await
                    && let Some(id) = health["replica"]["id"].as_str()
                {
                    seen.insert(id.to_owned());
                }
            }
            seen.len() == 3
        })
        .await;
    }

    fn launch(&self, index: usize) -> HttpServer {
        let listen = format!("127.0.0.1:{}", self.ports[index]);
        let mut args = vec!["serve", "--http", listen.as_str()];
        args.extend(self.args.iter().map(String::as_str));
        self.setups[index].http_command(&args)
    }

    /// A URL of the load balancer.
    fn url(&self, path: &str) -> String {
        self.balancer.url(path)
    }

    /// A URL of replica `index` itself.
    fn replica_url(&self, index: usize, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.ports[index])
    }

    /// SIGKILL replica `index`: it leaves nothing behind but what is on its disk.
    fn kill(&mut self, index: usize) {
        if let Some(server) = self.servers[index].take() {
            server.kill();
        }
    }

    /// Start replica `index` again with the same `ORCA_HOME` and address (a container restart).
    fn restart(&mut self, index: usize) {
        let server = self.launch(index);
        self.servers[index] = Some(server);
    }

    /// The id of the replica listening on `index`'s port, as its `/healthz` says.
    async fn id_of(&self, index: usize) -> String {
        let health: Value =
            reqwest::get(self.replica_url(index, "/healthz")).await.unwrap().json().await.unwrap();
        health["replica"]["id"].as_str().unwrap().to_owned()
    }
}

/// A client that opens a connection of its own for every request, so that each may reach
/// another replica.
fn fresh_client() -> reqwest::Client {
    reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap()
}

/// `POST url` of one JSON-RPC request (2025-06-18, stateless): the status and the body.
async fn post(url: &str, authorization: Option<&str>, message: Value) -> (u16, Value) {
    let mut request = fresh_client()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(message.to_string());
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Wait until the clock's minute has at least 20 seconds left: limits count per minute of the
/// clock, and a test counting across its end would count two minutes.
async fn a_fresh_minute() {
    let second = chrono::Utc::now().timestamp().rem_euclid(60);
    if second > 40 {
        tokio::time::sleep(Duration::from_secs(u64::try_from(61 - second).unwrap())).await;
    }
}

fn key_hash(key: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(key.as_bytes()))
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_behind_haproxy_allow_one_limit_and_one_throttle_not_three() {
    let database = TestDatabase::create().await;
    let config = format!(
        "http:\n  auth_failures_per_minute: 4\nauth:\n  api_keys:\n    - name: alice\n      sha256: {}\n      role: limited\n  roles:\n    limited:\n      verbs: [read]\n      calls_per_minute: 5\n",
        key_hash("alice-key")
    );
    let replicas =
        Replicas::start(|| OrcaSetup::new(&database.url).with_config(&config), &[]).await;
    // Round robin: three requests in a row reach three replicas.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3 {
        let health: Value = fresh_client()
            .get(replicas.url("/healthz"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(health["replica"]["clustered"], true, "{health}");
        seen.insert(health["replica"]["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen.len(), 3, "{seen:?}");

    a_fresh_minute().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "list_servers", "arguments": {}}});
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(post(&replicas.url("/mcp"), Some("Bearer alice-key"), call.clone()).await.0);
    }
    // Counted alone, each replica would allow 5: all 12 would pass.
    assert_eq!(statuses.iter().filter(|status| **status == 200).count(), 5, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|status| **status == 429).count(), 7, "{statuses:?}");

    let mut statuses = Vec::new();
    for guess in 0..10 {
        let key = format!("Bearer guess-{guess}");
        statuses.push(post(&replicas.url("/mcp"), Some(&key), call.clone()).await.0);
    }
    // Four failures from this address in the minute, whichever replicas saw them; then 429.
    assert_eq!(&statuses[..4], [401; 4], "{statuses:?}");
    assert!(statuses[4..].iter().all(|status| *status == 429), "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dpop_proof_is_accepted_once_by_three_replicas_together() {
    use orca::client::auth::{
        AuthorizedHttpClient, Authorizer, AuthorizerConfig, ClientIdentity, Grant,
    };
    use rmcp::ServiceExt as _;
    let provider = crate::oauth::Provider::start("key-1", "RS256", 300);
    let database = TestDatabase::create().await;
    // Each replica's resource is the address of the balancer clients reach orca through.
    let front_port = free_port();
    let resource = format!("http://127.0.0.1:{front_port}/mcp");
    let replicas = Replicas::start(
        || {
            crate::oauth::setup_for(
                &database,
                &provider.issuer(),
                &resource,
                "    admin:\n      verbs: [read, create, update, delete]\n",
                "verbs: [read]",
            )
        },
        &[],
    )
    .await;
    // A second balancer on the resource's own port, in front of the same replicas.
    let front = Balancer::start_on(front_port, &replicas.ports);
    let url = front.url("/mcp");
    assert_eq!(url, resource);
    let mut config = AuthorizerConfig::new(&url, Grant::ClientCredentials);
    config.identity = ClientIdentity {
        client_id: Some("admin-app".to_owned()),
        client_secret: Some(secrecy::SecretString::from("admin-app-secret")),
        ..config.identity
    };
    let authorizer = std::sync::Arc::new(Authorizer::new(config).unwrap());
    let http = AuthorizedHttpClient::new(reqwest::Client::new(), authorizer.clone(), 2);
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
        http,
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.as_str(),
        ),
    );
    let client = ().serve(transport).await.expect("orca's client signs in through HAProxy");
    assert!(!client.list_all_tools().await.unwrap().is_empty());
    client.cancel().await.unwrap();

    let credential = authorizer.credential().await.unwrap().expect("signed in");
    let (authorization, proof) = credential.headers("POST", &url).unwrap();
    let proof = proof.expect("a DPoP-bound token");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let mut answers = Vec::new();
    for _ in 0..3 {
        let response = fresh_client()
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18")
            .header("authorization", &authorization)
            .header("dpop", &proof)
            .body(list.to_string())
            .send()
            .await
            .unwrap();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|value| value.to_str().unwrap().to_owned())
            .unwrap_or_default();
        answers.push((response.status().as_u16(), challenge));
    }
    // Remembered by one replica alone, the proof would pass once at each of the three.
    assert_eq!(answers[0].0, 200, "{answers:?}");
    for (status, challenge) in &answers[1..] {
        assert_eq!(*status, 401, "{answers:?}");
        assert!(challenge.contains("used before"), "{challenge}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_input_round_and_a_task_continue_on_whichever_replica_haproxy_picks() {
    use crate::input_required::{ALICE, Elicits, TakesTasks, accept, input_required, round};
    use rmcp::model::{CallToolRequestParams, CallToolResponse, InputResponses, UpdateTaskParams};
    let database = TestDatabase::create().await;
    let fixture = crate::conformance::DirectFixture::start();
    let replicas =
        Replicas::start(|| crate::input_required::alice_and_bob(&database, &fixture.url), &[])
            .await;
    let url = replicas.url("/mcp");

    // Each request of a round reaches the next replica; the call lives in the first.
    let alice = crate::support::modern_client(Elicits, &url, Some(ALICE)).await;
    let first = input_required(round(&alice, &[], None).await.unwrap());
    let state = first.request_state.clone().unwrap();
    let name = [("step1", accept(json!({"name": "Alice"})))];
    let second = input_required(round(&alice, &name, Some(&state)).await.unwrap());
    let color = [("step2", accept(json!({"color": "blue"})))];
    let done = round(&alice, &color, second.request_state.as_deref()).await.unwrap();
    let CallToolResponse::Complete(result) = done else { panic!("expected the result: {done:?}") };
    assert_eq!(crate::support::text_of(&result), "Alice likes blue");
    alice.cancel().await.unwrap();

    // A task: created on one replica, read, answered and finished through the others.
    let alice = crate::support::modern_client(TakesTasks, &url, Some(ALICE)).await;
    let params = CallToolRequestParams::new("confirm_delete")
        .with_arguments(json!({"filename": "a.txt"}).as_object().unwrap().clone());
    let CallToolResponse::Task(created) = alice.call_tool_once(params).await.unwrap() else {
        panic!("expected a task");
    };
    let id = created.task.task_id.clone();
    let waiting = crate::input_required::task_until(&alice, &id, "input_required").await;
    assert_eq!(waiting["inputRequests"]["confirm"]["method"], "elicitation/create", "{waiting}");
    let answers = InputResponses::from([("confirm".to_owned(), accept(json!({"confirm": true})))]);
    alice.update_task(UpdateTaskParams::new(&id, answers)).await.unwrap();
    let done = crate::input_required::task_until(&alice, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Deleted", "{done}");
    alice.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_killed_replica_held_is_failed_at_once_on_another_and_recorded() {
    use crate::input_required::{
        ALICE, Elicits, MULTI_ROUND, TakesTasks, accept, input_required, round,
    };
    use rmcp::model::{CallToolRequestParams, CallToolResponse, GetTaskParams};
    let database = TestDatabase::create().await;
    let fixture = crate::conformance::DirectFixture::start();
    let mut replicas =
        Replicas::start(|| crate::input_required::alice_and_bob(&database, &fixture.url), &[])
            .await;
    // A round and a task begun on replica 0, which is then killed.
    let on_first = replicas.replica_url(0, "/mcp");
    let asked = crate::support::modern_client(Elicits, &on_first, Some(ALICE)).await;
    let first = input_required(round(&asked, &[], None).await.unwrap());
    let tasks = crate::support::modern_client(TakesTasks, &on_first, Some(ALICE)).await;
    let params = CallToolRequestParams::new("confirm_delete")
        .with_arguments(json!({"filename": "a.txt"}).as_object().unwrap().clone());
    let CallToolResponse::Task(created) = tasks.call_tool_once(params).await.unwrap() else {
        panic!("expected a task");
    };
    replicas.kill(0);

    let on_second = replicas.replica_url(1, "/mcp");
    let alice = crate::support::modern_client(Elicits, &on_second, Some(ALICE)).await;
    let started = std::time::Instant::now();
    let name = [("step1", accept(json!({"name": "Alice"})))];
    let lost =
        crate::input_required::refused(round(&alice, &name, first.request_state.as_deref()).await);
    assert!(lost.contains("has stopped"), "{lost}");
    let alice_tasks = crate::support::modern_client(TakesTasks, &on_second, Some(ALICE)).await;
    let task = alice_tasks.get_task(GetTaskParams::new(&created.task.task_id)).await.unwrap();
    let task = serde_json::to_value(&task).unwrap();
    assert_eq!(task["status"], "failed", "{task}");
    assert!(task["statusMessage"].as_str().unwrap().contains("has stopped"), "{task}");
    // At once: nothing waited for the replica that is gone.
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());

    // Both lost calls are recorded, once each, as the requests that found them lost.
    let pool = database.connect().await;
    for tool in [MULTI_ROUND, "confirm_delete"] {
        eventually(&format!("{tool} recorded lost"), Duration::from_secs(20), || async {
            let rows: Vec<(String, Option<String>)> = sqlx::query_as(
                "SELECT status, error_message FROM orca.mcp_executions WHERE tool_name = $1",
            )
            .bind(tool)
            .fetch_all(&pool)
            .await
            .unwrap();
            rows.iter().any(|(status, message)| {
                status == "error" && message.as_deref().is_some_and(|m| m.contains("has stopped"))
            })
        })
        .await;
    }
    let again = alice_tasks.get_task(GetTaskParams::new(&created.task.task_id)).await.unwrap();
    assert_eq!(serde_json::to_value(&again).unwrap()["status"], "failed");
    let recorded: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orca.mcp_executions WHERE tool_name = 'confirm_delete' AND status = 'error'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(recorded, 1, "a lost task is recorded once");
    for client in [asked, alice] {
        let _ = client.cancel().await;
    }
    for client in [tasks, alice_tasks] {
        let _ = client.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateful_session_continues_on_every_replica_until_its_own_is_killed() {
    let database = TestDatabase::create().await;
    let mut replicas = Replicas::start(|| OrcaSetup::new(&database.url), &["--stateful"]).await;
    // rmcp's client keeps one session: its requests (and its GET stream) reach every replica.
    let transport = rmcp::transport::StreamableHttpClientTransport::from_config(
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            replicas.url("/mcp"),
        ),
    );
    let client = rmcp::ServiceExt::serve((), transport).await.expect("a session through HAProxy");
    for _ in 0..6 {
        let result = call(&client, "list_servers", json!({}), None).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{result:?}");
    }
    assert!(!client.list_all_tools().await.unwrap().is_empty());

    // One session all along, whichever replica each request reached.
    let pool = database.connect().await;
    let sessions = || async {
        sqlx::query_as::<_, (String, String)>(
            "SELECT key, replica FROM orca.replica_items WHERE kind = 'session' ORDER BY created_at",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    let noted = sessions().await;
    assert_eq!(noted.len(), 1, "{noted:?}");

    // The replica that holds it is killed: the session ends at once (404), and the client
    // starts a new one on a replica that is alive.
    let mut index = None;
    for candidate in 0..3 {
        if replicas.id_of(candidate).await == noted[0].1 {
            index = Some(candidate);
        }
    }
    replicas.kill(index.expect("the holder is one of the three"));
    let started = std::time::Instant::now();
    for _ in 0..3 {
        let _ = call(&client, "list_servers", json!({}), None).await;
    }
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    assert_eq!(result.is_error, Some(false), "{result:?}");
    let noted = sessions().await;
    assert_eq!(noted.len(), 2, "a new session after the first ended: {noted:?}");
    let _ = client.cancel().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ddl_through_haproxy_is_seen_by_the_next_replica_and_a_killed_one_loses_no_record() {
    let database = samples::chinook().await;
    let mut replicas = Replicas::start(
        || OrcaSetup::new(&database.url).with_config("sql:\n  schema_cache_ttl_seconds: 3600\n"),
        &[],
    )
    .await;
    let url = replicas.url("/mcp");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "list_tables", "arguments": {"limit": 1000}}});
    let listed = |body: &Value| body.to_string().contains("rock_tracks");
    for _ in 0..3 {
        let (status, body) = post(&url, None, list.clone()).await;
        assert!(status == 200 && !listed(&body), "{body}");
    }
    let make = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "materialize_sql",
        "arguments": {"sql": "SELECT track_id, name FROM track WHERE genre_id = 1",
                      "target": {"schema": "public", "table": "rock_tracks"}}}});
    let (status, body) = post(&url, None, make).await;
    assert_eq!(status, 200, "{body}");
    eventually("every replica to list the new table", Duration::from_secs(5), || async {
        let mut all = true;
        for _ in 0..3 {
            all &= listed(&post(&url, None, list.clone()).await.1);
        }
        all
    })
    .await;

    // Calls under load while a replica is killed and started again with the same ORCA_HOME.
    let answered = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for worker in 0..4_u32 {
        let (answered, stop, url) = (answered.clone(), stop.clone(), url.clone());
        workers.push(tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            for n in 0_u32.. {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let marker = 1_000_000 + worker * 100_000 + n;
                let message = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                    "name": "execute_sql", "arguments": {"sql": format!("SELECT {marker} AS marker")}}});
                let started = std::time::Instant::now();
                let sent = tokio::time::timeout(Duration::from_secs(15), post(&url, None, message)).await;
                slowest = slowest.max(started.elapsed());
                if let Ok((200, body)) = sent
                    && body["result"]["isError"] == false
                {
                    answered.lock().unwrap().push(marker);
                }
            }
            slowest
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_kill = answered.lock().unwrap().len();
    replicas.kill(1);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let while_down = answered.lock().unwrap().len() - before_kill;
    replicas.restart(1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for worker in workers {
        let slowest = worker.await.unwrap();
        // In flight on the killed replica, a call fails (or is sent elsewhere) at once.
        assert!(slowest < Duration::from_secs(15), "a call hung for {slowest:?}");
    }
    assert!(before_kill > 0 && while_down > 0, "{before_kill} before, {while_down} while down");
    let answered = answered.lock().unwrap().clone();
    let pool = database.connect().await;
    eventually("a row for every answered call", Duration::from_secs(30), || async {
        let stored: Vec<String> = sqlx::query_scalar(
            "SELECT request_data::text FROM orca.mcp_executions WHERE tool_name = 'execute_sql'",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let stored = stored.join("\n");
        answered.iter().all(|marker| stored.contains(&format!("SELECT {marker} AS marker")))
    })
    .await;
}
