//! OpenAI and every OpenAI-compatible server (Ollama, vLLM, LM Studio, OpenRouter) through
//! async-openai's chat completions. Retries run inside async-openai's tower middleware with
//! orca's own [`Policy`], so that they follow the one policy of [`super::retry`] and are counted.
//!
//! # Design notes
//!
//! `openai.rs` goes through async-openai's `Client` with a tower service of orca's own under it
//! (`with_http_service`): the transport times each attempt and counts it, the retry policy is the
//! shared one; `max_completion_tokens` for OpenAI itself, `max_tokens` for compatible servers, no
//! `Authorization` header without a key.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, CreateChatCompletionRequest,
    CreateChatCompletionResponse, FinishReason,
};
use chrono::Utc;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use secrecy::{ExposeSecret as _, SecretString};
use tower::retry::{Policy, Retry};

use super::retry::{self, Decision, Outcome, Retries};
use super::transport::{self, Failure};
use super::{Answer, ClientSettings, Endpoint, Error, Provider, Request, Role};

/// OpenAI's own API; any other base URL is an OpenAI-compatible server.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Whether `base_url` is OpenAI's own API (which needs a key and knows
/// `max_completion_tokens`).
pub(crate) fn is_official(base_url: &str) -> bool {
    base_url.trim().trim_end_matches('/').eq_ignore_ascii_case(DEFAULT_BASE_URL)
}

/// The chat-completion request for `request`: the system message first, then the turns. The
/// token cap is `max_completion_tokens` for OpenAI itself and `max_tokens`, which every
/// compatible server knows, elsewhere.
#[expect(
    deprecated,
    reason = "`max_tokens` is deprecated by OpenAI but what compatible servers know"
)]
pub(crate) fn chat_request(request: &Request, official: bool) -> CreateChatCompletionRequest {
    let system = (!request.system.is_empty()).then(|| {
        ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(request.system.clone()),
            name: None,
        })
    });
    let turns = request.messages.iter().map(|message| match message.role {
        Role::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(message.content.clone()),
            name: None,
        }),
        Role::Assistant => {
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content: Some(ChatCompletionRequestAssistantMessageContent::Text(
                    message.content.clone(),
                )),
                ..ChatCompletionRequestAssistantMessage::default()
            })
        }
    });
    CreateChatCompletionRequest {
        model: request.model.clone(),
        messages: system.into_iter().chain(turns).collect(),
        temperature: Some(request.temperature),
        max_completion_tokens: official.then_some(request.max_tokens),
        max_tokens: (!official).then_some(request.max_tokens),
        ..CreateChatCompletionRequest::default()
    }
}

/// Reads a chat completion: the first choice's content. An empty choice list, a refusal or
/// filtered content is an error that says so.
pub(crate) fn read_answer(
    response: CreateChatCompletionResponse,
    requested_model: &str,
) -> Result<Answer, String> {
    let Some(choice) = response.choices.into_iter().next() else {
        return Err("the answer has no choices".to_owned());
    };
    let text = choice.message.content.unwrap_or_default();
    if text.trim().is_empty() {
        return Err(match (choice.message.refusal, choice.finish_reason) {
            (Some(refusal), _) => format!("the model refused: {}", transport::cut(&refusal)),
            (None, Some(reason)) => {
                format!("the answer holds no text (finish reason `{}`)", finish_reason_name(reason))
            }
            (None, None) => "the answer holds no text".to_owned(),
        });
    }
    let usage = response.usage;
    Ok(Answer {
        text,
        model: if response.model.is_empty() { requested_model.to_owned() } else { response.model },
        prompt_tokens: usage.as_ref().map(|usage| i64::from(usage.prompt_tokens)),
        completion_tokens: usage.as_ref().map(|usage| i64::from(usage.completion_tokens)),
    })
}

/// The wire name of a finish reason.
fn finish_reason_name(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::FunctionCall => "function_call",
    }
}

/// What the attempts of one call left behind, shared by the transport, the retry policy and
/// the caller.
#[derive(Debug, Clone, Default)]
struct CallLog {
    attempts: u32,
    /// The last attempt's failed answer; `None` when it succeeded or got no answer.
    failed: Option<FailedAnswer>,
}

