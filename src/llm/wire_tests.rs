//! Real HTTP against a scripted local server, for every provider: retries counted, waits
//! honoured, timeouts not retried, refused connections, and the path and headers each provider
//! is sent. The fakes of the real APIs live in the integration tests; these check the plumbing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse as _, Response};
use secrecy::SecretString;

use super::{
    ClientSettings, Completion, Endpoint, Error, Llm, Message, Provider, Request, Role,
    sample_request,
};

/// One scripted answer.
#[derive(Debug, Clone)]
struct Scripted {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
    /// How long the server waits before answering.
    delay: Duration,
}

impl Scripted {
    fn new(status: u16, body: &str) -> Scripted {
        Scripted { status, headers: Vec::new(), body: body.to_owned(), delay: Duration::ZERO }
    }

    fn header(mut self, name: &'static str, value: &'static str) -> Scripted {
        self.headers.push((name, value));
        self
    }

    fn delayed(mut self, delay: Duration) -> Scripted {
        self.delay = delay;
        self
    }
}

/// One request the server saw.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: serde_json::Value,
}

#[derive(Default)]
struct Server {
    script: VecDeque<Scripted>,
    seen: Vec<Seen>,
}

/// A local server answering with `script` in order (then 500s), recording what it sees.
async fn serve(script: Vec<Scripted>) -> (String, Arc<Mutex<Server>>) {
    let server = Arc::new(Mutex::new(Server { script: script.into(), seen: Vec::new() }));
    let state = Arc::clone(&server);
    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
        let state = Arc::clone(&state);
        async move {
            let scripted = {
                let mut server = state.lock().expect("server state");
                server.seen.push(Seen {
                    path: uri.to_string(),
                    headers,
                    body: serde_json::from_slice(&body).unwrap_or_default(),
                });
                server.script.pop_front().unwrap_or_else(|| Scripted::new(500, "script ended"))
            };
            tokio::time::sleep(scripted.delay).await;
            let mut response: Response =
                (StatusCode::from_u16(scripted.status).expect("status"), scripted.body)
                    .into_response();
            for (name, value) in scripted.headers {
                response.headers_mut().insert(name, value.parse().expect("header value"));
            }
            response
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a local port");
    let address = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), server)
}

/// What differs between providers on the wire.
struct Wire {
    provider: Provider,
    /// Appended to the server's address to make the base URL.
    base_suffix: &'static str,
    path: &'static str,
    key_header: &'static str,
    key_value: &'static str,
    success: &'static str,
}

const WIRES: [Wire; 3] = [
    Wire {
        provider: Provider::OpenAi,
        base_suffix: "/v1",
        path: "/v1/chat/completions",
        key_header: "authorization",
        key_value: "Bearer test-key",
        success: r#"{"id":"c","object":"chat.completion","created":1,"model":"served-model","choices":[{"index":0,"message":{"role":"assistant","content":"SELECT 2"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
    },
    Wire {
        provider: Provider::Anthropic,
        base_suffix: "",
        path: "/v1/messages",
        key_header: "x-api-key",
        key_value: "test-key",
        success: r#"{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"SELECT 2"}],"model":"served-model","stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}"#,
    },
    Wire {
        provider: Provider::Google,
        base_suffix: "",
        path: "/v1beta/models/model-under-test:generateContent",
        key_header: "x-goog-api-key",
        key_value: "test-key",
        success: r#"{"candidates":[{"content":{"parts":[{"text":"SELECT 2"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"totalTokenCount":7},"modelVersion":"served-model"}"#,
    },
];

fn settings() -> ClientSettings {
    ClientSettings {
        timeout: Duration::from_millis(500),
        max_retries: 2,
        max_backoff: Duration::from_secs(1),
    }
}

fn llm(wire: &Wire, address: &str, key: Option<&str>) -> Llm {
    let endpoint = Endpoint {
        provider: wire.provider,
        api_key: key.map(SecretString::from),
        base_url: format!("{address}{}", wire.base_suffix),
    };
    Llm::new(vec![endpoint], settings())
}

async fn ask(wire: &Wire, script: Vec<Scripted>) -> (Result<Completion, Error>, Vec<Seen>) {
    let (address, server) = serve(script).await;
    let result =
        llm(wire, &address, Some("test-key")).complete(wire.provider, &sample_request()).await;
    let seen = server.lock().expect("server state").seen.clone();
    (result, seen)
}

