//! Credentials in results and errors, found and replaced with a marker naming their kind
//! (`[REDACTED:aws_access_key]`), before anything leaves orca or reaches tracking.
//!
//! What is found is in [`DETECTORS`], one entry per kind: private key blocks, JWTs, the key
//! formats of the cloud providers and services a model's tools meet most (AWS, Google, GitHub,
//! GitLab, Slack, OpenAI, Anthropic, Stripe, SendGrid, npm, PyPI, Hugging Face, DigitalOcean,
//! Shopify), passwords inside connection URLs, `Authorization` and API key headers echoed back,
//! and `password=`-style assignments; in a JSON value, a string under a key that names a
//! credential (`password`, `client_secret`, `secret_access_key`, `api_key`, ...) too.
//!
//! The same patterns read plain text and JSON as `serde_json` writes it (a spliced result's
//! bytes): a secret never holds a quote or a backslash, what precedes one may be an escape
//! (`\n`), and the marker holds neither, so replacing a match keeps JSON valid. Every detector
//! has literal anchors; text in which no anchor occurs (nearly all of it) is left as it is after
//! one Aho-Corasick pass, without copying.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use bytes::Bytes;
use regex::Regex;
use serde_json::Value;

/// What was redacted, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Redactions(BTreeMap<&'static str, usize>);

impl Redactions {
    pub(crate) fn total(&self) -> usize {
        self.0.values().sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, kind: &'static str) {
        *self.0.entry(kind).or_default() += 1;
    }

    /// `{"aws_access_key": 1, ...}`.
    pub(crate) fn kinds(&self) -> Value {
        Value::Object(
            self.0.iter().map(|(kind, count)| ((*kind).to_owned(), Value::from(*count))).collect(),
        )
    }
}

/// One kind of credential: the literal anchors one of its matches must contain, its pattern
/// (capture group 1 is what is replaced), and an optional check of what matched.
struct Detector {
    kind: &'static str,
    anchors: &'static [&'static str],
    pattern: &'static str,
    check: Option<fn(&str) -> bool>,
}

/// Before a token: the start, a character that is no letter or digit, or an escape of JSON.
const B: &str = r"(?:^|[^A-Za-z0-9]|\\[ntr])";

