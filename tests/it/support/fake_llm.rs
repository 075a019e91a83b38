//! Fake LLM providers: one HTTP server that speaks OpenAI's chat completions, Anthropic's
//! Messages API and Gemini's `generateContent` the way the real services do, checks every request
//! against the wire's rules (recording each broken rule as a violation), and answers from a
//! per-wire script of replies (text, errors, hangs, malformed bodies).
//!
//! The server runs on a thread and runtime of its own, not on the test's: tests use
//! current-thread runtimes and some block them (`support::run` waits for an orca process), and a
//! server on a blocked runtime would never answer orca. Dropping the `FakeLlm` stops it.
//!
//! Where the real services disagree with each other or have relaxed a rule over time, the fake
//! keeps the stricter rule and says so next to the check.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// The key the fake OpenAI server accepts (`Authorization: Bearer ...`).
pub(crate) const OPENAI_KEY: &str = "sk-test-openai-fake";
/// The key the fake Anthropic server accepts (`x-api-key`).
pub(crate) const ANTHROPIC_KEY: &str = "sk-ant-test-fake";
/// The key the fake Gemini server accepts (`x-goog-api-key`, or `?key=` in the URL).
pub(crate) const GEMINI_KEY: &str = "gemini-test-fake";

/// The `anthropic-version` values the real API knows.
const ANTHROPIC_VERSIONS: [&str; 2] = ["2023-06-01", "2023-01-01"];

/// The text a [`Reply::Hang`] answers with once it has waited.
const HANG_TEXT: &str = "SELECT 1";

/// The three provider protocols the fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// `POST /v1/chat/completions` (OpenAI and every OpenAI-compatible server).
    OpenAi,
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1beta/models/{model}:generateContent`.
    Gemini,
}

impl Wire {
    fn index(self) -> usize {
        match self {
            Wire::OpenAi => 0,
            Wire::Anthropic => 1,
            Wire::Gemini => 2,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Wire::OpenAi => "openai",
            Wire::Anthropic => "anthropic",
            Wire::Gemini => "gemini",
        }
    }
}

/// One scripted answer of a wire.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A success in the wire's format with this text.
    Text(String),
    /// The wire's real error body for `status` (message and type chosen by the status), with a
    /// `retry-after` header when given.
    Error { status: u16, retry_after: Option<String> },
    /// Accept, sleep this long, then answer `Text("SELECT 1")`. Other requests are not held up.
    Hang(Duration),
    /// A 200 with this raw body and `content-type: application/json`.
    Malformed(String),
    /// OpenAI and Anthropic: an answer asking for these tool calls (name, arguments), with ids
    /// the fake issues and later checks `tool` messages and `tool_result` blocks against.
    ToolCalls(Vec<(String, Value)>),
}

/// A request the fake received (whether or not it broke the wire's rules).
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) wire: Wire,
    /// The URL path, without the query.
    pub(crate) path: String,
    /// Header names in lowercase; repeated headers joined with `, `.
    pub(crate) headers: BTreeMap<String, String>,
    /// The JSON body; a body that is not JSON is kept as a JSON string of its raw text.
    pub(crate) body: Value,
    /// Whether the URL carried a `key` query parameter (Gemini accepts its key there; orca must
    /// not put it there, as URLs end up in logs).
    pub(crate) key_in_url: bool,
    pub(crate) at: Instant,
}

/// The fake providers: one server on `127.0.0.1`, stopped when dropped.
#[derive(Debug)]
pub(crate) struct FakeLlm {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeLlm {
    /// Start the server on a free port of 127.0.0.1.
    pub(crate) async fn start() -> FakeLlm {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind the fake LLM server");
        listener.set_nonblocking(true).expect("cannot make the fake LLM listener non-blocking");
        let address = listener.local_addr().expect("the fake LLM listener has no address");
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new().fallback(handle).with_state(shared.clone());
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("fake-llm".to_owned())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("cannot build the fake LLM runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .expect("cannot hand the fake LLM listener to tokio");
                    tokio::select! {
                        result = async { axum::serve(listener, app).await } => {
                            result.expect("the fake LLM server failed");
                        }
                        _ = stopped => {}
                    }
                });
                // Dropping the runtime here cancels the connections still open (hanging ones
                // included), so the port is closed once the thread ends.
            })
            .expect("cannot start the fake LLM thread");
        FakeLlm { address, shared, shutdown: Some(shutdown), thread: Some(thread) }
    }

    /// `http://127.0.0.1:PORT/v1`, the form of `OPENAI_BASE_URL`.
    pub(crate) fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// `http://127.0.0.1:PORT`, the form of `ANTHROPIC_BASE_URL` (`/v1/messages` is appended).
    pub(crate) fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `http://127.0.0.1:PORT`, the form of `GEMINI_BASE_URL`
    /// (`/v1beta/models/{model}:generateContent` is appended).
    pub(crate) fn gemini_base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Environment for orca: OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL,
    /// ANTHROPIC_API_KEY, GEMINI_BASE_URL, GEMINI_API_KEY.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        [
            ("OPENAI_BASE_URL", self.openai_base_url()),
            ("OPENAI_API_KEY", OPENAI_KEY.to_owned()),
            ("ANTHROPIC_BASE_URL", self.anthropic_base_url()),
            ("ANTHROPIC_API_KEY", ANTHROPIC_KEY.to_owned()),
            ("GEMINI_BASE_URL", self.gemini_base_url()),
            ("GEMINI_API_KEY", GEMINI_KEY.to_owned()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    /// Queue replies for one wire, answered in order; when a wire's queue is empty it answers
    /// 500 with a body saying "no scripted reply" (so a test never passes by accident).
    pub(crate) fn script(&self, wire: Wire, replies: impl IntoIterator<Item = Reply>) {
        self.shared.lock().scripts[wire.index()].extend(replies);
    }

    /// Every request received so far, in order (all wires).
    pub(crate) fn requests(&self) -> Vec<Received> {
        self.shared.lock().requests.clone()
    }

    /// Requests that broke the wire's rules, one human-readable line per broken rule, in the
    /// form `WIRE PATH: MESSAGE` (the message is the real service's where known). Such requests
    /// were answered with the wire's 400/401/403 error and consumed no scripted reply. Tests
    /// assert this is empty.
    pub(crate) fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// The text of a received request's conversation, for `contains` checks: the system prompt
    /// and every turn, in order, one per line.
    pub(crate) fn conversation_text(received: &Received) -> String {
        let body = &received.body;
        let mut texts = Vec::new();
        match received.wire {
            Wire::OpenAi => {
                for message in array(body.get("messages")) {
                    texts.extend(texts_of(message.get("content")));
                }
            }
            Wire::Anthropic => {
                texts.extend(texts_of(body.get("system")));
                for message in array(body.get("messages")) {
                    texts.extend(texts_of(message.get("content")));
                }
            }
            Wire::Gemini => {
                let system =
                    body.get("systemInstruction").or_else(|| body.get("system_instruction"));
                texts.extend(texts_of(system.and_then(|system| system.get("parts"))));
                for content in array(body.get("contents")) {
                    texts.extend(texts_of(content.get("parts")));
                }
            }
        }
        texts.join("\n")
    }
}

