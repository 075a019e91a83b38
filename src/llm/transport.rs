//! What every provider's HTTP shares: endpoint URLs, the POST-with-retries loop of the
//! providers spoken over plain reqwest (Anthropic, Google), reading a provider's error body and
//! turning a failed answer into an [`Error`]. Messages are cut short and never carry the key.

use std::error::Error as _;
use std::time::Duration;

use chrono::Utc;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::Value;

use super::retry::{self, Decision, Outcome, Retries};
use super::{ClientSettings, Endpoint, Error, Provider};

/// The longest provider message an [`Error`] carries, in characters.
const MESSAGE_LIMIT: usize = 300;

/// The key of `endpoint`, unless it is missing or blank.
pub(crate) fn configured_key(endpoint: &Endpoint) -> Option<&SecretString> {
    endpoint.api_key.as_ref().filter(|key| !key.expose_secret().trim().is_empty())
}

/// A header value holding a secret, marked sensitive so that it is never printed.
pub(crate) fn secret_header(provider: Provider, text: &str) -> Result<HeaderValue, Error> {
    let mut value = HeaderValue::from_str(text).map_err(|_| Error::Unauthorized {
        provider,
        message: "the configured key holds characters that cannot go in an HTTP header".to_owned(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// `body` as JSON bytes. Request bodies are strings and numbers, so this does not fail in
/// practice; the error is kept rather than a panic.
pub(crate) fn json_body(
    provider: Provider,
    body: &impl serde::Serialize,
) -> Result<Vec<u8>, Error> {
    serde_json::to_vec(body).map_err(|error| Error::Rejected {
        provider,
        status: 0,
        message: format!("the request cannot be written as JSON: {error}"),
    })
}

/// The configured base URL, checked: http or https, with a host.
pub(crate) fn base_url(provider: Provider, base: &str) -> Result<Url, Error> {
    let invalid = || Error::Unavailable {
        provider,
        status: None,
        message: "the configured base URL is not an http(s) URL".to_owned(),
    };
    let url = Url::parse(base.trim()).map_err(|_| invalid())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid());
    }
    Ok(url)
}

/// `base` with `segments` appended to its path, each one percent-encoded as a path segment (so a
/// `/` or `?` inside one cannot change the URL's shape).
pub(crate) fn endpoint_url(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
    url
}

/// `host:port` of `url`, for messages: never the path, the query or credentials.
pub(crate) fn host_and_port(url: &Url) -> String {
    let host = url.host_str().unwrap_or("the configured host");
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// `text` cut to [`MESSAGE_LIMIT`] characters, with `…` when something was cut.
pub(crate) fn cut(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MESSAGE_LIMIT) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// `text` with every occurrence of `key` replaced, for provider messages that echo it.
pub(crate) fn redact(text: &str, key: Option<&SecretString>) -> String {
    match key.map(|key| key.expose_secret().trim()) {
        Some(key) if !key.is_empty() && text.contains(key) => text.replace(key, "[redacted]"),
        _ => text.to_owned(),
    }
}

/// A transport error as a short sentence: its causes joined, without the URL.
pub(crate) fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    cut(&text)
}

/// The error for a call whose connection failed (after the retries).
///
/// The address goes to the log for the operator, not into the error: the error reaches MCP
/// clients, and an internal host name is not theirs to see.
pub(crate) fn no_connection(provider: Provider, url: &Url, error: &reqwest::Error) -> Error {
    let target = host_and_port(url);
    let message = if error.is_connect() {
        tracing::warn!(provider = %provider, "cannot connect to {target}");
        format!("cannot connect to the {provider} endpoint")
    } else {
        tracing::warn!(provider = %provider, "the connection to {target} closed before an answer");
        format!("the connection to the {provider} endpoint closed before an answer")
    };
    Error::Unavailable { provider, status: None, message }
}

/// What a provider said in a failed answer, read from any of the three providers' error bodies
/// (`{"error":{"message",..}}` for all of them, plus a few shapes compatible servers use).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The provider's own message, cut short, the key redacted.
    pub(crate) message: Option<String>,
    /// The wait the body asks for (a Google `RetryInfo` detail).
    pub(crate) retry_delay: Option<Duration>,
    /// A 429 that waiting does not cure: OpenAI's `insufficient_quota`, Anthropic's
    /// `enforced_spend_limit_reached`.
    pub(crate) quota_exhausted: bool,
    /// A 400 that is really a bad key: Google's `API_KEY_INVALID`.
    pub(crate) bad_key: bool,
}

impl Failure {
    /// Reads an error body; a body that is not JSON gives an empty [`Failure`].
    pub(crate) fn read(body: &[u8], key: Option<&SecretString>) -> Failure {
        let Ok(json) = serde_json::from_slice::<Value>(body) else {
            return Failure::default();
        };
        let error = &json["error"];
        let message = error["message"]
            .as_str()
            .or_else(|| error.as_str())
            .or_else(|| json["message"].as_str())
            .or_else(|| json["detail"].as_str())
            .filter(|message| !message.trim().is_empty())
            .map(|message| cut(&redact(message, key)));
        let details = error["details"].as_array().map(Vec::as_slice).unwrap_or_default();
        let retry_delay = details
            .iter()
            .filter_map(|detail| detail["retryDelay"].as_str())
            .find_map(retry::parse_protobuf_duration);
        let quota_exhausted = error["type"] == "insufficient_quota"
            || error["code"] == "insufficient_quota"
            || error["details"]["error_code"] == "enforced_spend_limit_reached";
        let bad_key = details.iter().any(|detail| detail["reason"] == "API_KEY_INVALID");
        Failure { message, retry_delay, quota_exhausted, bad_key }
    }
}

/// The error for a failed HTTP answer once retrying is over.
pub(crate) fn failure_error(
    provider: Provider,
    status: u16,
    failure: Failure,
    retry_after: Option<Duration>,
) -> Error {
    let message = failure.message.unwrap_or_else(|| {
        StatusCode::from_u16(status)
            .ok()
            .and_then(|status| status.canonical_reason())
            .map_or_else(|| "no error message".to_owned(), str::to_lowercase)
    });
    // A refused key is reported in orca's words: providers quote parts of the key they refused
    // ("Incorrect API key provided: sk-proj-****abcd"), and the error reaches MCP clients.
    let refused = || Error::Unauthorized {
        provider,
        message: format!("the key was refused (HTTP {status})"),
    };
    match status {
        401 | 403 => refused(),
        400 if failure.bad_key => refused(),
        429 if failure.quota_exhausted => Error::Rejected { provider, status, message },
        429 => Error::RateLimited { provider, retry_after },
        500..=599 => Error::Unavailable {
            provider,
            status: Some(status),
            message: format!("HTTP {status}: {message}"),
        },
        _ => Error::Rejected { provider, status, message },
    }
}

/// One JSON POST to a provider spoken over plain reqwest.
pub(crate) struct Post<'a> {
    pub(crate) provider: Provider,
    pub(crate) http: &'a reqwest::Client,
    pub(crate) settings: &'a ClientSettings,
    pub(crate) url: Url,
    /// Content type, key and version headers; the key marked sensitive.
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
    /// Redacted from any message the provider sends back.
    pub(crate) key: Option<&'a SecretString>,
}

