//! HTTP authentication: `Authorization: Bearer <key>` checked against the SHA-256 hashes in
//! `orca.yaml`. With no keys configured, callers are anonymous, which the HTTP server allows
//! only on a loopback address. Also the caller of the `/mcp` request rmcp is handling, for the
//! hooks rmcp calls without the request (`Gateway::get_tool`).

use sha2::{Digest, Sha256};

use crate::config::{AuthConfig, Principal};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthFailure {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A key that matches none configured.
    Invalid,
}

/// The principal for an `Authorization` header value.
///
/// # Errors
///
/// When keys are configured and the header is missing or matches none of them.
pub(crate) fn authenticate(
    auth: &AuthConfig,
    header: Option<&str>,
) -> Result<Principal, AuthFailure> {
    if !auth.required() {
        return Ok(auth.anonymous.clone());
    }
    let header = header.ok_or(AuthFailure::Missing)?;
    let (scheme, key) = header.trim().split_once(' ').ok_or(AuthFailure::Missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthFailure::Missing);
    }
    let digest: [u8; 32] = Sha256::digest(key.trim().as_bytes()).into();
    // Compare against every key without stopping early, so the time taken says nothing about
    // which key (if any) came close.
    let mut found = None;
    for api_key in &auth.api_keys {
        if constant_time_eq(&api_key.sha256, &digest) {
            found = Some(&api_key.principal);
        }
    }
    found.cloned().ok_or(AuthFailure::Invalid)
}

fn constant_time_eq(left: &[u8; 32], right: &[u8; 32]) -> bool {
    left.iter().zip(right).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

tokio::task_local! {
    /// The caller of the `/mcp` request being handled (set around rmcp's handling of it).
    static CALLER: Principal;
}

/// Run `handling` (rmcp's handling of one `/mcp` request) with `caller` as the caller that
/// [`caller_passes`] asks about.
pub(crate) async fn as_caller<F: Future>(caller: Option<Principal>, handling: F) -> F::Output {
    match caller {
        Some(caller) => CALLER.scope(caller, handling).await,
        None => handling.await,
    }
}

/// Whether the caller of the `/mcp` request being handled passes `check`; false outside one
/// (nobody is known to pass).
pub(crate) fn caller_passes(check: impl FnOnce(&Principal) -> bool) -> bool {
    CALLER.try_with(|caller| check(caller)).unwrap_or(false)
}

/// The SHA-256 of a key, as stored in `orca.yaml`.
pub(crate) fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::config::ApiKey;
    use crate::tool::Verb;

    fn principal(name: &str, verbs: &[Verb]) -> Principal {
        Principal::new(name, verbs.iter().copied().collect::<BTreeSet<_>>())
    }

    fn config(keys: &[(&str, &str, &[Verb])]) -> AuthConfig {
        AuthConfig {
            api_keys: keys
                .iter()
                .map(|(name, key, verbs)| {
                    let mut sha256 = [0u8; 32];
                    sha256.copy_from_slice(&hex::decode(hash_key(key)).unwrap());
                    ApiKey { sha256, principal: principal(name, verbs), role: None }
                })
                .collect(),
            stdio: principal("local", &Verb::ALL),
            anonymous: principal("anonymous", &Verb::ALL),
            oauth: None,
            roles: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn bearer_keys_map_to_their_principal() {
        let auth = config(&[("analyst", "k1", &[Verb::Read]), ("admin", "k2", &Verb::ALL)]);
        assert_eq!(authenticate(&auth, Some("Bearer k1")).unwrap().name, "analyst");
        assert_eq!(authenticate(&auth, Some("bearer k2")).unwrap().name, "admin");
        assert_eq!(authenticate(&auth, Some("Bearer nope")), Err(AuthFailure::Invalid));
        assert_eq!(authenticate(&auth, Some("Basic k1")), Err(AuthFailure::Missing));
        assert_eq!(authenticate(&auth, Some("k1")), Err(AuthFailure::Missing));
        assert_eq!(authenticate(&auth, None), Err(AuthFailure::Missing));
    }

    #[test]
    fn without_keys_everyone_is_anonymous() {
        let auth = config(&[]);
        assert_eq!(authenticate(&auth, None).unwrap().name, "anonymous");
        assert_eq!(authenticate(&auth, Some("Bearer whatever")).unwrap().name, "anonymous");
    }
}
