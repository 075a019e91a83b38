//! Benchmarks of the SQL layer.
//!
//! - `bench_sql classify [seconds]`: statements classified per second on one thread, over a
//!   corpus of reads, analytics, writes and DDL (`orca::sql::classify`, no database).
//! - `bench_sql parse [seconds]`: the same corpus through `pg_query::parse` alone (PostgreSQL's
//!   grammar and the protobuf decode), the bound that classification cannot pass.
//! - `bench_sql call <url> <tool> <arguments-json> [repeat]`: one tool call over Streamable HTTP
//!   (stateless) against a running `orca serve --http`, repeated; prints the best and median wall
//!   time and the result size. Used for the 1,000,000-row encoding and the introspection runs.
//! - `bench_sql paging <url> <table> <page_size> <target_page> [sql]`: `query_sql` over
//!   `SELECT * FROM <table>` (or `sql`, labelled with `table`): the first page (median of 5), a
//!   walk through the pages up to `target_page` (rows/s), then that page again (median of 5,
//!   with its token).

#![allow(clippy::print_stdout, reason = "the result lines are this program's output")]

use std::time::{Duration, Instant};

const CORPUS: &[&str] = &[
    "SELECT 1",
    "SELECT artist_id, name FROM artist WHERE name ILIKE 'a%' ORDER BY name LIMIT 20",
    "SELECT g.name, count(*) AS tracks, avg(t.milliseconds) FROM track t JOIN genre g ON g.genre_id = t.genre_id GROUP BY g.name HAVING count(*) > 10 ORDER BY tracks DESC",
    "WITH monthly AS (SELECT date_trunc('month', invoice_date) AS month, sum(total) AS revenue FROM invoice GROUP BY 1) SELECT month, revenue, sum(revenue) OVER (ORDER BY month ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM monthly ORDER BY month",
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY milliseconds), mode() WITHIN GROUP (ORDER BY genre_id) FROM track",
    "SELECT c.first_name, x.total FROM customer c CROSS JOIN LATERAL (SELECT sum(total) AS total FROM invoice i WHERE i.customer_id = c.customer_id) x WHERE x.total > 40",
    "SELECT to_jsonb(a) ->> 'name', to_jsonb(a) @> '{\"artist_id\": 1}' FROM artist a",
    "WITH d AS (DELETE FROM invoice_line WHERE invoice_id = 1 RETURNING *) SELECT count(*) FROM d",
    "INSERT INTO artist (artist_id, name) VALUES (1000, 'x') ON CONFLICT (artist_id) DO UPDATE SET name = excluded.name",
    "UPDATE track SET unit_price = unit_price * 1.1 WHERE genre_id IN (SELECT genre_id FROM genre WHERE name = 'Rock')",
    "CREATE TABLE IF NOT EXISTS audit (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz DEFAULT now(), note text)",
    "SELECT * FROM pg_read_file('/etc/passwd')",
];

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("classify") => {
            let seconds = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5u64).min(120);
            classify(Duration::from_secs(seconds));
        }
        Some("parse") => {
            let seconds = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5u64).min(120);
            parse(Duration::from_secs(seconds));
        }
        Some("call") => {
            let url = args.get(2).expect("url");
            assert!(
                url.starts_with("http://127.") || url.starts_with("http://localhost"),
                "loopback targets only"
            );
            let tool = args.get(3).expect("tool");
            let arguments: serde_json::Value =
                serde_json::from_str(args.get(4).expect("arguments")).expect("arguments JSON");
            let repeat = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(3usize).max(1);
            call(url, tool, arguments, repeat).await;
        }
        Some("paging") => {
            let url = args.get(2).expect("url");
            let table = args.get(3).expect("table");
            let page_size: u64 = args.get(4).and_then(|s| s.parse().ok()).expect("page size");
            let target: u64 = args.get(5).and_then(|s| s.parse().ok()).expect("target page");
            let sql = args.get(6).cloned().unwrap_or_else(|| format!("SELECT * FROM {table}"));
            paging(url, table, &sql, page_size, target).await;
        }
        _ => panic!(
            "usage: bench_sql classify [seconds] | parse [seconds] | call <url> <tool> <json> [repeat] | paging <url> <table> <page_size> <target_page> [sql]"
        ),
    }
}

