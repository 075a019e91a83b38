//! The HTTP client of Metabase's API: signing in (a session from `POST /api/session`, or an API
//! key), one new login and one retry when a session has expired (shared by every call that meets
//! the same expired session), login throttles waited out rather than hammered, the version read
//! once, and every answer turned into JSON or an [`Error`] that carries what was asked, with
//! secrets left out.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, OnceCell, watch};

use crate::config::{MetabaseAuth, MetabaseConfig};

/// The longest body text an error keeps.
pub(crate) const RAW_RESPONSE_LIMIT: usize = 4 * 1024;

/// The HTTP methods the tools use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }

    fn reqwest(self) -> reqwest::Method {
        match self {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Delete => reqwest::Method::DELETE,
        }
    }
}

/// What a call asked for, as an error reports it: secret-looking keys are removed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RequestInfo {
    pub(crate) endpoint: String,
    pub(crate) method: Method,
    pub(crate) params: Value,
}

impl RequestInfo {
    fn new(
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Box<Self> {
        let params = match body {
            Some(body) => scrub(body),
            None => {
                let mut map = Map::new();
                for (key, value) in query {
                    match map.get_mut(*key) {
                        Some(Value::Array(items)) => items.push(Value::from(value.clone())),
                        Some(existing) => {
                            *existing = json!([existing.clone(), value]);
                        }
                        None => {
                            map.insert((*key).to_owned(), Value::from(value.clone()));
                        }
                    }
                }
                scrub(&Value::Object(map))
            }
        };
        Box::new(RequestInfo { endpoint: path.to_owned(), method, params })
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({ "endpoint": self.endpoint, "method": self.method.as_str(), "params": self.params })
    }
}

/// Whether a key's value looks like a secret (it is removed from what errors report).
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('-', "_");
    ["password", "secret", "token", "session", "api_key", "apikey", "authorization", "credential"]
        .iter()
        .any(|part| key.contains(part))
}

/// `value` without secret-looking keys, at any depth.
pub(crate) fn scrub(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| !is_secret_key(key))
                .map(|(key, inner)| (key.clone(), scrub(inner)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(scrub).collect()),
        other => other.clone(),
    }
}

/// Why a call to Metabase failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Metabase answered with an error status (a 401 only after the one new login).
    #[error("metabase answered HTTP {status}")]
    Http { status: u16, body: String, retry_after: Option<Duration>, request: Box<RequestInfo> },
    /// A query Metabase ran and reported as failed (HTTP 202 with `status: "failed"`).
    #[error("the query failed")]
    QueryFailed { status: u16, body: Value, request: Box<RequestInfo> },
    /// Signing in failed: the credentials were refused, or the answer made no sense.
    #[error("login failed: {reason}")]
    Login { reason: String },
    /// Metabase throttles logins; the next attempt may be made after `retry_after`.
    #[error("login is throttled by metabase")]
    Throttled { retry_after: Duration },
    /// No answer: connection refused, reset, DNS, TLS.
    #[error("cannot reach metabase: {message}")]
    Unreachable { message: String, request: Option<Box<RequestInfo>> },
    /// No answer within the configured timeout.
    #[error("metabase did not answer within {} ms", after.as_millis())]
    Timeout { after: Duration, request: Option<Box<RequestInfo>> },
    /// A success status with a body that is not JSON.
    #[error("metabase's answer is not JSON")]
    Malformed { status: u16, body: String, request: Box<RequestInfo> },
}

/// The server's state as `list_servers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    /// Not tried yet.
    Starting,
    Running,
    /// The last login failed; the text says why and which variables to check.
    LoginFailed(String),
    Unreachable(String),
}

impl Status {
    pub(crate) fn text(&self) -> String {
        match self {
            Status::Starting => "starting".to_owned(),
            Status::Running => "running".to_owned(),
            Status::LoginFailed(reason) => format!("login failed: {reason}"),
            Status::Unreachable(reason) => format!("unreachable: {reason}; check METABASE_URL"),
        }
    }
}

