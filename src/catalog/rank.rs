//! The lexical ranking: BM25F over a tool's fields, each with its weight, and queries expanded
//! with synonyms at a lower weight. It needs no model and no network.
//!
//! The method, a documented contract:
//!
//! - Fields and weights: the name without its server's prefix (3.0), the title (2.0), the
//!   description (1.0), the parameters' names and descriptions (0.3) and the server's name (1.5).
//! - Every field goes through [`Terms`]: identifiers split, lowercase, stop words out, Snowball
//!   stems. The name's whole identifier also counts as one term, so a query naming it exactly
//!   finds it first.
//! - BM25F (Robertson and Zaragoza): a term's weighted frequency in a tool is the sum over fields
//!   of `weight * tf / (1 - b + b * length / average length)`, with `b = 0.75`, then saturated as
//!   `tf / (k1 + tf)` with `k1 = 1.2` and multiplied by the inverse document frequency
//!   `ln(1 + (N - n + 0.5) / (n + 0.5))` over tools.
//! - Each distinct query stem counts once with weight 1; the synonyms of a query stem that the
//!   query does not hold itself, and that some tool holds, count with [`SYNONYM_WEIGHT`].
//! - A query that names a server (its whole name as one of the query's stems) looks there
//!   first: the tools of every other server score [`OTHER_SERVERS`] of what they would.
//! - What a query asks to do (its first word that says it: `show`, `which` and `find` read,
//!   `make` and `add` create, `change` and `disable` update, `remove` and `cancel` delete) is
//!   matched with what each tool does (the first word of its name that says it: `list_users`
//!   reads, `deactivate_user` updates): a tool that does it scores [`SAME_ACTION`] times what it
//!   would, one that does something else [`OTHER_ACTION`] times; a tool whose name says no
//!   action, or a query that asks none, is left as it is.

use std::collections::HashMap;
use std::sync::Arc;

use super::synonyms::Synonyms;
use super::text::{Terms, name_words, words};

/// What the ranker needs of a tool: plain text, nothing of MCP.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Document {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: String,
    /// Each parameter's name and description.
    pub(crate) parameters: Vec<(String, String)>,
    pub(crate) server: String,
}

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The fields, in the order of [`FIELD_WEIGHTS`].
const FIELDS: usize = 5;
const FIELD_WEIGHTS: [f64; FIELDS] = [3.0, 2.0, 1.0, 0.3, 1.5];

/// How much a synonym of a query word counts against the word itself.
pub(crate) const SYNONYM_WEIGHT: f64 = 0.5;

/// What a tool of a server the query does not name keeps of its score when it names one.
pub(crate) const OTHER_SERVERS: f64 = 0.5;

/// A tool's score when it does what the query asks, and when it does something else.
pub(crate) const SAME_ACTION: f64 = 1.2;
pub(crate) const OTHER_ACTION: f64 = 0.85;

/// What a request asks to do to what it names, and what a tool does, as API names say it.
/// Listing and getting are one: people say `show` and `what` of both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Read,
    Create,
    Update,
    Delete,
}

impl Action {
    /// The action a word of a tool's name says.
    fn of_name_word(word: &str) -> Option<Action> {
        Some(match word {
            "list" | "search" | "find" | "query" | "browse" | "enumerate" | "get" | "read"
            | "fetch" | "retrieve" | "show" | "describe" | "view" | "inspect" | "lookup"
            | "check" | "info" | "details" | "download" | "export" => Action::Read,
            "create" | "add" | "new" | "insert" | "make" | "post" | "upload" | "open" | "write"
            | "invite" | "generate" | "start" => Action::Create,
            "update" | "edit" | "modify" | "change" | "set" | "rename" | "replace" | "patch"
            | "move" | "toggle" | "enable" | "disable" | "activate" | "deactivate" | "assign"
            | "merge" | "close" | "reopen" => Action::Update,
            "delete" | "remove" | "drop" | "destroy" | "cancel" | "revoke" | "archive"
            | "clear" | "unassign" | "purge" => Action::Delete,
            _ => return None,
        })
    }

