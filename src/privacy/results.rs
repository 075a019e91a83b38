//! A role's masking on the results that PostgreSQL does not mask: Metabase's rows and cards,
//! Weaviate's objects, external tools' structured content and text.
//!
//! By name ([`ResultMask::by_name`]): a policy's column names also match JSON keys at any depth
//! (the whole value under a matching key is masked by the column's rule) and the columns of
//! tables in results (an object with `rows`, an array of arrays, and the column names in
//! `columns`, `cols`, `schema`, `fields` or `headers`, as names or as objects with `name`).
//! A JSON text block is read as JSON and masked the same way.
//!
//! By kind (a policy's `kinds:`): any value of a kind the policy names is masked wherever it
//! appears, a whole string or a piece of text, in structured content, text blocks, errors and
//! (for the SQL tools, whose rows the database masks by name only) a spliced read's bytes. The
//! candidates are found by pattern and confirmed by `sql::pii`'s detectors, the ones
//! `detect_pii` uses: [`find_kinds`].
//!
//! By-name `hash` here uses a key of its own, derived from the policy's salt, never the salt
//! of the SQL views: a tool that echoes what it is sent computes hashes only of that key, so it
//! cannot become a dictionary of the hashes PostgreSQL shows.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::mask::{ColumnRule, MaskRule, MaskingPolicy, REDACTED};
use crate::sql::pii::{self, Locale};

/// A kind of value a policy may mask wherever it appears (`kinds:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ValueKind {
    Email,
    Phone,
    Card,
    Iban,
    Ip,
    NationalId,
}

impl ValueKind {
    pub(crate) const ALL: [ValueKind; 6] = [
        ValueKind::Email,
        ValueKind::Phone,
        ValueKind::Card,
        ValueKind::Iban,
        ValueKind::Ip,
        ValueKind::NationalId,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ValueKind::Email => "email",
            ValueKind::Phone => "phone",
            ValueKind::Card => "card",
            ValueKind::Iban => "iban",
            ValueKind::Ip => "ip",
            ValueKind::NationalId => "national_id",
        }
    }

    /// The rule of a kind listed without one (`kinds: [email, card]`).
    pub(crate) fn default_rule(self) -> MaskRule {
        match self {
            ValueKind::Email => MaskRule::KeepEmailDomain,
            ValueKind::Phone | ValueKind::Card | ValueKind::Iban => MaskRule::KeepLast(4),
            ValueKind::Ip | ValueKind::NationalId => MaskRule::Redact,
        }
    }

    /// Whether `text`, a candidate the pattern found, is a value of this kind.
    fn confirms(self, text: &str) -> bool {
        match self {
            ValueKind::Email => pii::is_email(text),
            ValueKind::Phone => pii::is_phone(text, Locale::Auto),
            ValueKind::Card => pii::is_credit_card(text),
            ValueKind::Iban => pii::is_iban(text),
            ValueKind::Ip => pii::is_ipv4(text) || pii::is_ipv6(text),
            ValueKind::NationalId => pii::is_national_id_like(text, Locale::Auto),
        }
    }
}

impl fmt::Display for ValueKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl FromStr for ValueKind {
    type Err = String;

    fn from_str(text: &str) -> Result<ValueKind, String> {
        ValueKind::ALL.into_iter().find(|kind| kind.as_str() == text.trim()).ok_or_else(|| {
            let known: Vec<&str> = ValueKind::ALL.iter().map(|kind| kind.as_str()).collect();
            format!("unknown kind `{text}`; the kinds are {}", known.join(", "))
        })
    }
}

