//! Tool search in the gateway: when a caller's `tools/list` offers `search_tools` and
//! `call_tool` instead of every tool, what the two answer, and the search indexes, one per set
//! of visible tools, rebuilt when that set changes (an external server's `list_changed`).
//! With `catalog.embeddings`, every tool's text is handed to `catalog::Semantic` at start and
//! on each change of the tools, which embeds them in the background; a search never waits
//! for that.
//!
//! Search is offered when the caller may see more tools than `catalog.search_above`, when its
//! principal or one of its roles is listed in `catalog.principals` / `catalog.roles`, when an
//! HTTP client connects to `/mcp?tool_search=on`, or when a client declares the capability
//! `experimental["orca/toolSearch"]` in `initialize` (stdio and HTTP sessions); never for an
//! HTTP client connected to `/mcp?tool_search=off`, as the web console is, which lists every
//! tool for people to pick from.
//! `call_tool` only renames the request: the gateway then handles it exactly as a direct call
//! of the named tool (verbs, tool policy, tracking under that tool's name).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, Tool};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

use sqlx::PgPool;

use crate::catalog::{Document, Embedder, Lexical, Ranked, Ranker, Semantic, TextHash, best};
use crate::config::{CatalogConfig, Config, Principal};
use crate::registry::Registry;

pub(super) const SEARCH_TOOLS: &str = "search_tools";
pub(super) const CALL_TOOL: &str = "call_tool";

/// The default and the largest number of tools one search answers.
const DEFAULT_LIMIT: usize = 5;
const MOST: usize = 20;

/// How many indexes are kept (one per distinct set of visible tools, so per tool policy).
const KEPT_INDEXES: usize = 16;

/// The experimental capability a client declares to ask for search.
pub(super) const CAPABILITY: &str = "orca/toolSearch";

/// Whether `principal`, on this connection, gets search rather than the full list of `visible`
/// tools.
pub(super) fn offered(
    catalog: &CatalogConfig,
    principal: &Principal,
    context: &RequestContext<RoleServer>,
    visible: usize,
) -> bool {
    let by_count = visible > catalog.search_above;
    let by_principal = catalog.principals.contains(&principal.name);
    let by_role = principal.role.as_deref().is_some_and(|roles| {
        roles.split(',').any(|role| catalog.roles.iter().any(|listed| listed == role))
    });
    let query = context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.uri.query())
        .unwrap_or_default();
    let asked = |values: [&str; 3]| {
        query.split('&').any(|pair| {
            pair.strip_prefix("tool_search=").is_some_and(|value| values.contains(&value))
        })
    };
    if asked(["off", "false", "0"]) {
        // The web console, and any client that wants every tool whatever the count.
        return false;
    }
    let by_query = asked(["on", "true", "1"]);
    let by_capability = context.peer.peer_info().is_some_and(|info| {
        info.capabilities.experimental.as_ref().is_some_and(|map| map.contains_key(CAPABILITY))
    });
    by_count || by_principal || by_role || by_query || by_capability
}

/// The two tools `tools/list` shows instead of the catalog.
pub(super) fn meta_tools() -> Vec<Tool> {
    let search = json!({
        "type": "object",
        "properties": {
            "query": { "type": "string", "description": "What you want to do, in your own words" },
            "server": { "type": "string", "description": "Only tools of this server" },
            "limit": { "type": "integer", "minimum": 1, "maximum": MOST, "description": "How many tools to return (default 5)" }
        },
        "required": ["query"]
    });
    let call = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "The tool's name, as search_tools gave it" },
            "arguments": { "type": "object", "description": "The tool's arguments, as its inputSchema says" }
        },
        "required": ["name"]
    });
    vec![
        Tool::new(
            SEARCH_TOOLS,
            "Find the tools for a task among all the tools this gateway offers. Returns the best \
             matches with their full input schemas; call one with call_tool.",
            Arc::new(object(search)),
        ),
        Tool::new(
            CALL_TOOL,
            "Call any tool that search_tools found, by its name, with its arguments.",
            Arc::new(object(call)),
        ),
    ]
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// Turn a `call_tool` request into the direct call it names.
///
/// # Errors
///
/// `-32602` when `name` is missing or `arguments` is not an object.
pub(super) fn unwrap_call(request: &mut CallToolRequestParams) -> Result<(), McpError> {
    let mut arguments = request.arguments.take().unwrap_or_default();
    let Some(Value::String(name)) = arguments.remove("name") else {
        return Err(McpError::invalid_params("call_tool needs `name`, a tool's name", None));
    };
    let inner = match arguments.remove("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(inner)) => Some(inner),
        Some(_) => {
            return Err(McpError::invalid_params(
                "call_tool's `arguments` must be an object",
                None,
            ));
        }
    };
    request.name = name.into();
    request.arguments = inner;
    Ok(())
}

