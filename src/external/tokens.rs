//! `TokenVault`: the OAuth sign-ins to external servers, in `orca.upstream_tokens`, sealed with
//! AES-256-GCM (ring) under a key derived from `ORCA_SECRET` with HKDF-SHA256, so that every
//! replica sharing the database and the secret uses the same sign-in and the table alone reveals
//! no token. Each row's upstream and subject are the additional data of its seal, so a sealed
//! sign-in moved to another row does not open.

use std::sync::Arc;

use futures::future::BoxFuture;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};
use sqlx::PgPool;

use crate::client::auth::{AuthError, SignIn, TokenStore};

/// The sealing key and the database; cheap to clone.
#[derive(Clone)]
pub(crate) struct TokenVault {
    pool: PgPool,
    key: Arc<LessSafeKey>,
}

impl std::fmt::Debug for TokenVault {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("TokenVault(..)")
    }
}

/// The AES-256-GCM key of the vault: HKDF-SHA256 of the orca secret.
fn derive_key(secret: &str) -> LessSafeKey {
    let salt = Salt::new(HKDF_SHA256, b"orca-upstream-tokens");
    let pseudo_random = salt.extract(secret.as_bytes());
    let material = pseudo_random
        .expand(&[b"aes-256-gcm v1"], &AES_256_GCM)
        .expect("32 bytes are within HKDF-SHA256's output length");
    LessSafeKey::new(UnboundKey::from(material))
}

fn additional_data(upstream: &str, subject: &str) -> Vec<u8> {
    let mut data = b"orca-upstream-token-v1\0".to_vec();
    data.extend_from_slice(upstream.as_bytes());
    data.push(0);
    data.extend_from_slice(subject.as_bytes());
    data
}

fn store_error(error: impl std::fmt::Display) -> AuthError {
    AuthError::Store(error.to_string())
}

impl TokenVault {
    /// A vault in `pool` keyed by `secret` (the text of `ORCA_SECRET`, or of the secret file
    /// generated in `ORCA_HOME`).
    pub(crate) fn new(pool: PgPool, secret: &str) -> TokenVault {
        TokenVault { pool, key: Arc::new(derive_key(secret)) }
    }

    /// The store of one upstream's sign-in; `subject` is `""` for a shared one.
    pub(crate) fn store(&self, upstream: &str, subject: &str) -> VaultStore {
        VaultStore {
            vault: self.clone(),
            upstream: upstream.to_owned(),
            subject: subject.to_owned(),
        }
    }

    /// The database, for the other tables of sealed values (`sign_in.rs`'s pending sign-ins).
    pub(super) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// `plain` sealed for the row of `upstream` and `subject`: the nonce and the ciphertext.
    pub(super) fn seal(
        &self,
        upstream: &str,
        subject: &str,
        plain: &[u8],
    ) -> Result<([u8; NONCE_LEN], Vec<u8>), AuthError> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let mut data = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(additional_data(upstream, subject).as_slice()),
                &mut data,
            )
            .map_err(|_| AuthError::Store("cannot seal the sign-in".to_owned()))?;
        Ok((nonce, data))
    }

    /// What [`seal`](Self::seal) sealed for the same `upstream` and `subject`.
    pub(super) fn open(
        &self,
        upstream: &str,
        subject: &str,
        nonce: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, AuthError> {
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(store_error)?;
        let mut data = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(additional_data(upstream, subject).as_slice()), &mut data)
            .map_err(|_| {
                AuthError::Store(format!(
                    "the stored sign-in to {upstream} does not open with this ORCA_SECRET; sign in again"
                ))
            })?;
        Ok(plain.to_vec())
    }

    /// Whether a sign-in is stored for `upstream` and `subject` (unopened).
    ///
    /// # Errors
    ///
    /// The database.
    pub(crate) async fn has_sign_in(
        &self,
        upstream: &str,
        subject: &str,
    ) -> Result<bool, AuthError> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM orca.upstream_tokens WHERE upstream = $1 AND subject = $2)",
        )
        .bind(upstream)
        .bind(subject)
        .fetch_one(&self.pool)
        .await
        .map_err(store_error)
    }

    /// The user who signed in to `upstream` last, among the users' own sign-ins (not the shared
    /// one).
    ///
    /// # Errors
    ///
    /// The database.
    pub(crate) async fn latest_subject(&self, upstream: &str) -> Result<Option<String>, AuthError> {
        sqlx::query_scalar(
            "SELECT subject FROM orca.upstream_tokens WHERE upstream = $1 AND subject <> '' \
             ORDER BY updated_at DESC, subject LIMIT 1",
        )
        .bind(upstream)
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)
    }

    /// Forget one sign-in; whether there was one.
    ///
    /// # Errors
    ///
    /// The database.
    pub(crate) async fn forget(&self, upstream: &str, subject: &str) -> Result<bool, AuthError> {
        let result =
            sqlx::query("DELETE FROM orca.upstream_tokens WHERE upstream = $1 AND subject = $2")
                .bind(upstream)
                .bind(subject)
                .execute(&self.pool)
                .await
                .map_err(store_error)?;
        Ok(result.rows_affected() > 0)
    }
}

