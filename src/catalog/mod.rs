//! Tool search for large catalogs: which of many tools a query is about. Two layers: the
//! lexical ranking of `rank.rs` (BM25F with identifier splitting, stemming and shipped
//! synonyms, no model needed) and, when an embeddings provider is configured, the semantic one
//! blended with it: `embed.rs` the provider and the cache, `semantic.rs` the tools' vectors
//! embedded in the background and a search's blend, `blend.rs` the arithmetic. Knows nothing
//! of MCP: the gateway hands it plain [`Document`]s and tool texts and decides when to offer
//! search.
//!
//! # Design notes
//!
//! Tool search for large catalogs, knowing nothing of MCP: the gateway hands it plain `Document`s
//! (name, title, description, parameters, server). `text.rs` turns text into terms (identifiers
//! split, stop words out, Snowball stems via `rust-stemmers`, a server's own prefix taken off a
//! tool's name); `synonyms.rs` reads the shipped lists (`synonyms.txt`, synonyms and derivationally
//! related forms derived from WordNet 3.0 by `scripts/derive-synonyms`, and `vocabulary.txt`, short
//! forms and everyday words for what tools do, written for orca) into stems; `rank.rs` is
//! `Lexical`, a BM25F index whose postings hold each term's contribution already computed, then two
//! adjustments of the scores (a server the query names looks first; what the query asks to do,
//! read, create, update or delete, against what each tool's name says it does), and `best`, the top
//! of a score list. `Ranker` shares one copy of the synonyms among indexes. `embed.rs` is the
//! provider and the cache: `Embedder` (OpenAI-compatible `/embeddings` or Gemini's
//! `batchEmbedContents` over reqwest, no redirects, a timeout), `cached` and `store` (tool vectors
//! in `orca.tool_embeddings` by model and SHA-256 of the text; migration
//! `20261126200000_tool_embeddings`). `semantic.rs` is the layer at run time: `Semantic` keeps the
//! tools' vectors by text hash and one background task that, each time it is handed the catalog's
//! texts (`Semantic::catalog`), brings in those it lacks, from the cache, then from the provider 8
//! a request (each given `timeout_ms` or two minutes, whichever is longer:
//! `Embedder::embed_within`), each batch usable at once, trying again with a backoff (2 s doubling
//! to 5 minutes) after a failure, and forgets the texts no longer in the catalog once done;
//! `Semantic::rank` blends a search: it embeds the query only when some of the searched tools have
//! vectors, and never waits for the catalog. `blend.rs` is the arithmetic: `tool_text` (what a tool
//! is embedded from), `cosine`, `blend` (a tool without a vector ranks lexically only).
//! `benches/catalog-bench` compiles `rank.rs`, `synonyms.rs`, `text.rs` and `blend.rs` themselves
//! (and `context/bm25.rs`, for its identifier splitting) for `scripts/bench-catalog`.

mod blend;
mod embed;
mod rank;
mod semantic;
mod synonyms;
mod text;

use std::sync::{Arc, OnceLock};

pub(crate) use blend::tool_text;
pub(crate) use embed::{Embedder, text_hash};
pub(crate) use rank::{Document, Lexical, best};
pub(crate) use semantic::{Ranked, Semantic, TextHash};
pub(crate) use synonyms::Synonyms;

/// Builds indexes sharing one copy of the shipped synonyms, read on the first build.
#[derive(Debug, Default)]
pub(crate) struct Ranker {
    synonyms: OnceLock<Arc<Synonyms>>,
}

impl Ranker {
    /// The lexical index of `documents`.
    pub(crate) fn index(&self, documents: &[Document]) -> Lexical {
        let synonyms =
            self.synonyms.get_or_init(|| Arc::new(Synonyms::shipped(&text::Terms::default())));
        Lexical::with_synonyms(documents, text::Terms::default(), Arc::clone(synonyms))
    }
}