/// The patterns that find candidates of each kind in text, in the order overlapping
/// candidates are decided (an e-mail address before the phone number inside it).
static CANDIDATES: LazyLock<Vec<(ValueKind, Regex)>> = LazyLock::new(|| {
    let patterns: [(ValueKind, &str); 8] = [
        (ValueKind::Email, r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"),
        (ValueKind::Iban, r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b"),
        (ValueKind::Card, r"\b[0-9](?:[ -]?[0-9]){12,18}\b"),
        (
            ValueKind::NationalId,
            r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b|\b[A-Z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]\b|\b[0-9]{11}\b",
        ),
        (ValueKind::Ip, r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b"),
        (
            ValueKind::Ip,
            r"(?:\b[0-9A-Fa-f]{1,4})?(?:::?[0-9A-Fa-f]{1,4}){2,7}(?:::)?|::(?:[0-9A-Fa-f]{1,4}:?){1,7}",
        ),
        // A phone number in text has a `+` or a separator: a bare run of digits is an id.
        (ValueKind::Phone, r"\+[0-9][0-9 ().-]{5,18}[0-9]"),
        (ValueKind::Phone, r"\(?\b[0-9]{2,5}\)?[ .-][0-9][0-9 .-]{4,14}[0-9]\b"),
    ];
    patterns
        .into_iter()
        .map(|(kind, pattern)| (kind, Regex::new(pattern).expect("a valid pattern")))
        .collect()
});

/// Every value of `kinds` in `text`: byte ranges with their kind, in order, not overlapping.
#[must_use]
pub(crate) fn find_kinds(
    text: &str,
    kinds: &BTreeMap<ValueKind, MaskRule>,
) -> Vec<(usize, usize, ValueKind)> {
    if kinds.is_empty() || !text.bytes().any(|byte| byte.is_ascii_digit() || byte == b'@') {
        return Vec::new();
    }
    let mut found: Vec<(usize, usize, usize, ValueKind)> = Vec::new();
    for (priority, (kind, regex)) in CANDIDATES.iter().enumerate() {
        if !kinds.contains_key(kind) {
            continue;
        }
        for candidate in regex.find_iter(text) {
            let trimmed = candidate.as_str().trim_end_matches(['.', '-', ' ']);
            if kind.confirms(trimmed) {
                found.push((candidate.start(), candidate.start() + trimmed.len(), priority, *kind));
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.cmp(&b.2)).then(b.1.cmp(&a.1)));
    let mut spans = Vec::new();
    let mut at = 0;
    for (start, end, _, kind) in found {
        if start >= at {
            spans.push((start, end, kind));
            at = end;
        }
    }
    spans
}

/// One caller's masking of results that are not SQL.
#[derive(Debug)]
pub(crate) struct ResultMask {
    policy: Arc<MaskingPolicy>,
    /// Whether column names match JSON keys and table columns (not for the SQL tools' rows,
    /// which PostgreSQL masks by name).
    by_name: bool,
    /// The key of this masking's hashes: derived from the policy's salt, not the salt itself.
    key: Vec<u8>,
}

impl ResultMask {
    pub(crate) fn new(policy: Arc<MaskingPolicy>, by_name: bool) -> ResultMask {
        let key = Sha256::new_with_prefix(b"orca-masking-results-v1\0")
            .chain_update(policy.salt.as_bytes())
            .finalize()
            .to_vec();
        ResultMask { policy, by_name, key: hex::encode(key).into_bytes() }
    }

    /// Whether it would change anything.
    pub(crate) fn is_empty(&self) -> bool {
        self.policy.kinds.is_empty() && (!self.by_name || self.policy.columns.is_empty())
    }

    /// The policy's id, for `_meta`.
    pub(crate) fn policy_id(&self) -> &str {
        &self.policy.id
    }

    fn rule(&self, rule: MaskRule) -> ColumnRule {
        ColumnRule::new(rule, &self.key)
    }

    /// Mask a JSON value in place; returns how many values were masked.
    pub(crate) fn value(&self, value: &mut Value) -> usize {
        match value {
            Value::String(text) => self.text_kinds(text),
            Value::Number(number) => match self.policy.kinds.get(&ValueKind::Card) {
                Some(rule) if number.is_u64() && pii::is_credit_card(&number.to_string()) => {
                    self.rule(*rule).mask(value);
                    1
                }
                _ => 0,
            },
            Value::Array(items) => items.iter_mut().map(|item| self.value(item)).sum(),
            Value::Object(fields) => {
                let table = if self.by_name { self.table(fields) } else { None };
                let mut masked = table.unwrap_or(0);
                for (key, item) in fields.iter_mut() {
                    match self.by_name.then(|| self.policy.rule_for(key)).flatten() {
                        Some(rule) if !item.is_null() => {
                            self.rule(*rule).mask(item);
                            masked += 1;
                        }
                        Some(_) => {}
                        // A table's rows were masked with their columns.
                        None if table.is_some() && key == "rows" => {}
                        None => masked += self.value(item),
                    }
                }
                masked
            }
            Value::Null | Value::Bool(_) => 0,
        }
    }

    /// The cells of a table's covered columns, masked by their rules, and the others by kind:
    /// how many, or `None` when the object is no table (its `rows` are then walked like any
    /// value).
    fn table(&self, fields: &mut serde_json::Map<String, Value>) -> Option<usize> {
        let names = table_columns(fields)?;
        let rules: Vec<Option<ColumnRule>> = names
            .iter()
            .map(|name| self.policy.rule_for(name).map(|rule| self.rule(*rule)))
            .collect();
        let Some(Value::Array(rows)) = fields.get_mut("rows") else { return None };
        let mut masked = 0;
        for row in rows.iter_mut() {
            let Value::Array(cells) = row else { continue };
            for (index, cell) in cells.iter_mut().enumerate() {
                match rules.get(index) {
                    Some(Some(rule)) if !cell.is_null() => {
                        rule.mask(cell);
                        masked += 1;
                    }
                    Some(Some(_)) => {}
                    _ => masked += self.value(cell),
                }
            }
        }
        Some(masked)
    }

    /// The values of the policy's kinds in `text`, masked in place; returns how many.
    fn text_kinds(&self, text: &mut String) -> usize {
        let spans = find_kinds(text, &self.policy.kinds);
        if spans.is_empty() {
            return 0;
        }
        let whole = spans.len() == 1 && spans[0].0 == 0 && spans[0].1 == text.len();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for &(start, end, kind) in &spans {
            out.push_str(&text[at..start]);
            let rule = self.policy.kinds[&kind];
            let mut piece = Value::String(text[start..end].to_owned());
            self.rule(rule).mask(&mut piece);
            match piece {
                // `null` replaces a whole string; inside text it is the redaction marker.
                Value::Null if whole => {
                    out.clear();
                    out.push_str(REDACTED);
                }
                Value::String(masked) => out.push_str(&masked),
                _ => out.push_str(REDACTED),
            }
            at = end;
        }
        out.push_str(&text[at..]);
        *text = out;
        spans.len()
    }

    /// A text block: JSON text masked as JSON (by name and kind), other text by kind. Returns
    /// how many values were masked.
    pub(crate) fn text(&self, text: &mut String) -> usize {
        let trimmed = text.trim_start();
        if self.by_name
            && (trimmed.starts_with('{') || trimmed.starts_with('['))
            && let Ok(mut value) = serde_json::from_str::<Value>(text)
        {
            let masked = self.value(&mut value);
            if masked > 0 {
                let pretty = text.contains("\n ");
                *text = if pretty {
                    serde_json::to_string_pretty(&value)
                } else {
                    serde_json::to_string(&value)
                }
                .expect("a JSON value serializes");
            }
            return masked;
        }
        self.text_kinds(text)
    }

    /// A JSON value encoded by `serde_json` in `chunks` (a spliced read): every string and
    /// number of the policy's kinds masked (object keys are left as they are), or `None` when
    /// nothing is. The bytes are joined once; no `Value` tree is built.
    #[must_use]
    pub(crate) fn json_chunks(&self, chunks: &[Bytes]) -> Option<(Vec<Bytes>, usize)> {
        if self.policy.kinds.is_empty() {
            return None;
        }
        let joined = chunks.concat();
        let mut out: Vec<u8> = Vec::new();
        let mut copied = 0;
        let mut masked = 0;
        let mut at = 0;
        while at < joined.len() {
            match joined[at] {
                b'"' => {
                    let end = string_end(&joined, at);
                    let is_key =
                        joined[end..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b':');
                    if !is_key
                        && let Ok(Value::String(mut text)) =
                            serde_json::from_slice::<Value>(&joined[at..end])
                    {
                        let count = self.text_kinds(&mut text);
                        if count > 0 {
                            out.extend_from_slice(&joined[copied..at]);
                            out.extend_from_slice(
                                serde_json::to_string(&text)
                                    .expect("a string serializes")
                                    .as_bytes(),
                            );
                            copied = end;
                            masked += count;
                        }
                    }
                    at = end;
                }
                b'-' | b'0'..=b'9' => {
                    let end = at
                        + joined[at..]
                            .iter()
                            .position(|b| {
                                !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                            })
                            .unwrap_or(joined.len() - at);
                    if let Some(rule) = self.policy.kinds.get(&ValueKind::Card)
                        && let Ok(digits) = std::str::from_utf8(&joined[at..end])
                        && digits.bytes().all(|b| b.is_ascii_digit())
                        && pii::is_credit_card(digits)
                    {
                        let mut value = Value::String(digits.to_owned());
                        self.rule(*rule).mask(&mut value);
                        out.extend_from_slice(&joined[copied..at]);
                        out.extend_from_slice(
                            serde_json::to_string(&value).expect("a value serializes").as_bytes(),
                        );
                        copied = end;
                        masked += 1;
                    }
                    at = end;
                }
                _ => at += 1,
            }
        }
        if masked == 0 {
            return None;
        }
        out.extend_from_slice(&joined[copied..]);
        Some((vec![Bytes::from(out)], masked))
    }
}

/// The index just past the string that starts (with its quote) at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut at = start + 1;
    while let Some(offset) = memchr::memchr2(b'"', b'\\', &bytes[at..]) {
        at += offset;
        if bytes[at] == b'\\' {
            at += 2;
        } else {
            return at + 1;
        }
    }
    bytes.len()
}

/// The column names of a table in a result, if the object is one.
fn table_columns(fields: &serde_json::Map<String, Value>) -> Option<Vec<String>> {
    if !fields.get("rows").is_some_and(is_table_rows) {
        return None;
    }
    ["columns", "cols", "schema", "fields", "headers"].iter().find_map(|key| {
        let Value::Array(columns) = fields.get(*key)? else { return None };
        let names: Vec<String> = columns
            .iter()
            .map(|column| match column {
                Value::String(name) => Some(name.clone()),
                Value::Object(column) => {
                    column.get("name").and_then(Value::as_str).map(str::to_owned)
                }
                _ => None,
            })
            .collect::<Option<_>>()?;
        (!names.is_empty()).then_some(names)
    })
}

/// Rows of a table: an array of arrays.
fn is_table_rows(rows: &Value) -> bool {
    matches!(rows, Value::Array(rows) if rows.first().is_some_and(Value::is_array))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(columns: &[(&str, MaskRule)], kinds: &[ValueKind]) -> Arc<MaskingPolicy> {
        Arc::new(MaskingPolicy {
            id: "p".to_owned(),
            columns: columns.iter().map(|(name, rule)| ((*name).to_owned(), *rule)).collect(),
            kinds: kinds.iter().map(|kind| (*kind, kind.default_rule())).collect(),
            salt: "salt".to_owned(),
        })
    }

    fn every_kind() -> Arc<MaskingPolicy> {
        policy(&[], &ValueKind::ALL)
    }

    /// Each case: a text and what it must become under every kind's default rule.
    fn check(cases: &[(&str, &str)]) {
        let policy = every_kind();
        let mask = ResultMask::new(policy.clone(), true);
        for (text, expected) in cases {
            let mut masked = (*text).to_owned();
            mask.text_kinds(&mut masked);
            assert_eq!(masked, *expected, "{text:?}");
        }
    }

    #[test]
    fn each_kind_is_found_in_text_and_masked_by_its_rule() {
        check(&[
            ("write to ada@example.com today", "write to ***@example.com today"),
            ("card 4111 1111 1111 1111, thanks", "card ***************1111, thanks"),
            ("card 4111-1111-1111-1112 fails Luhn", "card 4111-1111-1111-1112 fails Luhn"),
            ("IBAN DE89370400440532013000.", "IBAN ******************3000."),
            ("from 203.0.113.9 and 2001:db8::1", "from [REDACTED] and [REDACTED]"),
            ("version 1.2.3.400 at 12:30:45", "version 1.2.3.400 at 12:30:45"),
            ("call +1 415 555 0100 now", "call ***********0100 now"),
            ("ssn 078-05-1120 on file", "ssn [REDACTED] on file"),
            ("order 1234567 shipped 2024-01-15", "order 1234567 shipped 2024-01-15"),
        ]);
    }

    #[test]
    fn kinds_are_masked_in_structured_content_and_numbers_are_checked_for_cards() {
        let policy = policy(&[], &[ValueKind::Email, ValueKind::Card]);
        let mut value = json!({"people": [{"contact": "ada@example.com", "card": 5_555_555_555_554_444_u64, "id": 1234, "note": "mail alan@example.net"}]});
        let masked = ResultMask::new(policy.clone(), true).value(&mut value);
        assert_eq!(masked, 3);
        assert_eq!(
            value,
            json!({"people": [{"contact": "***@example.com", "card": "************4444", "id": 1234, "note": "mail ***@example.net"}]})
        );
    }

    #[test]
    fn names_match_keys_at_any_depth_and_table_columns() {
        let policy = policy(&[("email", MaskRule::Redact), ("Last_Name", MaskRule::Hash)], &[]);
        let mask = ResultMask::new(policy.clone(), true);
        let mut value = json!({
            "objects": [{"properties": {"EMAIL": "ada@example.com", "name": "Ada", "address": {"last_name": "Lovelace"}}}],
            "data": {"cols": [{"name": "id"}, {"name": "email"}], "rows": [[1, "ada@example.com"], [2, null]]},
            "table": {"columns": ["email", "city"], "rows": [["x@y.org", "Oslo"]]},
            "email": null
        });
        assert_eq!(mask.value(&mut value), 4);
        let hashed =
            value["objects"][0]["properties"]["address"]["last_name"].as_str().unwrap().to_owned();
        assert!(hashed.starts_with("h:") && hashed.len() == 18, "{hashed}");
        assert_eq!(
            value,
            json!({
                "objects": [{"properties": {"EMAIL": "[REDACTED]", "name": "Ada", "address": {"last_name": hashed}}}],
                "data": {"cols": [{"name": "id"}, {"name": "email"}], "rows": [[1, "[REDACTED]"], [2, null]]},
                "table": {"columns": ["email", "city"], "rows": [["[REDACTED]", "Oslo"]]},
                "email": null
            })
        );
        // Without names (the SQL tools' rows), keys are left alone.
        let mut value = json!({"email": "ada@example.com"});
        assert_eq!(ResultMask::new(policy.clone(), false).value(&mut value), 0);
    }

    #[test]
    fn a_hash_of_a_result_never_equals_the_databases_hash_of_the_same_value() {
        let policy = policy(&[("email", MaskRule::Hash)], &[]);
        let mut value = json!({"email": "ada@example.com"});
        ResultMask::new(policy.clone(), true).value(&mut value);
        let database = super::super::mask::mask_value(
            &MaskRule::Hash,
            &json!("ada@example.com"),
            policy.salt.as_bytes(),
        );
        assert_ne!(value["email"], database);
    }

    #[test]
    fn json_text_is_masked_as_json_and_a_spliced_read_in_its_bytes() {
        let policy = policy(&[("email", MaskRule::Redact)], &[ValueKind::Card, ValueKind::Email]);
        let mask = ResultMask::new(policy.clone(), true);
        let mut text = r#"{"email":"ada@example.com","note":"card 4111111111111111"}"#.to_owned();
        assert_eq!(mask.text(&mut text), 2);
        assert_eq!(text, r#"{"email":"[REDACTED]","note":"card ************1111"}"#);

        let rows = json!([[1, "ada@example.com", 4_111_111_111_111_111_u64, {"email": "kept as a key", "x": "a\"b ada@example.com"}], [2, "none", 42, null]]);
        let encoded = serde_json::to_vec(&rows).unwrap();
        let chunks: Vec<Bytes> = encoded.chunks(5).map(Bytes::copy_from_slice).collect();
        let sql = ResultMask::new(policy.clone(), false);
        let (out, masked) = sql.json_chunks(&chunks).expect("masked");
        let mut expected = rows.clone();
        assert_eq!(sql.value(&mut expected), masked);
        let back: Value = serde_json::from_slice(&out.concat()).unwrap();
        assert_eq!(back, expected);
        assert_eq!(back[0][1], "***@example.com");
        assert_eq!(back[0][3]["x"], "a\"b ***@example.com");
    }
}
