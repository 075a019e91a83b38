//! People signing in to OAuth upstreams through orca's HTTP face (the console's "Sign in"): the
//! authorization code flow with PKCE runs on orca's side through `client::auth::Authorizer` in
//! two halves. `start_sign_in` begins it (discovery, registration, PKCE, `state`) and keeps
//! what the second half needs in `orca.upstream_sign_ins_pending`, sealed with the vault's key
//! (bound to the upstream and the state's digest), under the SHA-256 of the request's `state`;
//! `finish_sign_in`, on whichever replica the browser comes back to at
//! `/oauth/upstream/callback`, takes that row once, checks it, and exchanges the code. A waiting
//! sign-in is single-use, expires after [`EXPIRY`], is bound to the orca user who started it
//! and to that person's browser (the SHA-256 of a random value sent as an HttpOnly cookie: a
//! way back without it takes nothing, and the sign-in still waits for its browser), and at most
//! [`MAX_PENDING`] wait at once in all, [`MAX_PENDING_PER_USER`] of them one user's. A place is
//! held before the authorization server sees anything, so a user past their share causes no
//! discovery and no registration. The new sign-in is sealed into the vault as that
//! user's (`per_user`) or as the shared one (`shared`, for an administrator). No token, code,
//! verifier or key leaves this module except sealed.
//!
//! # Design notes
//!
//! `sign_in.rs`: people's sign-ins through orca's HTTP face, on any replica: `POST
//! /console/api/upstreams/<name>/sign-in` runs `Authorizer::begin_sign_in` and keeps its
//! `PendingSignIn` in `orca.upstream_sign_ins_pending` (migration
//! `20261126400000_upstream_sign_ins_pending`: keyed by the SHA-256 of the request's `state`, with
//! the upstream, the vault subject, the SHA-256 of the browser's HttpOnly cookie and an expiry 10
//! minutes on, and the orca user who started it, `started_by`, migration
//! `20261202100000_upstream_sign_ins_pending_started_by`; sealed by the `TokenVault` under the
//! upstream and `pending:<state digest>`; at most 5 rows per user and 1,000 in all, the place taken
//! by `reserve` before the authorization server sees anything, under a PostgreSQL advisory lock on
//! the user, and given back by `release` when the sign-in cannot start); `/oauth/upstream/callback`
//! takes the row once, and only with its browser's cookie (`DELETE ... RETURNING` on the state and
//! the cookie's digest, so a way back without it takes nothing; an expired one refused and the
//! expired forgotten), checks that the upstream still signs in that way, and runs
//! `Authorizer::finish_sign_in` (the `iss` check, the code exchange); the sign-in is stored as that
//! user's (`per_user`) or the shared one (`shared`, for a caller holding every verb).

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use url::Url;

use super::ExternalServers;
use super::tokens::TokenVault;
use super::upstream::Upstream;
use crate::client::auth::{Authorizer, AuthorizerConfig, Grant, PendingSignIn};
use crate::config::{ExternalTransport, SignInMode, UpstreamOAuth};

/// How long a started sign-in waits for the browser to come back.
pub(crate) const EXPIRY: Duration = Duration::from_secs(600);
/// Sign-ins waiting at once, in all (every replica and upstream).
const MAX_PENDING: i64 = 1000;
/// Sign-ins one orca user may have waiting at once (every replica and upstream): the share
/// that keeps one caller from filling [`MAX_PENDING`] for everyone, and from making more than
/// this many registrations at an authorization server per [`EXPIRY`].
const MAX_PENDING_PER_USER: i64 = 5;
/// How long each half waits for the authorization server.
const SERVER_WAIT: Duration = Duration::from_secs(60);