#[derive(Debug, Clone)]
struct FailedAnswer {
    status: u16,
    failure: Failure,
    /// The wait the answer asked for (headers first, then the body).
    asked: Option<Duration>,
}

/// The log, even if a panicking thread poisoned it (it holds plain counters).
fn lock(log: &Mutex<CallLog>) -> MutexGuard<'_, CallLog> {
    log.lock().unwrap_or_else(PoisonError::into_inner)
}

type TransportFuture =
    Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send + 'static>>;

/// The innermost tower service: one HTTP attempt within the timeout, counted; a failed answer
/// is read in full (its message, the wait it asks for) and handed on rebuilt.
#[derive(Clone)]
struct Transport {
    http: reqwest::Client,
    timeout: Duration,
    /// Redacted from messages; without one, no `Authorization` header is sent at all.
    key: Option<SecretString>,
    log: Arc<Mutex<CallLog>>,
}

impl Transport {
    async fn send(self, factory: HttpRequestFactory) -> Result<reqwest::Response, OpenAIError> {
        let mut request = factory.build().await?;
        *request.timeout_mut() = Some(self.timeout);
        if self.key.is_none() {
            request.headers_mut().remove(AUTHORIZATION);
        }
        if let Some(traceparent) =
            crate::telemetry::traceparent().and_then(|text| HeaderValue::try_from(text).ok())
        {
            request.headers_mut().insert("traceparent", traceparent);
        }
        {
            let mut log = lock(&self.log);
            log.attempts += 1;
            log.failed = None;
        }
        let response = self.http.execute(request).await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let version = response.version();
        let headers = response.headers().clone();
        let body = response.bytes().await?;
        let failure = Failure::read(&body, self.key.as_ref());
        let asked = retry::retry_after(&headers, Utc::now()).or(failure.retry_delay);
        lock(&self.log).failed = Some(FailedAnswer { status: status.as_u16(), failure, asked });
        let mut rebuilt = http::Response::new(reqwest::Body::from(body));
        *rebuilt.status_mut() = status;
        *rebuilt.version_mut() = version;
        *rebuilt.headers_mut() = headers;
        Ok(reqwest::Response::from(rebuilt))
    }
}

impl tower::Service<HttpRequestFactory> for Transport {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = TransportFuture;

    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), OpenAIError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> TransportFuture {
        Box::pin(self.clone().send(factory))
    }
}

/// The retry policy of [`super::retry`] as a tower [`Policy`] over async-openai's requests.
#[derive(Clone)]
struct RetryPolicy {
    retries: Retries,
    log: Arc<Mutex<CallLog>>,
}

impl Policy<HttpRequestFactory, reqwest::Response, OpenAIError> for RetryPolicy {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _request: &mut HttpRequestFactory,
        result: &mut Result<reqwest::Response, OpenAIError>,
    ) -> Option<tokio::time::Sleep> {
        let outcome = match result {
            Ok(response) if response.status().is_success() => return None,
            Ok(response) => match lock(&self.log).failed.clone() {
                Some(failed) if failed.failure.quota_exhausted => return None,
                Some(failed) => {
                    Outcome::Answer { status: failed.status, retry_after: failed.asked }
                }
                None => Outcome::Answer { status: response.status().as_u16(), retry_after: None },
            },
            Err(OpenAIError::Reqwest(error)) if retry::is_connection_failure(error) => {
                Outcome::NoConnection
            }
            Err(_) => return None,
        };
        match self.retries.decide(outcome) {
            Decision::Retry { wait } => Some(tokio::time::sleep(wait)),
            Decision::GiveUp => None,
        }
    }

    fn clone_request(&mut self, request: &HttpRequestFactory) -> Option<HttpRequestFactory> {
        Some(request.clone())
    }
}