/// The Metabase version, from `version.tag` of `GET /api/session/properties`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) tag: String,
    /// The feature release: 50 for `v0.50.3` and `v1.50.3`; `None` when the tag is not a
    /// release number (a development build), treated as the newest.
    pub(crate) release: Option<u32>,
}

impl Version {
    pub(crate) fn parse(tag: &str) -> Version {
        let release = tag
            .trim_start_matches(['v', 'V'])
            .split(['.', '-'])
            .nth(1)
            .and_then(|part| part.parse::<u32>().ok());
        Version { tag: tag.to_owned(), release }
    }

    /// Whether this release is at least `release` (unknown counts as the newest).
    pub(crate) fn at_least(&self, release: u32) -> bool {
        self.release.is_none_or(|own| own >= release)
    }
}

/// A successful answer.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) body: Value,
}

#[derive(Debug, Default)]
struct Session {
    /// Bumped at every successful login, so a call knows whether the session it saw expire is
    /// still the current one.
    generation: u64,
    token: Option<SecretString>,
}

#[derive(Debug, Default)]
struct LoginState {
    /// No login is attempted before this instant (Metabase's throttle said so).
    not_before: Option<Instant>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    base: String,
    auth: MetabaseAuth,
    timeout: Duration,
    max_login_wait: Duration,
    session: RwLock<Session>,
    /// Held for the whole of a login, so that concurrent calls share one.
    login: Mutex<LoginState>,
    version: OnceCell<Version>,
    status: watch::Sender<Status>,
    /// Logins sent to Metabase, for the log.
    logins: std::sync::atomic::AtomicU64,
}

/// A cheap handle on one Metabase instance.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    inner: Arc<Inner>,
}

