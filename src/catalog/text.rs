//! How tool texts and queries become terms: identifiers split (`snake_case`, `kebab-case`,
//! `camelCase`), lowercased, English stop words dropped, and each word reduced to its Snowball
//! (Porter 2) stem, so that `issues`, `issue` and `issuing` meet.

use rust_stemmers::{Algorithm, Stemmer};

/// Words that say nothing about which tool is meant, in tool descriptions or in questions.
const STOP_WORDS: &[&str] = &[
    "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "doe", "for", "from", "had", "has", "have", "how", "i",
    "if", "in", "into", "is", "it", "its", "let", "me", "my", "of", "on", "or", "our", "please",
    "should", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "those", "to", "us", "was", "we", "were", "what", "when", "where", "which", "who",
    "whom", "why", "will", "with", "would", "you", "your", "want", "need", "now", "just",
];

/// Splits and stems text; one per index, since the Snowball stemmer holds no state worth sharing.
pub(crate) struct Terms {
    stemmer: Stemmer,
}

impl std::fmt::Debug for Terms {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Terms")
    }
}

impl Default for Terms {
    fn default() -> Terms {
        Terms { stemmer: Stemmer::create(Algorithm::English) }
    }
}

impl Terms {
    /// The stem of one lowercase word.
    pub(crate) fn stem(&self, word: &str) -> String {
        self.stemmer.stem(word).into_owned()
    }

    /// The stemmed terms of `text`, in order, stop words and one-letter words left out.
    pub(crate) fn of(&self, text: &str) -> Vec<String> {
        self.of_words(&words(text))
    }

    /// The stemmed terms of `words` (as [`words`] gives them), in order, stop words and
    /// one-letter words left out.
    pub(crate) fn of_words(&self, words: &[String]) -> Vec<String> {
        words
            .iter()
            .filter(|word| word.chars().nth(1).is_some() && !STOP_WORDS.contains(&word.as_str()))
            .map(|word| self.stem(word))
            .collect()
    }
}

/// The lowercase words of `text`: split at everything that is not a letter or a digit, and
/// identifiers also at camelCase humps (`listMessages` gives `list`, `messages`; `HTTPServer`
/// gives `http`, `server`). Digits stay attached to their word.
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|piece| !piece.is_empty())
        .flat_map(crate::context::bm25::camel_humps)
        .map(str::to_lowercase)
        .collect()
}

/// The words of a tool's name without its server's own prefix: `notion_append_block_children`
/// of the server `notion` is `append block children`, since the server's name is a field of
/// its own and would otherwise count twice for every tool of that server.
pub(crate) fn name_words(name: &str, server: &str) -> Vec<String> {
    let mut name_words = words(name);
    let server_words = words(server);
    if !server_words.is_empty()
        && name_words.len() > server_words.len()
        && name_words[..server_words.len()] == server_words[..]
    {
        name_words.drain(..server_words.len());
    }
    name_words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_at_underscores_hyphens_and_humps() {
        let cases: &[(&str, &[&str])] = &[
            ("create_pull_request", &["create", "pull", "request"]),
            ("listMessages", &["list", "messages"]),
            ("fetch-businesses-events", &["fetch", "businesses", "events"]),
            ("HTTPServer v2", &["http", "server", "v2"]),
            ("get-schema", &["get", "schema"]),
        ];
        for (text, expected) in cases {
            assert_eq!(words(text), *expected, "{text}");
        }
    }

    #[test]
    fn a_server_prefix_leaves_the_name() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("notion_append_block_children", "notion", &["append", "block", "children"]),
            ("ref_read_url", "ref", &["read", "url"]),
            ("get_pods", "kubectl", &["get", "pods"]),
            ("notion", "notion", &["notion"]),
        ];
        for (name, server, expected) in cases {
            assert_eq!(name_words(name, server), *expected, "{name}");
        }
    }

    #[test]
    fn words_are_stemmed_and_stop_words_dropped() {
        let terms = Terms::default();
        let cases: &[(&str, &[&str])] = &[
            ("list the issues", &["list", "issu"]),
            ("Issue", &["issu"]),
            ("deploying deployments", &["deploy", "deploy"]),
            ("what is on my todo list", &["todo", "list"]),
        ];
        for (text, expected) in cases {
            assert_eq!(terms.of(text), *expected, "{text}");
        }
    }
}
