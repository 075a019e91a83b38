//! `orca demo` on the embedded PostgreSQL: the cluster is created under ORCA_HOME, Chinook is
//! loaded once, HTTP is served, and the cluster stops when the last orca using it does.

use serde_json::json;
use sqlx::Connection;

use crate::support::orca::HttpServer;
use crate::support::{OrcaSetup, call, read, run};

/// `server` answers `execute_sql` from the Chinook database: its 275 artists.
async fn assert_serves_chinook(server: &HttpServer) {
    let client = server.client(None).await;
    let result = call(
        &client,
        "execute_sql",
        json!({"sql": "SELECT count(*) AS artists FROM artist", "dry_run": false}),
        None,
    )
    .await
    .unwrap();
    let rows = result.structured_content.unwrap()["rows"].clone();
    assert_eq!(rows[0], json!([275]), "{rows}\n{}", server.log_text());
    client.cancel().await.unwrap();
}

fn embedded_url(setup: &OrcaSetup, database: &str) -> String {
    let pg = setup.home.path().join("pg");
    let port = read(&pg.join("port")).trim().to_owned();
    let password = read(&pg.join("password")).trim().to_owned();
    format!("postgres://postgres:{password}@127.0.0.1:{port}/{database}")
}

#[tokio::test]
async fn demo_loads_chinook_once_serves_http_and_stops_its_cluster() {
    let setup = OrcaSetup::embedded();
    let server = setup.http_command(&["demo", "--addr", "127.0.0.1:0"]);
    let client = server.client(None).await;
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    assert_eq!(result.structured_content.unwrap()["servers"][0]["name"], "orca");
    // The banner's example: SQL on the embedded Chinook.
    let result = call(
        &client,
        "execute_sql",
        json!({"sql": "SELECT name FROM artist ORDER BY name LIMIT 5", "dry_run": false}),
        None,
    )
    .await
    .unwrap();
    let rows = result.structured_content.unwrap()["rows"].clone();
    assert_eq!(rows[0], json!(["A Cor Do Som"]), "{rows}");
    // The demo starts from the context file shipped for Chinook.
    let context = setup.home.path().join("context/supabase-sql-context.md");
    let shipped =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("context/supabase-sql-context.md");
    assert_eq!(
        std::fs::read_to_string(context).unwrap(),
        std::fs::read_to_string(shipped).unwrap()
    );
    client.cancel().await.unwrap();
    let url = embedded_url(&setup, "chinook");
    {
        let mut connection =
            sqlx::PgConnection::connect(&url).await.expect("the chinook database is reachable");
        let artists: i64 = sqlx::query_scalar("SELECT count(*) FROM artist")
            .fetch_one(&mut connection)
            .await
            .unwrap();
        assert_eq!(artists, 275);
        // Loaded with its statistics: the planner knows the tables' sizes from the first query.
        let analyzed: bool = sqlx::query_scalar(
            "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'track'",
        )
        .fetch_one(&mut connection)
        .await
        .unwrap();
        assert!(analyzed, "Chinook is analyzed once loaded");
        let tracking: i64 = sqlx::query_scalar("SELECT count(*) FROM orca.mcp_executions")
            .fetch_one(
                &mut sqlx::PgConnection::connect(&embedded_url(&setup, "orca")).await.unwrap(),
            )
            .await
            .unwrap();
        assert!(tracking <= 2, "orca's state lives in its own database");
        connection.close().await.unwrap();
    }
    let first_log = server.log_text();
    assert!(first_log.contains("loaded the Chinook sample database"), "{first_log}");
    assert!(server.stop().success());
    assert!(
        sqlx::PgConnection::connect(&url).await.is_err(),
        "the cluster stops with the orca that started it"
    );

    // A second run reuses the cluster and the loaded database.
    let again = setup.http_command(&["demo", "--addr", "127.0.0.1:0"]);
    let client = again.client(None).await;
    call(&client, "list_servers", json!({}), None).await.unwrap();
    client.cancel().await.unwrap();
    let second_log = again.log_text();
    assert!(!second_log.contains("loaded the Chinook sample database"), "{second_log}");
    assert!(!second_log.contains("created the embedded PostgreSQL cluster"), "{second_log}");
    assert!(again.stop().success());
}

#[tokio::test]
async fn two_first_starts_at_once_share_the_cluster_and_load_chinook_once() {
    let setup = OrcaSetup::embedded();
    // Two MCP clients launching orca together on a fresh home: one creates and starts the
    // cluster, the other reuses it; both create `orca` and want Chinook at the same moment.
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(|| setup.http_command(&["demo", "--addr", "127.0.0.1:0"]));
        let second = scope.spawn(|| setup.http_command(&["demo", "--addr", "127.0.0.1:0"]));
        (first.join().unwrap(), second.join().unwrap())
    });
    for server in [&first, &second] {
        assert_serves_chinook(server).await;
    }
    let loads = [&first, &second]
        .iter()
        .filter(|server| server.log_text().contains("loaded the Chinook sample database"))
        .count();
    assert_eq!(loads, 1, "{}\n---\n{}", first.log_text(), second.log_text());
    assert!(first.stop().success());
    assert!(second.stop().success());
}

#[tokio::test]
async fn the_embedded_cluster_stays_up_until_the_last_orca_using_it_exits() {
    let setup = OrcaSetup::embedded();
    // Two desktop clients, each with its own orca on the same home: the first starts the
    // cluster, the second joins it.
    let first = setup.http_command(&["demo", "--addr", "127.0.0.1:0"]);
    let second = setup.http_command(&["demo", "--addr", "127.0.0.1:0"]);
    assert!(second.log_text().contains("reusing the embedded PostgreSQL"), "{}", second.log_text());
    let postmaster = setup.home.path().join("pg/data/postmaster.pid");
    assert!(postmaster.exists());
    // The one that started it exits first: the other keeps its database.
    let first_log = first.log.clone();
    assert!(first.stop().success());
    let said = |log: &std::sync::Mutex<Vec<String>>| {
        log.lock()
            .unwrap()
            .iter()
            .any(|line| line.contains("stays up: another orca process uses it"))
    };
    // Its last lines may still be on their way from the pipe.
    for _ in 0..50 {
        if said(&first_log) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(said(&first_log), "{}", first_log.lock().unwrap().join("\n"));
    assert!(postmaster.exists(), "the cluster is still running");
    assert_serves_chinook(&second).await;
    // The last one out stops it.
    assert!(second.stop().success());
    assert!(!postmaster.exists(), "the last orca to exit stops the cluster");
}

#[test]
fn missing_server_binaries_name_the_package_to_install() {
    let mut setup = OrcaSetup::embedded();
    setup.env.insert("ORCA_PG_BINDIR".into(), "/nonexistent/bin".into());
    let (code, _, stderr) = run(&setup, &["migrate"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("apt-get install -y postgresql"), "{stderr}");
    assert!(stderr.contains("ORCA_DATABASE_URL"), "the message names the alternative: {stderr}");
}