/// The items of a JSON array, none when it is not one.
fn array(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

/// The texts of a content value: a string, or a list of strings and `{"text": ...}` items.
fn texts_of(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(text) => Some(text.clone()),
                other => other.get("text").and_then(Value::as_str).map(str::to_owned),
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A received body made snapshot-stable. orca's provider request bodies hold nothing
/// nondeterministic (no ids, no timestamps, no random seeds: the fake answers with those, orca
/// does not send them), so nothing is stripped and the body is returned as received; the
/// function is the one place to strip such a field should one appear.
pub(crate) fn stable_body(received: &Received) -> Value {
    received.body.clone()
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<Inner>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A test that panicked while holding the lock must not hide what the fake saw.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Debug, Default)]
struct Inner {
    scripts: [VecDeque<Reply>; 3],
    requests: Vec<Received>,
    violations: Vec<String>,
    /// Requests that passed the rules so far: numbers the ids of their answers.
    answered: u64,
    /// The tool call ids the fake has issued (`Reply::ToolCalls`).
    issued: std::collections::HashSet<String>,
}

/// A broken rule: the status and message the real service would answer with.
#[derive(Debug)]
pub(crate) struct Problem {
    pub(crate) status: u16,
    pub(crate) message: String,
    /// OpenAI's `param`.
    pub(crate) param: Option<String>,
    /// OpenAI's `code`, or Gemini's `ErrorInfo` reason.
    pub(crate) code: Option<&'static str>,
}

pub(crate) fn bad(message: impl Into<String>) -> Problem {
    Problem { status: 400, message: message.into(), param: None, code: None }
}

/// What a request is, from its path: the wire and, for Gemini, the model.
fn route(path: &str) -> Option<(Wire, Option<String>)> {
    match path {
        "/v1/chat/completions" => Some((Wire::OpenAi, None)),
        "/v1/messages" => Some((Wire::Anthropic, None)),
        _ => {
            let (model, method) = path.strip_prefix("/v1beta/models/")?.split_once(':')?;
            (method == "generateContent" && !model.is_empty() && !model.contains('/'))
                .then(|| (Wire::Gemini, Some(model.to_owned())))
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let Some((wire, gemini_model)) = route(&path) else {
        let line = format!(
            "unknown endpoint {method} {path}: the fake serves POST /v1/chat/completions, \
             POST /v1/messages and POST /v1beta/models/MODEL:generateContent"
        );
        shared.lock().violations.push(line);
        return unknown_endpoint(&method, &path);
    };
    let url_key = query_parameter(uri.query(), "key");
    let parsed: Result<Value, String> =
        serde_json::from_slice(&body).map_err(|error| error.to_string());
    let received = Received {
        wire,
        path: path.clone(),
        headers: lowercase_headers(&headers),
        body: parsed
            .clone()
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        key_in_url: url_key.is_some(),
        at: Instant::now(),
    };
    let problems = if method == Method::POST {
        check(wire, &received.headers, url_key.as_deref(), &parsed)
    } else {
        vec![Problem {
            status: 405,
            message: format!("method {method} is not allowed: {path} takes POST"),
            param: None,
            code: None,
        }]
    };
    let model = match &gemini_model {
        Some(model) => model.clone(),
        None => received.body.get("model").and_then(Value::as_str).unwrap_or_default().to_owned(),
    };
    let reply = {
        let mut inner = shared.lock();
        let mut problems = problems;
        if wire != Wire::Gemini {
            problems.extend(super::fake_llm_tools::check_issued(&received.body, &inner.issued));
        }
        inner.requests.push(received.clone());
        if !problems.is_empty() {
            for problem in &problems {
                inner.violations.push(format!("{} {path}: {}", wire.name(), problem.message));
            }
            Err(problems.into_iter().next().expect("at least one problem"))
        } else {
            inner.answered += 1;
            let number = inner.answered;
            let reply = inner.scripts[wire.index()].pop_front();
            if let Some(Reply::ToolCalls(calls)) = &reply {
                for index in 0..calls.len() {
                    inner.issued.insert(super::fake_llm_tools::call_id(number, index));
                }
            }
            Ok((reply, number))
        }
    };
    let (reply, number) = match reply {
        Ok(answer) => answer,
        Err(problem) => return problem_response(wire, &problem),
    };
    match reply {
        None => unscripted(wire, number),
        Some(Reply::Text(text)) => success(wire, &received, &model, &text, number),
        Some(Reply::Error { status, retry_after }) => {
            scripted_error(wire, &received, &model, status, retry_after.as_deref(), number)
        }
        Some(Reply::Hang(duration)) => {
            tokio::time::sleep(duration).await;
            success(wire, &received, &model, HANG_TEXT, number)
        }
        Some(Reply::ToolCalls(calls)) => {
            super::fake_llm_tools::tool_calls_response(wire, &received, &model, &calls, number)
        }
        Some(Reply::Malformed(raw)) => {
            let mut response = (StatusCode::OK, raw).into_response();
            response
                .headers_mut()
                .insert("content-type", HeaderValue::from_static("application/json"));
            response
        }
    }
}

fn lowercase_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        map.entry(name.as_str().to_ascii_lowercase())
            .and_modify(|existing| {
                existing.push_str(", ");
                existing.push_str(&value);
            })
            .or_insert(value);
    }
    map
}

fn query_parameter(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then(|| value.to_owned())
    })
}

