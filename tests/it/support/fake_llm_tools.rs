//! Tool calling on the fake OpenAI wire: the rules the real Chat Completions API applies to
//! `tools` (names, parameter schemas valid under JSON Schema's meta-schema, strict mode), to assistant `tool_calls` and to `tool`
//! messages (each answers a call the fake issued, right after the message that asked for it,
//! and every call is answered), and the answer that asks for tool calls. Messages are the real
//! API's where known.

use std::collections::HashSet;

use axum::response::Response;
use serde_json::{Map, Value, json};

use super::fake_llm::{
    Problem, Received, Wire, bad, check_anthropic_text_blocks, json_response, tokens, unix_now,
};

/// The id of the `index`th tool call of the answer numbered `number`.
pub(crate) fn call_id(number: u64, index: usize) -> String {
    format!("call_fake{number:06}x{index}")
}

/// Tool call ids in the conversation that the fake never issued.
pub(crate) fn check_issued(body: &Value, issued: &HashSet<String>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for message in body.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let blocks = message.get("content").and_then(Value::as_array).into_iter().flatten();
        let block_ids =
            blocks.filter_map(|block| match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => block.get("id").and_then(Value::as_str),
                Some("tool_result") => block.get("tool_use_id").and_then(Value::as_str),
                _ => None,
            });
        let ids = message
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|call| call.get("id").and_then(Value::as_str))
            .chain(message.get("tool_call_id").and_then(Value::as_str))
            .chain(block_ids);
        for id in ids {
            if !issued.contains(id) {
                problems.push(bad(format!(
                    "Invalid parameter: tool call id '{id}' was not issued by this server"
                )));
            }
        }
    }
    problems
}

/// A `tool` message: `role`, `content` (a string or text parts) and `tool_call_id`, nothing else.
pub(crate) fn check_tool_message(at: &str, message: &Map<String, Value>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for key in
        message.keys().filter(|key| !["role", "content", "tool_call_id"].contains(&key.as_str()))
    {
        problems.push(bad(format!(
            "Additional properties are not allowed ('{key}' was unexpected) - '{at}'"
        )));
    }
    if !message.get("tool_call_id").is_some_and(Value::is_string) {
        problems.push(bad(format!("Missing required parameter: '{at}.tool_call_id'.")));
    }
    let content_ok = match message.get("content") {
        Some(Value::String(_)) => true,
        Some(Value::Array(parts)) => {
            !parts.is_empty()
                && parts.iter().all(|part| {
                    part.get("type").and_then(Value::as_str) == Some("text")
                        && part.get("text").is_some_and(Value::is_string)
                })
        }
        _ => false,
    };
    if !content_ok {
        problems.push(bad(format!(
            "Invalid type for '{at}.content': expected one of a string or array of text parts."
        )));
    }
    problems
}

/// An assistant message's `tool_calls`: a non-empty list of function calls with an id, a name
/// and arguments as a JSON string.
pub(crate) fn check_assistant_tool_calls(at: &str, message: &Map<String, Value>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let Some(calls) =
        message.get("tool_calls").and_then(Value::as_array).filter(|calls| !calls.is_empty())
    else {
        return vec![bad(format!(
            "Invalid '{at}.tool_calls': empty array. Expected an array with minimum length 1."
        ))];
    };
    for (index, call) in calls.iter().enumerate() {
        let at = format!("{at}.tool_calls[{index}]");
        if call.get("type").and_then(Value::as_str) != Some("function") {
            problems.push(bad(format!("Invalid value for '{at}.type': expected 'function'.")));
        }
        if !call.get("id").is_some_and(Value::is_string) {
            problems.push(bad(format!("Missing required parameter: '{at}.id'.")));
        }
        let function = call.get("function");
        if !function.and_then(|function| function.get("name")).is_some_and(Value::is_string) {
            problems.push(bad(format!("Missing required parameter: '{at}.function.name'.")));
        }
        match function.and_then(|function| function.get("arguments")) {
            Some(Value::String(arguments)) if serde_json::from_str::<Value>(arguments).is_ok() => {}
            _ => problems.push(bad(format!(
                "Invalid '{at}.function.arguments': expected a string of JSON."
            ))),
        }
    }
    problems
}