/// The error for a failed call, from async-openai's error and what the attempts logged.
fn call_error(error: OpenAIError, log: &CallLog, settings: &ClientSettings, base: &Url) -> Error {
    let provider = Provider::OpenAi;
    match (error, &log.failed) {
        (OpenAIError::Reqwest(error), _) if error.is_timeout() => {
            Error::Timeout { provider, after: settings.timeout }
        }
        (OpenAIError::Reqwest(error), _) if retry::is_connection_failure(&error) => {
            transport::no_connection(provider, base, &error)
        }
        (OpenAIError::Reqwest(error), _) => {
            Error::Unavailable { provider, status: None, message: transport::describe(error) }
        }
        // A failed answer: what the transport read from it is more than async-openai kept (the
        // wait asked for; a status even when the body was not OpenAI's error shape).
        (OpenAIError::ApiError(_) | OpenAIError::JSONDeserialize(..), Some(failed)) => {
            transport::failure_error(provider, failed.status, failed.failure.clone(), failed.asked)
        }
        (OpenAIError::ApiError(api), None) => transport::failure_error(
            provider,
            api.status_code.as_u16(),
            Failure { message: Some(transport::cut(&api.api_error.message)), ..Failure::default() },
            None,
        ),
        (OpenAIError::JSONDeserialize(error, _), None) => {
            Error::Malformed { provider, message: unreadable_completion(&error) }
        }
        (other, _) => Error::Unavailable {
            provider,
            status: None,
            message: transport::cut(&other.to_string()),
        },
    }
}

/// What to say about a 2xx body that is not a chat completion.
fn unreadable_completion(error: &serde_json::Error) -> String {
    transport::cut(&format!("the answer is not a chat completion: {error}"))
}

/// Asks OpenAI or an OpenAI-compatible server; returns the answer and the HTTP attempts made.
pub(crate) async fn complete(
    http: &reqwest::Client,
    settings: &ClientSettings,
    endpoint: &Endpoint,
    request: &Request,
) -> Result<(Answer, u32), Error> {
    let provider = Provider::OpenAi;
    let base_text = endpoint.base_url.trim().trim_end_matches('/');
    let official = is_official(base_text);
    let key = transport::configured_key(endpoint);
    if key.is_none() && official {
        return Err(Error::MissingKey { provider });
    }
    let base = transport::base_url(provider, base_text)?;
    let key_text = key.map(|key| key.expose_secret().trim()).unwrap_or_default();
    // async-openai would panic on a key that cannot be a header value; refuse it here instead.
    transport::secret_header(provider, &format!("Bearer {key_text}"))?;

    let log = Arc::new(Mutex::new(CallLog::default()));
    let transport = Transport {
        http: http.clone(),
        timeout: settings.timeout,
        key: key.cloned(),
        log: Arc::clone(&log),
    };
    let policy = RetryPolicy { retries: Retries::new(provider, settings), log: Arc::clone(&log) };
    // Set everything explicitly: `OpenAIConfig::new` reads `OPENAI_*` variables of its own.
    let config = OpenAIConfig::new()
        .with_api_base(base_text)
        .with_api_key(key_text)
        .with_org_id("")
        .with_project_id("");
    let client =
        Client::build(http.clone(), config).with_http_service(Retry::new(policy, transport));
    let result = client.chat().create(chat_request(request, official)).await;
    let log = lock(&log).clone();
    match result {
        Ok(response) => {
            let answer = read_answer(response, &request.model)
                .map_err(|message| Error::Malformed { provider, message })?;
            Ok((answer, log.attempts))
        }
        Err(error) => Err(call_error(error, &log, settings, &base)),
    }
}

#[cfg(test)]
mod tests {
    use async_openai::error::{ApiError, ApiErrorResponse};

    use super::super::sample_request;
    use super::*;

    fn wire(request: &CreateChatCompletionRequest) -> serde_json::Value {
        let body = serde_json::to_vec(request).expect("serializes");
        serde_json::from_slice(&body).expect("JSON")
    }

    #[test]
    fn the_request_body_for_openai_caps_max_completion_tokens() {
        insta::assert_json_snapshot!(wire(&chat_request(&sample_request(), true)));
    }

    #[test]
    fn the_request_body_for_compatible_servers_caps_max_tokens() {
        insta::assert_json_snapshot!(wire(&chat_request(&sample_request(), false)));
    }