// ---------------------------------------------------------------------------------------------
// The rules of each wire.
// ---------------------------------------------------------------------------------------------

fn check(
    wire: Wire,
    headers: &BTreeMap<String, String>,
    url_key: Option<&str>,
    body: &Result<Value, String>,
) -> Vec<Problem> {
    let mut problems = match wire {
        Wire::OpenAi => check_openai_headers(headers),
        Wire::Anthropic => check_anthropic_headers(headers),
        Wire::Gemini => check_gemini_headers(headers, url_key),
    };
    // None of the three parse a body that is not declared as JSON (reqwest's `.json()` and
    // async-openai always declare it).
    let content_type = headers.get("content-type").map(String::as_str).unwrap_or_default();
    if !content_type.to_ascii_lowercase().starts_with("application/json") {
        problems.push(bad(format!(
            "content-type must be application/json, got {:?}",
            headers.get("content-type")
        )));
    }
    match body {
        Err(error) => problems.push(bad(match wire {
            Wire::OpenAi => format!(
                "We could not parse the JSON body of your request. (HINT: This likely means you \
                 aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, \
                 but what was sent was not valid JSON.) ({error})"
            ),
            Wire::Anthropic => format!("The request body is not valid JSON: {error}"),
            Wire::Gemini => format!("Invalid JSON payload received. {error}"),
        })),
        Ok(Value::Object(body)) => match wire {
            Wire::OpenAi => check_openai_body(body, &mut problems),
            Wire::Anthropic => check_anthropic_body(body, &mut problems),
            Wire::Gemini => check_gemini_body(body, &mut problems),
        },
        Ok(other) => {
            problems.push(bad(format!("the request body must be a JSON object, got {other}")))
        }
    }
    problems
}

/// `sk-************fake`: how OpenAI quotes a key it rejects.
fn masked(key: &str) -> String {
    let characters: Vec<char> = key.chars().collect();
    if characters.len() <= 8 {
        return "*".repeat(characters.len());
    }
    let head: String = characters[..3].iter().collect();
    let tail: String = characters[characters.len() - 4..].iter().collect();
    format!("{head}{}{tail}", "*".repeat(characters.len() - 7))
}

fn check_openai_headers(headers: &BTreeMap<String, String>) -> Vec<Problem> {
    let Some(authorization) = headers.get("authorization") else {
        return vec![Problem {
            status: 401,
            message: "You didn't provide an API key. You need to provide your API key in an \
                      Authorization header using Bearer auth (i.e. Authorization: Bearer \
                      YOUR_KEY). You can obtain an API key from \
                      https://platform.openai.com/account/api-keys."
                .to_owned(),
            param: None,
            code: None,
        }];
    };
    // The scheme is part of the rule: a bare key is read as a wrong key.
    let key = authorization.strip_prefix("Bearer ").unwrap_or(authorization);
    if authorization.starts_with("Bearer ") && key == OPENAI_KEY {
        return Vec::new();
    }
    vec![Problem {
        status: 401,
        message: format!(
            "Incorrect API key provided: {}. You can find your API key at \
             https://platform.openai.com/account/api-keys.",
            masked(key)
        ),
        param: None,
        code: Some("invalid_api_key"),
    }]
}

const OPENAI_FIELDS: &[&str] = &[
    "messages",
    "model",
    "audio",
    "frequency_penalty",
    "function_call",
    "functions",
    "logit_bias",
    "logprobs",
    "max_completion_tokens",
    "max_tokens",
    "metadata",
    "modalities",
    "moderation",
    "n",
    "parallel_tool_calls",
    "prediction",
    "presence_penalty",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning_effort",
    "response_format",
    "safety_identifier",
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
    "verbosity",
    "web_search_options",
];