/// Every kind of credential, in the order a tie between two matches is decided.
static DETECTORS: &[Detector] = &[
    Detector {
        kind: "private_key",
        anchors: &["-----BEGIN"],
        pattern: r#"(-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[^"]*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)"#,
        check: None,
    },
    Detector {
        kind: "jwt",
        anchors: &["eyJ"],
        pattern: r"{B}(eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,})",
        check: None,
    },
    Detector {
        kind: "aws_access_key",
        anchors: &["AKIA", "ASIA", "ABIA", "ACCA"],
        pattern: r"{B}((?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})\b",
        check: None,
    },
    Detector {
        kind: "aws_secret_key",
        anchors: &["ecret_access_key", "ecretAccessKey", "ecret-access-key", "ECRET_ACCESS_KEY"],
        pattern: r#"(?i:secret[_-]?access[_-]?key)[\\"'\s]*[:=][\\"'\s]*([A-Za-z0-9/+=]{40})\b"#,
        check: None,
    },
    Detector {
        kind: "google_api_key",
        anchors: &["AIza"],
        pattern: r"{B}(AIza[0-9A-Za-z_-]{35})",
        check: None,
    },
    Detector {
        kind: "google_oauth_token",
        anchors: &["ya29."],
        pattern: r"{B}(ya29\.[0-9A-Za-z_-]{20,})",
        check: None,
    },
    Detector {
        kind: "github_token",
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        pattern: r"{B}((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,})\b",
        check: None,
    },
    Detector {
        kind: "github_token",
        anchors: &["github_pat_"],
        pattern: r"{B}(github_pat_[A-Za-z0-9_]{22,})\b",
        check: None,
    },
    Detector {
        kind: "gitlab_token",
        anchors: &["glpat-"],
        pattern: r"{B}(glpat-[A-Za-z0-9_-]{20,})",
        check: None,
    },
    Detector {
        kind: "slack_token",
        anchors: &["xox"],
        pattern: r"{B}(xox[abposr]-[A-Za-z0-9-]{10,})",
        check: None,
    },
    Detector {
        kind: "slack_webhook",
        anchors: &["hooks.slack.com/"],
        pattern: r"(https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/-]{20,})",
        check: None,
    },
    Detector {
        kind: "anthropic_key",
        anchors: &["sk-ant-"],
        pattern: r"{B}(sk-ant-[A-Za-z0-9_-]{20,})",
        check: None,
    },
    Detector {
        kind: "openai_key",
        anchors: &["sk-"],
        pattern: r"{B}(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})",
        check: None,
    },
    Detector {
        kind: "stripe_key",
        anchors: &["sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"],
        pattern: r"{B}((?:(?:sk|rk)_(?:live|test)|whsec)_[A-Za-z0-9]{10,})",
        check: None,
    },
    Detector {
        kind: "sendgrid_key",
        anchors: &["SG."],
        pattern: r"{B}(SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})",
        check: None,
    },
    Detector {
        kind: "npm_token",
        anchors: &["npm_"],
        pattern: r"{B}(npm_[A-Za-z0-9]{36})\b",
        check: None,
    },
    Detector {
        kind: "pypi_token",
        anchors: &["pypi-AgEIcHlwaS5vcmc"],
        pattern: r"{B}(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,})",
        check: None,
    },
    Detector {
        kind: "huggingface_token",
        anchors: &["hf_"],
        pattern: r"{B}(hf_[A-Za-z0-9]{30,})\b",
        check: None,
    },
    Detector {
        kind: "digitalocean_token",
        anchors: &["dop_v1_", "doo_v1_", "dor_v1_"],
        pattern: r"{B}(do[opr]_v1_[a-f0-9]{64})",
        check: None,
    },
    Detector {
        kind: "shopify_token",
        anchors: &["shpat_", "shpss_", "shpca_", "shppa_"],
        pattern: r"{B}(shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})",
        check: None,
    },
    Detector {
        kind: "url_password",
        anchors: &["://"],
        pattern: r#"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s/:@"'\\]+:([^\s/@"'\\]+)@"#,
        check: None,
    },
    Detector {
        kind: "authorization",
        anchors: &["uthorization", "UTHORIZATION"],
        pattern: r#"(?i:authorization)[\\"'\s]*[:=][\\"'\s]*(?i:(?:bearer|basic|token|dpop|digest|bot)\s+)?([A-Za-z0-9._~+/=-]{8,})"#,
        check: None,
    },
    Detector {
        kind: "authorization",
        anchors: &["Bearer ", "bearer ", "BEARER "],
        pattern: r"(?i:bearer)\s+([A-Za-z0-9._~+/-]{16,}=*)",
        check: None,
    },
    Detector {
        kind: "authorization",
        anchors: &["Basic ", "basic ", "BASIC "],
        pattern: r"(?i:basic)\s+([A-Za-z0-9+/]{12,}={0,2})",
        check: Some(basic_credentials),
    },
    Detector {
        kind: "authorization",
        anchors: &["pi-key", "pi_key", "PI-KEY", "PI_KEY", "uth-token", "UTH-TOKEN"],
        pattern: r#"(?i:x-api-key|api-key|api_key|x-auth-token)[\\"'\s]*[:=][\\"'\s]*([A-Za-z0-9._~+/=-]{16,})"#,
        check: None,
    },
    Detector {
        kind: "password",
        anchors: &[
            "assword",
            "ASSWORD",
            "asswd",
            "ASSWD",
            "lient_secret",
            "LIENT_SECRET",
            "ccess_token",
            "CCESS_TOKEN",
        ],
        pattern: r#"(?i:password|passwd|client_secret|access_token)[\\"'\s]*[:=][\\"'\s]*([^\s"'\\&;,)}\]]{6,})"#,
        check: None,
    },
];

/// What a `Basic` credential must be: base64 of `user:password`.
fn basic_credentials(encoded: &str) -> bool {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .and_then(|decoded| String::from_utf8(decoded).ok())
        .is_some_and(|text| text.contains(':') && !text.chars().any(char::is_control))
}

/// Keys of a JSON object whose string value is a credential, whatever it looks like, with
/// separators and case ignored.
const CREDENTIAL_KEYS: &[(&str, &str)] = &[
    ("password", "password"),
    ("passwd", "password"),
    ("secret", "secret"),
    ("clientsecret", "secret"),
    ("secretaccesskey", "aws_secret_key"),
    ("awssecretaccesskey", "aws_secret_key"),
    ("apikey", "api_key"),
    ("apisecret", "secret"),
    ("accesstoken", "token"),
    ("refreshtoken", "token"),
    ("idtoken", "token"),
    ("sessiontoken", "token"),
    ("authtoken", "token"),
    ("bearertoken", "token"),
    ("privatekey", "private_key"),
    ("authorization", "authorization"),
];

