//! What a request carries besides its params: the HTTP head it came with and the `_meta` rmcp
//! took off it, and what orca reads there (the caller's ids, the W3C `traceparent`).

use rmcp::model::RequestMetaObject;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use uuid::Uuid;

pub(super) fn http_parts(context: &RequestContext<RoleServer>) -> Option<&::http::request::Parts> {
    context.extensions.get::<::http::request::Parts>()
}

/// What a request handed to a tool call, a read or a search, however it was served.
pub(super) struct Carried<'a> {
    /// The HTTP request's head, for a request over HTTP.
    pub(super) head: Option<&'a ::http::request::Parts>,
    /// The `_meta` rmcp took off the request (empty for a request orca parsed itself, whose
    /// `_meta` stays in its params).
    pub(super) meta: &'a RequestMetaObject,
}

impl<'a> Carried<'a> {
    pub(super) fn of(context: &'a RequestContext<RoleServer>) -> Carried<'a> {
        Carried { head: http_parts(context), meta: &context.meta }
    }
}

/// `_meta.<key>` of a request, as a string, from its params or the request context.
pub(super) fn meta_string(
    request_meta: Option<&RequestMetaObject>,
    carried: &Carried<'_>,
    key: &str,
) -> Option<String> {
    let from_params = request_meta.and_then(|meta| meta.get(key)).and_then(Value::as_str);
    let from_context = carried.meta.get(key).and_then(Value::as_str);
    from_params
        .or(from_context)
        .map(str::to_owned)
        .filter(|value| !value.is_empty() && value.len() <= 256)
}

pub(super) fn header_string(carried: &Carried<'_>, name: &str) -> Option<String> {
    let value = carried.head?.headers.get(name)?.to_str().ok()?;
    Some(value.to_owned()).filter(|value| !value.is_empty() && value.len() <= 256)
}

/// The W3C `traceparent` a request carries: in its `_meta` (2026-07-28, and accepted on every
/// revision), else in the HTTP header.
pub(super) fn incoming_traceparent(
    request_meta: Option<&RequestMetaObject>,
    carried: &Carried<'_>,
) -> Option<String> {
    meta_string(request_meta, carried, "traceparent")
        .or_else(|| header_string(carried, "traceparent"))
}

/// The trace id of a call: its span's when traces are on, else that of an incoming
/// `traceparent`, or a fresh one.
pub(super) fn trace_id(span: &crate::telemetry::Span, incoming: Option<&str>) -> String {
    if let Some(trace_id) = span.trace_id() {
        return trace_id;
    }
    if let Some(traceparent) = incoming {
        let parts: Vec<&str> = traceparent.split('-').collect();
        if parts.len() == 4
            && parts[1].len() == 32
            && parts[1].bytes().all(|byte| byte.is_ascii_hexdigit())
            && parts[1] != "00000000000000000000000000000000"
        {
            return parts[1].to_ascii_lowercase();
        }
    }
    Uuid::new_v4().simple().to_string()
}

/// Who made a call and how it came, as its tracking row says: the principal, the ids the
/// request carried (`_meta.user_id`, `_meta.agent_id` or `X-Agent-Id`, `Mcp-Session-Id`) and
/// the transport.
pub(super) fn origin(
    principal: &crate::config::Principal,
    request_meta: Option<&RequestMetaObject>,
    carried: &Carried<'_>,
    transport: super::Transport,
) -> crate::tracking::Origin {
    crate::tracking::Origin {
        principal: principal.name.clone(),
        principal_id: Some(principal.identity()),
        client_id: principal.client.clone(),
        role: principal.role.clone(),
        user_id: meta_string(request_meta, carried, "user_id"),
        // A call a host made for one of its MCP Apps, when it says so, is the app's.
        agent_id: meta_string(request_meta, carried, "agent_id")
            .or_else(|| header_string(carried, "x-agent-id"))
            .or_else(|| {
                super::apps::calling_app(request_meta)
                    .or_else(|| super::apps::calling_app(Some(carried.meta)))
                    .map(|uri| format!("app:{uri}"))
            }),
        session_id: header_string(carried, "mcp-session-id"),
        transport: transport.as_str().to_owned(),
        source: crate::tracking::Source::Mcp,
    }
}
