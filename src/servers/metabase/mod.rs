//! The built-in `metabase` server: the 21 tools of specification 000 on Metabase's API, and the
//! `metabase://` resources. `client.rs` speaks HTTP (sessions, re-login, throttles, version),
//! `tools.rs` holds the thin tool adapters, `dashboards.rs` the version-aware dashboard cards,
//! `shape.rs` the error structure and the trimming of answers for a model.
//!
//! # Design notes
//!
//! `servers/metabase` is the Metabase server of specification 000, enabled by `METABASE_URL`
//! (`config/metabase.rs`): `client.rs` is its only HTTP code (reqwest, no redirects, one timeout):
//! the session from `POST /api/session` or the `x-api-key` header, a 401 answered by one new login
//! and one retry, with a `tokio::sync::Mutex` held across the login and a session generation so
//! that concurrent calls meeting the same expired session share one login, the login throttle
//! remembered and waited out (never a login before its end), the version read once from `GET
//! /api/session/properties`, HTTP 202 with `status: "failed"` turned into an error, and a `Status`
//! (`running`, `login failed`, `unreachable`) published on a watch channel that `Registry::connect`
//! copies into the directory `list_servers` reads; `tools.rs` holds the 21 tools as thin adapters
//! (arguments decoded and checked, then one call), `dashboards.rs` the version-aware card layout
//! (every existing dashcard and tab is sent back with the new one, leaving out only those
//! `update_dashboard`'s `remove_cards` names, which before 0.47 are deleted one by one), `shape.rs`
//! the error `details` of the specification and the trimming of answers (row cap, plain columns,
//! bulk dropped unless `verbose`). The server also answers the `metabase://` resource templates.

mod client;
mod dashboards;
mod shape;
mod tools;

use std::sync::Arc;

use rmcp::model::ResourceTemplate;
use serde_json::{Map, Value};

use super::{CallContext, ToolSpec};
use crate::config::MetabaseConfig;
use crate::tool::{ToolError, ToolOutput};

pub(crate) use client::Status;
use client::{Client, Method, Version};

const RESOURCE_PREFIX: &str = "metabase://";

#[derive(Debug, Clone)]
pub(crate) struct MetabaseServer {
    client: Client,
    /// Rows a query result keeps unless the call asks for another number.
    max_rows: usize,
    tools: Arc<[ToolSpec]>,
}

impl MetabaseServer {
    pub(crate) const DESCRIPTION: &str = "Metabase through its API: dashboards, cards (questions), collections, databases and tables, search, and queries with results trimmed for a model";

    pub(crate) fn new(config: &MetabaseConfig, read_only: bool) -> MetabaseServer {
        MetabaseServer {
            client: Client::new(config),
            max_rows: config.max_rows,
            tools: tools::tools(read_only).into(),
        }
    }

    /// The tools this server declares.
    pub(crate) fn declared_tools(read_only: bool) -> Vec<ToolSpec> {
        tools::tools(read_only)
    }

    pub(crate) fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Sign in and read the version; a failure is kept as the status, and retried on the next
    /// call.
    pub(crate) async fn connect(&self) {
        self.client.connect().await;
    }

    pub(crate) fn status(&self) -> Status {
        self.client.status()
    }

    /// The instance's version tag, once read.
    pub(crate) fn known_version(&self) -> Option<String> {
        self.client.known_version()
    }

    /// Status changes (sign-in, failures, the version read), for the directory `list_servers`
    /// reads.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<Status> {
        self.client.subscribe()
    }

    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        _context: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        tools::call(self, tool, arguments).await
    }

    fn error(&self, error: client::Error) -> ToolError {
        shape::tool_error(error, self.client.credential_variables())
    }

    async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, ToolError> {
        self.client.get(path, query).await.map(|answer| answer.body).map_err(|e| self.error(e))
    }

    async fn send(&self, method: Method, path: &str, body: &Value) -> Result<Value, ToolError> {
        self.client
            .request(method, path, &[], Some(body))
            .await
            .map(|answer| answer.body)
            .map_err(|e| self.error(e))
    }

    async fn delete(&self, path: &str, query: &[(&str, String)]) -> Result<Value, ToolError> {
        self.client
            .request(Method::Delete, path, query, None)
            .await
            .map(|answer| answer.body)
            .map_err(|e| self.error(e))
    }

    async fn version(&self) -> Result<Version, ToolError> {
        self.client.version().await.map_err(|e| self.error(e))
    }

    /// `metabase://dashboard/{id}`, `metabase://card/{id}`, `metabase://collection/{id}`.
    pub(crate) fn resource_templates() -> Vec<ResourceTemplate> {
        [
            ("dashboard", "A Metabase dashboard with its cards and tabs"),
            ("card", "A Metabase card (question or model) with its query"),
            ("collection", "A Metabase collection"),
        ]
        .into_iter()
        .map(|(kind, description)| {
            ResourceTemplate::new(
                format!("{RESOURCE_PREFIX}{kind}/{{id}}"),
                format!("metabase {kind}"),
            )
            .with_description(description)
            .with_mime_type("application/json")
        })
        .collect()
    }

    /// Whether `uri` names one of this server's resources.
    pub(crate) fn owns_resource(uri: &str) -> bool {
        uri.starts_with(RESOURCE_PREFIX)
    }

    /// Read a `metabase://` resource as JSON; `None` when the URI is not one of this server's.
    pub(crate) async fn read_resource(&self, uri: &str) -> Option<Result<Value, ToolError>> {
        let rest = uri.strip_prefix(RESOURCE_PREFIX)?;
        let (kind, id) = rest.split_once('/')?;
        if !matches!(kind, "dashboard" | "card" | "collection") {
            return None;
        }
        let id = match id.parse::<i64>() {
            Ok(id) if id > 0 => id,
            _ => {
                return Some(Err(ToolError::invalid_input(format!(
                    "`{id}` is not a {kind} id: ids are positive integers"
                ))));
            }
        };
        Some(
            self.get(&format!("/api/{kind}/{id}"), &[])
                .await
                .map(|value| shape::entity(value, false)),
        )
    }
}

/// `orca doctor`'s check: the version (`GET /api/session/properties`) and the user
/// (`GET /api/user/current`).
///
/// # Errors
///
/// A sentence saying what failed, without secrets.
pub(crate) async fn doctor(config: &MetabaseConfig) -> Result<String, String> {
    let client = Client::new(config);
    let user = client
        .get("/api/user/current", &[])
        .await
        .map_err(|error| shape::tool_error(error, client.credential_variables()))
        .map_err(|error| match error.hint {
            Some(hint) => format!("{}; {hint}", error.message),
            None => error.message,
        })?;
    let version = client.version().await.map_or_else(|_| "version unknown".to_owned(), |v| v.tag);
    let who = user
        .body
        .get("email")
        .or_else(|| user.body.get("common_name"))
        .and_then(Value::as_str)
        .unwrap_or("an API key")
        .to_owned();
    Ok(format!(
        "Metabase {version} at {}, signed in as {who}",
        crate::config::mask_url(&config.url)
    ))
}
