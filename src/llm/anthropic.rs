//! Anthropic's Messages API over reqwest: `POST {base}/v1/messages` with `x-api-key` and
//! `anthropic-version`, the system prompt as a top-level string, the answer's text blocks
//! joined.
//!
//! # Design notes
//!
//! `anthropic.rs` (Messages API) and `google.rs` (`generateContent`, key in `x-goog-api-key`) build
//! and read their wire formats over reqwest through `transport.rs` (the retry loop, error bodies,
//! status to `llm::Error`).

use serde::{Deserialize, Serialize};

use super::transport::JsonCall;
use super::{Answer, ClientSettings, Endpoint, Error, Provider, Request, Role};

/// Where Anthropic's API lives; `/v1/messages` is appended.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version orca speaks, sent as `anthropic-version`.
const API_VERSION: &str = "2023-06-01";

/// The body of `POST /v1/messages`.
#[derive(Debug, Serialize)]
pub(crate) struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    /// Left out when empty.
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    messages: Vec<Turn<'a>>,
    temperature: f32,
}

/// One turn of the conversation, its content a plain string.
#[derive(Debug, Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: &'a str,
}

/// The Messages API body for `request`.
pub(crate) fn messages_request(request: &Request) -> MessagesRequest<'_> {
    let messages = request
        .messages
        .iter()
        .map(|message| Turn {
            role: match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            },
            content: &message.content,
        })
        .collect();
    MessagesRequest {
        model: &request.model,
        max_tokens: request.max_tokens,
        system: &request.system,
        messages,
        temperature: request.temperature,
    }
}

/// The parts of a Messages API answer orca reads; anything else is ignored.
#[derive(Debug, Deserialize)]
struct MessagesResponse {
    content: Option<Vec<ContentBlock>>,
    model: Option<String>,
    stop_reason: Option<String>,
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
}

/// Reads a Messages API answer: its `text` blocks joined (thinking and tool blocks skipped).
/// The error says what was missing.
pub(crate) fn read_answer(body: &[u8], requested_model: &str) -> Result<Answer, String> {
    let response: MessagesResponse = serde_json::from_slice(body)
        .map_err(|error| format!("the answer is not a Messages API response: {error}"))?;
    let Some(content) = response.content else {
        return Err("the answer has no `content`".to_owned());
    };
    let text: String = content
        .into_iter()
        .filter(|block| block.kind.as_deref() == Some("text"))
        .filter_map(|block| block.text)
        .collect();
    if text.trim().is_empty() {
        return Err(match response.stop_reason {
            Some(reason) => format!("the answer holds no text (stop reason `{reason}`)"),
            None => "the answer holds no text".to_owned(),
        });
    }
    Ok(Answer {
        text,
        model: response
            .model
            .filter(|model| !model.is_empty())
            .unwrap_or_else(|| requested_model.to_owned()),
        prompt_tokens: response.usage.as_ref().and_then(|usage| usage.input_tokens),
        completion_tokens: response.usage.as_ref().and_then(|usage| usage.output_tokens),
    })
}

/// Asks Anthropic; returns the answer and the HTTP attempts made.
pub(crate) async fn complete(
    http: &reqwest::Client,
    settings: &ClientSettings,
    endpoint: &Endpoint,
    request: &Request,
) -> Result<(Answer, u32), Error> {
    let call = JsonCall {
        provider: Provider::Anthropic,
        key_header: "x-api-key",
        extra_headers: &[("anthropic-version", API_VERSION)],
        path: &["v1", "messages"],
    };
    call.send(http, settings, endpoint, &messages_request(request), |body| {
        read_answer(body, &request.model)
    })
    .await
}

/// One Messages API call with a body the caller built (tool definitions, `tool_use` and
/// `tool_result` blocks), with the headers, retries and errors of [`complete`]: the answer as
/// JSON and the HTTP attempts made.
pub(crate) async fn messages_json(
    http: &reqwest::Client,
    settings: &ClientSettings,
    endpoint: &Endpoint,
    body: &serde_json::Value,
) -> Result<(serde_json::Value, u32), Error> {
    let call = JsonCall {
        provider: Provider::Anthropic,
        key_header: "x-api-key",
        extra_headers: &[("anthropic-version", API_VERSION)],
        path: &["v1", "messages"],
    };
    call.send(http, settings, endpoint, body, |answer| {
        serde_json::from_slice(answer)
            .map_err(|error| format!("the answer is not a Messages API response: {error}"))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::super::sample_request;
    use super::*;

    #[test]
    fn the_request_body_has_a_top_level_system_and_alternating_turns() {
        let body = serde_json::to_vec(&messages_request(&sample_request())).expect("serializes");
        let wire: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        insta::assert_json_snapshot!(wire);
    }

    #[test]
    fn an_empty_system_prompt_is_left_out() {
        let request = Request { system: String::new(), ..sample_request() };
        let wire = serde_json::to_value(messages_request(&request)).expect("serializes");
        assert!(wire.get("system").is_none(), "{wire}");
    }

    #[test]
    fn answers_are_read_or_refused_with_a_reason() {
        let cases: [(&str, &str, Result<Answer, &str>); 7] = [
            (
                "one text block",
                r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"SELECT 1"}],"model":"claude-sonnet-4-5-20250929","stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":4}}"#,
                Ok(Answer {
                    text: "SELECT 1".to_owned(),
                    model: "claude-sonnet-4-5-20250929".to_owned(),
                    prompt_tokens: Some(12),
                    completion_tokens: Some(4),
                }),
            ),
            (
                "text blocks joined, thinking skipped, no usage, no model",
                r#"{"type":"message","content":[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"text","text":"Hello, "},{"type":"text","text":"world"}]}"#,
                Ok(Answer {
                    text: "Hello, world".to_owned(),
                    model: "claude-test".to_owned(),
                    prompt_tokens: None,
                    completion_tokens: None,
                }),
            ),
            (
                "no text block",
                r#"{"type":"message","content":[],"stop_reason":"refusal","usage":{"input_tokens":3,"output_tokens":0}}"#,
                Err("the answer holds no text (stop reason `refusal`)"),
            ),
            (
                "only whitespace",
                r#"{"type":"message","content":[{"type":"text","text":"  "}]}"#,
                Err("the answer holds no text"),
            ),
            (
                "no content",
                r#"{"type":"message","role":"assistant"}"#,
                Err("the answer has no `content`"),
            ),
            (
                "not JSON",
                "<html>",
                Err("the answer is not a Messages API response: expected value at line 1 column 1"),
            ),
            (
                "content of the wrong type",
                r#"{"content":"hi"}"#,
                Err(
                    "the answer is not a Messages API response: invalid type: string \"hi\", expected a sequence at line 1 column 15",
                ),
            ),
        ];
        for (name, body, expected) in cases {
            let got = read_answer(body.as_bytes(), "claude-test");
            assert_eq!(got, expected.map_err(str::to_owned), "{name}");
        }
    }
}
