//! What orca adds to rmcp's Streamable HTTP client for an upstream.
//!
//! The `traceparent` header on the HTTP requests: rmcp's transport posts messages from its own
//! worker task, where no call's span is current, so the header is copied from the
//! `_meta.traceparent` that the upstream hop's span put on the forwarded `tools/call` (see
//! `Upstream::attempt`).
//!
//! The request a log message came during: a message on a request's own response stream is
//! that request's, but rmcp marks only the server's requests with the stream they came on
//! (`InboundStreamOrigin`), not its notifications; so each log message on a request's stream
//! gets the request's id in its `_meta` under a key of this process (`origin`), which no
//! server can guess, and `calls` relays it to that call's client even while other calls are in
//! flight. Everything else is the wrapped client's.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::model::{NotificationMetaObject, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;

/// An HTTP client for rmcp's Streamable HTTP transport that adds `traceparent` to a forwarded
/// call's POST.
#[derive(Debug, Clone)]
pub(super) struct Traced<C>(pub(super) C);

/// `headers` plus the `traceparent` in the message's `_meta`, if it is a `tools/call` that
/// carries one.
fn with_traceparent(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let ClientJsonRpcMessage::Request(request) = message
        && let ClientRequest::CallToolRequest(call) = &request.request
        && let Some(meta) = &call.params.meta
        && let Some(text) = meta.get("traceparent").and_then(serde_json::Value::as_str)
        && let Ok(value) = HeaderValue::try_from(text)
    {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    headers
}

/// The largest event searched for a log message to mark.
const MAX_MARKED: usize = 64 * 1024;

/// The `_meta` key of a log message's request: a random name per process.
fn origin_key() -> &'static str {
    static KEY: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("orca/request-{:032x}", rand::random::<u128>()));
    &KEY
}

/// The request a log message came during, when it came on that request's response stream.
pub(super) fn origin(meta: Option<&NotificationMetaObject>) -> Option<RequestId> {
    let value = meta?.get(origin_key())?;
    serde_json::from_value(value.clone()).ok()
}

/// Mark each log message on the response stream of `request` with its id.
fn marked(
    response: StreamableHttpPostResponse,
    request: Option<RequestId>,
) -> StreamableHttpPostResponse {
    let Some(id) = request.and_then(|request| serde_json::to_value(request).ok()) else {
        return response;
    };
    let StreamableHttpPostResponse::Sse(stream, session) = response else { return response };
    let stream = stream.map(move |event| {
        event.map(|mut event| {
            // A larger event is a result, not worth searching; a log message that large (if
            // any) goes as an unmarked one does.
            if let Some(data) = &mut event.data
                && data.len() <= MAX_MARKED
                && data.contains("notifications/message")
                && let Some(with_origin) = with_origin(data, &id)
            {
                *data = with_origin;
            }
            event
        })
    });
    StreamableHttpPostResponse::Sse(stream.boxed(), session)
}

/// `data`, a JSON-RPC log message, with `id` under `origin`'s key in its `_meta`.
fn with_origin(data: &str, id: &serde_json::Value) -> Option<String> {
    let mut message: serde_json::Value = serde_json::from_str(data).ok()?;
    if message.get("method")?.as_str()? != "notifications/message" {
        return None;
    }
    let params = message.get_mut("params")?.as_object_mut()?;
    let meta = params.entry("_meta").or_insert_with(|| serde_json::json!({}));
    meta.as_object_mut()?.insert(origin_key().to_owned(), id.clone());
    serde_json::to_string(&message).ok()
}

/// The id of `message` when it is a request.
fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Traced<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<C::Error>> {
        let custom_headers = with_traceparent(&message, custom_headers);
        let request = request_id(&message);
        let response =
            self.0.post_message(uri, message, session_id, auth_header, custom_headers).await?;
        Ok(marked(response, request))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<C::Error>> {
        let custom_headers = with_traceparent(&message, custom_headers);
        let request = request_id(&message);
        let response = self
            .0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(marked(response, request))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<C::Error>> {
        self.0.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<C::Error>> {
        self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<C::Error>> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
