//! The nightly export: `orca export-feedback` writes RFC 4180 CSV of feedback and failures, each
//! joined with its execution, and re-running replaces the files.

use serde_json::json;
use uuid::Uuid;

use crate::support::{OrcaSetup, TestDatabase, call, meta_of, run, wait_for_row};

fn read_csv(path: &std::path::Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let header = reader.headers().unwrap().iter().map(str::to_owned).collect();
    let rows = reader
        .records()
        .map(|record| record.unwrap().iter().map(str::to_owned).collect())
        .collect();
    (header, rows)
}

fn column(header: &[String], row: &[String], name: &str) -> String {
    let index = header
        .iter()
        .position(|column| column == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    row[index].clone()
}

#[tokio::test]
async fn export_writes_feedback_and_failures_joined_with_their_executions() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let first = call(&client, "list_servers", json!({}), None).await.unwrap();
    let second = call(&client, "list_servers", json!({}), None).await.unwrap();
    let failed = call(&client, "list_servers", json!({"unexpected": true}), None).await.unwrap();
    assert_eq!(failed.is_error, Some(true));
    let url = server.url("/mcp/feedback");
    let http = reqwest::Client::new();
    let tricky_comment = "wrong join, \"customer\" table\nshould use invoice";
    for (result, body) in [
        (&first, json!({"rating": "up", "rating_score": 5})),
        (&second, json!({"rating": "down", "comment": tricky_comment})),
    ] {
        let mut body = body;
        body["feedback_token"] = meta_of(result)["feedback_token"].clone();
        assert_eq!(http.post(&url).json(&body).send().await.unwrap().status().as_u16(), 201);
    }
    client.cancel().await.unwrap();
    let failed_id: Uuid = meta_of(&failed)["execution_id"].as_str().unwrap().parse().unwrap();
    let pool = database.connect().await;
    wait_for_row(&pool, "SELECT 1 FROM orca.mcp_failures WHERE execution_id = $1", failed_id).await;
    assert!(server.stop().success());

    let out = setup.home.path().join("exports");
    let out_text = out.display().to_string();
    let (code, stdout, stderr) =
        run(&setup, &["export-feedback", "--since", "1h", "--out", &out_text]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("(2 rows)") && stdout.contains("(1 rows)"), "{stdout}");
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let feedback_path = out.join(format!("feedback-{today}.csv"));
    let failures_path = out.join(format!("failures-{today}.csv"));

    let (header, rows) = read_csv(&feedback_path);
    assert_eq!(rows.len(), 2);
    let by_rating = |rating: &str| {
        rows.iter().find(|row| column(&header, row, "rating") == rating).unwrap().clone()
    };
    let up = by_rating("up");
    assert_eq!(column(&header, &up, "rating_score"), "5");
    assert_eq!(column(&header, &up, "server"), "orca");
    assert_eq!(column(&header, &up, "tool"), "list_servers");
    assert_eq!(column(&header, &up, "status"), "success");
    assert_eq!(
        column(&header, &up, "execution_id"),
        meta_of(&first)["execution_id"].as_str().unwrap()
    );
    // Who made the call: the anonymous principal, without an OAuth client or role.
    for (name, value) in [("principal", "anonymous"), ("client_id", ""), ("role", "")] {
        assert_eq!(column(&header, &up, name), value, "{name}");
    }
    let down = by_rating("down");
    assert_eq!(
        column(&header, &down, "comment"),
        tricky_comment,
        "quotes, commas and newlines survive"
    );
    assert_eq!(column(&header, &down, "rating_score"), "");

    let (header, rows) = read_csv(&failures_path);
    assert_eq!(rows.len(), 1);
    assert_eq!(column(&header, &rows[0], "execution_id"), failed_id.to_string());
    assert_eq!(column(&header, &rows[0], "tool"), "list_servers");
    assert_eq!(column(&header, &rows[0], "error_type"), "validation_error");
    assert_eq!(column(&header, &rows[0], "error_code"), "INVALID_INPUT");
    assert_eq!(column(&header, &rows[0], "retry_attempt"), "1");
    assert!(column(&header, &rows[0], "error_details").contains("unexpected"));
    for (name, value) in [("principal", "anonymous"), ("client_id", ""), ("role", "")] {
        assert_eq!(column(&header, &rows[0], name), value, "{name}");
    }

    // Re-running overwrites the same two files.
    let (code, _, stderr) = run(&setup, &["export-feedback", "--since", "1h", "--out", &out_text]);
    assert_eq!(code, 0, "{stderr}");
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, [format!("failures-{today}.csv"), format!("feedback-{today}.csv")]);
    assert_eq!(read_csv(&feedback_path).1.len(), 2);

    // A window that holds nothing gives header-only files.
    let (code, _, stderr) = run(
        &setup,
        &["export-feedback", "--since", "2020-01-01", "--until", "2020-01-02", "--out", &out_text],
    );
    assert_eq!(code, 0, "{stderr}");
    let (header, rows) = read_csv(&out.join("feedback-2020-01-01.csv"));
    assert!(rows.is_empty());
    assert_eq!(header[0], "feedback_id");
}

#[tokio::test]
async fn export_fails_clearly_when_the_database_is_unreachable() {
    let setup = OrcaSetup::new("postgres://orca:sekrit-password@127.0.0.1:1/orca");
    let out = setup.home.path().join("exports").display().to_string();
    let (code, _, stderr) = run(&setup, &["export-feedback", "--since", "24h", "--out", &out]);
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot reach the state database"), "{stderr}");
    assert!(!stderr.contains("sekrit-password"), "no secret in errors: {stderr}");
}

#[tokio::test]
async fn export_rejects_a_bad_range() {
    let setup = OrcaSetup::new("postgres://orca@127.0.0.1:1/orca");
    let (code, _, stderr) = run(&setup, &["export-feedback", "--since", "yesterday", "--out", "x"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--since \"yesterday\""), "{stderr}");
}