/// Why a sign-in cannot start or finish; the messages name no token, code or verifier.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignInError {
    #[error("no external server `{0}`")]
    Unknown(String),
    #[error("`{0}` does not sign in with OAuth")]
    NotOAuth(String),
    #[error("`{0}` signs in as orca itself (oauth.mode: service); there is nothing to sign in to")]
    Service(String),
    #[error(
        "only a caller holding every verb (read, create, update, delete) may sign in to `{0}`, whose sign-in every caller shares (oauth.mode: shared)"
    )]
    NotAdministrator(String),
    #[error("too many sign-ins are waiting; try again in a few minutes")]
    Busy,
    #[error(
        "you have {MAX_PENDING_PER_USER} sign-ins waiting already; finish one in its browser, or try again in a few minutes"
    )]
    TooManyOfYours,
    #[error("this sign-in is unknown, already used or expired; start again from the console")]
    Expired,
    #[error("this sign-in was started in another browser; start again from the console")]
    OtherBrowser,
    #[error("the sign-in failed: {0}")]
    Failed(String),
}

/// A started sign-in: where to send the person, and the value their browser keeps (as a
/// cookie) to finish it.
pub(crate) struct Started {
    pub(crate) authorization_url: String,
    pub(crate) browser_binding: String,
}

/// Each OAuth upstream as the console shows it to one caller.
#[derive(Debug, serde::Serialize)]
pub(crate) struct UpstreamSignIn {
    pub(crate) name: String,
    pub(crate) display_name: String,
    pub(crate) mode: &'static str,
    pub(crate) status: String,
    /// Whether the caller's own sign-in (`per_user`), the shared one (`shared`) or orca's
    /// (`service`) is stored.
    pub(crate) signed_in: bool,
    /// Whether this caller may sign in or out here.
    pub(crate) may_sign_in: bool,
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// The vault subject a waiting sign-in is sealed under: never a user's, so that a sealed
/// waiting sign-in cannot open as anyone's tokens, nor under another `state`.
fn pending_subject(state_digest: &[u8]) -> String {
    format!("pending:{}", hex::encode(state_digest))
}

fn failed(error: impl std::fmt::Display) -> SignInError {
    SignInError::Failed(error.to_string())
}

/// A waiting sign-in as its row keeps it.
#[derive(sqlx::FromRow)]
struct PendingRow {
    upstream: String,
    subject: String,
    nonce: Vec<u8>,
    sealed: Vec<u8>,
    fresh: bool,
}

/// A place held among the waiting sign-ins: the random key of a row that [`keep_pending`]
/// fills or [`release`] drops.
type Place = [u8; 32];

/// Hold a place among the waiting sign-ins for `user`, before the authorization server sees
/// anything (discovery, a registration): refused when `user` already holds
/// [`MAX_PENDING_PER_USER`] or [`MAX_PENDING`] wait in all. One user's places are taken one at a
/// time (an advisory lock on the user, for every replica), so that concurrent starts cannot
/// overrun the share.
async fn reserve(
    vault: &TokenVault,
    upstream: &str,
    subject: &str,
    user: &str,
) -> Result<Place, SignInError> {
    clean_expired(vault).await?;
    let place: Place = rand::random();
    let mut transaction = vault.pool().begin().await.map_err(failed)?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("orca.upstream_sign_ins_pending:{user}"))
        .execute(&mut *transaction)
        .await
        .map_err(failed)?;
    let own: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM orca.upstream_sign_ins_pending          WHERE started_by = $1 AND expires_at > now()",
    )
    .bind(user)
    .fetch_one(&mut *transaction)
    .await
    .map_err(failed)?;
    if own >= MAX_PENDING_PER_USER {
        return Err(SignInError::TooManyOfYours);
    }
    let inserted = sqlx::query(
        "INSERT INTO orca.upstream_sign_ins_pending \
         (state_sha256, upstream, subject, binding_sha256, nonce, sealed, expires_at, started_by) \
         SELECT $1, $2, $3, '', '', '', now() + make_interval(secs => $4), $5 \
         WHERE (SELECT count(*) FROM orca.upstream_sign_ins_pending) < $6",
    )
    .bind(place.as_slice())
    .bind(upstream)
    .bind(subject)
    .bind(EXPIRY.as_secs_f64())
    .bind(user)
    .bind(MAX_PENDING)
    .execute(&mut *transaction)
    .await
    .map_err(failed)?;
    if inserted.rows_affected() == 0 {
        return Err(SignInError::Busy);
    }
    transaction.commit().await.map_err(failed)?;
    Ok(place)
}

