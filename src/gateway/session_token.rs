//! What a 2025-revision client declared in its `initialize`, carried by the client itself over
//! stateless HTTP. Such a client states its capabilities (sampling, elicitation, the MCP Apps
//! extension ...) once, in `initialize`, and its later requests come without them: stateless,
//! orca keeps nothing between requests, so it would not know them. The answer to a stateless
//! `initialize` therefore carries an `Mcp-Session-Id` that is no session held anywhere but a
//! token: the capabilities the client declared, the protocol revision orca answered with and an
//! expiry, signed with orca's secret under a purpose of its own (so that no other token of
//! orca's verifies as one, nor one of these as another). The client sends it back with every
//! later request, as the protocol asks of a session id; a valid one puts what it carries in the
//! request's extensions (`Declared`), where `client_capabilities` finds it, and the header goes
//! no further (to rmcp's stateless service it would mean nothing, to tracking and the relay of
//! log messages it would look like a session). Any replica that shares `ORCA_SECRET` verifies
//! it; nothing is stored.
//!
//! A token that does not verify (tampered, made with another secret, expired, sent with a
//! request of a revision without `initialize`, or no token at all) is ignored: the request is served as it
//! was before tokens existed, without the client's capabilities, and never refused. A token
//! carries no authority (the capabilities only say what the client can be asked and shown), so
//! refusing a forged one would protect nothing; a 404 would tell the client its session ended,
//! and a replica without the shared secret would then send every client that another replica
//! initialized around a loop of new `initialize`s.
//!
//! 2026-07-28 clients carry their capabilities in every request (`_meta`), which wins over a
//! token; `--stateful` sessions keep them in the session, and get no token.

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use rmcp::model::ClientCapabilities;
use rmcp::service::{RequestContext, RoleServer};

use crate::sql::Secret;

/// The header a session id goes in, both ways.
const HEADER: &str = "mcp-session-id";

/// What a token begins with: orca's, and this format of it.
const PREFIX: &str = "orca_cs1.";

/// The purpose the signature is made for.
const DOMAIN: &[u8] = b"orca-client-capabilities-v1";

/// How long a token holds: longer than a client keeps one connection, so that it stays valid
/// for as long as the client uses it (a client that initializes again gets a fresh one).
const VALID_FOR_SECONDS: i64 = 30 * 24 * 60 * 60;

/// A token whose payload is longer is not issued: the client is served as without one, and a
/// header this large would not pass every proxy.
const MAX_PAYLOAD_BYTES: usize = 4096;

/// The capabilities a stateless client declared in its `initialize`, from the request's token.
#[derive(Debug, Clone)]
pub(crate) struct Declared(pub(crate) ClientCapabilities);

/// What a token carries.
#[derive(serde::Serialize, serde::Deserialize)]
struct Payload {
    /// The protocol revision orca answered the `initialize` with (what the client speaks, for
    /// whoever reads a token; a request of any revision with `initialize` may carry it).
    #[serde(rename = "v")]
    version: String,
    #[serde(rename = "c")]
    capabilities: ClientCapabilities,
    /// Unix seconds after which the token is ignored.
    #[serde(rename = "e")]
    expires: i64,
}

/// The last revision whose clients declare their capabilities in `initialize` (revisions are
/// dates, compared as text); later ones send them with each request.
const LAST_WITH_INITIALIZE: &str = "2025-11-25";

/// Issues and verifies the tokens, with orca's secret.
#[derive(Debug, Clone)]
pub(crate) struct Tokens {
    secret: Secret,
}

impl Tokens {
    pub(crate) fn new(secret: Secret) -> Tokens {
        Tokens { secret }
    }

    /// The token of a client that declared `capabilities` and was answered in `version`;
    /// `None` when it would be too long.
    fn issue(&self, version: &str, capabilities: &ClientCapabilities, now: i64) -> Option<String> {
        let payload = Payload {
            version: version.to_owned(),
            capabilities: capabilities.clone(),
            expires: now.saturating_add(VALID_FOR_SECONDS),
        };
        let payload = serde_json::to_vec(&payload).ok()?;
        if payload.len() > MAX_PAYLOAD_BYTES {
            return None;
        }
        let signature = self.secret.mac(DOMAIN, &[&payload]);
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        Some(format!("{PREFIX}{}.{}", engine.encode(&payload), engine.encode(signature)))
    }

