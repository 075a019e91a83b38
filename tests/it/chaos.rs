//! Replicas and faults under load, in a short form: two `orca serve --http` on one PostgreSQL
//! (tokens carried across, one confirmation redeemed once out of 50 sent at once, tracking
//! exact with both writing), and while clients call: the tracking database stopped and
//! started, an upstream SIGKILLed, the model provider failing, and SIGTERM. Each scenario keeps
//! the history of its calls and checks it against `orca.mcp_executions`: every answered call
//! has exactly one row, and no row belongs to no call.

#![allow(
    clippy::print_stderr,
    reason = "each scenario prints its recovery figures on the test's own stderr (RELIABILITY.md)"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RoleClient};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::fake_llm::{FakeLlm, Reply, Wire};
use crate::support::{OrcaSetup, PrivateCluster, TestDatabase, eventually, meta_of, samples};

/// One `ORCA_SECRET` for every replica of a test.
const SECRET: &str = "chaos-replicas-share-this-secret-0123456789";

/// One call as its client saw it.
#[derive(Debug, Clone)]
struct Call {
    tool: String,
    took: Duration,
    /// `None`: a success; the taxonomy code of a tool error; `transport` when no answer came.
    code: Option<String>,
    message: String,
    feedback_token: Option<Uuid>,
}

