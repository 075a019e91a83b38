//! DPoP (RFC 9449; MCP's SEP-1932): a key pair of the sign-in's own, whose proofs bind the
//! access token to this client. A proof is a JWT signed with the key (ES256, the public key in
//! its header) that names the HTTP method and URL of one request, carries a fresh `jti`, the
//! hash of the access token it accompanies (`ath`) and the nonce the server last gave, if any.
//!
//! The key is generated at sign-in, kept with the tokens (sealed, in the token store) so that a
//! refresh or another replica proves possession with the same key, and never leaves orca.

use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::json;
use url::Url;

use super::AuthError;
use super::challenge::Challenge;
use super::discovery::Discovered;
use super::pkce::random_token;

/// The one algorithm orca signs proofs with.
pub(crate) const ALGORITHM: &str = "ES256";

/// The response header in which a server hands out the nonce to use (RFC 9449 sections 8, 9).
pub(crate) const NONCE_HEADER: &str = "dpop-nonce";

/// The error a server answers when a proof lacks its current nonce.
pub(crate) const USE_NONCE: &str = "use_dpop_nonce";

/// A P-256 key pair for DPoP proofs, with the nonces the servers gave for it. `Debug` shows
/// the public key's thumbprint only.
pub struct DpopKey {
    pair: EcdsaKeyPair,
    pkcs8: Vec<u8>,
    x: String,
    y: String,
    /// The authorization server's nonce, for token requests.
    server_nonce: Mutex<Option<String>>,
    /// The MCP server's nonce, for its requests.
    resource_nonce: Mutex<Option<String>>,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("DpopKey").field("thumbprint", &self.thumbprint()).finish()
    }
}

/// Which server a nonce came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NonceFrom {
    /// The authorization server (its token endpoint).
    AuthorizationServer,
    /// The MCP server.
    Resource,
}

fn key_error(what: &str) -> AuthError {
    AuthError::Key(format!("the DPoP key {what}"))
}

impl DpopKey {
    /// A new random key.
    ///
    /// # Errors
    ///
    /// [`AuthError::Key`] when the system's random source fails.
    pub fn generate() -> Result<DpopKey, AuthError> {
        let document =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .map_err(|_| key_error("cannot be generated"))?;
        DpopKey::from_pkcs8(document.as_ref())
    }

    /// The key a sign-in kept, in the form [`DpopKey::stored`] gave.
    ///
    /// # Errors
    ///
    /// [`AuthError::Key`] when `stored` is not such a key.
    pub fn from_stored(stored: &str) -> Result<DpopKey, AuthError> {
        let pkcs8 = URL_SAFE_NO_PAD.decode(stored).map_err(|_| key_error("kept is not base64"))?;
        DpopKey::from_pkcs8(&pkcs8)
    }

    fn from_pkcs8(pkcs8: &[u8]) -> Result<DpopKey, AuthError> {
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &SystemRandom::new())
                .map_err(|_| key_error("is not a P-256 private key"))?;
        // An uncompressed point: 0x04, then x and y, 32 bytes each.
        let point = pair.public_key().as_ref();
        if point.len() != 65 || point[0] != 4 {
            return Err(key_error("has an unexpected public key"));
        }
        let x = URL_SAFE_NO_PAD.encode(&point[1..33]);
        let y = URL_SAFE_NO_PAD.encode(&point[33..]);
        Ok(DpopKey {
            pair,
            pkcs8: pkcs8.to_vec(),
            x,
            y,
            server_nonce: Mutex::new(None),
            resource_nonce: Mutex::new(None),
        })
    }

    /// The private key as the token store keeps it (base64url PKCS#8): a secret.
    pub fn stored(&self) -> String {
        URL_SAFE_NO_PAD.encode(&self.pkcs8)
    }

    /// The JWK SHA-256 thumbprint of the public key (RFC 7638), which a bound token's
    /// `cnf.jkt` names.
    pub fn thumbprint(&self) -> String {
        // The required members in lexicographic order, no whitespace.
        let canonical =
            format!(r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#, self.x, self.y);
        URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()))
    }

    fn nonce_slot(&self, from: NonceFrom) -> &Mutex<Option<String>> {
        match from {
            NonceFrom::AuthorizationServer => &self.server_nonce,
            NonceFrom::Resource => &self.resource_nonce,
        }
    }

    /// The nonce `from` last gave.
    pub(crate) fn nonce(&self, from: NonceFrom) -> Option<String> {
        self.nonce_slot(from).lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Keep the nonce `from` gave; answers whether it is new.
    pub(crate) fn set_nonce(&self, from: NonceFrom, nonce: &str) -> bool {
        let mut slot = self.nonce_slot(from).lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_deref() == Some(nonce) {
            return false;
        }
        *slot = Some(nonce.to_owned());
        true
    }

    /// A fresh proof for one `method` request to `url` (its query and fragment left out), with
    /// `access_token`'s hash when one accompanies it and the current nonce of `from`.
    ///
    /// # Errors
    ///
    /// [`AuthError::Key`] when `url` is not a URL or signing fails.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        from: NonceFrom,
    ) -> Result<String, AuthError> {
        let mut target = Url::parse(url).map_err(|_| key_error("proof names no URL"))?;
        target.set_query(None);
        target.set_fragment(None);
        let header = json!({
            "typ": "dpop+jwt",
            "alg": ALGORITHM,
            "jwk": { "kty": "EC", "crv": "P-256", "x": self.x, "y": self.y },
        });
        let mut claims = json!({
            "jti": random_token(),
            "htm": method,
            "htu": target.as_str(),
            "iat": now(),
        });
        if let Some(token) = access_token {
            let hash = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
            claims["ath"] = json!(URL_SAFE_NO_PAD.encode(hash));
        }
        if let Some(nonce) = self.nonce(from) {
            claims["nonce"] = json!(nonce);
        }
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| key_error("cannot sign"))?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())))
    }
}

