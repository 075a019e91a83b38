//! The four prompts of specification 002, which the tools point to when a person has to
//! decide: which of several same-named tables, which time window for a large table, whether
//! sensitive columns may be shown, and how two tables without a key relate.

use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{Map, Value};

/// (name, description, template, arguments)
const PROMPTS: [(&str, &str, &str, &[&str]); 4] = [
    (
        "ask_for_disambiguation",
        "Ask which of several tables with the same name in different schemas is meant.",
        "Table \"{table}\" was found in schemas {candidates}. Choose one.",
        &["table", "candidates"],
    ),
    (
        "ask_for_time_window",
        "Ask for a time window before reading a large table.",
        "Table \"{table}\" is large. Specify a time window (e.g. last 30 days) or explicit from/to.",
        &["table"],
    ),
    (
        "ask_for_sensitive_columns_ack",
        "Ask the user to confirm that sensitive columns may be shown, or to name a masking policy.",
        "Query includes sensitive columns {cols}. Confirm or specify a masking policy.",
        &["cols"],
    ),
    (
        "ask_for_missing_keys_or_joins",
        "Ask how two tables relate when no join key was found between them.",
        "No join key found between {left} and {right}. Provide matching columns or filters.",
        &["left", "right"],
    ),
];

fn argument_description(name: &str) -> &'static str {
    match name {
        "table" => "the table's name",
        "candidates" => "the schemas (or qualified names) it was found in",
        "cols" => "the sensitive columns",
        "left" => "the first table",
        _ => "the second table",
    }
}

/// Every prompt, with its arguments (all required).
pub(crate) fn list() -> Vec<Prompt> {
    PROMPTS
        .iter()
        .map(|(name, description, _, arguments)| {
            Prompt::new(
                *name,
                Some(*description),
                Some(
                    arguments
                        .iter()
                        .map(|argument| {
                            PromptArgument::new(*argument)
                                .with_description(argument_description(argument))
                                .with_required(true)
                        })
                        .collect(),
                ),
            )
        })
        .collect()
}

/// The prompt `name` filled with `arguments`; `None` when there is no such prompt.
///
/// # Errors
///
/// The names of the required arguments that are missing.
pub(crate) fn get(
    name: &str,
    arguments: Option<&Map<String, Value>>,
) -> Option<Result<GetPromptResult, String>> {
    let (_, description, template, required) = PROMPTS.iter().find(|prompt| prompt.0 == name)?;
    let mut text = (*template).to_owned();
    let mut missing = Vec::new();
    for argument in *required {
        match arguments.and_then(|arguments| arguments.get(*argument)) {
            Some(Value::String(value)) => text = text.replace(&format!("{{{argument}}}"), value),
            Some(other) if !other.is_null() => {
                text = text.replace(&format!("{{{argument}}}"), &other.to_string());
            }
            _ => missing.push(*argument),
        }
    }
    if !missing.is_empty() {
        return Some(Err(format!("prompt `{name}` needs the arguments: {}", missing.join(", "))));
    }
    Some(Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
        .with_description(*description)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_filled_and_missing_arguments_named() {
        assert_eq!(list().len(), 4);
        let mut arguments = Map::new();
        arguments.insert("table".into(), Value::from("payment"));
        arguments.insert("candidates".into(), Value::from("public, archive"));
        let filled = get("ask_for_disambiguation", Some(&arguments)).unwrap().unwrap();
        let text = serde_json::to_value(&filled.messages[0]).unwrap().to_string();
        assert!(
            text.contains(r#"Table \"payment\" was found in schemas public, archive. Choose one."#),
            "{text}"
        );
        let missing = get("ask_for_missing_keys_or_joins", None).unwrap().unwrap_err();
        assert!(missing.contains("left, right"), "{missing}");
        assert!(get("no_such_prompt", None).is_none());
    }
}
