//! The one mapping from domain results and errors to the MCP wire: a success is structured
//! content plus the same JSON as one text block; a tool failure is an `isError` result carrying
//! the taxonomy's error object; an unknown (or forbidden) tool is JSON-RPC error -32602.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Map, Value};

use crate::tool::ToolError;

pub(super) fn success(
    value: Value,
    png_images: Vec<Vec<u8>>,
    meta: Map<String, Value>,
) -> CallToolResult {
    use base64::Engine;
    let mut result = CallToolResult::structured(value);
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
    CallToolResult::structured_error(error.to_json(trace_id)).with_meta(Some(MetaObject(meta)))
}

/// The same answer for a tool that does not exist and one the caller may not use, so that
/// probing reveals nothing.
pub(super) fn unknown_tool(name: &str) -> McpError {
    let shown: String = name.chars().take(128).collect();
    McpError::invalid_params(format!("unknown tool: {shown}"), None)
}
