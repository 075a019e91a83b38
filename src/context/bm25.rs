//! A small, generic BM25 ranker: an index over any list of texts, scored against a question.
//! Used for the context file's entries and reusable for anything else that needs "which of
//! these texts is this question about" (for example the tables of a big schema).
//!
//! The method is a documented contract, so results are predictable and testable:
//!
//! - Texts and queries go through [`tokenize`]: lowercase, split on everything that is not a
//!   letter or a digit, identifiers also split at `_` and camelCase humps (the whole identifier
//!   is kept too), English stop words and one-character tokens dropped, and English plurals
//!   folded to the singular (`customers` and `customer`, `categories` and `category`): a
//!   trailing `ies` becomes `y`, a trailing `s` goes (not `ss`, `us` or `is`), on words of more
//!   than three letters. Nothing else is stemmed.
//! - Okapi BM25 with `k1 = 1.2` and `b = 0.75`, and the non-negative inverse document frequency
//!   `ln(1 + (N - n + 0.5) / (n + 0.5))` (as in Lucene), where `N` is the number of texts and
//!   `n` the number of texts holding the term.
//! - Each distinct query term counts once, however often the query repeats it.

use std::collections::{HashMap, HashSet};

/// The BM25 term-frequency saturation: how quickly repeating a term stops adding to a score.
const K1: f64 = 1.2;

/// The BM25 length normalisation: 0 ignores a text's length, 1 divides fully by it.
const B: f64 = 0.75;

/// Words too common to say what a question is about (including the filler of questions about
/// data: "each", "per", "many"). Kept short on purpose: words such as "top", "first", "count"
/// or "total" carry meaning.
const STOP_WORDS: &[&str] = &[
    "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "before",
    "but", "by", "can", "could", "did", "do", "does", "each", "for", "from", "had", "has", "have",
    "how", "if", "in", "into", "is", "it", "its", "many", "me", "much", "my", "of", "on", "or",
    "our", "per", "please", "should", "show", "so", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "those", "to", "us", "was", "we", "were", "what", "when",
    "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your",
];

/// Split `text` into the terms BM25 compares: see the module documentation for the rules.
///
/// An identifier such as `invoice_line` or `supportRepId` yields itself (lowercased, without
/// leading or trailing underscores) followed by its parts (`invoice`, `line`; `support`, `rep`,
/// `id`), each only once per occurrence.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let identifiers = text.split(|c: char| !(c.is_alphanumeric() || c == '_'));
    for identifier in identifiers {
        let identifier = identifier.trim_matches('_');
        if identifier.is_empty() {
            continue;
        }
        let whole = identifier.to_lowercase();
        let parts = identifier_parts(identifier);
        let splits = parts.len() > 1;
        push_term(&mut tokens, whole);
        if splits {
            for part in parts {
                push_term(&mut tokens, part.to_lowercase());
            }
        }
    }
    tokens
}

/// Keep `term`, singular, unless it is a stop word or a single character.
fn push_term(tokens: &mut Vec<String>, term: String) {
    if term.chars().nth(1).is_some() && !STOP_WORDS.contains(&term.as_str()) {
        tokens.push(singular(term));
    }
}

/// The singular of an English plural, by the two rules that cover schema words.
fn singular(term: String) -> String {
    if term.chars().count() <= 3 || !term.is_ascii() {
        return term;
    }
    if let Some(stem) = term.strip_suffix("ies") {
        return format!("{stem}y");
    }
    let keeps_s = ["ss", "us", "is"].iter().any(|ending| term.ends_with(ending));
    match term.strip_suffix('s') {
        Some(stem) if !keeps_s => stem.to_owned(),
        _ => term,
    }
}

/// The parts of an identifier: split at underscores, then at camelCase humps (`supportRepId`
/// gives `support`, `Rep`, `Id`; `HTTPServer` gives `HTTP`, `Server`). Digits stay attached.
fn identifier_parts(identifier: &str) -> Vec<&str> {
    identifier.split('_').filter(|piece| !piece.is_empty()).flat_map(camel_humps).collect()
}

