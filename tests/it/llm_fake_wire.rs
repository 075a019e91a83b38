//! Self-tests of the fake LLM providers (`support::fake_llm`), driven with reqwest (and
//! async-openai, the client orca uses for OpenAI): each wire answers a valid request in the real
//! service's format, refuses and records every request that breaks its rules, and plays its
//! script (texts in order, errors, hangs, malformed bodies).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::fake_llm::{
    ANTHROPIC_KEY, FakeLlm, GEMINI_KEY, OPENAI_KEY, Reply, Wire, stable_body,
};

const OPENAI_MODEL: &str = "gpt-4o-mini";
const ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
const GEMINI_MODEL: &str = "gemini-2.0-flash";

const WIRES: [Wire; 3] = [Wire::OpenAi, Wire::Anthropic, Wire::Gemini];

const SYSTEM: &str = "You write SQL for PostgreSQL.";
const QUESTION: &str = "How many orders are there?";
const EARLIER_ANSWER: &str = "SELECT count(*) FROM orders";
const FOLLOW_UP: &str = "And customers?";

/// The conversation every valid request carries, as `FakeLlm::conversation_text` joins it.
fn conversation() -> String {
    [SYSTEM, QUESTION, EARLIER_ANSWER, FOLLOW_UP].join("\n")
}

fn url(fake: &FakeLlm, wire: Wire) -> String {
    match wire {
        Wire::OpenAi => format!("{}/chat/completions", fake.openai_base_url()),
        Wire::Anthropic => format!("{}/v1/messages", fake.anthropic_base_url()),
        Wire::Gemini => {
            format!("{}/v1beta/models/{GEMINI_MODEL}:generateContent", fake.gemini_base_url())
        }
    }
}

