//! A stateless `tools/call` over HTTP served without rmcp's server side. rmcp serves each
//! stateless request with a service of its own (a task running it, a task awaiting it, a
//! one-message transport, the request decoded through its untagged message types); under load
//! that is most of what a proxied call costs orca. Here the request is decoded straight into its
//! params, the call runs on one task (so that a client that goes away cancels it and it is still
//! recorded), and the answer is written as rmcp would: JSON when the call's answer is the first
//! thing to say, else an event stream carrying what the external server sent during the call
//! (progress, log messages, its requests) before the answer.
//!
//! Only what rmcp would serve the same way comes here: a POST of one `tools/call` request on
//! a 2025 revision (`MCP-Protocol-Version`, or no such header, which rmcp takes as 2025-03-26), with the media types rmcp requires, no
//! `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` headers to check, no 2026-07-28 member in its params
//! (an `io.modelcontextprotocol/` key in `_meta`, input responses, request state), and not the
//! tool search's own two tools. Everything else, and anything that does not decode, goes to rmcp, which answers
//! it (or refuses it) as before.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use http_body_util::BodyExt as _;
use http_body_util::combinators::BoxBody;
use rmcp::model::{
    CallToolRequestParams, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::{Carried, Gateway, search};
use crate::config::Principal;
use crate::external::{AnswerStream, Caller, Reach};

/// The response type of `/mcp`, rmcp's.
pub(super) type Answer = axum::http::Response<BoxBody<Bytes, std::convert::Infallible>>;

/// The protocol revisions whose stateless requests are served here.
const REVISIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// How often an event stream that has nothing to say shows it is alive, as rmcp's does.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The parts of a JSON-RPC request this path reads.
#[derive(serde::Deserialize)]
pub(super) struct Envelope {
    jsonrpc: String,
    pub(super) id: RequestId,
    method: String,
    pub(super) params: CallToolRequestParams,
}

/// Serve `request` here, or hand it back (whole) for rmcp to serve.
pub(super) async fn serve(gateway: &Gateway, request: Request) -> Result<Answer, Request> {
    if request.method() != Method::POST || !served_here(request.headers()) {
        return Err(request);
    }
    let (head, body) = request.into_parts();
    // The body limit's middleware has read the body already: this takes its bytes back.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Err(Request::from_parts(head, axum::body::Body::empty()));
    };
    let principal = head.extensions.get::<Principal>().cloned();
    let (Some(principal), Some(envelope)) = (principal, decode(&bytes)) else {
        return Err(Request::from_parts(head, axum::body::Body::from(bytes)));
    };
    Ok(call(gateway.clone(), head, envelope, principal).await)
}

/// Whether the headers leave nothing for rmcp to check or refuse.
fn served_here(headers: &HeaderMap) -> bool {
    // Without the header rmcp takes the request as 2025-03-26's.
    let revision = headers.get("mcp-protocol-version").map(|value| value.to_str());
    if !revision.is_none_or(|revision| revision.is_ok_and(|revision| REVISIONS.contains(&revision)))
    {
        return false;
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok());
    if !content_type.is_some_and(|value| essence(value).eq_ignore_ascii_case("application/json")) {
        return false;
    }
    let (mut json, mut events) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        for accepted in value.to_str().unwrap_or_default().split(',') {
            let accepted = essence(accepted);
            json |= accepted.eq_ignore_ascii_case("application/json");
            events |= accepted.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && events
        && !headers.keys().any(|name| {
            let name = name.as_str();
            name == "mcp-method" || name == "mcp-name" || name.starts_with("mcp-param-")
        })
}

fn essence(media_type: &str) -> &str {
    media_type.split_once(';').map_or(media_type, |(essence, _)| essence).trim()
}

/// The request, when it is a `tools/call` this path serves.
pub(super) fn decode(bytes: &[u8]) -> Option<Envelope> {
    let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
    let params = &envelope.params;
    let plain = envelope.jsonrpc == "2.0"
        && envelope.method == "tools/call"
        && params
            .meta
            .as_ref()
            .is_none_or(|meta| !meta.keys().any(|key| key.starts_with("io.modelcontextprotocol/")))
        && params.input_responses.is_none()
        && params.request_state.is_none()
        && !matches!(&*params.name, search::SEARCH_TOOLS | search::CALL_TOOL);
    plain.then_some(envelope)
}

/// Run the call on a task of its own and answer with what it says.
async fn call(
    gateway: Gateway,
    head: axum::http::request::Parts,
    envelope: Envelope,
    principal: Principal,
) -> Answer {
    let started = Instant::now();
    let Envelope { id, params, .. } = envelope;
    let (stream, mut messages) = AnswerStream::new();
    let stream = stream.with_replies(gateway.state.replies.clone(), principal.identity());
    let cancelled = CancellationToken::new();
    let progress_token = params.meta.as_ref().and_then(RequestMetaObject::get_progress_token);
    // The shared gateway's level is never set: a stateless request hears every message, as a
    // fresh session does.
    let reach = Reach::Answer(stream.clone());
    let mut caller = gateway.plain_caller(reach, id.clone(), progress_token, cancelled.clone());
    caller.declared = super::session_token::declared(Some(&head));
    tokio::spawn(async move {
        let meta = RequestMetaObject::default();
        let carried = Carried { head: Some(&head), meta: &meta };
        stream.send(answer(&gateway, id, params, carried, caller, principal, started).await);
    });
    // A client that goes away before the answer cancels the call (it is recorded as such).
    let gone = cancelled.drop_guard();
    let Some(first) = messages.recv().await else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "the call ended without an answer");
    };
    if is_final(&first) {
        gone.disarm();
        return match serde_json::to_vec(&first) {
            Ok(body) => axum::http::Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(http_body_util::Full::new(Bytes::from(body)).boxed())
                .expect("a valid response"),
            Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "the answer could not be encoded"),
        };
    }
    let events = Events {
        first: Some(first),
        messages,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
        done: false,
        _gone: gone,
    };
    axum::http::Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(events.boxed())
        .expect("a valid response")
}

