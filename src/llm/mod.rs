//! LLM providers behind one request shape: OpenAI and every OpenAI-compatible server (through
//! async-openai, `OPENAI_BASE_URL`), Anthropic's Messages API and Google's Gemini
//! `generateContent` (both over reqwest). One retry policy for all of them (429 and 5xx, with
//! exponential backoff, honouring `Retry-After`), a timeout per attempt, and errors that never
//! carry a key. Knows nothing of MCP.
//!
//! # Design notes
//!
//! The model providers behind one `Request` (model, system prompt, alternating turns, temperature,
//! token cap) and one `Completion` (text, reported model, tokens, latency, HTTP attempts);
//! `Provider` is a closed enum, not a trait.
//!
//! Keys are redacted from provider messages; redirects are not followed. Knows nothing of MCP.

mod anthropic;
mod client_model;
mod google;
mod openai;
mod retry;
mod transport;
#[cfg(test)]
mod wire_tests;

use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use secrecy::SecretString;

pub(crate) use client_model::{ClientModel, Refusal, Sampled, Sampling};

/// The providers orca can talk to. A closed list: adding one is a code change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Provider {
    OpenAi,
    Anthropic,
    Google,
    /// The calling client's own model, asked through MCP sampling (`client_model.rs`): no key,
    /// no endpoint, only for the call of a client that offers it.
    Client,
}

impl Provider {
    /// The providers reached over HTTP with a key of orca's own.
    pub(crate) const ALL: [Provider; 3] = [Provider::OpenAi, Provider::Anthropic, Provider::Google];

    /// `openai`, `anthropic`, `google` or `client`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Google => "google",
            Provider::Client => "client",
        }
    }

    /// The provider a user-given name means (case-insensitive; `gemini` is `google`).
    pub(crate) fn parse(text: &str) -> Option<Provider> {
        match text.trim().to_ascii_lowercase().as_str() {
            "openai" => Some(Provider::OpenAi),
            "anthropic" => Some(Provider::Anthropic),
            "google" | "gemini" => Some(Provider::Google),
            "client" => Some(Provider::Client),
            _ => None,
        }
    }

    /// The environment variable(s) that hold the provider's key, as a person should read them.
    pub(crate) fn key_variables(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::Google => "GEMINI_API_KEY (or GOOGLE_API_KEY)",
            Provider::Client => "ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY",
        }
    }
}

/// Where `provider`'s API lives when no base URL is configured.
pub(crate) fn default_base_url(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi => openai::DEFAULT_BASE_URL,
        Provider::Anthropic => anthropic::DEFAULT_BASE_URL,
        Provider::Google => google::DEFAULT_BASE_URL,
        Provider::Client => "",
    }
}

/// Whether calls can be made through `endpoint`: it has a key, or it is an OpenAI-compatible
/// server at an address of its own (local servers need no key).
pub(crate) fn is_configured(endpoint: &Endpoint) -> bool {
    transport::configured_key(endpoint).is_some()
        || (endpoint.provider == Provider::OpenAi && !openai::is_official(&endpoint.base_url))
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where and how to reach one provider.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) provider: Provider,
    /// `None`: not configured (calls fail with [`Error::MissingKey`]), except for OpenAI
    /// with a non-default base URL (a local server such as Ollama needs no key).
    pub(crate) api_key: Option<SecretString>,
    /// OpenAI: including `/v1` (`https://api.openai.com/v1`); Anthropic: `https://api.anthropic.com`
    /// (`/v1/messages` is appended); Google: `https://generativelanguage.googleapis.com`
    /// (`/v1beta/models/{model}:generateContent` is appended).
    pub(crate) base_url: String,
}

/// Settings shared by every provider.
#[derive(Debug, Clone)]
pub(crate) struct ClientSettings {
    /// Each HTTP attempt is abandoned after this long.
    pub(crate) timeout: Duration,
    /// Further attempts after a 429 or 5xx answer (or a connection refused).
    pub(crate) max_retries: u32,
    /// The longest wait between attempts (backoff and `Retry-After` alike).
    pub(crate) max_backoff: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message {
    pub(crate) role: Role,
    pub(crate) content: String,
}

/// What orca asks a model.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) model: String,
    pub(crate) system: String,
    /// Starts with a user turn; turns alternate.
    pub(crate) messages: Vec<Message>,
    pub(crate) temperature: f32,
    pub(crate) max_tokens: u32,
}