struct Compiled {
    anchors: AhoCorasick,
    /// Which detector each anchor belongs to.
    owner: Vec<usize>,
    regexes: Vec<Regex>,
}

static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let mut patterns = Vec::new();
    let mut owner = Vec::new();
    for (index, detector) in DETECTORS.iter().enumerate() {
        for anchor in detector.anchors {
            patterns.push(*anchor);
            owner.push(index);
        }
    }
    let anchors = AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::Standard)
        .build(&patterns)
        .expect("the anchors are literals");
    let regexes = DETECTORS
        .iter()
        .map(|detector| Regex::new(&detector.pattern.replace("{B}", B)).expect("a valid detector"))
        .collect();
    Compiled { anchors, owner, regexes }
});

/// The detectors whose anchors occur in `text` (none, for nearly all text).
fn triggered(text: &[u8]) -> Vec<usize> {
    let compiled = &*COMPILED;
    let mut found: Vec<usize> = Vec::new();
    for hit in compiled.anchors.find_overlapping_iter(text) {
        let detector = compiled.owner[hit.pattern().as_usize()];
        if !found.contains(&detector) {
            found.push(detector);
        }
    }
    found.sort_unstable();
    found
}

/// Whether `text` may hold a credential at all (an anchor occurs in it).
#[must_use]
pub(crate) fn may_hold(text: &[u8]) -> bool {
    COMPILED.anchors.is_match(text)
}