/// The search index of one set of tools: its lexical index and, with the semantic layer, the
/// hash of each tool's text (its vector's key), in the set's order.
#[derive(Debug)]
struct Index {
    lexical: Lexical,
    texts: Vec<TextHash>,
}

/// The search indexes, shared by every session of a gateway.
#[derive(Debug, Default)]
pub(crate) struct Indexes {
    ranker: Ranker,
    kept: Mutex<Vec<(u64, Arc<Index>)>>,
    /// The semantic layer, when `catalog.embeddings` is set.
    semantic: Option<Arc<Semantic>>,
}

impl Indexes {
    /// Indexes for `config`: with the semantic layer when `catalog.embeddings` is set, whose
    /// background task then embeds the tools of `registry` (caching them in `pool`) at once
    /// and after each change of its tools.
    pub(crate) fn new(config: &Config, registry: &Arc<Registry>, pool: &PgPool) -> Indexes {
        let semantic = config.catalog.embeddings.as_ref().map(|embeddings| {
            let endpoint = config
                .llm
                .endpoints
                .iter()
                .find(|endpoint| endpoint.provider == embeddings.provider);
            let base_url = endpoint.map_or_else(
                || crate::llm::default_base_url(embeddings.provider).to_owned(),
                |endpoint| endpoint.base_url.clone(),
            );
            let key = endpoint.and_then(|endpoint| endpoint.api_key.clone());
            let embedder = Embedder::new(
                embeddings.provider,
                &base_url,
                key,
                &embeddings.model,
                embeddings.timeout,
            );
            let semantic = Semantic::start(embedder, embeddings.weight, pool.clone());
            tokio::spawn(follow_catalog(Arc::downgrade(&semantic), Arc::downgrade(registry)));
            semantic
        });
        Indexes { semantic, ..Indexes::default() }
    }

    /// The index of exactly `tools`, built now if this set has none.
    fn of(&self, tools: &[(Tool, String)]) -> Arc<Index> {
        let fingerprint = fingerprint(tools);
        if let Some((_, index)) = self
            .kept
            .lock()
            .expect("the index lock is never held across a panic")
            .iter()
            .find(|(kept, _)| *kept == fingerprint)
        {
            return Arc::clone(index);
        }
        let documents: Vec<Document> = tools
            .iter()
            .map(|(tool, server)| {
                Document::from_schema(
                    server,
                    &tool.name,
                    tool.title.as_deref().or_else(|| {
                        tool.annotations
                            .as_ref()
                            .and_then(|annotations| annotations.title.as_deref())
                    }),
                    tool.description.as_deref().unwrap_or_default(),
                    &tool.input_schema,
                )
            })
            .collect();
        let texts = if self.semantic.is_some() {
            tools.iter().map(|(tool, _)| crate::catalog::text_hash(&tool_text(tool))).collect()
        } else {
            Vec::new()
        };
        let index = Arc::new(Index { lexical: self.ranker.index(&documents), texts });
        let mut kept = self.kept.lock().expect("the index lock is never held across a panic");
        if kept.len() >= KEPT_INDEXES {
            kept.remove(0);
        }
        kept.push((fingerprint, Arc::clone(&index)));
        index
    }
}

/// Hand `semantic` every tool of `registry` now and after each change of the external
/// servers' tools, until either is gone.
async fn follow_catalog(semantic: Weak<Semantic>, registry: Weak<Registry>) {
    let mut changes = registry
        .upgrade()
        .and_then(|registry| registry.external().map(|external| external.subscribe()));
    loop {
        let (Some(layer), Some(registry)) = (semantic.upgrade(), registry.upgrade()) else {
            return;
        };
        let mut texts: Vec<String> =
            registry.tools().map(|tool| tool_text(&tool.spec.tool)).collect();
        if let Some(external) = registry.external() {
            texts.extend(external.tools().iter().map(|(tool, _, _)| tool_text(tool)));
        }
        layer.catalog(texts);
        drop((layer, registry));
        let Some(changes) = changes.as_mut() else { return };
        let tools = changes.borrow_and_update().tools;
        loop {
            if changes.changed().await.is_err() {
                return;
            }
            if changes.borrow_and_update().tools != tools {
                break;
            }
        }
    }
}

/// What a tool's embedding is made of: its name, title and description.
fn tool_text(tool: &Tool) -> String {
    let title = tool
        .title
        .as_deref()
        .or_else(|| tool.annotations.as_ref().and_then(|annotations| annotations.title.as_deref()));
    crate::catalog::tool_text(&tool.name, title, tool.description.as_deref().unwrap_or_default())
}

/// What identifies a set of tools for its index: each one's name, server, description and the
/// schema it shares with the registry (the same `Arc` until its server lists it anew).
fn fingerprint(tools: &[(Tool, String)]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for (tool, server) in tools {
        tool.name.hash(&mut hasher);
        server.hash(&mut hasher);
        tool.title.hash(&mut hasher);
        tool.description.hash(&mut hasher);
        std::ptr::hash(Arc::as_ptr(&tool.input_schema), &mut hasher);
    }
    hasher.finish()
}

