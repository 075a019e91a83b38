//! The real-model part of the benchmark: every tool and query embedded through an
//! OpenAI-compatible `/v1/embeddings` (the endpoint `scripts/bench-catalog` starts), then the
//! blend of `src/catalog/blend.rs` at several weights, per split, and the weight the `tune`
//! half chooses.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

use crate::blend::blend;
use crate::rank::best;

/// Texts a request (the endpoint pads each request to its longest text and pools over the
/// attention mask, so a text's vector does not depend on its batch).
const BATCH: usize = 32;

/// The weights measured: 0 (the lexical ranking) to 1 by tenths.
const WEIGHTS: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// The default the gateway had before this measurement: a tie on the tune half goes to the
/// weight nearest it.
const PREVIOUS_DEFAULT: f64 = 0.5;

type Error = Box<dyn std::error::Error>;

/// One query of a split: its text's vector, its lexical scores and the ids that answer it.
pub(crate) struct Query<'a> {
    pub(crate) split: &'a str,
    pub(crate) text: &'a str,
    pub(crate) lexical: Vec<f64>,
    pub(crate) expected: Vec<&'a str>,
}

/// Embed `tools` (their texts) and `queries` at `base_url` (including `/v1`) with `model`, and
/// print recall@1 and @5 per split and weight, then the weight the tune half chooses.
///
/// # Errors
///
/// The endpoint unreachable or answering something else than one vector per text.
pub(crate) fn run(
    base_url: &str,
    model: &str,
    tools: &[String],
    ids: &[String],
    queries: &[Query<'_>],
) -> Result<(), Error> {
    let started = std::time::Instant::now();
    let tool_vectors = embed(base_url, model, tools)?;
    let texts: Vec<String> = queries.iter().map(|query| query.text.to_owned()).collect();
    let query_vectors = embed(base_url, model, &texts)?;
    println!(
        "model {model} at {base_url}: {} tools and {} queries embedded in {:.1} s, {} dimensions",
        tools.len(),
        queries.len(),
        started.elapsed().as_secs_f64(),
        tool_vectors.first().map_or(0, Vec::len)
    );
    let tool_refs: Vec<Option<&[f32]>> = tool_vectors.iter().map(|v| Some(&v[..])).collect();
    let mut tune_figures = Vec::new();
    println!("| weight | tune recall@1 | tune recall@5 | measure recall@1 | measure recall@5 |");
    println!("|---|---|---|---|---|");
    for weight in WEIGHTS {
        let mut row = Vec::new();
        for split in ["tune", "measure"] {
            let (mut total, mut at1, mut at5) = (0usize, 0usize, 0usize);
            for (query, vector) in queries.iter().zip(&query_vectors) {
                if query.split != split {
                    continue;
                }
                let scores = blend(&query.lexical, vector, &tool_refs, weight);
                let ranked = best(&scores, 5, |_| true);
                let names: Vec<&str> =
                    ranked.iter().map(|(index, _)| ids[*index].as_str()).collect();
                total += 1;
                at1 += usize::from(names.first().is_some_and(|name| query.expected.contains(name)));
                at5 += usize::from(names.iter().any(|name| query.expected.contains(name)));
            }
            row.push((at1 as f64 / total as f64, at5 as f64 / total as f64));
        }
        tune_figures.push((weight, row[0]));
        println!(
            "| {weight:.1} | {:.3} | {:.3} | {:.3} | {:.3} |",
            row[0].0, row[0].1, row[1].0, row[1].1
        );
    }
    // Chosen on the tune half alone: the most queries found at 1 and at 5 together, a tie
    // going to the weight nearest the previous default.
    let chosen = tune_figures
        .iter()
        .max_by(|(wa, (a1, a5)), (wb, (b1, b5))| {
            (a1 + a5)
                .total_cmp(&(b1 + b5))
                .then((wb - PREVIOUS_DEFAULT).abs().total_cmp(&(wa - PREVIOUS_DEFAULT).abs()))
        })
        .map(|(weight, _)| *weight)
        .unwrap_or(PREVIOUS_DEFAULT);
    println!(
        "weight chosen on the tune half (most of recall@1 + recall@5, ties to the nearest of {PREVIOUS_DEFAULT}): {chosen:.1}"
    );
    Ok(())
}

/// One vector per text, `BATCH` texts a request.
fn embed(base_url: &str, model: &str, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(BATCH) {
        let answer =
            post(&format!("{base_url}/embeddings"), &json!({"model": model, "input": batch}))?;
        let data = answer["data"].as_array().ok_or("an answer without `data`")?;
        if data.len() != batch.len() {
            return Err(format!("{} vectors for {} texts", data.len(), batch.len()).into());
        }
        let mut found: Vec<(u64, Vec<f32>)> = data
            .iter()
            .enumerate()
            .map(|(position, item)| {
                let index = item["index"].as_u64().unwrap_or(position as u64);
                let vector = item["embedding"]
                    .as_array()
                    .map(|numbers| {
                        numbers.iter().filter_map(Value::as_f64).map(|x| x as f32).collect()
                    })
                    .unwrap_or_default();
                (index, vector)
            })
            .collect();
        found.sort_by_key(|(index, _)| *index);
        vectors.extend(found.into_iter().map(|(_, vector)| vector));
    }
    Ok(vectors)
}

/// `POST` `body` to a plain `http://host:port/path` and read the JSON answer (HTTP/1.0-style:
/// the server closes the connection after it, as Python's `http.server` does).
fn post(url: &str, body: &Value) -> Result<Value, Error> {
    let rest = url.strip_prefix("http://").ok_or("only http:// endpoints")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = TcpStream::connect(host)?;
    let body = body.to_string();
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let answer = String::from_utf8(answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").ok_or("an answer without a body")?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        return Err(format!("the endpoint answered HTTP {status}").into());
    }
    Ok(serde_json::from_str(body)?)
}
