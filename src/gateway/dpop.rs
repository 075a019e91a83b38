//! DPoP-bound tokens at orca's door (RFC 9449 sections 4.3 and 7): a token whose `cnf.jkt`
//! binds it to a key is accepted only with the `DPoP` scheme and a proof signed by that key for
//! this very request (`htm`, `htu`), recent (`iat`), naming the token (`ath`) and never seen
//! before (`jti`, remembered for as long as a proof's `iat` is accepted). A bearer token stays
//! a bearer token; a DPoP scheme with a token bound to nothing is refused. The memory of seen
//! proofs is bounded and never forgets a proof early: full of proofs still in their window, it
//! refuses new ones (429 with `Retry-After`) until the oldest expires, so filling it with one's
//! own proofs cannot make another's used proof acceptable again.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::ThumbprintHash;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::Value;

/// The proof algorithms orca verifies (and advertises in its resource metadata).
pub(crate) const ALGORITHMS: [&str; 6] = ["ES256", "ES384", "RS256", "PS256", "EdDSA", "Ed25519"];

/// How far a proof's `iat` may be from orca's clock, either way.
pub(crate) const IAT_WINDOW_SECS: u64 = 300;

/// At most this many proofs are remembered; past it, the expired ones are dropped, and if
/// that is not enough, new proofs are refused until one expires.
const MAX_REMEMBERED: usize = 100_000;

/// How a request presents its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Bearer,
    Dpop,
}

/// A token as a request presents it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Presentation<'a> {
    pub(crate) scheme: Scheme,
    pub(crate) token: &'a str,
    /// The `DPoP` header, when there is exactly one.
    pub(crate) proof: Option<&'a str>,
    pub(crate) target: &'a Target,
}

/// The request a proof must name (the default names nothing: for a request without a proof).
#[derive(Debug, Clone, Default)]
pub(crate) struct Target {
    /// `GET`, `POST`, ...
    pub(crate) method: String,
    /// The `Host` the client addressed, when it said.
    pub(crate) host: Option<String>,
    /// The path, without the query.
    pub(crate) path: String,
}

#[derive(Deserialize)]
struct ProofClaims {
    jti: Option<String>,
    htm: Option<String>,
    htu: Option<String>,
    iat: Option<u64>,
    ath: Option<String>,
}

/// What the memory of seen proofs says of a proof's `jti`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Remembered {
    /// Not seen before; it is remembered now.
    First,
    /// Seen before, within its window: a replay.
    Seen,
    /// The memory is full of proofs still in their window: it cannot be told whether this one
    /// is new, so it is refused until the first of them expires, in `retry_after` seconds.
    Full { retry_after: u64 },
}

/// The `jti`s of the proofs accepted, each until it may be forgotten, in this process (the one
/// place that knows how they are kept is [`Replays::remember`]).
pub(crate) struct Replays {
    capacity: usize,
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    until: HashMap<String, u64>,
    /// While full, the second the first remembered proof may be forgotten: until then a new
    /// proof is refused without looking through every remembered one again.
    full_until: u64,
}

impl Default for Replays {
    fn default() -> Replays {
        Replays::with_capacity(MAX_REMEMBERED)
    }
}

impl Replays {
    /// A memory of at most `capacity` proofs.
    pub(crate) fn with_capacity(capacity: usize) -> Replays {
        Replays { capacity, seen: Mutex::default() }
    }

    /// Remember `jti` until `until` (seconds, like `now`), unless it was seen already or the
    /// memory is full of proofs not yet expired; never forgets a proof before its `until`.
    pub(crate) fn remember(&self, jti: &str, now: u64, until: u64) -> Remembered {
        let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match seen.until.get(jti) {
            Some(&expiry) if expiry >= now => return Remembered::Seen,
            Some(_) => {
                seen.until.insert(jti.to_owned(), until);
                return Remembered::First;
            }
            None => {}
        }
        if seen.until.len() >= self.capacity {
            if now < seen.full_until {
                return Remembered::Full { retry_after: seen.full_until - now };
            }
            seen.until.retain(|_, expiry| *expiry >= now);
            if seen.until.len() >= self.capacity {
                // Every one is still in its window; the first may go a second after its end.
                let first_free = seen.until.values().min().map_or(now, |expiry| expiry + 1);
                seen.full_until = first_free.max(now + 1);
                return Remembered::Full { retry_after: seen.full_until - now };
            }
        }
        seen.until.insert(jti.to_owned(), until);
        Remembered::First
    }
}

