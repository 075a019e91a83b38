//! The client side of MCP authorization (revisions 2025-06-18, 2025-11-25 and 2026-07-28, with
//! the 2025-03-26 fallbacks), shared by the SDK, the CLI and the proxy's HTTP upstreams.
//!
//! An [`Authorizer`] holds one sign-in to one MCP server; [`AuthorizedHttpClient`] is the rmcp
//! Streamable HTTP client that sends its token and answers the server's 401 and 403
//! (`insufficient_scope`, a bounded number of times per request) by refreshing or signing in
//! again. Every authorization endpoint and metadata URL must be HTTPS, except on a loopback
//! address. Files: `challenge` (WWW-Authenticate), `discovery` (RFC 9728, RFC 8414, OpenID,
//! 2025-03-26 fallbacks), `pkce`, `dpop` (RFC 9449 proofs: a key per sign-in, kept with its
//! tokens), `outbound` (the HTTP client and where its requests may go: a client registered with
//! one authorization server uses that one only; a confined client fetches what a server names
//! only on its origin or allowed hosts), `addresses` (the addresses a confined client may
//! connect to, checked by its resolver), `token` (the token endpoint and client
//! authentication),
//! `authorizer` (identity, grants, refresh, step-up), `agent` (how a person is sent to sign
//! in), `transport` (the rmcp client).
//!
//! orca builds on reqwest rather than rmcp's `auth` feature: that feature brings the `oauth2`
//! crate and its own HTTP client, and orca needs its own storage (per user, encrypted, shared
//! by replicas), Client ID Metadata Documents served at a configured URL, and the 2026-07-28
//! checks, which sit more simply in one small module of its own.

mod addresses;
mod agent;
mod authorizer;
mod challenge;
mod discovery;
mod dpop;
mod outbound;
mod pkce;
mod token;
mod transport;

pub(crate) use addresses::allowed_host;
pub use agent::{Announce, HeadlessAgent, LoopbackBrowser};
pub use authorizer::{
    Authorizer, AuthorizerConfig, ClientIdentity, Credential, Grant, MemoryTokenStore,
    PendingSignIn, SignIn, TokenStore, UserAgent,
};
pub use challenge::Challenge;
pub use discovery::ServerMetadata;
pub use dpop::DpopKey;
pub use outbound::Confinement;
pub(crate) use pkce::random_token;
pub use token::Tokens;
pub use transport::{AuthorizedHttpClient, AuthorizedHttpError};

/// orca's Client ID Metadata Document for `url` (the HTTPS URL it is served at, which is also
/// the `client_id`): a public client signing people in through a loopback redirect (any port,
/// RFC 8252 section 7.3), with the authorization code and refresh token grants.
pub fn client_metadata_document(url: &str, client_name: &str) -> serde_json::Value {
    serde_json::json!({
        "client_id": url,
        "client_name": client_name,
        "application_type": "native",
        "redirect_uris": ["http://127.0.0.1/callback", "http://localhost/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    })
}

/// How many times one request may step up its scopes after a 403 `insufficient_scope`.
pub const DEFAULT_STEP_UPS: u32 = 2;

/// Why signing in, or using a sign-in, failed. No variant carries a token or a secret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    /// An authorization URL that is neither HTTPS nor on a loopback address.
    #[error("{url} is not an https URL (only a loopback address may use http)")]
    InsecureUrl {
        /// The URL, without its query string.
        url: String,
    },
    /// A URL a remote party named that may not be fetched (confinement); nothing was fetched
    /// from it, so the message says nothing learnt from the host.
    #[error("refused: {host} {reason}; nothing was fetched from it")]
    Refused {
        /// The host, with its port when the URL has one.
        host: String,
        /// Why.
        reason: String,
    },
    /// A request did not get through.
    #[error("cannot reach {url}: {message}")]
    Http {
        /// The URL, without its query string.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A metadata document is missing or malformed.
    #[error("{url}: {message}")]
    Metadata {
        /// The URL, without its query string.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The protected-resource metadata is for another resource.
    #[error("the protected-resource metadata is for {resource}, not {server}")]
    ResourceMismatch {
        /// The resource it names.
        resource: String,
        /// The server asked.
        server: String,
    },
    /// The authorization server's metadata names another issuer than the one it was fetched for.
    #[error("the authorization server metadata of {expected} names the issuer {found}")]
    IssuerMismatch {
        /// The issuer the metadata was fetched for.
        expected: String,
        /// The issuer it names.
        found: String,
    },
    /// A client bound to one authorization server (its configured issuer) was pointed at
    /// another, or at a token endpoint off that server's origin; nothing was sent there.
    #[error(
        "refused: {named} is not {configured}, the authorization server configured for the client (oauth.issuer); nothing was sent to it"
    )]
    OtherAuthorizationServer {
        /// What was named: the authorization server, or the token endpoint's origin.
        named: String,
        /// The configured issuer.
        configured: String,
    },
    /// The authorization response's `iss` is missing where required, or another issuer's.
    #[error(
        "the authorization response does not come from {expected} (its iss is wrong or missing)"
    )]
    IssMismatch {
        /// The issuer expected.
        expected: String,
    },
    /// The authorization response's `state` is not the request's.
    #[error("the authorization response's state does not match the request")]
    StateMismatch,
    /// The authorization step failed.
    #[error("{0}")]
    Authorization(String),
    /// No pre-registered client, no metadata document the server accepts, no registration.
    #[error(
        "no client id for {issuer}: configure one (client_id), or a client metadata URL the server accepts; it offers no dynamic registration"
    )]
    NoClientIdentity {
        /// The authorization server.
        issuer: String,
    },
    /// Dynamic registration failed.
    #[error("client registration failed: {0}")]
    Registration(String),
    /// The token endpoint refused.
    #[error("the token endpoint refused: {error}{}", if description.is_empty() { String::new() } else { format!(" ({description})") })]
    Token {
        /// The OAuth error code.
        error: String,
        /// The server's description.
        description: String,
    },
    /// The sign-in expired or was revoked and cannot be refreshed here.
    #[error("the sign-in has expired or was revoked: {hint}")]
    SignInAgain {
        /// How to sign in again.
        hint: String,
    },
    /// Nobody has signed in yet.
    #[error("not signed in: {hint}")]
    SignInRequired {
        /// How to sign in.
        hint: String,
    },
    /// The server kept asking for more scope.
    #[error("the server still refuses the token for insufficient scope after {0} step-ups")]
    ScopeRetriesExhausted(u32),
    /// A private key for `private_key_jwt` is unusable.
    #[error("client key: {0}")]
    Key(String),
    /// The token store failed.
    #[error("token store: {0}")]
    Store(String),
}
