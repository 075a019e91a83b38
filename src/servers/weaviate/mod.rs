//! The built-in `weaviate` server, enabled by `WEAVIATE_URL`: the four tools of specification
//! 001 and its "future improvements", as thin adapters over `client.rs` (REST and GraphQL) and
//! `search.rs` (the one seam where queries are built), one file per group: `collections.rs`
//! (configuration, tenants, create, delete), `objects.rs` (upsert, get, delete) and `query.rs`
//! (hybrid, near-text, near-vector, BM25, aggregate). Weaviate being down never stops orca: a
//! probe keeps `list_servers` current and the tools answer `UPSTREAM_UNAVAILABLE` meanwhile.
//! Start-up waits (at most 5 s, in `Registry::connect`) for the first probe, so that the first
//! `list_servers` already shows Weaviate's version.
//!
//! # Design notes
//!
//! `servers/weaviate` is Weaviate behind `WEAVIATE_URL`: `client.rs` is its REST and GraphQL client
//! (bearer key and configured headers marked sensitive, error bodies read, GraphQL's
//! 200-with-`errors` made an error, secrets redacted from whatever Weaviate sends back);
//! `graphql.rs` builds queries from typed values only (a `Name` is checked against
//! `^[A-Za-z_][A-Za-z0-9_]*$`, strings are escaped GraphQL literals, numbers finite) and reads
//! answers back (`_additional` strings to numbers); `filter.rs` is the typed `filters` argument
//! (REST `where` shape), validated whole and written as GraphQL input or REST JSON; `search.rs` is
//! the one seam where a typed `Search` or `Aggregation` becomes a request, so that Weaviate's REST
//! search API can replace GraphQL there without touching the tools; `collections.rs`, `objects.rs`
//! and `query.rs` are the tool adapters; `mod.rs` maps client errors to the taxonomy and runs a
//! probe (`/v1/.well-known/ready`, `/v1/meta`) that keeps the server's `list_servers` entry
//! current.

mod client;
mod collections;
mod filter;
mod graphql;
mod objects;
mod query;
mod search;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::{CallContext, Presence, ToolSpec};
use crate::config::WeaviateConfig;
use crate::tool::{ErrorCode, ToolError, ToolOutput};
use client::{Error, WeaviateClient};
use graphql::{Field, Name};

/// How long a collection's property list is reused for "return every property".
const FIELDS_TTL: Duration = Duration::from_secs(30);

/// Collection name -> when its properties were read, and the selectable ones.
type FieldCache = HashMap<String, (Instant, Vec<Field>)>;

/// What `list_servers` shows about the Weaviate behind the server.
#[derive(Debug, Default)]
struct Health {
    /// `None` until the first probe.
    ready: Option<bool>,
    version: Option<String>,
    reason: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct WeaviateServer {
    client: WeaviateClient,
    max_results_bytes: usize,
    health: Arc<Mutex<Health>>,
    /// What `list_servers` shows; the registry copies every change into the directory.
    presence: Arc<tokio::sync::watch::Sender<Presence>>,
    /// Collection name -> its selectable properties, for searches that return every property.
    fields: Arc<Mutex<FieldCache>>,
    tools: Arc<[ToolSpec]>,
}

impl WeaviateServer {
    pub(crate) const DESCRIPTION: &str = "Weaviate: collections and their configuration, tenants, object upserts, gets and deletes, hybrid, near-text, near-vector and BM25 search, aggregates";

    pub(crate) fn new(config: WeaviateConfig, read_only: bool) -> WeaviateServer {
        let tools = WeaviateServer::declared_tools(read_only);
        let server = WeaviateServer {
            client: WeaviateClient::new(&config),
            max_results_bytes: config.max_results_bytes,
            health: Arc::default(),
            presence: Arc::new(
                tokio::sync::watch::channel(Presence {
                    status: "running".to_owned(),
                    description: None,
                    version: None,
                })
                .0,
            ),
            fields: Arc::default(),
            tools: tools.into(),
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let probe = server.clone();
            runtime.spawn(async move { probe.probe_forever(config.probe_interval).await });
        }
        server
    }

    /// The tools this server declares.
    pub(crate) fn declared_tools(read_only: bool) -> Vec<ToolSpec> {
        let mut tools = collections::tools(read_only);
        tools.extend(objects::tools(read_only));
        tools.extend(query::tools());
        tools
    }

    pub(crate) fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        _context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let value = match tool {
            name if collections::NAMES.contains(&name) => {
                collections::call(self, name, arguments).await
            }
            name if objects::NAMES.contains(&name) => objects::call(self, name, arguments).await,
            name if query::NAMES.contains(&name) => query::call(self, name, arguments).await,
            other => {
                return Err(ToolError::not_found(format!(
                    "the weaviate server has no tool `{other}`"
                )));
            }
        }?;
        Ok(ToolOutput::new(value))
    }

    /// Check readiness and the version now and then, and publish them to `list_servers`.
    async fn probe_forever(self, interval: Duration) {
        loop {
            self.probe().await;
            tokio::time::sleep(interval).await;
        }
    }