fn check_openai_body(body: &Map<String, Value>, problems: &mut Vec<Problem>) {
    let param = |name: &str, message: String| Problem {
        status: 400,
        message,
        param: Some(name.to_owned()),
        code: None,
    };
    for key in body.keys().filter(|key| !OPENAI_FIELDS.contains(&key.as_str())) {
        problems.push(bad(format!("Unrecognized request argument supplied: {key}")));
    }
    match body.get("model") {
        Some(Value::String(model)) if !model.is_empty() => {}
        _ => problems.push(param("model", "you must provide a model parameter".to_owned())),
    }
    match body.get("messages") {
        None => {
            problems.push(param("messages", "Missing required parameter: 'messages'.".to_owned()))
        }
        Some(Value::Array(messages)) if messages.is_empty() => {
            problems.push(param("messages", "[] is too short - 'messages'".to_owned()));
        }
        Some(Value::Array(messages)) => {
            for (index, message) in messages.iter().enumerate() {
                check_openai_message(index, message, problems);
            }
        }
        Some(other) => problems.push(param(
            "messages",
            format!("Invalid type for 'messages': expected an array, but got {other} instead."),
        )),
    }
    if let Some(temperature) = body.get("temperature") {
        match temperature.as_f64() {
            Some(value) if (0.0..=2.0).contains(&value) => {}
            _ => problems.push(param(
                "temperature",
                format!(
                    "Invalid 'temperature': expected a number between 0 and 2, but got \
                     {temperature} instead."
                ),
            )),
        }
    }
    for name in ["max_tokens", "max_completion_tokens"] {
        if let Some(value) = body.get(name)
            && value.as_u64().is_none_or(|tokens| tokens < 1)
        {
            problems.push(param(
                name,
                format!("Invalid '{name}': expected an integer >= 1, but got {value} instead."),
            ));
        }
    }
    // Stricter than OpenAI, which documents max_tokens as deprecated in favour of
    // max_completion_tokens: sending both leaves it unclear which limit applies.
    if body.contains_key("max_tokens") && body.contains_key("max_completion_tokens") {
        problems.push(bad("both max_tokens and max_completion_tokens are set; send one"));
    }
    if body.get("stream") == Some(&Value::Bool(true)) {
        problems.push(bad("stream: true is not supported by the fake (orca must not stream)"));
    }
    problems.extend(super::fake_llm_tools::check_tools_and_sequence(body));
}

fn check_openai_message(index: usize, message: &Value, problems: &mut Vec<Problem>) {
    let at = format!("messages[{index}]");
    let Some(message) = message.as_object() else {
        problems
            .push(bad(format!("Invalid type for '{at}': expected an object, but got {message}.")));
        return;
    };
    let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
    match role {
        "system" | "developer" | "user" | "assistant" => {}
        "tool" => {
            problems.extend(super::fake_llm_tools::check_tool_message(&at, message));
            return;
        }
        "function" => {
            problems.push(bad(format!(
                "{at}.role '{role}': function messages are not supported by the fake"
            )));
            return;
        }
        _ => {
            problems.push(Problem {
                status: 400,
                message: format!(
                    "Invalid value: '{role}'. Supported values are: 'system', 'assistant', \
                     'user', 'function', 'tool', and 'developer'."
                ),
                param: Some(format!("{at}.role")),
                code: Some("invalid_value"),
            });
            return;
        }
    }
    let allowed: &[&str] = match role {
        "assistant" => {
            &["role", "content", "name", "refusal", "tool_calls", "audio", "function_call"]
        }
        _ => &["role", "content", "name"],
    };
    for key in message.keys().filter(|key| !allowed.contains(&key.as_str())) {
        problems.push(bad(format!(
            "Additional properties are not allowed ('{key}' was unexpected) - '{at}'"
        )));
    }
    if role == "assistant" && message.contains_key("tool_calls") {
        problems.extend(super::fake_llm_tools::check_assistant_tool_calls(&at, message));
        if message.get("content").is_none_or(Value::is_null) {
            return;
        }
    }
    match message.get("content") {
        Some(Value::String(_)) => {}
        Some(Value::Array(parts)) if !parts.is_empty() => {
            for (part_index, part) in parts.iter().enumerate() {
                let is_text = part.get("type").and_then(Value::as_str) == Some("text")
                    && part.get("text").is_some_and(Value::is_string)
                    && part.as_object().is_some_and(|part| part.len() == 2);
                if !is_text {
                    problems.push(bad(format!(
                        "Invalid content part '{at}.content[{part_index}]': the fake accepts \
                         only {{\"type\": \"text\", \"text\": ...}} parts, got {part}"
                    )));
                }
            }
        }
        other => problems.push(bad(format!(
            "Invalid type for '{at}.content': expected one of a string or array of objects, but \
             got {} instead.",
            other.map_or_else(|| "nothing".to_owned(), Value::to_string)
        ))),
    }
}

