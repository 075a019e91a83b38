//! The console's sign-in through the issuer, as the public client `auth.oauth.console_client_id`
//! (authorization code with PKCE, RFC 7636): what the page needs to start it (`offer`, part of
//! `/console/api/session`), and `POST /console/api/token`, which exchanges the code the page got
//! back at the issuer's token endpoint (no client secret) and answers only the access token and
//! its lifetime. A failed exchange counts toward the failed-authentication throttle, whose
//! limit also stops an address from trying again.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::edge::{AuthGate, throttled};
use super::oauth::Verifier;
use super::respond::error_response;
use crate::tool::ErrorCode;

/// The largest body `POST /console/api/token` reads.
const MAX_TOKEN_REQUEST_BYTES: usize = 8 * 1024;
/// The largest answer read from the issuer's token endpoint.
const MAX_TOKEN_ANSWER_BYTES: usize = 64 * 1024;

/// The OAuth error codes of a token endpoint (RFC 6749 §5.2) that are passed on to the page; any
/// other text from the issuer is not.
const TOKEN_ERRORS: [&str; 6] = [
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
];

/// What the page needs to send a person to the issuer, when the console has a client there.
///
/// # Errors
///
/// Why the issuer's metadata cannot be had, or names no authorization endpoint.
pub(crate) async fn offer(verifier: &Verifier) -> Option<Result<Value, String>> {
    let config = verifier.config();
    let client_id = config.console_client_id.clone()?;
    Some(
        async {
            let metadata = verifier.issuer_metadata().await?;
            let endpoint = metadata.authorization_endpoint.ok_or_else(|| {
                "the issuer's metadata names no usable authorization_endpoint".to_owned()
            })?;
            let mut scopes = config.required_scopes.clone();
            for scope in &config.scopes_supported {
                if !scopes.contains(scope) {
                    scopes.push(scope.clone());
                }
            }
            Ok(json!({
                "authorization_endpoint": endpoint,
                "client_id": client_id,
                "issuer": config.issuer,
                "scope": scopes.join(" "),
                "resource": config.resource,
            }))
        }
        .await,
    )
}

/// The page's request: the code it got back, its PKCE verifier and the redirect URI it used.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Exchange {
    code: String,
    code_verifier: String,
    redirect_uri: String,
}

/// Why an exchange was refused or failed.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum ExchangeError {
    #[error("{0}")]
    Invalid(String),
    #[error("the authorization server refused the code ({0})")]
    Refused(String),
    #[error("{0}")]
    Unavailable(String),
}

/// `POST /console/api/token`: exchange the page's authorization code for an access token.
pub(crate) async fn token(State(gate): State<AuthGate>, request: Request) -> Response {
    let Some((verifier, client_id)) = gate
        .verifier()
        .and_then(|verifier| Some((verifier, verifier.config().console_client_id.clone()?)))
    else {
        return error_response(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            "the console has no sign-in here (auth.oauth.console_client_id is not configured)",
            None,
        );
    };
    let client = gate.client(&request);
    if let Some(retry_after) = gate.waiting(client) {
        return throttled(retry_after);
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = match axum::body::to_bytes(request.into_body(), MAX_TOKEN_REQUEST_BYTES).await {
        Ok(body) => body,
        Err(error) => {
            gate.count_failure(client).await;
            if super::edge::timed_out(&error) {
                return super::edge::unreadable_body(&error);
            }
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::InvalidInput,
                &format!("the request body is larger than {MAX_TOKEN_REQUEST_BYTES} bytes"),
                None,
            );
        }
    };
    match exchange(verifier, &client_id, &host, &body).await {
        Ok((access_token, expires_in)) => {
            let mut response =
                axum::Json(json!({ "access_token": access_token, "expires_in": expires_in }))
                    .into_response();
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(error) => {
            let (status, code, hint) = match &error {
                ExchangeError::Invalid(_) => {
                    (StatusCode::BAD_REQUEST, ErrorCode::InvalidInput, "sign in again")
                }
                ExchangeError::Refused(_) => {
                    (StatusCode::BAD_REQUEST, ErrorCode::Unauthorized, "sign in again")
                }
                ExchangeError::Unavailable(_) => {
                    (StatusCode::BAD_GATEWAY, ErrorCode::UpstreamUnavailable, "try again shortly")
                }
            };
            if !matches!(error, ExchangeError::Unavailable(_)) {
                gate.count_failure(client).await;
            }
            error_response(status, code, &error.to_string(), Some(hint))
        }
    }
}

/// Check the page's request and exchange its code at the issuer's token endpoint.
async fn exchange(
    verifier: &Verifier,
    client_id: &str,
    host: &str,
    body: &[u8],
) -> Result<(String, Option<u64>), ExchangeError> {
    let request: Exchange = serde_json::from_slice(body).map_err(|_| {
        ExchangeError::Invalid(
            "the body must be JSON with exactly code, code_verifier and redirect_uri".to_owned(),
        )
    })?;
    check_request(&request, host)?;
    let metadata = verifier.issuer_metadata().await.map_err(ExchangeError::Unavailable)?;
    let endpoint = metadata.token_endpoint.ok_or_else(|| {
        ExchangeError::Unavailable(
            "the issuer's metadata names no usable token_endpoint".to_owned(),
        )
    })?;
    let form = form(&[
        ("grant_type", "authorization_code"),
        ("client_id", client_id),
        ("code", &request.code),
        ("code_verifier", &request.code_verifier),
        ("redirect_uri", &request.redirect_uri),
        ("resource", &verifier.config().resource),
    ]);
    let response = verifier
        .http_client()
        .post(&endpoint)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, "application/json")
        .body(form)
        .send()
        .await
        .map_err(|error| {
            tracing::warn!(%endpoint, "the console's code exchange failed: {error}");
            ExchangeError::Unavailable("the authorization server cannot be reached".to_owned())
        })?;
    let status = response.status();
    let answer = read_limited(response).await.unwrap_or(Value::Null);
    if status.is_success() {
        let token = answer.get("access_token").and_then(Value::as_str).ok_or_else(|| {
            ExchangeError::Unavailable(
                "the authorization server answered without an access token".to_owned(),
            )
        })?;
        return Ok((token.to_owned(), answer.get("expires_in").and_then(Value::as_u64)));
    }
    let error = answer.get("error").and_then(Value::as_str).unwrap_or_default();
    match TOKEN_ERRORS.iter().find(|known| **known == error) {
        Some(known) if status.is_client_error() => Err(ExchangeError::Refused((*known).to_owned())),
        _ => {
            tracing::warn!(%endpoint, status = status.as_u16(), "the console's code exchange failed");
            Err(ExchangeError::Unavailable(format!(
                "the authorization server answered HTTP {}",
                status.as_u16()
            )))
        }
    }
}

