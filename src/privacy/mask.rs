//! Masking policies: which columns of a result are masked and how, applied to rows of JSON
//! values before they leave the gateway.
//!
//! A [`MaskingPolicy`] maps column names to a [`MaskRule`]; the configuration layer builds
//! policies from the `masking:` section of `orca.yaml` (rules in the text forms that
//! [`parse_rule`] reads) and fills the salt from the orca secret. [`MaskingPolicy::apply`] masks
//! rows in place and names the columns it covered, for the `policy_applied` field of a result.
//!
//! Masking never reveals a short value whole: `keep_last:4` on a three-character value masks
//! all three. Hashes are salted so that a masked value cannot be looked up in a table of
//! hashes of likely values without the salt, yet equal values still hash alike within one
//! gateway (so masked columns can be joined and counted).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What replaces a redacted value.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// The largest `n` accepted in `keep_last:n`.
pub(crate) const MAX_KEEP_LAST: usize = 32;

/// How the values of one column are masked. In configuration and JSON a rule is written in the
/// text form [`parse_rule`] reads and [`fmt::Display`] writes: `redact`, `hash`, `keep_last:4`,
/// `null`, `keep_email_domain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum MaskRule {
    /// The value becomes the string `[REDACTED]`.
    Redact,
    /// The value becomes `h:` and the first 16 hex digits of the SHA-256 of the salt followed by
    /// the value's text.
    Hash,
    /// All characters but the last `n` become `*`; a value of at most `n` characters is masked
    /// entirely.
    KeepLast(usize),
    /// The value becomes JSON `null`.
    Null,
    /// An e-mail address becomes `***@` and its domain; anything else is redacted.
    KeepEmailDomain,
}

impl fmt::Display for MaskRule {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaskRule::Redact => formatter.write_str("redact"),
            MaskRule::Hash => formatter.write_str("hash"),
            MaskRule::KeepLast(count) => write!(formatter, "keep_last:{count}"),
            MaskRule::Null => formatter.write_str("null"),
            MaskRule::KeepEmailDomain => formatter.write_str("keep_email_domain"),
        }
    }
}

impl FromStr for MaskRule {
    type Err = String;

    fn from_str(text: &str) -> Result<MaskRule, String> {
        parse_rule(text)
    }
}

impl Serialize for MaskRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MaskRule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MaskRule, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_rule(&text).map_err(serde::de::Error::custom)
    }
}

/// The accepted text forms of a rule, for error messages.
const RULE_FORMS: &str =
    "redact, hash, null, keep_email_domain, keep_last:N or keep_last_N (N from 1 to 32)";

/// Reads a rule from its configuration text: `redact`, `hash`, `null`, `keep_email_domain`,
/// `keep_last:4` or `keep_last_4` (any `n` from 1 to 32). Case and surrounding whitespace do not
/// matter.
///
/// # Errors
///
/// A message naming the text and listing the accepted forms when the text is none of them or
/// the count is outside 1 to 32.
pub(crate) fn parse_rule(text: &str) -> Result<MaskRule, String> {
    let normalised = text.trim().to_ascii_lowercase();
    let rule = match normalised.as_str() {
        "redact" => MaskRule::Redact,
        "hash" => MaskRule::Hash,
        "null" => MaskRule::Null,
        "keep_email_domain" => MaskRule::KeepEmailDomain,
        other => {
            let count_text = other
                .strip_prefix("keep_last:")
                .or_else(|| other.strip_prefix("keep_last_"))
                .ok_or_else(|| format!("unknown masking rule {text:?}; use one of {RULE_FORMS}"))?;
            let count_is_digits =
                !count_text.is_empty() && count_text.bytes().all(|byte| byte.is_ascii_digit());
            let count = count_text
                .parse::<usize>()
                .ok()
                .filter(|count| count_is_digits && (1..=MAX_KEEP_LAST).contains(count))
                .ok_or_else(|| {
                    format!(
                        "the masking rule {text:?} needs a count from 1 to {MAX_KEEP_LAST}; use \
                         one of {RULE_FORMS}"
                    )
                })?;
            MaskRule::KeepLast(count)
        }
    };
    Ok(rule)
}

/// A named set of column rules with the salt for hashing.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct MaskingPolicy {
    /// The policy's name, as configuration and results refer to it.
    pub(crate) id: String,
    /// The rule for each column name; names match case-insensitively.
    pub(crate) columns: BTreeMap<String, MaskRule>,
    /// The rule for each kind of value masked wherever it appears (`kinds:`), in the results
    /// PostgreSQL does not mask by name (`results.rs`).
    pub(crate) kinds: BTreeMap<super::results::ValueKind, MaskRule>,
    /// The salt hashed before every value under [`MaskRule::Hash`]; filled from the orca secret
    /// and never shown (the `Debug` form leaves it out).
    pub(crate) salt: String,
}