/// `tools` well-formed, and the tool messages in order: each assistant message with
/// `tool_calls` followed by one `tool` message per call, and no `tool` message elsewhere.
pub(crate) fn check_tools_and_sequence(body: &Map<String, Value>) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(tools) = body.get("tools") {
        check_tools(tools, &mut problems);
    }
    let messages = body.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut pending: Vec<String> = Vec::new();
    let mut answering = false;
    for (index, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
        if role == "tool" {
            let id = message.get("tool_call_id").and_then(Value::as_str).unwrap_or_default();
            if !answering {
                problems.push(bad(format!(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[{index}])"
                )));
            } else if let Some(position) = pending.iter().position(|pending| pending == id) {
                pending.remove(position);
            } else {
                problems.push(bad(format!(
                    "Invalid parameter: messages[{index}] answers tool_call_id '{id}', which the preceding assistant message did not ask for (or which was already answered)."
                )));
            }
            continue;
        }
        if !pending.is_empty() {
            problems.push(bad(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                pending.join(", ")
            )));
            pending.clear();
        }
        answering = false;
        if role == "assistant"
            && let Some(calls) = message.get("tool_calls").and_then(Value::as_array)
        {
            pending = calls
                .iter()
                .filter_map(|call| call.get("id").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            answering = true;
        }
    }
    if !pending.is_empty() {
        problems.push(bad(format!(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
            pending.join(", ")
        )));
    }
    problems
}

fn check_tools(tools: &Value, problems: &mut Vec<Problem>) {
    let Some(tools) = tools.as_array() else {
        problems.push(bad("Invalid type for 'tools': expected an array."));
        return;
    };
    let mut names = HashSet::new();
    for (index, tool) in tools.iter().enumerate() {
        let at = format!("tools[{index}]");
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            problems.push(bad(format!("Invalid value for '{at}.type': expected 'function'.")));
            continue;
        }
        let Some(function) = tool.get("function").and_then(Value::as_object) else {
            problems.push(bad(format!("Missing required parameter: '{at}.function'.")));
            continue;
        };
        for key in function
            .keys()
            .filter(|key| !["name", "description", "parameters", "strict"].contains(&key.as_str()))
        {
            problems
                .push(bad(format!("Unrecognized request argument supplied: {at}.function.{key}")));
        }
        let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty()
            || !name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
        {
            problems.push(bad(format!(
                "Invalid '{at}.function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            )));
        }
        if name.len() > 64 {
            problems.push(bad(format!(
                "Invalid '{at}.function.name': string too long. Expected a string with maximum length 64, but got a string with length {} instead.",
                name.len()
            )));
        }
        if !names.insert(name.to_owned()) {
            problems.push(bad(format!("Invalid 'tools': duplicate function name '{name}'.")));
        }
        if let Some(description) = function.get("description")
            && !description.is_string()
        {
            problems.push(bad(format!(
                "Invalid type for '{at}.function.description': expected a string."
            )));
        }
        let strict = match function.get("strict") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(strict)) => *strict,
            Some(_) => {
                problems.push(bad(format!(
                    "Invalid type for '{at}.function.strict': expected a boolean."
                )));
                false
            }
        };
        if let Some(parameters) = function.get("parameters") {
            let mut found = Vec::new();
            check_parameters(parameters, strict, &mut found);
            for message in found {
                problems.push(bad(format!("Invalid schema for function '{name}': {message}")));
            }
        }
    }
}

/// The rules OpenAI applies to a function's parameters (all of them), and in strict mode the
/// structured-outputs subset.
pub(crate) fn check_parameters(parameters: &Value, strict: bool, found: &mut Vec<String>) {
    let Some(root) = parameters.as_object() else {
        found.push(
            "schema must be a JSON Schema of 'type: \"object\"', got a non-object.".to_owned(),
        );
        return;
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        found.push(
            "schema must be a JSON Schema of 'type: \"object\"', got 'type: \"None\"'.".to_owned(),
        );
    }
    for keyword in ["anyOf", "oneOf", "allOf", "enum", "not"] {
        if root.contains_key(keyword) {
            found.push(format!("schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level (found '{keyword}')."));
        }
    }
    // OpenAI validates the parameters against JSON Schema's meta-schema before anything else.
    if let Err(error) = jsonschema::draft202012::meta::validate(parameters) {
        found.push(format!("{error} (at '{}').", error.instance_path().as_str()));
    }
    check_node(parameters, "()", strict, 0, found);
}

/// JSON Schema's types.
const TYPES: &[&str] = &["string", "number", "integer", "boolean", "array", "object", "null"];

/// The keywords strict mode supports.
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "$ref",
    "$defs",
];

