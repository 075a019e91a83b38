//! Benchmark of the `weaviate` server: what `weaviate-query-hybrid` through `orca serve --stdio`
//! adds over the raw GraphQL call it makes. Both go to the test suite's fake Weaviate (started
//! in this process); the raw call posts the exact query text orca sent, with the same headers,
//! over one keep-alive connection. Calls are sequential, and the two are measured in alternating
//! rounds so that both see the same machine noise.
//!
//! `bench_weaviate <seconds per round> <rounds> -- <orca command...>`
//!
//! Prints one line per round and a summary: p50 of each, the added p50 and the ratio.

#![allow(clippy::print_stdout, reason = "the result lines are this program's output")]
#![allow(
    dead_code,
    unreachable_pub,
    reason = "the fake serves the tests too; the benchmark uses part of it"
)]

#[path = "../tests/it/support/fake_weaviate.rs"]
mod fake_weaviate;
#[path = "../tests/it/support/fake_weaviate_graphql.rs"]
mod fake_weaviate_graphql;

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

fn p50(latencies: &mut [Duration]) -> Duration {
    latencies.sort();
    latencies[latencies.len() / 2]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let split = args.iter().position(|arg| arg == "--").expect("usage: see the file header");
    let [seconds, rounds] = &args[1..split] else {
        panic!("usage: bench_weaviate <seconds per round> <rounds> -- <orca command...>");
    };
    let per_round = Duration::from_secs(seconds.parse().expect("seconds"));
    let rounds: usize = rounds.parse().expect("rounds");
    let fake = fake_weaviate::FakeWeaviate::start();

    let mut command = tokio::process::Command::new(&args[split + 1]);
    command
        .args(&args[split + 2..])
        .env("WEAVIATE_URL", fake.url())
        .env("WEAVIATE_API_KEY", fake_weaviate::ADMIN_KEY)
        .env("BENCH_VECTORIZER_KEY", fake_weaviate::VECTORIZER_KEY);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot start orca");
    let client = ().serve(transport).await.expect("MCP handshake failed");
    let arguments = json!({"collection_name": "Article", "query": "apple", "limit": 3,
                           "return_properties": ["title", "body"], "return_metadata": ["id", "score"]});
    let params = CallToolRequestParams::new("weaviate-query-hybrid")
        .with_arguments(arguments.as_object().unwrap().clone());
    for _ in 0..200 {
        let result = client.call_tool(params.clone()).await.expect("call failed");
        assert_ne!(result.is_error, Some(true), "the tool failed: {result:?}");
    }
    let query = fake.graphql_queries().pop().expect("orca sent no GraphQL query");
    let body = json!({ "query": query });
    let http = reqwest::Client::new();
    let raw = || async {
        let response = http
            .post(format!("{}/v1/graphql", fake.url()))
            .bearer_auth(fake_weaviate::ADMIN_KEY)
            .header("X-OpenAI-Api-Key", fake_weaviate::VECTORIZER_KEY)
            .json(&body)
            .send()
            .await
            .expect("raw call failed");
        let answer: serde_json::Value = response.json().await.expect("raw answer");
        assert!(answer.get("errors").is_none(), "{answer}");
    };
    for _ in 0..200 {
        raw().await;
    }

    let (mut all_raw, mut all_orca) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let mut latencies = Vec::new();
        let deadline = Instant::now() + per_round;
        while Instant::now() < deadline {
            let started = Instant::now();
            raw().await;
            latencies.push(started.elapsed());
        }
        let raw_p50 = p50(&mut latencies);
        let raw_calls = latencies.len();
        all_raw.extend(latencies);
        let mut latencies = Vec::new();
        let deadline = Instant::now() + per_round;
        while Instant::now() < deadline {
            let started = Instant::now();
            client.call_tool(params.clone()).await.expect("call failed");
            latencies.push(started.elapsed());
        }
        let orca_p50 = p50(&mut latencies);
        println!(
            "round {round}: raw GraphQL p50 {:.0} us ({raw_calls} calls)  via orca p50 {:.0} us ({} calls)",
            raw_p50.as_secs_f64() * 1e6,
            orca_p50.as_secs_f64() * 1e6,
            latencies.len()
        );
        all_orca.extend(latencies);
    }
    let raw_p50 = p50(&mut all_raw).as_secs_f64() * 1e6;
    let orca_p50 = p50(&mut all_orca).as_secs_f64() * 1e6;
    println!(
        "all rounds: raw GraphQL p50 {raw_p50:.0} us, weaviate-query-hybrid via orca p50 {orca_p50:.0} us: added {:.0} us, ratio {:.2}",
        orca_p50 - raw_p50,
        orca_p50 / raw_p50
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
    client.cancel().await.expect("cannot close the client");
}
