//! Tracking through a database outage: calls keep working, records spill to disk, and every
//! record reaches the database exactly once when it is back, across an orca restart too.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Connection;
use uuid::Uuid;

use crate::support::{
    OrcaSetup, PrivateCluster, TestDatabase, call, eventually, meta_of, read, run, wait_for_row,
};

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

/// The ids waiting on disk: in a replay that is still pending, then in the spill file. A replay
/// attempt renames the spill file to the pending one at any moment (a reading between the two
/// files would see the records in neither, or in both), so the files are read until they stand
/// as they were before the reading.
fn spilled_ids(setup: &OrcaSetup) -> Vec<Uuid> {
    let spill = setup.spill_file();
    let replaying = spill.with_extension("jsonl.replaying");
    let standing = || (replaying.exists(), spill.exists());
    loop {
        let before = standing();
        let mut ids = Vec::new();
        for path in [&replaying, &spill] {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    ids.extend(text.lines().filter(|line| !line.trim().is_empty()).map(|line| {
                        serde_json::from_str::<Value>(line).unwrap()["id"]
                            .as_str()
                            .unwrap()
                            .parse::<Uuid>()
                            .unwrap()
                    }))
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => panic!("cannot read {}: {error}", path.display()),
            }
        }
        if standing() == before {
            return ids;
        }
    }
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
    // One record as a token's call would spill it, one as an orca before attribution did, one
    // made 30 days ahead.
    let ahead = chrono::Utc::now() + chrono::TimeDelta::days(30);
    let spill = setup.spill_file();
    for path in [spill.with_extension("jsonl.replaying"), spill] {
        if !path.exists() {
            continue;
        }
        let mut text = String::new();
        for line in read(&path).lines().filter(|line| !line.trim().is_empty()) {
            let mut record: Value = serde_json::from_str(line).unwrap();
            assert_eq!((&record["client_id"], &record["role"]), (&Value::Null, &Value::Null));
            if record["id"] == json!(during[0]) {
                record["client_id"] = json!("analyst-app");
                record["role"] = json!("analyst,admin");
            } else if record["id"] == json!(during[1]) {
                for field in ["client_id", "role"] {
                    record.as_object_mut().unwrap().remove(field);
                }
            } else if record["id"] == json!(during[2]) {
                // A clock far ahead: a day no partition exists for yet.
                record["created_at"] = json!(ahead.to_rfc3339());
            }
            text.push_str(&format!("{record}\n"));
        }
        std::fs::write(&path, text).unwrap();
    }

    let cluster = private.start().await;
    let restarted = setup.http_server(&[]);
    let all: Vec<Uuid> = before.iter().chain(&during).copied().collect();
    wait_stored(&url, &all, "the replayed records").await;
    eventually("the spill file to empty", Duration::from_secs(10), || async {
        spilled_ids(&setup).is_empty()
    })
    .await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let attribution = |id: Uuid| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (Option<String>, Option<String>)>(
                "SELECT client_id, role FROM orca.mcp_executions WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(
        attribution(during[0]).await,
        (Some("analyst-app".to_owned()), Some("analyst,admin".to_owned())),
        "the replay stores who made the call"
    );
    assert_eq!(attribution(during[1]).await, (None, None), "an older record reads without them");
    let partition: String = sqlx::query_scalar(
        "SELECT tableoid::regclass::text FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(during[2])
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(partition, format!("orca.mcp_executions_d{}", ahead.format("%Y%m%d")));
    pool.close().await;
    assert!(restarted.stop().success());
    cluster.stop().await.unwrap();
}