/// What differs between the providers that orca calls over plain reqwest (Anthropic, Google).
pub(crate) struct JsonCall<'a> {
    pub(crate) provider: Provider,
    /// The header that carries the key (`x-api-key`, `x-goog-api-key`).
    pub(crate) key_header: &'static str,
    /// Further fixed headers (`anthropic-version`).
    pub(crate) extra_headers: &'a [(&'static str, &'static str)],
    /// Path segments under the base URL.
    pub(crate) path: &'a [&'a str],
}

impl JsonCall<'_> {
    /// POST `body` as JSON with the endpoint's key and read the answer with `read`; the answer
    /// and the HTTP attempts made.
    ///
    /// # Errors
    ///
    /// [`Error::MissingKey`] without a key, the errors of [`Post::send`], and
    /// [`Error::Malformed`] when `read` cannot make sense of a success.
    pub(crate) async fn send<T>(
        &self,
        http: &reqwest::Client,
        settings: &ClientSettings,
        endpoint: &Endpoint,
        body: &impl serde::Serialize,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<(T, u32), Error> {
        use reqwest::header::{ACCEPT, CONTENT_TYPE};
        let provider = self.provider;
        let key = configured_key(endpoint).ok_or(Error::MissingKey { provider })?;
        let base = base_url(provider, &endpoint.base_url)?;
        let mut headers = HeaderMap::new();
        headers.insert(self.key_header, secret_header(provider, key.expose_secret().trim())?);
        for (name, value) in self.extra_headers {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let post = Post {
            provider,
            http,
            settings,
            url: endpoint_url(&base, self.path),
            headers,
            body: json_body(provider, body)?,
            key: Some(key),
        };
        let success = post.send().await?;
        let answer =
            read(&success.body).map_err(|message| Error::Malformed { provider, message })?;
        Ok((answer, success.attempts))
    }
}

/// A success answer, read in full.
#[derive(Debug)]
pub(crate) struct Success {
    pub(crate) body: Vec<u8>,
    /// HTTP attempts made, this one included.
    pub(crate) attempts: u32,
}

impl Post<'_> {
    /// Sends the POST, retrying per [`retry`]'s policy, each attempt bounded by the timeout.
    ///
    /// # Errors
    ///
    /// The [`Error`] of the last attempt: a failed answer mapped by [`failure_error`],
    /// [`Error::Timeout`], or [`Error::Unavailable`] when no connection could be made.
    pub(crate) async fn send(&self) -> Result<Success, Error> {
        let provider = self.provider;
        let mut retries = Retries::new(provider, self.settings);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (outcome, error) = match self.attempt().await {
                Ok((status, _, body)) if status.is_success() => {
                    return Ok(Success { body, attempts });
                }
                Ok((status, headers, body)) => {
                    let failure = Failure::read(&body, self.key);
                    let asked = retry::retry_after(&headers, Utc::now()).or(failure.retry_delay);
                    let status = status.as_u16();
                    let error = failure_error(provider, status, failure.clone(), asked);
                    if failure.quota_exhausted {
                        return Err(error);
                    }
                    (Outcome::Answer { status, retry_after: asked }, error)
                }
                Err(error) if error.is_timeout() => {
                    return Err(Error::Timeout { provider, after: self.settings.timeout });
                }
                Err(error) if retry::is_connection_failure(&error) => {
                    (Outcome::NoConnection, no_connection(provider, &self.url, &error))
                }
                Err(error) => {
                    return Err(Error::Unavailable {
                        provider,
                        status: None,
                        message: describe(error),
                    });
                }
            };
            match retries.decide(outcome) {
                Decision::Retry { wait } => tokio::time::sleep(wait).await,
                Decision::GiveUp => return Err(error),
            }
        }
    }

    /// One attempt: the request sent and the whole answer read, within the timeout.
    async fn attempt(&self) -> Result<(StatusCode, HeaderMap, Vec<u8>), reqwest::Error> {
        let mut post = self.http.post(self.url.clone()).headers(self.headers.clone());
        if let Some(traceparent) = crate::telemetry::traceparent() {
            post = post.header("traceparent", traceparent);
        }
        let response = post.body(self.body.clone()).timeout(self.settings.timeout).send().await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await?.to_vec();
        Ok((status, headers, body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_every_provider_give_their_message_and_flags() {
        let none = Failure::default();
        let message = |text: &str| Failure { message: Some(text.to_owned()), ..Failure::default() };
        let cases: Vec<(&str, &str, Failure)> = vec![
            (
                "openai",
                r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
                message("The model `gpt-9` does not exist"),
            ),
            (
                "openai quota",
                r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
                Failure { quota_exhausted: true, ..message("You exceeded your current quota") },
            ),
            (
                "anthropic",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#,
                message("Overloaded"),
            ),
            (
                "anthropic spend limit",
                r#"{"type":"error","error":{"type":"rate_limit_error","message":"Spend limit reached","details":{"error_code":"enforced_spend_limit_reached"}}}"#,
                Failure { quota_exhausted: true, ..message("Spend limit reached") },
            ),
            (
                "google",
                r#"{"error":{"code":404,"message":"models/gemini-9 is not found","status":"NOT_FOUND"}}"#,
                message("models/gemini-9 is not found"),
            ),
            (
                "google bad key",
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}"#,
                Failure {
                    bad_key: true,
                    ..message("API key not valid. Please pass a valid API key.")
                },
            ),
            (
                "google retry info",
                r#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}"#,
                Failure { retry_delay: Some(Duration::from_secs(37)), ..message("Quota exceeded") },
            ),
            ("error as a string", r#"{"error":"model not loaded"}"#, message("model not loaded")),
            (
                "vllm style",
                r#"{"object":"error","message":"bad temperature","type":"BadRequestError"}"#,
                message("bad temperature"),
            ),
            ("detail", r#"{"detail":"Not Found"}"#, message("Not Found")),
            ("blank message", r#"{"error":{"message":"  "}}"#, none.clone()),
            ("html", "<html><body>Bad Gateway</body></html>", none.clone()),
            ("empty", "", none),
        ];
        for (name, body, expected) in cases {
            assert_eq!(Failure::read(body.as_bytes(), None), expected, "{name}");
        }
    }

    #[test]
    fn error_messages_never_carry_the_key_and_are_cut_short() {
        let key = SecretString::from("sk-live-1234567890");
        let body = r#"{"error":{"message":"Incorrect API key provided: sk-live-1234567890."}}"#;
        let failure = Failure::read(body.as_bytes(), Some(&key));
        assert_eq!(failure.message.as_deref(), Some("Incorrect API key provided: [redacted]."));

        let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "é".repeat(1000));
        let failure = Failure::read(long.as_bytes(), None);
        let message = failure.message.expect("a message");
        assert_eq!(message.chars().count(), MESSAGE_LIMIT + 1);
        assert!(message.ends_with('…'));
    }

    #[test]
    fn failed_answers_map_to_errors_by_status() {
        let provider = Provider::Anthropic;
        let said = |text: &str| Failure { message: Some(text.to_owned()), ..Failure::default() };
        let wait = Some(Duration::from_secs(9));
        let cases: Vec<(u16, Failure, Option<Duration>, Error)> = vec![
            (
                400,
                said("bad"),
                None,
                Error::Rejected { provider, status: 400, message: "bad".to_owned() },
            ),
            (
                400,
                Failure { bad_key: true, ..said("API key not valid") },
                None,
                Error::Unauthorized {
                    provider,
                    message: "the key was refused (HTTP 400)".to_owned(),
                },
            ),
            (
                401,
                said("no"),
                None,
                Error::Unauthorized {
                    provider,
                    message: "the key was refused (HTTP 401)".to_owned(),
                },
            ),
            (
                403,
                said("no"),
                None,
                Error::Unauthorized {
                    provider,
                    message: "the key was refused (HTTP 403)".to_owned(),
                },
            ),
            (
                404,
                Failure::default(),
                None,
                Error::Rejected { provider, status: 404, message: "not found".to_owned() },
            ),
            (
                422,
                said("unprocessable"),
                None,
                Error::Rejected { provider, status: 422, message: "unprocessable".to_owned() },
            ),
            (429, said("slow down"), wait, Error::RateLimited { provider, retry_after: wait }),
            (429, Failure::default(), None, Error::RateLimited { provider, retry_after: None }),
            (
                429,
                Failure { quota_exhausted: true, ..said("quota") },
                None,
                Error::Rejected { provider, status: 429, message: "quota".to_owned() },
            ),
            (
                500,
                Failure::default(),
                None,
                Error::Unavailable {
                    provider,
                    status: Some(500),
                    message: "HTTP 500: internal server error".to_owned(),
                },
            ),
            (
                503,
                said("down"),
                wait,
                Error::Unavailable {
                    provider,
                    status: Some(503),
                    message: "HTTP 503: down".to_owned(),
                },
            ),
            (
                529,
                said("Overloaded"),
                None,
                Error::Unavailable {
                    provider,
                    status: Some(529),
                    message: "HTTP 529: Overloaded".to_owned(),
                },
            ),
            (
                302,
                Failure::default(),
                None,
                Error::Rejected { provider, status: 302, message: "found".to_owned() },
            ),
        ];
        for (status, failure, retry_after, expected) in cases {
            assert_eq!(failure_error(provider, status, failure, retry_after), expected, "{status}");
        }
    }

    #[test]
    fn endpoint_urls_append_encoded_segments_to_the_base_path() {
        let cases = [
            (
                "https://api.anthropic.com",
                &["v1", "messages"][..],
                "https://api.anthropic.com/v1/messages",
            ),
            (
                "https://api.anthropic.com/",
                &["v1", "messages"][..],
                "https://api.anthropic.com/v1/messages",
            ),
            (
                "http://127.0.0.1:8080/proxy/",
                &["v1", "messages"][..],
                "http://127.0.0.1:8080/proxy/v1/messages",
            ),
            (
                "https://generativelanguage.googleapis.com",
                &["v1beta", "models", "gemini-2.5-flash:generateContent"][..],
                "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
            ),
            (
                "https://generativelanguage.googleapis.com",
                &["v1beta", "models", "../x?key=1#y:generateContent"][..],
                "https://generativelanguage.googleapis.com/v1beta/models/..%2Fx%3Fkey=1%23y:generateContent",
            ),
        ];
        for (base, segments, expected) in cases {
            let base = base_url(Provider::Google, base).expect("a valid base");
            assert_eq!(endpoint_url(&base, segments).as_str(), expected);
        }
    }

    #[test]
    fn base_urls_must_be_http_with_a_host() {
        let cases = [
            ("https://api.openai.com/v1", Some("api.openai.com:443")),
            ("http://localhost:11434/v1", Some("localhost:11434")),
            ("http://user:secret@10.0.0.1/v1?x=1", Some("10.0.0.1:80")),
            ("http://[::1]:8000", Some("[::1]:8000")),
            ("ftp://example.com", None),
            ("not a url", None),
            ("", None),
        ];
        for (base, expected) in cases {
            let got = base_url(Provider::OpenAi, base).ok().map(|url| host_and_port(&url));
            assert_eq!(got.as_deref(), expected, "{base:?}");
        }
    }

    #[test]
    fn blank_keys_count_as_missing() {
        let endpoint = |key: Option<&str>| Endpoint {
            provider: Provider::Anthropic,
            api_key: key.map(SecretString::from),
            base_url: "https://api.anthropic.com".to_owned(),
        };
        assert!(configured_key(&endpoint(Some("sk-ant-1"))).is_some());
        assert!(configured_key(&endpoint(Some("  "))).is_none());
        assert!(configured_key(&endpoint(None)).is_none());
    }

    #[test]
    fn keys_that_cannot_be_headers_are_refused_without_panicking() {
        assert!(secret_header(Provider::OpenAi, "Bearer sk-1").is_ok_and(|v| v.is_sensitive()));
        assert_eq!(
            secret_header(Provider::OpenAi, "Bearer sk-1\nx"),
            Err(Error::Unauthorized {
                provider: Provider::OpenAi,
                message: "the configured key holds characters that cannot go in an HTTP header"
                    .to_owned(),
            })
        );
    }
}