impl fmt::Debug for MaskingPolicy {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("MaskingPolicy")
            .field("id", &self.id)
            .field("columns", &self.columns)
            .field("kinds", &self.kinds)
            .field("salt", &"<hidden>")
            .finish()
    }
}

impl MaskingPolicy {
    /// The rule for a column, matching names case-insensitively (`Email` finds the rule for
    /// `email`). When the policy names a column twice in different cases, the exact match wins,
    /// then the first in byte order.
    #[must_use]
    pub(crate) fn rule_for(&self, column: &str) -> Option<&MaskRule> {
        self.columns.get(column).or_else(|| {
            self.columns.iter().find(|(name, _)| same_name(name, column)).map(|(_, rule)| rule)
        })
    }

    /// Masks in place every cell of every column the policy covers, and returns the names of
    /// those columns in result order (each name once, as the result spells it), including
    /// when there are no rows. `columns` are the result's column names and each row holds the
    /// cells in that order; rows shorter than `columns` are masked as far as they go.
    pub(crate) fn apply(&self, columns: &[String], rows: &mut [Vec<Value>]) -> Vec<String> {
        let mut masked_names: Vec<String> = Vec::new();
        let mut masked_columns: Vec<(usize, MaskRule)> = Vec::new();
        for (index, name) in columns.iter().enumerate() {
            if let Some(rule) = self.rule_for(name) {
                masked_columns.push((index, *rule));
                if !masked_names.contains(name) {
                    masked_names.push(name.clone());
                }
            }
        }
        if masked_columns.is_empty() {
            return masked_names;
        }
        let salt = self.salt.as_bytes();
        for row in rows.iter_mut() {
            for (index, rule) in &masked_columns {
                if let Some(cell) = row.get_mut(*index) {
                    *cell = mask_value(rule, cell, salt);
                }
            }
        }
        masked_names
    }
}

/// Whether two column names are the same regardless of case.
fn same_name(left: &str, right: &str) -> bool {
    left.chars().flat_map(char::to_lowercase).eq(right.chars().flat_map(char::to_lowercase))
}

/// Masks one value under `rule`. JSON `null` stays `null` under every rule. Other values are
/// masked through their text form: a string as itself, a number or boolean as JSON writes it,
/// an array or object as compact JSON.
///
/// - `Redact`: the string `[REDACTED]`.
/// - `Hash`: `h:` and the first 16 hex digits of SHA-256 over `salt` followed by the text.
/// - `KeepLast(n)`: `*` for every character (not byte) but the last `n`; when the text has at
///   most `n` characters, every character is masked.
/// - `Null`: `null`.
/// - `KeepEmailDomain`: `***@domain` when the text is an e-mail address (the domain is what
///   follows the last `@`), else `[REDACTED]`.
#[must_use]
pub(crate) fn mask_value(rule: &MaskRule, value: &Value, salt: &[u8]) -> Value {
    let mut masked = value.clone();
    ColumnRule::new(*rule, salt).mask(&mut masked);
    masked
}

/// A rule ready to mask the cells of one column: for [`MaskRule::Hash`], the salt is already
/// in the SHA-256 state, so each cell hashes only its own text.
#[derive(Clone)]
pub(crate) struct ColumnRule {
    rule: MaskRule,
    salted: Sha256,
}

impl ColumnRule {
    #[must_use]
    pub(crate) fn new(rule: MaskRule, salt: &[u8]) -> ColumnRule {
        ColumnRule { rule, salted: Sha256::new_with_prefix(salt) }
    }

    /// Masks `value` in place as [`mask_value`] documents; a string's buffer is reused for
    /// the redaction and the hash.
    pub(crate) fn mask(&self, value: &mut Value) {
        match value {
            Value::Null => {}
            _ if self.rule == MaskRule::Null => *value = Value::Null,
            Value::String(text) => self.mask_text(text),
            other => {
                let mut text = other.to_string();
                self.mask_text(&mut text);
                *other = Value::String(text);
            }
        }
    }