fn check_node(schema: &Value, context: &str, strict: bool, depth: usize, found: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        if strict || schema.as_bool() != Some(true) {
            found.push(format!("In context={context}, schema must be an object."));
        }
        return;
    };
    if strict && depth > 10 {
        found.push(format!("In context={context}, the schema is nested more than 10 levels."));
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let known = |kind: &Value| kind.as_str().is_some_and(|kind| TYPES.contains(&kind));
    match object.get("type") {
        None => {}
        Some(Value::Array(kinds)) if !kinds.is_empty() && kinds.iter().all(known) => {}
        Some(kind) if known(kind) => {}
        Some(kind) => found.push(format!(
            "In context={context}, {kind} is not valid under any of the given schemas."
        )),
    }
    if types.contains(&"object") {
        let properties = object.get("properties").and_then(Value::as_object);
        if properties.is_none() {
            found.push(format!("In context={context}, object schema missing properties."));
        }
        if strict {
            if object.get("additionalProperties") != Some(&Value::Bool(false)) {
                found.push(format!("In context={context}, 'additionalProperties' is required to be supplied and to be false."));
            }
            let required: Vec<&str> = object
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for name in properties.into_iter().flat_map(|properties| properties.keys()) {
                if !required.contains(&name.as_str()) {
                    found.push(format!("In context={context}, 'required' is required to be supplied and to be an array including every key in properties. Missing '{name}'."));
                }
            }
        }
    }
    if strict {
        for key in object.keys().filter(|key| !STRICT_KEYWORDS.contains(&key.as_str())) {
            found.push(format!("In context={context}, '{key}' is not permitted."));
        }
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            check_node(property, &format!("('properties', '{name}')"), strict, depth + 1, found);
        }
    }
    if let Some(items) = object.get("items") {
        check_node(items, &format!("{context}, 'items'"), strict, depth + 1, found);
    }
    if let Some(branches) = object.get("anyOf").and_then(Value::as_array) {
        for (index, branch) in branches.iter().enumerate() {
            check_node(branch, &format!("{context}, 'anyOf', {index}"), strict, depth + 1, found);
        }
    }
}

/// The answer asking for `calls`, with ids from [`call_id`].
pub(crate) fn tool_calls_response(
    wire: Wire,
    received: &Received,
    model: &str,
    calls: &[(String, Value)],
    number: u64,
) -> Response {
    match wire {
        Wire::OpenAi => {}
        Wire::Anthropic => return anthropic_tool_use_response(received, model, calls, number),
        Wire::Gemini => {
            let error = json!({"error": {"code": 500, "message": "the fake scripts tool calls on the OpenAI and Anthropic wires only", "status": "INTERNAL"}});
            return json_response(500, &error, &[]);
        }
    }
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, arguments))| {
            json!({
                "id": call_id(number, index),
                "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()},
            })
        })
        .collect();
    let prompt_tokens = tokens(&super::fake_llm::FakeLlm::conversation_text(received));
    let completion_tokens = tokens(&Value::Array(tool_calls.clone()).to_string());
    json_response(
        200,
        &json!({
            "id": format!("chatcmpl-fake{number:06}"),
            "object": "chat.completion",
            "created": unix_now(),
            "model": model,
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": tool_calls,
                    "refusal": null,
                    "annotations": [],
                },
                "logprobs": null,
                "finish_reason": "tool_calls",
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "service_tier": "default",
            "system_fingerprint": null,
        }),
        &[("x-request-id", format!("req_fake{number:06}"))],
    )
}

/// The Messages API answer asking for `calls` as `tool_use` blocks, ids from [`call_id`].
fn anthropic_tool_use_response(
    received: &Received,
    model: &str,
    calls: &[(String, Value)],
    number: u64,
) -> Response {
    let content: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, input))| {
            json!({"type": "tool_use", "id": call_id(number, index), "name": name, "input": input})
        })
        .collect();
    let input_tokens = tokens(&super::fake_llm::FakeLlm::conversation_text(received));
    let output_tokens = tokens(&Value::Array(content.clone()).to_string());
    json_response(
        200,
        &json!({
            "id": format!("msg_fake{number:06}"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }),
        &[("request-id", format!("req_fake{number:06}"))],
    )
}

