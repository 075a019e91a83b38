//! Confirmation of writes. A dry run mints either a token for the caller (HMAC-SHA256 over the
//! exact statement text with its constants, the principal's identity, the database and the
//! expiry) or, with human confirmation, an approval request that a person approves out of band.
//! Either is recorded in `orca.confirmation_tokens` and redeemed at most once: the redeeming
//! `UPDATE` is the single point that two replicas race on, and the database lets only one of
//! them win.
//!
//! # Design notes
//!
//! `confirm.rs` mints, verifies and redeems confirmation tokens and approvals
//! (`orca.confirmation_tokens`, single use by a conditional `UPDATE`).

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

use super::statement::Statement;

const TOKEN_PREFIX: &str = "orca_ct";

/// The key of confirmation tokens: `ORCA_SECRET`, or 32 random bytes generated once into
/// `ORCA_HOME/secret` (mode 0600) so that tokens survive a restart.
#[derive(Clone)]
pub(crate) struct Secret(SecretString);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// The configured secret, else the one kept in `home`, else a new one written there.
    ///
    /// # Errors
    ///
    /// When the secret file cannot be read or written.
    pub(crate) fn load(configured: Option<&SecretString>, home: &Path) -> anyhow::Result<Secret> {
        if let Some(secret) = configured {
            return Ok(Secret(secret.clone()));
        }
        let path = home.join("secret");
        match std::fs::read_to_string(&path) {
            Ok(text) if text.trim().len() >= 32 => {
                return Ok(Secret(text.trim().to_owned().into()));
            }
            Ok(_) => anyhow::bail!("{} is too short to be a secret; delete it", path.display()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", path.display()));
            }
        }
        std::fs::create_dir_all(home)
            .with_context(|| format!("cannot create {}", home.display()))?;
        let secret = hex::encode(rand::random::<[u8; 32]>());
        // A name of its own, so that concurrent first starts never share a temporary file.
        let temporary =
            home.join(format!("secret.{}.{}.partial", std::process::id(), Uuid::new_v4().simple()));
        write_private(&temporary, &secret)
            .with_context(|| format!("cannot write {}", temporary.display()))?;
        // A concurrent first start may have written one already: keep whichever landed first.
        match std::fs::hard_link(&temporary, &path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => {
                return Err(error).with_context(|| format!("cannot write {}", path.display()));
            }
        }
        let _ = std::fs::remove_file(&temporary);
        let kept = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Secret(kept.trim().to_owned().into()))
    }

    /// A secret for tests.
    #[cfg(test)]
    pub(crate) fn from_text(text: &str) -> Secret {
        Secret(text.to_owned().into())
    }

    /// HMAC-SHA256 of `parts` (each length-prefixed) under this secret, for the purpose named
    /// by `domain` (so that a signature made for one purpose never verifies for another).
    pub(crate) fn mac(&self, domain: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(self.0.expose_secret().as_bytes())
            .expect("HMAC takes keys of any length");
        mac.update(domain);
        mac.update(b"\0");
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    fn sign(&self, id: Uuid, expires: i64, binding: &Binding<'_>) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(self.0.expose_secret().as_bytes())
            .expect("HMAC takes keys of any length");
        mac.update(b"orca-confirmation-v1\0");
        mac.update(id.as_bytes());
        mac.update(&expires.to_be_bytes());
        for part in [binding.owner, binding.database] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac.update(&binding.statement_sha256);
        mac.finalize().into_bytes().into()
    }
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// What a token or an approval is bound to: the statement, its owner (the principal's
/// identity, which tells an API key from a token user of the same name) and the database. The
/// principal's name is kept beside it, to be shown.
#[derive(Debug, Clone)]
pub(crate) struct Binding<'a> {
    pub(crate) statement: &'a Statement,
    pub(crate) statement_sha256: [u8; 32],
    pub(crate) owner: &'a str,
    pub(crate) principal: &'a str,
    pub(crate) database: &'a str,
}