    #[test]
    fn an_empty_system_prompt_sends_no_system_message() {
        let request = Request { system: String::new(), ..sample_request() };
        let body = wire(&chat_request(&request, true));
        assert_eq!(body["messages"][0]["role"], "user", "{body}");
    }

    #[test]
    fn only_openais_own_url_is_official() {
        let cases = [
            ("https://api.openai.com/v1", true),
            ("https://api.openai.com/v1/", true),
            (" HTTPS://API.OPENAI.COM/V1 ", true),
            ("https://api.openai.com", false),
            ("http://localhost:11434/v1", false),
            ("https://openrouter.ai/api/v1", false),
        ];
        for (base, expected) in cases {
            assert_eq!(is_official(base), expected, "{base:?}");
        }
    }

    /// Reads `body` the way async-openai does, then as orca does.
    fn read(body: &str) -> Result<Answer, String> {
        let response: CreateChatCompletionResponse =
            serde_json::from_str(body).map_err(|error| unreadable_completion(&error))?;
        read_answer(response, "gpt-test")
    }

    #[test]
    fn answers_are_read_or_refused_with_a_reason() {
        let cases: [(&str, &str, Result<Answer, &str>); 8] = [
            (
                "openai",
                r#"{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":"SELECT 1","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default"}"#,
                Ok(Answer {
                    text: "SELECT 1".to_owned(),
                    model: "gpt-4.1-2025-04-14".to_owned(),
                    prompt_tokens: Some(19),
                    completion_tokens: Some(10),
                }),
            ),
            (
                "ollama, no usage",
                r#"{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"llama3.2","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#,
                Ok(Answer {
                    text: "hi".to_owned(),
                    model: "llama3.2".to_owned(),
                    prompt_tokens: None,
                    completion_tokens: None,
                }),
            ),
            (
                "empty model name",
                r#"{"id":"x","object":"chat.completion","created":1,"model":"","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#,
                Ok(Answer {
                    text: "hi".to_owned(),
                    model: "gpt-test".to_owned(),
                    prompt_tokens: None,
                    completion_tokens: None,
                }),
            ),
            (
                "refusal",
                r#"{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}"#,
                Err("the model refused: I can't help with that."),
            ),
            (
                "content filter",
                r#"{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"content_filter"}]}"#,
                Err("the answer holds no text (finish reason `content_filter`)"),
            ),
            (
                "empty content",
                r#"{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":""}}]}"#,
                Err("the answer holds no text"),
            ),
            (
                "no choices",
                r#"{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[]}"#,
                Err("the answer has no choices"),
            ),
            (
                "not a chat completion",
                r#"{"ok":true}"#,
                Err("the answer is not a chat completion: missing field `id` at line 1 column 11"),
            ),
        ];
        for (name, body, expected) in cases {
            assert_eq!(read(body), expected.map_err(str::to_owned), "{name}");
        }
    }