fn check_anthropic_headers(headers: &BTreeMap<String, String>) -> Vec<Problem> {
    let mut problems = Vec::new();
    match headers.get("x-api-key").map(String::as_str) {
        None => problems.push(Problem {
            status: 401,
            message: "x-api-key header is required".to_owned(),
            param: None,
            code: None,
        }),
        Some(ANTHROPIC_KEY) => {}
        Some(_) => problems.push(Problem {
            status: 401,
            message: "invalid x-api-key".to_owned(),
            param: None,
            code: None,
        }),
    }
    match headers.get("anthropic-version") {
        None => problems.push(bad("anthropic-version: header is required")),
        Some(version) if ANTHROPIC_VERSIONS.contains(&version.as_str()) => {}
        Some(version) => problems.push(bad(format!(
            "anthropic-version: invalid version {version:?}; known versions: 2023-06-01, 2023-01-01"
        ))),
    }
    problems
}

const ANTHROPIC_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "metadata",
    "tools",
    "tool_choice",
    "thinking",
    "service_tier",
    "container",
    "context_management",
    "inference_geo",
    "output_config",
    "mcp_servers",
];

fn check_anthropic_body(body: &Map<String, Value>, problems: &mut Vec<Problem>) {
    for key in body.keys().filter(|key| !ANTHROPIC_FIELDS.contains(&key.as_str())) {
        problems.push(bad(format!("{key}: Extra inputs are not permitted")));
    }
    problems.extend(super::fake_llm_tools::check_anthropic_tools_and_sequence(body));
    match body.get("model") {
        None => problems.push(bad("model: Field required")),
        Some(Value::String(model)) if !model.is_empty() => {}
        Some(_) => problems.push(bad("model: Input should be a non-empty string")),
    }
    match body.get("max_tokens") {
        None => problems.push(bad("max_tokens: Field required")),
        // The real API also takes 0 (to warm the prompt cache); an answer needs at least 1.
        Some(value) if value.as_u64().is_some_and(|tokens| tokens >= 1) => {}
        Some(value) => problems.push(bad(format!(
            "max_tokens: Input should be an integer greater than or equal to 1, got {value}"
        ))),
    }
    if let Some(temperature) = body.get("temperature") {
        match temperature.as_f64() {
            Some(value) if value < 0.0 => {
                problems.push(bad("temperature: Input should be greater than or equal to 0"));
            }
            Some(value) if value > 1.0 => {
                problems.push(bad("temperature: Input should be less than or equal to 1"));
            }
            Some(_) => {}
            None => problems.push(bad("temperature: Input should be a valid number")),
        }
    }
    if let Some(system) = body.get("system") {
        check_anthropic_text_blocks("system", system, problems);
    }
    if body.get("stream") == Some(&Value::Bool(true)) {
        problems.push(bad("stream: true is not supported by the fake (orca must not stream)"));
    }
    let messages = match body.get("messages") {
        None => {
            problems.push(bad("messages: Field required"));
            return;
        }
        Some(Value::Array(messages)) => messages,
        Some(_) => {
            problems.push(bad("messages: Input should be a valid list"));
            return;
        }
    };
    if messages.is_empty() {
        problems.push(bad("messages: at least one message is required"));
        return;
    }
    let mut previous_role = None;
    for (index, message) in messages.iter().enumerate() {
        let at = format!("messages.{index}");
        let Some(message) = message.as_object() else {
            problems.push(bad(format!("{at}: Input should be a valid dictionary")));
            continue;
        };
        for key in message.keys().filter(|key| !["role", "content"].contains(&key.as_str())) {
            problems.push(bad(format!("{at}.{key}: Extra inputs are not permitted")));
        }
        let role = message.get("role").and_then(Value::as_str);
        match role {
            Some("user" | "assistant") => {}
            _ => {
                problems.push(bad(format!("{at}.role: Input should be 'user' or 'assistant'")));
                continue;
            }
        }
        if index == 0 && role != Some("user") {
            problems.push(bad("messages: first message must use the \"user\" role"));
        }
        // Stricter than today's API, which merges consecutive same-role turns; the API used to
        // reject them with this message, and orca's request shape promises alternation.
        if previous_role == role {
            problems.push(bad(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", but found \
                 multiple {:?} roles in a row",
                role.unwrap_or_default()
            )));
        }
        previous_role = role;
        let is_final_assistant = index + 1 == messages.len() && role == Some("assistant");
        match message.get("content") {
            None => problems.push(bad(format!("{at}.content: Field required"))),
            Some(Value::String(text)) if text.trim().is_empty() && !is_final_assistant => {
                problems.push(bad(format!(
                    "{at}: all messages must have non-empty content except for the optional \
                     final assistant message"
                )));
            }
            Some(Value::String(_)) => {}
            Some(content) => super::fake_llm_tools::check_anthropic_content(
                &format!("{at}.content"),
                role.unwrap_or_default(),
                content,
                problems,
            ),
        }
    }
}

/// `system` and message `content` in block form: a non-empty list of `{"type": "text", "text"}`
/// blocks (the only block type the fake takes) with non-empty text.
pub(crate) fn check_anthropic_text_blocks(at: &str, value: &Value, problems: &mut Vec<Problem>) {
    let blocks = match value {
        Value::String(_) => return,
        Value::Array(blocks) if !blocks.is_empty() => blocks,
        Value::Array(_) => {
            problems.push(bad(format!("{at}: List should have at least 1 item")));
            return;
        }
        _ => {
            problems.push(bad(format!("{at}: Input should be a valid string or list")));
            return;
        }
    };
    for (index, block) in blocks.iter().enumerate() {
        let Some(block) = block.as_object() else {
            problems.push(bad(format!("{at}.{index}: Input should be a valid dictionary")));
            continue;
        };
        if block.get("type").and_then(Value::as_str) != Some("text") {
            problems.push(bad(format!(
                "{at}.{index}.type: the fake accepts only text blocks, got {:?}",
                block.get("type")
            )));
            continue;
        }
        for key in block
            .keys()
            .filter(|key| !["type", "text", "cache_control", "citations"].contains(&key.as_str()))
        {
            problems.push(bad(format!("{at}.{index}.text.{key}: Extra inputs are not permitted")));
        }
        match block.get("text") {
            Some(Value::String(text)) if !text.is_empty() => {}
            Some(Value::String(_)) => {
                problems
                    .push(bad(format!("{at}.{index}.text: text content blocks must be non-empty")));
            }
            _ => problems.push(bad(format!("{at}.{index}.text: Field required"))),
        }
    }
}