/// Whether `htu` names `target`: the same path, and the host the client addressed (any of
/// `http` and `https`, since a proxy in front may end TLS) or the origin of orca's resource.
fn names_target(htu: &str, target: &Target, resource: &str) -> bool {
    let Ok(htu) = url::Url::parse(htu) else { return false };
    if htu.query().is_some() || htu.fragment().is_some() {
        return false;
    }
    if htu.path().trim_end_matches('/') != target.path.trim_end_matches('/') {
        return false;
    }
    let authority = match (htu.host_str(), htu.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => return false,
    };
    let addressed = matches!(htu.scheme(), "http" | "https")
        && target.host.as_deref().is_some_and(|host| host.eq_ignore_ascii_case(&authority));
    let resource_origin = url::Url::parse(resource).map(|url| url.origin());
    addressed || resource_origin.is_ok_and(|origin| origin == htu.origin())
}

fn algorithm(name: Option<&str>) -> Option<Algorithm> {
    match name? {
        "ES256" => Some(Algorithm::ES256),
        "ES384" => Some(Algorithm::ES384),
        "RS256" => Some(Algorithm::RS256),
        "PS256" => Some(Algorithm::PS256),
        "EdDSA" | "Ed25519" => Some(Algorithm::EdDSA),
        _ => None,
    }
}

/// Check how a token bound to the key `jkt` names (if any) is presented: with its scheme and,
/// for DPoP, the proof of its request. `resource` is orca's own resource URL; `now` in seconds.
///
/// # Errors
///
/// `Refusal::Invalid` with why the presentation is refused, in words fit for the
/// `error_description` of a challenge; `Refusal::ProofsFull` when the memory of seen proofs
/// cannot take this one.
pub(crate) fn check(
    presented: Presentation<'_>,
    jkt: Option<&str>,
    resource: &str,
    replays: &Replays,
    now: u64,
) -> Result<(), super::oauth::Refusal> {
    check_proof(presented, jkt, resource, now)
        .map_err(super::oauth::Refusal::Invalid)?
        .map_or(Ok(()), |jti| remember(replays, &jti, now))
}

/// Remember the proof `jti` in this process's memory: refused when it was seen, or when the
/// memory is full.
///
/// # Errors
///
/// `Refusal::Invalid` for a replay, `Refusal::ProofsFull` when the memory cannot take it.
pub(crate) fn remember(
    replays: &Replays,
    jti: &str,
    now: u64,
) -> Result<(), super::oauth::Refusal> {
    match replays.remember(jti, now, now + IAT_WINDOW_SECS) {
        Remembered::First => Ok(()),
        Remembered::Seen => {
            Err(super::oauth::Refusal::Invalid("the DPoP proof was used before (jti)".to_owned()))
        }
        Remembered::Full { retry_after } => Err(super::oauth::Refusal::ProofsFull { retry_after }),
    }
}

/// Everything [`check`] looks at but the memory: `None` when no proof is needed, else the
/// proof's `jti`.
///
/// # Errors
///
/// Why the presentation is refused.
pub(crate) fn check_proof(
    presented: Presentation<'_>,
    jkt: Option<&str>,
    resource: &str,
    now: u64,
) -> Result<Option<String>, String> {
    let Presentation { scheme, token, proof, target } = presented;
    let jkt = match (scheme, jkt) {
        (Scheme::Bearer, None) => return Ok(None),
        (Scheme::Bearer, Some(_)) => {
            return Err(
                "the token is bound to a DPoP key: present it with the DPoP scheme and a proof"
                    .to_owned(),
            );
        }
        (Scheme::Dpop, None) => {
            return Err("the DPoP scheme was used for a token bound to no key".to_owned());
        }
        (Scheme::Dpop, Some(jkt)) => jkt,
    };
    let proof = proof.ok_or("a DPoP-bound token needs exactly one DPoP proof header")?;
    let header =
        jsonwebtoken::decode_header(proof).map_err(|_| "the DPoP proof is not a signed JWT")?;
    if header.typ.as_deref() != Some("dpop+jwt") {
        return Err("the DPoP proof's typ is not dpop+jwt".to_owned());
    }
    let raw_header: Value = proof
        .split('.')
        .next()
        .and_then(|part| URL_SAFE_NO_PAD.decode(part).ok())
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or(Value::Null);
    if raw_header["jwk"].get("d").is_some() {
        return Err("the DPoP proof's key carries its private part".to_owned());
    }
    let jwk = header.jwk.as_ref().ok_or("the DPoP proof names no key (jwk)")?;
    let alg_name = raw_header["alg"].as_str();
    let algorithm = algorithm(alg_name)
        .filter(|algorithm| *algorithm == header.alg)
        .ok_or("the DPoP proof's algorithm is not one orca takes")?;
    let thumbprint =
        jwk.thumbprint(ThumbprintHash::SHA256).map_err(|_| "the DPoP proof's key is not usable")?;
    if thumbprint != jkt {
        return Err("the DPoP proof is signed by another key than the token is bound to".to_owned());
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|_| "the DPoP proof's key is not usable")?;
    let mut validation = Validation::new(algorithm);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_aud = false;
    let claims = jsonwebtoken::decode::<ProofClaims>(proof, &key, &validation)
        .map_err(|_| "the DPoP proof's signature does not verify")?
        .claims;
    if claims.htm.is_none_or(|htm| htm != target.method) {
        return Err("the DPoP proof is for another HTTP method (htm)".to_owned());
    }
    if claims.htu.is_none_or(|htu| !names_target(&htu, target, resource)) {
        return Err("the DPoP proof is for another URL (htu)".to_owned());
    }
    let iat = claims.iat.ok_or("the DPoP proof has no iat")?;
    if iat.abs_diff(now) > IAT_WINDOW_SECS {
        return Err("the DPoP proof is too old or from the future (iat)".to_owned());
    }
    use sha2::Digest as _;
    let ath = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes()));
    if claims.ath.as_deref() != Some(ath.as_str()) {
        return Err("the DPoP proof does not name this token (ath)".to_owned());
    }
    let jti = claims.jti.filter(|jti| !jti.is_empty()).ok_or("the DPoP proof has no jti")?;
    Ok(Some(jti))
}