    #[test]
    fn failed_calls_map_to_errors_from_what_the_attempts_logged() {
        let settings = ClientSettings {
            timeout: Duration::from_secs(7),
            max_retries: 2,
            max_backoff: Duration::from_secs(5),
        };
        let base = Url::parse("http://localhost:11434/v1").expect("URL");
        let provider = Provider::OpenAi;
        let json_error = || serde_json::from_str::<serde_json::Value>("{").expect_err("bad JSON");
        let api_error = |status: u16, message: &str| {
            OpenAIError::ApiError(ApiErrorResponse {
                status_code: reqwest::StatusCode::from_u16(status).expect("status"),
                api_error: ApiError { message: message.to_owned(), ..ApiError::default() },
            })
        };
        let logged = |status: u16, message: &str, asked: Option<Duration>| CallLog {
            attempts: 3,
            failed: Some(FailedAnswer {
                status,
                failure: Failure { message: Some(message.to_owned()), ..Failure::default() },
                asked,
            }),
        };
        let cases: Vec<(&str, OpenAIError, CallLog, Error)> = vec![
            (
                "429 with the wait the answer asked for",
                api_error(429, "Rate limit reached"),
                logged(429, "Rate limit reached", Some(Duration::from_secs(20))),
                Error::RateLimited { provider, retry_after: Some(Duration::from_secs(20)) },
            ),
            (
                "401",
                api_error(401, "Incorrect API key provided"),
                logged(401, "Incorrect API key provided", None),
                Error::Unauthorized { provider, message: "the key was refused (HTTP 401)".to_owned() },
            ),
            (
                "404 whose body async-openai could not read",
                OpenAIError::JSONDeserialize(json_error(), "404 page not found".to_owned()),
                CallLog {
                    attempts: 1,
                    failed: Some(FailedAnswer {
                        status: 404,
                        failure: Failure::default(),
                        asked: None,
                    }),
                },
                Error::Rejected { provider, status: 404, message: "not found".to_owned() },
            ),
            (
                "503 after the retries",
                api_error(503, "<html>"),
                logged(503, "upstream down", None),
                Error::Unavailable {
                    provider,
                    status: Some(503),
                    message: "HTTP 503: upstream down".to_owned(),
                },
            ),
            (
                "a 2xx that is not a chat completion",
                OpenAIError::JSONDeserialize(json_error(), "{".to_owned()),
                CallLog { attempts: 1, failed: None },
                Error::Malformed {
                    provider,
                    message: "the answer is not a chat completion: EOF while parsing an object at line 1 column 1"
                        .to_owned(),
                },
            ),
            (
                "an API error nothing logged",
                api_error(400, "bad request"),
                CallLog::default(),
                Error::Rejected { provider, status: 400, message: "bad request".to_owned() },
            ),
        ];
        for (name, error, log, expected) in cases {
            assert_eq!(call_error(error, &log, &settings, &base), expected, "{name}");
        }
    }

    fn factory() -> HttpRequestFactory {
        HttpRequestFactory::new(|| async {
            Err(OpenAIError::InvalidArgument("never built in this test".to_owned()))
        })
    }

    fn response(status: u16) -> reqwest::Response {
        let mut response = http::Response::new(reqwest::Body::from(Vec::new()));
        *response.status_mut() = reqwest::StatusCode::from_u16(status).expect("status");
        reqwest::Response::from(response)
    }

    #[tokio::test]
    async fn the_tower_policy_retries_what_the_shared_policy_retries() {
        let settings = ClientSettings {
            timeout: Duration::from_secs(7),
            max_retries: 1,
            max_backoff: Duration::from_secs(5),
        };
        let failed = |status, quota_exhausted, asked| FailedAnswer {
            status,
            failure: Failure { quota_exhausted, ..Failure::default() },
            asked,
        };
        // (status answered, what the transport logged, retried)
        let cases = [
            (200, None, false),
            (429, Some(failed(429, false, None)), true),
            (429, Some(failed(429, false, Some(Duration::from_secs(1)))), true),
            (429, Some(failed(429, false, Some(Duration::from_secs(60)))), false),
            (429, Some(failed(429, true, None)), false),
            (503, Some(failed(503, false, None)), true),
            (529, None, true),
            (400, Some(failed(400, false, None)), false),
            (401, Some(failed(401, false, None)), false),
        ];
        for (status, logged, retried) in cases {
            let log = Arc::new(Mutex::new(CallLog { attempts: 1, failed: logged }));
            let mut policy =
                RetryPolicy { retries: Retries::new(Provider::OpenAi, &settings), log };
            let mut result = Ok(response(status));
            let first = policy.retry(&mut factory(), &mut result).is_some();
            assert_eq!(first, retried, "status {status}");
            // One retry allowed: the second failure is final.
            assert!(policy.retry(&mut factory(), &mut result).is_none(), "status {status}");
        }
    }

    #[tokio::test]
    async fn the_tower_policy_leaves_other_errors_alone() {
        let settings = ClientSettings {
            timeout: Duration::from_secs(7),
            max_retries: 3,
            max_backoff: Duration::from_secs(5),
        };
        let log = Arc::new(Mutex::new(CallLog::default()));
        let mut policy = RetryPolicy { retries: Retries::new(Provider::OpenAi, &settings), log };
        let mut result = Err(OpenAIError::InvalidArgument("bad".to_owned()));
        assert!(policy.retry(&mut factory(), &mut result).is_none());
    }
}
