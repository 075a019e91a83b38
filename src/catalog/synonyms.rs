//! The synonym source that ships offline: `synonyms.txt`, derived from WordNet 3.0 (synonyms and
//! derivationally related forms) by `scripts/derive-synonyms` (Princeton's WordNet licence,
//! quoted at the top of the file), plus `vocabulary.txt`, the short forms people type for
//! software words (`pr`, `repo`, `k8s`), written for this project. Both are read when a
//! `Synonyms` is built and kept as stems.

use std::collections::{HashMap, HashSet};

use super::text::Terms;

const WORDNET: &str = include_str!("synonyms.txt");
const VOCABULARY: &str = include_str!("vocabulary.txt");

/// Stem to the stems it may stand for.
#[derive(Debug, Default)]
pub(crate) struct Synonyms {
    related: HashMap<String, Vec<String>>,
}

impl Synonyms {
    /// The shipped lists.
    pub(crate) fn shipped(terms: &Terms) -> Synonyms {
        let mut synonyms = Synonyms::from_lines(WORDNET, terms);
        synonyms.merge(Synonyms::from_lines(VOCABULARY, terms));
        synonyms
    }

    /// Lines of `word synonym synonym ...`; `#` starts a comment line. A synonym written with
    /// spaces replaced by `_` (`pull_request`) stands for all its words.
    pub(crate) fn from_lines(text: &str, terms: &Terms) -> Synonyms {
        let mut related: HashMap<String, HashSet<String>> = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let Some(word) = words.next() else { continue };
            let key = terms.stem(&word.to_lowercase());
            let entry = related.entry(key.clone()).or_default();
            for synonym in words {
                for stem in terms.of(&synonym.replace('_', " ")) {
                    if stem != key {
                        entry.insert(stem);
                    }
                }
            }
        }
        Synonyms {
            related: related
                .into_iter()
                .map(|(key, stems)| {
                    let mut stems: Vec<String> = stems.into_iter().collect();
                    stems.sort();
                    (key, stems)
                })
                .collect(),
        }
    }

    fn merge(&mut self, other: Synonyms) {
        for (key, stems) in other.related {
            let entry = self.related.entry(key).or_default();
            for stem in stems {
                if !entry.contains(&stem) {
                    entry.push(stem);
                }
            }
        }
    }

    /// The stems `stem` may stand for (none when the lists do not know it).
    pub(crate) fn of(&self, stem: &str) -> &[String] {
        self.related.get(stem).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_lists_relate_everyday_words_to_tool_words() {
        let terms = Terms::default();
        let synonyms = Synonyms::shipped(&terms);
        let cases =
            [("remove", "withdraw"), ("purchase", "buy"), ("pr", "pull"), ("repo", "repositori")];
        for (word, expected) in cases {
            let stems = synonyms.of(&terms.stem(word));
            assert!(stems.iter().any(|stem| stem == expected), "{word}: {stems:?}");
        }
    }

    #[test]
    fn shipped_lists_join_derived_forms_that_stemming_keeps_apart() {
        let terms = Terms::default();
        let synonyms = Synonyms::shipped(&terms);
        let cases = [
            ("extract", "extractor"),
            ("subscribe", "subscription"),
            ("analyze", "analysis"),
            ("buy", "buyer"),
        ];
        for (word, derived) in cases {
            let (stem, derived) = (terms.stem(word), terms.stem(derived));
            assert_ne!(stem, derived, "{word}: the stemmer alone joins them");
            assert!(synonyms.of(&stem).contains(&derived), "{word}: {:?}", synonyms.of(&stem));
        }
    }

    #[test]
    fn lines_are_stemmed_and_comments_skipped() {
        let terms = Terms::default();
        let synonyms = Synonyms::from_lines("# a comment\ndeleting removing erasing\n", &terms);
        assert_eq!(synonyms.of("delet"), ["eras", "remov"]);
        assert!(synonyms.of("comment").is_empty());
    }
}
