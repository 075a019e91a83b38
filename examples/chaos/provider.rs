//! A fake OpenAI-compatible model provider for `scripts/chaos --fault llm`: it serves
//! `POST /v1/chat/completions` the way the real service does, checks every request it receives
//! (the bearer key, a JSON body with a model and non-empty messages, only known fields, no
//! streaming; a broken rule gets OpenAI's 400 or 401 and is counted as a violation), and answers
//! according to its phase, which the script switches with `PUT /chaos/phase` (body: `ok`,
//! `500`, `429` or `hang`). `GET /chaos/stats` answers the requests seen per phase and the
//! violations.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Value, json};

use super::ProviderArgs;

/// The request fields of the Chat Completions API (others are refused, as OpenAI does).
const FIELDS: &[&str] = &[
    "messages",
    "model",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "n",
    "parallel_tool_calls",
    "presence_penalty",
    "reasoning_effort",
    "response_format",
    "seed",
    "service_tier",
    "stop",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "user",
];

/// The `Retry-After` the 429 phase sends, in seconds.
const RETRY_AFTER_SECONDS: u64 = 1;

#[derive(Debug, Default)]
struct Inner {
    phase: String,
    /// Requests that passed the checks, per phase.
    seen: BTreeMap<String, u64>,
    violations: Vec<String>,
    answered: u64,
}

#[derive(Debug)]
struct Provider {
    key: String,
    sql: String,
    inner: Mutex<Inner>,
}

impl Provider {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Serve until killed.
pub(super) async fn serve(args: ProviderArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.listen.starts_with("127."), "loopback only: {}", args.listen);
    let inner = Inner { phase: "ok".to_owned(), ..Inner::default() };
    let state = Arc::new(Provider { key: args.key, sql: args.sql, inner: Mutex::new(inner) });
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(complete))
        .route("/chaos/phase", put(set_phase))
        .route("/chaos/stats", get(stats))
        .fallback(unknown)
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    eprintln!("fake provider on http://{}/v1", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

async fn set_phase(State(state): State<Arc<Provider>>, body: String) -> Response {
    let phase = body.trim();
    if !["ok", "500", "429", "hang"].contains(&phase) {
        return (StatusCode::BAD_REQUEST, "phases: ok, 500, 429, hang\n").into_response();
    }
    state.lock().phase = phase.to_owned();
    (StatusCode::OK, format!("{phase}\n")).into_response()
}

async fn stats(State(state): State<Arc<Provider>>) -> Response {
    let inner = state.lock();
    axum::Json(json!({"seen": inner.seen, "violations": inner.violations})).into_response()
}

async fn unknown(State(state): State<Arc<Provider>>, uri: axum::http::Uri) -> Response {
    state.lock().violations.push(format!("unknown endpoint {}", uri.path()));
    error(404, &format!("Invalid URL ({})", uri.path()), "invalid_request_error", None, None)
}

/// OpenAI's error body.
fn error(
    status: u16,
    message: &str,
    kind: &str,
    code: Option<&str>,
    retry_after: Option<u64>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response.headers_mut().insert("retry-after", seconds.into());
    }
    response
}

/// What is wrong with a request, the first broken rule.
fn check(key: &str, headers: &HeaderMap, body: &[u8]) -> Option<(u16, String)> {
    let authorization = headers.get("authorization").and_then(|value| value.to_str().ok());
    if authorization != Some(&format!("Bearer {key}")) {
        return Some((401, "Incorrect API key provided.".to_owned()));
    }
    let content_type = headers.get("content-type").and_then(|value| value.to_str().ok());
    if !content_type.is_some_and(|value| value.starts_with("application/json")) {
        return Some((400, format!("content-type must be application/json, got {content_type:?}")));
    }
    let body: Value = match serde_json::from_slice(body) {
        Ok(Value::Object(body)) => Value::Object(body),
        Ok(_) => return Some((400, "the body must be a JSON object".to_owned())),
        Err(error) => return Some((400, format!("We could not parse the JSON body: {error}"))),
    };
    let object = body.as_object()?;
    if let Some(field) = object.keys().find(|field| !FIELDS.contains(&field.as_str())) {
        return Some((400, format!("Unrecognized request argument supplied: {field}")));
    }
    if body["model"].as_str().is_none_or(str::is_empty) {
        return Some((400, "you must provide a model parameter".to_owned()));
    }
    let Some(messages) = body["messages"].as_array().filter(|messages| !messages.is_empty()) else {
        return Some((400, "Missing required parameter: 'messages'.".to_owned()));
    };
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if !["system", "developer", "user", "assistant"].contains(&role) {
            return Some((400, format!("Invalid value for 'messages[{index}].role': {role:?}")));
        }
        if !(message["content"].is_string() || message["content"].is_array()) {
            return Some((400, format!("Missing content in 'messages[{index}]'")));
        }
    }
    if body["stream"] == Value::Bool(true) {
        return Some((400, "stream: true is not expected from orca".to_owned()));
    }
    None
}

async fn complete(State(state): State<Arc<Provider>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some((status, message)) = check(&state.key, &headers, &body) {
        state.lock().violations.push(format!("{status}: {message}"));
        let code = (status == 401).then_some("invalid_api_key");
        return error(status, &message, "invalid_request_error", code, None);
    }
    let model = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|body| body["model"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let (phase, number) = {
        let mut inner = state.lock();
        let phase = inner.phase.clone();
        *inner.seen.entry(phase.clone()).or_default() += 1;
        inner.answered += 1;
        (phase, inner.answered)
    };
    match phase.as_str() {
        "500" => error(
            500,
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
            None,
        ),
        "429" => error(
            429,
            &format!(
                "Rate limit reached for {model} on requests per min (RPM): Limit 3, Used 3, \
                 Requested 1. Please try again in {RETRY_AFTER_SECONDS}s."
            ),
            "requests",
            Some("rate_limit_exceeded"),
            Some(RETRY_AFTER_SECONDS),
        ),
        // Never answers: the connection stays open until the client gives up.
        "hang" => std::future::pending().await,
        _ => {
            let text = format!("```sql\n{}\n```", state.sql);
            axum::Json(json!({
                "id": format!("chatcmpl-chaos{number:06}"),
                "object": "chat.completion",
                "created": super::now_ms() / 1000,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": null},
                    "logprobs": null,
                    "finish_reason": "stop",
                }],
                "usage": {"prompt_tokens": body.len() / 4, "completion_tokens": text.len() / 4,
                    "total_tokens": (body.len() + text.len()) / 4},
            }))
            .into_response()
        }
    }
}