#[cfg(test)]
mod tests {
    use crate::client::auth::{Credential, DpopKey};

    use super::{MAX_REMEMBERED, Presentation, Remembered, Replays, Scheme, Target, check};
    use crate::gateway::oauth::Refusal;

    const RESOURCE: &str = "https://orca.example.com/mcp";

    fn target(method: &str, host: &str, path: &str) -> Target {
        Target { method: method.to_owned(), host: Some(host.to_owned()), path: path.to_owned() }
    }

    fn now() -> u64 {
        jsonwebtoken::get_current_timestamp()
    }

    /// The `DPoP` header orca's own client sends for `token` to `url`.
    fn proof_of(key: &std::sync::Arc<DpopKey>, token: &str, method: &str, url: &str) -> String {
        let credential = Credential { token: token.to_owned(), dpop: Some(key.clone()) };
        credential.headers(method, url).unwrap().1.unwrap()
    }

    #[test]
    fn a_bound_token_passes_only_with_a_fresh_proof_of_its_key_for_this_request() {
        crate::tls::install();
        let key = std::sync::Arc::new(DpopKey::generate().unwrap());
        let other = std::sync::Arc::new(DpopKey::generate().unwrap());
        let jkt = key.thumbprint();
        let here = target("POST", "127.0.0.1:8080", "/mcp");
        let replays = Replays::default();
        let good = proof_of(&key, "tok", "POST", "http://127.0.0.1:8080/mcp");
        let run = |scheme, jkt: Option<&str>, token, proof: Option<&str>, target: &Target| {
            let presented = Presentation { scheme, token, proof, target };
            check(presented, jkt, RESOURCE, &replays, now())
        };
        assert_eq!(run(Scheme::Dpop, Some(&jkt), "tok", Some(&good), &here), Ok(()));
        for (scheme, bound, token, proof, request, refusal) in [
            (Scheme::Dpop, true, "tok", Some(good.clone()), here.clone(), "used before"),
            (Scheme::Bearer, true, "tok", None, here.clone(), "DPoP scheme"),
            (Scheme::Dpop, false, "tok", None, here.clone(), "bound to no key"),
            (Scheme::Dpop, true, "tok", None, here.clone(), "exactly one"),
            (
                Scheme::Dpop,
                true,
                "tok",
                Some(proof_of(&other, "tok", "POST", "http://127.0.0.1:8080/mcp")),
                here.clone(),
                "another key",
            ),
            (
                Scheme::Dpop,
                true,
                "tok",
                Some(proof_of(&key, "tok", "GET", "http://127.0.0.1:8080/mcp")),
                here.clone(),
                "htm",
            ),
            (
                Scheme::Dpop,
                true,
                "tok",
                Some(proof_of(&key, "tok", "POST", "http://evil.example:8080/mcp")),
                here.clone(),
                "htu",
            ),
            (
                Scheme::Dpop,
                true,
                "tok",
                Some(proof_of(&key, "tok", "POST", "http://127.0.0.1:8080/other")),
                here.clone(),
                "htu",
            ),
            (
                Scheme::Dpop,
                true,
                "another token",
                Some(proof_of(&key, "tok", "POST", "http://127.0.0.1:8080/mcp")),
                here.clone(),
                "ath",
            ),
            (Scheme::Dpop, true, "tok", Some("not.a.jwt".to_owned()), here.clone(), "signed JWT"),
        ] {
            let jkt = bound.then_some(jkt.as_str());
            let result = run(scheme, jkt, token, proof.as_deref(), &request);
            let Err(reason) = result else { panic!("{refusal}: accepted") };
            assert!(reason.to_string().contains(refusal), "{refusal}: {reason}");
        }
        // The resource's own origin is the URL too (behind a proxy that rewrites Host).
        let behind = proof_of(&key, "tok", "POST", RESOURCE);
        assert_eq!(run(Scheme::Dpop, Some(&jkt), "tok", Some(&behind), &here), Ok(()));
        // A bearer token stays a bearer token.
        assert_eq!(run(Scheme::Bearer, None, "tok", None, &here), Ok(()));
    }