type Headers = Vec<(&'static str, String)>;

/// The headers a correct client sends.
fn valid_headers(wire: Wire) -> Headers {
    let mut headers = vec![("content-type", "application/json".to_owned())];
    match wire {
        Wire::OpenAi => headers.push(("authorization", format!("Bearer {OPENAI_KEY}"))),
        Wire::Anthropic => {
            headers.push(("x-api-key", ANTHROPIC_KEY.to_owned()));
            headers.push(("anthropic-version", "2023-06-01".to_owned()));
        }
        Wire::Gemini => headers.push(("x-goog-api-key", GEMINI_KEY.to_owned())),
    }
    headers
}

fn headers_without(wire: Wire, name: &str) -> Headers {
    valid_headers(wire).into_iter().filter(|(header, _)| *header != name).collect()
}

fn headers_with(wire: Wire, name: &'static str, value: &str) -> Headers {
    let mut headers = headers_without(wire, name);
    headers.push((name, value.to_owned()));
    headers
}

/// A correct request body: a system prompt and three alternating turns.
fn valid_body(wire: Wire) -> Value {
    match wire {
        Wire::OpenAi => json!({
            "model": OPENAI_MODEL,
            "messages": [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": EARLIER_ANSWER},
                {"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}]},
            ],
            "temperature": 0.0,
            "max_completion_tokens": 200,
        }),
        Wire::Anthropic => json!({
            "model": ANTHROPIC_MODEL,
            "max_tokens": 200,
            "system": SYSTEM,
            "messages": [
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": EARLIER_ANSWER},
                {"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}]},
            ],
            "temperature": 0.0,
        }),
        Wire::Gemini => json!({
            "systemInstruction": {"parts": [{"text": SYSTEM}]},
            "contents": [
                {"role": "user", "parts": [{"text": QUESTION}]},
                {"role": "model", "parts": [{"text": EARLIER_ANSWER}]},
                {"role": "user", "parts": [{"text": FOLLOW_UP}]},
            ],
            "generationConfig": {"temperature": 0.0, "maxOutputTokens": 200},
        }),
    }
}

/// `valid_body` with one top-level field set (`Value::Null` removes it).
fn body_with(wire: Wire, field: &str, value: Value) -> Value {
    let mut body = valid_body(wire);
    let object = body.as_object_mut().unwrap();
    if value.is_null() {
        object.remove(field);
    } else {
        object.insert(field.to_owned(), value);
    }
    body
}

/// What came back.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.text))
    }
}

async fn try_send(
    method: reqwest::Method,
    url: &str,
    headers: &Headers,
    body: String,
) -> Result<Answer, reqwest::Error> {
    let mut request = reqwest::Client::new().request(method, url).body(body);
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await?;
    Ok(Answer {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        text: response.text().await?,
    })
}

async fn send_raw(method: reqwest::Method, url: &str, headers: &Headers, body: String) -> Answer {
    try_send(method, url, headers, body).await.expect("the fake LLM server did not answer")
}

fn wire_index(wire: Wire) -> usize {
    WIRES.iter().position(|known| *known == wire).unwrap()
}

async fn send(url: &str, headers: &Headers, body: &Value) -> Answer {
    send_raw(reqwest::Method::POST, url, headers, body.to_string()).await
}

async fn send_valid(fake: &FakeLlm, wire: Wire) -> Answer {
    send(&url(fake, wire), &valid_headers(wire), &valid_body(wire)).await
}

/// The text a success answer carries, read the way a client of the wire reads it.
fn text_of(wire: Wire, body: &Value) -> String {
    let text = match wire {
        Wire::OpenAi => &body["choices"][0]["message"]["content"],
        Wire::Anthropic => &body["content"][0]["text"],
        Wire::Gemini => &body["candidates"][0]["content"]["parts"][0]["text"],
    };
    text.as_str().unwrap_or_else(|| panic!("no text in {body}")).to_owned()
}

/// The error's machine-readable kind: OpenAI's `type`, Anthropic's `error.type`, Gemini's
/// `status`; and checks the rest of the wire's error shape.
fn error_kind(wire: Wire, status: u16, body: &Value) -> String {
    let error = body["error"].as_object().unwrap_or_else(|| panic!("no error object: {body}"));
    assert!(error["message"].is_string(), "{body}");
    match wire {
        Wire::OpenAi => {
            assert!(error.contains_key("param") && error.contains_key("code"), "{body}");
            error["type"].as_str().unwrap().to_owned()
        }
        Wire::Anthropic => {
            assert_eq!(body["type"], "error", "{body}");
            assert!(body["request_id"].is_string(), "{body}");
            error["type"].as_str().unwrap().to_owned()
        }
        Wire::Gemini => {
            assert_eq!(error["code"], status, "{body}");
            error["status"].as_str().unwrap().to_owned()
        }
    }
}

/// `value` with `fields` replaced by `"<fake>"` after checking they are there.
fn without_variable(mut value: Value, fields: &[&str]) -> Value {
    for field in fields {
        let slot = value.pointer_mut(field).unwrap_or_else(|| panic!("no {field}"));
        assert!(!slot.is_null(), "{field} is null");
        *slot = json!("<fake>");
    }
    value
}

#[tokio::test]
async fn a_valid_request_on_each_wire_gets_the_scripted_text_in_the_wire_format() {
    let fake = FakeLlm::start().await;
    for wire in WIRES {
        fake.script(wire, [Reply::Text(format!("SELECT count(*) FROM customers -- {wire:?}"))]);
    }
    let prompt_tokens = conversation().chars().count() / 4;
    for wire in WIRES {
        let text = format!("SELECT count(*) FROM customers -- {wire:?}");
        let completion_tokens = text.chars().count() / 4;
        let answer = send_valid(&fake, wire).await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert!(
            answer.headers["content-type"].to_str().unwrap().starts_with("application/json"),
            "{:?}",
            answer.headers
        );
        let body = answer.json();
        assert_eq!(text_of(wire, &body), text);
        let expected = match wire {
            Wire::OpenAi => {
                assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
                assert!(body["created"].as_u64().unwrap() > 1_700_000_000);
                assert_eq!(
                    without_variable(body.clone(), &["/id", "/created"]),
                    json!({
                        "id": "<fake>",
                        "object": "chat.completion",
                        "created": "<fake>",
                        "model": OPENAI_MODEL,
                        "choices": [{
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": text,
                                "refusal": null,
                                "annotations": [],
                            },
                            "logprobs": null,
                            "finish_reason": "stop",
                        }],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                            "completion_tokens_details": {
                                "reasoning_tokens": 0,
                                "audio_tokens": 0,
                                "accepted_prediction_tokens": 0,
                                "rejected_prediction_tokens": 0,
                            },
                        },
                        "service_tier": "default",
                        "system_fingerprint": null,
                    })
                );
                // What async-openai, orca's OpenAI client, makes of it.
                let parsed: async_openai::types::chat::CreateChatCompletionResponse =
                    serde_json::from_value(body.clone()).expect("async-openai cannot read it");
                assert_eq!(parsed.choices[0].message.content.as_deref(), Some(text.as_str()));
                assert_eq!(parsed.usage.unwrap().prompt_tokens as usize, prompt_tokens);
                continue;
            }
            Wire::Anthropic => {
                assert!(body["id"].as_str().unwrap().starts_with("msg_"));
                json!({
                    "id": "<fake>",
                    "type": "message",
                    "role": "assistant",
                    "model": ANTHROPIC_MODEL,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": null,
                    "usage": {
                        "input_tokens": prompt_tokens,
                        "output_tokens": completion_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "service_tier": "standard",
                    },
                })
            }
            Wire::Gemini => json!({
                "candidates": [{
                    "content": {"parts": [{"text": text}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 0,
                }],
                "usageMetadata": {
                    "promptTokenCount": prompt_tokens,
                    "candidatesTokenCount": completion_tokens,
                    "totalTokenCount": prompt_tokens + completion_tokens,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}],
                },
                "modelVersion": GEMINI_MODEL,
                "responseId": "<fake>",
            }),
        };
        let variable: &[&str] = match wire {
            Wire::Gemini => &["/responseId"],
            _ => &["/id"],
        };
        assert_eq!(without_variable(body, variable), expected);
    }
    assert_eq!(fake.violations(), Vec::<String>::new());
    let requests = fake.requests();
    assert_eq!(requests.iter().map(|request| request.wire).collect::<Vec<_>>(), WIRES);
    for (request, wire) in requests.iter().zip(WIRES) {
        assert_eq!(FakeLlm::conversation_text(request), conversation(), "{wire:?}");
        assert_eq!(stable_body(request), valid_body(wire));
        assert!(!request.key_in_url);
    }
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].headers["authorization"], format!("Bearer {OPENAI_KEY}"));
    assert_eq!(requests[1].path, "/v1/messages");
    assert_eq!(requests[1].headers["anthropic-version"], "2023-06-01");
    assert_eq!(requests[2].path, format!("/v1beta/models/{GEMINI_MODEL}:generateContent"));
    assert_eq!(requests[2].headers["x-goog-api-key"], GEMINI_KEY);
    assert!(requests.windows(2).all(|pair| pair[0].at <= pair[1].at));
}