fn classify(window: Duration) {
    // Warm up, then count whole passes over the corpus.
    for sql in CORPUS {
        orca::sql::classify(sql).expect("the corpus parses");
    }
    let started = Instant::now();
    let mut statements = 0u64;
    while started.elapsed() < window {
        for sql in CORPUS {
            let classification = orca::sql::classify(sql).expect("the corpus parses");
            statements += classification.statements.len() as u64;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "classify: {statements} statements in {elapsed:.2} s = {:.0} statements/s (one thread, {} shapes)",
        statements as f64 / elapsed,
        CORPUS.len()
    );
}

fn parse(window: Duration) {
    for sql in CORPUS {
        pg_query::parse(sql, 0).expect("the corpus parses");
    }
    let started = Instant::now();
    let mut statements = 0u64;
    while started.elapsed() < window {
        for sql in CORPUS {
            let parsed = pg_query::parse(sql, 0).expect("the corpus parses");
            statements += parsed.protobuf.stmts.len() as u64;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "parse: {statements} statements in {elapsed:.2} s = {:.0} statements/s (one thread, {} shapes)",
        statements as f64 / elapsed,
        CORPUS.len()
    );
}

async fn call(url: &str, tool: &str, arguments: serde_json::Value, repeat: usize) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(900)).build().unwrap();
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
    .to_string();
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..repeat {
        let started = Instant::now();
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.clone())
            .send()
            .await
            .expect("request failed");
        assert!(response.status().is_success(), "status {}", response.status());
        let text = response.text().await.unwrap();
        times.push(started.elapsed());
        assert!(
            text.contains("\"isError\":false"),
            "tool failed: {}",
            &text[..text.len().min(600)]
        );
        size = text.len();
    }
    times.sort();
    println!(
        "{tool}: best {:.1} ms, median {:.1} ms over {repeat} calls, response {size} bytes",
        times[0].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3
    );
}

/// One `query_sql` call; returns the wall time, the row count and the next page token.
async fn query_page(
    client: &reqwest::Client,
    url: &str,
    arguments: &serde_json::Value,
) -> (Duration, usize, Option<String>) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "query_sql", "arguments": arguments}});
    let started = Instant::now();
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .expect("request failed");
    let value: serde_json::Value = response.json().await.expect("a JSON response");
    let elapsed = started.elapsed();
    let result = &value["result"]["structuredContent"];
    assert!(result["rows"].is_array(), "query_sql failed: {value}");
    let rows = result["rows"].as_array().map_or(0, Vec::len);
    (elapsed, rows, result["page_token"].as_str().map(str::to_owned))
}

async fn paging(url: &str, table: &str, sql: &str, page_size: u64, target: u64) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(900)).build().unwrap();
    let first = serde_json::json!({"sql": sql, "max_rows": page_size});
    let median = |mut times: Vec<Duration>| {
        times.sort();
        times[times.len() / 2].as_secs_f64() * 1e3
    };
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(query_page(&client, url, &first).await.0);
    }
    let page_one = median(times);
    // Walk to the page before the target, keeping the token that asks for the target.
    let started = Instant::now();
    let mut rows = 0usize;
    let mut token = None;
    for _ in 1..target {
        let mut arguments = first.clone();
        if let Some(token) = &token {
            arguments["page_token"] = serde_json::json!(token);
        }
        let (_, count, next) = query_page(&client, url, &arguments).await;
        rows += count;
        token = Some(next.expect("the table has enough rows for the target page"));
    }
    let walk = started.elapsed().as_secs_f64();
    let mut arguments = first.clone();
    arguments["page_token"] = serde_json::json!(token.expect("a token"));
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(query_page(&client, url, &arguments).await.0);
    }
    let page_target = median(times);
    println!(
        "{table}: page 1 {page_one:.1} ms, page {target} {page_target:.1} ms (ratio {:.2}); walk of {} pages: {rows} rows in {walk:.1} s = {:.0} rows/s",
        page_target / page_one,
        target - 1,
        rows as f64 / walk
    );
}