async fn call(peer: &Peer<RoleClient>, tool: &str, arguments: Value) -> (Call, Value) {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Value::Object(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    let started = Instant::now();
    let answer = peer.call_tool(params).await;
    let took = started.elapsed();
    let tool = tool.to_owned();
    match answer {
        Ok(result) => {
            // The structured content, or else the text of a proxied tool's first block.
            let structured = result.structured_content.clone().unwrap_or_else(|| {
                result
                    .content
                    .first()
                    .and_then(|block| block.as_text())
                    .map_or(Value::Null, |text| Value::from(text.text.clone()))
            });
            let feedback_token = meta_of(&result)
                .get("feedback_token")
                .and_then(Value::as_str)
                .and_then(|token| token.parse().ok());
            let (code, message) = error_of(&result);
            (Call { tool, took, code, message, feedback_token }, structured)
        }
        Err(error) => (
            Call {
                tool,
                took,
                code: Some("transport".to_owned()),
                message: error.to_string(),
                feedback_token: None,
            },
            Value::Null,
        ),
    }
}

fn error_of(result: &CallToolResult) -> (Option<String>, String) {
    if result.is_error != Some(true) {
        return (None, String::new());
    }
    let error = &result.structured_content.as_ref().unwrap_or(&Value::Null)["error"];
    (
        Some(error["code"].as_str().unwrap_or("?").to_owned()),
        error["message"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Every answered call of `history` has exactly one row, and the database holds no row that
/// no call of the history may own (a call cut off without an answer may own one).
async fn check_history(url: &str, history: &[Call]) {
    let tokens: Vec<Uuid> = history.iter().filter_map(|call| call.feedback_token).collect();
    let unanswered = (history.len() - tokens.len()) as i64;
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(url).await.unwrap();
    let counts = || async {
        sqlx::query_as::<_, (i64, i64, i64)>(
            "SELECT count(*) FILTER (WHERE feedback_token = ANY($1)), \
             count(DISTINCT feedback_token) FILTER (WHERE feedback_token = ANY($1)), count(*) \
             FROM orca.mcp_executions",
        )
        .bind(&tokens)
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    let expected = tokens.len() as i64;
    eventually("every answered call's row", Duration::from_secs(30), || async {
        counts().await.1 == expected
    })
    .await;
    let (rows, distinct, all) = counts().await;
    assert_eq!((rows, distinct), (expected, expected), "each answered call stored exactly once");
    assert!(
        all - expected <= unanswered,
        "{} rows belong to no call of the history ({unanswered} calls got no answer)",
        all - expected
    );
    pool.close().await;
}

/// The test upstream, built next to orca.
fn fixture() -> PathBuf {
    let path = Path::new(crate::support::orca::BINARY).with_file_name("orca-test-upstream");
    assert!(path.is_file(), "{} is missing: build the workspace", path.display());
    path
}

fn fixture_yaml(timeout: &str) -> String {
    format!(
        "mcps:\n  fx:\n    name: Fixture\n    command: {}\n    timeout: {timeout}\n",
        fixture().display()
    )
}

fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// `clients` tasks calling `plan(client, n)` in turn until `deadline`; their histories.
async fn under_load<F, Fut>(
    peers: &[Peer<RoleClient>],
    clients: usize,
    deadline: Instant,
    plan: F,
) -> Vec<tokio::task::JoinHandle<Vec<Call>>>
where
    F: Fn(Peer<RoleClient>, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Vec<Call>> + Send,
{
    let plan = Arc::new(plan);
    (0..clients)
        .map(|index| {
            let peer = peers[index % peers.len()].clone();
            let plan = Arc::clone(&plan);
            tokio::spawn(async move {
                let mut history = Vec::new();
                let mut round = index;
                while Instant::now() < deadline {
                    history.extend(plan(peer.clone(), round).await);
                    round += clients;
                }
                history
            })
        })
        .collect()
}

/// The load of the tracking checks: `list_servers` and a `query_sql` read in turn.
fn read_mix(round: usize) -> (&'static str, Value) {
    if round.is_multiple_of(2) {
        ("list_servers", json!({}))
    } else {
        ("query_sql", json!({"sql": "SELECT 1 AS one"}))
    }
}

async fn join(workers: Vec<tokio::task::JoinHandle<Vec<Call>>>) -> Vec<Call> {
    let mut history = Vec::new();
    for worker in workers {
        history.extend(worker.await.unwrap());
    }
    history
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_carry_tokens_across_and_redeem_one_confirmation_exactly_once() {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    sqlx::raw_sql("CREATE TABLE chaos_writes (id bigserial PRIMARY KEY, marker text NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    let setup_a = OrcaSetup::new(&database.url).with_env("ORCA_SECRET", SECRET);
    let setup_b = OrcaSetup::new(&database.url).with_env("ORCA_SECRET", SECRET);
    let (server_a, server_b) = (setup_a.http_server(&[]), setup_b.http_server(&[]));
    let (client_a, client_b) = (server_a.client(None).await, server_b.client(None).await);
    let (a, b) = (client_a.peer().clone(), client_b.peer().clone());
    let mut history = Vec::new();

    // A dry run on A, confirmed on B.
    let sql = "INSERT INTO chaos_writes (marker) VALUES ('carried')";
    let (dry, value) = call(&a, "execute_sql", json!({"sql": sql, "dry_run": true})).await;
    let token = value["confirmation_token"].as_str().expect("a confirmation token").to_owned();
    history.push(dry);
    let (confirmed, value) = call(
        &b,
        "execute_sql",
        json!({"sql": sql, "dry_run": false, "read_only": false, "confirmation_token": token}),
    )
    .await;
    assert_eq!(confirmed.code, None, "B redeems A's token: {value}");
    history.push(confirmed);

    // A page token from A, continued on B.
    let query =
        json!({"sql": "SELECT n FROM generate_series(1, 10) AS n ORDER BY n", "max_rows": 4});
    let (first, value) = call(&a, "query_sql", query.clone()).await;
    let mut next = query;
    next["page_token"] = value["page_token"].clone();
    assert!(next["page_token"].is_string(), "a page token from A: {value}");
    history.push(first);
    let (second, value) = call(&b, "query_sql", next).await;
    assert_eq!(second.code, None, "B continues A's page: {value}");
    assert_eq!(value["rows"][0], json!([5]), "the second page starts after the first: {value}");
    history.push(second);

    // A feedback token from A, rated on B.
    let (listed, _) = call(&a, "list_servers", json!({})).await;
    let feedback = listed.feedback_token.unwrap();
    history.push(listed);
    let (rated, value) =
        call(&b, "submit_feedback", json!({"feedback_token": feedback, "rating": "up"})).await;
    assert_eq!(rated.code, None, "B rates A's result: {value}");
    history.push(rated);
    let ratings: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orca.mcp_feedback WHERE feedback_token = $1")
            .bind(feedback)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(ratings, 1);

    // One confirmation token sent 50 times at once, half to each replica.
    let sql = "INSERT INTO chaos_writes (marker) VALUES ('raced')";
    let (dry, value) = call(&a, "execute_sql", json!({"sql": sql, "dry_run": true})).await;
    let arguments = json!({"sql": sql, "dry_run": false, "read_only": false,
        "confirmation_token": value["confirmation_token"]});
    history.push(dry);
    let barrier = Arc::new(tokio::sync::Barrier::new(50));
    let sends: Vec<_> = (0..50)
        .map(|index| {
            let peer = if index % 2 == 0 { a.clone() } else { b.clone() };
            let (arguments, barrier) = (arguments.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                call(&peer, "execute_sql", arguments).await.0
            })
        })
        .collect();
    let mut raced = Vec::new();
    for send in sends {
        raced.push(send.await.unwrap());
    }
    let wrote = raced.iter().filter(|call| call.code.is_none()).count();
    let already_used = raced.iter().filter(|call| call.message.contains("already used")).count();
    assert_eq!((wrote, already_used), (1, 49), "{raced:#?}");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM chaos_writes WHERE marker = 'raced'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1, "the write happened exactly once");
    history.extend(raced);

    // Tracking with both replicas writing: 8 clients over both, then every call's row.
    let deadline = Instant::now() + Duration::from_secs(3);
    let workers = under_load(&[a.clone(), b.clone()], 8, deadline, |peer, round| async move {
        let (tool, arguments) = read_mix(round);
        vec![call(&peer, tool, arguments).await.0]
    })
    .await;
    let load = join(workers).await;
    assert!(load.iter().all(|call| call.code.as_deref() != Some("transport")), "{load:?}");
    history.extend(load);
    check_history(&database.url, &history).await;
    client_a.cancel().await.unwrap();
    client_b.cancel().await.unwrap();
    assert!(server_a.stop().success() && server_b.stop().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tracking_database_stopped_under_load_loses_and_repeats_nothing() {
    let private = PrivateCluster::new();
    let cluster = private.start().await;
    let url = cluster.url("orca");
    let setup = OrcaSetup::new(&url)
        .with_config("tracking:\n  replay_interval_ms: 200\nsql:\n  default_timeout_ms: 5000\n");
    let server = setup.http_server(&[]);
    let clients = [server.client(None).await, server.client(None).await];
    let peers: Vec<_> = clients.iter().map(|client| client.peer().clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(7);
    let workers = under_load(&peers, 4, deadline, |peer, round| async move {
        let (tool, arguments) = read_mix(round);
        vec![call(&peer, tool, arguments).await.0]
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.stop().await.unwrap();
    // Longer than the pool's 5 s wait for a connection, so that reads made during the outage
    // are refused rather than served late once it ends.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let cluster = private.start().await;
    let restarted = Instant::now();
    let history = join(workers).await;

    for call in &history {
        assert!(call.took < Duration::from_secs(10), "a call hung: {call:?}");
        match call.tool.as_str() {
            "list_servers" => assert_eq!(call.code, None, "no database needed: {call:?}"),
            _ => assert!(
                call.code.is_none() || call.code.as_deref() == Some("UPSTREAM_UNAVAILABLE"),
                "a read during the outage fails clearly: {call:?}"
            ),
        }
    }
    let refused = history.iter().filter(|call| call.code.is_some()).count();
    assert!(refused > 0, "the outage was seen by the reads");
    // Reads work again once the database is back.
    let (after, _) = call(&peers[0], "query_sql", json!({"sql": "SELECT 1 AS one"})).await;
    assert_eq!(after.code, None, "{after:?}");
    eprintln!(
        "calls={} refused={refused} reads succeed {:?} after the restart",
        history.len(),
        restarted.elapsed()
    );
    let mut history = history;
    history.push(after);
    check_history(&url, &history).await;
    for client in clients {
        client.cancel().await.unwrap();
    }
    assert!(server.stop().success());
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_killed_with_calls_in_flight_fails_them_clearly_retries_reads_and_leaves_no_orphan()
 {
    let database = TestDatabase::create().await;
    let calls_log = tempfile::NamedTempFile::new().unwrap();
    let yaml = format!(
        "{}    env:\n      FIXTURE_CALL_LOG: {}\n",
        fixture_yaml("5s"),
        calls_log.path().display()
    );
    let setup = OrcaSetup::new(&database.url).with_external(&yaml);
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let peer = client.peer().clone();
    let (first, value) = call(&peer, "fx_pid", json!({})).await;
    assert_eq!(first.code, None, "{value}");
    let old: u32 = value.as_str().unwrap().parse().unwrap();
    let mut history = vec![first];

    let deadline = Instant::now() + Duration::from_secs(4);
    let workers = under_load(std::slice::from_ref(&peer), 4, deadline, |peer, round| async move {
        let (tool, arguments) = if round % 2 == 0 {
            ("fx_echo", json!({"text": "hi"}))
        } else {
            ("fx_slow", json!({"ms": 200}))
        };
        vec![call(&peer, tool, arguments).await.0]
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Calls in flight at the kill: three of the read-only `slow` (1.5 s) and three of `hang`
    // (not read-only), sent at once; the kill comes once the upstream has logged them all.
    let logged = |name: &str| {
        std::fs::read_to_string(calls_log.path())
            .unwrap_or_default()
            .lines()
            .filter(|line| *line == name)
            .count()
    };
    let (slow_before, hang_before) = (logged("slow"), logged("hang"));
    let in_flight: Vec<_> = [("fx_slow", json!({"ms": 1500})), ("fx_hang", json!({}))]
        .into_iter()
        .flat_map(|(tool, arguments)| std::iter::repeat_n((tool, arguments), 3))
        .map(|(tool, arguments)| {
            let peer = peer.clone();
            tokio::spawn(async move { call(&peer, tool, arguments).await.0 })
        })
        .collect();
    eventually("the six calls reached the upstream", Duration::from_secs(10), || async {
        logged("slow") >= slow_before + 3 && logged("hang") >= hang_before + 3
    })
    .await;
    let killed = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(old as i32), nix::sys::signal::SIGKILL)
        .unwrap();
    let slow_at_kill = logged("slow");
    let mut recovered = None;
    while recovered.is_none() && killed.elapsed() < Duration::from_secs(10) {
        let (probe, _) = call(&peer, "fx_echo", json!({"text": "probe"})).await;
        if probe.code.is_none() {
            recovered = Some(killed.elapsed());
        }
        history.push(probe);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recovered = recovered.expect("fx_echo succeeds again after the restart");
    let mut ended = Vec::new();
    for handle in in_flight {
        // A call that hangs fails here rather than holding the test.
        let call = tokio::time::timeout(Duration::from_secs(15), handle)
            .await
            .expect("a call in flight at the kill never ended")
            .unwrap();
        ended.push(call);
    }
    for call in &ended {
        assert!(call.took < Duration::from_secs(10), "within the timeout and a retry: {call:?}");
        match call.tool.as_str() {
            // Read-only: retried on the new process, which really runs it (1.5 s again).
            "fx_slow" => {
                assert_eq!(call.code, None, "the retried read succeeds: {call:?}");
                assert!(call.took > Duration::from_millis(1500), "it ran again: {call:?}");
            }
            // Not safe to repeat: a clear error saying it may or may not have run.
            _ => {
                assert_eq!(call.code.as_deref(), Some("UPSTREAM_UNAVAILABLE"), "{call:?}");
                assert!(call.message.contains("closed before it answered"), "{call:?}");
                assert!(call.feedback_token.is_some(), "an answer, recorded: {call:?}");
            }
        }
    }
    assert!(
        logged("slow") >= slow_at_kill + 3,
        "the new process ran the three retried reads: {} slow calls logged after the kill",
        logged("slow") - slow_at_kill
    );
    history.extend(ended);
    history.extend(join(workers).await);
    let failed: Vec<&Call> = history.iter().filter(|call| call.code.is_some()).collect();
    for call in &failed {
        assert_eq!(call.code.as_deref(), Some("UPSTREAM_UNAVAILABLE"), "{call:?}");
        assert!(call.took < Duration::from_secs(5), "no call outlives its timeout: {call:?}");
    }
    eprintln!(
        "calls={} failed={} (3 fx_hang in flight) recovered after {recovered:?}",
        history.len(),
        failed.len()
    );
    let (last, value) = call(&peer, "fx_pid", json!({})).await;
    let new: u32 = value.as_str().unwrap().parse().unwrap();
    assert_ne!(new, old, "the supervisor started a new process");
    history.push(last);
    check_history(&database.url, &history).await;
    client.cancel().await.unwrap();
    assert!(server.stop().success());
    assert!(!process_alive(old) && !process_alive(new), "no orphan upstream after orca exits");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_provider_under_load_ends_every_generate_sql_within_its_timeout() {
    let database = samples::chinook().await;
    let fake = FakeLlm::start().await;
    let setup = OrcaSetup::new(&database.url)
        .with_fake_llm(&fake)
        .with_config("llm:\n  timeout_ms: 500\n  max_retries: 1\n  max_backoff_ms: 1500\n");
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let peer = client.peer().clone();
    let generate = |peer: Peer<RoleClient>| async move {
        call(
            &peer,
            "generate_sql",
            json!({"prompt": "how many tracks", "llm_provider": "anthropic"}),
        )
        .await
        .0
    };
    // Four calls at once per fault, with list_servers calls alongside that must not wait.
    let faults: [(&str, Vec<Reply>, Option<&str>); 4] = [
        (
            "500",
            vec![Reply::Error { status: 500, retry_after: None }; 8],
            Some("UPSTREAM_UNAVAILABLE"),
        ),
        (
            "429 Retry-After: 1",
            [
                vec![Reply::Error { status: 429, retry_after: Some("1".to_owned()) }; 4],
                vec![Reply::Text("```sql\nSELECT count(*) FROM track\n```".to_owned()); 4],
            ]
            .concat(),
            None,
        ),
        // A timeout is not retried: one reply per call, none left over for the next fault.
        ("hang", vec![Reply::Hang(Duration::from_secs(5)); 4], Some("TIMEOUT")),
        // A retry that meets another failure (as `scripts/chaos --fault llm` saw at its phase
        // changes): the wait the 429 asked for, then the attempt's timeout, and no more.
        (
            "429 Retry-After: 1, then a hang",
            [
                vec![Reply::Error { status: 429, retry_after: Some("1".to_owned()) }; 4],
                vec![Reply::Hang(Duration::from_secs(5)); 4],
            ]
            .concat(),
            Some("TIMEOUT"),
        ),
    ];
    let mut history = Vec::new();
    for (name, replies, expected) in faults {
        fake.script(Wire::Anthropic, replies);
        let calls: Vec<_> = (0..4).map(|_| tokio::spawn(generate(peer.clone()))).collect();
        let mut others = Vec::new();
        for _ in 0..5 {
            others.push(call(&peer, "list_servers", json!({})).await.0);
        }
        let mut ended = Vec::new();
        for handle in calls {
            ended.push(handle.await.unwrap());
        }
        for call in &ended {
            assert_eq!(call.code.as_deref(), expected, "{name}: {call:?}");
            // Two attempts of at most 500 ms, a backoff of at most 1.5 s, and the validation.
            assert!(call.took < Duration::from_secs(5), "{name}: ended late: {call:?}");
            if name.ends_with("then a hang") {
                assert!(call.took >= Duration::from_secs(1), "{name}: waited as asked: {call:?}");
            }
        }
        for other in &others {
            assert_eq!(other.code, None, "{name}: {other:?}");
        }
        let slowest = ended.iter().map(|call| call.took).max().unwrap();
        eprintln!("{name}: 4 generate_sql ended by {slowest:?} with {expected:?}");
        history.extend(ended);
        history.extend(others);
    }
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    check_history(&database.url, &history).await;
    client.cancel().await.unwrap();
    assert!(server.stop().success());
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_under_load_drains_within_the_timeout_records_every_answer_and_exits_zero() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url)
        .with_config("http:\n  drain_timeout_ms: 1500\n")
        .with_external(&fixture_yaml("60s"));
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let peer = client.peer().clone();
    let (first, value) = call(&peer, "fx_pid", json!({})).await;
    let pid: u32 = value.as_str().unwrap().parse().unwrap();

    let deadline = Instant::now() + Duration::from_secs(4);
    let workers = under_load(std::slice::from_ref(&peer), 4, deadline, |peer, _| async move {
        vec![call(&peer, "list_servers", json!({})).await.0]
    })
    .await;
    let slow = tokio::spawn({
        let peer = peer.clone();
        async move { call(&peer, "fx_slow", json!({"ms": 600})).await.0 }
    });
    let hang = tokio::spawn({
        let peer = peer.clone();
        async move { call(&peer, "fx_hang", json!({})).await.0 }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let termed = Instant::now();
    let status = tokio::task::spawn_blocking(move || server.stop()).await.unwrap();
    let exited = termed.elapsed();
    assert!(status.success(), "orca exits 0 after SIGTERM: {status:?}");
    assert!(exited < Duration::from_secs(10), "the drain timeout bounds the exit: {exited:?}");
    let slow = slow.await.unwrap();
    assert_eq!(slow.code, None, "a call in flight finishes within the drain: {slow:?}");
    let hang = hang.await.unwrap();
    assert!(hang.feedback_token.is_none(), "the hung call is cut off: {hang:?}");
    let mut history = join(workers).await;
    let answered = history.iter().filter(|call| call.feedback_token.is_some()).count();
    eprintln!("exited after {exited:?}; {answered} of {} calls answered", history.len());
    history.extend([first, slow, hang]);
    check_history(&database.url, &history).await;
    assert!(!process_alive(pid), "the upstream is reaped");
    drop(client);
}
