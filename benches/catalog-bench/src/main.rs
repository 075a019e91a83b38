//! The tool-search benchmark behind `scripts/bench-catalog`: recall of the lexical ranking on
//! the shipped catalog and queries, tokens of the whole catalog against one search answer, and
//! the search latency on a 1,000-tool catalog; with `BENCH_CATALOG_EMBEDDINGS` (an
//! OpenAI-compatible base URL, `/v1` included) and `BENCH_CATALOG_MODEL`, also the recall of the
//! blend with that model at several weights (`model.rs`).
//!
//! It compiles orca's ranking files themselves (`src/catalog/{rank,synonyms,text,blend}.rs`), so
//! the numbers are those of the code the gateway runs, without building the whole gateway.
//!
//! Usage: `cargo run --release -p orca-catalog-bench -- benches/catalog`

#![allow(clippy::print_stdout, reason = "a benchmark prints its report")]

#[path = "../../../src/catalog/blend.rs"]
mod blend;
#[path = "../../../src/context/bm25.rs"]
#[allow(dead_code, reason = "the benchmark uses only the identifier splitting of this file")]
mod bm25;
mod model;
#[path = "../../../src/catalog/rank.rs"]
mod rank;
#[path = "../../../src/catalog/synonyms.rs"]
mod synonyms;
#[path = "../../../src/catalog/text.rs"]
mod text;
/// `text.rs` splits identifiers with the context ranker's `camel_humps`.
mod context {
    pub(crate) use super::bm25;
}

use std::time::Instant;

use rank::{Document, Lexical, best};
use serde_json::{Value, json};

/// The answer `search_tools` gives by default: this many tools with their full schemas.
const ANSWER_LIMIT: usize = 5;

/// Tokens estimated as characters / 4 (no tokenizer is a dependency).
fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let directory = std::env::args().nth(1).unwrap_or_else(|| "benches/catalog".to_owned());
    let tools: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(format!("{directory}/tools.json"))?)?;
    let queries: Vec<Value> = std::fs::read_to_string(format!("{directory}/queries.jsonl"))?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    let ids: Vec<String> = tools
        .iter()
        .map(|tool| format!("{}_{}", field(tool, "server"), field(tool, "name")))
        .collect();
    let listed: Vec<Value> = tools.iter().zip(&ids).map(|(tool, id)| listed(tool, id)).collect();
    let documents: Vec<Document> =
        tools.iter().zip(&ids).map(|(tool, id)| document(tool, id)).collect();

    let started = Instant::now();
    let lexical = Lexical::new(&documents);
    let build = started.elapsed();
    let verbose = std::env::var_os("BENCH_CATALOG_VERBOSE").is_some();
    println!(
        "catalog: {} tools from {} servers; {} queries",
        tools.len(),
        servers(&tools),
        queries.len()
    );
    let mut answer_tokens = Vec::new();
    for split in ["tune", "measure"] {
        let (mut total, mut at1, mut at5) = (0, 0, 0);
        for query in queries.iter().filter(|query| query["split"] == split) {
            let expected: Vec<&str> = query["expect"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let ranked = best(&lexical.scores(field(query, "query")), ANSWER_LIMIT, |_| true);
            let names: Vec<&str> = ranked.iter().map(|(index, _)| ids[*index].as_str()).collect();
            total += 1;
            if names.first().is_some_and(|first| expected.contains(first)) {
                at1 += 1;
            }
            if names.iter().any(|name| expected.contains(name)) {
                at5 += 1;
            } else if verbose && split == "tune" {
                println!("  miss {}: {:?} -> {:?}", field(query, "query"), expected, names);
            }
            let answer = json!({ "tools": ranked.iter().map(|(index, _)| listed[*index].clone()).collect::<Vec<_>>() });
            answer_tokens.push(tokens(&answer.to_string()));
        }
        println!(
            "{split}: {total} queries, recall@1 {:.3}, recall@5 {:.3}",
            at1 as f64 / total as f64,
            at5 as f64 / total as f64
        );
    }
    if let Ok(base_url) = std::env::var("BENCH_CATALOG_EMBEDDINGS") {
        let model = std::env::var("BENCH_CATALOG_MODEL").unwrap_or_default();
        let texts: Vec<String> = tools
            .iter()
            .zip(&ids)
            .map(|(tool, id)| {
                let title = tool.get("title").and_then(Value::as_str);
                blend::tool_text(id, title, field(tool, "description"))
            })
            .collect();
        let measured: Vec<model::Query<'_>> = queries
            .iter()
            .map(|query| model::Query {
                split: field(query, "split"),
                text: field(query, "query"),
                lexical: lexical.scores(field(query, "query")),
                expected: query["expect"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect(),
            })
            .collect();
        model::run(&base_url, &model, &texts, &ids, &measured)?;
    }
    let catalog_tokens = tokens(&json!({ "tools": listed }).to_string());
    answer_tokens.sort_unstable();
    let median = answer_tokens[answer_tokens.len() / 2];
    let largest = answer_tokens[answer_tokens.len() - 1];
    println!(
        "tokens (characters / 4): full tools/list {catalog_tokens}; one search answer ({ANSWER_LIMIT} tools) median {median} ({:.1}%), largest {largest} ({:.1}%)",
        100.0 * median as f64 / catalog_tokens as f64,
        100.0 * largest as f64 / catalog_tokens as f64
    );
    println!("index build: {:.2} ms for {} tools", build.as_secs_f64() * 1e3, documents.len());

    // 1,000 tools: the catalog, then renamed copies of it (server `<server>2`) until 1,000.
    let mut thousand = documents.clone();
    let mut copy = 0;
    while thousand.len() < 1000 {
        let mut document = documents[copy % documents.len()].clone();
        document.server = format!("{}2", document.server);
        document.name = format!("{}2_{}", document.server, document.name);
        thousand.push(document);
        copy += 1;
    }
    let started = Instant::now();
    let lexical = Lexical::new(&thousand);
    let build = started.elapsed();
    let mut samples = Vec::new();
    for _ in 0..20 {
        for query in &queries {
            let started = Instant::now();
            let ranked = best(&lexical.scores(field(query, "query")), ANSWER_LIMIT, |_| true);
            std::hint::black_box(ranked);
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    samples.sort_by(f64::total_cmp);
    let at = |quantile: f64| samples[((samples.len() - 1) as f64 * quantile) as usize];
    println!(
        "search on {} tools: p50 {:.0} µs, p95 {:.0} µs, p99 {:.0} µs, max {:.0} µs ({} searches); index build {:.1} ms",
        thousand.len(),
        at(0.5),
        at(0.95),
        at(0.99),
        samples[samples.len() - 1],
        samples.len(),
        build.as_secs_f64() * 1e3
    );
    Ok(())
}

fn field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn servers(tools: &[Value]) -> usize {
    tools.iter().map(|tool| field(tool, "server")).collect::<std::collections::BTreeSet<_>>().len()
}

/// A tool as `tools/list` shows it, under its gateway name.
fn listed(tool: &Value, id: &str) -> Value {
    let mut listed = json!({ "name": id, "description": field(tool, "description"), "inputSchema": tool["inputSchema"] });
    if let Some(title) = tool.get("title") {
        listed["title"] = title.clone();
    }
    listed
}

fn document(tool: &Value, id: &str) -> Document {
    let schema = tool["inputSchema"].as_object().cloned().unwrap_or_default();
    Document::from_schema(
        field(tool, "server"),
        id,
        tool.get("title").and_then(Value::as_str),
        field(tool, "description"),
        &schema,
    )
}