    async fn probe(&self) {
        let outcome = match self.client.ready().await {
            Ok(true) => self.client.version().await.map(Some),
            Ok(false) => Ok(None),
            Err(error) => Err(error),
        };
        let mut health = self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match outcome {
            Ok(Some(version)) => {
                *health = Health { ready: Some(true), version: Some(version), reason: None };
            }
            Ok(None) => {
                health.ready = Some(false);
                health.reason = Some("Weaviate answers but is not ready (503)".to_owned());
            }
            Err(error) => {
                health.ready = Some(false);
                health.reason = Some(error.to_string());
            }
        }
        drop(health);
        self.publish();
    }

    /// What `list_servers` shows now, and every change to it.
    pub(crate) fn presence(&self) -> tokio::sync::watch::Receiver<Presence> {
        self.presence.subscribe()
    }

    /// Wait until the first probe (or the first call) has published what Weaviate said: its
    /// version and the description that names it, or why it is unavailable.
    pub(crate) async fn probed(&self) {
        let mut presence = self.presence.subscribe();
        // The sender lives as long as `self`, so the wait ends only when something is published.
        let _ = presence.wait_for(|presence| presence.description.is_some()).await;
    }

    /// Publish the current health for the server's `list_servers` entry.
    fn publish(&self) {
        let (status, description, version) = {
            let health = self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let version = health.version.as_deref().unwrap_or("(version unknown)");
            let description = format!(
                "Weaviate {version} at {}: {}",
                self.client.display_url(),
                Self::DESCRIPTION.trim_start_matches("Weaviate: ")
            );
            let status = match (health.ready, &health.reason) {
                (Some(false), Some(reason)) => format!("unavailable: {reason}"),
                _ => "running".to_owned(),
            };
            (status, description, health.version.clone())
        };
        self.presence.send_replace(Presence { status, description: Some(description), version });
    }

    /// Note that Weaviate answered (or did not), so `list_servers` follows without waiting for
    /// the next probe.
    fn observe(&self, error: Option<&Error>) {
        let changed = {
            let mut health = self.health.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let now_ready = !matches!(error, Some(Error::Unreachable { .. }));
            let changed = health.ready != Some(now_ready);
            health.ready = Some(now_ready);
            health.reason = error.filter(|_| !now_ready).map(ToString::to_string);
            changed
        };
        if changed {
            self.publish();
            if error.is_none() {
                let probe = self.clone();
                tokio::spawn(async move { probe.probe().await });
            }
        }
    }

    /// A client call whose outcome also updates the health shown by `list_servers`.
    async fn run<T>(&self, call: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        let outcome = call.await;
        self.observe(outcome.as_ref().err());
        outcome
    }

    /// The error the caller sees; `missing` names what a 404 means for this call.
    fn error(&self, error: Error, missing: impl FnOnce() -> String) -> ToolError {
        let details = |status: Option<u16>, messages: &[String]| {
            Some(Box::new(json!({"weaviate": {"status": status, "messages": messages}})))
        };
        let url = self.client.display_url();
        let mut out = match &error {
            Error::Unreachable { .. } => ToolError::upstream_unavailable(error.to_string())
                .with_hint(format!(
                    "check that Weaviate runs at {url}; the tools work again once it is back"
                )),
            Error::Timeout(_) => ToolError::new(ErrorCode::Timeout, error.to_string()).with_hint(
                "narrow the request (a smaller limit, a filter) or raise weaviate.timeout_ms",
            ),
            Error::Status { status, messages } => {
                let mut out = match status {
                    401 => ToolError::new(ErrorCode::Unauthorized, "Weaviate refused orca's credentials")
                        .with_hint("set WEAVIATE_API_KEY to an API key this Weaviate accepts"),
                    403 => ToolError::new(ErrorCode::Unauthorized, format!("Weaviate's authorization refused the operation{}", join(messages)))
                        .with_hint("the API key in WEAVIATE_API_KEY lacks the permission; ask for a role that grants it"),
                    404 => ToolError::not_found(missing()),
                    400 | 422 => ToolError::invalid_input(format!("Weaviate refused the request{}", join(messages))),
                    429 => ToolError::new(ErrorCode::RateLimited, format!("Weaviate is rate limiting{}", join(messages))),
                    502..=504 => ToolError::upstream_unavailable(format!("Weaviate is unavailable (HTTP {status}){}", join(messages))),
                    _ => ToolError::new(ErrorCode::QueryFailed, format!("Weaviate failed (HTTP {status}){}", join(messages))),
                };
                out.retryable = out.retryable && *status != 401;
                out.details = details(Some(*status), messages);
                out
            }
            Error::GraphQl(errors) => {
                let mut out = ToolError::new(ErrorCode::QueryFailed, error.to_string())
                    .with_hint("check the collection, property and tenant names with weaviate-collections-get-config and weaviate-tenants-list");
                out.details = Some(Box::new(json!({"weaviate": {"graphql_errors": errors}})));
                out
            }
            Error::Malformed(_) | Error::Client(_) => {
                ToolError::new(ErrorCode::Internal, error.to_string()).not_retryable()
            }
        };
        out.message = self.client.redact(&out.message);
        out
    }

