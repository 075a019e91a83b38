//! Google's Gemini `generateContent` over reqwest: `POST
//! {base}/v1beta/models/{model}:generateContent` with the key in `x-goog-api-key` (never in the
//! URL, which ends up in messages and logs), the system prompt as `systemInstruction`, the
//! first candidate's text parts joined.

use serde::{Deserialize, Serialize};

use super::transport::JsonCall;
use super::{Answer, ClientSettings, Endpoint, Error, Provider, Request, Role};

/// Where the Gemini API lives; `/v1beta/models/{model}:generateContent` is appended.
pub(crate) const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The body of `generateContent`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GenerateContentRequest<'a> {
    /// Left out when the system prompt is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<Content<'a>>,
    contents: Vec<Content<'a>>,
    generation_config: GenerationConfig,
}

/// A turn (or the system instruction, which has no role) holding one text part.
#[derive(Debug, Serialize)]
struct Content<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: [Part<'a>; 1],
}

#[derive(Debug, Serialize)]
struct Part<'a> {
    text: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    temperature: f32,
    max_output_tokens: u32,
}

/// The `generateContent` body for `request`; assistant turns have the role `model`.
pub(crate) fn generate_content_request(request: &Request) -> GenerateContentRequest<'_> {
    let system_instruction = (!request.system.is_empty())
        .then(|| Content { role: None, parts: [Part { text: &request.system }] });
    let contents = request
        .messages
        .iter()
        .map(|message| Content {
            role: Some(match message.role {
                Role::User => "user",
                Role::Assistant => "model",
            }),
            parts: [Part { text: &message.content }],
        })
        .collect();
    GenerateContentRequest {
        system_instruction,
        contents,
        generation_config: GenerationConfig {
            temperature: request.temperature,
            max_output_tokens: request.max_tokens,
        },
    }
}

/// The model's name as the URL wants it: without the `models/` prefix the API itself uses in
/// resource names.
pub(crate) fn model_id(model: &str) -> &str {
    let model = model.trim();
    model.strip_prefix("models/").unwrap_or(model)
}

/// The parts of a `generateContent` answer orca reads; anything else is ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GenerateContentResponse {
    candidates: Option<Vec<Candidate>>,
    prompt_feedback: Option<PromptFeedback>,
    usage_metadata: Option<UsageMetadata>,
    model_version: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    content: Option<CandidateContent>,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CandidateContent {
    parts: Option<Vec<ResponsePart>>,
}

#[derive(Debug, Deserialize)]
struct ResponsePart {
    text: Option<String>,
    /// A thought summary of a thinking model, not part of the answer.
    #[serde(default)]
    thought: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    block_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    prompt_token_count: Option<i64>,
    candidates_token_count: Option<i64>,
}

/// Reads a `generateContent` answer: the first candidate's text parts joined (thoughts
/// skipped). A blocked prompt or a candidate without text is an error that says why.
pub(crate) fn read_answer(body: &[u8], requested_model: &str) -> Result<Answer, String> {
    let response: GenerateContentResponse = serde_json::from_slice(body)
        .map_err(|error| format!("the answer is not a generateContent response: {error}"))?;
    let block_reason = response.prompt_feedback.and_then(|feedback| feedback.block_reason);
    let Some(candidate) = response.candidates.and_then(|candidates| candidates.into_iter().next())
    else {
        return Err(match block_reason {
            Some(reason) => format!("the prompt was blocked (block reason `{reason}`)"),
            None => "the answer has no candidates".to_owned(),
        });
    };
    let text: String = candidate
        .content
        .and_then(|content| content.parts)
        .unwrap_or_default()
        .into_iter()
        .filter(|part| !part.thought)
        .filter_map(|part| part.text)
        .collect();
    if text.trim().is_empty() {
        return Err(match (block_reason, candidate.finish_reason) {
            (Some(reason), _) => format!("the prompt was blocked (block reason `{reason}`)"),
            (None, Some(reason)) => format!("the answer holds no text (finish reason `{reason}`)"),
            (None, None) => "the answer holds no text".to_owned(),
        });
    }
    let usage = response.usage_metadata;
    Ok(Answer {
        text,
        model: response
            .model_version
            .filter(|model| !model.is_empty())
            .unwrap_or_else(|| model_id(requested_model).to_owned()),
        prompt_tokens: usage.as_ref().and_then(|usage| usage.prompt_token_count),
        completion_tokens: usage.as_ref().and_then(|usage| usage.candidates_token_count),
    })
}