/// A model's answer.
#[derive(Debug, Clone)]
pub(crate) struct Completion {
    pub(crate) text: String,
    /// The model as the provider reports it (the requested name when it reports none).
    pub(crate) model: String,
    pub(crate) prompt_tokens: Option<i64>,
    pub(crate) completion_tokens: Option<i64>,
    /// From the first request to the answer, waits between attempts included.
    pub(crate) latency: Duration,
    /// HTTP attempts made (1 when the first one succeeded).
    pub(crate) http_attempts: u32,
}

/// Why a model gave no answer. Messages name the provider and what to do; they never carry a
/// key or a URL with a key in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum Error {
    /// No key configured for a provider that needs one.
    #[error("the {provider} provider is not configured: set {}", provider.key_variables())]
    MissingKey { provider: Provider },
    /// 401 or 403.
    #[error("{provider} refused the credentials: {message}")]
    Unauthorized { provider: Provider, message: String },
    /// 400, 404, 422 ...: the request itself is wrong (an unknown model, say). Not retried.
    #[error("{provider} rejected the request ({status}): {message}")]
    Rejected { provider: Provider, status: u16, message: String },
    /// Still 429 after the retries (or `Retry-After` longer than `max_backoff`).
    #[error("{provider} is rate limiting requests")]
    RateLimited { provider: Provider, retry_after: Option<Duration> },
    /// 5xx or no connection, after the retries.
    #[error("{provider} is unavailable: {message}")]
    Unavailable { provider: Provider, status: Option<u16>, message: String },
    /// An attempt took longer than the configured timeout (not retried: it may have been billed).
    #[error("{provider} did not answer within {} ms", after.as_millis())]
    Timeout { provider: Provider, after: Duration },
    /// A 2xx answer that is not the provider's format, or that holds no text.
    #[error("{provider} sent an answer orca cannot read: {message}")]
    Malformed { provider: Provider, message: String },
    /// The calling client (or the person at it) would not answer through its model.
    #[error("the client declined to answer through its model: {message}")]
    ClientDeclined { message: String },
    /// The calling client cannot be asked: it offers no sampling, or it went away.
    #[error("{reason}")]
    ClientUnavailable { reason: String },
}

impl Error {
    /// The error's kind, as a span's `error.type`.
    fn kind(&self) -> &'static str {
        match self {
            Error::MissingKey { .. } => "missing_key",
            Error::Unauthorized { .. } => "unauthorized",
            Error::Rejected { .. } => "rejected",
            Error::RateLimited { .. } => "rate_limited",
            Error::Unavailable { .. } => "unavailable",
            Error::Timeout { .. } => "timeout",
            Error::Malformed { .. } => "malformed",
            Error::ClientDeclined { .. } => "client_declined",
            Error::ClientUnavailable { .. } => "client_unavailable",
        }
    }
}

/// A provider's answer as its module reads it, before the call's timing is added.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    text: String,
    model: String,
    prompt_tokens: Option<i64>,
    completion_tokens: Option<i64>,
}

/// The clients of every provider, built once and shared. Cheap to clone; `complete` may run
/// from many tasks at once.
#[derive(Debug, Clone)]
pub(crate) struct Llm {
    endpoints: Vec<Endpoint>,
    settings: ClientSettings,
    /// One HTTP client (one connection pool) for every provider; the error when it could not be
    /// built, reported by every call.
    http: Result<reqwest::Client, String>,
}

impl Llm {
    /// The clients for `endpoints` (the first endpoint of a provider counts). Redirects are not
    /// followed: a redirect would carry `x-api-key` or `x-goog-api-key` to another host.
    pub(crate) fn new(endpoints: Vec<Endpoint>, settings: ClientSettings) -> Llm {
        crate::tls::install();
        let http = reqwest::Client::builder()
            .user_agent(concat!("orca/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| {
                tracing::error!(
                    error = %error,
                    "the HTTP client for model providers cannot be built"
                );
                format!("the HTTP client cannot be built: {error}")
            });
        Llm { endpoints, settings, http }
    }

    /// The endpoint configured for `provider`, if any.
    fn endpoint(&self, provider: Provider) -> Option<&Endpoint> {
        self.endpoints.iter().find(|endpoint| endpoint.provider == provider)
    }

    /// Whether calls to `provider` can be made (a key, or OpenAI at a non-default URL).
    pub(crate) fn is_configured(&self, provider: Provider) -> bool {
        self.endpoint(provider).is_some_and(is_configured)
    }

    /// Ask `provider`'s model, retrying 429, 5xx and failed connections per the settings.
    ///
    /// # Errors
    ///
    /// [`Error::MissingKey`] when the provider is not configured; otherwise the [`Error`] of the
    /// last attempt (see the variants).
    #[cfg(test)]
    pub(crate) async fn complete(
        &self,
        provider: Provider,
        request: &Request,
    ) -> Result<Completion, Error> {
        self.complete_through(provider, request, None).await
    }