fn check_gemini_headers(headers: &BTreeMap<String, String>, url_key: Option<&str>) -> Vec<Problem> {
    if headers.contains_key("authorization") {
        // Google reads a bearer token as an OAuth access token, which an API key is not.
        return vec![Problem {
            status: 401,
            message: "Request had invalid authentication credentials. Expected OAuth 2 access \
                      token, login cookie or other valid authentication credential. (An API key \
                      goes in x-goog-api-key, not in Authorization.)"
                .to_owned(),
            param: None,
            code: None,
        }];
    }
    match headers.get("x-goog-api-key").map(String::as_str).or(url_key) {
        None => vec![Problem {
            status: 403,
            message: "Method doesn't allow unregistered callers (callers without established \
                      identity). Please use API Key or other form of API consumer identity to \
                      call this API."
                .to_owned(),
            param: None,
            code: None,
        }],
        Some(GEMINI_KEY) => Vec::new(),
        Some(_) => vec![Problem {
            status: 400,
            message: "API key not valid. Please pass a valid API key.".to_owned(),
            param: None,
            code: Some("API_KEY_INVALID"),
        }],
    }
}

/// `maxOutputTokens` -> `max_output_tokens`: the API's JSON takes either spelling of a field.
fn snake_case(name: &str) -> String {
    let mut snake = String::new();
    for character in name.chars() {
        if character.is_ascii_uppercase() {
            snake.push('_');
            snake.push(character.to_ascii_lowercase());
        } else {
            snake.push(character);
        }
    }
    snake
}

/// The fields of a Gemini object by their camelCase names (the API's JSON takes either spelling),
/// with a problem for each unknown field and each field given in both spellings.
fn gemini_fields<'a>(
    object: &'a Map<String, Value>,
    fields: &[&'static str],
    at: Option<&str>,
    problems: &mut Vec<Problem>,
) -> BTreeMap<&'static str, &'a Value> {
    let mut known = BTreeMap::new();
    for (key, value) in object {
        let Some(field) =
            fields.iter().find(|field| **field == key.as_str() || snake_case(field) == *key)
        else {
            let location = at.map(|at| format!(" at '{at}'")).unwrap_or_default();
            problems.push(bad(format!(
                "Invalid JSON payload received. Unknown name \"{key}\"{location}: Cannot find field."
            )));
            continue;
        };
        if known.insert(*field, value).is_some() {
            problems.push(bad(format!(
                "Invalid JSON payload received. Field \"{field}\" is given twice (camelCase and \
                 snake_case)."
            )));
        }
    }
    known
}

const GEMINI_FIELDS: &[&str] = &[
    "contents",
    "model",
    "tools",
    "toolConfig",
    "safetySettings",
    "systemInstruction",
    "generationConfig",
    "cachedContent",
];

const GEMINI_GENERATION_FIELDS: &[&str] = &[
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "enableEnhancedCivicAnswers",
    "speechConfig",
    "thinkingConfig",
    "imageConfig",
    "mediaResolution",
];

fn check_gemini_body(body: &Map<String, Value>, problems: &mut Vec<Problem>) {
    let fields = gemini_fields(body, GEMINI_FIELDS, None, problems);
    if let Some(system) = fields.get("systemInstruction") {
        match system.as_object() {
            Some(system) => {
                let system_fields =
                    gemini_fields(system, &["parts", "role"], Some("system_instruction"), problems);
                check_gemini_parts(
                    "system_instruction",
                    system_fields.get("parts").copied(),
                    problems,
                );
            }
            None => problems.push(bad(format!(
                "Invalid value at 'system_instruction' ({system}): the field is a Content object \
                 {{\"parts\": [{{\"text\": ...}}]}}"
            ))),
        }
    }
    if let Some(config) = fields.get("generationConfig") {
        match config.as_object() {
            Some(config) => check_gemini_generation_config(config, problems),
            None => problems.push(bad("Invalid value at 'generation_config': expected an object")),
        }
    }
    let contents = match fields.get("contents") {
        Some(Value::Array(contents)) if !contents.is_empty() => contents,
        Some(Value::Array(_)) | None => {
            problems.push(bad("* GenerateContentRequest.contents: contents is not specified"));
            return;
        }
        Some(other) => {
            problems.push(bad(format!("Invalid value at 'contents' ({other}): expected a list")));
            return;
        }
    };
    let mut roles = Vec::new();
    for (index, content) in contents.iter().enumerate() {
        let at = format!("contents[{index}]");
        let Some(content) = content.as_object() else {
            problems.push(bad(format!("Invalid value at '{at}': expected a Content object")));
            continue;
        };
        let content_fields = gemini_fields(content, &["parts", "role"], Some(&at), problems);
        match content_fields.get("role").map(|role| role.as_str()) {
            Some(Some(role @ ("user" | "model"))) => roles.push(Some(role)),
            // The API takes a missing role on a single-turn request (it means user).
            None if contents.len() == 1 => roles.push(None),
            _ => {
                problems.push(bad("Please use a valid role: user, model."));
                roles.push(None);
            }
        }
        check_gemini_parts(
            &format!("GenerateContentRequest.{at}"),
            content_fields.get("parts").copied(),
            problems,
        );
    }
    if roles.first() == Some(&Some("model")) {
        problems
            .push(bad("contents[0].role must be \"user\": a conversation starts with the user"));
    }
    if roles.windows(2).any(|pair| pair[0].is_some() && pair[0] == pair[1]) {
        problems
            .push(bad("Please ensure that multiturn requests alternate between user and model."));
    }
    if roles.len() > 1 && roles.last() == Some(&Some("model")) {
        problems.push(bad(
            "Please ensure that multiturn requests ends with a user role or a function response.",
        ));
    }
}

