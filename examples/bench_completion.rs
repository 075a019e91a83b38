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

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (own, command) = stdio::split(&args);
    let [seconds, concurrency, prompt, argument, value] = own else {
        panic!(
            "usage: bench_completion <seconds> <concurrency> <prompt> <argument> <value> -- <command...>"
        );
    };
    let (seconds, concurrency) = stdio::load(seconds, concurrency);
    let client = stdio::connect(command).await;
    // Warm up, and check that completions come back at all.
    for _ in 0..200 {
        let info = client
            .complete_prompt_argument(prompt.clone(), argument.clone(), value.clone(), None)
            .await
            .expect("completion failed");
        assert!(!info.values.is_empty(), "no completions for {prompt}.{argument}={value}");
    }
    let peer = client.peer().clone();
    let (prompt, argument, value) = (prompt.clone(), argument.clone(), value.clone());
    stdio::measure("request", seconds, concurrency, move || {
        let peer = peer.clone();
        let (prompt, argument, value) = (prompt.clone(), argument.clone(), value.clone());
        async move {
            peer.complete_prompt_argument(prompt, argument, value, None)
                .await
                .expect("completion failed");
        }
    })
    .await;
    client.cancel().await.expect("cannot close the client");
}

#[path = "bench/stdio.rs"]
mod stdio;