    /// The action a word of a request asks for.
    fn of_query_word(word: &str) -> Option<Action> {
        Some(match word {
            "list" | "which" | "all" | "every" | "search" | "find" | "any" | "enumerate"
            | "get" | "show" | "what" | "whats" | "read" | "fetch" | "see" | "view" | "look"
            | "check" | "display" | "describe" | "details" | "how" | "retrieve" | "lookup" => {
                Action::Read
            }
            "create" | "add" | "new" | "make" | "open" | "start" | "post" | "write" | "upload"
            | "invite" | "generate" | "register" => Action::Create,
            "update" | "edit" | "modify" | "change" | "rename" | "set" | "replace" | "move"
            | "enable" | "disable" | "turn" | "switch" | "activate" | "deactivate" | "assign"
            | "mark" | "merge" | "close" | "reopen" => Action::Update,
            "delete" | "remove" | "drop" | "destroy" | "cancel" | "revoke" | "archive"
            | "clear" | "erase" | "purge" | "unassign" => Action::Delete,
            _ => return None,
        })
    }
}

/// A BM25F index over a list of documents, built once and searched many times: for every term,
/// the documents holding it with the term's whole BM25F contribution, which depends on nothing
/// of the query, so a search only adds.
#[derive(Debug)]
pub(crate) struct Lexical {
    terms: Terms,
    synonyms: Arc<Synonyms>,
    postings: HashMap<String, Vec<(u32, f64)>>,
    documents: usize,
    /// Each server's name as one stem (`maestro`; words joined by `_`), with its documents.
    servers: HashMap<String, Vec<u32>>,
    /// What each tool does, as the first word of its name that says it.
    actions: Vec<Option<Action>>,
}

impl Lexical {
    /// Index `documents` with the shipped synonyms (the gateway shares them through
    /// `catalog::Ranker`).
    #[must_use]
    #[cfg_attr(not(test), allow(dead_code, reason = "the benchmark's and the tests' constructor"))]
    pub(crate) fn new(documents: &[Document]) -> Lexical {
        let terms = Terms::default();
        let synonyms = Arc::new(Synonyms::shipped(&terms));
        Lexical::with_synonyms(documents, terms, synonyms)
    }

    pub(crate) fn with_synonyms(
        documents: &[Document],
        terms: Terms,
        synonyms: Arc<Synonyms>,
    ) -> Lexical {
        let mut servers: HashMap<String, Vec<u32>> = HashMap::new();
        for (index, document) in documents.iter().enumerate() {
            let name = terms.of(&document.server).join("_");
            if !name.is_empty() {
                servers.entry(name).or_default().push(u32::try_from(index).unwrap_or(u32::MAX));
            }
        }
        let mut counts = Vec::with_capacity(documents.len());
        let mut lengths = Vec::with_capacity(documents.len());
        let mut totals = [0u64; FIELDS];
        for document in documents {
            let mut document_counts: HashMap<String, [u32; FIELDS]> = HashMap::new();
            let mut document_lengths = [0u32; FIELDS];
            for (field, field_terms) in fields(&terms, document).into_iter().enumerate() {
                document_lengths[field] = u32::try_from(field_terms.len()).unwrap_or(u32::MAX);
                totals[field] += u64::from(document_lengths[field]);
                for term in field_terms {
                    document_counts.entry(term).or_default()[field] += 1;
                }
            }
            counts.push(document_counts);
            lengths.push(document_lengths);
        }
        let mut average_lengths = [1.0; FIELDS];
        for field in 0..FIELDS {
            if !documents.is_empty() {
                average_lengths[field] = (totals[field] as f64 / documents.len() as f64).max(1.0);
            }
        }
        let mut postings: HashMap<String, Vec<(u32, f64)>> = HashMap::new();
        for (index, document_counts) in counts.into_iter().enumerate() {
            for (term, frequencies) in document_counts {
                let mut weighted = 0.0;
                for field in 0..FIELDS {
                    if frequencies[field] == 0 {
                        continue;
                    }
                    let length = f64::from(lengths[index][field]);
                    let norm = 1.0 - B + B * length / average_lengths[field];
                    weighted += FIELD_WEIGHTS[field] * f64::from(frequencies[field]) / norm;
                }
                let document = u32::try_from(index).unwrap_or(u32::MAX);
                postings.entry(term).or_default().push((document, weighted / (K1 + weighted)));
            }
        }
        let total = documents.len() as f64;
        for list in postings.values_mut() {
            let holding = list.len() as f64;
            let idf = (1.0 + (total - holding + 0.5) / (holding + 0.5)).ln();
            for (_, contribution) in list.iter_mut() {
                *contribution *= idf;
            }
        }
        let actions = documents
            .iter()
            .map(|document| {
                name_words(&document.name, &document.server)
                    .iter()
                    .find_map(|word| Action::of_name_word(word))
            })
            .collect();
        Lexical { terms, synonyms, postings, documents: documents.len(), servers, actions }
    }