/// Give back a place the sign-in did not use (it could not start).
async fn release(vault: &TokenVault, place: &Place) {
    let released =
        sqlx::query("DELETE FROM orca.upstream_sign_ins_pending WHERE state_sha256 = $1")
            .bind(place.as_slice())
            .execute(vault.pool())
            .await;
    if let Err(error) = released {
        tracing::warn!(%error, "a sign-in's place could not be given back; it expires by itself");
    }
}

/// Keep `pending` (sealed) in the place held for it, for the browser's way back.
async fn keep_pending(
    vault: &TokenVault,
    upstream: &str,
    place: &Place,
    binding: &str,
    pending: &PendingSignIn,
) -> Result<(), SignInError> {
    let state_digest = digest(pending.state());
    let plain = serde_json::to_vec(pending).map_err(failed)?;
    let (nonce, sealed) =
        vault.seal(upstream, &pending_subject(&state_digest), &plain).map_err(failed)?;
    let kept = sqlx::query(
        "UPDATE orca.upstream_sign_ins_pending \
         SET state_sha256 = $2, binding_sha256 = $3, nonce = $4, sealed = $5, \
             expires_at = now() + make_interval(secs => $6) \
         WHERE state_sha256 = $1",
    )
    .bind(place.as_slice())
    .bind(state_digest.as_slice())
    .bind(digest(binding).as_slice())
    .bind(nonce.as_slice())
    .bind(sealed)
    .bind(EXPIRY.as_secs_f64())
    .execute(vault.pool())
    .await
    .map_err(failed)?;
    if kept.rows_affected() == 0 {
        return Err(SignInError::Expired);
    }
    Ok(())
}

/// Forget the waiting sign-ins whose browser did not come back in time.
async fn clean_expired(vault: &TokenVault) -> Result<(), SignInError> {
    sqlx::query("DELETE FROM orca.upstream_sign_ins_pending WHERE expires_at <= now()")
        .execute(vault.pool())
        .await
        .map_err(failed)?;
    Ok(())
}

/// Take the sign-in waiting under `state` for the browser holding `binding`, if it has not
/// expired. A way back without that browser's binding takes nothing: the sign-in still waits
/// for its own browser.
async fn take_pending(
    vault: &TokenVault,
    state: &str,
    binding: Option<&str>,
) -> Result<PendingRow, SignInError> {
    let state_digest = digest(state);
    let row: Option<PendingRow> = match binding {
        Some(binding) => sqlx::query_as(
            "DELETE FROM orca.upstream_sign_ins_pending \
             WHERE state_sha256 = $1 AND binding_sha256 = $2 \
             RETURNING upstream, subject, nonce, sealed, expires_at > now() AS fresh",
        )
        .bind(state_digest.as_slice())
        .bind(digest(binding).as_slice())
        .fetch_optional(vault.pool())
        .await
        .map_err(failed)?,
        None => None,
    };
    match row {
        Some(row) if row.fresh => return Ok(row),
        Some(_) => {
            clean_expired(vault).await?;
            return Err(SignInError::Expired);
        }
        None => {}
    }
    let waiting: Option<bool> = sqlx::query_scalar(
        "SELECT expires_at > now() FROM orca.upstream_sign_ins_pending WHERE state_sha256 = $1",
    )
    .bind(state_digest.as_slice())
    .fetch_optional(vault.pool())
    .await
    .map_err(failed)?;
    match waiting {
        Some(true) => Err(SignInError::OtherBrowser),
        _ => Err(SignInError::Expired),
    }
}

/// An authorizer for `upstream`'s sign-in as `subject`, its store the vault.
fn console_authorizer(
    vault: &TokenVault,
    upstream: &Upstream,
    url: &str,
    oauth: &UpstreamOAuth,
    subject: &str,
) -> Result<Authorizer, SignInError> {
    let mut settings = AuthorizerConfig::new(url, Grant::StoredOnly);
    settings.store = Arc::new(vault.store(&upstream.config.key, subject));
    settings.identity = super::identity_of(oauth);
    settings.confinement = Some(super::confinement_of(oauth));
    Authorizer::new(settings).map_err(failed)
}

