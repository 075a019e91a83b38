//! The calling client as a model (`llm_provider: client`): orca's own question as MCP
//! `sampling/createMessage`, asked of the client that made the call the way an external
//! server's request would be relayed to it (`external::Caller`): on its session, on its
//! request's answer stream, or in an input round for a 2026-07-28 client. The configured model
//! names go as `modelPreferences.hints`; what the client answers (its text and the model it
//! names) comes back, and an error it answers with is a decline.
#![expect(
    deprecated,
    reason = "sampling is deprecated by SEP-2577, but the protocol versions clients speak today have it"
)]

use rmcp::model::{
    ContextInclusion, CreateMessageRequestParams, CreateMessageResult, ModelHint, ModelPreferences,
    SamplingMessage, SamplingMessageContentBlock,
};

use crate::config::Principal;
use crate::external::Caller;
use crate::llm::{self, ClientModel, Refusal, Sampled, Sampling};

/// The tools whose model may be the client's, and which a 2026-07-28 client is therefore
/// served in rounds.
pub(super) const SAMPLING_TOOLS: [&str; 3] = ["generate_sql", "generate_schema", "format_results"];

/// The client of one call, as a model.
#[derive(Debug)]
pub(super) struct CallerModel(pub(super) Caller);

impl ClientModel for CallerModel {
    fn offers_sampling(&self) -> Option<bool> {
        self.0.offers_sampling()
    }

    fn sample<'a>(&'a self, request: &'a llm::Request, hints: &'a [String]) -> Sampling<'a> {
        Box::pin(async move {
            if self.0.cancelled.is_cancelled() {
                return Err(Refusal::Gone);
            }
            let params = params(request, hints);
            match self.0.create_message(params).await {
                Ok(result) => Ok(answered(&result)),
                // -32021: the client says it lacks the capability.
                Err(error) if error.code.0 == -32021 => Err(Refusal::NotOffered),
                Err(error) => Err(Refusal::Declined(error.message.into_owned())),
            }
        })
    }
}

/// orca's request as sampling parameters: the conversation, the system prompt, the
/// temperature and token limit, and the model names as hints. No context of other servers.
fn params(request: &llm::Request, hints: &[String]) -> CreateMessageRequestParams {
    let messages = request
        .messages
        .iter()
        .map(|message| match message.role {
            llm::Role::User => SamplingMessage::user_text(message.content.clone()),
            llm::Role::Assistant => SamplingMessage::assistant_text(message.content.clone()),
        })
        .collect();
    let mut params = CreateMessageRequestParams::new(messages, request.max_tokens)
        .with_system_prompt(request.system.clone())
        .with_include_context(ContextInclusion::None)
        .with_temperature(request.temperature);
    if !hints.is_empty() {
        let hints = hints.iter().map(ModelHint::new).collect();
        params = params.with_model_preferences(ModelPreferences::new().with_hints(hints));
    }
    params
}

/// The text of a client's answer (its text blocks, joined) and the model it names.
fn answered(result: &CreateMessageResult) -> Sampled {
    let text: Vec<&str> = result
        .message
        .content
        .iter()
        .filter_map(SamplingMessageContentBlock::as_text)
        .map(|text| text.text.as_str())
        .collect();
    Sampled { text: text.join("\n"), model: result.model.clone() }
}

/// A JSON-RPC response, as a stateless client posts its reply.
#[derive(serde::Deserialize)]
struct Reply {
    jsonrpc: String,
    id: String,
    result: Option<serde_json::Value>,
    error: Option<rmcp::ErrorData>,
}

/// Whether `body` is `principal`'s reply to a request orca wrote on one of its stateless
/// calls' answers, and was handed to that request.
pub(super) fn delivered(state: &super::AppState, principal: &Principal, body: &[u8]) -> bool {
    let Ok(reply) = serde_json::from_slice::<Reply>(body) else { return false };
    if reply.jsonrpc != "2.0" {
        return false;
    }
    let answer = match (reply.result, reply.error) {
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(error),
        _ => return false,
    };
    state.replies.deliver(&reply.id, &principal.identity(), answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_becomes_sampling_parameters_with_the_model_as_a_hint() {
        let request = llm::Request {
            model: "claude-sonnet-4-5".to_owned(),
            system: "You write PostgreSQL.".to_owned(),
            messages: vec![
                llm::Message { role: llm::Role::User, content: "How many?".to_owned() },
                llm::Message { role: llm::Role::Assistant, content: "SELECT".to_owned() },
                llm::Message { role: llm::Role::User, content: "syntax error".to_owned() },
            ],
            temperature: 0.2,
            max_tokens: 2048,
        };
        let value =
            serde_json::to_value(params(&request, std::slice::from_ref(&request.model))).unwrap();
        assert_eq!(value["systemPrompt"], "You write PostgreSQL.");
        assert_eq!(value["maxTokens"], 2048);
        assert_eq!(value["includeContext"], "none");
        assert_eq!(value["modelPreferences"]["hints"][0]["name"], "claude-sonnet-4-5");
        let roles: Vec<&str> = value["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(value["messages"][2]["content"]["text"], "syntax error");
    }
}