/// `piece` split at its camelCase humps: before an uppercase letter that follows a lowercase
/// one or a digit, and before the last capital of an acronym followed by a lowercase letter
/// (`HTTPServer` gives `HTTP`, `Server`).
pub(crate) fn camel_humps(piece: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let chars: Vec<(usize, char)> = piece.char_indices().collect();
    let mut start = 0;
    for window in 1..chars.len() {
        let (index, current) = chars[window];
        let previous = chars[window - 1].1;
        let next = chars.get(window + 1).map(|&(_, c)| c);
        let lower_to_upper =
            (previous.is_lowercase() || previous.is_ascii_digit()) && current.is_uppercase();
        let acronym_end = previous.is_uppercase()
            && current.is_uppercase()
            && next.is_some_and(char::is_lowercase);
        if lower_to_upper || acronym_end {
            parts.push(&piece[start..index]);
            start = index;
        }
    }
    parts.push(&piece[start..]);
    parts
}

/// A BM25 index over a fixed list of texts, built once and queried many times.
#[derive(Debug, Clone)]
pub(crate) struct Index {
    /// For every text, how often each of its terms occurs.
    term_counts: Vec<HashMap<String, u32>>,
    /// For every text, its number of terms.
    lengths: Vec<usize>,
    /// The mean of `lengths` (0 when there are no terms at all).
    average_length: f64,
    /// For every term, the number of texts holding it.
    document_frequency: HashMap<String, usize>,
}

impl Index {
    /// Index `texts`; the scores of a query come back in the same order.
    pub(crate) fn new<T: AsRef<str>>(texts: &[T]) -> Index {
        let mut term_counts = Vec::with_capacity(texts.len());
        let mut lengths = Vec::with_capacity(texts.len());
        let mut document_frequency: HashMap<String, usize> = HashMap::new();
        for text in texts {
            let tokens = tokenize(text.as_ref());
            lengths.push(tokens.len());
            let mut counts: HashMap<String, u32> = HashMap::new();
            for token in tokens {
                *counts.entry(token).or_default() += 1;
            }
            for term in counts.keys() {
                *document_frequency.entry(term.clone()).or_default() += 1;
            }
            term_counts.push(counts);
        }
        let total: usize = lengths.iter().sum();
        let average_length =
            if lengths.is_empty() { 0.0 } else { total as f64 / lengths.len() as f64 };
        Index { term_counts, lengths, average_length, document_frequency }
    }

    /// The number of indexed texts.
    pub(crate) fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether the index holds no text.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The BM25 score of every indexed text for `query`, in the order the texts were given.
    /// A text sharing no term with the query scores 0; scores are never negative.
    pub(crate) fn scores(&self, query: &str) -> Vec<f64> {
        let mut seen = HashSet::new();
        let terms: Vec<String> =
            tokenize(query).into_iter().filter(|term| seen.insert(term.clone())).collect();
        let count = self.len() as f64;
        let mut scores = vec![0.0; self.len()];
        for term in &terms {
            let Some(&holding) = self.document_frequency.get(term) else {
                continue;
            };
            let holding = holding as f64;
            // BM25 (k1 = 1.2, b = 0.75) with Lucene's non-negative IDF: a documented contract.
            let idf = (1.0 + (count - holding + 0.5) / (holding + 0.5)).ln();
            for (index, counts) in self.term_counts.iter().enumerate() {
                let Some(&frequency) = counts.get(term) else {
                    continue;
                };
                let frequency = f64::from(frequency);
                let relative_length = if self.average_length > 0.0 {
                    self.lengths[index] as f64 / self.average_length
                } else {
                    1.0
                };
                let saturation = frequency + K1 * (1.0 - B + B * relative_length);
                scores[index] += idf * frequency * (K1 + 1.0) / saturation;
            }
        }
        scores
    }

