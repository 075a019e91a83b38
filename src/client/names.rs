//! Tool names every provider accepts (`^[a-zA-Z0-9_-]{1,64}$`), and the map back to the
//! server's names. A name that is valid and unique is kept; one that had to change, or that
//! would collide with another, gets `_` and 8 hex digits of its SHA-256 as a suffix, so the
//! same tool gets the same name in every run whatever the order of the list.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

/// The longest name the providers accept (OpenAI's limit; Anthropic takes 128).
pub(crate) const MAX_NAME: usize = 64;
/// `_` and 8 hex digits.
const SUFFIX: usize = 9;

/// Cleaned names and the original names they stand for, both ways.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameMap {
    to_original: BTreeMap<String, String>,
    to_clean: HashMap<String, String>,
}

impl NameMap {
    /// Names for `originals` (in any order; duplicates are listed once).
    pub fn new<'a>(originals: impl IntoIterator<Item = &'a str>) -> NameMap {
        let mut unique: Vec<&str> = originals.into_iter().collect();
        unique.sort_unstable();
        unique.dedup();
        let cleaned: Vec<String> = unique.iter().map(|name| clean(name)).collect();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for name in &cleaned {
            *counts.entry(name.as_str()).or_default() += 1;
        }
        let mut map = NameMap::default();
        for (original, candidate) in unique.iter().zip(&cleaned) {
            let changed = candidate != original || candidate.len() > MAX_NAME;
            let name = if changed || counts[candidate.as_str()] > 1 {
                hashed(candidate, original, 0)
            } else {
                candidate.clone()
            };
            map.insert(original, name);
        }
        map
    }

    fn insert(&mut self, original: &str, mut name: String) {
        // A hashed name equal to another tool's kept name: extend the hash until it is free.
        let mut round = 1;
        while self.to_original.contains_key(&name) {
            name = hashed(&clean(original), original, round);
            round += 1;
        }
        self.to_original.insert(name.clone(), original.to_owned());
        self.to_clean.insert(original.to_owned(), name);
    }

    /// Record one pair as it is (for a map restricted to some tools).
    pub(crate) fn insert_pair(&mut self, cleaned: &str, original: &str) {
        self.to_original.insert(cleaned.to_owned(), original.to_owned());
        self.to_clean.insert(original.to_owned(), cleaned.to_owned());
    }

    /// The server's name for a cleaned name.
    pub fn original<'a>(&'a self, cleaned: &str) -> Option<&'a str> {
        self.to_original.get(cleaned).map(String::as_str)
    }

    /// The cleaned name of a server's tool.
    pub fn cleaned<'a>(&'a self, original: &str) -> Option<&'a str> {
        self.to_clean.get(original).map(String::as_str)
    }

    /// (cleaned, original) pairs, by cleaned name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.to_original.iter().map(|(clean, original)| (clean.as_str(), original.as_str()))
    }
}

/// Every character outside `[A-Za-z0-9_-]` replaced by `_`; `_` for an empty name.
fn clean(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || character == '_' || character == '-' {
                character
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() { "_".to_owned() } else { cleaned }
}

/// The cleaned name cut to leave room for the suffix, then `_` and the hash of the original.
fn hashed(cleaned: &str, original: &str, round: usize) -> String {
    let mut hasher = Sha256::new();
    hasher.update(original.as_bytes());
    if round > 0 {
        hasher.update(round.to_le_bytes());
    }
    let digest = hex::encode(hasher.finalize());
    let stem: String = cleaned.chars().take(MAX_NAME - SUFFIX).collect();
    format!("{stem}_{}", &digest[..8])
}

/// Whether a name is one every provider accepts.
#[cfg(test)]
pub(crate) fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_unique_names_are_kept_and_others_get_a_stable_hash() {
        let long = "a".repeat(80);
        let names = ["echo", "db.query", "db_query", long.as_str(), "x/y z"];
        let map = NameMap::new(names);
        let reversed = NameMap::new(names.iter().rev().copied());
        assert_eq!(map, reversed, "the order of the list does not matter");
        assert_eq!(map.cleaned("echo"), Some("echo"));
        for name in names {
            let cleaned = map.cleaned(name).unwrap();
            assert!(is_valid(cleaned), "{cleaned}");
            assert_eq!(map.original(cleaned), Some(name));
        }
        // `db.query` cleans to `db_query`, which another tool has: both are hashed.
        assert_ne!(map.cleaned("db_query"), Some("db_query"));
        assert!(map.cleaned("db.query").unwrap().starts_with("db_query_"));
        assert_eq!(map.cleaned(&long).unwrap().len(), MAX_NAME);
        assert_eq!(map.iter().count(), names.len());
    }
}
