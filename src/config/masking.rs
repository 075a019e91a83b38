//! `masking:` in `orca.yaml`: policies by id, each a map of column names to rules, and
//! optionally `kinds:`, the kinds of value masked wherever they appear in results that
//! PostgreSQL does not mask (a list of kinds with their default rules, or a map of kinds to
//! rules). The roles that name a policy get its kinds here, once `auth:` is read.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::AuthConfig;
use crate::privacy::mask::{MaskRule, parse_rule};
use crate::privacy::results::ValueKind;

/// Column rules by policy.
pub(crate) type Columns = BTreeMap<String, BTreeMap<String, MaskRule>>;
/// Kind rules by policy.
pub(crate) type Kinds = BTreeMap<String, BTreeMap<ValueKind, MaskRule>>;

/// A rule as written: text, or a YAML `null` (unquoted), the `null` rule.
fn rule(value: &Value) -> Result<MaskRule, String> {
    match value {
        Value::Null => Ok(MaskRule::Null),
        Value::String(text) => parse_rule(text),
        other => parse_rule(&other.to_string()),
    }
}

fn kinds(value: &Value, at: &str, errors: &mut Vec<String>) -> BTreeMap<ValueKind, MaskRule> {
    let mut kinds = BTreeMap::new();
    let mut add =
        |name: &str, rule: Result<MaskRule, String>| match (name.parse::<ValueKind>(), rule) {
            (Ok(kind), Ok(rule)) => {
                kinds.insert(kind, rule);
            }
            (Err(message), _) | (_, Err(message)) => errors.push(format!("{at}.{name}: {message}")),
        };
    match value {
        Value::Array(names) => {
            for name in names {
                let name = name.as_str().unwrap_or_default();
                let default = name.parse::<ValueKind>().map(ValueKind::default_rule);
                add(name, default);
            }
        }
        Value::Object(map) => {
            for (name, written) in map {
                add(name, rule(written));
            }
        }
        _ => errors.push(format!(
            "{at}: a list of kinds ([email, card]) or a map of kinds to rules ({{email: redact}})"
        )),
    }
    kinds
}

/// The policies of `masking:`.
pub(super) fn load(
    value: Option<&Value>,
    file: &str,
    errors: &mut Vec<String>,
) -> (Columns, Kinds) {
    let mut columns = Columns::new();
    let mut all_kinds = Kinds::new();
    let Some(value) = value.filter(|value| !value.is_null()) else { return (columns, all_kinds) };
    let Value::Object(policies) = value else {
        errors.push(format!("{file}: masking: a map of policy names to their columns"));
        return (columns, all_kinds);
    };
    // In the order of their names, as the errors are reported.
    let policies: BTreeMap<&String, &Value> = policies.iter().collect();
    for (policy, entries) in policies {
        let at = format!("{file}: masking.{policy}");
        let Value::Object(entries) = entries else {
            errors.push(format!("{at}: a map of column names to rules"));
            continue;
        };
        let mut rules = BTreeMap::new();
        let mut policy_kinds = BTreeMap::new();
        for (column, written) in entries {
            if column == "kinds" {
                policy_kinds = kinds(written, &format!("{at}.kinds"), errors);
                continue;
            }
            match rule(written) {
                Ok(rule) => {
                    rules.insert(column.clone(), rule);
                }
                Err(message) => errors.push(format!("{at}.{column}: {message}")),
            }
        }
        if entries.is_empty() {
            errors.push(format!("{at}: a policy needs at least one column or kind"));
        }
        columns.insert(policy.clone(), rules);
        all_kinds.insert(policy.clone(), policy_kinds);
    }
    (columns, all_kinds)
}

/// Give each role's masking policy the kinds of its policy.
pub(super) fn give_kinds(auth: &mut AuthConfig, kinds: &Kinds) {
    for role in auth.roles.values_mut() {
        if let Some(policy) = &role.masking
            && let Some(kinds) = kinds.get(&policy.id).filter(|kinds| !kinds.is_empty())
        {
            let mut with_kinds = (**policy).clone();
            with_kinds.kinds = kinds.clone();
            role.masking = Some(Arc::new(with_kinds));
        }
    }
    for key in &mut auth.api_keys {
        if let Some(role) = key.role.as_ref().and_then(|role| auth.roles.get(role)) {
            key.principal.masking = role.masking.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_are_read_as_a_list_with_default_rules_or_as_a_map_and_checked() {
        let value = json!({
            "listed": {"email": "redact", "kinds": ["email", "card", "ip"]},
            "mapped": {"kinds": {"phone": "keep_last:2", "national_id": null}},
            "wrong": {"kinds": {"postcode": "redact", "iban": "scramble"}},
            "empty": {}
        });
        let mut errors = Vec::new();
        let (columns, kinds) = load(Some(&value), "orca.yaml", &mut errors);
        assert_eq!(columns["listed"]["email"], MaskRule::Redact);
        assert!(columns["mapped"].is_empty());
        assert_eq!(
            kinds["listed"],
            BTreeMap::from([
                (ValueKind::Email, MaskRule::KeepEmailDomain),
                (ValueKind::Card, MaskRule::KeepLast(4)),
                (ValueKind::Ip, MaskRule::Redact),
            ])
        );
        assert_eq!(
            kinds["mapped"],
            BTreeMap::from([
                (ValueKind::Phone, MaskRule::KeepLast(2)),
                (ValueKind::NationalId, MaskRule::Null)
            ])
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[0].contains("masking.empty: a policy needs at least one column or kind"),
            "{errors:?}"
        );
        assert!(errors[2].contains("masking.wrong.kinds.iban: unknown masking rule"), "{errors:?}");
        assert!(errors[1].contains("masking.wrong.kinds.postcode: unknown kind `postcode`; the kinds are email, phone, card, iban, ip, national_id"), "{errors:?}");
    }
}