    /// Replaces `text` with its masked form.
    fn mask_text(&self, text: &mut String) {
        match self.rule {
            MaskRule::Redact | MaskRule::Null => {
                text.clear();
                text.push_str(REDACTED);
            }
            MaskRule::Hash => {
                let digest = self.salted.clone().chain_update(text.as_bytes()).finalize();
                text.clear();
                text.push_str("h:");
                for byte in &digest[..HASH_BYTES] {
                    text.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
                    text.push(char::from(HEX_DIGITS[usize::from(byte & 0x0f)]));
                }
            }
            MaskRule::KeepLast(count) => *text = keep_last(text, count),
            MaskRule::KeepEmailDomain => {
                *text = email_domain(text)
                    .map_or_else(|| REDACTED.to_owned(), |domain| format!("***@{domain}"));
            }
        }
    }
}

/// A hash shows this many bytes of the digest, as 16 hex digits.
const HASH_BYTES: usize = 8;
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The text with all but its last `count` characters replaced by `*`, or entirely masked when
/// it has at most `count` characters.
fn keep_last(text: &str, count: usize) -> String {
    let length = text.chars().count();
    if length <= count {
        return "*".repeat(length);
    }
    let mut masked = "*".repeat(length - count);
    masked.extend(text.chars().skip(length - count));
    masked
}