/// The fields are present and of the right form, and the redirect URI is this server's page as
/// the browser reached it.
fn check_request(request: &Exchange, host: &str) -> Result<(), ExchangeError> {
    let invalid = |text: &str| Err(ExchangeError::Invalid(text.to_owned()));
    if request.code.is_empty()
        || request.code.len() > 2048
        || request.code.chars().any(char::is_control)
    {
        return invalid("the code is empty, too long or not text");
    }
    // RFC 7636 §4.1: 43 to 128 unreserved characters.
    let verifier = &request.code_verifier;
    if !(43..=128).contains(&verifier.len())
        || !verifier.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    {
        return invalid("the code_verifier must be 43 to 128 unreserved characters");
    }
    let host = host.trim().to_ascii_lowercase();
    let own = ["http://", "https://"]
        .iter()
        .any(|scheme| !host.is_empty() && request.redirect_uri == format!("{scheme}{host}/"));
    if !own {
        return invalid("the redirect_uri must be this server's console page");
    }
    Ok(())
}

async fn read_limited(mut response: reqwest::Response) -> Option<Value> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_TOKEN_ANSWER_BYTES {
            return None;
        }
    }
    serde_json::from_slice(&bytes).ok()
}

/// `application/x-www-form-urlencoded` of `fields`.
fn form(fields: &[(&str, &str)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|byte| match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(byte).to_string()
                }
                other => format!("%{other:02X}"),
            })
            .collect()
    };
    fields
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exchange_request_must_carry_a_code_a_pkce_verifier_and_this_servers_page() {
        let verifier = "a".repeat(43);
        let request = |code: &str, code_verifier: &str, redirect_uri: &str| Exchange {
            code: code.into(),
            code_verifier: code_verifier.into(),
            redirect_uri: redirect_uri.into(),
        };
        let cases = [
            (request("c0de", &verifier, "http://orca.test:8080/"), true),
            (request("c0de", &verifier, "https://orca.test:8080/"), true),
            (request("", &verifier, "http://orca.test:8080/"), false),
            (request("c\node", &verifier, "http://orca.test:8080/"), false),
            (request("c0de", &"a".repeat(42), "http://orca.test:8080/"), false),
            (request("c0de", &"a".repeat(129), "http://orca.test:8080/"), false),
            (request("c0de", &format!("{verifier}+"), "http://orca.test:8080/"), false),
            (request("c0de", &verifier, "http://orca.test:8080/elsewhere"), false),
            (request("c0de", &verifier, "http://evil.example/"), false),
            (request("c0de", &verifier, "http://orca.test:8080"), false),
        ];
        for (request, accepted) in cases {
            assert_eq!(check_request(&request, "ORCA.test:8080").is_ok(), accepted, "{request:?}");
        }
        assert!(check_request(&request("c0de", &verifier, "http:///"), "").is_err());
    }

    #[test]
    fn form_fields_are_percent_encoded() {
        assert_eq!(
            form(&[("redirect_uri", "http://127.0.0.1:9/"), ("scope", "a b")]),
            "redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2F&scope=a%20b"
        );
    }
}