/// `text` with every credential replaced by its marker, or `None` when it holds none.
#[must_use]
pub(crate) fn redact(text: &str, counts: &mut Redactions) -> Option<String> {
    // The shortest anchor has three bytes; most text holds none (one prefiltered pass).
    if text.len() < 3 || !may_hold(text.as_bytes()) {
        return None;
    }
    let detectors = triggered(text.as_bytes());
    if detectors.is_empty() {
        return None;
    }
    let compiled = &*COMPILED;
    // (start, end, detector), then the earliest, longest, first-listed of overlapping ones.
    let mut spans: Vec<(usize, usize, usize)> = Vec::new();
    for index in detectors {
        let detector = &DETECTORS[index];
        for captures in compiled.regexes[index].captures_iter(text) {
            let Some(secret) = captures.get(1) else { continue };
            if secret.as_str().starts_with("[REDACTED")
                || detector.check.is_some_and(|check| !check(secret.as_str()))
            {
                continue;
            }
            spans.push((secret.start(), secret.end(), index));
        }
    }
    if spans.is_empty() {
        return None;
    }
    spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, index) in spans {
        if start < at {
            continue;
        }
        let kind = DETECTORS[index].kind;
        out.push_str(&text[at..start]);
        out.push_str("[REDACTED:");
        out.push_str(kind);
        out.push(']');
        counts.add(kind);
        at = end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// Redact `text` in place.
pub(crate) fn redact_in_place(text: &mut String, counts: &mut Redactions) {
    if let Some(redacted) = redact(text, counts) {
        *text = redacted;
    }
}

/// Redact every string of a JSON value in place (object keys are left as they are); a string
/// under a key that names a credential is replaced whole.
pub(crate) fn redact_value(value: &mut Value, counts: &mut Redactions) {
    match value {
        Value::String(text) => redact_in_place(text, counts),
        Value::Array(items) => items.iter_mut().for_each(|item| redact_value(item, counts)),
        Value::Object(fields) => {
            for (key, item) in fields.iter_mut() {
                match (credential_key(key), &*item) {
                    (Some(kind), Value::String(text))
                        if text.chars().count() >= 6 && !text.starts_with("[REDACTED") =>
                    {
                        *item = Value::String(format!("[REDACTED:{kind}]"));
                        counts.add(kind);
                    }
                    _ => redact_value(item, counts),
                }
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The kind of credential a key names, if it names one.
fn credential_key(key: &str) -> Option<&'static str> {
    if key.len() > 40 {
        return None;
    }
    let folded: String =
        key.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect();
    CREDENTIAL_KEYS.iter().find(|(name, _)| *name == folded).map(|(_, kind)| *kind)
}

/// A JSON value encoded by `serde_json` in `chunks` (which may end anywhere), with every
/// credential in it replaced, or `None` when it holds none. Nothing is copied unless a
/// detector's anchor occurs; then the value is joined, redacted and handed back whole.
#[must_use]
pub(crate) fn redact_json_chunks(chunks: &[Bytes], counts: &mut Redactions) -> Option<Vec<Bytes>> {
    // Longer than any anchor: an anchor cut between chunks is seen across the seam.
    const SEAM: usize = 64;
    let mut carry: Vec<u8> = Vec::with_capacity(2 * SEAM);
    let mut anchored = false;
    for chunk in chunks {
        let head = &chunk[..chunk.len().min(SEAM)];
        carry.extend_from_slice(head);
        if may_hold(&carry) || (chunk.len() > SEAM && may_hold(chunk)) {
            anchored = true;
            break;
        }
        if chunk.len() > SEAM {
            carry.clear();
            carry.extend_from_slice(&chunk[chunk.len() - SEAM..]);
        } else if carry.len() > SEAM {
            carry.drain(..carry.len() - SEAM);
        }
    }
    if !anchored {
        return None;
    }
    let joined = chunks.concat();
    let text = std::str::from_utf8(&joined).ok()?;
    redact(text, counts).map(|redacted| vec![Bytes::from(redacted.into_bytes())])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn redacted(text: &str) -> (String, Redactions) {
        let mut counts = Redactions::default();
        let out = redact(text, &mut counts).unwrap_or_else(|| text.to_owned());
        (out, counts)
    }

    /// Each case: a text and what it must become.
    fn check(cases: &[(&str, &str)]) {
        for (text, expected) in cases {
            assert_eq!(redacted(text).0, *expected, "{text:?}");
        }
    }

    const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1c3e\nabcdef==\n-----END RSA PRIVATE KEY-----";

    #[test]
    fn private_key_blocks_and_jwts_are_redacted() {
        check(&[
            (&format!("key: {PEM} end"), "key: [REDACTED:private_key] end"),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
                "[REDACTED:private_key]",
            ),
            (
                "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
                "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            ),
            (
                "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c ok",
                "token [REDACTED:jwt] ok",
            ),
            ("eyJustAWord and eyJ.x.y", "eyJustAWord and eyJ.x.y"),
        ]);
    }

    #[test]
    fn cloud_and_service_keys_are_redacted_by_their_formats() {
        check(&[
            ("AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws_access_key]"),
            ("id=ASIAIOSFODNN7EXAMPLE,", "id=[REDACTED:aws_access_key],"),
            ("AKIAIOSFODNN7EXAMPLEX", "AKIAIOSFODNN7EXAMPLEX"),
            ("MAKIAIOSFODNN7EXAMPLE", "MAKIAIOSFODNN7EXAMPLE"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "aws_secret_access_key = [REDACTED:aws_secret_key]",
            ),
            (
                r#"{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}"#,
                r#"{"SecretAccessKey": "[REDACTED:aws_secret_key]"}"#,
            ),
            ("AIzaSyA-1234567890abcdefghijklmnopqrstu", "[REDACTED:google_api_key]"),
            ("ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", "[REDACTED:github_token]"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[REDACTED:github_token]",
            ),
            ("glpat-abcdefghij0123456789", "[REDACTED:gitlab_token]"),
            ("xoxb-1234567890-abcdefghij", "[REDACTED:slack_token]"),
            (
                "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX",
                "[REDACTED:slack_webhook]",
            ),
            ("sk-proj-abcdefghijklmnopqrstuvwx0123", "[REDACTED:openai_key]"),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "[REDACTED:anthropic_key]"),
            ("sk_live_0123456789abcdef", "[REDACTED:stripe_key]"),
            ("whsec_0123456789abcdefghijABCDEFGHIJ", "[REDACTED:stripe_key]"),
            (
                "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
                "[REDACTED:sendgrid_key]",
            ),
            ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED:npm_token]"),
            ("hf_abcdefghijklmnopqrstuvwxyzABCDEF", "[REDACTED:huggingface_token]"),
            ("task-manager and sk-short and desk-top", "task-manager and sk-short and desk-top"),
        ]);
    }

    #[test]
    fn passwords_in_urls_and_echoed_headers_are_redacted() {
        check(&[
            (
                "postgres://orca:hunter2secret@db:5432/app",
                "postgres://orca:[REDACTED:url_password]@db:5432/app",
            ),
            (
                "see https://example.com/a:b@c and https://user@host/",
                "see https://example.com/a:b@c and https://user@host/",
            ),
            (
                "Authorization: Bearer abc.def-ghi_jkl",
                "Authorization: Bearer [REDACTED:authorization]",
            ),
            (
                r#"{"authorization":"Token 0123456789abcdef"}"#,
                r#"{"authorization":"Token [REDACTED:authorization]"}"#,
            ),
            ("curl -H 'bearer 0123456789abcdefXYZ'", "curl -H 'bearer [REDACTED:authorization]'"),
            ("Basic dXNlcjpwYXNzd29yZA==", "Basic [REDACTED:authorization]"),
            ("Basic plan for basic usersonly", "Basic plan for basic usersonly"),
            ("x-api-key: 0123456789abcdef0123", "x-api-key: [REDACTED:authorization]"),
            ("DB_PASSWORD=hunter22 next", "DB_PASSWORD=[REDACTED:password] next"),
            ("password: short", "password: short"),
            ("Reset your password at the login page.", "Reset your password at the login page."),
            ("password_reset_url: https://x.example/r", "password_reset_url: https://x.example/r"),
        ]);
    }

    #[test]
    fn what_is_redacted_is_counted_by_kind_and_markers_are_left_alone() {
        let (out, counts) = redacted(
            "AKIAIOSFODNN7EXAMPLE and AKIAIOSFODNN7EXAMPL2 and ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
        );
        assert_eq!(
            out,
            "[REDACTED:aws_access_key] and [REDACTED:aws_access_key] and [REDACTED:github_token]"
        );
        assert_eq!(counts.total(), 3);
        assert_eq!(counts.kinds(), json!({"aws_access_key": 2, "github_token": 1}));
        let (again, counts) = redacted(&out);
        assert_eq!((again, counts.total()), (out, 0));
        let (again, counts) = redacted("postgres://u:[REDACTED:url_password]@h/d");
        assert_eq!(
            (again.as_str(), counts.total()),
            ("postgres://u:[REDACTED:url_password]@h/d", 0)
        );
    }

    #[test]
    fn json_values_are_redacted_in_every_string_and_under_credential_keys() {
        let mut value = json!({
            "rows": [["ok", "AKIAIOSFODNN7EXAMPLE"], [1, null]],
            "aws": {"Secret_Access_Key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "region": "eu-west-1"},
            "client-secret": "s3cr3t-value",
            "password": "",
            "page_token": "opaque-token-value",
            "note": "plain"
        });
        let mut counts = Redactions::default();
        redact_value(&mut value, &mut counts);
        assert_eq!(
            value,
            json!({
                "rows": [["ok", "[REDACTED:aws_access_key]"], [1, null]],
                "aws": {"Secret_Access_Key": "[REDACTED:aws_secret_key]", "region": "eu-west-1"},
                "client-secret": "[REDACTED:secret]",
                "password": "",
                "page_token": "opaque-token-value",
                "note": "plain"
            })
        );
        assert_eq!(counts.total(), 3);
    }

    #[test]
    fn json_bytes_are_redacted_across_chunks_and_stay_the_json_a_value_gives() {
        let rows = json!([
            [1, "line one\nAKIAIOSFODNN7EXAMPLE", "x"],
            [2, PEM, "postgres://u:pa\"ss@h/d"],
            [
                3,
                "café ☕ eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
                "\tghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
            ]
        ]);
        let encoded = serde_json::to_vec(&rows).unwrap();
        let mut expected = rows.clone();
        let mut expected_counts = Redactions::default();
        redact_value(&mut expected, &mut expected_counts);
        for size in [1, 3, 7, 64, encoded.len()] {
            let chunks: Vec<Bytes> = encoded.chunks(size).map(Bytes::copy_from_slice).collect();
            let mut counts = Redactions::default();
            let out = redact_json_chunks(&chunks, &mut counts).expect("secrets found");
            let back: Value = serde_json::from_slice(&out.concat()).expect("still JSON");
            assert_eq!(back, expected, "chunks of {size}");
            assert_eq!(counts, expected_counts, "chunks of {size}");
        }
        let clean = serde_json::to_vec(&json!([[1, "nothing to see"], [2, "here"]])).unwrap();
        assert!(redact_json_chunks(&[Bytes::from(clean)], &mut Redactions::default()).is_none());
    }
}