#[tokio::test]
async fn a_large_payload_is_stored_compressed_and_reads_back_as_orca_sent_it() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let line = "SELECT name, total FROM invoice WHERE total > 10 -- é, \"quoted\", \\ \u{1F600}\n";
    let arguments =
        json!({"unexpected": line.repeat(2_000), "z_first": 1, "a_second": [true, null]});
    let result = call(&client, "list_servers", arguments.clone(), None).await.unwrap();
    assert_eq!(result.is_error, Some(true));
    let token = meta_of(&result)["feedback_token"].clone();
    let id: Uuid = meta_of(&result)["execution_id"].as_str().unwrap().parse().unwrap();
    let feedback = reqwest::Client::new()
        .post(server.url("/mcp/feedback"))
        .json(&json!({"feedback_token": token, "rating": "down", "comment": "too long"}))
        .send()
        .await
        .unwrap();
    assert_eq!(feedback.status().as_u16(), 201, "feedback by token finds the record");
    client.cancel().await.unwrap();
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1", id).await;
    assert!(server.stop().success());

    let (text, compression, stored_size, key): (String, Option<String>, i32, String) = sqlx::query_as(
        "SELECT request_data::text, pg_column_compression(request_data), pg_column_size(request_data), \
         request_data->>'z_first' FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(text, arguments.to_string(), "the text orca sent, key order and escapes included");
    assert_eq!(key, "1", "JSON operators work on the stored payload");
    assert!(compression.is_some(), "a payload this large is compressed");
    assert!(
        (stored_size as usize) < text.len() / 4,
        "{stored_size} bytes stored for {} bytes of text",
        text.len()
    );

    // The export writes the feedback and the failure of this call like any other.
    let out = setup.home.path().join("exports");
    let out_text = out.display().to_string();
    let (code, stdout, stderr) =
        run(&setup, &["export-feedback", "--since", "1h", "--out", &out_text]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("(1 rows)"), "{stdout}");
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let feedback_csv = read(&out.join(format!("feedback-{today}.csv")));
    assert!(feedback_csv.contains(&id.to_string()) && feedback_csv.contains("too long"));
    let failures_csv = read(&out.join(format!("failures-{today}.csv")));
    let details: String = sqlx::query_scalar(
        "SELECT error_details::text FROM orca.mcp_failures WHERE execution_id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    let mut reader = csv::Reader::from_reader(failures_csv.as_bytes());
    let row = reader.records().next().expect("one failure").unwrap();
    assert_eq!(&row[1], id.to_string());
    assert_eq!(&row[7], details, "the failure's details as stored");
}

#[tokio::test]
async fn records_stored_before_the_payload_migration_keep_their_values_and_feedback() {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    // The tables as the migrations before this one left them, with a record in them.
    sqlx::raw_sql("CREATE SCHEMA orca").execute(&pool).await.unwrap();
    for migration in [
        include_str!("../../migrations/20261121000001_tracking.sql"),
        include_str!("../../migrations/20261121000002_confirmation_tokens.sql"),
        include_str!("../../migrations/20261122000001_llm_latency.sql"),
        include_str!("../../migrations/20261125000001_execution_source.sql"),
    ] {
        sqlx::raw_sql(migration).execute(&pool).await.unwrap();
    }
    let (id, token) = (Uuid::now_v7(), Uuid::new_v4());
    let request = json!({"sql": "SELECT 1", "options": {"limit": 5, "nested": [1, "two", null]}});
    let response = json!({"rows": [[1]], "columns": ["?column?"], "note": "é \"q\""});
    sqlx::query(
        "INSERT INTO orca.mcp_executions (id, mcp_name, tool_name, principal, transport, trace_id, \
         request_data, response_data, status, feedback_token) \
         VALUES ($1, 'postgres', 'execute_sql', 'anonymous', 'http', 't', $3, $4, 'success', $2)",
    )
    .bind(id)
    .bind(token)
    .bind(&request)
    .bind(&response)
    .execute(&pool)
    .await
    .unwrap();

    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let feedback = reqwest::Client::new()
        .post(server.url("/mcp/feedback"))
        .json(&json!({"feedback_token": token, "rating": "up"}))
        .send()
        .await
        .unwrap();
    assert_eq!(feedback.status().as_u16(), 201);
    assert!(server.stop().success());

    let types: Vec<String> = sqlx::query_scalar(
        "SELECT data_type FROM information_schema.columns WHERE table_schema = 'orca' \
         AND table_name = 'mcp_executions' AND column_name IN ('request_data', 'response_data')",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(types, ["json", "json"]);
    let (stored_request, stored_response): (Value, Value) =
        sqlx::query_as("SELECT request_data, response_data FROM orca.mcp_executions WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((stored_request, stored_response), (request, response));
    let partition: String = sqlx::query_scalar(
        "SELECT tableoid::regclass::text FROM orca.mcp_executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(partition.starts_with("orca.mcp_executions_until_"), "{partition}");
    let rated: i64 =
        sqlx::query_scalar("SELECT count(*) FROM orca.mcp_feedback WHERE execution_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(rated, 1);
}

/// orca's connections to `url`'s database, open or idle.
async fn orca_connections(url: &str) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let count: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = 'orca'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    count
}

#[tokio::test]
async fn fixed_size_pools_open_at_start_and_do_not_grow_under_load() {
    let private = PrivateCluster::new();
    let cluster = private.start().await;
    let url = cluster.url("orca");
    let setup =
        OrcaSetup::new(&url).with_config("database:\n  max_connections: 3\n  min_connections: 3\n");
    let server = setup.http_server(&[]);
    // Both pools (the target's and the state's, here on one database) reach their size before
    // any call.
    eventually("both pools to open their three connections", Duration::from_secs(20), || async {
        orca_connections(&url).await == 6
    })
    .await;
    let client = server.client(None).await;
    let calls = (0..24).map(|index| {
        let client = &client;
        async move {
            let (tool, arguments) = if index % 2 == 0 {
                ("list_servers", json!({}))
            } else {
                ("query_sql", json!({"sql": "SELECT count(*) FROM generate_series(1, 200000)"}))
            };
            call(client, tool, arguments, None).await.unwrap()
        }
    });
    for result in futures::future::join_all(calls).await {
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
    assert_eq!(orca_connections(&url).await, 6, "the pools stay at their fixed size");
    client.cancel().await.unwrap();
    assert!(server.stop().success());
    cluster.stop().await.unwrap();
}

/// The partitions of `table`.
async fn partitions_of(pool: &sqlx::PgPool, table: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = ('orca.' || $1)::regclass ORDER BY 1",
    )
    .bind(table)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn days_past_the_retention_are_dropped_whole_once_an_export_covered_them() {
    let database = TestDatabase::create().await;
    let pool = database.connect().await;
    let setup = OrcaSetup::new(&database.url).with_config("tracking:\n  retention_days: 90\n");
    let (code, out, err) = run(&setup, &["tracking", "maintain"]);
    assert_eq!(code, 0, "{out}{err}");
    let today = chrono::Utc::now().date_naive();
    let tomorrow = today + chrono::Days::new(1);
    for table in ["mcp_executions", "mcp_failures", "mcp_feedback"] {
        let partitions = partitions_of(&pool, table).await;
        for ahead in 1..=7 {
            let day = today + chrono::Days::new(ahead);
            let name = format!("{table}_d{}", day.format("%Y%m%d"));
            assert!(partitions.contains(&name), "{name} in {partitions:?}");
        }
        assert!(
            partitions.iter().any(|name| name.starts_with(&format!("{table}_until_"))),
            "{partitions:?}"
        );
    }
    // Tomorrow noon: a call with a failure and a rating; and one of today, without either.
    let noon = tomorrow.and_hms_opt(12, 0, 0).unwrap().and_utc();
    let (rated, plain) = (Uuid::now_v7(), Uuid::now_v7());
    for statement in [
        "INSERT INTO orca.mcp_executions (id, mcp_name, tool_name, principal, transport, trace_id, status, feedback_token, created_at) VALUES ($1, 'orca', 'list_servers', 'a', 'http', 't', 'error', gen_random_uuid(), $2)",
        "INSERT INTO orca.mcp_failures (id, execution_id, error_type, created_at, execution_created_at) VALUES (gen_random_uuid(), $1, 'internal', $2, $2)",
        "INSERT INTO orca.mcp_feedback (feedback_token, execution_id, execution_created_at, rating, created_at) SELECT feedback_token, id, created_at, 'down', $2 FROM orca.mcp_executions WHERE id = $1",
    ] {
        sqlx::query(statement).bind(rated).bind(noon).execute(&pool).await.unwrap();
    }
    sqlx::query("INSERT INTO orca.mcp_executions (id, mcp_name, tool_name, principal, transport, trace_id, status, feedback_token) VALUES ($1, 'orca', 'list_servers', 'a', 'http', 't', 'success', gen_random_uuid())")
        .bind(plain)
        .execute(&pool)
        .await
        .unwrap();
    // An export that ended before tomorrow's failure and rating.
    sqlx::query("INSERT INTO orca.tracking_exports (range_from, range_until) VALUES ($1, $2)")
        .bind(tomorrow.and_hms_opt(0, 0, 0).unwrap().and_utc())
        .bind(tomorrow.and_hms_opt(11, 0, 0).unwrap().and_utc())
        .execute(&pool)
        .await
        .unwrap();
    // 120 days on: tomorrow is past the retention, but not exported; today's day goes.
    let later = (noon + chrono::TimeDelta::days(120)).to_rfc3339();
    let (code, out, err) = run(&setup, &["tracking", "maintain", "--at", &later]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("not exported yet: {tomorrow}")), "{out}");
    let count = |id: Uuid| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT (SELECT count(*) FROM orca.mcp_executions WHERE id = $1) \
                      + (SELECT count(*) FROM orca.mcp_failures WHERE execution_id = $1) \
                      + (SELECT count(*) FROM orca.mcp_feedback WHERE execution_id = $1)",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(count(rated).await, 3);
    assert_eq!(count(plain).await, 0, "the partition of everything before was past the retention");
    for table in ["mcp_executions", "mcp_failures", "mcp_feedback"] {
        let partitions = partitions_of(&pool, table).await;
        assert!(!partitions.iter().any(|name| name.contains("_until_")), "{partitions:?}");
    }
    // The nightly export of that day: then the day goes, whole.
    let since = tomorrow.to_string();
    let until = (tomorrow + chrono::Days::new(1)).to_string();
    let out_dir = setup.home.path().join("exports");
    let (code, out, err) = run(
        &setup,
        &[
            "export-feedback",
            "--since",
            &since,
            "--until",
            &until,
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = run(&setup, &["tracking", "maintain", "--at", &later]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("retention): {tomorrow}")), "{out}");
    assert_eq!(count(rated).await, 0);
    let name = format!("mcp_executions_d{}", tomorrow.format("%Y%m%d"));
    assert!(!partitions_of(&pool, "mcp_executions").await.contains(&name));
}

#[tokio::test]
async fn records_of_a_replica_killed_before_it_stored_them_are_stored_once_when_it_starts_again() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let before = list_servers_ids(&client, 2).await;
    wait_stored(&database.url, &before, "the first calls").await;
    // The writer's next batch waits on a lock held here: the records answered meanwhile are in
    // orca's memory only when it is killed (and in its journal).
    let mut holder = sqlx::PgConnection::connect(&database.url).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE orca.mcp_executions IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();
    let during = list_servers_ids(&client, 5).await;
    client.cancel().await.unwrap();
    server.kill();
    sqlx::raw_sql("ROLLBACK").execute(&mut holder).await.unwrap();
    assert_eq!(
        count_once(&database.url, &during).await,
        Some((0, 0)),
        "not stored before the kill"
    );
    // The same ORCA_HOME (a container's volume): the next run stores them, each once.
    let restarted = setup.http_server(&[]);
    wait_stored(&database.url, &during, "the journaled records").await;
    let all: Vec<Uuid> = before.iter().chain(&during).copied().collect();
    wait_stored(&database.url, &all, "every call once").await;
    assert!(restarted.stop().success());
}
