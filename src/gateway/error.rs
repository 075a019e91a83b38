//! The one mapping from domain results and errors to the MCP wire: a success is structured
//! content plus the same JSON as one text block; a tool failure is an `isError` result carrying
//! the taxonomy's error object; an unknown (or forbidden) tool is JSON-RPC error -32602.
//!
//! # Design notes
//!
//! `error.rs` is the one mapping from domain results and `ToolError` to the wire; `respond.rs`
//! holds `error_response`, the JSON error answer of every HTTP route, which `http.rs`, `console.rs`
//! and `edge.rs` share so that they depend on it and not on one another (`http.rs` uses
//! `console.rs` and `edge.rs`, never the reverse); `auth.rs` checks bearer keys against SHA-256
//! hashes, and holds the caller of the `/mcp` request rmcp is handling (a task-local set by
//! `SharedMcp`) for `get_tool`; `visible.rs` keeps each access's visible tools (`ToolAccess`: its
//! verbs and its roles' shared `ToolPolicy`s) with the catalog state they were made from
//! (`ExternalServers::tools_state`: the name index and each server's catalog, replaced and never
//! changed in place), so `tools/list` matches no glob until the catalog changes; `oauth.rs` is orca
//! as an OAuth 2.1 resource server: `Verifier` finds the issuer's key set by discovery, caches it
//! (fetched again for an unknown `kid`, at most every `jwks_min_refresh`, one fetch shared by
//! concurrent requests, a cached key kept while the issuer is unreachable), checks a bearer JWT
//! with the one algorithm its key allows, `iss`, `aud`, `exp`/`nbf` and the required scopes (and,
//! through `dpop.rs`, a DPoP-bound token's presentation: the scheme, one proof of the token's key
//! for this method and URL, recent, naming the token, its `jti` not replayed), and writes the
//! `WWW-Authenticate` challenges and the protected-resource metadata, and keeps the issuer's
//! discovered metadata (`IssuerMetadata`: its authorization and token endpoints, for the console's
//! sign-in); `sign_in.rs` is the console's sign-in as the public client `console_client_id`
//! (authorization code with PKCE): the `sign_in` offer of `/console/api/session` and `POST
//! /console/api/token`, which checks the page's code, verifier and redirect URI (its own page),
//! exchanges them at the issuer's token endpoint and answers the access token only, a failed
//! exchange counting toward `AuthGate`'s throttle, whose limit also holds the address back;
//! `edge.rs`'s `AuthGate` sends a JWT-shaped bearer credential there and anything else to the keys,
//! and gives a token the verbs of its roles (`config/oauth.rs` reads `auth.oauth` and `auth.roles`,
//! `config/policy.rs` a role's `tools` list; `Principal::with_roles` gives a principal its roles'
//! verbs, tools and rate together; `http.rs`'s body check answers a `tools/call` past
//! `calls_per_minute` with 429 from `edge::CallLimiter`); `http.rs` builds the axum router
//! (Host/Origin guard, body limit, auth, `/mcp` (rmcp's service shared behind one `Arc`,
//! `SharedMcp`, so that a request clones none of its configuration; stateless, a plain
//! 2025-revision `tools/call` goes to `direct.rs` instead, which decodes it straight into its
//! params, runs `Gateway::run_call` on one task with an `external::Reach::Answer` caller, and
//! answers JSON, or an event stream when the external server sends progress, log messages or
//! requests first, as rmcp would; anything else, or anything that does not decode, goes to rmcp),
//! `/mcp/feedback`, `/healthz`, `/metrics`, and orca's Client ID Metadata Document at the path of
//! each OAuth upstream's `client_metadata_url`, from `client::auth::client_metadata_document`);
//! `stdio.rs` serves one client on stdin/stdout (once the session is up, its `Intercept` takes a
//! plain `tools/call` line of a 2025 session out of stdin before rmcp's reader sees it and
//! `direct::answer` serves it on a task of its own, the answer written into
//! `external::BatchedTransport`'s queue through an `Outbox`; a `notifications/cancelled` for such a
//! call cancels it); `search.rs` decides when `tools/list` offers `search_tools` and `call_tool`
//! instead of every tool (`catalog.search_above`, `catalog.principals`/`roles`,
//! `/mcp?tool_search=on`, the client's `experimental["orca/toolSearch"]`), answers searches from
//! one `catalog::Lexical` per set of visible tools (kept by a fingerprint of the set, so an
//! external list change gets a new one), with `catalog.embeddings` blended by `catalog::Semantic`,
//! which `follow_catalog` hands every tool's text at start and after each change of the external
//! servers' tools (`ExternalServers::subscribe`, its `tools` counter), and turns a `call_tool` into
//! the direct call it names before `Gateway::call_tool` checks and records it; `metrics.rs` renders
//! Prometheus text.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Map, Value};