    /// Ask `provider`'s model as `complete` does, with the calling client's model for
    /// [`Provider::Client`] (one sampling request, bounded by the timeout; nothing is retried
    /// at this level).
    ///
    /// # Errors
    ///
    /// As `complete`; for the client, [`Error::ClientUnavailable`] without one, and the
    /// errors of its answer (`client_model::complete`).
    pub(crate) async fn complete_through(
        &self,
        provider: Provider,
        request: &Request,
        client: Option<&dyn ClientModel>,
    ) -> Result<Completion, Error> {
        let span = crate::telemetry::Span::child(SpanKind::Client, || {
            (format!("chat {}", request.model), request_attributes(provider, request))
        });
        let completion = span.run(self.ask(provider, request, client)).await;
        match &completion {
            Ok(completion) => span.set(|| completion_attributes(completion)),
            Err(error) => span.fail(error.kind(), error.to_string()),
        }
        completion
    }

    /// [`Llm::complete`] inside its span.
    async fn ask(
        &self,
        provider: Provider,
        request: &Request,
        client: Option<&dyn ClientModel>,
    ) -> Result<Completion, Error> {
        let started = Instant::now();
        if provider == Provider::Client {
            let Some(client) = client else {
                return Err(Error::ClientUnavailable {
                    reason: "the client provider answers only a call from an MCP client that offers its model (sampling)".to_owned(),
                });
            };
            let answer = client_model::complete(client, request, self.settings.timeout).await?;
            return Ok(Completion {
                text: answer.text,
                model: answer.model,
                prompt_tokens: None,
                completion_tokens: None,
                latency: started.elapsed(),
                http_attempts: 1,
            });
        }
        let endpoint = self.endpoint(provider).ok_or(Error::MissingKey { provider })?;
        let http = self.http.as_ref().map_err(|message| Error::Unavailable {
            provider,
            status: None,
            message: message.clone(),
        })?;
        let settings = &self.settings;
        let (answer, http_attempts) = match provider {
            Provider::OpenAi => openai::complete(http, settings, endpoint, request).await?,
            Provider::Anthropic => anthropic::complete(http, settings, endpoint, request).await?,
            Provider::Google => google::complete(http, settings, endpoint, request).await?,
            // Asked above: the client has no endpoint.
            Provider::Client => return Err(Error::MissingKey { provider }),
        };
        let latency = started.elapsed();
        tracing::debug!(
            provider = %provider,
            model = %answer.model,
            http_attempts,
            latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            "the model answered"
        );
        Ok(Completion {
            text: answer.text,
            model: answer.model,
            prompt_tokens: answer.prompt_tokens,
            completion_tokens: answer.completion_tokens,
            latency,
            http_attempts,
        })
    }

    /// One Anthropic Messages API call with a body the caller built (tools and tool blocks,
    /// for `orca ask`), through the same client, key, retries and errors as [`Llm::complete`].
    ///
    /// # Errors
    ///
    /// [`Error::MissingKey`] without a key; otherwise the [`Error`] of the last attempt.
    pub(crate) async fn anthropic_messages(
        &self,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        let provider = Provider::Anthropic;
        let endpoint = self.endpoint(provider).ok_or(Error::MissingKey { provider })?;
        let http = self.http.as_ref().map_err(|message| Error::Unavailable {
            provider,
            status: None,
            message: message.clone(),
        })?;
        let (answer, _) = anthropic::messages_json(http, &self.settings, endpoint, body).await?;
        Ok(answer)
    }
}

/// A model request's span attributes, after OpenTelemetry's GenAI conventions (both the
/// older `gen_ai.system` and the newer `gen_ai.provider.name`).
fn request_attributes(provider: Provider, request: &Request) -> Vec<KeyValue> {
    let system = match provider {
        Provider::OpenAi => "openai",
        Provider::Anthropic => "anthropic",
        Provider::Google => "gcp.gemini",
        Provider::Client => "mcp.client",
    };
    vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.system", system),
        KeyValue::new("gen_ai.provider.name", system),
        KeyValue::new("gen_ai.request.model", request.model.clone()),
        KeyValue::new("gen_ai.request.temperature", f64::from(request.temperature)),
        KeyValue::new("gen_ai.request.max_tokens", i64::from(request.max_tokens)),
    ]
}