impl<'a> Binding<'a> {
    /// `owner` is the principal's identity, `principal` its name.
    pub(crate) fn new(
        statement: &'a Statement,
        (owner, principal): (&'a str, &'a str),
        database: &'a str,
    ) -> Self {
        let statement_sha256 = Sha256::digest(statement.text.as_bytes()).into();
        Binding { statement, statement_sha256, owner, principal, database }
    }
}

/// What a dry run hands out.
#[derive(Debug, Clone)]
pub(crate) enum Minted {
    /// For the caller: send it back with the same statement to run it.
    Token { token: String, expires_at: DateTime<Utc> },
    /// For a person: approve it with `orca approve <id>` or `POST /approvals/<id>`.
    Approval { id: Uuid, expires_at: DateTime<Utc> },
}

/// A write that was confirmed for exactly this statement, principal and database. Only
/// redeeming a token or an approval builds one.
#[derive(Debug)]
pub(crate) struct ApprovedWrite {
    pub(crate) statement: Statement,
    pub(crate) confirmation_id: Uuid,
}

/// Why a confirmation does not let a write through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConfirmError {
    #[error("the confirmation token is malformed")]
    Malformed,
    #[error("the confirmation token was not issued by this orca (bad signature)")]
    BadSignature,
    #[error("the confirmation token was issued for a different statement, principal or database")]
    Mismatch,
    #[error("the confirmation token expired")]
    Expired,
    #[error("the confirmation token was already used")]
    AlreadyUsed,
    #[error("the confirmation token is unknown")]
    Unknown,
    #[error("approval {id} is still waiting for a person to approve it")]
    Pending { id: Uuid },
    #[error("no approval was requested for this statement; run it with dry_run=true first")]
    NoApproval,
    #[error("the state database is unavailable")]
    Unavailable,
}

fn unavailable(error: sqlx::Error) -> ConfirmError {
    tracing::warn!(error = %error, "confirmation store unavailable");
    ConfirmError::Unavailable
}

/// Record a confirmation for `binding` and return what the caller gets.
///
/// # Errors
///
/// `Unavailable` when the state database cannot record it.
pub(crate) async fn mint(
    state: &PgPool,
    secret: &Secret,
    binding: &Binding<'_>,
    required_verbs: &[&str],
    estimated_rows: Option<f64>,
    lifetime: Duration,
    human: bool,
) -> Result<Minted, ConfirmError> {
    let id = Uuid::new_v4();
    let lifetime = chrono::Duration::from_std(lifetime).unwrap_or(chrono::Duration::minutes(10));
    // Whole seconds, so that the token's expiry and the row's agree exactly.
    let expires_at =
        DateTime::from_timestamp((Utc::now() + lifetime).timestamp(), 0).unwrap_or_else(Utc::now);
    sqlx::query(
        "INSERT INTO orca.confirmation_tokens (id, statement_sha256, statement, statement_kind, \
             required_verbs, principal, database, estimated_rows, approval_required, expires_at, \
             owner) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(id)
    .bind(binding.statement_sha256.as_slice())
    .bind(&binding.statement.text)
    .bind(binding.statement.kind.as_str())
    .bind(required_verbs)
    .bind(binding.principal)
    .bind(binding.database)
    .bind(estimated_rows)
    .bind(human)
    .bind(expires_at)
    .bind(binding.owner)
    .execute(state)
    .await
    .map_err(unavailable)?;
    if human {
        return Ok(Minted::Approval { id, expires_at });
    }
    let token = token_text(secret, id, expires_at.timestamp(), binding);
    Ok(Minted::Token { token, expires_at })
}

/// The text of the token for confirmation `id`, expiring at `expires` (seconds since the epoch),
/// for `binding`: `orca_ct_<id>_<expires>_<signature>`.
pub(crate) fn token_text(secret: &Secret, id: Uuid, expires: i64, binding: &Binding<'_>) -> String {
    let signature = secret.sign(id, expires, binding);
    format!("{TOKEN_PREFIX}_{}_{expires}_{}", id.simple(), hex::encode(signature))
}

/// What a token says, and whether its signature is right for a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenCheck {
    pub(crate) id: Uuid,
    pub(crate) expires: i64,
    pub(crate) signed_for_binding: bool,
}