/// `upstream`'s URL and OAuth settings, and the vault.
fn oauth_parts(upstream: &Upstream) -> Result<(&str, &UpstreamOAuth, &TokenVault), SignInError> {
    let name = &upstream.config.key;
    let ExternalTransport::Http { url, oauth: Some(oauth), .. } = &upstream.config.transport else {
        return Err(SignInError::NotOAuth(name.clone()));
    };
    let vault = upstream.vault.as_ref().ok_or_else(|| {
        SignInError::Failed("signing in needs orca's database, and there is none".to_owned())
    })?;
    Ok((url, oauth, vault))
}

impl ExternalServers {
    /// The prefix of `name`'s tools while none of them is known (nobody has signed in to it
    /// yet), so that a caller's reach can be judged by its tool policy alone.
    pub(crate) fn unlisted_prefix(&self, name: &str) -> Option<&str> {
        let upstream = self.upstreams.iter().find(|upstream| upstream.config.key == name)?;
        upstream.catalog().tools.is_empty().then_some(upstream.config.prefix.as_str())
    }

    fn oauth_upstream(&self, name: &str) -> Result<(&Arc<Upstream>, SignInMode), SignInError> {
        let upstream = self
            .upstreams
            .iter()
            .find(|upstream| upstream.config.key == name)
            .ok_or_else(|| SignInError::Unknown(name.to_owned()))?;
        let mode = upstream.sign_in_mode().ok_or_else(|| SignInError::NotOAuth(name.to_owned()))?;
        Ok((upstream, mode))
    }

    /// The vault row a caller signs in or out under: their own (`per_user`), or the shared one
    /// for a caller who may administer (`shared`).
    fn sign_in_subject(
        name: &str,
        mode: SignInMode,
        user: &str,
        administrator: bool,
    ) -> Result<String, SignInError> {
        match mode {
            SignInMode::Service => Err(SignInError::Service(name.to_owned())),
            SignInMode::Shared if !administrator => {
                Err(SignInError::NotAdministrator(name.to_owned()))
            }
            SignInMode::Shared => Ok(String::new()),
            SignInMode::PerUser => Ok(user.to_owned()),
        }
    }

    /// Every OAuth upstream, its mode and status, and whether `user` (or, for a shared or
    /// service upstream, orca) is signed in to it.
    pub(crate) async fn oauth_sign_ins(
        &self,
        user: &str,
        administrator: bool,
    ) -> Result<Vec<UpstreamSignIn>, SignInError> {
        let mut out = Vec::new();
        for upstream in &self.upstreams {
            let Some(mode) = upstream.sign_in_mode() else { continue };
            let subject = if mode == SignInMode::PerUser { user } else { "" };
            let signed_in = match &upstream.vault {
                Some(vault) => vault
                    .has_sign_in(&upstream.config.key, subject)
                    .await
                    .map_err(|error| SignInError::Failed(error.to_string()))?,
                None => false,
            };
            out.push(UpstreamSignIn {
                name: upstream.config.key.clone(),
                display_name: upstream.config.display_name.clone(),
                mode: mode.as_str(),
                status: upstream.status().describe(),
                signed_in,
                may_sign_in: match mode {
                    SignInMode::Service => false,
                    SignInMode::Shared => administrator,
                    SignInMode::PerUser => true,
                },
            });
        }
        Ok(out)
    }

