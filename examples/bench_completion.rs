//! Benchmark of completion passthrough: one MCP stdio server started as a child process, one
//! shared client connection, `concurrency` callers asking `completion/complete` for one prompt
//! argument in a loop for `seconds`. Run it once against the test upstream itself and once
//! against `orca serve --stdio` relaying to that upstream to see what orca adds
//! (`scripts/bench-completion` does both, in alternation).
//!
//! `bench_completion <seconds> <concurrency> <prompt> <argument> <value> -- <command> [args...]`
//!
//! Prints one line: requests/s, p50 and p99 of the client-side latency, and the request count.

#![allow(clippy::print_stdout, reason = "the result line is this program's output")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let split = args.iter().position(|arg| arg == "--").expect("usage: see the file header");
    let [seconds, concurrency, prompt, argument, value] = &args[1..split] else {
        panic!(
            "usage: bench_completion <seconds> <concurrency> <prompt> <argument> <value> -- <command...>"
        );
    };
    let seconds: u64 = seconds.parse().expect("seconds");
    let concurrency: usize = concurrency.parse().expect("concurrency");
    let mut command = tokio::process::Command::new(&args[split + 1]);
    command.args(&args[split + 2..]);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot start the server");
    let client = ().serve(transport).await.expect("MCP handshake failed");
    // Warm up, and check that completions come back at all.
    for _ in 0..200 {
        let info = client
            .complete_prompt_argument(prompt.clone(), argument.clone(), value.clone(), None)
            .await
            .expect("completion failed");
        assert!(!info.values.is_empty(), "no completions for {prompt}.{argument}={value}");
    }
    let peer = Arc::new(client.peer().clone());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let peer = peer.clone();
            let (prompt, argument, value) = (prompt.clone(), argument.clone(), value.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let started = Instant::now();
                    peer.complete_prompt_argument(
                        prompt.clone(),
                        argument.clone(),
                        value.clone(),
                        None,
                    )
                    .await
                    .expect("completion failed");
                    latencies.push(started.elapsed());
                }
                latencies
            })
        })
        .collect();
    let started = Instant::now();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.expect("worker panicked"));
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let percentile =
        |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "requests/s {:.0}  p50 {:.0} us  p99 {:.0} us  requests {}",
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(0.50).as_secs_f64() * 1e6,
        percentile(0.99).as_secs_f64() * 1e6,
        latencies.len()
    );
    client.cancel().await.expect("cannot close the client");
}