fn check_gemini_parts(at: &str, parts: Option<&Value>, problems: &mut Vec<Problem>) {
    let parts = match parts {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        _ => {
            problems.push(bad(format!("* {at}.parts: contents.parts must not be empty.")));
            return;
        }
    };
    for (index, part) in parts.iter().enumerate() {
        let is_text = part.get("text").is_some_and(Value::is_string)
            && part.as_object().is_some_and(|part| part.len() == 1);
        if !is_text {
            problems.push(bad(format!(
                "* {at}.parts[{index}]: the fake accepts only {{\"text\": ...}} parts, got {part}"
            )));
        }
    }
}

fn check_gemini_generation_config(config: &Map<String, Value>, problems: &mut Vec<Problem>) {
    let fields =
        gemini_fields(config, GEMINI_GENERATION_FIELDS, Some("generation_config"), problems);
    if let Some(temperature) = fields.get("temperature")
        && !temperature.as_f64().is_some_and(|value| (0.0..=2.0).contains(&value))
    {
        problems.push(bad(format!(
            "* GenerateContentRequest.generation_config.temperature: temperature must be in the \
             range [0.0, 2.0], got {temperature}"
        )));
    }
    if let Some(top_p) = fields.get("topP")
        && !top_p.as_f64().is_some_and(|value| (0.0..=1.0).contains(&value))
    {
        problems.push(bad(format!(
            "* GenerateContentRequest.generation_config.top_p: must be in the range [0.0, 1.0], \
             got {top_p}"
        )));
    }
    for name in ["maxOutputTokens", "candidateCount"] {
        if let Some(value) = fields.get(name)
            && value.as_u64().is_none_or(|count| count < 1)
        {
            problems.push(bad(format!(
                "* GenerateContentRequest.generation_config.{}: must be a positive integer, got \
                 {value}",
                snake_case(name)
            )));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Answers.
// ---------------------------------------------------------------------------------------------

pub(crate) fn json_response(
    status: u16,
    body: &Value,
    headers: &[(&'static str, String)],
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body)).into_response();
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert(HeaderName::from_static(name), value);
        }
    }
    response
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|now| now.as_secs()).unwrap_or_default()
}

/// Deterministic, non-zero token counts: a token per four characters.
pub(crate) fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64 / 4).max(1)
}

fn success(wire: Wire, received: &Received, model: &str, text: &str, number: u64) -> Response {
    let prompt_tokens = tokens(&FakeLlm::conversation_text(received));
    let completion_tokens = tokens(text);
    let total_tokens = prompt_tokens + completion_tokens;
    match wire {
        Wire::OpenAi => json_response(
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
                    "total_tokens": total_tokens,
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
            }),
            &[("x-request-id", format!("req_fake{number:06}"))],
        ),
        Wire::Anthropic => json_response(
            200,
            &json!({
                "id": format!("msg_fake{number:06}"),
                "type": "message",
                "role": "assistant",
                "model": model,
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
            }),
            &[("request-id", format!("req_fake{number:06}"))],
        ),
        Wire::Gemini => json_response(
            200,
            &json!({
                "candidates": [{
                    "content": {"parts": [{"text": text}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 0,
                }],
                "usageMetadata": {
                    "promptTokenCount": prompt_tokens,
                    "candidatesTokenCount": completion_tokens,
                    "totalTokenCount": total_tokens,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}],
                },
                "modelVersion": model,
                "responseId": format!("fake{number:06}"),
            }),
            &[],
        ),
    }
}

fn openai_error(message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

fn anthropic_error(status: u16, message: &str, number: u64) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    };
    json!({
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": format!("req_fake{number:06}"),
    })
}

fn gemini_status(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "NOT_IMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        500..=599 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    }
}

fn gemini_error(status: u16, message: &str, details: Vec<Value>) -> Value {
    let mut error = json!({"code": status, "message": message, "status": gemini_status(status)});
    if !details.is_empty() {
        error["details"] = Value::Array(details);
    }
    json!({"error": error})
}

