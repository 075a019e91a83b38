//! The internal MCP servers. Each declares its tools (name, description, input schema, the verb
//! the caller needs) and answers calls with a domain result or a domain error; the gateway owns
//! everything that touches the wire.

pub(crate) mod orca;

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use schemars::JsonSchema;

use crate::config::Principal;
use crate::tool::Verb;

/// A tool as its server declares it.
#[derive(Debug, Clone)]
pub(crate) struct ToolSpec {
    pub(crate) tool: Tool,
    /// What the caller must be allowed to do; checked by the gateway before dispatch.
    pub(crate) verb: Verb,
}

impl ToolSpec {
    /// A tool whose arguments are the JSON form of `P`.
    pub(crate) fn new<P: JsonSchema + 'static>(
        name: &'static str,
        description: &'static str,
        verb: Verb,
        annotations: ToolAnnotations,
    ) -> ToolSpec {
        let schema = rmcp::handler::server::common::schema_for_type::<P>();
        let tool = Tool::new(name, description, Arc::clone(&schema)).annotate(annotations);
        ToolSpec { tool, verb }
    }

    pub(crate) fn name(&self) -> &str {
        &self.tool.name
    }
}

/// What a tool may know about the call it serves.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    pub(crate) principal: Principal,
}
