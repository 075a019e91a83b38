//! Prometheus metrics: calls by tool and status, a latency histogram per tool, unknown-tool
//! calls, and the tracking pipeline's queue depth and spill counters. `/metrics` answers anyone,
//! so with `http.health_details: counts` (the default) calls and latencies are summed over the
//! tools and no tool is named.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::tracking::Tracker;

/// Upper bounds of the latency buckets, in seconds: fine below a millisecond, where the
/// gateway's own overhead lives, coarse above it, where tools spend their time.
const BUCKETS: [f64; 17] = [
    0.00005, 0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.1, 0.25, 1.0, 5.0, 30.0,
];

/// Per-bucket counts (one extra slot for `+Inf`), with their sum and count.
#[derive(Debug, Default, Clone, Copy)]
struct Histogram {
    buckets: [u64; BUCKETS.len() + 1],
    sum_seconds: f64,
    count: u64,
}

impl Histogram {
    fn add(&mut self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets) {
            *mine += theirs;
        }
        self.sum_seconds += other.sum_seconds;
        self.count += other.count;
    }

    fn observe(&mut self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let slot = BUCKETS.iter().position(|bound| seconds <= *bound).unwrap_or(BUCKETS.len());
        self.buckets[slot] += 1;
        self.sum_seconds += seconds;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (index, bound) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[index];
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {cumulative}");
        }
        cumulative += self.buckets[BUCKETS.len()];
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {cumulative}");
        let labels = labels.trim_end_matches(',');
        let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{labels} {}", self.sum_seconds);
        let _ = writeln!(out, "{name}_count{labels} {}", self.count);
    }
}

#[derive(Debug, Default)]
struct ToolStats {
    by_status: BTreeMap<&'static str, u64>,
    latency: Histogram,
}

#[derive(Debug, Default)]
pub(crate) struct Metrics {
    tools: Mutex<BTreeMap<String, ToolStats>>,
    /// Whole MCP HTTP requests, from the first byte handled to the response.
    http_requests: Mutex<Histogram>,
    unknown_tool: AtomicU64,
}

impl Metrics {
    pub(crate) fn observe(&self, tool: &str, status: &'static str, elapsed: Duration) {
        let mut tools = self.tools.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let stats = match tools.get_mut(tool) {
            Some(stats) => stats,
            None => tools.entry(tool.to_owned()).or_default(),
        };
        *stats.by_status.entry(status).or_default() += 1;
        stats.latency.observe(elapsed);
    }

    pub(crate) fn observe_http_request(&self, elapsed: Duration) {
        self.http_requests.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).observe(elapsed);
    }

    pub(crate) fn unknown_tool(&self) {
        self.unknown_tool.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every metric; tool calls by tool when `by_tool`, else
    /// summed over the tools (no tool named).
    pub(crate) fn render(&self, tracker: &Tracker, by_tool: bool) -> String {
        let mut out = String::with_capacity(4096);
        let tools = self.tools.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if by_tool {
            render_by_tool(&mut out, &tools);
        } else {
            render_summed(&mut out, &tools);
        }
        drop(tools);
        out.push_str(
            "# HELP orca_http_request_duration_seconds Time to answer one MCP request over HTTP, server side.\n\
             # TYPE orca_http_request_duration_seconds histogram\n",
        );
        let http_requests =
            *self.http_requests.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        http_requests.render(&mut out, "orca_http_request_duration_seconds", "route=\"/mcp\",");
        let _ = writeln!(
            out,
            "# HELP orca_unknown_tool_calls_total Calls naming a tool that does not exist or is not allowed.\n\
             # TYPE orca_unknown_tool_calls_total counter\norca_unknown_tool_calls_total {}",
            self.unknown_tool.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP orca_tracking_enabled Whether execution tracking is on.\n# TYPE orca_tracking_enabled gauge\norca_tracking_enabled {}",
            u8::from(tracker.is_enabled())
        );
        let _ = writeln!(
            out,
            "# HELP orca_tracking_queue_depth Execution records waiting for the writer.\n# TYPE orca_tracking_queue_depth gauge\norca_tracking_queue_depth {}",
            tracker.queue_depth()
        );
        let _ = writeln!(
            out,
            "# HELP orca_tracking_spill_pending Records in the spill file waiting for the database.\n# TYPE orca_tracking_spill_pending gauge\norca_tracking_spill_pending {}",
            tracker.spill_pending()
        );
        if let Some(stats) = tracker.stats() {
            let counters = [
                (
                    "orca_tracking_spilled_records_total",
                    "Records written to the spill file.",
                    &stats.spilled_total,
                ),
                (
                    "orca_tracking_replayed_records_total",
                    "Spilled records replayed into the database.",
                    &stats.replayed_total,
                ),
                (
                    "orca_tracking_written_records_total",
                    "Records written to the database directly.",
                    &stats.written_total,
                ),
            ];
            for (name, help, counter) in counters {
                let _ = writeln!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                    counter.load(Ordering::Relaxed)
                );
            }
            let _ = writeln!(
                out,
                "# HELP orca_tracking_database_up Whether the last write to the tracking database succeeded.\n# TYPE orca_tracking_database_up gauge\norca_tracking_database_up {}",
                u8::from(stats.database_healthy.load(Ordering::Relaxed))
            );
        }
        out
    }
}

/// Calls and latencies of each tool, labelled with its name.
fn render_by_tool(out: &mut String, tools: &BTreeMap<String, ToolStats>) {
    out.push_str("# HELP orca_tool_calls_total Tool calls by tool and status.\n# TYPE orca_tool_calls_total counter\n");
    for (tool, stats) in tools {
        for (status, count) in &stats.by_status {
            let _ = writeln!(
                out,
                "orca_tool_calls_total{{tool=\"{}\",status=\"{status}\"}} {count}",
                escape(tool)
            );
        }
    }
    out.push_str(
        "# HELP orca_tool_call_duration_seconds Time spent in the gateway per tool call.\n\
         # TYPE orca_tool_call_duration_seconds histogram\n",
    );
    for (tool, stats) in tools {
        stats.latency.render(
            out,
            "orca_tool_call_duration_seconds",
            &format!("tool=\"{}\",", escape(tool)),
        );
    }
}

/// Calls by status and one latency histogram, summed over the tools.
fn render_summed(out: &mut String, tools: &BTreeMap<String, ToolStats>) {
    let mut by_status: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut latency = Histogram::default();
    for stats in tools.values() {
        for (status, count) in &stats.by_status {
            *by_status.entry(status).or_default() += count;
        }
        latency.add(&stats.latency);
    }
    out.push_str("# HELP orca_tool_calls_total Tool calls by status, over every tool.\n# TYPE orca_tool_calls_total counter\n");
    for (status, count) in by_status {
        let _ = writeln!(out, "orca_tool_calls_total{{status=\"{status}\"}} {count}");
    }
    out.push_str(
        "# HELP orca_tool_call_duration_seconds Time spent in the gateway per tool call, over every tool.\n\
         # TYPE orca_tool_call_duration_seconds histogram\n",
    );
    latency.render(out, "orca_tool_call_duration_seconds", "");
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