/// Run the call and put its outcome as rmcp would answer it to a 2025 client.
pub(super) async fn answer(
    gateway: &Gateway,
    id: RequestId,
    params: CallToolRequestParams,
    carried: Carried<'_>,
    caller: Caller,
    principal: Principal,
    started: Instant,
) -> ServerJsonRpcMessage {
    match gateway.run_call(params, carried, caller, started, principal).await {
        Ok(mut result) => {
            // A 2025 client's result has no `resultType`, as rmcp leaves it for such peers.
            result.result_type.take_if(|result_type| result_type.is_complete());
            ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    }
}

fn is_final(message: &ServerJsonRpcMessage) -> bool {
    matches!(message, ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
}

fn plain(status: StatusCode, text: &'static str) -> Answer {
    axum::http::Response::builder()
        .status(status)
        .body(http_body_util::Full::new(Bytes::from_static(text.as_bytes())).boxed())
        .expect("a valid response")
}

/// The answer as an event stream: each message an event, the call's answer last; dropped before
/// that (the client went away), it cancels the call.
struct Events {
    first: Option<ServerJsonRpcMessage>,
    messages: UnboundedReceiver<ServerJsonRpcMessage>,
    keep_alive: tokio::time::Interval,
    done: bool,
    _gone: DropGuard,
}

impl http_body::Body for Events {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let message = match self.first.take() {
            Some(message) => Some(message),
            None => match self.messages.poll_recv(context) {
                Poll::Ready(message) => message,
                Poll::Pending => {
                    if self.keep_alive.poll_tick(context).is_ready() {
                        return Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(
                            b":\n\n",
                        )))));
                    }
                    return Poll::Pending;
                }
            },
        };
        let Some(message) = message else {
            self.done = true;
            return Poll::Ready(None);
        };
        self.done = is_final(&message);
        let mut event = b"data: ".to_vec();
        if serde_json::to_writer(&mut event, &message).is_err() {
            self.done = true;
            return Poll::Ready(None);
        }
        event.extend_from_slice(b"\n\n");
        Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(event)))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    const PLAIN: [(&str, &str); 3] = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-06-18"),
    ];

    #[test]
    fn only_requests_rmcp_would_serve_unchanged_come_here() {
        assert!(served_here(&headers(&PLAIN)));
        assert!(served_here(&headers(&PLAIN[..2])), "no revision: 2025-03-26, as rmcp takes it");
        let cases: [(&str, Vec<(&'static str, &'static str)>); 6] = [
            (
                "an unknown revision",
                [&PLAIN[..2], &[("mcp-protocol-version", "1999-01-01")]].concat(),
            ),
            ("2026-07-28", [&PLAIN[..2], &[("mcp-protocol-version", "2026-07-28")]].concat()),
            ("JSON only", vec![PLAIN[0], ("accept", "application/json"), PLAIN[2]]),
            ("not JSON", vec![("content-type", "text/plain"), PLAIN[1], PLAIN[2]]),
            ("Mcp-Method", [&PLAIN[..], &[("mcp-method", "tools/call")]].concat()),
            ("Mcp-Param-*", [&PLAIN[..], &[("mcp-param-region", "eu")]].concat()),
        ];
        for (case, pairs) in cases {
            assert!(!served_here(&headers(&pairs)), "{case}");
        }
        let split = [
            PLAIN[0],
            ("accept", "application/json"),
            ("accept", "text/event-stream; q=0.5"),
            PLAIN[2],
        ];
        assert!(served_here(&headers(&split)), "Accept over two headers, with parameters");
    }

    #[test]
    fn only_a_plain_tools_call_decodes() {
        let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p"}}}"#;
        let envelope = decode(call.as_bytes()).expect("a plain call");
        assert_eq!(envelope.id, RequestId::Number(7));
        assert_eq!(envelope.params.name, "echo");
        let others = [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            r#"{"jsonrpc":"1.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search_tools"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","requestState":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            r#"[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}]"#,
        ];
        for other in others {
            assert!(decode(other.as_bytes()).is_none(), "{other}");
        }
    }
}
