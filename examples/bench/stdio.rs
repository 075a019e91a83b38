//! What the stdio benchmarks (`bench_completion`, `bench_proxy`) share: the command line split
//! at `--`, one client connection to an MCP server started as a child process, `concurrency`
//! callers repeating one request until the time is up, and the result line.

use std::future::Future;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;

/// The benchmark's own arguments (between the program name and `--`) and the server's command
/// (after `--`).
pub(crate) fn split(args: &[String]) -> (&[String], &[String]) {
    let split = args.iter().position(|arg| arg == "--").expect("usage: see the file header");
    (&args[1..split], &args[split + 1..])
}

/// `seconds` and `concurrency` as numbers.
pub(crate) fn load(seconds: &str, concurrency: &str) -> (u64, usize) {
    (seconds.parse().expect("seconds"), concurrency.parse().expect("concurrency"))
}

/// A client connected over stdio to `command`, started as a child process whose stderr is
/// dropped.
pub(crate) async fn connect(command: &[String]) -> RunningService<RoleClient, ()> {
    let mut child = tokio::process::Command::new(&command[0]);
    child.args(&command[1..]);
    let (transport, _) = TokioChildProcess::builder(child)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("cannot start the server");
    ().serve(transport).await.expect("MCP handshake failed")
}

/// `concurrency` callers each awaiting `request()` in a loop for `seconds`; then one line of
/// `<unit>s/s`, p50 and p99 of the latency, and the count.
pub(crate) async fn measure<F, Fut>(unit: &str, seconds: u64, concurrency: usize, request: F)
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let request = request.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let started = Instant::now();
                    request().await;
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
        "{unit}s/s {:.0}  p50 {:.0} us  p99 {:.0} us  {unit}s {}",
        latencies.len() as f64 / elapsed.as_secs_f64(),
        percentile(0.50).as_secs_f64() * 1e6,
        percentile(0.99).as_secs_f64() * 1e6,
        latencies.len()
    );
}
