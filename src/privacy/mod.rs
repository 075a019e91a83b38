//! Privacy: what a caller may see of the values orca reads. `mask.rs` holds masking policies
//! (column name -> rule, kind of value -> rule) and the rules themselves; `results.rs` applies
//! them to the results PostgreSQL does not mask (Metabase, Weaviate, external servers; and by
//! kind only, the SQL tools' rows). The guarantee is PostgreSQL's: `setup.rs`
//! prepares, for each policy, a database role that can read nothing but views computing the
//! masked values, and `session.rs` keeps, per target database, the connections logged in as
//! each such role, where every statement of a masked caller runs. `reads.rs` is a courtesy on
//! top (`sql.refuse_masked_sql`): it refuses, with a clear error, SQL that uses a masked column
//! other than as itself, which would only ever see masked values anyway.
//!
//! This room sits at the floor of `sql`: it uses `sql` (the parser, identifiers, the pools'
//! options) and `sql` never uses it; the servers and the configuration use both.
//!
//! # Design notes
//!
//! What a caller may see of the values orca reads, at the floor of `sql` (it uses `sql`; `sql`
//! never uses it; `config` and the servers use both). `mask.rs` holds the masking rules and
//! policies (`MaskingPolicy`, `mask_value`, salted hashes); `mod.rs` implements `sql::CellMask` for
//! a policy, derives a policy's salt from the orca secret and combines the policies of several
//! roles (none when one role has none; else every column any masks). `reads.rs` is the check a read
//! of a masked caller passes before it runs: it parses the SQL with pg_query and walks the
//! serialized tree, and lets a masked column reach the result only as a bare column of the
//! top-level `SELECT` list under its own name (or through `*` / `t.*` there); any other reference,
//! a renaming, a whole-row reference, a star inside an expression or under a set operation, a
//! renaming column list, `USING` on a masked column, a `NATURAL` join, `RETURNING` or a positional
//! `ORDER BY`/`GROUP BY` onto a masked or star output is refused. `config` gives each `auth.roles`
//! entry its policy and `Principal::with_roles` the combination; `cli` salts them when orca starts;
//! `servers::sql_common::caller_mask` runs the check and hands the policy to the read. PII
//! detection (`sql/pii.rs`) stays in `sql`.

pub(crate) mod mask;
pub(crate) mod reads;
pub(crate) mod results;
pub(crate) mod session;
pub(crate) mod setup;

use std::sync::Arc;

use mask::MaskingPolicy;

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
        kinds: std::collections::BTreeMap::new(),
        salt: held[0].salt.clone(),
    };
    for policy in &held {
        for (column, rule) in &policy.columns {
            if combined.rule_for(column).is_none() {
                combined.columns.insert(column.clone(), *rule);
            }
        }
        for (kind, rule) in &policy.kinds {
            combined.kinds.entry(*kind).or_insert(*rule);
        }
    }
    Some(Arc::new(combined))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mask::MaskRule;
    use std::collections::BTreeMap;

    fn policy(id: &str, columns: &[(&str, MaskRule)]) -> Option<Arc<MaskingPolicy>> {
        Some(Arc::new(MaskingPolicy {
            id: id.to_owned(),
            columns: columns.iter().map(|(name, rule)| ((*name).to_owned(), *rule)).collect(),
            kinds: BTreeMap::new(),
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
}