    /// Start signing `user` in to `name`, the browser to come back to `redirect_uri` (on this
    /// replica or any other sharing the database and `ORCA_SECRET`).
    pub(crate) async fn start_sign_in(
        &self,
        name: &str,
        user: &str,
        administrator: bool,
        redirect_uri: String,
    ) -> Result<Started, SignInError> {
        let (upstream, mode) = self.oauth_upstream(name)?;
        let subject = Self::sign_in_subject(name, mode, user, administrator)?;
        let (url, oauth, vault) = oauth_parts(upstream)?;
        // A place is held before the authorization server sees discovery or a registration.
        let place = reserve(vault, name, &subject, user).await?;
        let authorizer = match console_authorizer(vault, upstream, url, oauth, &subject) {
            Ok(authorizer) => authorizer,
            Err(error) => {
                release(vault, &place).await;
                return Err(error);
            }
        };
        let begun = tokio::time::timeout(SERVER_WAIT, authorizer.begin_sign_in(&redirect_uri))
            .await
            .map_err(|_| {
                SignInError::Failed("the authorization server did not answer in time".to_owned())
            })
            .and_then(|begun| {
                begun.map_err(|error| {
                    tracing::warn!(server = %name, %error, "a sign-in could not start");
                    failed(error)
                })
            });
        let (authorization_url, pending) = match begun {
            Ok(begun) => begun,
            Err(error) => {
                release(vault, &place).await;
                return Err(error);
            }
        };
        let browser_binding = crate::client::auth::random_token();
        keep_pending(vault, name, &place, &browser_binding, &pending).await?;
        Ok(Started { authorization_url: authorization_url.to_string(), browser_binding })
    }

    /// The browser came back to `redirected` (the callback URL with its query) under `state`,
    /// holding `binding`: take the sign-in waiting under `state` (started on any replica),
    /// check it, and exchange the code; the upstream's key when the sign-in is stored.
    pub(crate) async fn finish_sign_in(
        &self,
        redirected: Url,
        state: &str,
        binding: Option<&str>,
    ) -> Result<String, SignInError> {
        let vault = self.vault.as_ref().ok_or(SignInError::Expired)?;
        let row = take_pending(vault, state, binding).await?;
        let name = row.upstream;
        // The upstream is still declared, and still signs in the way it did.
        let (upstream, mode) = self.oauth_upstream(&name).map_err(|_| SignInError::Expired)?;
        let still = match mode {
            SignInMode::Service => false,
            SignInMode::Shared => row.subject.is_empty(),
            SignInMode::PerUser => !row.subject.is_empty(),
        };
        if !still {
            return Err(SignInError::Expired);
        }
        let (url, oauth, vault) = oauth_parts(upstream)?;
        let plain = vault
            .open(&name, &pending_subject(&digest(state)), &row.nonce, &row.sealed)
            .map_err(|_| {
                SignInError::Failed(
                    "the waiting sign-in does not open with this replica's ORCA_SECRET".to_owned(),
                )
            })?;
        let pending: PendingSignIn = serde_json::from_slice(&plain)
            .map_err(|_| SignInError::Failed("the waiting sign-in is not readable".to_owned()))?;
        let authorizer = console_authorizer(vault, upstream, url, oauth, &row.subject)?;
        tokio::time::timeout(SERVER_WAIT, authorizer.finish_sign_in(&pending, &redirected))
            .await
            .map_err(|_| SignInError::Failed("the code exchange did not finish".to_owned()))?
            .map_err(failed)?;
        tracing::info!(server = %name, "signed in through orca's console");
        upstream.sign_in_changed(&row.subject);
        Ok(name)
    }

    /// Forget `user`'s sign-in to `name` (the shared one, for an administrator of a shared
    /// upstream); whether there was one.
    pub(crate) async fn sign_out(
        &self,
        name: &str,
        user: &str,
        administrator: bool,
    ) -> Result<bool, SignInError> {
        let (upstream, mode) = self.oauth_upstream(name)?;
        let subject = Self::sign_in_subject(name, mode, user, administrator)?;
        let Some(vault) = &upstream.vault else { return Ok(false) };
        let forgotten = vault
            .forget(name, &subject)
            .await
            .map_err(|error| SignInError::Failed(error.to_string()))?;
        upstream.sign_in_changed(&subject);
        Ok(forgotten)
    }
}

#[cfg(test)]
mod tests {
    use super::{digest, pending_subject};

    #[test]
    fn a_waiting_sign_in_is_sealed_under_its_state_and_never_under_a_user() {
        let one = pending_subject(&digest("state-one"));
        assert!(one.starts_with("pending:") && one.len() == "pending:".len() + 64, "{one}");
        assert!(!one.contains("state-one"));
        assert_ne!(one, pending_subject(&digest("state-two")));
    }
}