    /// The weighted stems of a query, from its words and its own stems: those stems, the whole
    /// query as one identifier when a tool's name is that, then the synonyms of each stem.
    fn query_terms(&self, query_words: &[String], own: &[String]) -> Vec<(String, f64)> {
        let mut weighted: Vec<(String, f64)> = Vec::new();
        for stem in own {
            if !weighted.iter().any(|(term, _)| term == stem) {
                weighted.push((stem.clone(), 1.0));
            }
        }
        let whole = query_words.join("_");
        if whole.contains('_') && self.postings.contains_key(&whole) {
            weighted.push((whole, 1.0));
        }
        for stem in own {
            for synonym in self.synonyms.of(stem) {
                if !weighted.iter().any(|(term, _)| term == synonym)
                    && self.postings.contains_key(synonym)
                {
                    weighted.push((synonym.clone(), SYNONYM_WEIGHT));
                }
            }
        }
        weighted
    }

    /// The score of every document against `query`, in the documents' order (0: no term met).
    #[must_use]
    pub(crate) fn scores(&self, query: &str) -> Vec<f64> {
        let query_words = words(query);
        let own = self.terms.of_words(&query_words);
        let mut scores = vec![0.0; self.documents];
        for (term, query_weight) in self.query_terms(&query_words, &own) {
            let Some(list) = self.postings.get(&term) else { continue };
            for &(document, contribution) in list {
                scores[document as usize] += query_weight * contribution;
            }
        }
        self.prefer_named_servers(&own, &mut scores);
        self.prefer_the_asked_action(&query_words, &mut scores);
        scores
    }

    /// Raises the tools that do what a query (its words) asks and lowers those that do
    /// something else.
    fn prefer_the_asked_action(&self, query_words: &[String], scores: &mut [f64]) {
        let Some(asked) = query_words.iter().find_map(|word| Action::of_query_word(word)) else {
            return;
        };
        for (score, action) in scores.iter_mut().zip(&self.actions) {
            match action {
                Some(action) if *action == asked => *score *= SAME_ACTION,
                Some(_) => *score *= OTHER_ACTION,
                None => {}
            }
        }
    }

    /// Lowers the scores of the tools of every server the query (its `stems`) does not name,
    /// when it names one.
    fn prefer_named_servers(&self, stems: &[String], scores: &mut [f64]) {
        let mut named = vec![false; self.documents];
        let mut any = false;
        for stem in stems {
            for &document in self.servers.get(stem).map_or(&[][..], Vec::as_slice) {
                named[document as usize] = true;
                any = true;
            }
        }
        if any {
            for (score, named) in scores.iter_mut().zip(named) {
                if !named {
                    *score *= OTHER_SERVERS;
                }
            }
        }
    }
}

