//! Load generator for the gateway benchmark: N concurrent clients call one tool over
//! Streamable HTTP (stateless JSON responses) for a fixed time against a running `orca serve
//! --http`, then print calls/s and client-side p50/p99 latency, and the calls made in all, warm-up
//! included (to divide CPU time measured around the run by). Loopback only, bounded in time.
//!
//! Usage: bench_gateway <url> <concurrency> <seconds> [tool, or `tools/list`]; `BENCH_AUTHORIZATION` is sent as
//! the `Authorization` header when set (an API key or a bearer token), and `BENCH_ARGUMENTS` (a
//! JSON object) as the tool's arguments. With `BENCH_DPOP_KEY` (a key as `DpopKey::stored`
//! gives it) and `BENCH_AUTHORIZATION` set to `DPoP <token>`, each request carries a fresh DPoP
//! proof of that key. `bench_gateway --dpop-key` prints a new key and its thumbprint.

#![allow(clippy::print_stdout, reason = "the result line is this program's output")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use orca::client::auth::{Credential, DpopKey};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--dpop-key") {
        let key = DpopKey::generate().expect("a DPoP key");
        println!("{} {}", key.stored(), key.thumbprint());
        return;
    }
    let url = args.get(1).cloned().unwrap_or_else(|| "http://127.0.0.1:9000/mcp".into());
    let concurrency: usize = args.get(2).and_then(|text| text.parse().ok()).unwrap_or(1);
    let seconds: u64 = args.get(3).and_then(|text| text.parse().ok()).unwrap_or(10).min(120);
    let tool = args.get(4).cloned().unwrap_or_else(|| "list_servers".into());
    assert!(
        url.starts_with("http://127.") || url.starts_with("http://localhost"),
        "loopback targets only"
    );
    let authorization = std::env::var("BENCH_AUTHORIZATION").ok();
    // The proofs are the client's work: made here, outside orca's CPU time.
    let dpop = std::env::var("BENCH_DPOP_KEY").ok().filter(|key| !key.is_empty()).map(|stored| {
        let token = authorization
            .as_deref()
            .and_then(|value| value.strip_prefix("DPoP "))
            .expect("BENCH_AUTHORIZATION is `DPoP <token>` with BENCH_DPOP_KEY")
            .to_owned();
        let key = DpopKey::from_stored(&stored).expect("BENCH_DPOP_KEY is a stored DPoP key");
        Credential { token, dpop: Some(Arc::new(key)) }
    });
    let arguments: serde_json::Value = std::env::var("BENCH_ARGUMENTS")
        .map(|text| serde_json::from_str(&text).expect("BENCH_ARGUMENTS is a JSON object"))
        .unwrap_or_else(|_| serde_json::json!({}));
    // `tools/list` as the tool name lists the tools instead of calling one.
    let listing = tool == "tools/list";
    let body = if listing {
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    } else {
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
    }
    .to_string();

    let run = |window: Duration| {
        let url = url.clone();
        let body = body.clone();
        let authorization = authorization.clone();
        let dpop = dpop.clone();
        async move {
            let deadline = Instant::now() + window;
            let mut workers = Vec::new();
            for _ in 0..concurrency {
                let url = url.clone();
                let body = body.clone();
                let authorization = authorization.clone();
                let dpop = dpop.clone();
                workers.push(tokio::spawn(async move {
                    let client =
                        reqwest::Client::builder().pool_max_idle_per_host(1).build().unwrap();
                    let mut latencies = Vec::new();
                    while Instant::now() < deadline {
                        let started = Instant::now();
                        let mut request = client
                            .post(&url)
                            .header("content-type", "application/json")
                            .header("accept", "application/json, text/event-stream")
                            .body(body.clone());
                        if let Some(authorization) = &authorization {
                            request = request.header("authorization", authorization);
                        }
                        if let Some(credential) = &dpop {
                            let (_, proof) = credential.headers("POST", &url).expect("a proof");
                            request = request.header("dpop", proof.expect("a DPoP credential"));
                        }
                        let response = request.send().await.expect("request failed");
                        assert!(response.status().is_success(), "status {}", response.status());
                        let text = response.text().await.unwrap();
                        assert!(
                            text.contains(if listing {
                                "\"tools\":["
                            } else {
                                "\"isError\":false"
                            }),
                            "the call failed: {text}"
                        );
                        latencies.push(started.elapsed());
                    }
                    latencies
                }));
            }
            let mut all = Vec::new();
            for worker in workers {
                all.extend(worker.await.unwrap());
            }
            all
        }
    };
    // Warm up connections and caches, then measure.
    let warm_up = run(Duration::from_secs(1)).await.len();
    let started = Instant::now();
    let mut latencies = run(Duration::from_secs(seconds)).await;
    let elapsed = started.elapsed();
    latencies.sort();
    let percentile = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    let micros = |duration: Duration| duration.as_secs_f64() * 1e6;
    println!(
        "concurrency={concurrency} calls={} all_calls={} calls_per_s={:.0} p50_us={:.0} p99_us={:.0}",
        latencies.len(),
        latencies.len() + warm_up,
        latencies.len() as f64 / elapsed.as_secs_f64(),
        micros(percentile(0.50)),
        micros(percentile(0.99)),
    );
}
