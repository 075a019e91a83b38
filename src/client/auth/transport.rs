//! `AuthorizedHttpClient`: rmcp's Streamable HTTP client over reqwest with an [`Authorizer`]:
//! every request carries the current token (a bearer token, or a DPoP-bound one with a fresh
//! proof); a 401 makes the authorizer refresh or sign in again and the request is sent once
//! more; a 403 `insufficient_scope` steps up at most `max_step_ups` times per request; a 401
//! `use_dpop_nonce` is answered with the server's nonce.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;

use super::AuthError;
use super::authorizer::{Authorizer, Credential};
use super::challenge::Challenge;
use super::dpop::{self, DpopKey, NonceFrom};

/// Why an authorized request failed: the HTTP client, or the sign-in.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizedHttpError {
    /// The HTTP request failed.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// Signing in or refreshing failed.
    #[error(transparent)]
    Auth(#[from] AuthError),
}

/// A reqwest client that signs its requests in through an [`Authorizer`].
#[derive(Clone, Debug)]
pub struct AuthorizedHttpClient {
    http: reqwest::Client,
    authorizer: Arc<Authorizer>,
    max_step_ups: u32,
}

type Failure = StreamableHttpError<AuthorizedHttpError>;

/// rmcp's error over reqwest, as this client's.
fn lift(error: StreamableHttpError<reqwest::Error>) -> Failure {
    match error {
        StreamableHttpError::Client(error) => StreamableHttpError::Client(error.into()),
        StreamableHttpError::Sse(error) => StreamableHttpError::Sse(error),
        StreamableHttpError::Io(error) => StreamableHttpError::Io(error),
        StreamableHttpError::HttpStatus(error) => StreamableHttpError::HttpStatus(error),
        StreamableHttpError::UnexpectedEndOfStream => StreamableHttpError::UnexpectedEndOfStream,
        StreamableHttpError::UnexpectedServerResponse(text) => {
            StreamableHttpError::UnexpectedServerResponse(text)
        }
        StreamableHttpError::UnexpectedContentType(text) => {
            StreamableHttpError::UnexpectedContentType(text)
        }
        StreamableHttpError::ServerDoesNotSupportSse => {
            StreamableHttpError::ServerDoesNotSupportSse
        }
        StreamableHttpError::ServerDoesNotSupportDeleteSession => {
            StreamableHttpError::ServerDoesNotSupportDeleteSession
        }
        StreamableHttpError::Deserialize(error) => StreamableHttpError::Deserialize(error),
        StreamableHttpError::TransportChannelClosed => StreamableHttpError::TransportChannelClosed,
        StreamableHttpError::MissingSessionIdInResponse => {
            StreamableHttpError::MissingSessionIdInResponse
        }
        StreamableHttpError::AuthRequired(error) => StreamableHttpError::AuthRequired(error),
        StreamableHttpError::InsufficientScope(error) => {
            StreamableHttpError::InsufficientScope(error)
        }
        StreamableHttpError::ReservedHeaderConflict(name) => {
            StreamableHttpError::ReservedHeaderConflict(name)
        }
        StreamableHttpError::SessionExpired => StreamableHttpError::SessionExpired,
        StreamableHttpError::ResponseBodyTooLarge { max_size } => {
            StreamableHttpError::ResponseBodyTooLarge { max_size }
        }
        other => StreamableHttpError::UnexpectedServerResponse(Cow::Owned(other.to_string())),
    }
}

fn auth_failure(error: AuthError) -> Failure {
    StreamableHttpError::Client(AuthorizedHttpError::Auth(error))
}

/// How many times one request is sent again with a new DPoP nonce from the MCP server.
const NONCE_RETRIES: u32 = 2;

type Headers = HashMap<HeaderName, HeaderValue>;

/// `custom` with the credential's `Authorization` and `DPoP` headers for one `method` request
/// to `uri`; for a bearer token, rmcp adds the header itself from the token returned.
fn authorized(
    credential: Option<&Credential>,
    method: &str,
    uri: &str,
    custom: &Headers,
) -> Result<(Option<String>, Headers), AuthError> {
    let Some(credential) = credential else { return Ok((None, custom.clone())) };
    if credential.dpop.is_none() {
        return Ok((Some(credential.token.clone()), custom.clone()));
    }
    let (authorization, proof) = credential.headers(method, uri)?;
    let mut headers = custom.clone();
    let value = |text: String| {
        HeaderValue::try_from(text).map_err(|_| AuthError::Key("a DPoP header is not valid".into()))
    };
    headers.insert(http::header::AUTHORIZATION, value(authorization)?);
    if let Some(proof) = proof {
        headers.insert(HeaderName::from_static("dpop"), value(proof)?);
    }
    Ok((None, headers))
}

/// What the server's answer asks of the authorizer.
enum Reaction {
    /// 401: refresh or sign in, with the challenge when there was one.
    Unauthorized(Option<String>),
    /// 403 `insufficient_scope` with its challenge.
    StepUp(String),
}

fn reaction<T>(result: &Result<T, StreamableHttpError<reqwest::Error>>) -> Option<Reaction> {
    match result {
        Err(StreamableHttpError::AuthRequired(error)) => {
            Some(Reaction::Unauthorized(Some(error.www_authenticate_header.clone())))
        }
        Err(StreamableHttpError::HttpStatus(error)) if error.status == 401 => {
            Some(Reaction::Unauthorized(None))
        }
        Err(StreamableHttpError::InsufficientScope(error)) => {
            Some(Reaction::StepUp(error.www_authenticate_header.clone()))
        }
        _ => None,
    }
}

