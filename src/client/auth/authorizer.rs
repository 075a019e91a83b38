//! `Authorizer`: the sign-in of one client to one MCP server. It keeps the tokens (through a
//! [`TokenStore`]), refreshes them before they expire and when the server refuses them (one
//! refresh at a time, whatever the number of concurrent calls), and signs in again from a 401
//! or a 403 `insufficient_scope`: discovery, scopes, the client's identity (pre-registered,
//! Client ID Metadata Document, dynamic registration), then the grant. A person's sign-in
//! (the authorization code grant) runs in two halves, `begin_sign_in` and `finish_sign_in`,
//! with nothing in memory between them but a [`PendingSignIn`], so that the browser may come
//! back to another process than the one that sent it.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;
use url::Url;

use super::AuthError;
use super::challenge::Challenge;
use super::discovery::{self, Discovered, ServerMetadata, shown};
use super::dpop::{self, DpopKey};
use super::outbound::{Confinement, Outbound, same_issuer};
use super::pkce::{Pkce, random_token};
use super::token::{self, Client, ClientAuth, Tokens, auth_named, choose_auth};

/// The scope that asks for a refresh token where the server supports it.
const OFFLINE_ACCESS: &str = "offline_access";

/// Sends a person to the authorization server and brings back where it redirected them.
pub trait UserAgent: Send + Sync {
    /// The redirect URI the authorization request names.
    fn redirect_uri(&self) -> String;
    /// Open `url` (the authorization request) and answer the URL the server redirected back
    /// to, with its `code`, `state` and `iss` (or `error`).
    fn authorize(&self, url: Url) -> BoxFuture<'_, Result<Url, AuthError>>;
}

/// Where one sign-in's tokens live (per server, and per user when each signs in for
/// themselves).
pub trait TokenStore: Send + Sync {
    /// The stored sign-in, if any.
    fn load(&self) -> BoxFuture<'_, Result<Option<SignIn>, AuthError>>;
    /// Keep `sign_in`, replacing what was there.
    fn save<'a>(&'a self, sign_in: &'a SignIn) -> BoxFuture<'a, Result<(), AuthError>>;
    /// Keep `sign_in` (refreshed tokens) in place of the stored one only while one is stored;
    /// whether it was. A refresh that ends after the sign-in was forgotten must not bring it
    /// back. By default [`TokenStore::load`] then [`TokenStore::save`]; a store shared by
    /// several processes does it in one step.
    fn replace<'a>(&'a self, sign_in: &'a SignIn) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(async move {
            if self.load().await?.is_none() {
                return Ok(false);
            }
            self.save(sign_in).await.map(|()| true)
        })
    }
    /// Forget the sign-in.
    fn clear(&self) -> BoxFuture<'_, Result<(), AuthError>>;
}

/// A store in memory: the sign-in lasts as long as the process.
#[derive(Default)]
pub struct MemoryTokenStore(std::sync::Mutex<Option<SignIn>>);

impl TokenStore for MemoryTokenStore {
    fn load(&self) -> BoxFuture<'_, Result<Option<SignIn>, AuthError>> {
        let value = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Box::pin(async move { Ok(value) })
    }
    fn save<'a>(&'a self, sign_in: &'a SignIn) -> BoxFuture<'a, Result<(), AuthError>> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(sign_in.clone());
        Box::pin(async { Ok(()) })
    }
    fn clear(&self) -> BoxFuture<'_, Result<(), AuthError>> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Box::pin(async { Ok(()) })
    }
}

