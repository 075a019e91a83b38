//! orca as an OAuth 2.1 resource server (MCP authorization): bearer JWTs from the configured
//! issuer, checked against its key set. The issuer's metadata is found by discovery (OpenID
//! Connect, else RFC 8414), its JWKS cached and fetched again for an unknown `kid` (a rotation)
//! at most every `jwks_min_refresh`; the algorithm comes from the key, never from the token
//! alone, so `none` and a public key used as an HMAC secret are refused. A token must carry
//! exactly the issuer, orca's resource in its audience (RFC 8707) and the required scopes; its
//! header a `typ` among `accepted_token_types` (`at+jwt`, RFC 9068, by default) and no `crit`
//! (RFC 7515: orca understands no extension); its `iat`, if any, not in the future.
//! The discovered metadata is kept: its authorization and token endpoints serve the console's
//! sign-in (`gateway::sign_in`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value, json};
use tokio::sync::{Mutex, RwLock};

use crate::config::{OAuthConfig, secure_or_loopback, split_origin};

/// The keys are fetched again after this long, keeping the old ones if that fails.
const KEYS_STALE_AFTER: Duration = Duration::from_secs(300);
/// How long one request to the issuer may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest metadata or key set document read.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// Who a valid token says is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TokenIdentity {
    /// The user claim (`sub`).
    pub(crate) user: String,
    /// The client claim (`client_id`, else `azp`), when the token names one.
    pub(crate) client: Option<String>,
    pub(crate) roles: Vec<String>,
    pub(crate) scopes: Vec<String>,
    /// The thumbprint of the DPoP key the token is bound to (`cnf.jkt`), if any.
    pub(crate) jkt: Option<String>,
}

/// Why a bearer token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// 401 `invalid_token`.
    #[error("{0}")]
    Invalid(String),
    /// 403 `insufficient_scope`: the scopes the token lacks.
    #[error("the token lacks the scope(s) {}", .0.join(", "))]
    InsufficientScope(Vec<String>),
    /// 503: the issuer's keys cannot be had, so no token can be checked.
    #[error("the authorization server cannot be reached to check the token: {0}")]
    Unavailable(String),
    /// 429: the memory of seen DPoP proofs is full of proofs still in their window, so a new
    /// one cannot be told from a replay (`dpop::Replays`); try again in `retry_after` seconds.
    #[error("too many DPoP proofs were presented lately to remember another")]
    ProofsFull { retry_after: u64 },
}

/// A verification key with the one algorithm it may be used with.
struct Key {
    algorithm: Algorithm,
    key: DecodingKey,
}

#[derive(Default)]
struct Keys {
    jwks_uri: Option<String>,
    by_kid: HashMap<String, std::sync::Arc<Key>>,
    /// Keys without a `kid`, usable only when the token has none either.
    unnamed: Vec<std::sync::Arc<Key>>,
    fetched: Option<Instant>,
}

/// What orca keeps of the issuer's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IssuerMetadata {
    jwks_uri: String,
    /// Where a browser signs in; absent when the issuer names none, or one neither HTTPS nor
    /// on loopback.
    pub(crate) authorization_endpoint: Option<String>,
    /// Where a code is exchanged for a token; absent as `authorization_endpoint`.
    pub(crate) token_endpoint: Option<String>,
}

#[derive(Default)]
struct Attempt {
    at: Option<Instant>,
    error: Option<String>,
}

/// Checks bearer JWTs for one issuer and one resource.
pub(crate) struct Verifier {
    config: OAuthConfig,
    http: reqwest::Client,
    keys: RwLock<Keys>,
    /// The issuer's metadata, once discovered.
    metadata: RwLock<Option<IssuerMetadata>>,
    /// Held while fetching, so concurrent requests share one fetch.
    fetching: Mutex<Attempt>,
    /// Tokens already verified, by the SHA-256 of the token: a client sends the same token
    /// with every call until it expires, so its signature is checked once. Emptied whenever the
    /// key set is fetched again.
    verified: std::sync::Mutex<HashMap<[u8; 32], Verified>>,
    /// The DPoP proofs accepted, against their replay.
    replays: super::dpop::Replays,
    /// With other replicas: orca's state database, where they remember the proofs together.
    shared_replays: Option<sqlx::PgPool>,
}

/// A token whose signature, issuer, audience and scopes were checked, with the times it is
/// good for.
#[derive(Debug, Clone)]
struct Verified {
    identity: TokenIdentity,
    /// Seconds since the epoch: `nbf` (0 when absent) and `exp`.
    not_before: u64,
    expires: u64,
    /// Past this the token is checked afresh, whatever its `exp`.
    recheck_at: Instant,
}

/// The most verified tokens kept; past it the cache starts over.
const MAX_VERIFIED: usize = 10_000;

impl std::fmt::Debug for Verifier {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Verifier").field("issuer", &self.config.issuer).finish()
    }
}