impl Document {
    /// A tool's document from its parts and its JSON Schema: the parameters are the schema's
    /// top-level `properties`, each with its `description` (or `title`).
    #[must_use]
    pub(crate) fn from_schema(
        server: &str,
        name: &str,
        title: Option<&str>,
        description: &str,
        input_schema: &serde_json::Map<String, serde_json::Value>,
    ) -> Document {
        let parameters = input_schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .map(|properties| {
                properties
                    .iter()
                    .map(|(parameter, schema)| {
                        let text = schema
                            .get("description")
                            .or_else(|| schema.get("title"))
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or_default();
                        (parameter.clone(), text.to_owned())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Document {
            name: name.to_owned(),
            title: title.map(str::to_owned),
            description: description.to_owned(),
            parameters,
            server: server.to_owned(),
        }
    }
}

/// The `limit` best of `scores` that `keep` admits, best first, ties in the documents' order;
/// documents that scored nothing are left out.
#[must_use]
pub(crate) fn best(
    scores: &[f64],
    limit: usize,
    keep: impl Fn(usize) -> bool,
) -> Vec<(usize, f64)> {
    let mut ranked: Vec<(usize, f64)> = scores
        .iter()
        .copied()
        .enumerate()
        .filter(|&(index, score)| score > 0.0 && keep(index))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(limit);
    ranked
}

/// The terms of each field of `document`, in the order of [`FIELD_WEIGHTS`].
fn fields(terms: &Terms, document: &Document) -> [Vec<String>; FIELDS] {
    let name_parts = name_words(&document.name, &document.server);
    let mut name = terms.of(&name_parts.join(" "));
    if name_parts.len() > 1 {
        name.push(name_parts.join("_"));
    }
    let title = document.title.as_deref().map(|title| terms.of(title)).unwrap_or_default();
    let description = terms.of(&document.description);
    let mut parameters = Vec::new();
    for (parameter, text) in &document.parameters {
        parameters.extend(terms.of(parameter));
        parameters.extend(terms.of(text));
    }
    let server = terms.of(&document.server);
    [name, title, description, parameters, server]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(server: &str, name: &str, description: &str) -> Document {
        Document {
            name: name.to_owned(),
            description: description.to_owned(),
            server: server.to_owned(),
            ..Document::default()
        }
    }

    fn catalog() -> Vec<Document> {
        vec![
            document("github", "create_issue", "Create a new issue in a GitHub repository."),
            document("github", "list_pull_requests", "List pull requests in a GitHub repository."),
            document("stripe", "create_refund", "Refunds a payment intent."),
            document("kubectl", "scale_deployment", "Scale a deployment to a number of replicas."),
            document("okta", "deactivate_user", "Deactivate a user in the Okta organization."),
            document("checklist", "create_task", "Create a new task in a task list."),
        ]
    }

    fn best(lexical: &Lexical, query: &str) -> String {
        let scores = lexical.scores(query);
        let (index, _) =
            scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).expect("a catalog");
        catalog()[index].name.clone()
    }

    #[test]
    fn queries_find_their_tool_through_splitting_stemming_and_synonyms() {
        let lexical = Lexical::new(&catalog());
        let cases = [
            ("open a PR list", "list_pull_requests"),
            ("issues", "create_issue"),
            ("create_issue", "create_issue"),
            ("scaling deployments up", "scale_deployment"),
            ("add a todo", "create_task"),
            ("refunds", "create_refund"),
            ("okta", "deactivate_user"),
        ];
        for (query, expected) in cases {
            assert_eq!(best(&lexical, query), expected, "{query}");
        }
    }

    #[test]
    fn a_query_naming_a_server_looks_there_first() {
        let documents = vec![
            document("github", "create_issue", "Create a new issue."),
            document("linear", "create_issue", "Create a new issue, with its team and cycle."),
            document("linear", "list_teams", "List the teams."),
        ];
        let lexical = Lexical::new(&documents);
        let scores = lexical.scores("create an issue in github");
        assert!(scores[0] > scores[1], "{scores:?}");
        let unnamed = lexical.scores("create an issue");
        assert!(unnamed[1] > 0.0 && scores[1] < unnamed[1], "{scores:?} {unnamed:?}");
    }

    #[test]
    fn what_a_query_asks_to_do_prefers_the_tools_that_do_it() {
        let documents = vec![
            document("okta", "get_user", "Get a user's account."),
            document("okta", "deactivate_user", "Deactivate a user's account."),
            document("okta", "user_schema", "The schema of a user's account."),
        ];
        let terms = Terms::default();
        let synonyms = Synonyms::from_lines("", &terms);
        let lexical = Lexical::with_synonyms(&documents, terms, Arc::new(synonyms));
        let plain = lexical.scores("account of a user");
        assert!(plain[0] == plain[1] && plain[1] == plain[2], "{plain:?}");
        // `disable` and `show` are in no tool's text: only the action tells them apart.
        let scores = lexical.scores("disable the account of a user");
        assert!(scores[1] > scores[2] && scores[2] > scores[0], "{scores:?}");
        let scores = lexical.scores("show the account of a user");
        assert!(scores[0] > scores[2] && scores[2] > scores[1], "{scores:?}");
    }

    #[test]
    fn a_query_without_known_terms_scores_nothing() {
        let lexical = Lexical::new(&catalog());
        assert!(lexical.scores("zzzz qqqq").iter().all(|score| *score == 0.0));
        assert!(lexical.scores("").iter().all(|score| *score == 0.0));
    }

    #[test]
    fn a_synonym_counts_less_than_the_word_itself() {
        let terms = Terms::default();
        let synonyms = Synonyms::from_lines("withdraw remove", &terms);
        let documents = vec![
            document("a", "remove_item", "Remove an item."),
            document("b", "withdraw_item", "Withdraw an item."),
        ];
        let lexical = Lexical::with_synonyms(&documents, terms, Arc::new(synonyms));
        let scores = lexical.scores("withdraw");
        assert!(scores[1] > scores[0] && scores[0] > 0.0, "{scores:?}");
    }
}