/// The domain of an e-mail address: what follows the last `@`, when there is something before
/// it and the rest is a plausible domain name.
fn email_domain(text: &str) -> Option<&str> {
    let text = text.trim();
    let (local, domain) = text.rsplit_once('@')?;
    let plausible_domain = !domain.is_empty()
        && !domain.starts_with(['.', '-'])
        && !domain.ends_with(['.', '-'])
        && !domain.contains("..")
        && domain.chars().all(|c| c.is_alphanumeric() || c == '.' || c == '-');
    (!local.trim().is_empty() && plausible_domain).then_some(domain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::Config;
    use serde_json::json;

    const SALT: &[u8] = b"pepper";

    /// Checks that `value` masks to `expected` under `rule` with the test salt.
    fn check(rule: MaskRule, value: Value, expected: Value) {
        assert_eq!(mask_value(&rule, &value, SALT), expected, "{rule} on {value}");
    }

    /// The expected hash, computed independently of `ColumnRule`.
    fn expected_hash(text: &str) -> String {
        let digest = Sha256::digest([SALT, text.as_bytes()].concat());
        format!("h:{}", &hex::encode(digest)[..16])
    }

    #[test]
    fn each_rule_masks_values_as_documented() {
        let cases = [
            (MaskRule::Redact, json!("ada@example.com"), json!("[REDACTED]")),
            (MaskRule::Redact, json!(42), json!("[REDACTED]")),
            (MaskRule::Redact, json!(null), json!(null)),
            (MaskRule::Hash, json!("ada@example.com"), json!(expected_hash("ada@example.com"))),
            (MaskRule::Hash, json!(42), json!(expected_hash("42"))),
            (MaskRule::Hash, json!(1.5), json!(expected_hash("1.5"))),
            (MaskRule::Hash, json!(true), json!(expected_hash("true"))),
            (MaskRule::Hash, json!({"a": [1, 2]}), json!(expected_hash(r#"{"a":[1,2]}"#))),
            (MaskRule::Hash, json!(null), json!(null)),
            (MaskRule::KeepLast(4), json!("4111111111111111"), json!("************1111")),
            (MaskRule::KeepLast(4), json!(4_111_111_111_111_111_u64), json!("************1111")),
            (MaskRule::KeepLast(4), json!("12345"), json!("*2345")),
            (MaskRule::KeepLast(4), json!("1234"), json!("****")),
            (MaskRule::KeepLast(4), json!("123"), json!("***")),
            (MaskRule::KeepLast(4), json!(""), json!("")),
            (MaskRule::KeepLast(2), json!("Zoë Ünïcødé"), json!("*********dé")),
            (MaskRule::KeepLast(1), json!("🦀🦀🦀"), json!("**🦀")),
            (MaskRule::KeepLast(0), json!("secret"), json!("******")),
            (MaskRule::KeepLast(4), json!(null), json!(null)),
            (MaskRule::Null, json!("ada@example.com"), json!(null)),
            (MaskRule::Null, json!([1, 2]), json!(null)),
            (MaskRule::KeepEmailDomain, json!("ada@example.com"), json!("***@example.com")),
            (MaskRule::KeepEmailDomain, json!("\"a@b\"@example.org"), json!("***@example.org")),
            (MaskRule::KeepEmailDomain, json!("jürgen@müller.de"), json!("***@müller.de")),
            (MaskRule::KeepEmailDomain, json!("not an email"), json!("[REDACTED]")),
            (MaskRule::KeepEmailDomain, json!("@example.com"), json!("[REDACTED]")),
            (MaskRule::KeepEmailDomain, json!("ada@"), json!("[REDACTED]")),
            (MaskRule::KeepEmailDomain, json!("ada@exa mple.com"), json!("[REDACTED]")),
            (MaskRule::KeepEmailDomain, json!(7), json!("[REDACTED]")),
            (MaskRule::KeepEmailDomain, json!(null), json!(null)),
        ];
        for (rule, value, expected) in cases {
            check(rule, value, expected);
        }
    }

    #[test]
    fn hashes_depend_on_the_salt_and_are_stable() {
        let value = json!("ada@example.com");
        let first = mask_value(&MaskRule::Hash, &value, b"one");
        assert_eq!(first, mask_value(&MaskRule::Hash, &value, b"one"));
        assert_ne!(first, mask_value(&MaskRule::Hash, &value, b"two"));
        let text = first.as_str().unwrap_or_default();
        assert_eq!(text.len(), 18, "{text}");
        assert!(
            text.starts_with("h:") && text[2..].bytes().all(|b| b.is_ascii_hexdigit()),
            "{text}"
        );
    }

    #[test]
    fn rules_are_read_from_their_text_forms() {
        let cases: &[(&str, Result<MaskRule, &str>)] = &[
            ("redact", Ok(MaskRule::Redact)),
            ("hash", Ok(MaskRule::Hash)),
            ("null", Ok(MaskRule::Null)),
            ("keep_email_domain", Ok(MaskRule::KeepEmailDomain)),
            ("keep_last_4", Ok(MaskRule::KeepLast(4))),
            ("keep_last:4", Ok(MaskRule::KeepLast(4))),
            ("keep_last:1", Ok(MaskRule::KeepLast(1))),
            ("keep_last_32", Ok(MaskRule::KeepLast(32))),
            ("  Redact ", Ok(MaskRule::Redact)),
            ("KEEP_LAST:8", Ok(MaskRule::KeepLast(8))),
            ("keep_last:0", Err("needs a count from 1 to 32")),
            ("keep_last:33", Err("needs a count from 1 to 32")),
            ("keep_last:", Err("needs a count")),
            ("keep_last:+4", Err("needs a count")),
            ("keep_last:four", Err("needs a count")),
            ("keep_last", Err("unknown masking rule")),
            ("mask", Err("unknown masking rule \"mask\"; use one of redact, hash, null")),
            ("", Err("unknown masking rule")),
        ];
        for (text, expected) in cases {
            match (parse_rule(text), expected) {
                (Ok(rule), Ok(expected_rule)) => assert_eq!(rule, *expected_rule, "{text:?}"),
                (Err(message), Err(fragment)) => {
                    assert!(message.contains(fragment), "{text:?}: {message}");
                    assert!(message.contains("keep_last:N"), "{text:?}: {message}");
                }
                (got, expected) => {
                    panic!("parse_rule({text:?}) gave {got:?}, expected {expected:?}")
                }
            }
        }
    }

    #[test]
    fn rules_round_trip_through_their_text_and_json_forms() {
        let rules = [
            MaskRule::Redact,
            MaskRule::Hash,
            MaskRule::KeepLast(4),
            MaskRule::Null,
            MaskRule::KeepEmailDomain,
        ];
        for rule in rules {
            assert_eq!(parse_rule(&rule.to_string()), Ok(rule));
            assert_eq!(rule.to_string().parse::<MaskRule>(), Ok(rule));
            let json = serde_json::to_value(rule).ok();
            assert_eq!(json, Some(json!(rule.to_string())));
            let back: Option<MaskRule> = json.and_then(|json| serde_json::from_value(json).ok());
            assert_eq!(back, Some(rule));
        }
        let refused = serde_json::from_value::<MaskRule>(json!("scramble"));
        assert!(refused.is_err_and(|error| error.to_string().contains("unknown masking rule")));
    }

    fn policy() -> MaskingPolicy {
        MaskingPolicy {
            id: "customers".to_owned(),
            columns: BTreeMap::from([
                ("email".to_owned(), MaskRule::KeepEmailDomain),
                ("Phone".to_owned(), MaskRule::KeepLast(4)),
                ("ssn".to_owned(), MaskRule::Redact),
                ("SSN".to_owned(), MaskRule::Null),
                ("notes".to_owned(), MaskRule::Null),
            ]),
            kinds: BTreeMap::new(),
            salt: "pepper".to_owned(),
        }
    }

    #[test]
    fn columns_are_matched_regardless_of_case() {
        let policy = policy();
        let cases = [
            ("email", Some(MaskRule::KeepEmailDomain)),
            ("EMAIL", Some(MaskRule::KeepEmailDomain)),
            ("phone", Some(MaskRule::KeepLast(4))),
            ("Phone", Some(MaskRule::KeepLast(4))),
            ("ssn", Some(MaskRule::Redact)),
            ("SSN", Some(MaskRule::Null)),
            ("Ssn", Some(MaskRule::Null)),
            ("name", None),
            ("e_mail", None),
            ("", None),
        ];
        for (column, expected) in cases {
            assert_eq!(policy.rule_for(column).copied(), expected, "{column:?}");
        }
    }

    #[test]
    fn a_policy_masks_covered_columns_in_place_and_names_them() {
        let policy = policy();
        let columns: Vec<String> = ["id", "Email", "phone", "city", "email"]
            .iter()
            .map(|name| (*name).to_owned())
            .collect();
        let mut rows = vec![
            vec![
                json!(1),
                json!("ada@example.com"),
                json!("+49 30 901820"),
                json!("Berlin"),
                json!("a@b.de"),
            ],
            vec![json!(2), json!(null), json!("123"), json!("Bonn"), json!("x")],
            vec![json!(3)],
        ];
        let masked = policy.apply(&columns, &mut rows);
        assert_eq!(masked, ["Email", "phone", "email"]);
        assert_eq!(
            rows,
            vec![
                vec![
                    json!(1),
                    json!("***@example.com"),
                    json!("*********1820"),
                    json!("Berlin"),
                    json!("***@b.de")
                ],
                vec![json!(2), json!(null), json!("***"), json!("Bonn"), json!("[REDACTED]")],
                vec![json!(3)],
            ]
        );
        let mut no_rows: Vec<Vec<Value>> = Vec::new();
        assert_eq!(policy.apply(&columns, &mut no_rows), ["Email", "phone", "email"]);
        let uncovered: Vec<String> = vec!["id".to_owned(), "city".to_owned()];
        assert!(policy.apply(&uncovered, &mut rows).is_empty());
    }

    #[test]
    fn the_debug_form_of_a_policy_hides_the_salt() {
        let text = format!("{:?}", policy());
        assert!(!text.contains("pepper"), "{text}");
        assert!(text.contains("customers"), "{text}");
    }

    fn config(cases: u32) -> Config {
        Config { cases, failure_persistence: None, ..Config::default() }
    }

    /// Arbitrary text of up to 40 characters, including non-ASCII ones.
    fn any_text() -> impl Strategy<Value = String> {
        prop::collection::vec(any::<char>(), 0..40).prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn redacting_hashing_and_nulling_never_reveal_a_value(
            text in any_text(),
            rule in prop::sample::select(vec![MaskRule::Redact, MaskRule::Hash, MaskRule::Null]),
            salt in prop::collection::vec(any::<u8>(), 0..16),
        ) {
            prop_assume!(text.chars().count() >= 4);
            // A value that is itself a piece of the fixed marker cannot be told apart from it.
            prop_assume!(!REDACTED.contains(text.as_str()));
            // Nor can a value that could be a piece of a hash.
            prop_assume!(!text.chars().all(|c| c.is_ascii_hexdigit() || c == 'h' || c == ':'));
            let masked = mask_value(&rule, &Value::String(text.clone()), &salt);
            let masked_text = masked.as_str().unwrap_or_default();
            prop_assert!(
                !masked_text.contains(text.as_str()),
                "{} on {:?} gave {}", rule, text, masked_text
            );
        }

        #[test]
        fn keeping_the_last_characters_reveals_no_more_than_them(
            text in any_text(),
            count in 0_usize..40,
        ) {
            let masked = mask_value(&MaskRule::KeepLast(count), &Value::String(text.clone()), SALT);
            let masked_text = masked.as_str().unwrap_or_default().to_owned();
            let original: Vec<char> = text.chars().collect();
            let output: Vec<char> = masked_text.chars().collect();
            prop_assert_eq!(output.len(), original.len());
            let revealed = if original.len() <= count { 0 } else { count };
            let hidden = original.len() - revealed;
            prop_assert!(
                output[..hidden].iter().all(|c| *c == '*'),
                "{:?} gave {:?}", text, masked_text
            );
            prop_assert_eq!(&output[hidden..], &original[hidden..]);
        }

        #[test]
        fn keeping_the_email_domain_reveals_nothing_before_the_last_at(
            local in "[a-z0-9._+-]{4,20}",
            domain in "[a-z]{1,10}\\.[a-z]{2,5}",
        ) {
            let address = format!("{local}@{domain}");
            let masked = mask_value(&MaskRule::KeepEmailDomain, &Value::String(address), SALT);
            let masked_text = masked.as_str().unwrap_or_default().to_owned();
            prop_assert_eq!(masked_text, format!("***@{domain}"));
        }
    }
}
