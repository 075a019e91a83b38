//! `ToolInfo`: a tool as an MCP server lists it (name, description, input schema exactly as
//! given, annotations), with its top-level parameters read from the schema.
//!
//! # Design notes
//!
//! `tool.rs`: `ToolInfo` (a tool as the server lists it) and `ToolParameter`; `provider.rs`:
//! `Provider`. These two hold the types the other files share, so the imports run one way:
//! `connection` → `convert` → `schema` → `rules`, and `connection` → `filter`, all of them down to
//! `tool` and `provider`.

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};

/// A tool as the server lists it, with its original name and schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The tool's name on the server.
    pub name: String,
    /// Its description (empty when the server gives none).
    pub description: String,
    /// Its input schema, exactly as listed.
    pub input_schema: Map<String, Value>,
    /// Its annotations (`readOnlyHint`, `destructiveHint` ...), when given.
    pub annotations: Option<ToolAnnotations>,
    /// The top-level parameters, read from the schema's `properties`.
    pub parameters: Vec<ToolParameter>,
}

/// One top-level parameter of a tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolParameter {
    /// The property name.
    pub name: String,
    /// Its JSON Schema type (`string`, `integer`, `object` ...), or `any` when not stated.
    pub kind: String,
    /// Its description (empty when none).
    pub description: String,
    /// Whether the schema lists it as required.
    pub required: bool,
}

impl ToolInfo {
    /// The tool as rmcp lists it.
    pub fn from_tool(tool: &Tool) -> ToolInfo {
        let schema = tool.input_schema.as_ref().clone();
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let parameters = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .map(|(name, property)| ToolParameter {
                        name: name.clone(),
                        kind: match property.get("type") {
                            Some(Value::String(kind)) => kind.clone(),
                            Some(Value::Array(kinds)) => {
                                kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|")
                            }
                            _ => "any".to_owned(),
                        },
                        description: property
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        required: required.contains(&name.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        ToolInfo {
            name: tool.name.to_string(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            input_schema: schema,
            annotations: tool.annotations.clone(),
            parameters,
        }
    }

    /// Whether the tool says it only reads (`readOnlyHint: true`).
    pub fn read_only(&self) -> bool {
        self.annotations.as_ref().and_then(|hints| hints.read_only_hint) == Some(true)
    }

    /// Whether the tool says it may destroy data (`destructiveHint`, true unless said otherwise
    /// for a tool that is not read-only, as MCP defines it).
    pub fn destructive(&self) -> bool {
        let hints = self.annotations.as_ref();
        !self.read_only() && hints.and_then(|hints| hints.destructive_hint) != Some(false)
    }
}
