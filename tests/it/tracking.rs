//! Tracking through a database outage: calls keep working, records spill to disk, and every
//! record reaches the database exactly once when it is back, across an orca restart too.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use orca::embedded::EmbeddedPostgres;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::support::{OrcaSetup, call, eventually, meta_of, read};

/// A private cluster for one test, so stopping it disturbs no other test.
struct PrivateCluster {
    dir: PathBuf,
}

impl PrivateCluster {
    fn new() -> PrivateCluster {
        let dir = PathBuf::from(format!("/tmp/orca-outage-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        PrivateCluster { dir }
    }

    async fn start(&self) -> EmbeddedPostgres {
        let cluster = EmbeddedPostgres::start(&self.dir.join("pg"), None)
            .await
            .expect("cannot start a private cluster");
        cluster.ensure_database("orca").await.unwrap();
        cluster
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn count_once(url: &str, ids: &[Uuid]) -> Option<(i64, i64)> {
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect(url).await.ok()?;
    let counts = sqlx::query_as(
        "SELECT count(*), count(DISTINCT id) FROM orca.mcp_executions WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_one(&pool)
    .await
    .ok();
    pool.close().await;
    counts
}

/// Wait until every one of `ids` is stored, each exactly once.
async fn wait_stored(url: &str, ids: &[Uuid], what: &str) {
    let expected = Some((ids.len() as i64, ids.len() as i64));
    eventually(what, Duration::from_secs(30), || async { count_once(url, ids).await == expected })
        .await;
}

async fn list_servers_ids(
    client: &rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
    n: usize,
) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let result =
            call(client, "list_servers", json!({}), None).await.expect("calls keep working");
        assert_eq!(result.is_error, Some(false));
        ids.push(meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap());
    }
    ids
}

/// The ids waiting on disk: in a replay that is still pending, then in the spill file.
fn spilled_ids(setup: &OrcaSetup) -> Vec<Uuid> {
    let spill = setup.spill_file();
    let replaying = spill.with_extension("jsonl.replaying");
    let mut ids = Vec::new();
    for path in [replaying, spill] {
        if !path.exists() {
            continue;
        }
        ids.extend(read(&path).lines().filter(|line| !line.trim().is_empty()).map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["id"]
                .as_str()
                .unwrap()
                .parse::<Uuid>()
                .unwrap()
        }));
    }
    ids
}

#[tokio::test]
async fn records_made_during_a_database_outage_arrive_once_when_it_returns() {
    let private = PrivateCluster::new();
    let cluster = private.start().await;
    let url = cluster.url("orca");
    let setup = OrcaSetup::new(&url).with_config("tracking:\n  replay_interval_ms: 200\n");
    let server = setup.http_server(&[]);
    let client = server.client(None).await;

    let before = list_servers_ids(&client, 3).await;
    wait_stored(&url, &before, "the first records").await;

    cluster.stop().await.unwrap();
    let during = list_servers_ids(&client, 5).await;
    eventually("the spill file", Duration::from_secs(30), || async {
        spilled_ids(&setup).len() == 5
    })
    .await;
    assert_eq!(spilled_ids(&setup), during);
    let feedback = reqwest::Client::new()
        .post(server.url("/mcp/feedback"))
        .json(&json!({"feedback_token": Uuid::new_v4(), "rating": "up"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        feedback.status().as_u16(),
        503,
        "feedback says the store is down rather than losing the rating"
    );
    assert_eq!(feedback.headers()["retry-after"], "5");
    let metrics = reqwest::get(server.url("/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("orca_tracking_spill_pending 5"), "{metrics}");
    assert!(
        server.log_text().contains("tracking database unavailable, spilling records to disk"),
        "{}",
        server.log_text()
    );

    let cluster = private.start().await;
    let all: Vec<Uuid> = before.iter().chain(&during).copied().collect();
    wait_stored(&url, &all, "the replayed records").await;
    eventually("the spill file to empty", Duration::from_secs(10), || async {
        spilled_ids(&setup).is_empty()
    })
    .await;
    let after = list_servers_ids(&client, 1).await;
    wait_stored(&url, &after, "a record after recovery").await;
    client.cancel().await.unwrap();
    assert!(server.stop().success());
    let total: Option<(i64, i64)> = count_once(&url, &[all, after].concat()).await;
    assert_eq!(total, Some((9, 9)), "every record stored exactly once");
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn records_spilled_before_a_restart_are_replayed_by_the_next_run() {
    let private = PrivateCluster::new();
    let cluster = private.start().await;
    let url = cluster.url("orca");
    let setup = OrcaSetup::new(&url).with_config("tracking:\n  replay_interval_ms: 200\n");
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let before = list_servers_ids(&client, 2).await;
    wait_stored(&url, &before, "the first records").await;

    cluster.stop().await.unwrap();
    let during = list_servers_ids(&client, 3).await;
    client.cancel().await.unwrap();
    // An orderly shutdown while the database is down keeps the records on disk.
    assert!(server.stop().success());
    assert_eq!(spilled_ids(&setup), during);

    let cluster = private.start().await;
    let restarted = setup.http_server(&[]);
    let all: Vec<Uuid> = before.iter().chain(&during).copied().collect();
    wait_stored(&url, &all, "the replayed records").await;
    eventually("the spill file to empty", Duration::from_secs(10), || async {
        spilled_ids(&setup).is_empty()
    })
    .await;
    assert!(restarted.stop().success());
    cluster.stop().await.unwrap();
}