/// One upstream's (and one subject's) sign-in in the vault.
#[derive(Debug, Clone)]
pub(crate) struct VaultStore {
    vault: TokenVault,
    upstream: String,
    subject: String,
}

impl TokenStore for VaultStore {
    fn load(&self) -> BoxFuture<'_, Result<Option<SignIn>, AuthError>> {
        Box::pin(async move {
            let row: Option<(Vec<u8>, Vec<u8>)> = sqlx::query_as(
                "SELECT nonce, sealed FROM orca.upstream_tokens WHERE upstream = $1 AND subject = $2",
            )
            .bind(&self.upstream)
            .bind(&self.subject)
            .fetch_optional(&self.vault.pool)
            .await
            .map_err(store_error)?;
            let Some((nonce, sealed)) = row else { return Ok(None) };
            let plain = self.vault.open(&self.upstream, &self.subject, &nonce, &sealed)?;
            serde_json::from_slice(&plain)
                .map(Some)
                .map_err(|_| AuthError::Store("the stored sign-in is not readable".to_owned()))
        })
    }

    fn save<'a>(&'a self, sign_in: &'a SignIn) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            let plain = serde_json::to_vec(sign_in).map_err(store_error)?;
            let (nonce, sealed) = self.vault.seal(&self.upstream, &self.subject, &plain)?;
            sqlx::query(
                "INSERT INTO orca.upstream_tokens (upstream, subject, nonce, sealed) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (upstream, subject) DO UPDATE SET nonce = EXCLUDED.nonce, sealed = EXCLUDED.sealed, updated_at = now()",
            )
            .bind(&self.upstream)
            .bind(&self.subject)
            .bind(nonce.as_slice())
            .bind(sealed)
            .execute(&self.vault.pool)
            .await
            .map_err(store_error)?;
            Ok(())
        })
    }

    /// One `UPDATE`: a refresh that ends after the row was deleted (a sign-out, on any
    /// replica) does not insert it again.
    fn replace<'a>(&'a self, sign_in: &'a SignIn) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(async move {
            let plain = serde_json::to_vec(sign_in).map_err(store_error)?;
            let (nonce, sealed) = self.vault.seal(&self.upstream, &self.subject, &plain)?;
            let updated = sqlx::query(
                "UPDATE orca.upstream_tokens SET nonce = $3, sealed = $4, updated_at = now() \
                 WHERE upstream = $1 AND subject = $2",
            )
            .bind(&self.upstream)
            .bind(&self.subject)
            .bind(nonce.as_slice())
            .bind(sealed)
            .execute(&self.vault.pool)
            .await
            .map_err(store_error)?;
            Ok(updated.rows_affected() > 0)
        })
    }

    fn clear(&self) -> BoxFuture<'_, Result<(), AuthError>> {
        Box::pin(async move { self.vault.forget(&self.upstream, &self.subject).await.map(|_| ()) })
    }
}

#[cfg(test)]
mod tests {
    use super::{additional_data, derive_key};
    use ring::aead::{Aad, Nonce};

    #[test]
    fn a_seal_opens_only_with_its_secret_and_its_row() {
        let key = derive_key("a secret of at least thirty-two characters");
        let other = derive_key("another secret of at least thirty-two characters");
        let nonce = [7_u8; 12];
        let mut data = br#"{"access_token":"t"}"#.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(additional_data("github", "").as_slice()),
            &mut data,
        )
        .unwrap();
        assert!(!String::from_utf8_lossy(&data).contains("access_token"));
        let open = |key: &ring::aead::LessSafeKey, upstream: &str, subject: &str| {
            let mut copy = data.clone();
            key.open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(additional_data(upstream, subject).as_slice()),
                &mut copy,
            )
            .map(|plain| plain.to_vec())
            .ok()
        };
        assert_eq!(open(&key, "github", "").as_deref(), Some(&br#"{"access_token":"t"}"#[..]));
        assert_eq!(open(&other, "github", ""), None);
        assert_eq!(open(&key, "gitlab", ""), None);
        assert_eq!(open(&key, "github", "alice"), None);
    }
}
