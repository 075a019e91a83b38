//! Benchmark of the `metabase` server: what a tool call through orca adds over the raw HTTP
//! call it makes. A small Metabase stand-in (axum, in this process) answers
//! `POST /api/session`, `GET /api/session/properties` and `GET /api/card/1` with a real card
//! body; the program measures, in alternating rounds, `GET /api/card/1` sent directly with
//! reqwest (one keep-alive connection, the session header) and `get_card {"id": 1}` called
//! through `orca serve --stdio` started as a child with `METABASE_URL` pointing at the stand-in.
//!
//! `bench_metabase <calls per round> <rounds> -- <orca command> [args...]`
//!
//! Prints one line per round and a summary: p50 of each path, the added p50 and the ratio.

#![allow(clippy::print_stdout, reason = "the result lines are this program's output")]

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const SESSION: &str = "38f4939c-ad7f-4cbe-ae54-30946daf8593";

fn card() -> Value {
    json!({"id": 1, "name": "Orders count", "description": null, "display": "scalar", "type": "question",
           "collection_id": 1, "archived": false, "visualization_settings": {}, "parameters": [],
           "dataset_query": {"database": 1, "type": "native",
                             "native": {"query": "SELECT count(*) FROM orders", "template-tags": {}}},
           "result_metadata": [{"name": "count", "display_name": "Count", "base_type": "type/BigInteger",
                                "fingerprint": {"global": {"distinct-count": 1, "nil%": 0.0}}}],
           "creator_id": 1, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"})
}

async fn stand_in() -> String {
    let authorized = |headers: &HeaderMap| {
        headers.get("x-metabase-session").and_then(|v| v.to_str().ok()) == Some(SESSION)
    };
    let app = axum::Router::new()
        .route("/api/session", axum::routing::post(|| async { axum::Json(json!({"id": SESSION})) }))
        .route(
            "/api/session/properties",
            axum::routing::get(|| async { axum::Json(json!({"version": {"tag": "v0.50.3"}})) }),
        )
        .route(
            "/api/card/1",
            axum::routing::get(move |headers: HeaderMap| async move {
                if authorized(&headers) {
                    axum::Json(card()).into_response()
                } else {
                    (StatusCode::UNAUTHORIZED, "Unauthenticated").into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("stand-in failed") });
    format!("http://{address}")
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let split = args.iter().position(|arg| arg == "--").expect("usage: see the file header");
    let [calls, rounds] = &args[1..split] else {
        panic!("usage: bench_metabase <calls per round> <rounds> -- <orca command...>");
    };
    let calls: usize = calls.parse().expect("calls");
    let rounds: usize = rounds.parse().expect("rounds");
    let url = stand_in().await;

    let http = reqwest::Client::new();
    let mut command = tokio::process::Command::new(&args[split + 1]);
    command
        .args(&args[split + 2..])
        .env("METABASE_URL", &url)
        .env("METABASE_USERNAME", "bench@example.com")
        .env("METABASE_PASSWORD", "bench-password");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot start orca");
    let client = ().serve(transport).await.expect("MCP handshake failed");
    let params = CallToolRequestParams::new("get_card")
        .with_arguments(json!({"id": 1}).as_object().cloned().expect("an object"));
    let raw = || async {
        let response = http
            .get(format!("{url}/api/card/1"))
            .header("x-metabase-session", SESSION)
            .send()
            .await
            .expect("raw call failed");
        assert!(response.status().is_success());
        let body: Value = response.json().await.expect("a JSON card");
        assert_eq!(body["id"], 1);
    };
    // Warm up both paths: connections, the session, allocator pools.
    for _ in 0..200 {
        raw().await;
        let result = client.call_tool(params.clone()).await.expect("call failed");
        assert_ne!(result.is_error, Some(true), "get_card failed: {result:?}");
    }
    let (mut all_raw, mut all_orca) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let mut direct = Vec::with_capacity(calls);
        for _ in 0..calls {
            let started = Instant::now();
            raw().await;
            direct.push(started.elapsed());
        }
        let mut through = Vec::with_capacity(calls);
        for _ in 0..calls {
            let started = Instant::now();
            client.call_tool(params.clone()).await.expect("call failed");
            through.push(started.elapsed());
        }
        println!(
            "round {round}: raw HTTP p50 {:.0} us, get_card through orca p50 {:.0} us",
            p50(direct.clone()).as_secs_f64() * 1e6,
            p50(through.clone()).as_secs_f64() * 1e6
        );
        all_raw.extend(direct);
        all_orca.extend(through);
    }
    let (raw_p50, orca_p50) = (p50(all_raw), p50(all_orca));
    println!(
        "all rounds: raw p50 {:.0} us, through orca p50 {:.0} us, added p50 {:.0} us, ratio {:.2}",
        raw_p50.as_secs_f64() * 1e6,
        orca_p50.as_secs_f64() * 1e6,
        (orca_p50.as_secs_f64() - raw_p50.as_secs_f64()) * 1e6,
        orca_p50.as_secs_f64() / raw_p50.as_secs_f64()
    );
    client.cancel().await.expect("cannot close the client");
}