#[tokio::test]
async fn async_openai_talks_to_the_fake_without_a_violation_and_reads_its_errors() {
    use async_openai::config::OpenAIConfig;
    use async_openai::types::chat::{
        ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
        CreateChatCompletionRequestArgs,
    };

    let fake = FakeLlm::start().await;
    fake.script(
        Wire::OpenAi,
        [Reply::Text("SELECT 42".to_owned()), Reply::Error { status: 404, retry_after: None }],
    );
    let config = OpenAIConfig::new().with_api_base(fake.openai_base_url()).with_api_key(OPENAI_KEY);
    let client = async_openai::Client::with_config(config);
    let request = CreateChatCompletionRequestArgs::default()
        .model(OPENAI_MODEL)
        .messages([
            ChatCompletionRequestSystemMessage::from(SYSTEM).into(),
            ChatCompletionRequestUserMessage::from(QUESTION).into(),
        ])
        .temperature(0.0)
        .max_completion_tokens(200u32)
        .build()
        .unwrap();
    let response = client.chat().create(request.clone()).await.expect("the fake refused");
    assert_eq!(response.choices[0].message.content.as_deref(), Some("SELECT 42"));
    let error = client.chat().create(request).await.expect_err("a scripted 404");
    match error {
        async_openai::error::OpenAIError::ApiError(error) => {
            assert_eq!(error.status_code.as_u16(), 404);
            assert_eq!(error.api_error.code.as_deref(), Some("model_not_found"));
            assert!(error.api_error.message.contains(OPENAI_MODEL), "{}", error.api_error.message);
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(FakeLlm::conversation_text(&fake.requests()[0]), [SYSTEM, QUESTION].join("\n"));
}

#[tokio::test]
async fn scripted_replies_are_answered_in_order_and_each_wire_has_its_own_queue() {
    let fake = FakeLlm::start().await;
    fake.script(Wire::OpenAi, [Reply::Text("first".to_owned())]);
    fake.script(Wire::Anthropic, [Reply::Text("anthropic".to_owned())]);
    fake.script(Wire::OpenAi, [Reply::Text("second".to_owned()), Reply::Text("third".to_owned())]);
    let mut texts = Vec::new();
    for wire in [Wire::OpenAi, Wire::OpenAi, Wire::Anthropic, Wire::OpenAi] {
        let answer = send_valid(&fake, wire).await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        texts.push(text_of(wire, &answer.json()));
    }
    assert_eq!(texts, ["first", "second", "anthropic", "third"]);
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn an_unscripted_call_is_answered_with_a_500_saying_no_scripted_reply() {
    let fake = FakeLlm::start().await;
    for wire in WIRES {
        let answer = send_valid(&fake, wire).await;
        assert_eq!(answer.status, 500, "{wire:?}: {}", answer.text);
        let body = answer.json();
        let kind = error_kind(wire, 500, &body);
        assert_eq!(kind, ["server_error", "api_error", "INTERNAL"][wire_index(wire)]);
        assert!(body["error"]["message"].as_str().unwrap().contains("no scripted reply"), "{body}");
    }
    // A missing script is the test's fault, not a broken wire rule.
    assert_eq!(fake.violations(), Vec::<String>::new());
    assert_eq!(fake.requests().len(), 3);
}

/// A request that breaks one rule of its wire.
struct Case {
    wire: Wire,
    headers: Headers,
    body: String,
    status: u16,
    violation: &'static str,
}

fn case(wire: Wire, headers: Headers, body: Value, status: u16, violation: &'static str) -> Case {
    Case { wire, headers, body: body.to_string(), status, violation }
}

fn rule_violations() -> Vec<Case> {
    use Wire::{Anthropic, Gemini, OpenAi};
    let openai_messages = |messages: Value| body_with(OpenAi, "messages", messages);
    let anthropic_messages = |messages: Value| body_with(Anthropic, "messages", messages);
    let gemini_contents = |contents: Value| body_with(Gemini, "contents", contents);
    let user = |text: &str| json!({"role": "user", "content": text});
    let assistant = |text: &str| json!({"role": "assistant", "content": text});
    let gemini_turn = |role: &str, text: &str| json!({"role": role, "parts": [{"text": text}]});
    let mut bearer_instead_of_x_api_key = headers_without(Anthropic, "x-api-key");
    bearer_instead_of_x_api_key.push(("authorization", format!("Bearer {ANTHROPIC_KEY}")));
    vec![
        // OpenAI.
        case(
            OpenAi,
            headers_without(OpenAi, "authorization"),
            valid_body(OpenAi),
            401,
            "You didn't provide an API key",
        ),
        case(
            OpenAi,
            headers_with(OpenAi, "authorization", "Bearer sk-wrong-key-1234"),
            valid_body(OpenAi),
            401,
            "Incorrect API key provided: sk-**********1234",
        ),
        case(
            OpenAi,
            headers_with(OpenAi, "authorization", OPENAI_KEY),
            valid_body(OpenAi),
            401,
            "Incorrect API key provided",
        ),
        case(
            OpenAi,
            headers_with(OpenAi, "content-type", "text/plain"),
            valid_body(OpenAi),
            400,
            "content-type must be application/json",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            body_with(OpenAi, "top_k", json!(5)),
            400,
            "Unrecognized request argument supplied: top_k",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            body_with(OpenAi, "model", Value::Null),
            400,
            "you must provide a model parameter",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            body_with(OpenAi, "messages", Value::Null),
            400,
            "Missing required parameter: 'messages'",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            openai_messages(json!([])),
            400,
            "[] is too short - 'messages'",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            openai_messages(json!([{"role": "bot", "content": "hi"}])),
            400,
            "Invalid value: 'bot'",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            openai_messages(json!([{"role": "user"}])),
            400,
            "Invalid type for 'messages[0].content'",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            openai_messages(json!([{"role": "user", "content": "hi", "temperature": 0}])),
            400,
            "('temperature' was unexpected)",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            openai_messages(
                json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
            ),
            400,
            "Invalid content part 'messages[0].content[0]'",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            body_with(OpenAi, "temperature", json!(2.5)),
            400,
            "Invalid 'temperature'",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            body_with(OpenAi, "max_completion_tokens", json!(0)),
            400,
            "Invalid 'max_completion_tokens'",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            body_with(OpenAi, "max_tokens", json!(100)),
            400,
            "both max_tokens and max_completion_tokens",
        ),
        case(
            OpenAi,
            valid_headers(OpenAi),
            body_with(OpenAi, "stream", json!(true)),
            400,
            "stream: true is not supported",
        ),
        // Anthropic.
        case(
            Anthropic,
            headers_without(Anthropic, "x-api-key"),
            valid_body(Anthropic),
            401,
            "x-api-key header is required",
        ),
        case(
            Anthropic,
            bearer_instead_of_x_api_key,
            valid_body(Anthropic),
            401,
            "x-api-key header is required",
        ),
        case(
            Anthropic,
            headers_with(Anthropic, "x-api-key", "sk-ant-wrong"),
            valid_body(Anthropic),
            401,
            "invalid x-api-key",
        ),
        case(
            Anthropic,
            headers_without(Anthropic, "anthropic-version"),
            valid_body(Anthropic),
            400,
            "anthropic-version: header is required",
        ),
        case(
            Anthropic,
            headers_with(Anthropic, "anthropic-version", "2024-01-01"),
            valid_body(Anthropic),
            400,
            "anthropic-version: invalid version",
        ),
        case(
            Anthropic,
            headers_without(Anthropic, "content-type"),
            valid_body(Anthropic),
            400,
            "content-type must be application/json",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            body_with(Anthropic, "max_tokens", Value::Null),
            400,
            "max_tokens: Field required",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            body_with(Anthropic, "model", Value::Null),
            400,
            "model: Field required",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            body_with(Anthropic, "max_completion_tokens", json!(10)),
            400,
            "max_completion_tokens: Extra inputs are not permitted",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            body_with(Anthropic, "temperature", json!(1.5)),
            400,
            "temperature: Input should be less than or equal to 1",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            body_with(Anthropic, "system", json!([{"type": "text"}])),
            400,
            "system.0.text: Field required",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            anthropic_messages(json!([])),
            400,
            "messages: at least one message is required",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            anthropic_messages(json!([assistant("hi"), user("hello")])),
            400,
            "first message must use the \"user\" role",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            anthropic_messages(json!([user("a"), user("b")])),
            400,
            "roles must alternate between \"user\" and \"assistant\"",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            anthropic_messages(json!([{"role": "system", "content": "x"}, user("a")])),
            400,
            "messages.0.role: Input should be 'user' or 'assistant'",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            anthropic_messages(json!([user(""), assistant("b"), user("c")])),
            400,
            "all messages must have non-empty content",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            anthropic_messages(
                json!([{"role": "user", "content": [{"type": "text", "text": ""}]}]),
            ),
            400,
            "text content blocks must be non-empty",
        ),
        case(
            Anthropic,
            valid_headers(Anthropic),
            body_with(Anthropic, "stream", json!(true)),
            400,
            "stream: true is not supported",
        ),
        // Gemini.
        case(
            Gemini,
            headers_without(Gemini, "x-goog-api-key"),
            valid_body(Gemini),
            403,
            "Method doesn't allow unregistered callers",
        ),
        case(
            Gemini,
            headers_with(Gemini, "x-goog-api-key", "wrong"),
            valid_body(Gemini),
            400,
            "API key not valid. Please pass a valid API key.",
        ),
        case(
            Gemini,
            headers_with(Gemini, "authorization", &format!("Bearer {GEMINI_KEY}")),
            valid_body(Gemini),
            401,
            "Expected OAuth 2 access token",
        ),
        case(
            Gemini,
            headers_without(Gemini, "content-type"),
            valid_body(Gemini),
            400,
            "content-type must be application/json",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            gemini_contents(json!([])),
            400,
            "contents is not specified",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            body_with(Gemini, "contents", Value::Null),
            400,
            "contents is not specified",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            gemini_contents(json!([
                gemini_turn("user", "a"),
                gemini_turn("assistant", "b"),
                gemini_turn("user", "c")
            ])),
            400,
            "Please use a valid role: user, model.",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            gemini_contents(json!([gemini_turn("user", "a"), gemini_turn("user", "b")])),
            400,
            "alternate between user and model",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            gemini_contents(json!([gemini_turn("user", "a"), gemini_turn("model", "b")])),
            400,
            "ends with a user role",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            gemini_contents(json!([gemini_turn("model", "a")])),
            400,
            "contents[0].role must be \"user\"",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            gemini_contents(json!([{"role": "user", "parts": []}])),
            400,
            "contents.parts must not be empty",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            gemini_contents(json!([{"role": "user", "parts": [{"text": "a", "role": "user"}]}])),
            400,
            "the fake accepts only {\"text\": ...} parts",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            body_with(Gemini, "temperature", json!(0.5)),
            400,
            "Unknown name \"temperature\": Cannot find field.",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            body_with(Gemini, "system_instruction", json!({"parts": [{"text": "x"}]})),
            400,
            "given twice",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            body_with(Gemini, "generationConfig", json!({"max_tokens": 10})),
            400,
            "Unknown name \"max_tokens\" at 'generation_config'",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            body_with(Gemini, "generationConfig", json!({"temperature": 3.0})),
            400,
            "temperature must be in the range [0.0, 2.0]",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            body_with(Gemini, "generationConfig", json!({"maxOutputTokens": 0})),
            400,
            "generation_config.max_output_tokens: must be a positive integer",
        ),
        case(
            Gemini,
            valid_headers(Gemini),
            body_with(Gemini, "systemInstruction", json!("be brief")),
            400,
            "Invalid value at 'system_instruction'",
        ),
    ]
}

#[tokio::test]
async fn every_rule_violation_is_recorded_and_answered_with_the_wire_error_without_consuming_a_reply()
 {
    let fake = FakeLlm::start().await;
    for wire in WIRES {
        fake.script(wire, [Reply::Text(format!("still scripted for {wire:?}"))]);
    }
    let mut cases = rule_violations();
    // A body that is not JSON at all, on each wire.
    for (wire, violation) in [
        (Wire::OpenAi, "We could not parse the JSON body of your request"),
        (Wire::Anthropic, "The request body is not valid JSON"),
        (Wire::Gemini, "Invalid JSON payload received"),
    ] {
        cases.push(Case {
            wire,
            headers: valid_headers(wire),
            body: "{\"model\": ".to_owned(),
            status: 400,
            violation,
        });
    }
    for (number, case) in cases.iter().enumerate() {
        let before = fake.violations().len();
        let requests_before = fake.requests().len();
        let answer = send_raw(
            reqwest::Method::POST,
            &url(&fake, case.wire),
            &case.headers,
            case.body.clone(),
        )
        .await;
        let what = format!("case {number} ({:?}, expecting {:?})", case.wire, case.violation);
        assert_eq!(answer.status, case.status, "{what}: {}", answer.text);
        let body = answer.json();
        let kind = error_kind(case.wire, case.status, &body);
        let expected_kind = match (case.wire, case.status) {
            (Wire::OpenAi, _) => "invalid_request_error",
            (Wire::Anthropic, 401) => "authentication_error",
            (Wire::Anthropic, _) => "invalid_request_error",
            (Wire::Gemini, 400) => "INVALID_ARGUMENT",
            (Wire::Gemini, 401) => "UNAUTHENTICATED",
            (Wire::Gemini, _) => "PERMISSION_DENIED",
        };
        assert_eq!(kind, expected_kind, "{what}: {body}");
        let new = fake.violations()[before..].to_vec();
        assert!(new.iter().any(|line| line.contains(case.violation)), "{what}: recorded {new:#?}");
        let prefix = ["openai /v1/", "anthropic /v1/", "gemini /v1beta/"][wire_index(case.wire)];
        assert!(new.iter().all(|line| line.starts_with(prefix)), "{what}: {new:#?}");
        // The answer is about the first broken rule, which the test made the only one.
        assert_eq!(new.len(), 1, "{what}: {new:#?}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(case.violation),
            "{what}: {body}"
        );
        assert_eq!(fake.requests().len(), requests_before + 1, "{what}");
    }
    // Gemini's wrong key says why in an ErrorInfo detail, as the real API does.
    let answer = send(
        &url(&fake, Wire::Gemini),
        &headers_with(Wire::Gemini, "x-goog-api-key", "wrong"),
        &valid_body(Wire::Gemini),
    )
    .await;
    assert_eq!(answer.json()["error"]["details"][0]["reason"], "API_KEY_INVALID");
    // No violation consumed a scripted reply.
    for wire in WIRES {
        let answer = send_valid(&fake, wire).await;
        assert_eq!(answer.status, 200, "{wire:?}: {}", answer.text);
        assert_eq!(text_of(wire, &answer.json()), format!("still scripted for {wire:?}"));
    }
}

#[tokio::test]
async fn requests_to_unknown_endpoints_or_with_other_methods_are_violations() {
    let fake = FakeLlm::start().await;
    let base = fake.anthropic_base_url();
    for (method, path, status) in [
        (reqwest::Method::POST, "/v1/v1/chat/completions".to_owned(), 404),
        (reqwest::Method::POST, "/chat/completions".to_owned(), 404),
        (reqwest::Method::POST, format!("/v1/models/{GEMINI_MODEL}:generateContent"), 404),
        (
            reqwest::Method::POST,
            format!("/v1beta/models/{GEMINI_MODEL}:streamGenerateContent"),
            404,
        ),
        (reqwest::Method::GET, "/v1/chat/completions".to_owned(), 405),
        (reqwest::Method::GET, "/v1/messages".to_owned(), 405),
    ] {
        let before = fake.violations().len();
        let wire = if path.starts_with("/v1/messages") { Wire::Anthropic } else { Wire::OpenAi };
        let answer = send_raw(
            method.clone(),
            &format!("{base}{path}"),
            &valid_headers(wire),
            valid_body(wire).to_string(),
        )
        .await;
        assert_eq!(answer.status, status, "{method} {path}: {}", answer.text);
        assert!(answer.json()["error"]["message"].is_string(), "{}", answer.text);
        let new = fake.violations()[before..].to_vec();
        assert_eq!(new.len(), 1, "{method} {path}: {new:#?}");
        assert!(new[0].contains(&path), "{new:#?}");
    }
}

/// (wire, status, retry-after, the error's kind, its OpenAI code)
type ScriptedError = (Wire, u16, Option<&'static str>, &'static str, Option<&'static str>);

#[tokio::test]
async fn scripted_errors_carry_the_wire_error_body_and_retry_after() {
    let fake = FakeLlm::start().await;
    let cases: [ScriptedError; 15] = [
        (Wire::OpenAi, 401, None, "invalid_request_error", Some("invalid_api_key")),
        (Wire::OpenAi, 404, None, "invalid_request_error", Some("model_not_found")),
        (Wire::OpenAi, 429, Some("1"), "requests", Some("rate_limit_exceeded")),
        (Wire::OpenAi, 400, None, "invalid_request_error", None),
        (Wire::OpenAi, 500, None, "server_error", None),
        (Wire::Anthropic, 400, None, "invalid_request_error", None),
        (Wire::Anthropic, 401, None, "authentication_error", None),
        (Wire::Anthropic, 429, Some("1"), "rate_limit_error", None),
        (Wire::Anthropic, 500, None, "api_error", None),
        (Wire::Anthropic, 529, Some("2"), "overloaded_error", None),
        (Wire::Gemini, 400, None, "INVALID_ARGUMENT", None),
        (Wire::Gemini, 403, None, "PERMISSION_DENIED", None),
        (Wire::Gemini, 429, Some("1"), "RESOURCE_EXHAUSTED", None),
        (Wire::Gemini, 500, None, "INTERNAL", None),
        (Wire::Gemini, 503, None, "UNAVAILABLE", None),
    ];
    for (wire, status, retry_after, _, _) in cases {
        fake.script(wire, [Reply::Error { status, retry_after: retry_after.map(str::to_owned) }]);
    }
    for (wire, status, retry_after, kind, code) in cases {
        let what = format!("{wire:?} {status}");
        let answer = send_valid(&fake, wire).await;
        assert_eq!(answer.status, status, "{what}: {}", answer.text);
        assert_eq!(
            answer.headers.get("retry-after").map(|value| value.to_str().unwrap()),
            retry_after,
            "{what}"
        );
        let body = answer.json();
        assert_eq!(error_kind(wire, status, &body), kind, "{what}: {body}");
        if wire == Wire::OpenAi {
            assert_eq!(body["error"]["code"].as_str(), code, "{what}: {body}");
        }
        if (wire, status) == (Wire::Gemini, 429) {
            assert_eq!(body["error"]["details"][0]["retryDelay"], "1s", "{body}");
        }
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.contains(OPENAI_KEY) && !message.contains(ANTHROPIC_KEY), "{message}");
    }
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_malformed_reply_returns_the_raw_body_with_status_200() {
    let fake = FakeLlm::start().await;
    let raw = ["{\"choices\": []}", "{\"content\": \"not a list\"", "{\"candidates\": [{}]}"];
    for (wire, raw) in WIRES.into_iter().zip(raw) {
        fake.script(wire, [Reply::Malformed(raw.to_owned())]);
        let answer = send_valid(&fake, wire).await;
        assert_eq!(answer.status, 200, "{wire:?}");
        assert_eq!(answer.text, raw, "{wire:?}");
        assert_eq!(answer.headers["content-type"], "application/json", "{wire:?}");
    }
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_hanging_reply_answers_late_without_blocking_other_requests() {
    let fake = FakeLlm::start().await;
    let hang = Duration::from_secs(5);
    fake.script(Wire::OpenAi, [Reply::Hang(hang)]);
    fake.script(Wire::Anthropic, [Reply::Text("fast".to_owned())]);
    let started = Instant::now();
    let (url, headers, body) =
        (url(&fake, Wire::OpenAi), valid_headers(Wire::OpenAi), valid_body(Wire::OpenAi));
    let hanging = tokio::spawn(async move { send(&url, &headers, &body).await });
    eventually("the hanging request reaches the fake", Duration::from_secs(20), || async {
        !fake.requests().is_empty()
    })
    .await;
    let fast = send_valid(&fake, Wire::Anthropic).await;
    assert_eq!(text_of(Wire::Anthropic, &fast.json()), "fast");
    assert!(!hanging.is_finished(), "the hanging request answered before the later, fast one");
    let late = hanging.await.unwrap();
    assert!(started.elapsed() >= hang, "answered after {:?}", started.elapsed());
    assert_eq!(late.status, 200, "{}", late.text);
    assert_eq!(text_of(Wire::OpenAi, &late.json()), "SELECT 1");
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_gemini_key_in_the_url_is_accepted_and_recorded() {
    let fake = FakeLlm::start().await;
    fake.script(
        Wire::Gemini,
        [Reply::Text("SELECT 1".to_owned()), Reply::Text("SELECT 2".to_owned())],
    );
    let in_url = format!("{}?key={GEMINI_KEY}", url(&fake, Wire::Gemini));
    let answer =
        send(&in_url, &headers_without(Wire::Gemini, "x-goog-api-key"), &valid_body(Wire::Gemini))
            .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let answer = send_valid(&fake, Wire::Gemini).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let requests = fake.requests();
    assert!(requests[0].key_in_url);
    assert_eq!(requests[0].path, format!("/v1beta/models/{GEMINI_MODEL}:generateContent"));
    assert!(!requests[1].key_in_url);
    assert_eq!(fake.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn the_environment_points_orca_at_the_fake_and_the_server_stops_when_dropped() {
    let fake = FakeLlm::start().await;
    let env = fake.env();
    let names: Vec<&str> = env.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            "GEMINI_BASE_URL",
            "GEMINI_API_KEY"
        ]
    );
    let value = |name: &str| env.iter().find(|(key, _)| key == name).unwrap().1.clone();
    assert_eq!(value("OPENAI_BASE_URL"), fake.openai_base_url());
    assert!(value("OPENAI_BASE_URL").starts_with("http://127.0.0.1:"));
    assert!(value("OPENAI_BASE_URL").ends_with("/v1"));
    assert_eq!(value("ANTHROPIC_BASE_URL"), fake.anthropic_base_url());
    assert_eq!(value("GEMINI_BASE_URL"), fake.gemini_base_url());
    assert_eq!(value("OPENAI_API_KEY"), OPENAI_KEY);
    assert_eq!(value("ANTHROPIC_API_KEY"), ANTHROPIC_KEY);
    assert_eq!(value("GEMINI_API_KEY"), GEMINI_KEY);

    fake.script(Wire::OpenAi, [Reply::Hang(Duration::from_secs(600))]);
    let address = url(&fake, Wire::OpenAi);
    let (headers, body) = (valid_headers(Wire::OpenAi), valid_body(Wire::OpenAi));
    let hanging_url = address.clone();
    let hanging = tokio::spawn(async move {
        try_send(reqwest::Method::POST, &hanging_url, &headers, body.to_string()).await
    });
    eventually("the hanging request reaches the fake", Duration::from_secs(20), || async {
        !fake.requests().is_empty()
    })
    .await;
    // Dropping the fake does not wait for the hanging answer; it closes the connection.
    drop(fake);
    let hung = hanging.await.unwrap();
    assert!(hung.is_err(), "the hanging request got an answer: {hung:?}");
    let refused = reqwest::Client::new()
        .post(&address)
        .timeout(Duration::from_secs(10))
        .body("{}")
        .send()
        .await;
    assert!(refused.is_err(), "the server still answers after the drop: {refused:?}");
}
