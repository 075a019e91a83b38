//! Privacy: what a caller may see of the values orca reads. `mask.rs` holds masking policies
//! (column name -> rule) and the rules themselves; `reads.rs` checks, before a statement runs
//! for a caller with a masking policy, that every masked column can only reach the result as
//! itself, as an output column of the top-level `SELECT` that is masked cell by cell while the
//! rows are decoded.
//!
//! This room sits at the floor of `sql`: it uses `sql` (the [`crate::sql::CellMask`] a read
//! applies) and `sql` never uses it; the servers and the configuration use both.

pub(crate) mod mask;
pub(crate) mod reads;

use std::sync::Arc;

use serde_json::Value;

use mask::{ColumnRule, MaskingPolicy};

impl crate::sql::CellMask for MaskingPolicy {
    fn column(&self, name: &str) -> Option<Box<dyn crate::sql::ColumnMask>> {
        let rule = self.rule_for(name)?;
        Some(Box::new(ColumnRule::new(*rule, self.salt.as_bytes())))
    }
}

impl crate::sql::ColumnMask for ColumnRule {
    fn mask(&self, cell: &mut Value) {
        ColumnRule::mask(self, cell);
    }
}

/// The salt of the masking policy `id`, derived from the orca secret: stable for one secret
/// and policy, so equal values hash alike across calls and tools.
#[must_use]
pub(crate) fn salt(secret: &crate::sql::Secret, id: &str) -> String {
    hex::encode(secret.mac(b"orca-masking-v1", &[id.as_bytes()]))
}

/// The masking of a caller holding several roles, given each role's policy (`None`: the role
/// masks nothing). Roles add permissions, so when one of them masks nothing, nothing is
/// masked; when every one has a policy, a column is masked when any of them masks it, by the
/// rule (and salt) of the first policy that names it. One policy is kept as it is.
#[must_use]
pub(crate) fn combine(
    policies: impl IntoIterator<Item = Option<Arc<MaskingPolicy>>>,
) -> Option<Arc<MaskingPolicy>> {
    let mut held: Vec<Arc<MaskingPolicy>> = Vec::new();
    for policy in policies {
        let policy = policy?;
        if !held.iter().any(|known| known.id == policy.id) {
            held.push(policy);
        }
    }
    if held.len() <= 1 {
        return held.pop();
    }
    let mut combined = MaskingPolicy {
        id: held.iter().map(|policy| policy.id.as_str()).collect::<Vec<_>>().join("+"),
        columns: std::collections::BTreeMap::new(),
        salt: held[0].salt.clone(),
    };
    for policy in &held {
        for (column, rule) in &policy.columns {
            if combined.rule_for(column).is_none() {
                combined.columns.insert(column.clone(), *rule);
            }
        }
    }
    Some(Arc::new(combined))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::CellMask;
    use mask::MaskRule;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn policy(id: &str, columns: &[(&str, MaskRule)]) -> Option<Arc<MaskingPolicy>> {
        Some(Arc::new(MaskingPolicy {
            id: id.to_owned(),
            columns: columns.iter().map(|(name, rule)| ((*name).to_owned(), *rule)).collect(),
            salt: format!("salt-{id}"),
        }))
    }

    #[test]
    fn roles_combine_their_masking_and_one_without_masking_lifts_it() {
        let people = policy("people", &[("email", MaskRule::Redact), ("phone", MaskRule::Null)]);
        let billing = policy("billing", &[("EMAIL", MaskRule::Hash), ("iban", MaskRule::Redact)]);
        assert_eq!(combine([]), None);
        assert_eq!(combine([None]), None);
        assert_eq!(combine([people.clone(), None]), None);
        assert_eq!(combine([people.clone()]), people);
        assert_eq!(combine([people.clone(), people.clone()]), people);
        let both = combine([people, billing]).expect("two policies combine");
        assert_eq!(both.id, "people+billing");
        assert_eq!(both.salt, "salt-people");
        assert_eq!(
            both.columns,
            BTreeMap::from([
                ("email".to_owned(), MaskRule::Redact),
                ("iban".to_owned(), MaskRule::Redact),
                ("phone".to_owned(), MaskRule::Null),
            ])
        );
    }

    #[test]
    fn a_policy_masks_the_cells_of_the_output_columns_it_names() {
        let people = policy("people", &[("email", MaskRule::KeepEmailDomain)]).expect("policy");
        assert!(people.column("first_name").is_none());
        for name in ["Email", "EMAIL", "email"] {
            let column = people.column(name).expect("a covered column");
            let mut cell = json!("ada@example.com");
            column.mask(&mut cell);
            assert_eq!(cell, json!("***@example.com"), "{name}");
        }
    }

    #[test]
    fn a_column_masks_cells_as_the_rule_does_one_value_at_a_time() {
        let people = policy("people", &[("secret", MaskRule::Hash), ("note", MaskRule::Redact)])
            .expect("policy");
        let values = [
            json!("ada"),
            json!("a much longer value than the hash itself"),
            json!(7),
            json!(null),
            json!(""),
        ];
        for (name, rule) in [("secret", MaskRule::Hash), ("note", MaskRule::Redact)] {
            let column = people.column(name).expect("a covered column");
            for value in &values {
                let mut cell = value.clone();
                column.mask(&mut cell);
                assert_eq!(
                    cell,
                    mask::mask_value(&rule, value, people.salt.as_bytes()),
                    "{name} {value}"
                );
            }
        }
    }
}
