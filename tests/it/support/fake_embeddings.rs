//! A fake OpenAI-compatible embeddings server speaking the real wire format of
//! `POST /v1/embeddings`: a bearer key, `{model, input}` with `input` a string or a list of
//! strings, and `{object: "list", data: [{object: "embedding", index, embedding}], model, usage}`
//! back (OpenAI's error body on 401, 400 and 500). Its vectors are made from keywords, so a test
//! knows which texts are close; it can be told to fail.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The key the fake accepts.
pub(crate) const KEY: &str = "sk-test-embeddings-fake";

/// The dimensions: a text has 1 in each whose words it contains, and 0.1 in the last.
const DIMENSIONS: [&[&str]; 3] =
    [&["add", "plus", "sum"], &["echo", "repeat"], &["count", "increment"]];

#[derive(Debug, Default)]
struct Shared {
    failing: AtomicBool,
    /// The number of inputs of each request served, in order.
    batches: Mutex<Vec<usize>>,
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

    /// From now on, answer 500 (or serve again).
    pub(crate) fn fail(&self, failing: bool) {
        self.shared.failing.store(failing, Ordering::SeqCst);
    }

    /// The number of inputs of each request served so far.
    pub(crate) fn batches(&self) -> Vec<usize> {
        self.shared.batches.lock().unwrap().clone()
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
