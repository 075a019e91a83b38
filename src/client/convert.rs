//! MCP tools as OpenAI, Anthropic and Gemini tools: cleaned names (with the map back), each
//! schema normalized for the provider, and the tools whose schema cannot be converted set
//! aside with the reason, never failing the others.
//!
//! # Design notes
//!
//! `convert.rs`: `convert` and `Converted` (async-openai's types for OpenAI, the providers' JSON);
//! each tool set aside is logged as a warning naming it.

use async_openai::types::chat::{ChatCompletionTool, ChatCompletionTools, FunctionObject};
use serde_json::{Value, json};

use super::names::NameMap;
use super::provider::Provider;
use super::schema;
use super::tool::ToolInfo;

/// One tool ready for a provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvertedTool {
    /// The name the model sees (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// The server's name of the tool.
    pub original_name: String,
    /// The tool's description.
    pub description: String,
    /// The provider's parameter schema (`None` for a Gemini tool without parameters).
    pub parameters: Option<Value>,
    /// OpenAI only: the schema follows strict mode's rules, and the tool is sent with
    /// `strict: true`.
    pub strict: bool,
    /// Gemini only: paths (property names, `[]` for array items) of values offered as JSON
    /// text because Gemini's Schema cannot describe them; [`super::Executor`] parses them back.
    pub json_text_paths: Vec<Vec<String>>,
}

/// A tool that could not be converted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// The server's name of the tool.
    pub name: String,
    /// Why its schema could not be converted.
    pub reason: String,
}

/// The tools of a server converted for one provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The provider they were converted for.
    pub provider: Provider,
    /// The converted tools, in the server's order.
    pub tools: Vec<ConvertedTool>,
    /// Cleaned names and the server's names, both ways (for every admitted tool).
    pub names: NameMap,
    /// The tools left out, with the reason.
    pub set_aside: Vec<SetAside>,
}

impl Converted {
    /// The tools as async-openai's request types (meaningful for [`Provider::OpenAi`]).
    pub fn openai(&self) -> Vec<ChatCompletionTools> {
        self.tools
            .iter()
            .map(|tool| {
                ChatCompletionTools::Function(ChatCompletionTool {
                    function: FunctionObject {
                        name: tool.name.clone(),
                        description: Some(tool.description.clone()).filter(|text| !text.is_empty()),
                        parameters: tool.parameters.clone(),
                        strict: tool.strict.then_some(true),
                    },
                })
            })
            .collect()
    }

    /// The tools in the provider's JSON: OpenAI
    /// `[{"type":"function","function":{"name","description","parameters","strict"?}}]`,
    /// Anthropic `[{"name","description","input_schema"}]`, Gemini
    /// `{"functionDeclarations":[{"name","description","parameters"?}]}`.
    pub fn to_json(&self) -> Value {
        match self.provider {
            Provider::OpenAi => serde_json::to_value(self.openai()).unwrap_or(Value::Null),
            Provider::Anthropic => Value::Array(
                self.tools
                    .iter()
                    .map(|tool| {
                        json!({
                            "name": tool.name,
                            "description": tool.description,
                            "input_schema": tool.parameters.clone().unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                        })
                    })
                    .collect(),
            ),
            Provider::Gemini => {
                let declarations: Vec<Value> = self
                    .tools
                    .iter()
                    .map(|tool| {
                        let mut declaration = json!({"name": tool.name, "description": tool.description});
                        if let Some(parameters) = &tool.parameters {
                            declaration["parameters"] = parameters.clone();
                        }
                        declaration
                    })
                    .collect();
                json!({ "functionDeclarations": declarations })
            }
        }
    }
}

/// Convert `tools` (already filtered) for `provider`: cleaned names, normalized schemas, and
/// the tools whose schema cannot be converted set aside with the reason (and a warning).
pub fn convert(provider: Provider, tools: &[ToolInfo]) -> Converted {
    let names = NameMap::new(tools.iter().map(|tool| tool.name.as_str()));
    let mut converted = Vec::new();
    let mut set_aside = Vec::new();
    for tool in tools {
        match schema::normalize(&tool.input_schema, provider) {
            Ok(normalized) => converted.push(ConvertedTool {
                name: names.cleaned(&tool.name).unwrap_or(&tool.name).to_owned(),
                original_name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: normalized.schema,
                strict: normalized.strict,
                json_text_paths: normalized.json_text,
            }),
            Err(reason) => {
                tracing::warn!(tool = %tool.name, provider = provider.as_str(), %reason, "tool set aside: its input schema cannot be converted");
                set_aside.push(SetAside { name: tool.name.clone(), reason });
            }
        }
    }
    Converted { provider, tools: converted, names, set_aside }
}