/// Message content on the Messages API: text blocks, and `tool_use` blocks (assistant) or
/// `tool_result` blocks (user).
pub(crate) fn check_anthropic_content(
    at: &str,
    role: &str,
    content: &Value,
    problems: &mut Vec<Problem>,
) {
    let Some(blocks) = content.as_array() else {
        check_anthropic_text_blocks(at, content, problems);
        return;
    };
    let is_text = |block: &Value| block.get("type").and_then(Value::as_str) == Some("text");
    if blocks.iter().all(is_text) {
        check_anthropic_text_blocks(at, content, problems);
        return;
    }
    for (index, block) in blocks.iter().enumerate() {
        let at = format!("{at}.{index}");
        let keys: Vec<&String> =
            block.as_object().into_iter().flat_map(|block| block.keys()).collect();
        match (role, block.get("type").and_then(Value::as_str)) {
            (_, Some("text")) => check_anthropic_text_blocks(&at, &json!([block]), problems),
            ("assistant", Some("tool_use")) => {
                for key in keys.iter().filter(|key| {
                    !["type", "id", "name", "input", "cache_control"].contains(&key.as_str())
                }) {
                    problems
                        .push(bad(format!("{at}.tool_use.{key}: Extra inputs are not permitted")));
                }
                if !block.get("id").is_some_and(Value::is_string)
                    || !block.get("name").is_some_and(Value::is_string)
                {
                    problems.push(bad(format!("{at}.tool_use: id and name are required")));
                }
                if !block.get("input").is_some_and(Value::is_object) {
                    problems.push(bad(format!(
                        "{at}.tool_use.input: Input should be a valid dictionary"
                    )));
                }
            }
            ("user", Some("tool_result")) => {
                for key in keys.iter().filter(|key| {
                    !["type", "tool_use_id", "content", "is_error", "cache_control"]
                        .contains(&key.as_str())
                }) {
                    problems.push(bad(format!(
                        "{at}.tool_result.{key}: Extra inputs are not permitted"
                    )));
                }
                if !block.get("tool_use_id").is_some_and(Value::is_string) {
                    problems.push(bad(format!("{at}.tool_result.tool_use_id: Field required")));
                }
                match block.get("content") {
                    None | Some(Value::String(_)) => {}
                    Some(content) => check_anthropic_text_blocks(
                        &format!("{at}.tool_result.content"),
                        content,
                        problems,
                    ),
                }
                if block.get("is_error").is_some_and(|is_error| !is_error.is_boolean()) {
                    problems.push(bad(format!(
                        "{at}.tool_result.is_error: Input should be a valid boolean"
                    )));
                }
            }
            (role, kind) => {
                problems.push(bad(format!(
                    "{at}: a {role} message cannot hold a block of type {kind:?}"
                )));
            }
        }
    }
}

/// `tools` on the Messages API, and the tool blocks in order: every `tool_use` of an assistant
/// message answered by a `tool_result` in the next (user) message, and no `tool_result` without
/// its `tool_use` in the previous message.
pub(crate) fn check_anthropic_tools_and_sequence(body: &Map<String, Value>) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(tools) = body.get("tools") {
        let Some(tools) = tools.as_array() else {
            return vec![bad("tools: Input should be a valid list")];
        };
        let mut names = HashSet::new();
        for (index, tool) in tools.iter().enumerate() {
            let at = format!("tools.{index}");
            for key in tool.as_object().into_iter().flat_map(|tool| tool.keys()) {
                if !["name", "description", "input_schema", "cache_control", "type"]
                    .contains(&key.as_str())
                {
                    problems.push(bad(format!("{at}.{key}: Extra inputs are not permitted")));
                }
            }
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty()
                || name.len() > 128
                || !name
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
            {
                problems.push(bad(format!(
                    "{at}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
                )));
            }
            if !names.insert(name.to_owned()) {
                problems.push(bad(format!("tools: Tool names must be unique ({name})")));
            }
            match tool.get("input_schema") {
                Some(schema) if jsonschema::draft202012::meta::validate(schema).is_err() => {
                    problems.push(bad(format!("{at}.custom.input_schema: JSON schema is invalid. It must match JSON Schema draft 2020-12 (https://json-schema.org/draft/2020-12). Learn more about tool use at https://docs.claude.com/en/docs/tool-use.")))
                }
                Some(schema) if schema.get("type").and_then(Value::as_str) == Some("object") => {}
                Some(_) => {
                    problems.push(bad(format!("{at}.input_schema.type: Input should be 'object'")))
                }
                None => problems.push(bad(format!("{at}.input_schema: Field required"))),
            }
        }
    }
    let messages = body.get("messages").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut asked: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let blocks: Vec<Value> =
            message.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
        let ids = |kind: &str, key: &str| -> Vec<String> {
            blocks
                .iter()
                .filter(|block| block.get("type").and_then(Value::as_str) == Some(kind))
                .filter_map(|block| block.get(key).and_then(Value::as_str).map(str::to_owned))
                .collect()
        };
        let answered = ids("tool_result", "tool_use_id");
        for id in answered.iter().filter(|id| !asked.contains(id)) {
            problems.push(bad(format!(
                "messages.{index}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
            )));
        }
        let missing: Vec<&str> =
            asked.iter().filter(|id| !answered.contains(id)).map(String::as_str).collect();
        if !missing.is_empty() {
            problems.push(bad(format!(
                "messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                missing.join(", ")
            )));
        }
        asked = ids("tool_use", "id");
    }
    if !asked.is_empty() {
        problems.push(bad(format!(
            "messages: the last message asks for tools ({}) and no `tool_result` answers them",
            asked.join(", ")
        )));
    }
    problems
}