    /// The texts that share at least one term with `query`, best first, as `(index, score)`;
    /// equal scores keep the order the texts were given.
    pub(crate) fn ranked(&self, query: &str) -> Vec<(usize, f64)> {
        let mut ranked: Vec<(usize, f64)> =
            self.scores(query).into_iter().enumerate().filter(|&(_, score)| score > 0.0).collect();
        ranked.sort_by(|left, right| right.1.total_cmp(&left.1).then(left.0.cmp(&right.0)));
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_tokens(text: &str, expected: &[&str]) {
        assert_eq!(tokenize(text), expected, "tokenize({text:?})");
    }

    #[test]
    fn tokenizer_lowercases_splits_identifiers_and_drops_noise() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            // Plurals fold to the singular; short words and -ss/-us/-is endings stay.
            (
                "customers categories address status analysis bus",
                &["customer", "category", "address", "status", "analysis", "bus"],
            ),
            ("Revenue by customer", &["revenue", "customer"]),
            ("What is the total of invoice_line?", &["total", "invoice_line", "invoice", "line"]),
            ("supportRepId", &["supportrepid", "support", "rep", "id"]),
            ("HTTPServer logs", &["httpserver", "http", "server", "log"]),
            ("_private__name_", &["private__name", "private", "name"]),
            ("a b c x1 42", &["x1", "42"]),
            (
                "SELECT sum(il.unit_price * il.quantity)",
                &["select", "sum", "il", "unit_price", "unit", "price", "il", "quantity"],
            ),
            ("gpt-4o-mini", &["gpt", "4o", "mini"]),
            ("Tracks über 5 minutes", &["track", "über", "minute"]),
            ("customer_id", &["customer_id", "customer", "id"]),
            ("invoice2Line", &["invoice2line", "invoice2", "line"]),
        ];
        for (text, expected) in cases {
            check_tokens(text, expected);
        }
    }

    /// A small corpus in which each text is about one thing.
    fn corpus() -> Vec<&'static str> {
        vec![
            "Revenue by customer: sum invoice totals per customer",
            "Top tracks by sales: count invoice lines per track",
            "Sales by genre: join track, genre and invoice lines",
            "Employees and the customers they support",
            "Albums per artist",
        ]
    }

    #[test]
    fn ranking_puts_the_text_about_the_question_first() {
        let index = Index::new(&corpus());
        let cases: &[(&str, usize)] = &[
            ("revenue by customer", 0),
            ("which tracks sold best", 1),
            ("sales for each genre", 2),
            ("which employees support each customer", 3),
            ("how many albums does each artist have", 4),
        ];
        for (question, best) in cases {
            let ranked = index.ranked(question);
            assert_eq!(
                ranked.first().map(|&(index, _)| index),
                Some(*best),
                "{question:?}: {ranked:?}"
            );
        }
    }

    #[test]
    fn unrelated_questions_rank_nothing_and_score_zero() {
        let index = Index::new(&corpus());
        for question in ["", "the of and", "weather tomorrow"] {
            assert!(index.ranked(question).is_empty(), "{question:?}");
            assert!(index.scores(question).iter().all(|&score| score == 0.0), "{question:?}");
        }
    }

    #[test]
    fn scores_follow_the_text_order_and_are_never_negative() {
        // "invoice" occurs in most texts: its IDF is small but must stay positive.
        let texts = ["invoice", "invoice line", "invoice total", "track"];
        let index = Index::new(&texts);
        let scores = index.scores("invoice");
        assert_eq!(scores.len(), texts.len());
        assert!(scores[..3].iter().all(|&score| score > 0.0), "{scores:?}");
        assert_eq!(scores[3], 0.0);
        // The shortest text holding the term scores highest (length normalisation).
        assert!(scores[0] > scores[1], "{scores:?}");
    }

    #[test]
    fn repeated_query_terms_count_once() {
        let index = Index::new(&corpus());
        assert_eq!(index.scores("genre"), index.scores("genre genre genre"));
    }

    #[test]
    fn an_empty_index_scores_nothing() {
        let index = Index::new::<&str>(&[]);
        assert!(index.is_empty());
        assert!(index.scores("anything").is_empty());
        let blank = Index::new(&["", "  "]);
        assert_eq!(blank.scores("anything"), vec![0.0, 0.0]);
    }
}