/// Read a token and check its signature against `binding`, without the database.
///
/// # Errors
///
/// `Malformed` when the text is not a token's.
pub(crate) fn check_token(
    secret: &Secret,
    token: &str,
    binding: &Binding<'_>,
) -> Result<TokenCheck, ConfirmError> {
    let parts: Vec<&str> = token.trim().split('_').collect();
    let [prefix_a, prefix_b, id, expires, signature] = parts.as_slice() else {
        return Err(ConfirmError::Malformed);
    };
    if format!("{prefix_a}_{prefix_b}") != TOKEN_PREFIX {
        return Err(ConfirmError::Malformed);
    }
    let id = Uuid::try_parse(id).map_err(|_| ConfirmError::Malformed)?;
    let expires: i64 = expires.parse().map_err(|_| ConfirmError::Malformed)?;
    let signature = hex::decode(signature).map_err(|_| ConfirmError::Malformed)?;
    let expected = secret.sign(id, expires, binding);
    Ok(TokenCheck { id, expires, signed_for_binding: constant_time_eq(&expected, &signature) })
}

/// Redeem a token for `binding`: the signature, the expiry and the binding are checked here,
/// single use by the database.
///
/// # Errors
///
/// Every [`ConfirmError`] but `Pending` and `NoApproval`.
pub(crate) async fn redeem_token(
    state: &PgPool,
    secret: &Secret,
    token: &str,
    binding: &Binding<'_>,
) -> Result<ApprovedWrite, ConfirmError> {
    let TokenCheck { id, expires, signed_for_binding } = check_token(secret, token, binding)?;
    if !signed_for_binding {
        // Either forged, or genuine but for another statement, principal or database: tell
        // which when the token is ours, without revealing anything else.
        let known: Option<(i64,)> = sqlx::query_as(
            "SELECT 1::int8 FROM orca.confirmation_tokens WHERE id = $1 AND NOT approval_required",
        )
        .bind(id)
        .fetch_optional(state)
        .await
        .map_err(unavailable)?;
        return Err(if known.is_some() {
            ConfirmError::Mismatch
        } else {
            ConfirmError::BadSignature
        });
    }
    if expires <= Utc::now().timestamp() {
        return Err(ConfirmError::Expired);
    }
    let redeemed: Option<(Uuid,)> = sqlx::query_as(
        "UPDATE orca.confirmation_tokens SET redeemed_at = now() \
          WHERE id = $1 AND redeemed_at IS NULL AND expires_at > now() AND NOT approval_required \
            AND statement_sha256 = $2 AND owner = $3 AND database = $4 \
         RETURNING id",
    )
    .bind(id)
    .bind(binding.statement_sha256.as_slice())
    .bind(binding.owner)
    .bind(binding.database)
    .fetch_optional(state)
    .await
    .map_err(unavailable)?;
    match redeemed {
        Some(_) => Ok(ApprovedWrite { statement: binding.statement.clone(), confirmation_id: id }),
        None => Err(why_not_redeemed(state, id).await?),
    }
}