impl Verifier {
    pub(crate) fn new(config: OAuthConfig) -> Verifier {
        crate::tls::install();
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Verifier {
            config,
            http,
            keys: RwLock::default(),
            metadata: RwLock::default(),
            fetching: Mutex::default(),
            verified: std::sync::Mutex::default(),
            replays: super::dpop::Replays::default(),
            shared_replays: None,
        }
    }

    /// Remember the DPoP proofs seen in `pool`, with the other replicas: a proof is accepted
    /// once by all of them together. While `pool` cannot be reached, this replica's own memory
    /// refuses what it has seen (a proof could then be accepted once more by each replica,
    /// within its minute of life).
    pub(crate) fn with_shared_replays(self, pool: sqlx::PgPool) -> Verifier {
        Verifier { shared_replays: Some(pool), ..self }
    }

    /// [`verify`](Self::verify) a token as a request presents it: a DPoP-bound token only with
    /// the `DPoP` scheme and a proof of this request (`gateway::dpop`).
    ///
    /// # Errors
    ///
    /// As `verify`; `Invalid` for a presentation the token's binding refuses.
    /// `forwarded`: another replica of this orca (`cluster`) checked this very presentation
    /// and forwards it, so its proof is checked again but not counted as a second use.
    pub(crate) async fn verify_presented(
        &self,
        presented: super::dpop::Presentation<'_>,
        forwarded: bool,
    ) -> Result<TokenIdentity, Refusal> {
        let identity = self.verify(presented.token).await?;
        let now = jsonwebtoken::get_current_timestamp();
        let jkt = identity.jkt.as_deref();
        if forwarded {
            super::dpop::check_proof(presented, jkt, &self.config.resource, now)
                .map_err(Refusal::Invalid)?;
            return Ok(identity);
        }
        let Some(pool) = &self.shared_replays else {
            super::dpop::check(presented, jkt, &self.config.resource, &self.replays, now)?;
            return Ok(identity);
        };
        let Some(jti) = super::dpop::check_proof(presented, jkt, &self.config.resource, now)
            .map_err(Refusal::Invalid)?
        else {
            return Ok(identity);
        };
        let until = now + super::dpop::IAT_WINDOW_SECS;
        let expires = chrono::DateTime::from_timestamp(i64::try_from(until).unwrap_or(i64::MAX), 0)
            .unwrap_or_else(chrono::Utc::now);
        match crate::cluster::limits::remember_proof(pool, jkt.unwrap_or_default(), &jti, expires)
            .await
        {
            crate::cluster::limits::Proof::First => Ok(identity),
            crate::cluster::limits::Proof::Seen => {
                Err(Refusal::Invalid("the DPoP proof was used before (jti)".to_owned()))
            }
            crate::cluster::limits::Proof::Unknown => {
                super::dpop::remember(&self.replays, &jti, now)?;
                Ok(identity)
            }
        }
    }

    /// The client it asks the issuer with (a short timeout, no redirects followed).
    pub(crate) fn http_client(&self) -> &reqwest::Client {
        &self.http
    }

