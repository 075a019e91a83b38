//! The `Executor`: runs the tool calls a model asks for. It maps the cleaned name back to the
//! server's, validates the arguments against the tool's ORIGINAL input schema (not the
//! simplified one the model saw), and calls the tool. Whatever the model can fix (an unknown
//! name, arguments that are not JSON or do not validate, a tool that failed) comes back as a
//! JSON result `{"error": ...}` for the model to read; only a broken connection or a timeout
//! is an error of the caller.
//!
//! # Design notes
//!
//! `executor.rs`: `Executor`, validation against the original schema with `jsonschema` (no remote
//! resolving), then the call.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::McpError;
use super::connection::McpClient;
use super::convert::Converted;
use super::names::NameMap;

/// How many validation messages a result carries at most.
const MAX_MESSAGES: usize = 8;

/// Runs calls by cleaned name, with arguments validated first.
#[derive(Clone)]
pub struct Executor {
    client: McpClient,
    names: NameMap,
    /// Original name -> validator of its original input schema (absent when the schema could
    /// not be compiled: the server then validates on its own).
    validators: HashMap<String, Arc<jsonschema::Validator>>,
    /// Original name -> paths of values the model sent as JSON text (Gemini).
    json_text: HashMap<String, Vec<Vec<String>>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Executor")
            .field("names", &self.names)
            .field("validated", &self.validators.len())
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor for the tools of `converted` (those set aside are not callable).
    ///
    /// # Errors
    ///
    /// Listing errors of the client.
    pub async fn new(client: McpClient, converted: &Converted) -> Result<Executor, McpError> {
        let tools = client.list_tools().await?;
        let mut names = Vec::new();
        let mut validators = HashMap::new();
        let mut json_text = HashMap::new();
        for tool in &converted.tools {
            let Some(info) = tools.iter().find(|info| info.name == tool.original_name) else {
                continue;
            };
            names.push(info.name.as_str());
            if !tool.json_text_paths.is_empty() {
                json_text.insert(info.name.clone(), tool.json_text_paths.clone());
            }
            match jsonschema::validator_for(&Value::Object(info.input_schema.clone())) {
                Ok(validator) => {
                    validators.insert(info.name.clone(), Arc::new(validator));
                }
                Err(error) => {
                    tracing::warn!(tool = %info.name, %error, "the tool's input schema does not compile; its arguments are left to the server to check");
                }
            }
        }
        // The names of the conversion, restricted to the callable tools.
        let mut map = NameMap::default();
        for (cleaned, original) in converted.names.iter() {
            if names.contains(&original) {
                map.insert_pair(cleaned, original);
            }
        }
        Ok(Executor { client, names: map, validators, json_text })
    }

    /// The map between the names the model sees and the server's names.
    pub fn names(&self) -> &NameMap {
        &self.names
    }

    /// Run the call `name` (a cleaned name) with `arguments` (the model's JSON text).
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] and [`McpError::Timeout`]; everything else is a JSON result.
    pub async fn execute(&self, name: &str, arguments: &str) -> Result<Value, McpError> {
        let arguments = if arguments.trim().is_empty() {
            json!({})
        } else {
            match serde_json::from_str::<Value>(arguments) {
                Ok(arguments) => arguments,
                Err(error) => {
                    return Ok(
                        json!({"error": format!("the arguments of `{name}` are not valid JSON: {error}")}),
                    );
                }
            }
        };
        self.execute_value(name, arguments).await
    }

    /// [`Executor::execute`] with arguments already parsed.
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] and [`McpError::Timeout`].
    pub async fn execute_value(&self, name: &str, mut arguments: Value) -> Result<Value, McpError> {
        let Some(original) = self.names.original(name) else {
            let known: Vec<&str> = self.names.iter().map(|(cleaned, _)| cleaned).collect();
            return Ok(
                json!({"error": format!("unknown tool `{name}`; the tools are: {}", known.join(", "))}),
            );
        };
        for path in self.json_text.get(original).into_iter().flatten() {
            parse_json_text(&mut arguments, path);
        }
        if let Err(message) = self.validate(original, &arguments) {
            return Ok(json!({"error": message}));
        }
        match self.client.call_tool(original, arguments).await {
            Ok(result) if result.success => Ok(result.data.unwrap_or(Value::Null)),
            Ok(result) => Ok(json!({"error": result.error.unwrap_or_default()})),
            Err(error @ (McpError::Transport(_) | McpError::Timeout { .. })) => Err(error),
            Err(error) => Ok(json!({"error": error.to_string()})),
        }
    }

    /// The original name's arguments checked against its original schema.
    ///
    /// # Errors
    ///
    /// The validation messages, for the model.
    pub fn validate(&self, original: &str, arguments: &Value) -> Result<(), String> {
        if !arguments.is_object() {
            return Err(format!(
                "invalid arguments for `{original}`: expected a JSON object, got {arguments}"
            ));
        }
        let Some(validator) = self.validators.get(original) else { return Ok(()) };
        let messages: Vec<String> = validator
            .iter_errors(arguments)
            .take(MAX_MESSAGES)
            .map(|error| {
                let path = error.instance_path().as_str().to_owned();
                if path.is_empty() { error.to_string() } else { format!("{path}: {error}") }
            })
            .collect();
        if messages.is_empty() {
            Ok(())
        } else {
            Err(format!("invalid arguments for `{original}`: {}", messages.join("; ")))
        }
    }
}

/// The string at `path` (property names, `[]` for every item of an array) replaced by the JSON
/// it holds, when it holds JSON.
fn parse_json_text(value: &mut Value, path: &[String]) {
    match path.split_first() {
        None => {
            if let Value::String(text) = value
                && let Ok(parsed) = serde_json::from_str::<Value>(text)
            {
                *value = parsed;
            }
        }
        Some((head, rest)) if head == "[]" => {
            if let Value::Array(items) = value {
                for item in items {
                    parse_json_text(item, rest);
                }
            }
        }
        Some((head, rest)) => {
            if let Some(child) = value.get_mut(head.as_str()) {
                parse_json_text(child, rest);
            }
        }
    }
}