async fn why_not_redeemed(state: &PgPool, id: Uuid) -> Result<ConfirmError, ConfirmError> {
    let row: Option<(Option<DateTime<Utc>>, DateTime<Utc>)> = sqlx::query_as(
        "SELECT redeemed_at, expires_at FROM orca.confirmation_tokens WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(state)
    .await
    .map_err(unavailable)?;
    Ok(match row {
        None => ConfirmError::Unknown,
        Some((Some(_), _)) => ConfirmError::AlreadyUsed,
        Some((None, expires_at)) if expires_at <= Utc::now() => ConfirmError::Expired,
        Some(_) => ConfirmError::Mismatch,
    })
}

/// Redeem the oldest approved, unused, unexpired approval for `binding`.
///
/// # Errors
///
/// `Pending` when an approval exists but nobody approved it yet, `NoApproval` when none exists.
pub(crate) async fn redeem_approval(
    state: &PgPool,
    binding: &Binding<'_>,
) -> Result<ApprovedWrite, ConfirmError> {
    let redeemed: Option<(Uuid,)> = sqlx::query_as(
        "UPDATE orca.confirmation_tokens SET redeemed_at = now() \
          WHERE id = (SELECT id FROM orca.confirmation_tokens \
                       WHERE statement_sha256 = $1 AND owner = $2 AND database = $3 \
                         AND approval_required AND approved_at IS NOT NULL \
                         AND redeemed_at IS NULL AND expires_at > now() \
                       ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) \
            AND redeemed_at IS NULL \
         RETURNING id",
    )
    .bind(binding.statement_sha256.as_slice())
    .bind(binding.owner)
    .bind(binding.database)
    .fetch_optional(state)
    .await
    .map_err(unavailable)?;
    if let Some((id,)) = redeemed {
        return Ok(ApprovedWrite { statement: binding.statement.clone(), confirmation_id: id });
    }
    let pending: Option<(Uuid,)> = sqlx::query_as(
        "SELECT id FROM orca.confirmation_tokens \
          WHERE statement_sha256 = $1 AND owner = $2 AND database = $3 \
            AND approval_required AND approved_at IS NULL AND redeemed_at IS NULL \
            AND expires_at > now() \
          ORDER BY created_at DESC LIMIT 1",
    )
    .bind(binding.statement_sha256.as_slice())
    .bind(binding.owner)
    .bind(binding.database)
    .fetch_optional(state)
    .await
    .map_err(unavailable)?;
    Err(match pending {
        Some((id,)) => ConfirmError::Pending { id },
        None => ConfirmError::NoApproval,
    })
}

/// An approval request as a person reviews it.
#[derive(Debug, Clone, sqlx::FromRow, serde::Serialize)]
pub(crate) struct ApprovalRequest {
    pub(crate) id: Uuid,
    pub(crate) statement: String,
    pub(crate) statement_kind: String,
    pub(crate) required_verbs: Vec<String>,
    /// Who asked for the write, by name (shown).
    pub(crate) principal: String,
    /// Who asked for the write, by identity (compared, never shown); `None` for a request
    /// stored before owners were recorded.
    #[serde(skip)]
    pub(crate) owner: Option<String>,
    pub(crate) database: String,
    pub(crate) estimated_rows: Option<f64>,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) approved_at: Option<DateTime<Utc>>,
    pub(crate) approved_by: Option<String>,
}

/// Why an approval could not be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ApproveError {
    #[error("no pending approval {0} (unknown, expired or already used)")]
    NotFound(Uuid),
    #[error("approving this statement needs the verb(s) {}", .0.join(", "))]
    MissingVerbs(Vec<String>),
    #[error("`{0}` asked for this write and cannot approve it; another person must")]
    OwnRequest(String),
    #[error("the state database is unavailable")]
    Unavailable,
}

/// A pending approval request, if it exists and is still usable.
///
/// # Errors
///
/// `NotFound` or `Unavailable`.
pub(crate) async fn approval_request(
    state: &PgPool,
    id: Uuid,
) -> Result<ApprovalRequest, ApproveError> {
    sqlx::query_as(
        "SELECT id, statement, statement_kind, required_verbs, principal, owner, database, \
                estimated_rows, created_at, expires_at, approved_at, approved_by \
           FROM orca.confirmation_tokens \
          WHERE id = $1 AND approval_required AND redeemed_at IS NULL AND expires_at > now()",
    )
    .bind(id)
    .fetch_optional(state)
    .await
    .map_err(|_| ApproveError::Unavailable)?
    .ok_or(ApproveError::NotFound(id))
}