    /// The configuration it checks tokens against.
    pub(crate) fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// Whether a bearer credential has the form of a JWT (three base64url parts), rather than
    /// an API key.
    pub(crate) fn looks_like_jwt(credential: &str) -> bool {
        let parts: Vec<&str> = credential.split('.').collect();
        parts.len() == 3
            && parts[..2].iter().all(|part| {
                !part.is_empty()
                    && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    }

    /// The identity a token carries, once its signature, issuer, audience, times and scopes
    /// are checked.
    ///
    /// # Errors
    ///
    /// `Invalid` for a token that is not acceptable, `InsufficientScope` for a valid token
    /// without the required scopes, `Unavailable` when no key can be had to check it.
    pub(crate) async fn verify(&self, token: &str) -> Result<TokenIdentity, Refusal> {
        use sha2::Digest as _;
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some(identity) = self.already_verified(&digest) {
            return Ok(identity);
        }
        let (identity, not_before, expires) = self.verify_afresh(token).await?;
        let mut verified = self.verified.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if verified.len() >= MAX_VERIFIED {
            verified.clear();
        }
        verified.insert(
            digest,
            Verified {
                identity: identity.clone(),
                not_before,
                expires,
                recheck_at: Instant::now() + KEYS_STALE_AFTER,
            },
        );
        Ok(identity)
    }

    /// The identity of a token verified before, while its times (with the leeway) hold.
    fn already_verified(&self, digest: &[u8; 32]) -> Option<TokenIdentity> {
        let verified = self.verified.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = verified.get(digest)?;
        let now = jsonwebtoken::get_current_timestamp();
        let leeway = self.config.leeway.as_secs();
        (entry.recheck_at > Instant::now()
            && now + leeway >= entry.not_before
            && now <= entry.expires.saturating_add(leeway))
        .then(|| entry.identity.clone())
    }

    /// The full check of a token: its key, signature, claims and scopes; with its `nbf` (0 when
    /// absent) and `exp`.
    async fn verify_afresh(&self, token: &str) -> Result<(TokenIdentity, u64, u64), Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::Invalid("the token is not a signed JWT".to_owned()))?;
        // RFC 7515 section 4.1.11: an extension marked critical that is not understood makes
        // the token invalid, and orca understands none.
        if header.crit.is_some() {
            return Err(Refusal::Invalid(
                "the token marks header parameters critical (`crit`) that orca does not understand"
                    .to_owned(),
            ));
        }
        self.check_type(header.typ.as_deref())?;
        let key = self.key_for(header.kid.as_deref()).await?;
        if header.alg != key.algorithm {
            return Err(Refusal::Invalid(format!(
                "the token is signed with {:?} but the issuer's key is for {:?}",
                header.alg, key.algorithm
            )));
        }
        let mut validation = Validation::new(key.algorithm);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = self.config.leeway.as_secs();
        validation.validate_nbf = true;
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|error| Refusal::Invalid(self.describe(error.kind())))?
            .claims;
        self.check_issued_at(&claims)?;
        let identity = self.identity(&claims)?;
        let missing: Vec<String> = self
            .config
            .required_scopes
            .iter()
            .filter(|scope| !identity.scopes.contains(scope))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::InsufficientScope(missing));
        }
        let time = |name: &str| claims.get(name).and_then(Value::as_u64).unwrap_or(0);
        Ok((identity, time("nbf"), time("exp")))
    }

    /// The token's `typ` must be one of `auth.oauth.accepted_token_types` (RFC 9068 section 4:
    /// `at+jwt`, so that an ID token or another JWT of the issuer is not taken for an access
    /// token), or absent when `none` is among them.
    fn check_type(&self, typ: Option<&str>) -> Result<(), Refusal> {
        let accepted = &self.config.accepted_token_types;
        let found = typ.map(crate::config::token_type);
        let admitted = match &found {
            Some(found) => {
                found != crate::config::NO_TOKEN_TYPE && accepted.iter().any(|type_| type_ == found)
            }
            None => accepted.iter().any(|type_| type_ == crate::config::NO_TOKEN_TYPE),
        };
        if admitted {
            return Ok(());
        }
        let found = match found {
            Some(found) => format!("`{}`", found.chars().take(64).collect::<String>()),
            None => "missing".to_owned(),
        };
        Err(Refusal::Invalid(format!(
            "the token's type (`typ`) is {found}, not one of {} (auth.oauth.accepted_token_types)",
            accepted.join(", ")
        )))
    }

    /// A token issued later than now (with the leeway) is refused: the issuer's clock, or the
    /// token, is not to be trusted.
    fn check_issued_at(&self, claims: &Map<String, Value>) -> Result<(), Refusal> {
        let Some(issued_at) = claims.get("iat") else { return Ok(()) };
        let Some(issued_at) = issued_at.as_f64() else {
            return Err(Refusal::Invalid("the token's `iat` is not a number".to_owned()));
        };
        let now = jsonwebtoken::get_current_timestamp() as f64;
        if issued_at > now + self.config.leeway.as_secs_f64() {
            return Err(Refusal::Invalid("the token was issued in the future (`iat`)".to_owned()));
        }
        Ok(())
    }

    fn describe(&self, kind: &jsonwebtoken::errors::ErrorKind) -> String {
        use jsonwebtoken::errors::ErrorKind;
        match kind {
            ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
            ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".to_owned(),
            ErrorKind::InvalidIssuer => {
                format!("the token was not issued by {}", self.config.issuer)
            }
            ErrorKind::InvalidAudience => format!(
                "the token was issued for another resource: its audience does not name {}",
                self.config.resource
            ),
            ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
            ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
            _ => "the token is not valid".to_owned(),
        }
    }

    fn identity(&self, claims: &Map<String, Value>) -> Result<TokenIdentity, Refusal> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str).map(str::to_owned);
        let user =
            text(&self.config.user_claim).filter(|user| !user.is_empty()).ok_or_else(|| {
                Refusal::Invalid(format!("the token has no `{}` claim", self.config.user_claim))
            })?;
        let client =
            text(&self.config.client_claim).or_else(|| text("azp")).or_else(|| text("client_id"));
        let words = |value: Option<&Value>| -> Vec<String> {
            match value {
                Some(Value::String(text)) => text.split_whitespace().map(str::to_owned).collect(),
                Some(Value::Array(items)) => {
                    items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
                }
                _ => Vec::new(),
            }
        };
        let scopes = match claims.get("scope") {
            Some(scope) => words(Some(scope)),
            None => words(claims.get("scp")),
        };
        let roles = self
            .config
            .roles_claim
            .as_deref()
            .map(|claim| words(claims.get(claim)))
            .unwrap_or_default();
        let jkt = claims
            .get("cnf")
            .and_then(|cnf| cnf.get("jkt"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(TokenIdentity { user, client, roles, scopes, jkt })
    }

    /// The key for `kid`: from the cache, else from a fresh fetch of the key set (at most every
    /// `jwks_min_refresh`, one fetch shared by concurrent requests). A cached key stays usable
    /// while the issuer cannot be reached.
    async fn key_for(&self, kid: Option<&str>) -> Result<std::sync::Arc<Key>, Refusal> {
        if let (Some(key), true) = self.cached(kid).await {
            return Ok(key);
        }
        let mut attempt = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        let (cached, fresh) = self.cached(kid).await;
        if let (Some(key), true) = (&cached, fresh) {
            return Ok(key.clone());
        }
        if attempt.at.is_some_and(|at| at.elapsed() < self.config.jwks_min_refresh) {
            // Asked a moment ago: not again yet.
            return match (cached, &attempt.error) {
                (Some(key), _) => Ok(key),
                (None, Some(error)) => Err(Refusal::Unavailable(error.clone())),
                (None, None) => Err(unknown_key(kid)),
            };
        }
        attempt.at = Some(Instant::now());
        match self.fetch_keys().await {
            Ok(fetched) => {
                attempt.error = None;
                let mut keys = self.keys.write().await;
                *keys = fetched;
                // A key the issuer no longer publishes verifies nothing more, not even a token
                // it verified before.
                self.verified.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clear();
                pick(&keys, kid).ok_or_else(|| unknown_key(kid))
            }
            Err(error) => {
                tracing::warn!(issuer = %self.config.issuer, "cannot fetch the issuer's keys: {error}");
                attempt.error = Some(error.clone());
                cached.ok_or(Refusal::Unavailable(error))
            }
        }
    }

    /// The cached key for `kid`, and whether the cache is fresh.
    async fn cached(&self, kid: Option<&str>) -> (Option<std::sync::Arc<Key>>, bool) {
        let keys = self.keys.read().await;
        (pick(&keys, kid), keys.fetched.is_some_and(|at| at.elapsed() < KEYS_STALE_AFTER))
    }

    /// Discover the issuer's metadata (once) and fetch its key set.
    async fn fetch_keys(&self) -> Result<Keys, String> {
        let jwks_uri = self.issuer_metadata().await?.jwks_uri;
        let document = self.get_json(&jwks_uri).await?;
        let set: JwkSet = serde_json::from_value(document)
            .map_err(|error| format!("the key set at {jwks_uri} is not a JWK set: {error}"))?;
        let mut keys = Keys {
            jwks_uri: Some(jwks_uri.clone()),
            fetched: Some(Instant::now()),
            ..Keys::default()
        };
        for jwk in &set.keys {
            if jwk
                .common
                .public_key_use
                .as_ref()
                .is_some_and(|usage| *usage != PublicKeyUse::Signature)
            {
                continue;
            }
            let Some(algorithm) = algorithm_of(jwk) else { continue };
            let Ok(key) = DecodingKey::from_jwk(jwk) else { continue };
            let key = std::sync::Arc::new(Key { algorithm, key });
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_kid.insert(kid.clone(), key);
                }
                None => keys.unnamed.push(key),
            }
        }
        if keys.by_kid.is_empty() && keys.unnamed.is_empty() {
            return Err(format!("the key set at {jwks_uri} holds no usable signing key"));
        }
        Ok(keys)
    }

    /// The issuer's metadata: discovered once, then kept.
    ///
    /// # Errors
    ///
    /// Why it cannot be discovered.
    pub(crate) async fn issuer_metadata(&self) -> Result<IssuerMetadata, String> {
        if let Some(metadata) = self.metadata.read().await.clone() {
            return Ok(metadata);
        }
        let metadata = self.discover().await?;
        *self.metadata.write().await = Some(metadata.clone());
        Ok(metadata)
    }

    /// The issuer's OpenID Connect metadata, else its RFC 8414 metadata.
    async fn discover(&self) -> Result<IssuerMetadata, String> {
        let issuer = self.config.issuer.trim_end_matches('/');
        let (origin, path) = split_origin(issuer);
        let candidates = [
            format!("{issuer}/.well-known/openid-configuration"),
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
        ];
        let mut last_error = String::new();
        for url in &candidates {
            match self.get_json(url).await {
                Ok(metadata) => return self.metadata_of(&metadata, url),
                Err(error) => last_error = error,
            }
        }
        Err(last_error)
    }

    fn metadata_of(&self, metadata: &Value, url: &str) -> Result<IssuerMetadata, String> {
        let issuer = metadata.get("issuer").and_then(Value::as_str);
        if issuer != Some(self.config.issuer.as_str()) {
            return Err(format!(
                "the metadata at {url} names issuer {} instead of {}",
                issuer.unwrap_or("(none)"),
                self.config.issuer
            ));
        }
        let jwks_uri = metadata
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the metadata at {url} has no jwks_uri"))?;
        if !secure_or_loopback(jwks_uri) {
            return Err(format!("the jwks_uri {jwks_uri} is neither https:// nor on loopback"));
        }
        let endpoint = |name: &str| {
            let value = metadata.get(name).and_then(Value::as_str)?;
            if secure_or_loopback(value) {
                Some(value.to_owned())
            } else {
                tracing::warn!("the issuer's {name} {value} is neither https:// nor on loopback");
                None
            }
        };
        Ok(IssuerMetadata {
            jwks_uri: jwks_uri.to_owned(),
            authorization_endpoint: endpoint("authorization_endpoint"),
            token_endpoint: endpoint("token_endpoint"),
        })
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| {
                if error.is_timeout() {
                    format!("{url} did not answer in time")
                } else {
                    format!("cannot connect to {url}")
                }
            })?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{url} answered HTTP {}", status.as_u16()));
        }
        let bytes = response.bytes().await.map_err(|_| format!("{url}: the answer was cut off"))?;
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(format!("{url}: the answer is larger than {MAX_DOCUMENT_BYTES} bytes"));
        }
        serde_json::from_slice(&bytes).map_err(|_| format!("{url} did not answer JSON"))
    }

    /// What `orca doctor` says of the issuer: its key set can be fetched and holds keys.
    ///
    /// # Errors
    ///
    /// Why the issuer's metadata or keys cannot be had.
    pub(crate) async fn check(&self) -> Result<String, String> {
        let keys = self.fetch_keys().await?;
        let count = keys.by_kid.len() + keys.unnamed.len();
        let jwks_uri = keys.jwks_uri.clone().unwrap_or_default();
        *self.keys.write().await = keys;
        Ok(format!(
            "issuer {} reachable, {count} signing key(s) at {jwks_uri}; tokens must name the audience {}",
            self.config.issuer, self.config.resource
        ))
    }

    /// The `WWW-Authenticate` value for a request without a usable token.
    pub(crate) fn challenge(&self, refusal: Option<&Refusal>) -> String {
        let mut parts = vec![format!("resource_metadata=\"{}\"", self.config.metadata_url())];
        let scope = match refusal {
            Some(Refusal::InsufficientScope(_)) => {
                parts.insert(0, "error=\"insufficient_scope\"".to_owned());
                self.config.required_scopes.join(" ")
            }
            Some(Refusal::Invalid(reason)) => {
                parts.insert(0, "error=\"invalid_token\"".to_owned());
                parts.insert(1, format!("error_description=\"{}\"", quoted(reason)));
                self.config.required_scopes.join(" ")
            }
            _ => self.config.required_scopes.join(" "),
        };
        if !scope.is_empty() {
            parts.push(format!("scope=\"{scope}\""));
        }
        format!("Bearer {}", parts.join(", "))
    }

    /// The protected-resource metadata (RFC 9728) orca serves.
    pub(crate) fn metadata(&self) -> Value {
        let mut document = json!({
            "resource": self.config.resource,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "dpop_signing_alg_values_supported": super::dpop::ALGORITHMS,
            "resource_name": "orca",
        });
        if !self.config.scopes_supported.is_empty() {
            document["scopes_supported"] = json!(self.config.scopes_supported);
        }
        document
    }
}

