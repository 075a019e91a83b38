//! One cryptography backend for the whole process: ring, the default of rustls and jsonwebtoken.
//!
//! rustls serves every HTTPS client (model providers, Metabase, Weaviate, external servers, the
//! OAuth issuer, the client SDK) and the TLS of the database connections; jsonwebtoken checks
//! bearer tokens.
//!
//! ring builds from a few C and assembly files with `cc`, where the libraries' default backend,
//! aws-lc-rs, compiles AWS-LC with cmake; the release build was minutes longer for it
//! (BENCHMARKS.md, "Build time"). Neither rustls (through reqwest's `rustls-no-provider`) nor
//! jsonwebtoken (no crypto feature) picks a backend by itself, so [`install`] must run before
//! the first HTTPS client is built or the first token is checked; it is idempotent and cheap.
//!
//! # Design notes
//!
//! ring as the one cryptography backend: `tls::install` (idempotent) makes it the process default
//! of rustls (reqwest is built with `rustls-no-provider`, rmcp and async-openai likewise, sqlx with
//! `tls-rustls-ring-webpki`) and of jsonwebtoken, through a small backend over `ring::signature`
//! (orca verifies tokens; its tests also sign them). It runs first in `cli::main` and before each
//! HTTPS client orca builds outside `servers` and `external` (`llm::Llm::new`,
//! `gateway::oauth::Verifier::new`, `client::McpClient::http`), which the binary reaches only after
//! `cli::main`. aws-lc-rs, the libraries' default, compiled AWS-LC with cmake twice per release
//! build (for the binary and for sqlx's macros); the tests and examples, which build their own
//! reqwest clients, keep it through a dev-dependency (`reqwest` with `rustls`).

use std::sync::Once;

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind, Result};
use jsonwebtoken::jwk::ThumbprintHash;
use jsonwebtoken::signature::{self, Signer, Verifier};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature as sig;

/// Makes ring the process's backend for rustls and jsonwebtoken (once; later calls do nothing).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Either fails only when a provider is already installed, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let _ = JWT_PROVIDER.install_default();
    });
}

/// jsonwebtoken's backend on ring. orca verifies tokens; signing serves its tests (the issuer
/// they stand up). Turning a private key into a JWK is not needed and refused.
static JWT_PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: new_signer,
    verifier_factory: new_verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: |_| Err(ErrorKind::InvalidAlgorithm.into()),
        rsa_pub_components_from_public_key: |_| Err(ErrorKind::InvalidAlgorithm.into()),
        ec_pub_components_from_private_key: |_, _| Err(ErrorKind::InvalidAlgorithm.into()),
        ed_pub_components_from_private_key: |_, _| Err(ErrorKind::InvalidAlgorithm.into()),
        compute_digest,
    },
};

/// A key of another family than the algorithm's is refused, as jsonwebtoken's own backends do.
fn new_signer(algorithm: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    if key.family() != algorithm.family() {
        return Err(Error::from(ErrorKind::InvalidKeyFormat));
    }
    Ok(Box::new(RingSigner { algorithm: *algorithm, key: key.clone() }))
}

struct RingSigner {
    algorithm: Algorithm,
    key: EncodingKey,
}

impl Signer<Vec<u8>> for RingSigner {
    fn try_sign(&self, message: &[u8]) -> std::result::Result<Vec<u8>, signature::Error> {
        sign(self.algorithm, self.key.as_bytes(), message).map_err(|_| signature::Error::new())
    }
}