/// Approve request `id` on behalf of `approver` (its identity and its name, which is recorded
/// as `approved_by`), who holds `verbs`. Whoever asked for the write never approves it: a
/// person other than the requester must.
///
/// # Errors
///
/// `NotFound`, `OwnRequest` when `approver` is the principal that asked for the write (the same
/// identity), `MissingVerbs` when the approver lacks a verb the write needs, `Unavailable`.
pub(crate) async fn approve(
    state: &PgPool,
    id: Uuid,
    (approver, approver_name): (&str, &str),
    verbs: &[&str],
) -> Result<ApprovalRequest, ApproveError> {
    let request = approval_request(state, id).await?;
    if request.owner.as_deref() == Some(approver) {
        return Err(ApproveError::OwnRequest(request.principal));
    }
    let missing: Vec<String> =
        request.required_verbs.iter().filter(|v| !verbs.contains(&v.as_str())).cloned().collect();
    if !missing.is_empty() {
        return Err(ApproveError::MissingVerbs(missing));
    }
    sqlx::query_as(
        "UPDATE orca.confirmation_tokens SET approved_at = coalesce(approved_at, now()), \
                approved_by = coalesce(approved_by, $2) \
          WHERE id = $1 AND approval_required AND redeemed_at IS NULL AND expires_at > now() \
            AND owner IS DISTINCT FROM $3 \
         RETURNING id, statement, statement_kind, required_verbs, principal, owner, database, \
                   estimated_rows, created_at, expires_at, approved_at, approved_by",
    )
    .bind(id)
    .bind(approver_name)
    .bind(approver)
    .fetch_optional(state)
    .await
    .map_err(|_| ApproveError::Unavailable)?
    .ok_or(ApproveError::NotFound(id))
}

/// Approval requests nobody has approved yet, oldest first.
///
/// # Errors
///
/// When the state database cannot be read.
pub(crate) async fn pending_approvals(state: &PgPool) -> Result<Vec<ApprovalRequest>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, statement, statement_kind, required_verbs, principal, owner, database, \
                estimated_rows, created_at, expires_at, approved_at, approved_by \
           FROM orca.confirmation_tokens \
          WHERE approval_required AND approved_at IS NULL AND redeemed_at IS NULL \
            AND expires_at > now() \
          ORDER BY created_at",
    )
    .fetch_all(state)
    .await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(sql: &str) -> Statement {
        super::super::classify(sql).unwrap().statements.remove(0)
    }

    const ANN: (&str, &str) = ("key:ann", "ann");

    #[test]
    fn the_signature_binds_constants_owner_database_and_expiry() {
        let secret = Secret::from_text("0123456789abcdef0123456789abcdef");
        let id = Uuid::new_v4();
        let one = statement("DELETE FROM t WHERE id = 1");
        let two = statement("DELETE FROM t WHERE id = 2");
        let base = secret.sign(id, 100, &Binding::new(&one, ANN, "db"));
        assert_eq!(base, secret.sign(id, 100, &Binding::new(&one, ANN, "db")));
        for other in [
            secret.sign(id, 100, &Binding::new(&two, ANN, "db")),
            secret.sign(id, 100, &Binding::new(&one, ("key:bob", "bob"), "db")),
            // A token user of the same name is another owner.
            secret.sign(
                id,
                100,
                &Binding::new(&one, ("token:https://login.example#ann", "ann"), "db"),
            ),
            secret.sign(id, 100, &Binding::new(&one, ANN, "db2")),
            secret.sign(id, 101, &Binding::new(&one, ANN, "db")),
            secret.sign(Uuid::new_v4(), 100, &Binding::new(&one, ANN, "db")),
            Secret::from_text("another secret of more than 32 bytes").sign(
                id,
                100,
                &Binding::new(&one, ANN, "db"),
            ),
        ] {
            assert_ne!(base, other);
        }
    }
}