fn pick(keys: &Keys, kid: Option<&str>) -> Option<std::sync::Arc<Key>> {
    match kid {
        Some(kid) => keys.by_kid.get(kid).cloned(),
        None if keys.unnamed.len() + keys.by_kid.len() == 1 => {
            keys.unnamed.first().or_else(|| keys.by_kid.values().next()).cloned()
        }
        None => None,
    }
}

fn unknown_key(kid: Option<&str>) -> Refusal {
    Refusal::Invalid(match kid {
        Some(kid) => format!("no key of the issuer has the id `{}`", quoted(kid)),
        None => "the token names no key (`kid`) and the issuer has several".to_owned(),
    })
}

/// The one algorithm a key may verify: its `alg` when it states one, else the usual one for its
/// type. Symmetric keys are never accepted from a key set.
fn algorithm_of(jwk: &jsonwebtoken::jwk::Jwk) -> Option<Algorithm> {
    let stated = jwk
        .common
        .key_algorithm
        .and_then(|alg| serde_json::to_value(alg).ok())
        .and_then(|name| serde_json::from_value::<Algorithm>(name).ok());
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => jsonwebtoken::AlgorithmFamily::Rsa,
        AlgorithmParameters::EllipticCurve(_) => jsonwebtoken::AlgorithmFamily::Ec,
        AlgorithmParameters::OctetKeyPair(_) => jsonwebtoken::AlgorithmFamily::Ed,
        _ => return None,
    };
    let usual = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(params) => match params.curve {
            EllipticCurve::Ed25519 => Algorithm::EdDSA,
            _ => return None,
        },
        _ => return None,
    };
    let algorithm = stated.unwrap_or(usual);
    family.algorithms().contains(&algorithm).then_some(algorithm)
}