/// The answer of `search_tools` over `tools`, the caller's visible tools with their servers.
///
/// # Errors
///
/// `-32602` when `query` is missing or `limit` is not a positive integer.
pub(super) async fn search(
    indexes: &Indexes,
    tools: &[(Tool, String)],
    arguments: Option<&Map<String, Value>>,
) -> Result<(Value, Map<String, Value>), McpError> {
    let arguments = arguments.cloned().unwrap_or_default();
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return Err(McpError::invalid_params("search_tools needs `query`, a string", None));
    };
    let server = match arguments.get("server") {
        None | Some(Value::Null) => None,
        Some(Value::String(server)) => Some(server.as_str()),
        Some(_) => return Err(McpError::invalid_params("`server` must be a string", None)),
    };
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(value) => match value.as_u64() {
            Some(limit) if limit >= 1 => usize::try_from(limit).unwrap_or(MOST).min(MOST),
            _ => return Err(McpError::invalid_params("`limit` must be an integer from 1", None)),
        },
    };
    let index = indexes.of(tools);
    let lexical = index.lexical.scores(query);
    let mut meta = Map::new();
    let scores = match &indexes.semantic {
        None => {
            meta.insert("ranking".into(), Value::from("lexical"));
            lexical
        }
        Some(semantic) => {
            let Ranked { scores, blended, embedded, error } =
                semantic.rank(query, &index.texts, lexical).await;
            meta.insert("ranking".into(), Value::from(if blended { "blended" } else { "lexical" }));
            meta.insert("embedded".into(), Value::from(embedded));
            if let Some(error) = error {
                meta.insert("semantic_error".into(), Value::from(error));
            }
            scores
        }
    };
    let found: Vec<Value> =
        best(&scores, limit, |position| server.is_none_or(|server| tools[position].1 == server))
            .into_iter()
            .map(|(position, score)| {
                let (tool, server) = &tools[position];
                let mut entry = serde_json::to_value(tool).unwrap_or(Value::Null);
                if let Value::Object(map) = &mut entry {
                    map.insert("server".into(), Value::from(server.as_str()));
                    map.insert("score".into(), Value::from((score * 1000.0).round() / 1000.0));
                }
                entry
            })
            .collect();
    meta.insert("searched".into(), Value::from(tools.len()));
    Ok((json!({ "tools": found }), meta))
}

/// A `search_tools` answer as a tool result.
pub(super) fn result(value: Value, meta: Map<String, Value>) -> CallToolResult {
    super::error::success(value, Vec::new(), meta)
}

impl super::Gateway {
    /// Answer `search_tools` for `principal` over `visible`, with the `_meta` every call has
    /// (`execution_id`, `feedback_token`, `trace_id`), timed in the metrics and recorded as a
    /// call of `search_tools` on the server `orca`.
    pub(super) async fn answer_search(
        &self,
        principal: &Principal,
        visible: &[(Tool, String)],
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        started: std::time::Instant,
    ) -> Result<CallToolResult, McpError> {
        let (value, mut meta) =
            search(&self.state.search, visible, request.arguments.as_ref()).await?;
        let execution_id = uuid::Uuid::now_v7();
        let feedback_token = uuid::Uuid::new_v4();
        let trace_id = super::trace_id(
            &crate::telemetry::Span::default(),
            super::incoming_traceparent(request.meta.as_ref(), &super::Carried::of(context))
                .as_deref(),
        );
        meta.insert("execution_id".into(), Value::from(execution_id.to_string()));
        meta.insert("feedback_token".into(), Value::from(feedback_token.to_string()));
        meta.insert("trace_id".into(), Value::from(trace_id.clone()));
        let answer = result(value, meta);
        let elapsed = started.elapsed();
        self.state.metrics.observe(SEARCH_TOOLS, "success", elapsed);
        if self.state.tracker.is_enabled() {
            let stored = answer.structured_content.clone().unwrap_or(Value::Null);
            let (response_data, response_bytes) = crate::tracking::cut_text(
                stored.to_string(),
                self.state.config.tracking.max_response_bytes,
            );
            let carried = super::Carried::of(context);
            let origin = super::origin(principal, request.meta.as_ref(), &carried, self.transport);
            let tool = SEARCH_TOOLS.to_owned();
            self.state.tracker.record(crate::tracking::Execution {
                id: execution_id,
                request_data: request
                    .arguments
                    .as_ref()
                    .map_or(Value::Object(Map::new()), crate::tracking::redact_object),
                response_data: Some(response_data),
                response_bytes,
                execution_time_ms: i32::try_from(elapsed.as_millis()).unwrap_or(i32::MAX),
                feedback_token,
                ..crate::tracking::Execution::of(origin, "orca".to_owned(), tool, trace_id)
            });
        }
        Ok(answer)
    }
}
