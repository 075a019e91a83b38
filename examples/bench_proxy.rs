//! Benchmark of the external-server proxy: one MCP stdio server started as a child process,
//! one shared client connection, `concurrency` callers issuing the same tool call in a loop for
//! `seconds`. Run it once against the upstream itself and once against `orca serve --stdio`
//! proxying that upstream to see what orca adds (`scripts/bench-proxy` does both).
//!
//! `bench_proxy <seconds> <concurrency> <tool> <arguments-json> -- <command> [args...]`
//!
//! Prints one line: calls/s, p50 and p99 of the client-side latency, and the call count.
//!
//! `bench_proxy relay -- <command> [args...]` is the floor of any stdio proxy: a process that
//! starts `command` and copies bytes between its own stdin/stdout and the child's, with a
//! blocking thread each way, reading nothing of what passes. Put in the middle, it shows what
//! two more pipe crossings and one more process cost, before any proxy does any work.

#![allow(clippy::print_stdout, reason = "the result line is this program's output")]

use rmcp::model::CallToolRequestParams;

/// Copy bytes both ways between this process and `command` until either side closes.
fn relay(command: &[String]) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start the server");
    let mut child_in = child.stdin.take().expect("piped");
    let mut child_out = child.stdout.take().expect("piped");
    let down = std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut child_in);
    });
    let _ = std::io::copy(&mut child_out, &mut std::io::stdout().lock());
    let _ = down.join();
    let _ = child.kill();
    let _ = child.wait();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("relay") {
        let split = args.iter().position(|arg| arg == "--").expect("usage: see the file header");
        return relay(&args[split + 1..]);
    }
    tokio::runtime::Runtime::new().expect("a runtime").block_on(bench(args));
}

async fn bench(args: Vec<String>) {
    let (own, command) = stdio::split(&args);
    let [seconds, concurrency, tool, arguments] = own else {
        panic!(
            "usage: bench_proxy <seconds> <concurrency> <tool> <arguments-json> -- <command...>"
        );
    };
    let (seconds, concurrency) = stdio::load(seconds, concurrency);
    let arguments: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(arguments).expect("arguments must be a JSON object");
    let client = stdio::connect(command).await;
    let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments);
    // Warm up: the first calls pay for connections and caches.
    for _ in 0..200 {
        let result = client.call_tool(params.clone()).await.expect("call failed");
        assert_ne!(result.is_error, Some(true), "the tool failed: {result:?}");
    }
    let peer = client.peer().clone();
    stdio::measure("call", seconds, concurrency, move || {
        let peer = peer.clone();
        let params = params.clone();
        async move {
            peer.call_tool_once(params).await.expect("call failed");
        }
    })
    .await;
    client.cancel().await.expect("cannot close the client");
}

#[path = "bench/stdio.rs"]
mod stdio;