/// Everything needed to use and refresh a sign-in without discovering again (so that another
/// replica can refresh it). `Debug` shows no secret.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SignIn {
    /// The authorization server's issuer.
    pub issuer: String,
    /// Its token endpoint.
    pub token_endpoint: String,
    /// The resource indicator the tokens were asked for.
    pub resource: String,
    /// The client id used.
    pub client_id: String,
    /// The client secret, for a confidential client.
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post`, `none` or `private_key_jwt`.
    pub auth_method: String,
    /// The tokens.
    pub tokens: Tokens,
    /// The DPoP key the tokens are bound to ([`DpopKey::stored`]), when the authorization
    /// server takes DPoP: a secret, kept (sealed) with the tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<String>,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SignIn")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("auth_method", &self.auth_method)
            .field("tokens", &self.tokens)
            .field("dpop", &self.dpop_key.is_some())
            .finish_non_exhaustive()
    }
}

/// An authorization code sign-in between its two halves: what
/// [`Authorizer::begin_sign_in`] prepared and [`Authorizer::finish_sign_in`] needs once the
/// person's browser comes back, so that the two may run in different processes (the person
/// starts on one replica and comes back to another). It holds the PKCE verifier, the client's
/// secret and the DPoP key: keep it sealed (serialized, it is a secret), once, and not long.
/// `Debug` shows no secret.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingSignIn {
    /// The PKCE code verifier.
    verifier: String,
    /// The request's `state`.
    state: String,
    /// The redirect URI the request named, sent again with the code.
    redirect_uri: String,
    /// The authorization server's issuer.
    issuer: String,
    /// Whether it promises `iss` in its responses (RFC 9207), which is then required.
    iss_required: bool,
    /// Its token endpoint.
    token_endpoint: String,
    /// The resource indicator.
    resource: String,
    /// The scopes asked for.
    scopes: Vec<String>,
    /// The client id.
    client_id: String,
    /// The client secret, for a confidential client.
    client_secret: Option<String>,
    /// How the client authenticates at the token endpoint.
    auth_method: String,
    /// The DPoP key ([`DpopKey::stored`]), when the tokens are to be bound to one.
    dpop_key: Option<String>,
}

impl std::fmt::Debug for PendingSignIn {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PendingSignIn")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("scopes", &self.scopes)
            .field("client_id", &self.client_id)
            .field("auth_method", &self.auth_method)
            .field("dpop", &self.dpop_key.is_some())
            .finish_non_exhaustive()
    }
}

impl PendingSignIn {
    /// The request's `state`, which the browser brings back.
    pub fn state(&self) -> &str {
        &self.state
    }
}

/// How orca identifies itself to an authorization server, in the order the specification
/// gives: pre-registered credentials, else a Client ID Metadata Document URL (when the server
/// supports them), else dynamic client registration.
#[derive(Clone, Default)]
pub struct ClientIdentity {
    /// A pre-registered client id.
    pub client_id: Option<String>,
    /// Its secret, for a confidential client.
    pub client_secret: Option<SecretString>,
    /// A private key (PEM) for `private_key_jwt`, with its algorithm (`ES256`, `RS256`, ...).
    pub private_key: Option<(SecretString, String)>,
    /// The HTTPS URL of orca's client metadata document, used as `client_id`.
    pub metadata_url: Option<String>,
    /// The issuer identifier of the authorization server the pre-registered client belongs
    /// to. When set, that server only is used: discovery naming another is refused, a stored
    /// sign-in made with another is ignored, and the client's credentials go to no token
    /// endpoint off the issuer's origin.
    pub issuer: Option<String>,
    /// The `client_name` of a dynamic registration.
    pub client_name: String,
}

/// How tokens are obtained.
#[derive(Clone)]
pub enum Grant {
    /// A person signs in (authorization code with PKCE) through the agent.
    AuthorizationCode(Arc<dyn UserAgent>),
    /// The client signs in as itself (client credentials, with a secret or a private key).
    ClientCredentials,
    /// A workload's JWT exchanged for a token (RFC 7523's JWT bearer grant; workload identity
    /// federation, SEP-1933).
    JwtBearer(SecretString),
    /// Enterprise-managed authorization (SEP-990): the user's ID token is exchanged at the
    /// identity provider for an identity assertion (RFC 8693), itself exchanged at the
    /// authorization server with the JWT bearer grant.
    EnterpriseManaged {
        /// The identity provider's token endpoint.
        idp_token_endpoint: String,
        /// orca's client id at the identity provider.
        idp_client_id: String,
        /// The user's ID token from the identity provider.
        id_token: SecretString,
    },
    /// Only stored tokens are used: when there are none, or they are refused and cannot be
    /// refreshed, the error says how to sign in.
    StoredOnly,
}

/// What an [`Authorizer`] works with.
#[derive(Clone)]
pub struct AuthorizerConfig {
    /// The MCP server's URL.
    pub server_url: String,
    /// The client's identity.
    pub identity: ClientIdentity,
    /// How tokens are obtained.
    pub grant: Grant,
    /// Where tokens live.
    pub store: Arc<dyn TokenStore>,
    /// How a person signs in again, for errors (`orca login github`).
    pub sign_in_hint: String,
    /// At most this many step-ups (403 `insufficient_scope`) per request.
    pub max_step_ups: u32,
    /// Where the URLs the server's challenges and metadata name may be fetched; `None`
    /// (the default): wherever they are, over HTTPS or on loopback.
    pub confinement: Option<Confinement>,
}

impl AuthorizerConfig {
    /// A configuration with an in-memory store, no identity and two step-ups.
    pub fn new(server_url: impl Into<String>, grant: Grant) -> AuthorizerConfig {
        AuthorizerConfig {
            server_url: server_url.into(),
            identity: ClientIdentity {
                client_name: "orca".to_owned(),
                ..ClientIdentity::default()
            },
            grant,
            store: Arc::new(MemoryTokenStore::default()),
            sign_in_hint: "sign in again".to_owned(),
            max_step_ups: 2,
            confinement: None,
        }
    }
}

/// A client registered with one authorization server.
#[derive(Clone)]
struct Registration {
    client: Client,
    secret: Option<String>,
    method: &'static str,
}

#[derive(Default)]
struct State {
    loaded: bool,
    sign_in: Option<SignIn>,
    /// The DPoP key of `sign_in`, with the nonces the servers gave for it.
    dpop: Option<Arc<DpopKey>>,
    /// Registrations by issuer: a client is never presented to another server.
    registrations: HashMap<String, Registration>,
}

/// The sign-in of one client to one MCP server; share it behind an `Arc`.
pub struct Authorizer {
    config: AuthorizerConfig,
    outbound: Outbound,
    state: Mutex<State>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Authorizer")
            .field("server_url", &shown(&self.config.server_url))
            .finish_non_exhaustive()
    }
}

/// An access token as it is presented to the MCP server: a bearer token, or a DPoP-bound one
/// with the key its proofs are signed with. `Debug` shows neither.
#[derive(Clone)]
pub struct Credential {
    /// The access token.
    pub token: String,
    /// The key, when the token is DPoP-bound.
    pub dpop: Option<Arc<DpopKey>>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Credential").field("dpop", &self.dpop.is_some()).finish()
    }
}

impl Credential {
    /// The `Authorization` value, and for a DPoP-bound token a fresh `DPoP` proof, for one
    /// `method` request to `url`.
    ///
    /// # Errors
    ///
    /// [`AuthError::Key`] when the proof cannot be signed.
    pub fn headers(&self, method: &str, url: &str) -> Result<(String, Option<String>), AuthError> {
        match &self.dpop {
            None => Ok((format!("Bearer {}", self.token), None)),
            Some(key) => {
                let proof = key.proof(method, url, Some(&self.token), dpop::NonceFrom::Resource)?;
                Ok((format!("DPoP {}", self.token), Some(proof)))
            }
        }
    }
}

/// The key a sign-in's tokens are bound to: the one in memory when it is the same (its nonces
/// kept), else the stored one.
fn bound_key(
    current: Option<&Arc<DpopKey>>,
    sign_in: &SignIn,
) -> Result<Option<Arc<DpopKey>>, AuthError> {
    let Some(stored) = &sign_in.dpop_key else { return Ok(None) };
    if let Some(current) = current
        && current.stored() == *stored
    {
        return Ok(Some(current.clone()));
    }
    Ok(Some(Arc::new(DpopKey::from_stored(stored)?)))
}

fn method_name(auth: &ClientAuth) -> &'static str {
    match auth {
        ClientAuth::None => "none",
        ClientAuth::Basic(_) => "client_secret_basic",
        ClientAuth::Post(_) => "client_secret_post",
        ClientAuth::PrivateKeyJwt { .. } => "private_key_jwt",
    }
}

/// The DER bytes of a PEM block (PKCS#8 for EC and Ed25519 keys, PKCS#1 for RSA).
fn pem_der(pem: &str) -> Result<Vec<u8>, AuthError> {
    use base64::Engine;
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| AuthError::Key("the private key is not a PEM block".to_owned()))
}

/// The scopes of a first sign-in: the challenge's, else the resource's `scopes_supported`, else
/// none; `offline_access` added for a person's sign-in when the authorization server lists it.
pub(crate) fn select_scopes(
    challenge: &Challenge,
    discovered: &Discovered,
    interactive: bool,
    extra: &[String],
) -> Vec<String> {
    let mut scopes: Vec<String> = extra.to_vec();
    let base = challenge.scope.clone().or_else(|| discovered.resource_scopes.clone());
    for scope in base.unwrap_or_default() {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    let offline = discovered
        .server
        .scopes_supported
        .as_ref()
        .is_some_and(|supported| supported.iter().any(|s| s == OFFLINE_ACCESS));
    if interactive && offline && !scopes.iter().any(|s| s == OFFLINE_ACCESS) {
        scopes.push(OFFLINE_ACCESS.to_owned());
    }
    if !offline {
        scopes.retain(|s| s != OFFLINE_ACCESS);
    }
    scopes
}

/// Check the authorization response `redirected` against the request's `state` and the
/// server's `issuer` (RFC 9207: `iss` compared as an exact string when present, and required
/// when the server advertises it, `iss_required`) and take its code.
pub(crate) fn authorization_code(
    redirected: &Url,
    state: &str,
    issuer: &str,
    iss_required: bool,
) -> Result<String, AuthError> {
    let query: HashMap<String, String> = redirected.query_pairs().into_owned().collect();
    if let Some(error) = query.get("error") {
        return Err(AuthError::Authorization(format!(
            "the authorization server answered {error}{}",
            query.get("error_description").map(|d| format!(": {d}")).unwrap_or_default()
        )));
    }
    if query.get("state").map(String::as_str) != Some(state) {
        return Err(AuthError::StateMismatch);
    }
    match query.get("iss") {
        Some(iss) if iss != issuer => {
            return Err(AuthError::IssMismatch { expected: issuer.to_owned() });
        }
        None if iss_required => {
            return Err(AuthError::IssMismatch { expected: issuer.to_owned() });
        }
        _ => {}
    }
    query
        .get("code")
        .cloned()
        .ok_or_else(|| AuthError::Authorization("the redirect carries no code".to_owned()))
}

impl Authorizer {
    /// An authorizer with its own HTTP client (no redirects followed, 30 s timeout).
    ///
    /// # Errors
    ///
    /// [`AuthError::Http`] when the HTTP client cannot be built; [`AuthError::InsecureUrl`]
    /// for an identity's issuer that is not a secure URL.
    pub fn new(config: AuthorizerConfig) -> Result<Authorizer, AuthError> {
        let outbound = Outbound::new(
            &config.server_url,
            config.identity.issuer.as_deref(),
            config.confinement.as_ref(),
        )?;
        Ok(Authorizer { config, outbound, state: Mutex::new(State::default()) })
    }

    /// The stored sign-in, unless it was made with another authorization server than the one
    /// the identity is bound to (then it is not used, and its tokens are never refreshed).
    async fn stored(&self) -> Result<Option<SignIn>, AuthError> {
        let stored = self.config.store.load().await?;
        Ok(stored.filter(|sign_in| {
            self.outbound.issuer().is_none_or(|issuer| same_issuer(&sign_in.issuer, issuer))
        }))
    }

    /// One request to `issuer`'s token endpoint as `client`, once the endpoint is one the
    /// client's credentials may go to.
    async fn token(
        &self,
        endpoint: &str,
        issuer: &str,
        client: &Client,
        params: Vec<(&'static str, String)>,
        scopes: &[String],
        dpop: Option<&DpopKey>,
    ) -> Result<Tokens, AuthError> {
        self.outbound.check_token_destination(issuer, endpoint)?;
        self.outbound.admit(endpoint)?;
        token::request(&self.outbound, endpoint, issuer, client, params, scopes, dpop).await
    }

    /// The configured server URL.
    pub fn server_url(&self) -> &str {
        &self.config.server_url
    }

    /// The access token to send, refreshed first when it is about to expire; `None` before any
    /// sign-in (the server's 401 starts one).
    ///
    /// # Errors
    ///
    /// A refresh that fails; the store.
    pub async fn access_token(&self) -> Result<Option<String>, AuthError> {
        Ok(self.credential().await?.map(|credential| credential.token))
    }

    /// The access token to send as [`access_token`](Self::access_token) gives it, with its DPoP
    /// key when it is bound to one.
    ///
    /// # Errors
    ///
    /// A refresh that fails; the store; a stored DPoP key that cannot be read.
    pub async fn credential(&self) -> Result<Option<Credential>, AuthError> {
        let mut state = self.state.lock().await;
        if !state.loaded {
            state.sign_in = self.stored().await?;
            state.loaded = true;
        }
        let Some(sign_in) = state.sign_in.clone() else {
            if matches!(self.config.grant, Grant::StoredOnly) {
                return Err(AuthError::SignInRequired { hint: self.config.sign_in_hint.clone() });
            }
            return Ok(None);
        };
        let sign_in = if !sign_in.tokens.expiring() {
            sign_in
        } else if let Some(stored) = self.stored().await?
            && !stored.tokens.expiring()
        {
            // Another replica refreshed it already.
            state.sign_in = Some(stored.clone());
            stored
        } else if sign_in.tokens.refresh_token.is_some() {
            self.refresh(&mut state, &sign_in).await?;
            state.sign_in.clone().unwrap_or(sign_in)
        } else {
            sign_in
        };
        let key = bound_key(state.dpop.as_ref(), &sign_in)?;
        state.dpop.clone_from(&key);
        let dpop = key.filter(|_| sign_in.tokens.dpop);
        Ok(Some(Credential { token: sign_in.tokens.access_token, dpop }))
    }

    /// Whether a sign-in is stored.
    ///
    /// # Errors
    ///
    /// The store.
    pub async fn signed_in(&self) -> Result<bool, AuthError> {
        Ok(self.stored().await?.is_some())
    }

    /// Forget the sign-in.
    ///
    /// # Errors
    ///
    /// The store.
    pub async fn sign_out(&self) -> Result<(), AuthError> {
        let mut state = self.state.lock().await;
        state.sign_in = None;
        state.loaded = true;
        self.config.store.clear().await
    }

    /// The server answered 401 to `rejected` (the token that was sent, if any), with the
    /// `WWW-Authenticate` value `header`: use a token another caller got meanwhile, else
    /// refresh, else sign in again.
    ///
    /// # Errors
    ///
    /// Whatever stops the sign-in; [`AuthError::SignInAgain`] when the refresh token is refused
    /// and nobody can sign in here.
    pub async fn unauthorized(
        &self,
        header: Option<&str>,
        rejected: Option<&str>,
    ) -> Result<(), AuthError> {
        let mut state = self.state.lock().await;
        let stored = self.stored().await?;
        state.loaded = true;
        if let Some(stored) = &stored
            && Some(stored.tokens.access_token.as_str()) != rejected
        {
            state.sign_in = Some(stored.clone());
            return Ok(());
        }
        state.sign_in = stored.clone();
        let challenge = header.map(Challenge::parse).unwrap_or_default();
        if let Some(sign_in) = stored
            && sign_in.tokens.refresh_token.is_some()
        {
            match self.refresh(&mut state, &sign_in).await {
                Ok(_) => return Ok(()),
                Err(AuthError::SignInAgain { .. })
                    if !matches!(self.config.grant, Grant::StoredOnly) => {}
                Err(error) => return Err(error),
            }
        }
        self.sign_in(&mut state, &challenge, &[]).await
    }

    /// The server answered 403 `insufficient_scope`: sign in again with the scopes already held
    /// and those the challenge names.
    ///
    /// # Errors
    ///
    /// Whatever stops the sign-in.
    pub async fn insufficient_scope(
        &self,
        header: &str,
        rejected: Option<&str>,
    ) -> Result<(), AuthError> {
        let mut state = self.state.lock().await;
        let current = state.sign_in.clone();
        if let Some(current) = &current
            && Some(current.tokens.access_token.as_str()) != rejected
        {
            return Ok(());
        }
        let challenge = Challenge::parse(header);
        let held = current.map(|sign_in| sign_in.tokens.scopes).unwrap_or_default();
        self.sign_in(&mut state, &challenge, &held).await
    }

    /// Sign in now, before any request, with discovery through the well-known paths (no
    /// challenge to start from).
    ///
    /// # Errors
    ///
    /// Whatever stops the sign-in.
    pub async fn sign_in_now(&self) -> Result<(), AuthError> {
        let mut state = self.state.lock().await;
        state.loaded = true;
        self.sign_in(&mut state, &Challenge::default(), &[]).await
    }

    /// The first half of a person's sign-in (the authorization code grant with PKCE), for when
    /// the browser comes back elsewhere than where the sign-in started (another replica):
    /// discovery through the well-known paths, the scopes (with `offline_access` where the
    /// authorization server lists it), the client's identity (a dynamic registration naming
    /// `redirect_uri` if need be), a DPoP key when the server takes DPoP, PKCE and `state`.
    /// Answers the authorization URL to send the person to, and what
    /// [`finish_sign_in`](Self::finish_sign_in) needs, on this authorizer or on another one
    /// configured alike. Whatever the configured grant, nothing is stored yet.
    ///
    /// # Errors
    ///
    /// Discovery, registration, an authorization server without an authorization endpoint or
    /// PKCE with S256, a DPoP key that cannot be made.
    pub async fn begin_sign_in(
        &self,
        redirect_uri: &str,
    ) -> Result<(Url, PendingSignIn), AuthError> {
        let mut state = self.state.lock().await;
        self.begin(&mut state, &Challenge::default(), &[], redirect_uri).await
    }

    /// The second half of a person's sign-in: `redirected` (the URL the browser came back to)
    /// is checked against `pending`'s `state` and issuer (`iss`), its code exchanged (with the
    /// DPoP key, when there is one), and the new sign-in stored. A `private_key_jwt` client is
    /// rebuilt from this authorizer's own identity.
    ///
    /// # Errors
    ///
    /// [`AuthError::StateMismatch`], [`AuthError::IssMismatch`], the authorization server's
    /// refusal, the token endpoint's, the store.
    pub async fn finish_sign_in(
        &self,
        pending: &PendingSignIn,
        redirected: &Url,
    ) -> Result<(), AuthError> {
        let mut state = self.state.lock().await;
        self.finish(&mut state, pending, redirected).await
    }

    async fn refresh(&self, state: &mut State, sign_in: &SignIn) -> Result<String, AuthError> {
        let Some(refresh_token) = sign_in.tokens.refresh_token.clone() else {
            return Err(AuthError::SignInAgain { hint: self.config.sign_in_hint.clone() });
        };
        let client = self.stored_client(sign_in)?;
        let params = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh_token.clone()),
            ("resource", sign_in.resource.clone()),
        ];
        // A refresh is proven with the key the sign-in's tokens are bound to.
        let key = bound_key(state.dpop.as_ref(), sign_in)?;
        state.dpop.clone_from(&key);
        let result = self
            .token(
                &sign_in.token_endpoint,
                &sign_in.issuer,
                &client,
                params,
                &sign_in.tokens.scopes,
                key.as_deref(),
            )
            .await;
        match result {
            Ok(mut tokens) => {
                if tokens.refresh_token.is_none() {
                    tokens.refresh_token = Some(refresh_token);
                }
                let token = tokens.access_token.clone();
                let renewed = SignIn { tokens, ..sign_in.clone() };
                // Signed out while the refresh ran (the sign-in forgotten): it stays forgotten.
                if !self.config.store.replace(&renewed).await? {
                    state.sign_in = None;
                    return Err(AuthError::SignInAgain { hint: self.config.sign_in_hint.clone() });
                }
                state.sign_in = Some(renewed);
                Ok(token)
            }
            Err(AuthError::Token { error, .. })
                if error == "invalid_grant" || error == "invalid_client" =>
            {
                // Another replica may have used the refresh token first (rotation).
                if let Some(stored) = self.stored().await?
                    && stored.tokens.refresh_token.as_deref() != Some(refresh_token.as_str())
                {
                    let token = stored.tokens.access_token.clone();
                    state.sign_in = Some(stored);
                    return Ok(token);
                }
                state.sign_in = None;
                self.config.store.clear().await?;
                Err(AuthError::SignInAgain { hint: self.config.sign_in_hint.clone() })
            }
            Err(error) => Err(error),
        }
    }

    fn stored_client(&self, sign_in: &SignIn) -> Result<Client, AuthError> {
        self.client_of(&sign_in.client_id, &sign_in.auth_method, sign_in.client_secret.as_deref())
    }

    /// The client `id` authenticating with `method`: with `secret`, or for `private_key_jwt`
    /// with the configured private key (which is kept nowhere else).
    fn client_of(&self, id: &str, method: &str, secret: Option<&str>) -> Result<Client, AuthError> {
        let auth = match method {
            "private_key_jwt" => self.private_key_auth()?.ok_or_else(|| {
                AuthError::Key("the sign-in needs a private key, and none is configured".to_owned())
            })?,
            method => auth_named(Some(method), secret, None),
        };
        Ok(Client { id: id.to_owned(), auth })
    }

    fn private_key_auth(&self) -> Result<Option<ClientAuth>, AuthError> {
        let Some((pem, algorithm)) = &self.config.identity.private_key else { return Ok(None) };
        let algorithm: jsonwebtoken::Algorithm = algorithm
            .parse()
            .map_err(|_| AuthError::Key(format!("unknown algorithm {algorithm}")))?;
        let der = pem_der(pem.expose_secret())?;
        let key = match algorithm {
            jsonwebtoken::Algorithm::ES256 | jsonwebtoken::Algorithm::ES384 => {
                jsonwebtoken::EncodingKey::from_ec_der(&der)
            }
            jsonwebtoken::Algorithm::EdDSA => jsonwebtoken::EncodingKey::from_ed_der(&der),
            jsonwebtoken::Algorithm::RS256
            | jsonwebtoken::Algorithm::RS384
            | jsonwebtoken::Algorithm::RS512
            | jsonwebtoken::Algorithm::PS256
            | jsonwebtoken::Algorithm::PS384
            | jsonwebtoken::Algorithm::PS512 => jsonwebtoken::EncodingKey::from_rsa_der(&der),
            other => {
                return Err(AuthError::Key(format!("{other:?} is not a private-key algorithm")));
            }
        };
        Ok(Some(ClientAuth::PrivateKeyJwt { key, algorithm }))
    }

    /// Discovery, scopes, identity and the grant; the new sign-in is stored.
    async fn sign_in(
        &self,
        state: &mut State,
        challenge: &Challenge,
        held: &[String],
    ) -> Result<(), AuthError> {
        if matches!(self.config.grant, Grant::StoredOnly) {
            return Err(if state.sign_in.is_some() {
                AuthError::SignInAgain { hint: self.config.sign_in_hint.clone() }
            } else {
                AuthError::SignInRequired { hint: self.config.sign_in_hint.clone() }
            });
        }
        if let Grant::AuthorizationCode(agent) = &self.config.grant {
            let (url, pending) = self.begin(state, challenge, held, &agent.redirect_uri()).await?;
            let redirected = agent.authorize(url).await?;
            return self.finish(state, &pending, &redirected).await;
        }
        let discovered =
            discovery::discover(&self.outbound, &self.config.server_url, challenge).await?;
        let scopes = select_scopes(challenge, &discovered, false, held);
        let registration = self.registration(state, &discovered, None).await?;
        let key = if dpop::wanted(challenge, &discovered) {
            Some(Arc::new(DpopKey::generate()?))
        } else {
            None
        };
        let dpop = key.as_deref();
        let tokens = match &self.config.grant {
            Grant::ClientCredentials => {
                let mut params = vec![
                    ("grant_type", "client_credentials".to_owned()),
                    ("resource", discovered.resource.clone()),
                ];
                if !scopes.is_empty() {
                    params.push(("scope", scopes.join(" ")));
                }
                self.token(
                    &discovered.server.token_endpoint,
                    &discovered.server.issuer,
                    &registration.client,
                    params,
                    &scopes,
                    dpop,
                )
                .await?
            }
            Grant::JwtBearer(assertion) => {
                self.jwt_bearer(
                    &discovered,
                    &registration,
                    assertion.expose_secret(),
                    &scopes,
                    dpop,
                )
                .await?
            }
            Grant::EnterpriseManaged { idp_token_endpoint, idp_client_id, id_token } => {
                let grant = self
                    .identity_assertion(&discovered, idp_token_endpoint, idp_client_id, id_token)
                    .await?;
                self.jwt_bearer(&discovered, &registration, &grant, &scopes, dpop).await?
            }
            Grant::AuthorizationCode(_) | Grant::StoredOnly => unreachable!("handled above"),
        };
        let sign_in = SignIn {
            issuer: discovered.server.issuer.clone(),
            token_endpoint: discovered.server.token_endpoint.clone(),
            resource: discovered.resource.clone(),
            client_id: registration.client.id.clone(),
            client_secret: registration.secret.clone(),
            auth_method: registration.method.to_owned(),
            tokens,
            dpop_key: key.as_ref().map(|key| key.stored()),
        };
        self.config.store.save(&sign_in).await?;
        state.sign_in = Some(sign_in);
        state.dpop = key;
        Ok(())
    }

    /// RFC 7523 section 2.1: `assertion` for a token.
    async fn jwt_bearer(
        &self,
        discovered: &Discovered,
        registration: &Registration,
        assertion: &str,
        scopes: &[String],
        dpop: Option<&DpopKey>,
    ) -> Result<Tokens, AuthError> {
        let mut params = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned()),
            ("assertion", assertion.to_owned()),
            ("resource", discovered.resource.clone()),
        ];
        if !scopes.is_empty() {
            params.push(("scope", scopes.join(" ")));
        }
        self.token(
            &discovered.server.token_endpoint,
            &discovered.server.issuer,
            &registration.client,
            params,
            scopes,
            dpop,
        )
        .await
    }

    /// RFC 8693 at the identity provider: the user's ID token for an identity assertion
    /// authorization grant (ID-JAG) aimed at the authorization server and the resource.
    async fn identity_assertion(
        &self,
        discovered: &Discovered,
        endpoint: &str,
        idp_client_id: &str,
        id_token: &SecretString,
    ) -> Result<String, AuthError> {
        // The identity provider's endpoint is configured, not named by the server.
        discovery::secure_url(endpoint)?;
        let params = vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange".to_owned()),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:id-jag".to_owned()),
            ("subject_token", id_token.expose_secret().to_owned()),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token".to_owned()),
            ("audience", discovered.server.issuer.clone()),
            ("resource", discovered.resource.clone()),
        ];
        let client = Client { id: idp_client_id.to_owned(), auth: ClientAuth::None };
        let answer =
            token::request(&self.outbound, endpoint, endpoint, &client, params, &[], None).await?;
        Ok(answer.access_token)
    }

    /// The first half of the authorization code grant: discovery, scopes, identity, DPoP key,
    /// PKCE and `state`; the authorization URL and what [`finish`](Self::finish) needs.
    async fn begin(
        &self,
        state: &mut State,
        challenge: &Challenge,
        held: &[String],
        redirect_uri: &str,
    ) -> Result<(Url, PendingSignIn), AuthError> {
        let discovered =
            discovery::discover(&self.outbound, &self.config.server_url, challenge).await?;
        let scopes = select_scopes(challenge, &discovered, true, held);
        let registration = self.registration(state, &discovered, Some(redirect_uri)).await?;
        let dpop_key = if dpop::wanted(challenge, &discovered) {
            Some(DpopKey::generate()?.stored())
        } else {
            None
        };
        let server = &discovered.server;
        let endpoint =
            server.authorization_endpoint.as_deref().ok_or_else(|| AuthError::Metadata {
                url: shown(&server.issuer),
                message: "the authorization server has no authorization endpoint".to_owned(),
            })?;
        if let Some(methods) = &server.code_challenge_methods_supported
            && !methods.iter().any(|m| m == "S256")
        {
            return Err(AuthError::Authorization(
                "the authorization server does not support PKCE with S256".to_owned(),
            ));
        }
        let pkce = Pkce::new();
        let request_state = random_token();
        let mut url = discovery::secure_url(endpoint)?;
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &registration.client.id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("code_challenge", &pkce.challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &request_state)
                .append_pair("resource", &discovered.resource);
            if !scopes.is_empty() {
                query.append_pair("scope", &scopes.join(" "));
            }
            // OpenID Connect Core section 11: offline access is granted on a consent prompt.
            if scopes.iter().any(|scope| scope == OFFLINE_ACCESS) {
                query.append_pair("prompt", "consent");
            }
        }
        let pending = PendingSignIn {
            verifier: pkce.verifier,
            state: request_state,
            redirect_uri: redirect_uri.to_owned(),
            issuer: server.issuer.clone(),
            iss_required: server.authorization_response_iss_parameter_supported,
            token_endpoint: server.token_endpoint.clone(),
            resource: discovered.resource.clone(),
            scopes,
            client_id: registration.client.id.clone(),
            client_secret: registration.secret.clone(),
            auth_method: registration.method.to_owned(),
            dpop_key,
        };
        Ok((url, pending))
    }

    /// The second half of the authorization code grant: the response checked, the code
    /// exchanged, the new sign-in stored.
    async fn finish(
        &self,
        state: &mut State,
        pending: &PendingSignIn,
        redirected: &Url,
    ) -> Result<(), AuthError> {
        let code =
            authorization_code(redirected, &pending.state, &pending.issuer, pending.iss_required)?;
        let client = self.client_of(
            &pending.client_id,
            &pending.auth_method,
            pending.client_secret.as_deref(),
        )?;
        let key = match &pending.dpop_key {
            Some(stored) => Some(Arc::new(DpopKey::from_stored(stored)?)),
            None => None,
        };
        let params = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", pending.redirect_uri.clone()),
            ("code_verifier", pending.verifier.clone()),
            ("resource", pending.resource.clone()),
        ];
        let tokens = self
            .token(
                &pending.token_endpoint,
                &pending.issuer,
                &client,
                params,
                &pending.scopes,
                key.as_deref(),
            )
            .await?;
        let sign_in = SignIn {
            issuer: pending.issuer.clone(),
            token_endpoint: pending.token_endpoint.clone(),
            resource: pending.resource.clone(),
            client_id: pending.client_id.clone(),
            client_secret: pending.client_secret.clone(),
            auth_method: pending.auth_method.clone(),
            tokens,
            dpop_key: pending.dpop_key.clone(),
        };
        self.config.store.save(&sign_in).await?;
        state.sign_in = Some(sign_in);
        state.loaded = true;
        state.dpop = key;
        Ok(())
    }

    /// The client for this authorization server: one registered with it before, else the
    /// configured one, else the metadata document's URL, else a dynamic registration.
    /// `redirect_uri` is where a person's sign-in comes back to (none for the other grants).
    async fn registration(
        &self,
        state: &mut State,
        discovered: &Discovered,
        redirect_uri: Option<&str>,
    ) -> Result<Registration, AuthError> {
        let server = &discovered.server;
        if let Some(registration) = state.registrations.get(&server.issuer) {
            return Ok(registration.clone());
        }
        if let Some(sign_in) = &state.sign_in
            && sign_in.issuer == server.issuer
            && sign_in.auth_method != "private_key_jwt"
            && self.config.identity.client_id.is_none()
        {
            let client = self.stored_client(sign_in)?;
            let method = method_name(&client.auth);
            return Ok(Registration { client, secret: sign_in.client_secret.clone(), method });
        }
        let identity = &self.config.identity;
        let registration = if let Some(client_id) = &identity.client_id {
            let secret = identity.client_secret.as_ref().map(|s| s.expose_secret().to_owned());
            let supported = server.token_endpoint_auth_methods_supported.as_deref();
            let wants_jwt = supported.is_some_and(|m| m.iter().any(|m| m == "private_key_jwt"));
            let auth = match self.private_key_auth()? {
                Some(jwt) if wants_jwt || secret.is_none() => jwt,
                _ => choose_auth(secret.as_deref(), supported),
            };
            let method = method_name(&auth);
            Registration { client: Client { id: client_id.clone(), auth }, secret, method }
        } else if let Some(url) =
            identity.metadata_url.as_ref().filter(|_| server.client_id_metadata_document_supported)
        {
            Registration {
                client: Client { id: url.clone(), auth: ClientAuth::None },
                secret: None,
                method: "none",
            }
        } else if let Some(endpoint) = &server.registration_endpoint {
            self.register(endpoint, server, redirect_uri).await?
        } else {
            return Err(AuthError::NoClientIdentity { issuer: server.issuer.clone() });
        };
        state.registrations.insert(server.issuer.clone(), registration.clone());
        Ok(registration)
    }

    /// Dynamic client registration (RFC 7591).
    async fn register(
        &self,
        endpoint: &str,
        server: &ServerMetadata,
        redirect_uri: Option<&str>,
    ) -> Result<Registration, AuthError> {
        self.outbound.admit(endpoint)?;
        let supported = server.token_endpoint_auth_methods_supported.as_deref();
        let requested_method = match supported {
            Some(methods) if methods.iter().any(|m| m == "none") => "none",
            Some(methods)
                if methods.iter().any(|m| m == "client_secret_post")
                    && !methods.iter().any(|m| m == "client_secret_basic") =>
            {
                "client_secret_post"
            }
            _ => "client_secret_basic",
        };
        let (grant_types, redirect_uris) = match redirect_uri {
            Some(uri) => (vec!["authorization_code", "refresh_token"], vec![uri.to_owned()]),
            None => (vec!["client_credentials"], Vec::new()),
        };
        // SEP-837: a client on this machine (a loopback redirect) is native, any other web.
        let native = redirect_uris.iter().all(|uri| {
            Url::parse(uri).is_ok_and(|uri| {
                matches!(uri.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
            })
        });
        let application_type = if native && !redirect_uris.is_empty() { "native" } else { "web" };
        let body = serde_json::json!({
            "client_name": self.config.identity.client_name,
            "application_type": application_type,
            "redirect_uris": redirect_uris,
            "grant_types": grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": requested_method,
        });
        let response =
            self.outbound.http.post(endpoint).json(&body).send().await.map_err(|error| {
                AuthError::Http { url: shown(endpoint), message: error.to_string() }
            })?;
        let status = response.status();
        if !status.is_success() {
            // The OAuth error and its description only: a registration answer is not echoed.
            #[derive(Deserialize)]
            struct Refusal {
                error: String,
                error_description: Option<String>,
            }
            let refusal = response.json::<Refusal>().await.ok().map_or_else(String::new, |r| {
                format!(
                    ": {}{}",
                    r.error,
                    r.error_description.map(|d| format!(" ({d})")).unwrap_or_default()
                )
            });
            return Err(AuthError::Registration(format!(
                "{} answered HTTP {status}{refusal}",
                shown(endpoint)
            )));
        }
        #[derive(Deserialize)]
        struct Registered {
            client_id: String,
            client_secret: Option<String>,
            token_endpoint_auth_method: Option<String>,
        }
        let registered: Registered = response.json().await.map_err(|_| {
            AuthError::Registration(format!("{} answered no client id", shown(endpoint)))
        })?;
        let auth = auth_named(
            registered.token_endpoint_auth_method.as_deref(),
            registered.client_secret.as_deref(),
            supported,
        );
        let method = method_name(&auth);
        Ok(Registration {
            client: Client { id: registered.client_id, auth },
            secret: registered.client_secret,
            method,
        })
    }
}

#[cfg(test)]
mod tests {
    use url::Url;

    use super::super::Tokens;
    use super::super::challenge::Challenge;
    use super::super::discovery::{Discovered, ServerMetadata};
    use super::{
        AuthError, Authorizer, AuthorizerConfig, Grant, PendingSignIn, SignIn, authorization_code,
        select_scopes,
    };

    fn server(iss_supported: bool, scopes: Option<&[&str]>) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://as.example.com".to_owned(),
            authorization_endpoint: Some("https://as.example.com/authorize".to_owned()),
            token_endpoint: "https://as.example.com/token".to_owned(),
            registration_endpoint: None,
            scopes_supported: scopes.map(|s| s.iter().map(|s| (*s).to_owned()).collect()),
            token_endpoint_auth_methods_supported: None,
            code_challenge_methods_supported: None,
            grant_types_supported: None,
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: iss_supported,
            dpop_signing_alg_values_supported: None,
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_resource_then_nowhere() {
        let discovered = |resource: Option<&[&str]>, server_scopes: Option<&[&str]>| Discovered {
            resource: "https://mcp.example.com/mcp".to_owned(),
            resource_scopes: resource.map(strings),
            resource_dpop: false,
            server: server(false, server_scopes),
        };
        let challenge = |scope: Option<&[&str]>| Challenge {
            scope: scope.map(strings),
            ..Challenge::default()
        };
        for (challenge, discovered, interactive, held, expected) in [
            (challenge(Some(&["a"])), discovered(Some(&["b", "c"]), None), true, vec![], vec!["a"]),
            (challenge(None), discovered(Some(&["b", "c"]), None), true, vec![], vec!["b", "c"]),
            (challenge(None), discovered(None, None), true, vec![], vec![]),
            (
                challenge(None),
                discovered(Some(&["b"]), Some(&["b", "offline_access"])),
                true,
                vec![],
                vec!["b", "offline_access"],
            ),
            (
                challenge(None),
                discovered(Some(&["b"]), Some(&["b", "offline_access"])),
                false,
                vec![],
                vec!["b"],
            ),
            (
                challenge(Some(&["offline_access", "b"])),
                discovered(None, Some(&["b"])),
                true,
                vec![],
                vec!["b"],
            ),
            (
                challenge(Some(&["w", "r"])),
                discovered(None, None),
                true,
                strings(&["r"]),
                vec!["r", "w"],
            ),
        ] {
            assert_eq!(
                select_scopes(&challenge, &discovered, interactive, &held),
                strings(&expected),
                "{challenge:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_refresh_replaces_a_stored_sign_in_and_never_brings_a_forgotten_one_back() {
        let sign_in = SignIn {
            issuer: "https://as.example.com".to_owned(),
            token_endpoint: "https://as.example.com/token".to_owned(),
            resource: "https://mcp.example.com/mcp".to_owned(),
            client_id: "orca".to_owned(),
            client_secret: None,
            auth_method: "none".to_owned(),
            tokens: Tokens {
                access_token: "the-token".to_owned(),
                refresh_token: Some("the-refresh".to_owned()),
                expires_at: None,
                scopes: Vec::new(),
                dpop: false,
            },
            dpop_key: None,
        };
        use super::{MemoryTokenStore, TokenStore};
        let store = MemoryTokenStore::default();
        assert!(!store.replace(&sign_in).await.unwrap());
        assert!(store.load().await.unwrap().is_none(), "a forgotten sign-in came back");
        store.save(&sign_in).await.unwrap();
        let mut renewed = sign_in.clone();
        renewed.tokens.access_token = "the-new-token".to_owned();
        assert!(store.replace(&renewed).await.unwrap());
        assert_eq!(store.load().await.unwrap().unwrap().tokens.access_token, "the-new-token");
    }

    #[tokio::test]
    async fn a_stored_sign_in_with_another_issuer_than_the_configured_one_is_not_used() {
        let sign_in = |issuer: &str| SignIn {
            issuer: issuer.to_owned(),
            token_endpoint: format!("{issuer}/token"),
            resource: "https://mcp.example.com/mcp".to_owned(),
            client_id: "orca".to_owned(),
            client_secret: Some("the-secret".to_owned()),
            auth_method: "client_secret_basic".to_owned(),
            tokens: Tokens {
                access_token: "the-token".to_owned(),
                refresh_token: Some("the-refresh".to_owned()),
                expires_at: None,
                scopes: Vec::new(),
                dpop: false,
            },
            dpop_key: None,
        };
        for (stored, used) in
            [("https://as.example.com", true), ("https://evil.example.com", false)]
        {
            let mut config =
                AuthorizerConfig::new("https://mcp.example.com/mcp", Grant::StoredOnly);
            config.identity.issuer = Some("https://as.example.com/".to_owned());
            config.store.save(&sign_in(stored)).await.unwrap();
            let authorizer = Authorizer::new(config).unwrap();
            assert_eq!(authorizer.signed_in().await.unwrap(), used, "{stored}");
            match authorizer.access_token().await {
                Ok(token) => assert_eq!(token.as_deref(), Some("the-token"), "{stored}"),
                Err(AuthError::SignInRequired { .. }) => assert!(!used, "{stored}"),
                Err(other) => panic!("{stored}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_pending_sign_in_survives_serialization_and_its_debug_shows_no_secret() {
        let pending = PendingSignIn {
            verifier: "the-verifier".to_owned(),
            state: "the-state".to_owned(),
            redirect_uri: "https://orca.example.com/oauth/upstream/callback".to_owned(),
            issuer: "https://as.example.com".to_owned(),
            iss_required: true,
            token_endpoint: "https://as.example.com/token".to_owned(),
            resource: "https://mcp.example.com/mcp".to_owned(),
            scopes: vec!["read".to_owned()],
            client_id: "orca-client".to_owned(),
            client_secret: Some("the-secret".to_owned()),
            auth_method: "client_secret_basic".to_owned(),
            dpop_key: Some("the-key".to_owned()),
        };
        let kept = serde_json::to_vec(&pending).unwrap();
        let back: PendingSignIn = serde_json::from_slice(&kept).unwrap();
        assert_eq!(back, pending);
        assert_eq!(back.state(), "the-state");
        let shown = format!("{pending:?}");
        assert!(shown.contains("orca-client") && shown.contains("dpop: true"), "{shown}");
        for secret in ["the-verifier", "the-state", "the-secret", "the-key"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }

    #[test]
    fn the_authorization_response_is_checked_for_state_and_issuer() {
        let ok = "https://as.example.com";
        for (query, iss_supported, expected) in [
            (format!("code=c&state=s&iss={ok}"), true, Ok("c")),
            ("code=c&state=s".to_owned(), false, Ok("c")),
            ("code=c&state=s".to_owned(), true, Err("iss")),
            (format!("code=c&state=s&iss={ok}/"), true, Err("iss")),
            ("code=c&state=s&iss=https://evil.example.com".to_owned(), false, Err("iss")),
            (format!("code=c&state=s&iss={}", "HTTPS://as.example.com"), true, Err("iss")),
            ("code=c&state=t".to_owned(), false, Err("state")),
            ("code=c".to_owned(), false, Err("state")),
            ("error=access_denied&state=s".to_owned(), false, Err("error")),
            ("state=s".to_owned(), false, Err("code")),
        ] {
            let url = Url::parse(&format!("http://127.0.0.1:1/callback?{query}")).unwrap();
            let server = server(iss_supported, None);
            let result = authorization_code(
                &url,
                "s",
                &server.issuer,
                server.authorization_response_iss_parameter_supported,
            );
            match (result, expected) {
                (Ok(code), Ok(expected)) => assert_eq!(code, expected, "{query}"),
                (Err(AuthError::IssMismatch { .. }), Err("iss"))
                | (Err(AuthError::StateMismatch), Err("state")) => {}
                (Err(AuthError::Authorization(message)), Err("error")) => {
                    assert!(message.contains("access_denied"), "{message}");
                }
                (Err(AuthError::Authorization(message)), Err("code")) => {
                    assert!(message.contains("no code"), "{message}");
                }
                (other, expected) => panic!("{query}: {other:?} instead of {expected:?}"),
            }
        }
    }
}
