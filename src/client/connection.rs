//! `McpClient`: one MCP session with a server over stdio (a child in its own process group),
//! Streamable HTTP (re-initialized when the server forgets the session) or any rmcp transport;
//! the tool list cached until the server says it changed; calls with a timeout that cancels;
//! tool calls and resource reads that take multi round-trip `input_required` rounds (SEP-2322)
//! driven to their end.
//!
//! # Design notes
//!
//! `connection.rs`: `McpClient`, one session over a stdio child (its own process group, killed on
//! drop), Streamable HTTP (`reinit_on_expired_session`) or any rmcp transport; the tool list cached
//! behind a lock that the handler clears on `tools/list_changed`, pages followed (at most 1,000);
//! `call_tool` with a timeout whose expiry drops the request future, which makes rmcp send
//! `notifications/cancelled`; `ToolCallResult`. `call_tool` and `read_resource` go through rmcp's
//! `RunningService` helpers, which drive multi round-trip `input_required` rounds (SEP-2322)
//! through the handler, bounded by `SessionOptions::max_input_rounds` (`McpError::InputRounds` past
//! it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ContentBlock, ElicitRequestParams,
    ElicitResult, ErrorCode, Implementation, PaginatedRequestParams, ReadResourceRequestParams,
    ResourceContents, ServerCapabilities,
};
use rmcp::service::{
    ClientServiceExt, NotificationContext, Peer, RequestContext, RoleClient, RunningService,
    ServiceError,
};
use rmcp::{ClientHandler, ErrorData};
use serde_json::Value;

use super::McpError;
use super::convert::{self, Converted};
use super::filter::ToolFilter;
use super::provider::Provider;
use super::session::SessionOptions;
use super::tool::ToolInfo;

/// How long a tool call may take unless [`McpClient::with_call_timeout`] says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the handshake and each page of `tools/list` may take.
pub(super) const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// A server that keeps answering with a next cursor is cut off after this many pages.
pub(super) const MAX_PAGES: usize = 1000;

/// The outcome of one tool call that reached the tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallResult {
    /// False when the tool reported an error (`isError`).
    pub success: bool,
    /// The structured content when there is some, else the text (parsed when it is JSON).
    pub data: Option<Value>,
    /// The tool's error text, when `success` is false.
    pub error: Option<String>,
}

impl ToolCallResult {
    fn from_result(result: CallToolResult) -> ToolCallResult {
        let text = text_of(&result.content);
        if result.is_error == Some(true) {
            let error = if text.is_empty() {
                result
                    .structured_content
                    .as_ref()
                    .map_or_else(|| "the tool reported an error".to_owned(), Value::to_string)
            } else {
                text
            };
            return ToolCallResult {
                success: false,
                data: result.structured_content,
                error: Some(error),
            };
        }
        let data = match result.structured_content {
            Some(structured) => Some(structured),
            None if text.is_empty() => None,
            None => Some(serde_json::from_str(&text).unwrap_or(Value::String(text))),
        };
        ToolCallResult { success: true, data, error: None }
    }

    /// The data, or [`McpError::ToolExecution`] with the tool's error text.
    ///
    /// # Errors
    ///
    /// When the tool reported an error.
    pub fn into_result(self, tool: &str) -> Result<Value, McpError> {
        if self.success {
            Ok(self.data.unwrap_or(Value::Null))
        } else {
            Err(McpError::ToolExecution {
                tool: tool.to_owned(),
                message: self.error.unwrap_or_default(),
            })
        }
    }
}

/// The text of a result's content: text blocks joined by newlines; other blocks described.
fn text_of(content: &[ContentBlock]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => format!("[image: {}]", image.mime_type),
            ContentBlock::Audio(audio) => format!("[audio: {}]", audio.mime_type),
            ContentBlock::Resource(resource) => match &resource.resource {
                rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
                rmcp::model::ResourceContents::BlobResourceContents { uri, .. } => {
                    format!("[resource: {uri}]")
                }
                _ => "[resource]".to_owned(),
            },
            ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
            _ => "[content]".to_owned(),
        })
        .collect();
    parts.join("\n")
}

/// Options of a Streamable HTTP connection.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
    /// Extra request headers (name, value).
    pub headers: Vec<(String, String)>,
    /// The protocol revision and the answers to requests for input.
    pub session: SessionOptions,
}