    /// The capabilities `token` carries, when it is one of orca's, unaltered and unexpired, and
    /// the request is of a revision that has `initialize` (`revision`, its
    /// `MCP-Protocol-Version`; none is 2025-03-26). Any such revision: not every client sends
    /// the one it was answered with (the conformance suite's sends 2025-03-26 after a
    /// 2025-11-25 `initialize`), and what a capability means did not change between them.
    fn verify(&self, token: &str, revision: Option<&str>, now: i64) -> Option<ClientCapabilities> {
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let (payload, signature) = token.strip_prefix(PREFIX)?.split_once('.')?;
        let payload = engine.decode(payload).ok()?;
        let signature = engine.decode(signature).ok()?;
        let expected = self.secret.mac(DOMAIN, &[&payload]);
        if !constant_time_equal(&signature, &expected) {
            return None;
        }
        let payload: Payload = serde_json::from_slice(&payload).ok()?;
        let initialized = revision.is_none_or(|revision| revision <= LAST_WITH_INITIALIZE);
        (payload.expires >= now && initialized).then_some(payload.capabilities)
    }

    /// Take the token off a stateless request, and put what a valid one carries in its
    /// extensions.
    pub(super) fn admit(&self, parts: &mut Parts) {
        let Some(token) = parts.headers.remove(HEADER) else { return };
        let revision = parts.headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok());
        let verified = token.to_str().ok().and_then(|token| self.verify(token, revision, now()));
        match verified {
            Some(capabilities) => {
                parts.extensions.insert(Declared(capabilities));
            }
            // Not quoted: what a client sends is not written to the log.
            None => tracing::debug!(
                "a stateless request's Mcp-Session-Id is not a valid token of orca's: served without the client's capabilities"
            ),
        }
    }

    /// The answer to a stateless `initialize`, with the client's token in `Mcp-Session-Id`
    /// when orca answered it (the revision it answered with is in the body).
    pub(super) async fn on_initialize(
        &self,
        initialize: &Initialize,
        response: Response,
    ) -> Response {
        let is_json = response
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if response.status() != StatusCode::OK || !is_json {
            return response;
        }
        let (mut parts, body) = response.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
            return Response::from_parts(parts, Body::empty());
        };
        let version = answered_version(&bytes);
        let token =
            version.and_then(|version| self.issue(&version, &initialize.capabilities, now()));
        if let Some(value) = token.and_then(|token| HeaderValue::from_str(&token).ok()) {
            parts.headers.insert(HEADER, value);
        }
        Response::from_parts(parts, Body::from(bytes))
    }
}

/// What orca reads of an `initialize` request.
pub(super) struct Initialize {
    capabilities: ClientCapabilities,
}

/// The request, when `body` is an `initialize`.
pub(super) fn initialize(body: &[u8]) -> Option<Initialize> {
    #[derive(serde::Deserialize)]
    struct Request {
        method: String,
        params: Params,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(default)]
        capabilities: ClientCapabilities,
    }
    let request: Request = serde_json::from_slice(body).ok()?;
    (request.method == "initialize")
        .then_some(Initialize { capabilities: request.params.capabilities })
}

/// The protocol revision of an `initialize` answer, when it is a result.
fn answered_version(body: &[u8]) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_slice(body).ok()?;
    answer["result"]["protocolVersion"].as_str().map(str::to_owned)
}

/// The capabilities the token of a request's HTTP head carried.
pub(super) fn declared(head: Option<&Parts>) -> Option<ClientCapabilities> {
    head?.extensions.get::<Declared>().map(|declared| declared.0.clone())
}