/// Asks Gemini; returns the answer and the HTTP attempts made.
pub(crate) async fn complete(
    http: &reqwest::Client,
    settings: &ClientSettings,
    endpoint: &Endpoint,
    request: &Request,
) -> Result<(Answer, u32), Error> {
    let method = format!("{}:generateContent", model_id(&request.model));
    let call = JsonCall {
        provider: Provider::Google,
        key_header: "x-goog-api-key",
        extra_headers: &[],
        path: &["v1beta", "models", &method],
    };
    call.send(http, settings, endpoint, &generate_content_request(request), |body| {
        read_answer(body, &request.model)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::super::sample_request;
    use super::*;

    #[test]
    fn the_request_body_has_a_system_instruction_and_model_turns() {
        let body =
            serde_json::to_vec(&generate_content_request(&sample_request())).expect("serializes");
        let wire: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        insta::assert_json_snapshot!(wire);
    }

    #[test]
    fn an_empty_system_prompt_is_left_out() {
        let request = Request { system: String::new(), ..sample_request() };
        let wire = serde_json::to_value(generate_content_request(&request)).expect("serializes");
        assert!(wire.get("systemInstruction").is_none(), "{wire}");
    }

    #[test]
    fn model_names_lose_their_resource_prefix() {
        let cases = [
            ("gemini-2.5-flash", "gemini-2.5-flash"),
            ("models/gemini-2.5-flash", "gemini-2.5-flash"),
            (" models/gemini-2.5-pro ", "gemini-2.5-pro"),
            ("tunedModels/mine", "tunedModels/mine"),
        ];
        for (given, expected) in cases {
            assert_eq!(model_id(given), expected, "{given:?}");
        }
    }

    #[test]
    fn answers_are_read_or_refused_with_a_reason() {
        let cases: [(&str, &str, Result<Answer, &str>); 9] = [
            (
                "one candidate",
                r#"{"candidates":[{"content":{"parts":[{"text":"SELECT 1"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":3,"totalTokenCount":13},"modelVersion":"gemini-2.5-flash","responseId":"abc"}"#,
                Ok(Answer {
                    text: "SELECT 1".to_owned(),
                    model: "gemini-2.5-flash".to_owned(),
                    prompt_tokens: Some(10),
                    completion_tokens: Some(3),
                }),
            ),
            (
                "parts joined, thoughts skipped, no usage, no model version",
                r#"{"candidates":[{"content":{"parts":[{"text":"thinking...","thought":true},{"text":"Hello, "},{"text":"world"}],"role":"model"},"finishReason":"STOP"}]}"#,
                Ok(Answer {
                    text: "Hello, world".to_owned(),
                    model: "gemini-test".to_owned(),
                    prompt_tokens: None,
                    completion_tokens: None,
                }),
            ),
            (
                "blocked prompt",
                r#"{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}"#,
                Err("the prompt was blocked (block reason `SAFETY`)"),
            ),
            (
                "candidate stopped for safety",
                r#"{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[]}]}"#,
                Err("the answer holds no text (finish reason `SAFETY`)"),
            ),
            (
                "candidate with empty parts",
                r#"{"candidates":[{"content":{"parts":[],"role":"model"},"finishReason":"MAX_TOKENS"}]}"#,
                Err("the answer holds no text (finish reason `MAX_TOKENS`)"),
            ),
            ("no candidates", r#"{"candidates":[]}"#, Err("the answer has no candidates")),
            ("empty object", "{}", Err("the answer has no candidates")),
            (
                "not JSON",
                "",
                Err(
                    "the answer is not a generateContent response: EOF while parsing a value at line 1 column 0",
                ),
            ),
            (
                "candidates of the wrong type",
                r#"{"candidates":{}}"#,
                Err(
                    "the answer is not a generateContent response: invalid type: map, expected a sequence at line 1 column 14",
                ),
            ),
        ];
        for (name, body, expected) in cases {
            let got = read_answer(body.as_bytes(), "models/gemini-test");
            assert_eq!(got, expected.map_err(str::to_owned), "{name}");
        }
    }
}
