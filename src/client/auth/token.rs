//! The token endpoint: client authentication (`client_secret_basic`, `client_secret_post`,
//! `none`, `private_key_jwt`), the authorization code, refresh token and client credentials
//! grants, and the tokens they answer.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::AuthError;
use super::discovery::shown;
use super::dpop::{self, DpopKey, NonceFrom};
use super::outbound::Outbound;
use super::pkce::random_token;

/// How long before its expiry a token is refreshed.
pub(crate) const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// The tokens of one sign-in. `Debug` shows none of them.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tokens {
    /// The bearer token sent to the MCP server.
    pub access_token: String,
    /// Exchanged for a new access token when this one expires.
    pub refresh_token: Option<String>,
    /// Seconds since the epoch when the access token expires, when the server said.
    pub expires_at: Option<u64>,
    /// The scopes granted (or, when the server did not say, requested).
    pub scopes: Vec<String>,
    /// Whether the access token is bound to the sign-in's DPoP key (`token_type` `DPoP`): it is
    /// then sent with the `DPoP` scheme and a proof, never as a bearer token.
    #[serde(default)]
    pub dpop: bool,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Tokens")
            .field("refresh_token", &self.refresh_token.is_some())
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("dpop", &self.dpop)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// Whether the access token expires within [`REFRESH_MARGIN`].
    pub(crate) fn expiring(&self) -> bool {
        self.expires_at.is_some_and(|at| at <= now() + REFRESH_MARGIN.as_secs())
    }
}

pub(crate) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}

/// How the client proves itself at the token endpoint.
#[derive(Clone)]
pub(crate) enum ClientAuth {
    /// A public client: `client_id` in the body.
    None,
    /// `Authorization: Basic` with the form-encoded id and secret.
    Basic(String),
    /// `client_id` and `client_secret` in the body.
    Post(String),
    /// A JWT signed with the client's private key (RFC 7523 section 2.2).
    PrivateKeyJwt { key: jsonwebtoken::EncodingKey, algorithm: jsonwebtoken::Algorithm },
}

/// A client as the token endpoint knows it.
#[derive(Clone)]
pub(crate) struct Client {
    pub(crate) id: String,
    pub(crate) auth: ClientAuth,
}

/// The method for a client with `secret`, from what the server supports: `client_secret_basic`
/// when it is listed or nothing is (RFC 8414's default), else `client_secret_post`; `none`
/// without a secret.
pub(crate) fn choose_auth(secret: Option<&str>, supported: Option<&[String]>) -> ClientAuth {
    let Some(secret) = secret else { return ClientAuth::None };
    let supports = |method: &str| supported.is_some_and(|list| list.iter().any(|m| m == method));
    if supported.is_none() || supports("client_secret_basic") || !supports("client_secret_post") {
        ClientAuth::Basic(secret.to_owned())
    } else {
        ClientAuth::Post(secret.to_owned())
    }
}