use crate::splice::{self, RawJson};
use crate::tool::{Spliced, ToolError};

/// Put a tool's pre-encoded member into its value: a placeholder registered for the transport to
/// write the bytes in its place (returned, for tracking), or, when this gateway's transport does
/// not splice, the value decoded back.
pub(super) fn place(
    mut value: Value,
    spliced: Option<Spliced>,
    splices: bool,
) -> (Value, Option<(String, RawJson)>) {
    let Some(Spliced { key, json }) = spliced else { return (value, None) };
    let Value::Object(map) = &mut value else { return (value, None) };
    if splices {
        let placeholder = splice::register(&json);
        map.insert(key.to_owned(), Value::from(placeholder.as_str()));
        (value, Some((placeholder, json)))
    } else {
        let member = serde_json::from_slice(&json.to_vec())
            .expect("pre-encoded JSON was written by serde_json");
        map.insert(key.to_owned(), member);
        (value, None)
    }
}

pub(super) fn success(
    value: Value,
    png_images: Vec<Vec<u8>>,
    meta: Map<String, Value>,
) -> CallToolResult {
    use base64::Engine;
    let mut result = CallToolResult::success(vec![ContentBlock::text(json_text(&value))]);
    result.structured_content = Some(value);
    for png in png_images {
        let data = base64::engine::general_purpose::STANDARD.encode(png);
        result.content.push(ContentBlock::image(data, "image/png"));
    }
    result.with_meta(Some(MetaObject(meta)))
}

pub(super) fn failure(
    error: &ToolError,
    trace_id: &str,
    meta: Map<String, Value>,
) -> CallToolResult {
    let value = error.to_json(trace_id);
    let mut result = CallToolResult::error(vec![ContentBlock::text(json_text(&value))]);
    result.structured_content = Some(value);
    result.with_meta(Some(MetaObject(meta)))
}

/// The text block of a structured result: the same JSON, written straight into a buffer.
/// (`Value::to_string`, which rmcp's `CallToolResult::structured` uses, goes through
/// `fmt::Write` a token at a time: 2.7 to 2.9 times as long for a 2.4 kB `list_servers` result.)
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).expect("a JSON value always serializes")
}

/// The same answer for a tool that does not exist and one the caller may not use, so that
/// probing reveals nothing.
pub(super) fn unknown_tool(name: &str) -> McpError {
    let shown: String = name.chars().take(128).collect();
    McpError::invalid_params(format!("unknown tool: {shown}"), None)
}

/// An external server's result as it came, with orca's `_meta` merged over the upstream's.
pub(super) fn passthrough(mut result: CallToolResult, meta: Map<String, Value>) -> CallToolResult {
    let mut merged = result.meta.take().map(|meta| meta.0).unwrap_or_default();
    merged.extend(meta);
    // Clients see `isError` either way, as they do from the internal servers.
    result.is_error = Some(result.is_error.unwrap_or(false));
    result.with_meta(Some(MetaObject(merged)))
}

/// The first text block of a result, capped, for tracking an upstream's own failure.
pub(super) fn first_text(result: &CallToolResult) -> String {
    let text = result
        .content
        .iter()
        .find_map(|block| block.as_text().map(|text| text.text.as_str()))
        .unwrap_or("the upstream tool reported an error without text");
    text.chars().take(500).collect()
}

/// What tracking stores of a passed-through result: its content without `_meta`, serialized
/// straight from the result.
pub(super) fn stored_text(result: &mut CallToolResult) -> String {
    let meta = result.meta.take();
    let text = serde_json::to_string(result).expect("a tool result always serializes");
    result.meta = meta;
    text
}

/// A failure of a protocol request (prompts, resources) that has no `isError` form: a JSON-RPC
/// error whose data is the taxonomy's error object.
pub(super) fn protocol_error(error: &ToolError, trace_id: &str) -> McpError {
    let data = error.to_json(trace_id);
    match error.code {
        crate::tool::ErrorCode::InvalidInput => {
            McpError::invalid_params(error.message.clone(), Some(data))
        }
        crate::tool::ErrorCode::NotFound => {
            McpError::resource_not_found(error.message.clone(), Some(data))
        }
        _ => McpError::internal_error(error.message.clone(), Some(data)),
    }
}