impl Client {
    pub(crate) fn new(config: &MetabaseConfig) -> Client {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Client {
            inner: Arc::new(Inner {
                http,
                base: config.url.trim_end_matches('/').to_owned(),
                auth: config.auth.clone(),
                timeout: config.timeout,
                max_login_wait: config.max_login_wait,
                session: RwLock::new(Session::default()),
                login: Mutex::new(LoginState::default()),
                version: OnceCell::new(),
                status: watch::channel(Status::Starting).0,
                logins: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }

    /// The variables a person checks when signing in fails.
    pub(crate) fn credential_variables(&self) -> &'static str {
        match self.inner.auth {
            MetabaseAuth::Session { .. } => "METABASE_USERNAME and METABASE_PASSWORD",
            MetabaseAuth::ApiKey(_) => "METABASE_API_KEY",
        }
    }

    pub(crate) fn status(&self) -> Status {
        self.inner.status.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Status> {
        self.inner.status.subscribe()
    }

    fn set_status(&self, status: Status) {
        self.inner.status.send_if_modified(|current| {
            if *current == status {
                return false;
            }
            match &status {
                Status::Running => tracing::info!("metabase: signed in"),
                other => tracing::warn!("metabase: {}", other.text()),
            }
            *current = status;
            true
        });
    }

    /// Sign in (or check the API key) and read the version; failures are kept as the status,
    /// not returned: orca serves without Metabase and tries again on the next call.
    pub(crate) async fn connect(&self) {
        let outcome = match &self.inner.auth {
            MetabaseAuth::Session { .. } => self.token().await.map(drop),
            MetabaseAuth::ApiKey(_) => self.get("/api/user/current", &[]).await.map(drop),
        };
        if outcome.is_ok() {
            let _ = self.version().await;
        }
    }

    /// The instance's version, read once.
    ///
    /// # Errors
    ///
    /// When `GET /api/session/properties` fails.
    pub(crate) async fn version(&self) -> Result<Version, Error> {
        self.inner
            .version
            .get_or_try_init(|| async {
                let answer = self.get("/api/session/properties", &[]).await?;
                let tag = answer
                    .body
                    .pointer("/version/tag")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_owned();
                // Whoever follows the status learns the version with it.
                self.inner.status.send_modify(|_| {});
                Ok(Version::parse(&tag))
            })
            .await
            .cloned()
    }

    /// The version's tag, when it has been read.
    pub(crate) fn known_version(&self) -> Option<String> {
        self.inner.version.get().map(|version| version.tag.clone())
    }

    pub(crate) async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Answer, Error> {
        self.request(Method::Get, path, query, None).await
    }

    /// One call to the API; a 401 on a session logs in again once (shared with concurrent
    /// calls) and repeats the call once.
    ///
    /// # Errors
    ///
    /// [`Error`], with the request described without secrets.
    pub(crate) async fn request(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Answer, Error> {
        let info = || RequestInfo::new(method, path, query, body);
        let mut stale: Option<u64> = None;
        loop {
            let (generation, header_name, secret) = match &self.inner.auth {
                MetabaseAuth::Session { .. } => {
                    let (generation, token) = match stale {
                        None => self.token().await?,
                        Some(expired) => self.login(Some(expired)).await?,
                    };
                    (Some(generation), "x-metabase-session", token)
                }
                MetabaseAuth::ApiKey(key) => (None, "x-api-key", key.clone()),
            };
            let mut header = HeaderValue::from_str(secret.expose_secret()).map_err(|_| {
                Error::Login {
                    reason: format!(
                        "the credential holds characters that cannot go in an HTTP header; check {}",
                        self.credential_variables()
                    ),
                }
            })?;
            header.set_sensitive(true);
            let mut request = self
                .inner
                .http
                .request(method.reqwest(), format!("{}{path}", self.inner.base))
                .header(header_name, header);
            if !query.is_empty() {
                request = request.query(query);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(|error| self.transport(&error, info()))?;
            let status = response.status().as_u16();
            let retry_after = retry_after(response.headers());
            let text = response.text().await.map_err(|error| self.transport(&error, info()))?;
            if status == 401 {
                match generation {
                    Some(generation) if stale.is_none() => {
                        tracing::info!("metabase: the session expired; signing in again");
                        stale = Some(generation);
                        continue;
                    }
                    Some(_) => {}
                    None => {
                        let reason = format!(
                            "Metabase refused the API key (HTTP 401); check {}",
                            self.credential_variables()
                        );
                        self.set_status(Status::LoginFailed(reason.clone()));
                        return Err(Error::Login { reason });
                    }
                }
            }
            if status != 401 {
                self.set_status(Status::Running);
            }
            return answer(status, text, retry_after, info());
        }
    }

    fn transport(&self, error: &reqwest::Error, request: Box<RequestInfo>) -> Error {
        if error.is_timeout() {
            return Error::Timeout { after: self.inner.timeout, request: Some(request) };
        }
        let message = describe_transport(error);
        self.set_status(Status::Unreachable(message.clone()));
        Error::Unreachable { message, request: Some(request) }
    }

    /// The current session, signing in when there is none.
    async fn token(&self) -> Result<(u64, SecretString), Error> {
        {
            let session = self.inner.session.read().unwrap_or_else(|e| e.into_inner());
            if let Some(token) = &session.token {
                return Ok((session.generation, token.clone()));
            }
        }
        self.login(None).await
    }

    /// Sign in, unless another call already replaced the session that `expired` names (or,
    /// with `expired` unset, already made one).
    async fn login(&self, expired: Option<u64>) -> Result<(u64, SecretString), Error> {
        let MetabaseAuth::Session { username, password } = &self.inner.auth else {
            return Err(Error::Login { reason: "no session login with an API key".to_owned() });
        };
        let mut state = self.inner.login.lock().await;
        {
            let session = self.inner.session.read().unwrap_or_else(|e| e.into_inner());
            if let Some(token) = &session.token
                && expired != Some(session.generation)
            {
                return Ok((session.generation, token.clone()));
            }
        }
        for attempt in 0..2 {
            if let Some(not_before) = state.not_before {
                let wait = not_before.saturating_duration_since(Instant::now());
                if wait > self.inner.max_login_wait {
                    return Err(Error::Throttled { retry_after: wait });
                }
                tokio::time::sleep(wait).await;
                state.not_before = None;
            }
            match self.post_session(username, password).await {
                Ok(token) => {
                    let mut session = self.inner.session.write().unwrap_or_else(|e| e.into_inner());
                    session.generation += 1;
                    session.token = Some(token.clone());
                    drop(session);
                    self.set_status(Status::Running);
                    let generation =
                        self.inner.session.read().unwrap_or_else(|e| e.into_inner()).generation;
                    return Ok((generation, token));
                }
                Err(Error::Throttled { retry_after }) => {
                    tracing::warn!(
                        "metabase: login throttled; waiting {} ms",
                        retry_after.as_millis()
                    );
                    state.not_before = Some(Instant::now() + retry_after);
                    if attempt == 1 || retry_after > self.inner.max_login_wait {
                        return Err(Error::Throttled { retry_after });
                    }
                }
                Err(error) => {
                    let mut session = self.inner.session.write().unwrap_or_else(|e| e.into_inner());
                    session.token = None;
                    return Err(error);
                }
            }
        }
        Err(Error::Login { reason: "login did not complete".to_owned() })
    }

    /// `POST /api/session`; the password never leaves this function except in the body.
    async fn post_session(
        &self,
        username: &str,
        password: &SecretString,
    ) -> Result<SecretString, Error> {
        let count = self.inner.logins.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        tracing::debug!("metabase: login {count} of this process");
        let info = RequestInfo::new(
            Method::Post,
            "/api/session",
            &[],
            Some(&json!({ "username": username })),
        );
        let body = json!({ "username": username, "password": password.expose_secret() });
        let response = self
            .inner
            .http
            .post(format!("{}/api/session", self.inner.base))
            .json(&body)
            .send()
            .await
            .map_err(|error| self.transport(&error, info.clone()))?;
        let status = response.status().as_u16();
        let retry_after_header = retry_after(response.headers());
        let text = response.text().await.map_err(|error| self.transport(&error, info.clone()))?;
        if let Some(wait) = throttle_wait(status, &text, retry_after_header) {
            return Err(Error::Throttled { retry_after: wait });
        }
        if (200..300).contains(&status) {
            let token = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|body| body.get("id").and_then(Value::as_str).map(str::to_owned));
            return match token {
                Some(token) if !token.is_empty() => Ok(SecretString::from(token)),
                _ => Err(self.login_failed(format!(
                    "Metabase answered the login with HTTP {status} but no session id"
                ))),
            };
        }
        if status >= 500 {
            let message = format!("Metabase answered the login with HTTP {status}");
            self.set_status(Status::Unreachable(message.clone()));
            return Err(Error::Http { status, body: cut(&text), retry_after: None, request: info });
        }
        let said = login_message(&text, password.expose_secret());
        Err(self.login_failed(format!(
            "Metabase refused the credentials (HTTP {status}{said}); check {}",
            self.credential_variables()
        )))
    }

    fn login_failed(&self, reason: String) -> Error {
        self.set_status(Status::LoginFailed(reason.clone()));
        Error::Login { reason }
    }
}

/// What Metabase said about a refused login, with the password (should it appear) masked.
fn login_message(text: &str, password: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let mut parts = Vec::new();
    if let Some(Value::Object(errors)) = parsed.as_ref().and_then(|body| body.get("errors")) {
        for (key, value) in errors {
            if let Some(value) = value.as_str() {
                parts.push(format!("{key}: {value}"));
            }
        }
    }
    if parts.is_empty() {
        return String::new();
    }
    let mut said = format!(": {}", parts.join("; "));
    if !password.is_empty() {
        said = said.replace(password, "****");
    }
    said.chars().take(200).collect()
}

/// How long a login throttle asks to wait: a 429 (its `Retry-After`, else 15 s), or Metabase's
/// "Too many attempts! You must wait N seconds before trying again."
pub(crate) fn throttle_wait(
    status: u16,
    text: &str,
    retry_after: Option<Duration>,
) -> Option<Duration> {
    if status == 429 {
        return Some(retry_after.unwrap_or(Duration::from_secs(15)));
    }
    if !text.contains("Too many attempts") {
        return None;
    }
    let seconds = text
        .split("wait")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse::<u64>().ok())
        .unwrap_or(15);
    Some(Duration::from_secs(seconds))
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let text = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    text.trim().parse::<u64>().ok().map(Duration::from_secs)
}

fn describe_transport(error: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut kind =
        if error.is_connect() { "connection failed" } else { "request failed" }.to_owned();
    // The innermost cause names the system error (connection refused, dns ...) without a URL.
    let mut source = error.source();
    let mut last = None;
    while let Some(inner) = source {
        last = Some(inner.to_string());
        source = inner.source();
    }
    if let Some(last) = last {
        kind.push_str(": ");
        kind.push_str(&last.chars().take(200).collect::<String>());
    }
    kind
}

/// Text cut to [`RAW_RESPONSE_LIMIT`] bytes on a character boundary.
pub(crate) fn cut(text: &str) -> String {
    if text.len() <= RAW_RESPONSE_LIMIT {
        return text.to_owned();
    }
    let mut end = RAW_RESPONSE_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// An answer's status and text as an [`Answer`] or an [`Error`].
fn answer(
    status: u16,
    text: String,
    retry_after: Option<Duration>,
    request: Box<RequestInfo>,
) -> Result<Answer, Error> {
    if !(200..300).contains(&status) {
        return Err(Error::Http { status, body: text, retry_after, request });
    }
    if text.trim().is_empty() {
        return Ok(Answer { body: Value::Null });
    }
    let body: Value = serde_json::from_str(&text).map_err(|_| Error::Malformed {
        status,
        body: cut(&text),
        request: request.clone(),
    })?;
    let failed = body.get("status").and_then(Value::as_str) == Some("failed")
        && (body.get("error").is_some() || body.get("error_type").is_some());
    if failed {
        return Err(Error::QueryFailed { status, body, request });
    }
    Ok(Answer { body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_open_source_and_enterprise_tags() {
        for (tag, release) in [
            ("v0.46.6", Some(46)),
            ("v1.50.3", Some(50)),
            ("v0.47.0-RC1", Some(47)),
            ("vUNKNOWN", None),
        ] {
            assert_eq!(Version::parse(tag).release, release, "{tag}");
        }
        assert!(Version::parse("vUNKNOWN").at_least(47));
        assert!(!Version::parse("v0.46.6").at_least(47));
    }

    #[test]
    fn login_throttles_are_recognised_with_their_wait() {
        let text = r#"{"errors":{"username":"Too many attempts! You must wait 42 seconds before trying again."}}"#;
        assert_eq!(throttle_wait(400, text, None), Some(Duration::from_secs(42)));
        assert_eq!(
            throttle_wait(429, "", Some(Duration::from_secs(3))),
            Some(Duration::from_secs(3))
        );
        assert_eq!(throttle_wait(401, r#"{"errors":{"password":"did not match"}}"#, None), None);
    }

    #[test]
    fn secret_looking_keys_are_removed_at_any_depth() {
        let value = json!({"name": "x", "password": "p", "nested": [{"session_id": "s", "api-key": "k", "id": 1}]});
        assert_eq!(scrub(&value), json!({"name": "x", "nested": [{"id": 1}]}));
    }

    #[test]
    fn a_202_with_status_failed_is_a_failed_query() {
        let request = RequestInfo::new(Method::Post, "/api/dataset", &[], None);
        let text = r#"{"status":"failed","error":"Syntax error","data":{"rows":[],"cols":[]}}"#;
        assert!(matches!(
            answer(202, text.to_owned(), None, request.clone()),
            Err(Error::QueryFailed { status: 202, .. })
        ));
        let ok = r#"{"status":"completed","data":{"rows":[[1]],"cols":[]}}"#;
        assert!(answer(202, ok.to_owned(), None, request).is_ok());
    }

    #[test]
    fn a_refused_login_message_never_shows_the_password() {
        let text = r#"{"errors":{"password":"hunter2 did not match stored password"}}"#;
        let said = login_message(text, "hunter2");
        assert!(!said.contains("hunter2") && said.contains("did not match"), "{said}");
    }
}