/// Text safe inside a quoted `WWW-Authenticate` parameter.
fn quoted(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex as StdMutex};

    use jsonwebtoken::{EncodingKey, Header, encode};

    use super::*;

    const RESOURCE: &str = "https://orca.example.com/mcp";
    const JWKS: &str = include_str!("oauth_test_keys/public.jwks.json");

    /// A local issuer serving its OpenID metadata and a key set the test can change.
    struct Issuer {
        url: String,
        published: Arc<StdMutex<Vec<&'static str>>>,
        server: tokio::task::JoinHandle<()>,
    }

    impl Issuer {
        async fn start(kids: &[&'static str]) -> Issuer {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let published = Arc::new(StdMutex::new(kids.to_vec()));
            let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
            let keys = published.clone();
            let app = axum::Router::new()
                .route(
                    "/.well-known/openid-configuration",
                    axum::routing::get(move || async move { axum::Json(metadata) }),
                )
                .route(
                    "/jwks",
                    axum::routing::get(move || {
                        let kids = keys.lock().unwrap().clone();
                        async move {
                            let all: Value = serde_json::from_str(JWKS).unwrap();
                            let chosen: Vec<Value> = all["keys"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .filter(|key| kids.contains(&key["kid"].as_str().unwrap()))
                                .cloned()
                                .collect();
                            axum::Json(json!({"keys": chosen}))
                        }
                    }),
                );
            let server = tokio::spawn(async move {
                axum::serve(listener, app).await.unwrap();
            });
            Issuer { url, published, server }
        }

        fn publish(&self, kid: &'static str) {
            self.published.lock().unwrap().push(kid);
        }

        fn verifier(&self) -> Verifier {
            Verifier::new(OAuthConfig {
                issuer: self.url.clone(),
                resource: RESOURCE.to_owned(),
                scopes_supported: vec!["orca.read".into(), "orca.write".into()],
                required_scopes: vec!["orca.read".into()],
                user_claim: "sub".into(),
                client_claim: "client_id".into(),
                roles_claim: Some("groups".into()),
                leeway: Duration::from_secs(5),
                jwks_min_refresh: Duration::ZERO,
                console_client_id: None,
                accepted_token_types: vec!["at+jwt".into()],
            })
        }

        fn claims(&self) -> Value {
            let now = jsonwebtoken::get_current_timestamp();
            json!({
                "iss": self.url, "aud": RESOURCE, "sub": "ann", "azp": "inspector",
                "scope": "orca.read openid", "groups": ["analyst", "staff"],
                "iat": now, "exp": now + 300,
            })
        }
    }

    fn key(kid: &str) -> (Algorithm, EncodingKey) {
        let der = match kid {
            "rsa-1" => include_bytes!("oauth_test_keys/rsa-1.der").as_slice(),
            "rsa-2" => include_bytes!("oauth_test_keys/rsa-2.der").as_slice(),
            "ec-1" => include_bytes!("oauth_test_keys/ec-1.der").as_slice(),
            "ed-1" => include_bytes!("oauth_test_keys/ed-1.der").as_slice(),
            other => panic!("no test key {other}"),
        };
        match kid {
            "ec-1" => (Algorithm::ES256, EncodingKey::from_ec_der(der)),
            "ed-1" => (Algorithm::EdDSA, EncodingKey::from_ed_der(der)),
            _ => (Algorithm::RS256, EncodingKey::from_rsa_der(der)),
        }
    }

    /// An access token as RFC 9068 has it (`typ: at+jwt`).
    fn sign(kid: &str, claims: &Value) -> String {
        sign_with(kid, claims, |_| {})
    }

    /// A token whose header `change` alters.
    fn sign_with(kid: &str, claims: &Value, change: impl FnOnce(&mut Header)) -> String {
        let (algorithm, key) = key(kid);
        let mut header = Header::new(algorithm);
        header.kid = Some(kid.to_owned());
        header.typ = Some("at+jwt".to_owned());
        change(&mut header);
        encode(&header, claims, &key).unwrap()
    }

    fn b64(value: &Value) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
    }

    #[tokio::test]
    async fn tokens_signed_with_each_kind_of_key_are_accepted_with_who_they_name() {
        let issuer = Issuer::start(&["rsa-1", "ec-1", "ed-1"]).await;
        let verifier = issuer.verifier();
        for kid in ["rsa-1", "ec-1", "ed-1"] {
            let identity = verifier.verify(&sign(kid, &issuer.claims())).await.unwrap();
            assert_eq!(
                identity,
                TokenIdentity {
                    user: "ann".into(),
                    client: Some("inspector".into()),
                    roles: vec!["analyst".into(), "staff".into()],
                    scopes: vec!["orca.read".into(), "openid".into()],
                    jkt: None,
                },
                "{kid}"
            );
        }
        issuer.server.abort();
    }

    #[tokio::test]
    async fn every_kind_of_bad_token_is_refused_with_its_reason() {
        let issuer = Issuer::start(&["rsa-1"]).await;
        let verifier = issuer.verifier();
        let now = jsonwebtoken::get_current_timestamp();
        let with = |changes: Value| {
            let mut claims = issuer.claims();
            for (name, value) in changes.as_object().unwrap() {
                if value.is_null() {
                    claims.as_object_mut().unwrap().remove(name);
                } else {
                    claims[name] = value.clone();
                }
            }
            claims
        };
        let valid = sign("rsa-1", &issuer.claims());
        let (head, rest) = valid.split_once('.').unwrap();
        let signature = rest.split_once('.').unwrap().1;
        let public_key: Value = serde_json::from_str(JWKS).unwrap();
        let cases: Vec<(&str, String, &str)> = vec![
            ("expired", sign("rsa-1", &with(json!({"exp": now - 600}))), "has expired"),
            ("not yet valid", sign("rsa-1", &with(json!({"nbf": now + 600}))), "not valid yet"),
            (
                "another issuer",
                sign("rsa-1", &with(json!({"iss": "https://elsewhere.example"}))),
                "not issued by",
            ),
            (
                "another resource",
                sign("rsa-1", &with(json!({"aud": "https://other.example/mcp"}))),
                "issued for another resource",
            ),
            ("no audience", sign("rsa-1", &with(json!({"aud": null}))), "no `aud` claim"),
            ("no subject", sign("rsa-1", &with(json!({"sub": null}))), "no `sub` claim"),
            (
                "alg none",
                format!(
                    "{}.{}.",
                    b64(&json!({"alg": "none", "kid": "rsa-1"})),
                    b64(&issuer.claims())
                ),
                "not a signed JWT",
            ),
            (
                "HS256 with the public key as the secret",
                {
                    let mut header = Header::new(Algorithm::HS256);
                    header.kid = Some("rsa-1".into());
                    header.typ = Some("at+jwt".into());
                    let secret = public_key["keys"][0].to_string();
                    encode(&header, &issuer.claims(), &EncodingKey::from_secret(secret.as_bytes()))
                        .unwrap()
                },
                "issuer's key is for RS256",
            ),
            (
                "tampered payload",
                format!("{head}.{}.{signature}", b64(&with(json!({"sub": "root"})))),
                "signature does not verify",
            ),
            (
                "an unknown key",
                sign("rsa-2", &issuer.claims()),
                "no key of the issuer has the id `rsa-2`",
            ),
            ("not a JWT", "a.b".to_owned(), "not a signed JWT"),
            (
                "an unknown critical header",
                sign_with("rsa-1", &issuer.claims(), |header| {
                    header.crit = Some(vec!["exp-policy".into()]);
                    header.extras.insert("exp-policy".to_owned(), "strict".to_owned());
                }),
                "critical (`crit`)",
            ),
            (
                "an empty critical list",
                sign_with("rsa-1", &issuer.claims(), |header| header.crit = Some(vec![])),
                "critical (`crit`)",
            ),
            (
                "a plain JWT (an ID token, say)",
                sign_with("rsa-1", &issuer.claims(), |header| header.typ = Some("JWT".into())),
                "type (`typ`) is `jwt`, not one of at+jwt",
            ),
            (
                "no type",
                sign_with("rsa-1", &issuer.claims(), |header| header.typ = None),
                "type (`typ`) is missing",
            ),
            (
                "issued an hour from now",
                sign("rsa-1", &with(json!({"iat": now + 3600}))),
                "issued in the future",
            ),
            ("an iat that is no number", sign("rsa-1", &with(json!({"iat": "now"}))), "`iat`"),
        ];
        for (case, token, reason) in cases {
            match verifier.verify(&token).await {
                Err(Refusal::Invalid(message)) => {
                    assert!(message.contains(reason), "{case}: {message}");
                }
                other => panic!("{case}: {other:?}"),
            }
        }
        let no_scope = sign("rsa-1", &with(json!({"scope": "openid"})));
        assert_eq!(
            verifier.verify(&no_scope).await,
            Err(Refusal::InsufficientScope(vec!["orca.read".into()]))
        );
        let as_list = sign("rsa-1", &with(json!({"scope": null, "scp": ["orca.read"]})));
        assert!(verifier.verify(&as_list).await.is_ok(), "scopes may come as `scp`");
        let prefixed = sign_with("rsa-1", &issuer.claims(), |header| {
            header.typ = Some("application/AT+JWT".into());
        });
        assert!(verifier.verify(&prefixed).await.is_ok(), "the media type in full");
        let within_leeway = sign("rsa-1", &with(json!({"iat": now + 2})));
        assert!(verifier.verify(&within_leeway).await.is_ok(), "a clock a little ahead");
        issuer.server.abort();
    }

    #[tokio::test]
    async fn the_accepted_token_types_are_a_setting() {
        let issuer = Issuer::start(&["rsa-1"]).await;
        let mut config = issuer.verifier().config.clone();
        config.accepted_token_types = vec!["at+jwt".into(), "jwt".into(), "none".into()];
        let verifier = Verifier::new(config);
        for typ in [Some("at+jwt"), Some("JWT"), None] {
            let token = sign_with("rsa-1", &issuer.claims(), |header| {
                header.typ = typ.map(str::to_owned);
            });
            assert!(verifier.verify(&token).await.is_ok(), "{typ:?}");
        }
        let id_token = sign_with("rsa-1", &issuer.claims(), |header| {
            header.typ = Some("id_token+jwt".into());
        });
        assert!(matches!(verifier.verify(&id_token).await, Err(Refusal::Invalid(_))));
        issuer.server.abort();
    }

    #[tokio::test]
    async fn a_rotated_key_is_fetched_and_a_cached_key_outlives_the_issuer() {
        let mut issuer = Issuer::start(&["rsa-1"]).await;
        let verifier = issuer.verifier();
        assert!(verifier.verify(&sign("rsa-1", &issuer.claims())).await.is_ok());
        issuer.publish("rsa-2");
        assert!(verifier.verify(&sign("rsa-2", &issuer.claims())).await.is_ok(), "rotation");

        issuer.server.abort();
        let _ = (&mut issuer.server).await;
        assert!(
            verifier.verify(&sign("rsa-1", &issuer.claims())).await.is_ok(),
            "a cached key still checks tokens while the issuer is away"
        );
        match verifier.verify(&sign("ec-1", &issuer.claims())).await {
            Err(Refusal::Unavailable(message)) => {
                assert!(message.contains("cannot connect"), "{message}")
            }
            other => panic!("an unknown key with the issuer away: {other:?}"),
        }
        let fresh = issuer.verifier();
        assert!(matches!(
            fresh.verify(&sign("rsa-1", &issuer.claims())).await,
            Err(Refusal::Unavailable(_))
        ));
    }

    #[tokio::test]
    async fn a_verified_token_is_remembered_until_it_expires_or_the_keys_change() {
        let issuer = Issuer::start(&["rsa-1"]).await;
        let mut config = issuer.verifier().config.clone();
        config.leeway = Duration::ZERO;
        let verifier = Verifier::new(config);
        let cached = |verifier: &Verifier| verifier.verified.lock().unwrap().len();
        let now = jsonwebtoken::get_current_timestamp();
        let mut claims = issuer.claims();
        claims["exp"] = json!(now + 1);
        let short = sign("rsa-1", &claims);
        assert!(verifier.verify(&short).await.is_ok());
        assert_eq!(cached(&verifier), 1);
        assert!(verifier.verify(&short).await.is_ok(), "served from what was verified");
        assert_eq!(cached(&verifier), 1);
        tokio::time::sleep(Duration::from_millis(2100)).await;
        match verifier.verify(&short).await {
            Err(Refusal::Invalid(message)) => assert!(message.contains("has expired"), "{message}"),
            other => panic!("a remembered token past its exp: {other:?}"),
        }
        assert!(verifier.verify(&sign("rsa-1", &issuer.claims())).await.is_ok());
        assert_eq!(cached(&verifier), 2);
        issuer.publish("rsa-2");
        assert!(verifier.verify(&sign("rsa-2", &issuer.claims())).await.is_ok());
        assert_eq!(cached(&verifier), 1, "fetching the keys again forgets what they verified");
        issuer.server.abort();
    }

    #[test]
    fn challenges_name_the_metadata_the_error_and_the_scope() {
        let verifier = Verifier::new(OAuthConfig {
            issuer: "https://login.example.com".into(),
            resource: RESOURCE.into(),
            scopes_supported: vec!["orca.read".into()],
            required_scopes: vec!["orca.read".into()],
            user_claim: "sub".into(),
            client_claim: "client_id".into(),
            roles_claim: None,
            leeway: Duration::from_secs(60),
            jwks_min_refresh: Duration::from_secs(30),
            console_client_id: None,
            accepted_token_types: vec!["at+jwt".into()],
        });
        let metadata = "resource_metadata=\"https://orca.example.com/.well-known/oauth-protected-resource/mcp\"";
        assert_eq!(verifier.challenge(None), format!("Bearer {metadata}, scope=\"orca.read\""));
        assert_eq!(
            verifier.challenge(Some(&Refusal::Invalid("the token has \"expired\"".into()))),
            format!(
                "Bearer error=\"invalid_token\", error_description=\"the token has 'expired'\", {metadata}, scope=\"orca.read\""
            )
        );
        assert_eq!(
            verifier.challenge(Some(&Refusal::InsufficientScope(vec!["orca.read".into()]))),
            format!("Bearer error=\"insufficient_scope\", {metadata}, scope=\"orca.read\"")
        );
        assert!(Verifier::looks_like_jwt("eyJhbGciOi.eyJzdWIiOi.c2ln"));
        assert!(!Verifier::looks_like_jwt("orca_k_0123456789abcdef"));
    }
}