fn problem_response(wire: Wire, problem: &Problem) -> Response {
    let status = problem.status;
    let body = match wire {
        Wire::OpenAi => openai_error(
            &problem.message,
            "invalid_request_error",
            problem.param.as_deref(),
            problem.code,
        ),
        Wire::Anthropic => anthropic_error(status, &problem.message, 0),
        Wire::Gemini => {
            let details = match problem.code {
                Some(reason) => vec![json!({
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason,
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                })],
                None => Vec::new(),
            };
            gemini_error(status, &problem.message, details)
        }
    };
    json_response(status, &body, &[])
}

fn unknown_endpoint(method: &Method, path: &str) -> Response {
    let message = format!("Invalid URL ({method} {path})");
    if path.starts_with("/v1beta") {
        json_response(404, &gemini_error(404, &message, Vec::new()), &[])
    } else {
        json_response(404, &openai_error(&message, "invalid_request_error", None, None), &[])
    }
}

fn unscripted(wire: Wire, number: u64) -> Response {
    let message = format!(
        "no scripted reply: the fake {} provider got a request the test did not script \
         (FakeLlm::script)",
        wire.name()
    );
    let body = match wire {
        Wire::OpenAi => openai_error(&message, "server_error", None, None),
        Wire::Anthropic => anthropic_error(500, &message, number),
        Wire::Gemini => gemini_error(500, &message, Vec::new()),
    };
    json_response(500, &body, &[])
}

fn scripted_error(
    wire: Wire,
    received: &Received,
    model: &str,
    status: u16,
    retry_after: Option<&str>,
    number: u64,
) -> Response {
    let body = match wire {
        Wire::OpenAi => {
            let key = received
                .headers
                .get("authorization")
                .map(|value| value.strip_prefix("Bearer ").unwrap_or(value))
                .unwrap_or_default();
            let (message, kind, code) = match status {
                400 => (
                    "Invalid request: the fake was scripted to reject it.".to_owned(),
                    "invalid_request_error",
                    None,
                ),
                401 => (
                    format!(
                        "Incorrect API key provided: {}. You can find your API key at \
                         https://platform.openai.com/account/api-keys.",
                        masked(key)
                    ),
                    "invalid_request_error",
                    Some("invalid_api_key"),
                ),
                403 => (
                    "You are not allowed to sample from this model".to_owned(),
                    "invalid_request_error",
                    None,
                ),
                404 => (
                    format!("The model `{model}` does not exist or you do not have access to it."),
                    "invalid_request_error",
                    Some("model_not_found"),
                ),
                429 => (
                    format!(
                        "Rate limit reached for {model} in organization org-fake on requests per \
                         min (RPM): Limit 3, Used 3, Requested 1. Please try again in 1s. Visit \
                         https://platform.openai.com/account/rate-limits to learn more."
                    ),
                    "requests",
                    Some("rate_limit_exceeded"),
                ),
                500 => (
                    "The server had an error while processing your request. Sorry about that!"
                        .to_owned(),
                    "server_error",
                    None,
                ),
                502..=504 => {
                    ("The server is overloaded or not ready yet.".to_owned(), "server_error", None)
                }
                _ if status >= 500 => (format!("server error {status}"), "server_error", None),
                _ => (format!("request error {status}"), "invalid_request_error", None),
            };
            openai_error(&message, kind, None, code)
        }
        Wire::Anthropic => {
            let message = match status {
                400 => "messages: the fake was scripted to reject this request".to_owned(),
                401 => "invalid x-api-key".to_owned(),
                403 => "Your API key does not have permission to use the specified resource."
                    .to_owned(),
                404 => format!("model: {model}"),
                413 => "Request exceeds the maximum allowed number of bytes.".to_owned(),
                429 => "This request would exceed the rate limit for your organization of 50 \
                        requests per minute. For details, refer to: \
                        https://docs.claude.com/en/api/rate-limits."
                    .to_owned(),
                529 => "Overloaded".to_owned(),
                500..=599 => "Internal server error".to_owned(),
                _ => format!("request error {status}"),
            };
            anthropic_error(status, &message, number)
        }
        Wire::Gemini => {
            let message = match status {
                400 => "Request contains an invalid argument.".to_owned(),
                401 => "Request had invalid authentication credentials.".to_owned(),
                403 => "The caller does not have permission".to_owned(),
                404 => format!(
                    "models/{model} is not found for API version v1beta, or is not supported for \
                     generateContent. Call ListModels to see the list of available models and \
                     their supported methods."
                ),
                429 => "Resource has been exhausted (e.g. check quota).".to_owned(),
                500 => "An internal error has occurred. Please retry or report in \
                        https://developers.generativeai.google/guide/troubleshooting"
                    .to_owned(),
                503 => "The model is overloaded. Please try again later.".to_owned(),
                504 => "Deadline expired before operation could complete.".to_owned(),
                _ => format!("error {status}"),
            };
            // Gemini says when to retry in a RetryInfo detail.
            let details = retry_after
                .and_then(|seconds| seconds.trim().parse::<u64>().ok())
                .map(|seconds| {
                    vec![json!({
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": format!("{seconds}s"),
                    })]
                })
                .unwrap_or_default();
            gemini_error(status, &message, details)
        }
    };
    let mut headers = Vec::new();
    if let Some(retry_after) = retry_after {
        headers.push(("retry-after", retry_after.to_owned()));
    }
    match wire {
        Wire::OpenAi => headers.push(("x-request-id", format!("req_fake{number:06}"))),
        Wire::Anthropic => headers.push(("request-id", format!("req_fake{number:06}"))),
        Wire::Gemini => {}
    }
    json_response(status, &body, &headers)
}
