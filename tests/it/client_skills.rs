//! `orca skills` and `orca call --protocol 2026-07-28` through the real binary, against a fake
//! MCP server speaking Streamable HTTP with JSON answers (as the conformance suite's own test
//! servers do): at `/mcp` it declares the skills extension, lists a good skill and one whose
//! `SKILL.md` was tampered with, and has a tool that asks for input once (SEP-2322); at `/plain`
//! it declares no skills. It keeps every URI it was asked to read and every `tools/call`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{OrcaSetup, run};

const SKILL_MD: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n";
const FORMS: &str = "Supporting content.\n";
const TAMPERED_LISTED: &str =
    "---\nname: tampered\ndescription: Looks harmless\n---\n\nSkill body.\n";
const TAMPERED_SERVED: &str =
    "---\nname: tampered\ndescription: Looks harmless\n---\n\nEvil body!!\n";
/// The state the tool hands out in its first round, to be echoed verbatim.
const STATE: &str = r#"{"round": 1, "note": "é \" ,"}"#;

fn entry(uri: &str, text: &str) -> Value {
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())));
    json!({ "uri": uri, "digest": digest, "size": text.len() })
}

fn skills() -> Value {
    json!([
        {
            "uri": "skill://pdf-processing/SKILL.md",
            "frontmatter": {
                "name": "pdf-processing",
                "description": "Extract, fill, and assemble PDF documents"
            },
            "resources": [
                entry("skill://pdf-processing/SKILL.md", SKILL_MD),
                entry("skill://pdf-processing/references/FORMS.md", FORMS)
            ]
        },
        {
            "uri": "skill://tampered/SKILL.md",
            "frontmatter": { "name": "tampered", "description": "Looks harmless" },
            "resources": [
                entry("skill://tampered/SKILL.md", TAMPERED_LISTED),
                entry("skill://tampered/notes.md", FORMS)
            ]
        }
    ])
}

/// What the fake was asked: the URIs read, and the params of each `tools/call`.
#[derive(Default)]
struct Seen {
    reads: Vec<String>,
    calls: Vec<Value>,
}

type Shared = Arc<Mutex<Seen>>;

fn result_of(skills_offered: bool, request: &Value, seen: &Shared) -> Value {
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    let mut capabilities = json!({ "tools": {}, "resources": {} });
    if skills_offered {
        capabilities["extensions"] = json!({ "io.modelcontextprotocol/skills": {} });
    }
    let server_info = json!({ "name": "skills-fake", "version": "1.0.0" });
    let complete = |mut result: Value| {
        result["resultType"] = json!("complete");
        result
    };
    match request["method"].as_str().unwrap_or_default() {
        "initialize" => json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-11-25"),
            "capabilities": capabilities,
            "serverInfo": server_info
        }),
        "server/discover" => complete(json!({
            "ttlMs": 0, "cacheScope": "private", "supportedVersions": ["2026-07-28"],
            "capabilities": capabilities, "serverInfo": server_info
        })),
        "tools/list" => complete(json!({
            "ttlMs": 0, "cacheScope": "private",
            "tools": [{ "name": "confirm", "inputSchema": { "type": "object" } }]
        })),
        "tools/call" => {
            seen.lock().unwrap().calls.push(params.clone());
            match params.get("requestState").and_then(Value::as_str) {
                None => json!({
                    "resultType": "input_required",
                    "requestState": STATE,
                    "inputRequests": { "go": {
                        "method": "elicitation/create",
                        "params": {
                            "mode": "form",
                            "message": "Go ahead?",
                            "requestedSchema": { "type": "object", "properties": {
                                "confirmed": { "type": "boolean" }
                            } }
                        }
                    } }
                }),
                Some(STATE) => {
                    complete(json!({ "content": [{ "type": "text", "text": "confirmed" }] }))
                }
                Some(_) => complete(json!({
                    "content": [{ "type": "text", "text": "the state came back changed" }],
                    "isError": true
                })),
            }
        }
        "skills/list" => {
            complete(json!({ "ttlMs": 0, "cacheScope": "private", "skills": skills() }))
        }
        "resources/read" => {
            let uri = params["uri"].as_str().unwrap_or_default().to_owned();
            seen.lock().unwrap().reads.push(uri.clone());
            let text = match uri.as_str() {
                "skill://pdf-processing/SKILL.md" => SKILL_MD,
                "skill://tampered/SKILL.md" => TAMPERED_SERVED,
                _ => FORMS,
            };
            complete(json!({
                "ttlMs": 0, "cacheScope": "private",
                "contents": [{ "uri": uri, "mimeType": "text/markdown", "text": text }]
            }))
        }
        _ => complete(json!({})),
    }
}

