//! A fake OpenAI-compatible embeddings server speaking the real wire format of
//! `POST /v1/embeddings`: a bearer key, `{model, input}` with `input` a string or a list of
//! strings, and `{object: "list", data: [{object: "embedding", index, embedding}], model, usage}`
//! back (OpenAI's error body on 401, 400 and 500); and Gemini's
//! `POST /v1beta/models/{model}:batchEmbedContents` with `x-goog-api-key`,
//! `{requests: [{model: "models/{model}", content: {parts: [{text}]}}]}` in and
//! `{embeddings: [{values}]}` out. Its vectors are made from keywords, so a test knows which
//! texts are close; it can be told to fail, or to hold requests until the test releases them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The key the fake accepts.
pub(crate) const KEY: &str = "sk-test-embeddings-fake";
/// The key its Gemini face accepts.
pub(crate) const GEMINI_KEY: &str = "gemini-test-embeddings-fake";

/// The dimensions: a text has 1 in each whose words it contains, and 0.1 in the last.
const DIMENSIONS: [&[&str]; 3] =
    [&["add", "plus", "sum"], &["echo", "repeat"], &["count", "increment"]];

#[derive(Debug, Default)]
struct Shared {
    failing: AtomicBool,
    /// The number of inputs of each request served, in order.
    batches: Mutex<Vec<usize>>,
    /// The inputs of each OpenAI request received, in order (held ones too).
    inputs: Mutex<Vec<Vec<String>>>,
    /// While set: requests with an input not among its texts wait until it opens.
    gate: Mutex<Option<Gate>>,
    /// How many requests have been held so far.
    held: AtomicUsize,
}

#[derive(Debug)]
struct Gate {
    free: Vec<String>,
    open: tokio::sync::watch::Sender<bool>,
}

#[derive(Debug)]
pub(crate) struct FakeEmbeddings {
    address: SocketAddr,
    shared: Arc<Shared>,
    _thread: std::thread::JoinHandle<()>,
}

impl FakeEmbeddings {
    /// Start the server on a free port of 127.0.0.1; it runs until the test process ends.
    pub(crate) fn start() -> FakeEmbeddings {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind");
        listener.set_nonblocking(true).expect("cannot make the listener non-blocking");
        let address = listener.local_addr().expect("no address");
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route("/v1/embeddings", axum::routing::post(embeddings))
            .route("/v1beta/models/{action}", axum::routing::post(gemini))
            .with_state(shared.clone());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cannot build the fake's runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                axum::serve(listener, app).await.expect("the fake embeddings server failed");
            });
        });
        FakeEmbeddings { address, shared, _thread: thread }
    }

    /// Environment for orca: `OPENAI_BASE_URL` (`http://127.0.0.1:PORT/v1`) and `OPENAI_API_KEY`.
    pub(crate) fn env(&self) -> [(&'static str, String); 2] {
        [
            ("OPENAI_BASE_URL", format!("http://{}/v1", self.address)),
            ("OPENAI_API_KEY", KEY.to_owned()),
        ]
    }

    /// Environment for orca's Gemini provider: `GEMINI_BASE_URL` and `GEMINI_API_KEY`.
    pub(crate) fn gemini_env(&self) -> [(&'static str, String); 2] {
        [
            ("GEMINI_BASE_URL", format!("http://{}", self.address)),
            ("GEMINI_API_KEY", GEMINI_KEY.to_owned()),
        ]
    }

    /// From now on, answer 500 (or serve again).
    pub(crate) fn fail(&self, failing: bool) {
        self.shared.failing.store(failing, Ordering::SeqCst);
    }

    /// The number of inputs of each request served so far.
    pub(crate) fn batches(&self) -> Vec<usize> {
        self.shared.batches.lock().unwrap().clone()
    }

    /// The inputs of each OpenAI request received so far, held ones included.
    pub(crate) fn inputs(&self) -> Vec<Vec<String>> {
        self.shared.inputs.lock().unwrap().clone()
    }

    /// From now on, hold every OpenAI request that has an input other than `free` until
    /// [`FakeEmbeddings::release`].
    pub(crate) fn hold_all_but(&self, free: &[&str]) {
        let free = free.iter().map(|text| (*text).to_owned()).collect();
        let gate = Gate { free, open: tokio::sync::watch::Sender::new(false) };
        *self.shared.gate.lock().unwrap() = Some(gate);
    }

    /// Answer the held requests, and hold no more.
    pub(crate) fn release(&self) {
        if let Some(gate) = self.shared.gate.lock().unwrap().take() {
            gate.open.send_replace(true);
        }
    }

    /// How many requests have been held so far.
    pub(crate) fn held(&self) -> usize {
        self.shared.held.load(Ordering::SeqCst)
    }
}

fn error(status: StatusCode, message: &str, kind: &str) -> Response {
    (
        status,
        Json(json!({"error": {"message": message, "type": kind, "param": null, "code": null}})),
    )
        .into_response()
}

fn vector(text: &str) -> Vec<f64> {
    let lower = text.to_lowercase();
    let mut vector: Vec<f64> = DIMENSIONS
        .iter()
        .map(|words| if words.iter().any(|word| lower.contains(word)) { 1.0 } else { 0.0 })
        .collect();
    vector.push(0.1);
    vector
}

async fn embeddings(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let authorized = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value == format!("Bearer {KEY}"));
    if !authorized {
        return error(
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided",
            "invalid_request_error",
        );
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "We could not parse the JSON body",
            "invalid_request_error",
        );
    };
    let model = body.get("model").and_then(Value::as_str).unwrap_or_default().to_owned();
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) && !items.is_empty() => {
            items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "'input' is a required property",
                "invalid_request_error",
            );
        }
    };
    if model.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "you must provide a model parameter",
            "invalid_request_error",
        );
    }
    shared.inputs.lock().unwrap().push(inputs.clone());
    let gate = shared.gate.lock().unwrap().as_ref().and_then(|gate| {
        inputs.iter().any(|input| !gate.free.contains(input)).then(|| gate.open.subscribe())
    });
    if let Some(mut open) = gate {
        shared.held.fetch_add(1, Ordering::SeqCst);
        // The gate's sender goes once it has opened: either way the request is answered.
        let _ = open.wait_for(|open| *open).await;
    }
    if shared.failing.load(Ordering::SeqCst) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "The server had an error", "server_error");
    }
    shared.batches.lock().unwrap().push(inputs.len());
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": vector(text)}))
        .collect();
    let tokens: usize = inputs.iter().map(|text| text.split_whitespace().count()).sum();
    Json(json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
    }))
    .into_response()
}