/// What the answer adds to its span: the model that answered, the tokens, the attempts.
fn completion_attributes(completion: &Completion) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("gen_ai.response.model", completion.model.clone()),
        KeyValue::new("orca.llm.http_attempts", i64::from(completion.http_attempts)),
    ];
    if let Some(tokens) = completion.prompt_tokens {
        attributes.push(KeyValue::new("gen_ai.usage.input_tokens", tokens));
    }
    if let Some(tokens) = completion.completion_tokens {
        attributes.push(KeyValue::new("gen_ai.usage.output_tokens", tokens));
    }
    attributes
}

/// The one request every provider's body snapshot is built from.
#[cfg(test)]
fn sample_request() -> Request {
    Request {
        model: "model-under-test".to_owned(),
        system: "You write PostgreSQL. Answer with one statement.".to_owned(),
        messages: vec![
            Message { role: Role::User, content: "How many orders are there?".to_owned() },
            Message { role: Role::Assistant, content: "SELECT count(*) FROM orders;".to_owned() },
            Message { role: Role::User, content: "Only those shipped in 2024.".to_owned() },
        ],
        temperature: 0.2,
        max_tokens: 1024,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ClientSettings {
        ClientSettings {
            timeout: Duration::from_secs(5),
            max_retries: 2,
            max_backoff: Duration::from_secs(2),
        }
    }

    fn endpoint(provider: Provider, key: Option<&str>, base_url: &str) -> Endpoint {
        Endpoint { provider, api_key: key.map(SecretString::from), base_url: base_url.to_owned() }
    }

    #[test]
    fn llm_can_be_shared_between_tasks() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        shareable::<Llm>();
        fn sendable<T: Send>(_: &T) {}
        let llm = Llm::new(Vec::new(), settings());
        let request = sample_request();
        sendable(&llm.complete(Provider::OpenAi, &request));
    }

    #[test]
    fn configured_means_a_key_or_openai_at_another_url() {
        let openai = default_base_url(Provider::OpenAi);
        let anthropic = default_base_url(Provider::Anthropic);
        let google = default_base_url(Provider::Google);
        let local = "http://localhost:11434/v1";
        // (endpoints, provider asked about, configured)
        let cases = [
            (vec![], Provider::OpenAi, false),
            (vec![endpoint(Provider::OpenAi, Some("sk-1"), openai)], Provider::OpenAi, true),
            (vec![endpoint(Provider::OpenAi, None, openai)], Provider::OpenAi, false),
            (vec![endpoint(Provider::OpenAi, Some(" "), openai)], Provider::OpenAi, false),
            (vec![endpoint(Provider::OpenAi, None, local)], Provider::OpenAi, true),
            (vec![endpoint(Provider::OpenAi, Some("sk-1"), openai)], Provider::Anthropic, false),
            (
                vec![endpoint(Provider::Anthropic, Some("sk-ant"), anthropic)],
                Provider::Anthropic,
                true,
            ),
            (
                vec![endpoint(Provider::Anthropic, None, "http://localhost:1")],
                Provider::Anthropic,
                false,
            ),
            (vec![endpoint(Provider::Google, Some("AIza"), google)], Provider::Google, true),
            (vec![endpoint(Provider::Google, None, google)], Provider::Google, false),
        ];
        for (endpoints, provider, expected) in cases {
            let llm = Llm::new(endpoints.clone(), settings());
            assert_eq!(llm.is_configured(provider), expected, "{provider} with {endpoints:?}");
        }
    }

    #[tokio::test]
    async fn calls_to_unconfigured_providers_fail_with_missing_key_before_any_http() {
        let endpoints = vec![
            endpoint(Provider::OpenAi, None, default_base_url(Provider::OpenAi)),
            endpoint(Provider::Anthropic, None, default_base_url(Provider::Anthropic)),
        ];
        let llm = Llm::new(endpoints, settings());
        for provider in Provider::ALL {
            let got = llm.complete(provider, &sample_request()).await.map(|c| c.text);
            assert_eq!(got, Err(Error::MissingKey { provider }), "{provider}");
        }
    }

    #[test]
    fn missing_key_messages_name_the_variable_to_set() {
        let cases = [
            (Provider::OpenAi, "the openai provider is not configured: set OPENAI_API_KEY"),
            (
                Provider::Anthropic,
                "the anthropic provider is not configured: set ANTHROPIC_API_KEY",
            ),
            (
                Provider::Google,
                "the google provider is not configured: set GEMINI_API_KEY (or GOOGLE_API_KEY)",
            ),
        ];
        for (provider, expected) in cases {
            assert_eq!(Error::MissingKey { provider }.to_string(), expected);
        }
    }
}