/// The `MCP-Protocol-Version` header on an `initialize` request too (rmcp adds it to the
/// requests after the handshake only), for servers that require it on every request.
fn with_version_header(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let ClientJsonRpcMessage::Request(request) = message
        && let ClientRequest::InitializeRequest(initialize) = &request.request
        && let Ok(value) = HeaderValue::try_from(initialize.params.protocol_version.to_string())
    {
        headers.entry(HeaderName::from_static("mcp-protocol-version")).or_insert(value);
    }
    headers
}

impl AuthorizedHttpClient {
    /// A client over `http` (which should not follow redirects to other origins) for the
    /// server `authorizer` signs in to.
    pub fn new(http: reqwest::Client, authorizer: Arc<Authorizer>, max_step_ups: u32) -> Self {
        AuthorizedHttpClient { http, authorizer, max_step_ups }
    }

    /// The authorizer.
    pub fn authorizer(&self) -> &Arc<Authorizer> {
        &self.authorizer
    }

    /// Run `send` with the current token (as rmcp's bearer token, or in the headers it is
    /// given) until it is not refused for a reason the authorizer can fix: one sign-in after a
    /// 401, at most `max_step_ups` after 403s, at most [`NONCE_RETRIES`] new DPoP nonces.
    async fn with_token<T, F, Fut>(
        &self,
        method: &str,
        uri: &str,
        session_id: Option<&str>,
        custom: &Headers,
        send: F,
    ) -> Result<T, Failure>
    where
        F: Fn(Option<String>, Headers) -> Fut,
        Fut: Future<Output = Result<T, StreamableHttpError<reqwest::Error>>>,
    {
        let mut signed_in = false;
        let mut step_ups = 0;
        let mut nonces = 0;
        loop {
            let credential = self.authorizer.credential().await.map_err(auth_failure)?;
            let (token, headers) =
                authorized(credential.as_ref(), method, uri, custom).map_err(auth_failure)?;
            let result = send(token, headers).await;
            let rejected = credential.as_ref().map(|credential| credential.token.as_str());
            match reaction(&result) {
                Some(Reaction::Unauthorized(Some(header)))
                    if nonces < NONCE_RETRIES
                        && Challenge::parse(&header).error.as_deref() == Some(dpop::USE_NONCE)
                        && let Some(Credential { token, dpop: Some(key) }) = &credential
                        && self.resource_nonce(uri, session_id, token, key).await =>
                {
                    nonces += 1;
                }
                Some(Reaction::Unauthorized(header)) if !signed_in => {
                    signed_in = true;
                    self.authorizer
                        .unauthorized(header.as_deref(), rejected)
                        .await
                        .map_err(auth_failure)?;
                }
                Some(Reaction::StepUp(header)) => {
                    if step_ups >= self.max_step_ups {
                        return Err(auth_failure(AuthError::ScopeRetriesExhausted(step_ups)));
                    }
                    step_ups += 1;
                    self.authorizer
                        .insufficient_scope(&header, rejected)
                        .await
                        .map_err(auth_failure)?;
                }
                _ => return result.map_err(lift),
            }
        }
    }

    /// The MCP server refused a proof for want of its nonce (RFC 9449 section 9), which it
    /// gives in a `DPoP-Nonce` header that rmcp's client does not pass on: ask for it again
    /// with a `ping` carrying the same credential and a fresh proof, and keep the nonce the
    /// answer gives. Answers whether a new nonce was learned.
    async fn resource_nonce(
        &self,
        uri: &str,
        session_id: Option<&str>,
        token: &str,
        key: &DpopKey,
    ) -> bool {
        let Ok(proof) = key.proof("POST", uri, Some(token), NonceFrom::Resource) else {
            return false;
        };
        let mut request = self
            .http
            .post(uri)
            .header(http::header::AUTHORIZATION, format!("DPoP {token}"))
            .header("DPoP", proof)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(r#"{"jsonrpc":"2.0","id":"orca-dpop-nonce","method":"ping"}"#);
        if let Some(session_id) = session_id {
            request = request.header("Mcp-Session-Id", session_id);
        }
        let Ok(response) = request.send().await else { return false };
        response
            .headers()
            .get(dpop::NONCE_HEADER)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|nonce| key.set_nonce(NonceFrom::Resource, nonce))
    }
}

impl StreamableHttpClient for AuthorizedHttpClient {
    type Error = AuthorizedHttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let custom_headers = with_version_header(&message, custom_headers);
        self.with_token("POST", &uri, session_id.as_deref(), &custom_headers, |token, headers| {
            self.http.post_message(uri.clone(), message.clone(), session_id.clone(), token, headers)
        })
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let custom_headers = with_version_header(&message, custom_headers);
        self.with_token("POST", &uri, session_id.as_deref(), &custom_headers, |token, headers| {
            self.http.post_message_with_max_sse_event_size(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                headers,
                max_sse_event_size,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let credential = self.authorizer.credential().await.map_err(auth_failure)?;
        let (token, headers) = authorized(credential.as_ref(), "DELETE", &uri, &custom_headers)
            .map_err(auth_failure)?;
        self.http.delete_session(uri, session_id, token, headers).await.map_err(lift)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        self.with_token("GET", &uri, session_id.as_deref(), &custom_headers, |token, headers| {
            self.http.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                headers,
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        self.with_token("GET", &uri, session_id.as_deref(), &custom_headers, |token, headers| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                headers,
                max_sse_event_size,
            )
        })
        .await
    }
}
