//! The HTTP client of Weaviate's REST and GraphQL APIs: one `reqwest::Client` with the bearer key
//! and the configured headers (marked sensitive), errors read from Weaviate's bodies
//! (`{"error":[{"message"}]}`, go-openapi's `{"code","message"}`, or none), GraphQL's
//! 200-with-`errors` turned into an error, and every secret redacted from what comes back.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::config::WeaviateConfig;

/// What went wrong talking to Weaviate.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Error {
    #[error("Weaviate at {url} is unreachable: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Weaviate did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// A non-2xx answer with Weaviate's messages (none when the body was empty).
    #[error("Weaviate answered HTTP {status}{}", first_message(.messages))]
    Status { status: u16, messages: Vec<String> },
    /// GraphQL errors inside a 200: each `{message, locations, path}`.
    #[error("Weaviate's GraphQL API refused the query: {}", graphql_messages(.0))]
    GraphQl(Vec<Value>),
    #[error("Weaviate answered with an unexpected body: {0}")]
    Malformed(String),
    #[error("the HTTP client cannot be built: {0}")]
    Client(String),
}

fn first_message(messages: &[String]) -> String {
    if messages.is_empty() { String::new() } else { format!(": {}", messages.join("; ")) }
}

fn graphql_messages(errors: &[Value]) -> String {
    errors
        .iter()
        .map(|error| error.get("message").and_then(Value::as_str).unwrap_or("(no message)"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Weaviate's REST and GraphQL endpoints.
#[derive(Debug, Clone)]
pub(crate) struct WeaviateClient {
    http: Result<reqwest::Client, String>,
    base: String,
    display_url: String,
    timeout: Duration,
    /// Values that must never be shown: the API key and every configured header value.
    secrets: Arc<[String]>,
}

impl WeaviateClient {
    pub(crate) fn new(config: &WeaviateConfig) -> WeaviateClient {
        let mut secrets = Vec::new();
        let mut headers = HeaderMap::new();
        let mut problem = None;
        if let Some(key) = &config.api_key {
            secrets.push(key.expose_secret().to_owned());
            match HeaderValue::from_str(&format!("Bearer {}", key.expose_secret())) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    headers.insert(AUTHORIZATION, value);
                }
                Err(_) => problem = Some("WEAVIATE_API_KEY is not a valid header value".to_owned()),
            }
        }
        for (name, value) in &config.headers {
            secrets.push(value.expose_secret().to_owned());
            match (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value.expose_secret()),
            ) {
                (Ok(name), Ok(mut value)) => {
                    value.set_sensitive(true);
                    headers.insert(name, value);
                }
                _ => problem = Some(format!("header {name} is not valid")),
            }
        }
        secrets.retain(|secret| !secret.is_empty());
        let http = match problem {
            Some(problem) => Err(problem),
            None => reqwest::Client::builder()
                .user_agent(concat!("orca/", env!("CARGO_PKG_VERSION")))
                .redirect(reqwest::redirect::Policy::none())
                .default_headers(headers)
                .connect_timeout(Duration::from_secs(5).min(config.timeout))
                .timeout(config.timeout)
                .build()
                .map_err(|error| error.to_string()),
        };
        WeaviateClient {
            http,
            base: config.url.clone(),
            display_url: config.display_url(),
            timeout: config.timeout,
            secrets: secrets.into(),
        }
    }

    /// The endpoint as shown to people.
    pub(crate) fn display_url(&self) -> &str {
        &self.display_url
    }

    /// `text` with every configured secret replaced by `****`.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in self.secrets.iter() {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "****");
            }
        }
        out
    }

    /// One request; the body of a 2xx answer, or the error.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<(u16, Vec<u8>), Error> {
        let http = self.http.as_ref().map_err(|problem| Error::Client(problem.clone()))?;
        let mut request = http.request(method, format!("{}{path}", self.base));
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|error| self.transport_error(&error))?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|error| self.transport_error(&error))?.to_vec();
        if (200..300).contains(&status) {
            return Ok((status, bytes));
        }
        Err(Error::Status { status, messages: self.messages(&bytes) })
    }

    fn transport_error(&self, error: &reqwest::Error) -> Error {
        if error.is_timeout() {
            return Error::Timeout(self.timeout);
        }
        let reason = if error.is_connect() {
            "connection failed".to_owned()
        } else if error.is_body() || error.is_decode() {
            "the connection broke while reading the answer".to_owned()
        } else {
            "the request failed".to_owned()
        };
        Error::Unreachable { url: self.display_url.clone(), reason }
    }

    /// Weaviate's error messages from a body: `{"error":[{"message"}]}` or `{"message"}`.
    fn messages(&self, bytes: &[u8]) -> Vec<String> {
        let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
            let text = String::from_utf8_lossy(bytes);
            let text = text.trim();
            return if text.is_empty() {
                Vec::new()
            } else {
                vec![self.redact(&text.chars().take(500).collect::<String>())]
            };
        };
        let mut out = Vec::new();
        if let Some(errors) = value.get("error").and_then(Value::as_array) {
            for error in errors {
                if let Some(message) = error.get("message").and_then(Value::as_str) {
                    out.push(self.redact(message));
                }
            }
        } else if let Some(message) = value.get("message").and_then(Value::as_str) {
            out.push(self.redact(message));
        } else if let Some(message) = value.get("error").and_then(Value::as_str) {
            out.push(self.redact(message));
        }
        out
    }

    fn json(&self, bytes: &[u8]) -> Result<Value, Error> {
        serde_json::from_slice(bytes)
            .map_err(|error| Error::Malformed(format!("not JSON ({error})")))
    }

    async fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<Value, Error> {
        let (_, bytes) = self.send(Method::GET, path, query, None).await?;
        self.json(&bytes)
    }

    /// `GET /v1/.well-known/ready`: `Ok(true)` when ready, `Ok(false)` on 503.
    pub(crate) async fn ready(&self) -> Result<bool, Error> {
        match self.send(Method::GET, "/v1/.well-known/ready", &[], None).await {
            Ok(_) => Ok(true),
            Err(Error::Status { status: 503, .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// `GET /v1/meta`: the version Weaviate reports.
    pub(crate) async fn version(&self) -> Result<String, Error> {
        let meta = self.get("/v1/meta", &[]).await?;
        meta.get("version")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Error::Malformed("/v1/meta has no version".to_owned()))
    }

    /// `GET /v1/schema`: every collection.
    pub(crate) async fn schema(&self) -> Result<Vec<Value>, Error> {
        let schema = self.get("/v1/schema", &[]).await?;
        match schema.get("classes") {
            Some(Value::Array(classes)) => Ok(classes.clone()),
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(_) => Err(Error::Malformed("/v1/schema: `classes` is not a list".to_owned())),
        }
    }

    /// `GET /v1/schema/{name}` (a checked name).
    pub(crate) async fn collection(&self, name: &str) -> Result<Value, Error> {
        self.get(&format!("/v1/schema/{name}"), &[]).await
    }

    /// `POST /v1/schema`: the created collection.
    pub(crate) async fn create_collection(&self, class: &Value) -> Result<Value, Error> {
        let (_, bytes) = self.send(Method::POST, "/v1/schema", &[], Some(class)).await?;
        self.json(&bytes)
    }

    /// `DELETE /v1/schema/{name}`.
    pub(crate) async fn delete_collection(&self, name: &str) -> Result<(), Error> {
        self.send(Method::DELETE, &format!("/v1/schema/{name}"), &[], None).await.map(|_| ())
    }

    /// `GET /v1/schema/{name}/tenants`: a list of `{name, activityStatus}`.
    pub(crate) async fn tenants(&self, name: &str) -> Result<Vec<Value>, Error> {
        match self.get(&format!("/v1/schema/{name}/tenants"), &[]).await? {
            Value::Array(tenants) => Ok(tenants),
            _ => Err(Error::Malformed("the tenants answer is not a list".to_owned())),
        }
    }

    /// `POST /v1/batch/objects`: one `ObjectsGetResponse` per object, in order.
    pub(crate) async fn batch_objects(&self, objects: Vec<Value>) -> Result<Vec<Value>, Error> {
        let count = objects.len();
        let body = json!({ "objects": objects });
        let (_, bytes) = self.send(Method::POST, "/v1/batch/objects", &[], Some(&body)).await?;
        match self.json(&bytes)? {
            Value::Array(items) if items.len() == count => Ok(items),
            Value::Array(items) => Err(Error::Malformed(format!(
                "the batch answer has {} results for {count} objects",
                items.len()
            ))),
            _ => Err(Error::Malformed("the batch answer is not a list".to_owned())),
        }
    }

    /// `GET /v1/objects/{class}/{id}`.
    pub(crate) async fn object(
        &self,
        class: &str,
        id: &uuid::Uuid,
        tenant: Option<&str>,
        include_vector: bool,
    ) -> Result<Value, Error> {
        let mut query = Vec::new();
        if let Some(tenant) = tenant {
            query.push(("tenant", tenant));
        }
        if include_vector {
            query.push(("include", "vector"));
        }
        self.get(&format!("/v1/objects/{class}/{id}"), &query).await
    }

    /// `DELETE /v1/objects/{class}/{id}`.
    pub(crate) async fn delete_object(
        &self,
        class: &str,
        id: &uuid::Uuid,
        tenant: Option<&str>,
    ) -> Result<(), Error> {
        let query: Vec<(&str, &str)> =
            tenant.map(|tenant| ("tenant", tenant)).into_iter().collect();
        self.send(Method::DELETE, &format!("/v1/objects/{class}/{id}"), &query, None)
            .await
            .map(|_| ())
    }

    /// `DELETE /v1/batch/objects`: the `results` of a (dry-run) batch delete.
    pub(crate) async fn batch_delete(
        &self,
        class: &str,
        filter: Value,
        dry_run: bool,
        tenant: Option<&str>,
    ) -> Result<Value, Error> {
        let query: Vec<(&str, &str)> =
            tenant.map(|tenant| ("tenant", tenant)).into_iter().collect();
        let body = json!({
            "match": {"class": class, "where": filter},
            "output": "minimal",
            "dryRun": dry_run,
        });
        let (_, bytes) =
            self.send(Method::DELETE, "/v1/batch/objects", &query, Some(&body)).await?;
        let answer = self.json(&bytes)?;
        answer
            .get("results")
            .cloned()
            .ok_or_else(|| Error::Malformed("the batch delete answer has no results".to_owned()))
    }

    /// `POST /v1/graphql`: `data`, or the GraphQL errors Weaviate put in its 200.
    pub(crate) async fn graphql(&self, query: &str) -> Result<Value, Error> {
        let body = json!({ "query": query });
        let (_, bytes) = self.send(Method::POST, "/v1/graphql", &[], Some(&body)).await?;
        let mut answer = self.json(&bytes)?;
        if let Some(Value::Array(errors)) = answer.get("errors")
            && !errors.is_empty()
        {
            let errors = errors
                .iter()
                .map(|error| {
                    let mut error = error.clone();
                    if let Some(message) = error.get("message").and_then(Value::as_str) {
                        let message = self.redact(message);
                        error["message"] = Value::from(message);
                    }
                    error
                })
                .collect();
            return Err(Error::GraphQl(errors));
        }
        match answer.get_mut("data").map(Value::take) {
            Some(data @ Value::Object(_)) => Ok(data),
            _ => Err(Error::Malformed("the GraphQL answer has no data".to_owned())),
        }
    }
}
