//! Tool search for large catalogs: which of many tools a query is about. Two layers: the
//! lexical ranking of `rank.rs` (BM25F with identifier splitting, stemming and shipped
//! synonyms, no model needed) and, when an embeddings provider is configured, the semantic one
//! of `embed.rs` blended with it. Knows nothing of MCP: the gateway hands it plain
//! [`Document`]s and decides when to offer search.

mod embed;
mod rank;
mod synonyms;
mod text;

use std::sync::{Arc, OnceLock};

pub(crate) use embed::{EmbedError, Embedder, blend, cached_or_embedded};
pub(crate) use rank::{Document, Lexical, best};
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
