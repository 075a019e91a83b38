//! The `traceparent` header on the HTTP requests to a Streamable HTTP upstream. rmcp's
//! transport posts messages from its own worker task, where no call's span is current, so the
//! header is copied from the `_meta.traceparent` that the upstream hop's span put on the
//! forwarded `tools/call` (see `Upstream::attempt`). Everything else is the wrapped client's.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
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
        self.0.post_message(uri, message, session_id, auth_header, custom_headers).await
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
        self.0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
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
