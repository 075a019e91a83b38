//! Benchmark of the client SDK (`scripts/bench-client` runs it), three figures in one run:
//!
//! 1. converting 1,000 tools for each provider, against deep-copying their schemas;
//! 2. a tool call through `McpClient` in one session, against rmcp's bare client on the same
//!    server (what the SDK adds per call);
//! 3. one `orca call` round trip over stdio (a process that starts the server, lists its tools,
//!    calls one and exits), against the same done directly with rmcp in this process.
//!
//! `bench_client <orca binary> <server command> [args...]` (the server must have an `echo`
//! tool taking `{"text": ...}`, as the test upstream does).

#![allow(clippy::print_stdout, reason = "the result lines are this program's output")]

use std::time::{Duration, Instant};

use orca::client::{McpClient, Provider, ToolInfo};
use rmcp::model::{CallToolRequestParams, Tool};
use serde_json::{Value, json};

/// Schemas of the shapes servers list, from plain to awkward.
fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "QueryArgs", "type": "object",
            "properties": {"sql": {"type": "string", "description": "The statement."},
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
                "dry_run": {"type": "boolean", "default": true}},
            "required": ["sql"]}),
        json!({"type": "object", "$defs": {"Address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}, "required": ["street", "city"]}},
            "properties": {"shipping": {"$ref": "#/$defs/Address"}, "billing": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}},
            "required": ["shipping"]}),
        json!({"type": "object", "properties": {"mode": {"type": "string", "enum": ["fast", "safe"]}, "level": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["mode", "level"]}),
        json!({"type": "object"}),
        json!({"type": "object", "$defs": {"Node": {"type": "object", "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["label"]}},
            "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"]}),
        json!({"anyOf": [{"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}, {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}]}),
        json!({"type": "object", "properties": {"server": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}, "required": ["host", "port"]}}, "required": ["server"]}),
    ]
}

fn thousand_tools() -> Vec<ToolInfo> {
    let schemas = schemas();
    (0..1000)
        .map(|index| {
            let Value::Object(schema) = schemas[index % schemas.len()].clone() else {
                unreachable!()
            };
            let name = if index % 3 == 0 {
                format!("server.tool.{index}")
            } else {
                format!("tool_{index}")
            };
            ToolInfo::from_tool(&Tool::new(name, "A tool of the benchmark.", schema))
        })
        .collect()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn conversion() {
    let tools = thousand_tools();
    let rounds = 20;
    let copy = median(
        (0..rounds)
            .map(|_| {
                let started = Instant::now();
                let copies: Vec<Value> =
                    tools.iter().map(|tool| Value::Object(tool.input_schema.clone())).collect();
                std::hint::black_box(copies);
                started.elapsed()
            })
            .collect(),
    );
    for provider in [Provider::OpenAi, Provider::Anthropic, Provider::Gemini] {
        let time = median(
            (0..rounds)
                .map(|_| {
                    let started = Instant::now();
                    std::hint::black_box(orca::client::convert(provider, &tools));
                    started.elapsed()
                })
                .collect(),
        );
        println!(
            "convert 1000 tools for {:<9} {:>8.2} ms (median of {rounds}), {:>5.1}x a deep copy of the schemas ({:.2} ms)",
            provider.as_str(),
            time.as_secs_f64() * 1e3,
            time.as_secs_f64() / copy.as_secs_f64(),
            copy.as_secs_f64() * 1e3,
        );
    }
}

async fn session_calls(server: &[String]) {
    let calls = 2000;
    let client = McpClient::stdio(&server[0], &server[1..]).await.expect("server starts");
    let bare = stdio::connect(server).await;
    let arguments = json!({"text": "hello"});
    let Value::Object(object) = arguments.clone() else { unreachable!() };
    for _ in 0..100 {
        client.call_tool("echo", arguments.clone()).await.expect("call");
        bare.call_tool(CallToolRequestParams::new("echo").with_arguments(object.clone()))
            .await
            .expect("call");
    }
    // Alternate blocks so that both see the same machine noise.
    let (mut sdk, mut raw) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..10 {
        let started = Instant::now();
        for _ in 0..calls / 10 {
            client.call_tool("echo", arguments.clone()).await.expect("call");
        }
        sdk += started.elapsed();
        let started = Instant::now();
        for _ in 0..calls / 10 {
            bare.call_tool(CallToolRequestParams::new("echo").with_arguments(object.clone()))
                .await
                .expect("call");
        }
        raw += started.elapsed();
    }
    let per = |total: Duration| total.as_secs_f64() * 1e6 / f64::from(calls);
    println!(
        "tool call in one session: McpClient {:>7.1} us, bare rmcp {:>7.1} us per call ({calls} each), {:.2}x",
        per(sdk),
        per(raw),
        sdk.as_secs_f64() / raw.as_secs_f64()
    );
}

async fn round_trips(orca: &str, server: &[String]) {
    let runs = 20;
    let line = server.join(" ");
    let (mut via_orca, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let started = Instant::now();
        let output = std::process::Command::new(orca)
            .args(["call", "echo", "--args", r#"{"text": "hello"}"#, "--stdio", &line])
            .env("ORCA_LOG", "warn")
            .output()
            .expect("orca runs");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        via_orca.push(started.elapsed());

        let started = Instant::now();
        let bare = stdio::connect(server).await;
        bare.list_all_tools().await.expect("tools/list");
        let arguments = serde_json::Map::from_iter([("text".to_owned(), json!("hello"))]);
        bare.call_tool(CallToolRequestParams::new("echo").with_arguments(arguments))
            .await
            .expect("call");
        bare.cancel().await.expect("close");
        direct.push(started.elapsed());
    }
    let (via_orca, direct) = (median(via_orca), median(direct));
    println!(
        "one call over stdio, process to exit: `orca call` {:>7.1} ms, direct rmcp {:>7.1} ms (median of {runs}), {:.2}x",
        via_orca.as_secs_f64() * 1e3,
        direct.as_secs_f64() * 1e3,
        via_orca.as_secs_f64() / direct.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [orca, server @ ..] = args.as_slice() else {
        panic!("usage: bench_client <orca binary> <server command> [args...]");
    };
    assert!(!server.is_empty(), "usage: bench_client <orca binary> <server command> [args...]");
    conversion();
    session_calls(server).await;
    round_trips(orca, server).await;
}

#[path = "bench/stdio.rs"]
#[allow(dead_code, reason = "this benchmark needs only the connection")]
mod stdio;