/// The cached tool list, shared with the handler that clears it on `list_changed`.
type ToolCache = Arc<RwLock<Option<Arc<Vec<ToolInfo>>>>>;

/// rmcp's client handler: drops the cached tool list when the server says it changed, and
/// answers elicitations (server requests, and those of `input_required` rounds, which rmcp
/// hands here too) as the session's options say.
struct Handler {
    cache: ToolCache,
    session: SessionOptions,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            self.session.capabilities(),
            Implementation::new("orca-client", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(self.session.lifecycle().0)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.session.answer(&request))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        *self.cache.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

/// A stdio server's process, leader of its own process group, killed with it when dropped.
#[derive(Debug)]
struct ChildGuard {
    child: tokio::process::Child,
    pid: Option<i32>,
}

impl ChildGuard {
    /// How the child ended, when it has.
    fn exit(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(match status.code() {
                Some(code) => format!("the server process exited with status {code}"),
                None => format!("the server process was killed ({status})"),
            }),
            _ => None,
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            // Whatever the child started in its group goes too; ESRCH means nothing is left.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

struct Inner {
    service: RunningService<RoleClient, Handler>,
    cache: ToolCache,
    child: Option<Mutex<ChildGuard>>,
    max_input_rounds: usize,
}

/// One MCP session with a server; cheap to clone (clones share the session).
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
    timeout: Duration,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpClient")
            .field("timeout", &self.timeout)
            .field("stdio", &self.inner.child.is_some())
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Start `command` with `args` and speak MCP over its stdin and stdout. The child runs in
    /// its own process group, killed when the last clone of the client is dropped; its stderr
    /// goes to ours.
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] when the command cannot start or the handshake fails.
    pub async fn stdio<S: AsRef<str>>(command: &str, args: &[S]) -> Result<McpClient, McpError> {
        let mut command_line = tokio::process::Command::new(command);
        command_line
            .args(args.iter().map(AsRef::as_ref))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = command_line
            .spawn()
            .map_err(|error| McpError::Transport(format!("cannot start `{command}`: {error}")))?;
        let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(McpError::Transport("the child's pipes are missing".to_owned()));
        };
        let mut guard = ChildGuard { child, pid };
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin);
        match McpClient::handshake(transport, SessionOptions::default()).await {
            Ok(mut inner) => {
                inner.child = Some(Mutex::new(guard));
                Ok(McpClient { inner: Arc::new(inner), timeout: DEFAULT_CALL_TIMEOUT })
            }
            Err(error) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(match guard.exit() {
                    Some(exit) => {
                        McpError::Transport(format!("`{command}`: {exit} during the MCP handshake"))
                    }
                    None => error,
                })
            }
        }
    }

    /// Connect to a Streamable HTTP endpoint. A session the server has forgotten (HTTP 404) is
    /// initialized again once.
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] when a header is invalid or the handshake fails.
    pub async fn http(url: &str, options: HttpOptions) -> Result<McpClient, McpError> {
        let config = McpClient::http_config(url, &options)?;
        let http = McpClient::reqwest_client()?;
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(http, config);
        McpClient::http_handshake(url, transport, options.session).await
    }

    /// Connect to a Streamable HTTP endpoint that asks for OAuth: `authorizer` supplies the
    /// token, refreshes it, and signs in again (or steps up) when the server refuses it.
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] when a header is invalid, signing in fails (the message says
    /// how to sign in when nobody can here) or the handshake fails.
    pub async fn http_authorized(
        url: &str,
        options: HttpOptions,
        authorizer: Arc<super::auth::Authorizer>,
    ) -> Result<McpClient, McpError> {
        let session = options.session.clone();
        let config = McpClient::http_config(url, &HttpOptions { bearer_token: None, ..options })?;
        let http = super::auth::AuthorizedHttpClient::new(
            McpClient::reqwest_client()?,
            authorizer,
            super::auth::DEFAULT_STEP_UPS,
        );
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(http, config);
        McpClient::http_handshake(url, transport, session).await
    }

    fn http_config(
        url: &str,
        options: &HttpOptions,
    ) -> Result<
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
        McpError,
    > {
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut headers = HashMap::new();
        for (name, value) in &options.headers {
            let name = http::HeaderName::try_from(name.as_str())
                .map_err(|_| McpError::Transport(format!("invalid header name `{name}`")))?;
            let value = http::HeaderValue::try_from(value.as_str()).map_err(|_| {
                McpError::Transport(format!("the value of header `{name}` is not valid"))
            })?;
            headers.insert(name, value);
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(url)
            .custom_headers(headers)
            .reinit_on_expired_session(true);
        if let Some(token) = &options.bearer_token {
            config = config.auth_header(token.clone());
        }
        Ok(config)
    }

    fn reqwest_client() -> Result<reqwest::Client, McpError> {
        crate::tls::install();
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|error| McpError::Transport(format!("cannot build an HTTP client: {error}")))
    }

    async fn http_handshake<T, E, A>(
        url: &str,
        transport: T,
        session: SessionOptions,
    ) -> Result<McpClient, McpError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let inner = McpClient::handshake(transport, session).await.map_err(|error| {
            // The endpoint is shown without its query string, which may carry a key.
            let shown = url.split('?').next().unwrap_or(url);
            McpError::Transport(format!("{shown}: {error}"))
        })?;
        Ok(McpClient { inner: Arc::new(inner), timeout: DEFAULT_CALL_TIMEOUT })
    }

    /// Speak MCP over any rmcp client transport, such as one half of `tokio::io::duplex`
    /// whose other half a server in the same process serves.
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] when the handshake fails.
    pub async fn with_transport<T, E, A>(transport: T) -> Result<McpClient, McpError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        McpClient::with_transport_and_session(transport, SessionOptions::default()).await
    }

    /// [`McpClient::with_transport`] with the protocol revision and the answers to requests
    /// for input that `session` says.
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] when the handshake fails.
    pub async fn with_transport_and_session<T, E, A>(
        transport: T,
        session: SessionOptions,
    ) -> Result<McpClient, McpError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let inner = McpClient::handshake(transport, session).await?;
        Ok(McpClient { inner: Arc::new(inner), timeout: DEFAULT_CALL_TIMEOUT })
    }

    async fn handshake<T, E, A>(transport: T, session: SessionOptions) -> Result<Inner, McpError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let cache = ToolCache::default();
        let max_input_rounds = session.max_input_rounds.max(1);
        let lifecycle = session.lifecycle().1;
        let handler = Handler { cache: cache.clone(), session };
        let opened = handler.serve_with_lifecycle(transport, lifecycle);
        match tokio::time::timeout(LIST_TIMEOUT, opened).await {
            Ok(Ok(service)) => Ok(Inner { service, cache, child: None, max_input_rounds }),
            Ok(Err(error)) => {
                Err(McpError::Transport(format!("the MCP handshake failed: {error}")))
            }
            Err(_) => Err(McpError::Transport(format!(
                "no answer to the MCP handshake within {}s",
                LIST_TIMEOUT.as_secs()
            ))),
        }
    }

    /// The same session with another per-call timeout (the default is 300 s).
    pub fn with_call_timeout(mut self, timeout: Duration) -> McpClient {
        self.timeout = timeout;
        self
    }

    pub(super) fn peer(&self) -> &Peer<RoleClient> {
        self.inner.service.peer()
    }

    /// What the server declared it offers, from the handshake.
    pub fn server_capabilities(&self) -> Option<ServerCapabilities> {
        Some(self.peer().peer_info()?.capabilities.clone())
    }

    /// The server's name and version from the handshake, when it gave them.
    pub fn server_name(&self) -> Option<String> {
        let info = self.peer().peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }

    /// The server's tools, following `nextCursor` through every page; cached until the server
    /// sends `notifications/tools/list_changed`.
    ///
    /// # Errors
    ///
    /// [`McpError::Transport`] or [`McpError::Timeout`] when listing fails.
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError> {
        Ok(self.tools().await?.as_ref().clone())
    }

    async fn tools(&self) -> Result<Arc<Vec<ToolInfo>>, McpError> {
        if let Some(tools) = self.inner.cache.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(tools);
        }
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor.clone());
            let page = tokio::time::timeout(LIST_TIMEOUT, self.peer().list_tools(Some(params)))
                .await
                .map_err(|_| McpError::Timeout {
                    tool: "tools/list".to_owned(),
                    seconds: LIST_TIMEOUT.as_secs(),
                })?;
            let page = match page {
                Ok(page) => page,
                Err(error) => return Err(self.transport_error("tools/list", &error).await),
            };
            tools.extend(page.tools.iter().map(ToolInfo::from_tool));
            match page.next_cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                _ => break,
            }
        }
        let tools = Arc::new(tools);
        *self.inner.cache.write().unwrap_or_else(|e| e.into_inner()) = Some(tools.clone());
        Ok(tools)
    }

    /// One tool by its original name.
    ///
    /// # Errors
    ///
    /// [`McpError::ToolNotFound`] when the server lists no such tool; listing errors.
    pub async fn tool(&self, name: &str) -> Result<ToolInfo, McpError> {
        self.tools()
            .await?
            .iter()
            .find(|tool| tool.name == name)
            .cloned()
            .ok_or_else(|| McpError::ToolNotFound { name: name.to_owned() })
    }

    /// Call a tool by its original name with a JSON object of arguments (`null` for none).
    /// Arguments are not checked against the schema here (the [`super::Executor`] does that).
    ///
    /// # Errors
    ///
    /// [`McpError::ToolNotFound`], [`McpError::InvalidArguments`] (not an object, or refused by
    /// the server as invalid params), [`McpError::Timeout`] (the call is cancelled on the
    /// server), [`McpError::Transport`]. A tool that ran and failed is `Ok` with
    /// `success: false`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<ToolCallResult, McpError> {
        self.tool(name).await?;
        let arguments = match arguments {
            Value::Null => None,
            Value::Object(arguments) => Some(arguments),
            other => {
                return Err(McpError::InvalidArguments {
                    tool: name.to_owned(),
                    message: format!("arguments must be a JSON object, got {other}"),
                });
            }
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        // rmcp drives the `input_required` rounds: each retry is a new request (a new id) that
        // echoes that round's `requestState` verbatim with the answers to its input requests,
        // which the handler gives; nothing carries over to another call. Dropping the request
        // future on timeout makes rmcp send `notifications/cancelled`.
        let rounds = self.inner.max_input_rounds;
        let call = self.inner.service.call_tool_with_mrtr_max_rounds(params, rounds);
        let answer = tokio::time::timeout(self.timeout, call).await;
        match answer {
            Err(_) => {
                Err(McpError::Timeout { tool: name.to_owned(), seconds: self.timeout.as_secs() })
            }
            Ok(Ok(result)) => Ok(ToolCallResult::from_result(result)),
            Ok(Err(ServiceError::InputRequiredRoundsExceeded { max_rounds })) => {
                Err(McpError::InputRounds { request: name.to_owned(), rounds: max_rounds })
            }
            Ok(Err(ServiceError::UnexpectedResponse)) => Err(McpError::Transport(format!(
                "`{name}` answered with a task or a result this client does not handle"
            ))),
            Ok(Err(ServiceError::McpError(error))) if error.code == ErrorCode::INVALID_PARAMS => {
                if error.message.starts_with("unknown tool") {
                    *self.inner.cache.write().unwrap_or_else(|e| e.into_inner()) = None;
                    Err(McpError::ToolNotFound { name: name.to_owned() })
                } else {
                    Err(McpError::InvalidArguments {
                        tool: name.to_owned(),
                        message: error.message.into_owned(),
                    })
                }
            }
            Ok(Err(ServiceError::McpError(error))) => Err(McpError::ToolExecution {
                tool: name.to_owned(),
                message: format!("{} (code {})", error.message, error.code.0),
            }),
            Ok(Err(error)) => Err(self.transport_error(name, &error).await),
        }
    }

    /// The contents of a resource, read through any `input_required` rounds as
    /// [`McpClient::call_tool`] does.
    ///
    /// # Errors
    ///
    /// [`McpError::Timeout`], [`McpError::InputRounds`], [`McpError::Transport`] (which
    /// includes the server's refusal, with its message).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>, McpError> {
        let params = ReadResourceRequestParams::new(uri.to_owned());
        let rounds = self.inner.max_input_rounds;
        let read = self.inner.service.read_resource_with_mrtr_max_rounds(params, rounds);
        match tokio::time::timeout(self.timeout, read).await {
            Err(_) => {
                Err(McpError::Timeout { tool: uri.to_owned(), seconds: self.timeout.as_secs() })
            }
            Ok(Ok(result)) => Ok(result.contents),
            Ok(Err(ServiceError::InputRequiredRoundsExceeded { max_rounds })) => {
                Err(McpError::InputRounds { request: uri.to_owned(), rounds: max_rounds })
            }
            Ok(Err(ServiceError::McpError(error))) => Err(McpError::Transport(format!(
                "resources/read {uri}: {} (code {})",
                error.message, error.code.0
            ))),
            Ok(Err(error)) => {
                Err(self.transport_error(&format!("resources/read {uri}"), &error).await)
            }
        }
    }

    /// A transport failure, saying how the child ended when it has.
    async fn transport_error(&self, what: &str, error: &ServiceError) -> McpError {
        let mut exit = None;
        if let Some(child) = &self.inner.child {
            // The pipe closes as the child dies; its exit status follows a moment later.
            for _ in 0..20 {
                exit = child.lock().unwrap_or_else(std::sync::PoisonError::into_inner).exit();
                if exit.is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        match exit {
            Some(exit) => McpError::Transport(format!(
                "{what}: the connection to the MCP server broke: {exit}"
            )),
            None => McpError::Transport(format!(
                "{what}: the connection to the MCP server failed: {error}"
            )),
        }
    }

    /// The filtered tools converted for `provider`.
    ///
    /// # Errors
    ///
    /// Listing errors; a tool that cannot be converted is set aside, never an error.
    pub async fn convert(
        &self,
        provider: Provider,
        filter: &ToolFilter,
    ) -> Result<Converted, McpError> {
        let tools = filter.apply(&self.tools().await?);
        Ok(convert::convert(provider, &tools))
    }

    /// The filtered tools as OpenAI function tools (async-openai's own types).
    ///
    /// # Errors
    ///
    /// Listing errors.
    pub async fn as_openai_tools(&self, filter: &ToolFilter) -> Result<Converted, McpError> {
        self.convert(Provider::OpenAi, filter).await
    }

    /// The filtered tools as Anthropic tools (`name`, `description`, `input_schema`).
    ///
    /// # Errors
    ///
    /// Listing errors.
    pub async fn as_anthropic_tools(&self, filter: &ToolFilter) -> Result<Converted, McpError> {
        self.convert(Provider::Anthropic, filter).await
    }

    /// The filtered tools as Gemini function declarations.
    ///
    /// # Errors
    ///
    /// Listing errors.
    pub async fn as_gemini_tools(&self, filter: &ToolFilter) -> Result<Converted, McpError> {
        self.convert(Provider::Gemini, filter).await
    }

    /// Close the session (and stop a stdio child).
    pub async fn close(self) {
        if let Ok(inner) = Arc::try_unwrap(self.inner) {
            let _ = inner.service.cancel().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::super::session::Elicitation;
    use super::*;

    /// What the test server hands back first, echoed verbatim or not at all by a good client.
    const STATE: &str = r#"{"nonce": "n-1", "originalId": 1, "note": "é ✓ \" ,"}"#;

    /// The answer of the test server to one `tools/call`, by tool: what a 2026-07-28 server
    /// sends in each round of a multi round-trip request.
    fn answer(params: &Value) -> Value {
        let name = params["name"].as_str().unwrap_or_default();
        let state = params.get("requestState");
        let responses = params.get("inputResponses");
        let confirm = json!({ "confirm": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Please confirm to continue",
                "requestedSchema": { "type": "object", "properties": {
                    "confirmed": { "type": "boolean", "default": true }
                } }
            }
        } });
        let text = |text: String| json!({ "resultType": "complete", "content": [{ "type": "text", "text": text }] });
        match (name, state, responses) {
            ("echo_state", None, _) => json!({
                "resultType": "input_required", "inputRequests": confirm, "requestState": STATE
            }),
            ("no_state", _, None) => {
                json!({ "resultType": "input_required", "inputRequests": confirm })
            }
            ("endless", _, _) => json!({ "resultType": "input_required", "requestState": "again" }),
            ("no_result_type", _, _) => json!({ "content": [{ "type": "text", "text": "done" }] }),
            // The rest say what the retry (or the plain call) carried.
            _ => text(json!({ "state": state, "responses": responses }).to_string()),
        }
    }

    /// A 2026-07-28 server over an in-memory pipe, speaking JSON-RPC lines; every `tools/call`
    /// it received is kept (its id and params).
    fn serve(server: tokio::io::DuplexStream) -> Arc<Mutex<Vec<(Value, Value)>>> {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let seen = calls.clone();
        tokio::spawn(async move {
            let (read, mut write) = tokio::io::split(server);
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let request: Value = serde_json::from_str(&line).unwrap();
                let Some(id) = request.get("id").cloned() else { continue };
                let params = request.get("params").cloned().unwrap_or(Value::Null);
                let result = match request["method"].as_str().unwrap_or_default() {
                    "server/discover" => json!({
                        "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                        "supportedVersions": ["2026-07-28"],
                        "capabilities": { "tools": {} },
                        "serverInfo": { "name": "mrtr-test", "version": "1.0.0" }
                    }),
                    "tools/list" => {
                        let tools: Vec<Value> = [
                            "echo_state",
                            "no_state",
                            "endless",
                            "no_result_type",
                            "plain",
                        ]
                        .iter()
                        .map(|name| json!({ "name": name, "inputSchema": { "type": "object" } }))
                        .collect();
                        json!({ "resultType": "complete", "ttlMs": 0, "cacheScope": "private", "tools": tools })
                    }
                    "tools/call" => {
                        seen.lock().unwrap().push((id.clone(), params.clone()));
                        answer(&params)
                    }
                    _ => json!({ "resultType": "complete" }),
                };
                let response = json!({ "jsonrpc": "2.0", "id": id, "result": result });
                let mut bytes = serde_json::to_vec(&response).unwrap();
                bytes.push(b'\n');
                if write.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        calls
    }

    async fn client(max_input_rounds: usize) -> (McpClient, Arc<Mutex<Vec<(Value, Value)>>>) {
        let (client_side, server_side) = tokio::io::duplex(1 << 16);
        let calls = serve(server_side);
        let session = SessionOptions {
            protocol_version: Some(rmcp::model::ProtocolVersion::V_2026_07_28),
            elicitation: Elicitation::AcceptDefaults,
            max_input_rounds,
        };
        let client = McpClient::with_transport_and_session(client_side, session).await.unwrap();
        (client, calls)
    }

    #[tokio::test]
    async fn input_required_rounds_are_answered_and_retried_until_the_result_is_complete() {
        let accepted =
            json!({ "confirm": { "action": "accept", "content": { "confirmed": true } } });
        // (tool, the outcome's data or error, how many requests the call took)
        let cases: [(&str, Result<Value, String>, usize); 4] = [
            // The state comes back exactly as sent, with the answers to the input requests.
            ("echo_state", Ok(json!({ "state": STATE, "responses": accepted })), 2),
            // No state was given, so none is sent back.
            ("no_state", Ok(json!({ "state": null, "responses": accepted })), 2),
            // A result without `resultType` is complete.
            ("no_result_type", Ok(json!("done")), 1),
            (
                "endless",
                Err("`endless` still asked for input after 3 rounds (the request was abandoned)"
                    .to_owned()),
                3,
            ),
        ];
        for (tool, expected, requests) in cases {
            let (client, calls) = client(3).await;
            let outcome = client.call_tool(tool, Value::Null).await;
            let outcome = outcome.map(|result| result.data.unwrap()).map_err(|e| e.to_string());
            assert_eq!(outcome, expected, "{tool}");
            let calls = calls.lock().unwrap().clone();
            assert_eq!(calls.len(), requests, "{tool}: {calls:?}");
            // Every retry is a request of its own.
            let ids: std::collections::HashSet<String> =
                calls.iter().map(|(id, _)| id.to_string()).collect();
            assert_eq!(ids.len(), calls.len(), "{tool}: {calls:?}");
        }
    }

    #[tokio::test]
    async fn the_rounds_of_one_call_never_leak_into_a_call_made_alongside() {
        let (client, calls) = client(3).await;
        let (rounds, plain) = tokio::join!(
            client.call_tool("echo_state", Value::Null),
            client.call_tool("plain", Value::Null)
        );
        assert_eq!(rounds.unwrap().data.unwrap()["state"], STATE);
        assert_eq!(plain.unwrap().data.unwrap(), json!({ "state": null, "responses": null }));
        // And a call after the rounds carries nothing of them either.
        let after = client.call_tool("plain", Value::Null).await.unwrap();
        assert_eq!(after.data.unwrap(), json!({ "state": null, "responses": null }));
        assert_eq!(calls.lock().unwrap().len(), 4);
    }
}