/// The method a registration answer names, falling back to [`choose_auth`].
pub(crate) fn auth_named(
    method: Option<&str>,
    secret: Option<&str>,
    supported: Option<&[String]>,
) -> ClientAuth {
    match (method, secret) {
        (Some("none"), _) | (_, None) => ClientAuth::None,
        (Some("client_secret_post"), Some(secret)) => ClientAuth::Post(secret.to_owned()),
        (Some("client_secret_basic"), Some(secret)) => ClientAuth::Basic(secret.to_owned()),
        (_, secret) => choose_auth(secret, supported),
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    token_type: Option<String>,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
    scope: Option<String>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    error_description: Option<String>,
}

#[derive(Serialize)]
struct AssertionClaims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// One request to the token endpoint with `params` (the grant), authenticated as `client`;
/// `requested` are the scopes asked for, kept when the answer does not list any. With `dpop`,
/// each attempt carries a fresh proof, and a `use_dpop_nonce` refusal is retried once with the
/// nonce the server gave (RFC 9449 section 8).
///
/// # Errors
///
/// [`AuthError::Token`] with the server's `error` when it refuses; network and decoding errors.
pub(crate) async fn request(
    outbound: &Outbound,
    endpoint: &str,
    issuer: &str,
    client: &Client,
    params: Vec<(&'static str, String)>,
    requested: &[String],
    dpop: Option<&DpopKey>,
) -> Result<Tokens, AuthError> {
    let mut retried = false;
    loop {
        match attempt(outbound, endpoint, issuer, client, params.clone(), requested, dpop).await {
            Err(Refused { error, nonce: Some(nonce) })
                if !retried
                    && let Some(key) = dpop
                    && matches!(&error, AuthError::Token { error, .. } if error == dpop::USE_NONCE)
                    && key.set_nonce(NonceFrom::AuthorizationServer, &nonce) =>
            {
                retried = true;
            }
            Err(refused) => return Err(refused.error),
            Ok(tokens) => return Ok(tokens),
        }
    }
}

/// A refusal of the token endpoint, with the DPoP nonce it handed out, if any.
struct Refused {
    error: AuthError,
    nonce: Option<String>,
}

impl From<AuthError> for Refused {
    fn from(error: AuthError) -> Refused {
        Refused { error, nonce: None }
    }
}

async fn attempt(
    outbound: &Outbound,
    endpoint: &str,
    issuer: &str,
    client: &Client,
    mut params: Vec<(&'static str, String)>,
    requested: &[String],
    dpop: Option<&DpopKey>,
) -> Result<Tokens, Refused> {
    let mut builder =
        outbound.http.post(endpoint).header(reqwest::header::ACCEPT, "application/json");
    if let Some(key) = dpop {
        builder = builder
            .header("DPoP", key.proof("POST", endpoint, None, NonceFrom::AuthorizationServer)?);
    }
    match &client.auth {
        ClientAuth::None => params.push(("client_id", client.id.clone())),
        ClientAuth::Basic(secret) => {
            let pair = format!("{}:{}", form_encode(&client.id), form_encode(secret));
            builder = builder
                .header(reqwest::header::AUTHORIZATION, format!("Basic {}", STANDARD.encode(pair)));
        }
        ClientAuth::Post(secret) => {
            params.push(("client_id", client.id.clone()));
            params.push(("client_secret", secret.clone()));
        }
        ClientAuth::PrivateKeyJwt { key, algorithm } => {
            let issued = now();
            let claims = AssertionClaims {
                iss: &client.id,
                sub: &client.id,
                aud: issuer,
                iat: issued,
                exp: issued + 300,
                jti: random_token(),
            };
            // jsonwebtoken signs with the process's crypto provider (ring).
            crate::tls::install();
            let assertion =
                jsonwebtoken::encode(&jsonwebtoken::Header::new(*algorithm), &claims, key)
                    .map_err(|error| AuthError::Key(error.to_string()))?;
            params.push(("client_id", client.id.clone()));
            params.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
            ));
            params.push(("client_assertion", assertion));
        }
    }
    let body: String = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params.iter().map(|(key, value)| (*key, value.as_str())))
        .finish();
    let response = builder
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|error| outbound.failed(endpoint, &error))?;
    let status = response.status();
    let nonce = response
        .headers()
        .get(dpop::NONCE_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let bytes = response
        .bytes()
        .await
        .map_err(|error| AuthError::Http { url: shown(endpoint), message: error.to_string() })?;
    if !status.is_success() {
        // Only the error code and description are kept: a token endpoint's body is not echoed.
        let answer: Option<ErrorAnswer> = serde_json::from_slice(&bytes).ok();
        let error = match answer {
            Some(answer) => AuthError::Token {
                error: answer.error,
                description: answer.error_description.unwrap_or_default(),
            },
            None => {
                AuthError::Token { error: format!("HTTP {status}"), description: String::new() }
            }
        };
        return Err(Refused { error, nonce });
    }
    if let (Some(key), Some(nonce)) = (dpop, &nonce) {
        key.set_nonce(NonceFrom::AuthorizationServer, nonce);
    }
    let answer: TokenAnswer = serde_json::from_slice(&bytes).map_err(|_| AuthError::Metadata {
        url: shown(endpoint),
        message: "the token endpoint answered something that is not a token response".to_owned(),
    })?;
    Ok(Tokens {
        access_token: answer.access_token,
        refresh_token: answer.refresh_token,
        expires_at: answer.expires_in.map(|seconds| now() + seconds),
        scopes: match answer.scope {
            Some(scope) => scope.split_whitespace().map(str::to_owned).collect(),
            None => requested.to_vec(),
        },
        dpop: dpop.is_some()
            && answer.token_type.is_some_and(|kind| kind.eq_ignore_ascii_case("dpop")),
    })
}

#[cfg(test)]
mod tests {
    use super::{ClientAuth, auth_named, choose_auth};

    fn name(auth: &ClientAuth) -> &'static str {
        match auth {
            ClientAuth::None => "none",
            ClientAuth::Basic(_) => "client_secret_basic",
            ClientAuth::Post(_) => "client_secret_post",
            ClientAuth::PrivateKeyJwt { .. } => "private_key_jwt",
        }
    }

    #[test]
    fn the_token_endpoint_method_follows_the_server_metadata() {
        let list = |methods: &[&str]| methods.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>();
        for (secret, supported, expected) in [
            (Some("s"), None, "client_secret_basic"),
            (Some("s"), Some(list(&["client_secret_post"])), "client_secret_post"),
            (Some("s"), Some(list(&["client_secret_basic"])), "client_secret_basic"),
            (Some("s"), Some(list(&["none", "client_secret_post"])), "client_secret_post"),
            (Some("s"), Some(list(&["private_key_jwt"])), "client_secret_basic"),
            (None, Some(list(&["client_secret_basic"])), "none"),
            (None, None, "none"),
        ] {
            assert_eq!(name(&choose_auth(secret, supported.as_deref())), expected, "{supported:?}");
        }
    }

    #[test]
    fn a_registration_answer_names_the_method_it_registered() {
        for (method, secret, expected) in [
            (Some("client_secret_post"), Some("s"), "client_secret_post"),
            (Some("client_secret_basic"), Some("s"), "client_secret_basic"),
            (Some("none"), Some("s"), "none"),
            (Some("client_secret_basic"), None, "none"),
            (None, Some("s"), "client_secret_basic"),
        ] {
            assert_eq!(name(&auth_named(method, secret, None)), expected, "{method:?}");
        }
    }
}