    #[test]
    fn a_proof_outside_its_time_window_is_refused() {
        crate::tls::install();
        let key = std::sync::Arc::new(DpopKey::generate().unwrap());
        let jkt = key.thumbprint();
        let here = target("POST", "localhost:1", "/mcp");
        let proof = proof_of(&key, "tok", "POST", "http://localhost:1/mcp");
        let replays = Replays::default();
        for offset in [-400_i64, 400] {
            let at = now().saturating_add_signed(offset);
            let presented = Presentation {
                scheme: Scheme::Dpop,
                token: "tok",
                proof: Some(&proof),
                target: &here,
            };
            let result = check(presented, Some(&jkt), RESOURCE, &replays, at);
            assert!(result.is_err_and(|reason| reason.to_string().contains("iat")), "{offset}");
        }
    }

    #[test]
    fn a_full_memory_refuses_new_proofs_and_never_forgets_a_used_one_early() {
        crate::tls::install();
        let key = std::sync::Arc::new(DpopKey::generate().unwrap());
        let jkt = key.thumbprint();
        let here = target("POST", "127.0.0.1:8080", "/mcp");
        let replays = Replays::default();
        let now = now();
        let run = |proof: &str, at: u64| {
            let presented = Presentation {
                scheme: Scheme::Dpop,
                token: "tok",
                proof: Some(proof),
                target: &here,
            };
            check(presented, Some(&jkt), RESOURCE, &replays, at)
        };
        let victims = proof_of(&key, "tok", "POST", "http://127.0.0.1:8080/mcp");
        assert_eq!(run(&victims, now), Ok(()));
        // Someone with a token of their own presents as many proofs as the memory holds, all
        // within their window (100,000 in 40 s).
        for attempt in 0..MAX_REMEMBERED {
            let outcome = replays.remember(&format!("flood-{attempt}"), now, now + 300);
            if outcome != Remembered::First {
                assert!(matches!(outcome, Remembered::Full { .. }), "{attempt}: {outcome:?}");
            }
        }
        // The victim's used proof is still remembered ...
        let replayed = run(&victims, now).unwrap_err().to_string();
        assert!(replayed.contains("used before"), "{replayed}");
        // ... and a new proof is refused until the first remembered one expires.
        let fresh = proof_of(&key, "tok", "POST", "http://127.0.0.1:8080/mcp");
        match run(&fresh, now) {
            Err(Refusal::ProofsFull { retry_after }) => {
                assert!((1..=301).contains(&retry_after), "{retry_after}")
            }
            other => panic!("a new proof into a full memory: {other:?}"),
        }
        assert!(matches!(replays.remember("later", now + 100, now + 400), Remembered::Full { .. }));
        // Once the window has passed, the memory takes proofs again.
        assert_eq!(replays.remember("after", now + 301, now + 601), Remembered::First);
    }

    #[test]
    fn a_memory_remembers_each_proof_until_its_end_and_then_lets_it_go() {
        let replays = Replays::with_capacity(2);
        assert_eq!(replays.remember("a", 100, 400), Remembered::First);
        assert_eq!(replays.remember("a", 400, 700), Remembered::Seen);
        assert_eq!(replays.remember("b", 150, 450), Remembered::First);
        assert_eq!(replays.remember("c", 200, 500), Remembered::Full { retry_after: 201 });
        assert_eq!(replays.remember("c", 300, 600), Remembered::Full { retry_after: 101 });
        assert_eq!(replays.remember("a", 401, 701), Remembered::First, "a's window is over");
        assert_eq!(replays.remember("c", 451, 751), Remembered::First, "b's is over too");
    }
}
