//! The one mapping from domain results and errors to the MCP wire: a success is structured
//! content plus the same JSON as one text block; a tool failure is an `isError` result carrying
//! the taxonomy's error object; an unknown (or forbidden) tool is JSON-RPC error -32602.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, MetaObject};
use serde_json::{Map, Value};

use crate::tool::ToolError;

pub(super) fn success(value: Value, meta: Map<String, Value>) -> CallToolResult {
    CallToolResult::structured(value).with_meta(Some(MetaObject(meta)))
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
