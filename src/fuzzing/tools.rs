//! The target for tool arguments: any JSON object sent to any internal tool. The tool's own
//! decoding (`tool::parse_arguments` into the parameter type it declares) never panics, refuses
//! with `INVALID_INPUT` naming the argument, and agrees with the input schema published in
//! `tools/list`: arguments the tool takes are valid for its schema, so a client that checks
//! arguments against the schema (as `orca::client`'s executor does) never refuses a call the
//! tool would take.
//!
//! # Design notes
//!
//! `tools.rs`: every internal tool's arguments (`servers::declared_tools`, each `ToolSpec` carrying
//! the decoder of its parameter type) decode or are refused with `INVALID_INPUT` naming the
//! argument, and whatever a tool takes is valid for the input schema it publishes (checked with
//! `jsonschema`).

use std::sync::OnceLock;

use serde_json::Value;

use crate::servers::{ToolSpec, declared_tools};
use crate::tool::ErrorCode;

/// Every internal tool with its compiled input schema.
fn tools() -> &'static [(ToolSpec, jsonschema::Validator)] {
    static TOOLS: OnceLock<Vec<(ToolSpec, jsonschema::Validator)>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        declared_tools()
            .into_iter()
            .map(|spec| {
                let schema = Value::Object((*spec.tool.input_schema).clone());
                let validator = jsonschema::validator_for(&schema).unwrap_or_else(|error| {
                    panic!("the input schema of {} does not compile: {error}", spec.name())
                });
                (spec, validator)
            })
            .collect()
    })
}

/// The first byte picks the tool, the rest is its arguments (a JSON object, or `null` for none).
pub(super) fn tool_arguments(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let tools = tools();
    let (spec, validator) = &tools[usize::from(first) % tools.len()];
    let arguments = match serde_json::from_slice::<Value>(rest) {
        Ok(Value::Object(arguments)) => Some(arguments),
        Ok(Value::Null) => None,
        _ => return,
    };
    let instance = Value::Object(arguments.clone().unwrap_or_default());
    match (spec.decode)(arguments) {
        Ok(()) => {
            if !validator.is_valid(&instance) {
                let errors: Vec<String> =
                    validator.iter_errors(&instance).map(|error| error.to_string()).collect();
                panic!(
                    "{} takes arguments its schema refuses ({}): {instance}",
                    spec.name(),
                    errors.join("; ")
                );
            }
        }
        Err(error) => {
            assert_eq!(error.code, ErrorCode::InvalidInput, "{}: {}", spec.name(), error.message);
            assert!(
                error.message.starts_with("invalid argument"),
                "{}: the refusal does not name the argument: {}",
                spec.name(),
                error.message
            );
        }
    }
}
