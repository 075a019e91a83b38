//! The one mapping from domain results and errors to the MCP wire: a success is structured
//! content plus the same JSON as one text block; a tool failure is an `isError` result carrying
//! the taxonomy's error object; an unknown (or forbidden) tool is JSON-RPC error -32602.

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