/// What the request's client declared it can do: a 2026-07-28 request's own (in its `_meta`),
/// else a stateless 2025 client's from its token, else its session's (`initialize`).
pub(super) fn client_capabilities(
    context: &RequestContext<RoleServer>,
) -> Option<ClientCapabilities> {
    context
        .meta
        .client_capabilities()
        .or_else(|| declared(super::http_parts(context)))
        .or_else(|| context.client_capabilities())
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn constant_time_equal(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left.iter().zip(right).fold(0u8, |acc, (left, right)| acc | (left ^ right)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(secret: &str) -> Tokens {
        Tokens::new(Secret::from_text(secret))
    }

    fn sampling() -> ClientCapabilities {
        serde_json::from_value(serde_json::json!({"sampling": {}})).unwrap()
    }

    const NOW: i64 = 1_800_000_000;

    #[test]
    fn a_token_gives_back_what_it_was_issued_for_and_nothing_else_verifies() {
        let orca = tokens("a secret of at least thirty-two bytes");
        let token = orca.issue("2025-11-25", &sampling(), NOW).unwrap();
        assert!(token.bytes().all(|byte| (0x21..=0x7e).contains(&byte)), "{token}");
        let verified = orca.verify(&token, Some("2025-11-25"), NOW).unwrap();
        assert!(verified.sampling.is_some());
        assert!(orca.verify(&token, None, NOW).is_some(), "no revision header: 2025-03-26's");
        assert!(orca.verify(&token, Some("2025-06-18"), NOW).is_some(), "another 2025 revision");

        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let (payload, signature) = token.strip_prefix(PREFIX).unwrap().split_once('.').unwrap();
        let forged = String::from_utf8(engine.decode(payload).unwrap())
            .unwrap()
            .replace(r#""sampling":{}"#, r#""elicitation":{}"#);
        let forged = format!("{PREFIX}{}.{signature}", engine.encode(forged));
        let other = tokens("another secret of at least thirty-two bytes");
        let cases = [
            ("another secret", other.verify(&token, None, NOW)),
            ("a changed payload", orca.verify(&forged, None, NOW)),
            ("a revision without initialize", orca.verify(&token, Some("2026-07-28"), NOW)),
            ("expired", orca.verify(&token, None, NOW + VALID_FOR_SECONDS + 1)),
            ("no prefix", orca.verify(&token[PREFIX.len()..], None, NOW)),
            ("garbage", orca.verify("orca_cs1.%%%.!!", None, NOW)),
        ];
        for (case, verified) in cases {
            assert!(verified.is_none(), "{case}");
        }
    }

    #[test]
    fn another_purpose_of_the_secret_does_not_sign_a_token() {
        let secret = Secret::from_text("a secret of at least thirty-two bytes");
        let orca = Tokens::new(secret.clone());
        let payload = serde_json::to_vec(&Payload {
            version: "2025-11-25".to_owned(),
            capabilities: sampling(),
            expires: NOW + 60,
        })
        .unwrap();
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let signature = secret.mac(b"orca-masking-v1", &[&payload]);
        let token = format!("{PREFIX}{}.{}", engine.encode(&payload), engine.encode(signature));
        assert!(orca.verify(&token, None, NOW).is_none());
    }

    #[test]
    fn only_an_initialize_is_read_and_only_its_answers_version_is_taken() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}"#;
        assert!(initialize(body).unwrap().capabilities.sampling.is_some());
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        assert!(initialize(call).is_none());
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}"#;
        assert_eq!(answered_version(answer).as_deref(), Some("2025-06-18"));
        let error = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#;
        assert_eq!(answered_version(error), None);
    }

    #[test]
    fn capabilities_too_large_for_a_header_get_no_token() {
        let mut experimental = serde_json::Map::new();
        experimental.insert("big".to_owned(), serde_json::json!({"x": "y".repeat(5000)}));
        let capabilities: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"experimental": experimental})).unwrap();
        let orca = tokens("a secret of at least thirty-two bytes");
        assert!(orca.issue("2025-11-25", &capabilities, NOW).is_none());
    }
}