#[tokio::test]
async fn a_429_then_a_success_takes_two_attempts_and_reads_the_answer() {
    for wire in &WIRES {
        let script = vec![
            Scripted::new(429, r#"{"error":{"message":"slow down"}}"#).header("retry-after", "0"),
            Scripted::new(200, wire.success),
        ];
        let (result, seen) = ask(wire, script).await;
        let completion = result.unwrap_or_else(|error| panic!("{}: {error}", wire.provider));
        assert_eq!(completion.text, "SELECT 2", "{}", wire.provider);
        assert_eq!(completion.model, "served-model", "{}", wire.provider);
        assert_eq!(completion.prompt_tokens, Some(5), "{}", wire.provider);
        assert_eq!(completion.completion_tokens, Some(2), "{}", wire.provider);
        assert_eq!(completion.http_attempts, 2, "{}", wire.provider);
        assert_eq!(seen.len(), 2, "{}", wire.provider);
        for request in &seen {
            assert_eq!(request.path, wire.path, "{}", wire.provider);
            assert_eq!(request.headers[wire.key_header], wire.key_value, "{}", wire.provider);
            assert_eq!(request.headers["content-type"], "application/json", "{}", wire.provider);
            assert!(request.body.is_object(), "{}: {:?}", wire.provider, request.body);
        }
    }
}

#[tokio::test]
async fn anthropic_is_sent_its_api_version() {
    let wire = &WIRES[1];
    let (result, seen) = ask(wire, vec![Scripted::new(200, wire.success)]).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
}

#[tokio::test]
async fn the_key_never_goes_in_the_url() {
    for wire in &WIRES {
        let (_, seen) = ask(wire, vec![Scripted::new(200, wire.success)]).await;
        assert!(!seen[0].path.contains("test-key"), "{}: {}", wire.provider, seen[0].path);
    }
}

#[tokio::test]
async fn failures_end_in_the_error_of_the_last_attempt() {
    let slow = Duration::from_secs(2);
    // (script, expected error, attempts the server sees)
    let cases = |provider: Provider| -> Vec<(Vec<Scripted>, Error, usize)> {
        vec![
            (
                vec![Scripted::new(503, r#"{"error":{"message":"down"}}"#); 3],
                Error::Unavailable {
                    provider,
                    status: Some(503),
                    message: "HTTP 503: down".to_owned(),
                },
                3,
            ),
            (
                vec![
                    Scripted::new(429, r#"{"error":{"message":"later"}}"#)
                        .header("retry-after", "30"),
                ],
                Error::RateLimited { provider, retry_after: Some(Duration::from_secs(30)) },
                1,
            ),
            (
                vec![Scripted::new(429, "").header("retry-after-ms", "10"); 3],
                Error::RateLimited { provider, retry_after: Some(Duration::from_millis(10)) },
                3,
            ),
            (
                vec![Scripted::new(401, r#"{"error":{"message":"bad key"}}"#)],
                Error::Unauthorized {
                    provider,
                    message: "the key was refused (HTTP 401)".to_owned(),
                },
                1,
            ),
            (
                vec![Scripted::new(404, r#"{"error":{"message":"no such model"}}"#)],
                Error::Rejected { provider, status: 404, message: "no such model".to_owned() },
                1,
            ),
            (
                vec![Scripted::new(200, r#"{"unexpected":true}"#).delayed(slow)],
                Error::Timeout { provider, after: Duration::from_millis(500) },
                1,
            ),
        ]
    };
    for wire in &WIRES {
        for (script, expected, attempts) in cases(wire.provider) {
            let (result, seen) = ask(wire, script).await;
            assert_eq!(result.map(|c| c.text), Err(expected.clone()), "{}", wire.provider);
            assert_eq!(seen.len(), attempts, "{}: {expected}", wire.provider);
        }
    }
}

#[tokio::test]
async fn a_success_that_is_not_the_providers_format_is_malformed() {
    for wire in &WIRES {
        let (result, _) = ask(wire, vec![Scripted::new(200, r#"{"unexpected":true}"#)]).await;
        assert!(
            matches!(result, Err(Error::Malformed { provider, .. }) if provider == wire.provider),
            "{}: {result:?}",
            wire.provider
        );
    }
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported_without_the_path() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port");
    let address = listener.local_addr().expect("an address");
    drop(listener);
    for wire in &WIRES {
        let llm = llm(wire, &format!("http://{address}"), Some("test-key"));
        let result = llm.complete(wire.provider, &sample_request()).await;
        let expected = Error::Unavailable {
            provider: wire.provider,
            status: None,
            message: format!("cannot connect to the {} endpoint", wire.provider),
        };
        assert_eq!(result.map(|c| c.text), Err(expected), "{}", wire.provider);
    }
}

#[tokio::test]
async fn a_local_openai_compatible_server_needs_no_key_and_is_sent_none() {
    let wire = &WIRES[0];
    let (address, server) = serve(vec![Scripted::new(200, wire.success)]).await;
    let llm = llm(wire, &address, None);
    assert!(llm.is_configured(Provider::OpenAi));
    let completion = llm.complete(Provider::OpenAi, &sample_request()).await;
    assert_eq!(completion.map(|c| c.text), Ok("SELECT 2".to_owned()));
    let seen = server.lock().expect("server state").seen.clone();
    assert!(seen[0].headers.get("authorization").is_none(), "{:?}", seen[0].headers);
    assert!(seen[0].body.get("max_tokens").is_some(), "{}", seen[0].body);
}

#[tokio::test]
async fn concurrent_calls_share_one_client() {
    let wire = &WIRES[1];
    let (address, _) = serve(vec![Scripted::new(200, wire.success); 8]).await;
    let llm = llm(wire, &address, Some("test-key"));
    let tasks: Vec<_> = (0..8)
        .map(|turn| {
            let llm = llm.clone();
            tokio::spawn(async move {
                let request = Request {
                    messages: vec![Message {
                        role: Role::User,
                        content: format!("question {turn}"),
                    }],
                    ..sample_request()
                };
                llm.complete(Provider::Anthropic, &request).await.map(|c| c.http_attempts)
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.expect("the task ran"), Ok(1));
    }
}