impl JwtSigner for RingSigner {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

/// `der` is what jsonwebtoken holds for the key: the secret (HMAC), PKCS#8 (ECDSA, Ed25519) or
/// PKCS#1 (RSA).
fn sign(
    algorithm: Algorithm,
    der: &[u8],
    message: &[u8],
) -> std::result::Result<Vec<u8>, ring::error::Unspecified> {
    let rng = ring::rand::SystemRandom::new();
    let hmac = |kind| ring::hmac::sign(&ring::hmac::Key::new(kind, der), message).as_ref().to_vec();
    let ecdsa = |kind| -> std::result::Result<Vec<u8>, ring::error::Unspecified> {
        let pair =
            sig::EcdsaKeyPair::from_pkcs8(kind, der, &rng).map_err(|_| ring::error::Unspecified)?;
        Ok(pair.sign(&rng, message)?.as_ref().to_vec())
    };
    let rsa: &'static dyn sig::RsaEncoding = match algorithm {
        Algorithm::HS256 => return Ok(hmac(ring::hmac::HMAC_SHA256)),
        Algorithm::HS384 => return Ok(hmac(ring::hmac::HMAC_SHA384)),
        Algorithm::HS512 => return Ok(hmac(ring::hmac::HMAC_SHA512)),
        Algorithm::ES256 => return ecdsa(&sig::ECDSA_P256_SHA256_FIXED_SIGNING),
        Algorithm::ES384 => return ecdsa(&sig::ECDSA_P384_SHA384_FIXED_SIGNING),
        Algorithm::EdDSA => {
            let pair = sig::Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
                .map_err(|_| ring::error::Unspecified)?;
            return Ok(pair.sign(message).as_ref().to_vec());
        }
        Algorithm::RS256 => &sig::RSA_PKCS1_SHA256,
        Algorithm::RS384 => &sig::RSA_PKCS1_SHA384,
        Algorithm::RS512 => &sig::RSA_PKCS1_SHA512,
        Algorithm::PS256 => &sig::RSA_PSS_SHA256,
        Algorithm::PS384 => &sig::RSA_PSS_SHA384,
        Algorithm::PS512 => &sig::RSA_PSS_SHA512,
        _ => return Err(ring::error::Unspecified),
    };
    let pair = sig::RsaKeyPair::from_der(der).map_err(|_| ring::error::Unspecified)?;
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(rsa, &rng, message, &mut signature)?;
    Ok(signature)
}

fn compute_digest(data: &[u8], hash: ThumbprintHash) -> Result<Vec<u8>> {
    let algorithm = match hash {
        ThumbprintHash::SHA256 => &ring::digest::SHA256,
        ThumbprintHash::SHA384 => &ring::digest::SHA384,
        ThumbprintHash::SHA512 => &ring::digest::SHA512,
        _ => return Err(ErrorKind::InvalidAlgorithm.into()),
    };
    Ok(ring::digest::digest(algorithm, data).as_ref().to_vec())
}

/// A key of another family than the algorithm's is refused here, as jsonwebtoken's own
/// backends do, before any signature is looked at.
fn new_verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    if key.family() != algorithm.family() {
        return Err(Error::from(ErrorKind::InvalidKeyFormat));
    }
    Ok(Box::new(RingVerifier { algorithm: *algorithm, key: key.clone() }))
}