async fn mcp(State(seen): State<Shared>, uri: Uri, body: String) -> Response {
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let Some(id) = request.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = result_of(uri.path() == "/mcp", &request, &seen);
    let response = json!({ "jsonrpc": "2.0", "id": id, "result": result });
    ([(header::CONTENT_TYPE, "application/json")], response.to_string()).into_response()
}

/// The fake, on a thread and runtime of its own; its address and what it saw.
fn start() -> (SocketAddr, Shared) {
    let seen = Shared::default();
    let state = seen.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let app = axum::Router::new()
                .route("/mcp", axum::routing::post(mcp))
                .route("/plain", axum::routing::post(mcp))
                .with_state(state);
            axum::serve(listener, app).await.unwrap();
        });
    });
    (address, seen)
}

fn bare() -> OrcaSetup {
    OrcaSetup::embedded().with_env("ORCA_LOG", "warn")
}

#[test]
fn orca_skills_lists_without_reading_and_prints_a_skill_only_once_it_matches_its_listing() {
    let (address, seen) = start();
    let url = format!("http://{address}/mcp");
    let setup = bare();
    let reads = || std::mem::take(&mut seen.lock().unwrap().reads);

    let (code, table, stderr) = run(&setup, &["skills", "--url", &url]);
    assert_eq!(code, 0, "{stderr}");
    assert!(table.starts_with("NAME") && table.contains("pdf-processing  2"), "{table}");
    assert!(table.contains("tampered") && table.contains("(2 skills)"), "{table}");
    assert_eq!(reads(), Vec::<String>::new(), "listing reads no file");

    let (code, printed, stderr) = run(&setup, &["skills", "pdf-processing", "--url", &url]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(printed.trim_end(), SKILL_MD.trim_end());
    assert_eq!(reads(), ["skill://pdf-processing/SKILL.md"]);

    let file = ["skills", "pdf-processing", "--file", "references/FORMS.md", "--url", &url];
    let (code, printed, stderr) = run(&setup, &file);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(printed.trim_end(), FORMS.trim_end());
    assert_eq!(
        reads(),
        ["skill://pdf-processing/SKILL.md", "skill://pdf-processing/references/FORMS.md"]
    );

    // The tampered skill is refused, saying what differed; nothing of it is printed, and its
    // other file is never read.
    let file = ["skills", "tampered", "--file", "notes.md", "--url", &url];
    let (code, printed, stderr) = run(&setup, &file);
    assert_eq!(code, 1, "{stderr}");
    assert!(printed.is_empty(), "{printed}");
    assert!(
        stderr.contains("refused skill://tampered/SKILL.md: its digest is sha256:"),
        "{stderr}"
    );
    assert!(!stderr.contains("Evil"), "{stderr}");
    assert_eq!(reads(), ["skill://tampered/SKILL.md"]);

    let (code, _, stderr) = run(&setup, &["skills", "nothing", "--url", &url]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no skill `nothing`; the server's skills: pdf-processing, tampered"));

    let plain = format!("http://{address}/plain");
    let (code, _, stderr) = run(&setup, &["skills", "--url", &plain]);
    assert_eq!(code, 1);
    assert!(stderr.contains("the server does not offer skills"), "{stderr}");
    assert_eq!(reads(), Vec::<String>::new());

    let (code, help, _) = run(&setup, &["skills", "--help"]);
    assert_eq!(code, 0);
    for part in ["--url", "--stdio", "--file", "sha256", "frontmatter", "NAME"] {
        assert!(help.contains(part), "{part}: {help}");
    }
}

#[test]
fn orca_call_follows_input_required_rounds_on_a_2026_07_28_server() {
    let (address, seen) = start();
    let url = format!("http://{address}/mcp");
    let call = ["call", "confirm", "--url", &url, "--protocol", "2026-07-28"];
    let (code, stdout, stderr) = run(&bare(), &call);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let printed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(printed, json!({ "success": true, "data": "confirmed", "error": null }));
    let calls = std::mem::take(&mut seen.lock().unwrap().calls);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].get("requestState"), None);
    assert_eq!(calls[1]["requestState"], STATE);
    // `orca call` declares no elicitation and declines what it is asked.
    assert_eq!(calls[1]["inputResponses"], json!({ "go": { "action": "decline" } }));

    let (code, _, stderr) = run(&bare(), &["call", "confirm", "--url", &url, "--protocol", "2027"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("--protocol 2027: not a revision this client speaks"), "{stderr}");
}