/// Seconds since the epoch, for a proof's `iat`.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// Whether a sign-in asks for DPoP-bound tokens: only when the MCP server takes them (it
/// challenged with the `DPoP` scheme, or its protected-resource metadata says so), since a
/// server that knows bearer tokens only would refuse them, and only when the authorization
/// server takes ES256 proofs (or lists no algorithms, leaving it to the token's type).
pub(crate) fn wanted(challenge: &Challenge, discovered: &Discovered) -> bool {
    let resource = challenge.dpop || discovered.resource_dpop;
    let server = match &discovered.server.dpop_signing_alg_values_supported {
        None => true,
        Some(list) => list.iter().any(|algorithm| algorithm == ALGORITHM),
    };
    resource && server
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
    use serde_json::Value;

    use super::super::challenge::Challenge;
    use super::super::discovery::{Discovered, ServerMetadata};
    use super::{DpopKey, NonceFrom, wanted};

    fn decode(part: &str) -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    /// The public key of a proof's header, checked against its signature.
    fn verified(proof: &str) -> (Value, Value) {
        let parts: Vec<&str> = proof.split('.').collect();
        assert_eq!(parts.len(), 3, "{proof}");
        let header = decode(parts[0]);
        let jwk = &header["jwk"];
        let mut point = vec![4u8];
        point.extend(URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap());
        point.extend(URL_SAFE_NO_PAD.decode(jwk["y"].as_str().unwrap()).unwrap());
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .expect("the proof's signature verifies with the key in its header");
        (header, decode(parts[1]))
    }

    #[test]
    fn a_proof_is_a_signed_jwt_naming_the_request_the_token_and_the_nonce() {
        let key = DpopKey::generate().unwrap();
        let (header, claims) = verified(
            &key.proof("POST", "https://mcp.example.com/mcp?x=1#f", None, NonceFrom::Resource)
                .unwrap(),
        );
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert!(header["jwk"].get("d").is_none(), "no private part in the header");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example.com/mcp");
        assert!(claims.get("ath").is_none() && claims.get("nonce").is_none(), "{claims}");

        assert!(key.set_nonce(NonceFrom::Resource, "n-1"));
        assert!(!key.set_nonce(NonceFrom::Resource, "n-1"), "the same nonce is not news");
        let (_, with_token) = verified(
            &key.proof("GET", "https://mcp.example.com/mcp", Some("tok"), NonceFrom::Resource)
                .unwrap(),
        );
        // base64url(SHA-256("tok")).
        let expected = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, b"tok"));
        assert_eq!(with_token["ath"], expected.as_str());
        assert_eq!(with_token["nonce"], "n-1");
        assert_eq!(with_token["htm"], "GET");
        assert_ne!(claims["jti"], with_token["jti"], "every proof is fresh");
        let (_, at_server) = verified(
            &key.proof("POST", "https://as.example/token", None, NonceFrom::AuthorizationServer)
                .unwrap(),
        );
        assert!(at_server.get("nonce").is_none(), "each server's nonce is its own");
    }

    #[test]
    fn a_kept_key_is_the_same_key() {
        let key = DpopKey::generate().unwrap();
        let again = DpopKey::from_stored(&key.stored()).unwrap();
        assert_eq!(key.thumbprint(), again.thumbprint());
        assert_ne!(key.thumbprint(), DpopKey::generate().unwrap().thumbprint());
        assert!(DpopKey::from_stored("not a key").is_err());
        assert!(!format!("{key:?}").contains(&key.stored()), "Debug shows no private key");
    }

    #[test]
    fn the_thumbprint_is_the_hash_of_the_canonical_jwk() {
        // RFC 7638: the required members only, sorted by name, no whitespace.
        let key = DpopKey::generate().unwrap();
        let jwk: std::collections::BTreeMap<&str, &str> =
            [("y", key.y.as_str()), ("x", key.x.as_str()), ("kty", "EC"), ("crv", "P-256")].into();
        let canonical = serde_json::to_string(&jwk).unwrap();
        let hash = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
        assert_eq!(key.thumbprint(), URL_SAFE_NO_PAD.encode(hash));
        assert_eq!(key.thumbprint().len(), 43);
    }

    #[test]
    fn dpop_is_asked_for_only_where_both_servers_take_it() {
        let list = |items: &[&str]| Some(items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let discovered = |resource_dpop: bool, algorithms: Option<Vec<String>>| {
            let mut server: ServerMetadata = serde_json::from_value(serde_json::json!({
                "issuer": "https://as.example", "token_endpoint": "https://as.example/token",
            }))
            .unwrap();
            server.dpop_signing_alg_values_supported = algorithms;
            Discovered {
                resource: "https://mcp.example/mcp".to_owned(),
                resource_scopes: None,
                resource_dpop,
                server,
            }
        };
        let challenge = |dpop: bool| Challenge { dpop, ..Challenge::default() };
        for (dpop_challenge, resource_dpop, algorithms, expected) in [
            (true, false, list(&["ES256"]), true),
            (false, true, list(&["RS256", "ES256"]), true),
            (true, false, None, true),
            // The authorization server takes DPoP, the MCP server bearer tokens only.
            (false, false, list(&["ES256"]), false),
            (true, true, list(&["RS256"]), false),
            (true, true, list(&[]), false),
            (false, false, None, false),
        ] {
            assert_eq!(
                wanted(&challenge(dpop_challenge), &discovered(resource_dpop, algorithms.clone())),
                expected,
                "{dpop_challenge} {resource_dpop} {algorithms:?}"
            );
        }
    }
}