    /// The selectable properties of a collection (scalars, geo coordinates, phone numbers;
    /// nested objects and references are left out), from a short-lived cache.
    async fn fields(&self, collection: &Name) -> Result<Vec<Field>, ToolError> {
        {
            let cache = self.fields.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some((at, fields)) = cache.get(collection.as_str())
                && at.elapsed() < FIELDS_TTL
            {
                return Ok(fields.clone());
            }
        }
        let class = self
            .run(self.client.collection(collection.as_str()))
            .await
            .map_err(|error| self.error(error, || collection_missing(collection)))?;
        let mut fields = Vec::new();
        for property in class.get("properties").and_then(Value::as_array).into_iter().flatten() {
            let (Some(name), Some(data_type)) = (
                property.get("name").and_then(Value::as_str),
                property.pointer("/dataType/0").and_then(Value::as_str),
            ) else {
                continue;
            };
            let Ok(name) = Name::parse(name, "property") else { continue };
            match data_type {
                "geoCoordinates" => fields.push(Field::Geo(name)),
                "phoneNumber" => fields.push(Field::Phone(name)),
                "object" | "object[]" => {}
                reference if reference.starts_with(|c: char| c.is_ascii_uppercase()) => {}
                _ => fields.push(Field::Plain(name)),
            }
        }
        let mut cache = self.fields.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.insert(collection.to_string(), (Instant::now(), fields.clone()));
        Ok(fields)
    }

    /// Forget cached property lists (after a collection is created or deleted).
    fn forget_fields(&self, collection: &Name) {
        let mut cache = self.fields.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        cache.remove(collection.as_str());
    }

    /// `{key: items}`, cut to `max_results_bytes` with `truncated` when it does not fit.
    fn list_result(&self, key: &str, items: Vec<Value>) -> Value {
        let total = items.len();
        let mut size = 0;
        let mut kept = Vec::with_capacity(items.len());
        for item in items {
            size += serde_json::to_string(&item).map_or(0, |text| text.len()) + 1;
            if size > self.max_results_bytes {
                break;
            }
            kept.push(item);
        }
        let returned = kept.len();
        let mut out = Map::new();
        out.insert(key.to_owned(), Value::Array(kept));
        if returned < total {
            out.insert("truncated".to_owned(), Value::Bool(true));
            out.insert("returned".to_owned(), Value::from(returned));
            out.insert("total".to_owned(), Value::from(total));
            out.insert(
                "hint".to_owned(),
                Value::from(format!(
                    "the result was cut to {} bytes (weaviate.max_results_bytes); ask for fewer results or fewer properties",
                    self.max_results_bytes
                )),
            );
        }
        Value::Object(out)
    }
}

fn join(messages: &[String]) -> String {
    if messages.is_empty() { String::new() } else { format!(": {}", messages.join("; ")) }
}

pub(crate) fn collection_missing(collection: &Name) -> String {
    format!("collection `{collection}` does not exist")
}

/// A collection name argument, checked.
fn collection_name(text: &str) -> Result<Name, ToolError> {
    Name::collection(text).map_err(|message| {
        ToolError::invalid_input(message)
            .with_hint("weaviate-collections-get-config lists the collections")
    })
}

/// A tenant name, checked as Weaviate does (`^[A-Za-z0-9\-_]{1,64}$`).
fn tenant_name(tenant: Option<&str>, argument: &str) -> Result<Option<String>, ToolError> {
    let Some(tenant) = tenant else { return Ok(None) };
    let valid = (1..=64).contains(&tenant.len())
        && tenant.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
    if valid {
        Ok(Some(tenant.to_owned()))
    } else {
        Err(ToolError::invalid_input(format!(
            "{argument}: a tenant name is 1 to 64 letters, digits, hyphens or underscores"
        ))
        .with_hint("weaviate-tenants-list lists a collection's tenants"))
    }
}

/// Names from a list argument, each checked.
fn names(items: Option<&[String]>, argument: &str) -> Result<Vec<Name>, ToolError> {
    items
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(index, item)| {
            Name::parse(item, &format!("{argument}[{index}]")).map_err(ToolError::invalid_input)
        })
        .collect()
}

/// The readiness and version line of `orca doctor`.
///
/// # Errors
///
/// Why Weaviate cannot be used.
pub(crate) async fn doctor_check(config: &WeaviateConfig) -> Result<String, String> {
    let client = WeaviateClient::new(config);
    match client.ready().await {
        Ok(true) => {}
        Ok(false) => {
            return Err(format!("Weaviate at {} is not ready (503)", client.display_url()));
        }
        Err(error) => return Err(client.redact(&error.to_string())),
    }
    let version = client.version().await.map_err(|error| client.redact(&error.to_string()))?;
    client.schema().await.map_err(|error| client.redact(&error.to_string()))?;
    Ok(format!("Weaviate {version} at {}, ready, schema readable", client.display_url()))
}