async fn gemini(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(action): axum::extract::Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let gemini_error = |status: StatusCode, message: &str, reason: &str| {
        (
            status,
            Json(json!({"error": {"code": status.as_u16(), "message": message, "status": reason}})),
        )
            .into_response()
    };
    let Some(model) = action.strip_suffix(":batchEmbedContents") else {
        return gemini_error(StatusCode::NOT_FOUND, "method not found", "NOT_FOUND");
    };
    if headers.get("x-goog-api-key").and_then(|value| value.to_str().ok()) != Some(GEMINI_KEY) {
        return gemini_error(StatusCode::BAD_REQUEST, "API key not valid", "INVALID_ARGUMENT");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return gemini_error(StatusCode::BAD_REQUEST, "Invalid JSON payload", "INVALID_ARGUMENT");
    };
    let mut texts = Vec::new();
    for request in body.get("requests").and_then(Value::as_array).into_iter().flatten() {
        let named =
            request.get("model").and_then(Value::as_str) == Some(&format!("models/{model}"));
        let text = request.pointer("/content/parts/0/text").and_then(Value::as_str);
        match (named, text) {
            (true, Some(text)) => texts.push(text.to_owned()),
            _ => {
                return gemini_error(
                    StatusCode::BAD_REQUEST,
                    "each request needs the model of the URL and content.parts[].text",
                    "INVALID_ARGUMENT",
                );
            }
        }
    }
    if texts.is_empty() || texts.len() > 100 {
        return gemini_error(StatusCode::BAD_REQUEST, "1 to 100 requests", "INVALID_ARGUMENT");
    }
    if shared.failing.load(Ordering::SeqCst) {
        return gemini_error(StatusCode::INTERNAL_SERVER_ERROR, "Internal error", "INTERNAL");
    }
    shared.batches.lock().unwrap().push(texts.len());
    let embeddings: Vec<Value> = texts.iter().map(|text| json!({"values": vector(text)})).collect();
    Json(json!({"embeddings": embeddings})).into_response()
}