struct RingVerifier {
    algorithm: Algorithm,
    key: DecodingKey,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(
        &self,
        message: &[u8],
        signature: &Vec<u8>,
    ) -> std::result::Result<(), signature::Error> {
        verify(self.algorithm, &self.key, message, signature).map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

fn verify(
    algorithm: Algorithm,
    key: &DecodingKey,
    message: &[u8],
    signature: &[u8],
) -> std::result::Result<(), ring::error::Unspecified> {
    let raw = || key.try_get_as_bytes().map_err(|_| ring::error::Unspecified);
    let hmac = |kind| ring::hmac::verify(&ring::hmac::Key::new(kind, raw()?), message, signature);
    let point = |kind| sig::UnparsedPublicKey::new(kind, raw()?).verify(message, signature);
    let rsa: &'static sig::RsaParameters = match algorithm {
        Algorithm::HS256 => return hmac(ring::hmac::HMAC_SHA256),
        Algorithm::HS384 => return hmac(ring::hmac::HMAC_SHA384),
        Algorithm::HS512 => return hmac(ring::hmac::HMAC_SHA512),
        Algorithm::ES256 => return point(&sig::ECDSA_P256_SHA256_FIXED),
        Algorithm::ES384 => return point(&sig::ECDSA_P384_SHA384_FIXED),
        Algorithm::EdDSA => return point(&sig::ED25519),
        Algorithm::RS256 => &sig::RSA_PKCS1_2048_8192_SHA256,
        Algorithm::RS384 => &sig::RSA_PKCS1_2048_8192_SHA384,
        Algorithm::RS512 => &sig::RSA_PKCS1_2048_8192_SHA512,
        Algorithm::PS256 => &sig::RSA_PSS_2048_8192_SHA256,
        Algorithm::PS384 => &sig::RSA_PSS_2048_8192_SHA384,
        Algorithm::PS512 => &sig::RSA_PSS_2048_8192_SHA512,
        _ => return Err(ring::error::Unspecified),
    };
    match key.kind() {
        DecodingKeyKind::SecretOrDer(der) => {
            sig::UnparsedPublicKey::new(rsa, der).verify(message, signature)
        }
        DecodingKeyKind::RsaModulusExponent { n, e } => {
            sig::RsaPublicKeyComponents { n, e }.verify(rsa, message, signature)
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::Validation;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair};
    use serde_json::{Value, json};

    use super::*;

    /// A token for `sub: alice` signed by ring with a fresh key of `algorithm`, and its public
    /// key as jsonwebtoken reads it from a JWK's components.
    fn signed(algorithm: Algorithm) -> (String, DecodingKey) {
        let rng = SystemRandom::new();
        let header = json!({"alg": algorithm, "typ": "JWT"});
        let claims = json!({"sub": "alice", "exp": jsonwebtoken::get_current_timestamp() + 600});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let (signature, key) = match algorithm {
            Algorithm::EdDSA => {
                let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
                let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
                let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
                (pair.sign(input.as_bytes()).as_ref().to_vec(), DecodingKey::from_ed_components(&x))
            }
            _ => {
                let (signing, size) = match algorithm {
                    Algorithm::ES256 => (&sig::ECDSA_P256_SHA256_FIXED_SIGNING, 32),
                    _ => (&sig::ECDSA_P384_SHA384_FIXED_SIGNING, 48),
                };
                let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).unwrap();
                let pair = EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref(), &rng).unwrap();
                let point = &pair.public_key().as_ref()[1..];
                let (x, y) = point.split_at(size);
                let key = DecodingKey::from_ec_components(
                    &URL_SAFE_NO_PAD.encode(x),
                    &URL_SAFE_NO_PAD.encode(y),
                );
                (pair.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(), key)
            }
        };
        (format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)), key.unwrap())
    }

    fn subject(token: &str, key: &DecodingKey, algorithm: Algorithm) -> Result<Value> {
        jsonwebtoken::decode::<Value>(token, key, &Validation::new(algorithm))
            .map(|data| data.claims["sub"].clone())
    }

    #[test]
    fn tokens_of_each_asymmetric_family_verify_and_altered_ones_do_not() {
        install();
        for algorithm in [Algorithm::ES256, Algorithm::ES384, Algorithm::EdDSA] {
            let (token, key) = signed(algorithm);
            assert_eq!(subject(&token, &key, algorithm).unwrap(), "alice", "{algorithm:?}");
            let (other_token, _) = signed(algorithm);
            let foreign = format!(
                "{}.{}",
                token.rsplit_once('.').unwrap().0,
                other_token.rsplit_once('.').unwrap().1
            );
            let error = subject(&foreign, &key, algorithm).unwrap_err();
            assert!(matches!(error.kind(), ErrorKind::InvalidSignature), "{algorithm:?}: {error}");
        }
    }

    #[test]
    fn a_key_of_another_family_than_the_algorithm_is_refused_before_any_signature() {
        let (_, ec_key) = signed(Algorithm::ES256);
        for algorithm in [Algorithm::RS256, Algorithm::PS256, Algorithm::HS256, Algorithm::EdDSA] {
            let error = (JWT_PROVIDER.verifier_factory)(&algorithm, &ec_key).err().unwrap();
            assert!(matches!(error.kind(), ErrorKind::InvalidKeyFormat), "{algorithm:?}: {error}");
        }
    }

    #[test]
    fn thumbprints_use_ring_digests() {
        let digest = compute_digest(b"abc", ThumbprintHash::SHA256).unwrap();
        assert_eq!(
            hex::encode(digest),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
