//! The semantic layer at run time: the tools' vectors, embedded in the background whenever the
//! catalog changes, and a search's blend of them with its lexical scores.
//!
//! The gateway hands [`Semantic::catalog`] the texts of every tool it offers, at start and on
//! each list change; one background task brings the vectors in, from the cache
//! (`orca.tool_embeddings`) first, then from the provider a few at a time (each request given
//! at least two minutes), each batch usable as soon as it is in. The vectors are kept by the
//! SHA-256 of their text, so those of the tools a change leaves alone are used while the new
//! ones come. A search never waits for any of
//! that: it embeds its own query (bounded by the provider's timeout) only when some of its tools
//! have vectors, and a tool without one ranks lexically only.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::watch;

use super::blend::blend;
use super::embed::{EmbedError, Embedder, cached, store, text_hash};

/// Tool texts sent to the provider in one request by the background task: few, so that a
/// slow local model (a CPU under load) answers each in seconds, the first ones are soon in use,
/// and a query's request that the provider takes after one of them waits little.
const BATCH: usize = 8;

/// How long a request of the background task may take, at the least: no search waits for it,
/// and one abandoned for a slow provider would only be sent again to the same busy provider.
const PATIENCE: Duration = Duration::from_secs(120);

/// The first wait before the catalog is tried again after the provider or the cache failed;
/// it doubles up to [`MOST_BACKOFF`] while they keep failing.
const FIRST_BACKOFF: Duration = Duration::from_secs(2);
const MOST_BACKOFF: Duration = Duration::from_secs(300);

/// A text's key: its SHA-256.
pub(crate) type TextHash = [u8; 32];

/// The configured model, its share of the blend, and the tools' vectors so far.
#[derive(Debug)]
pub(crate) struct Semantic {
    embedder: Embedder,
    weight: f64,
    vectors: RwLock<HashMap<TextHash, Arc<[f32]>>>,
    /// The catalog's texts, newest last; the background task embeds what it lacks.
    wanted: watch::Sender<Arc<Vec<String>>>,
    /// Why the catalog's last embedding failed, until one succeeds.
    failure: Mutex<Option<String>>,
}

/// How one search was ranked.
#[derive(Debug)]
pub(crate) struct Ranked {
    pub(crate) scores: Vec<f64>,
    /// Whether the query's embedding took part (with at least one tool's).
    pub(crate) blended: bool,
    /// How many of the searched tools had a vector.
    pub(crate) embedded: usize,
    /// Why the semantic part was left out: the query's embedding failed, or no tool has a
    /// vector and the catalog's last embedding failed.
    pub(crate) error: Option<String>,
}

impl Semantic {
    /// The layer for `embedder`, with the background task that embeds the catalog, spawned on
    /// the current Tokio runtime; it ends when the layer is dropped.
    pub(crate) fn start(embedder: Embedder, weight: f64, pool: PgPool) -> Arc<Semantic> {
        let (wanted, receiver) = watch::channel(Arc::new(Vec::new()));
        let semantic = Arc::new(Semantic {
            embedder,
            weight,
            vectors: RwLock::default(),
            wanted,
            failure: Mutex::new(None),
        });
        tokio::spawn(embed_catalogs(Arc::downgrade(&semantic), receiver, pool));
        semantic
    }

    /// The catalog is now `texts` (every tool's [`super::tool_text`]): the background task
    /// embeds those it has no vector for, and forgets the others once done.
    pub(crate) fn catalog(&self, texts: Vec<String>) {
        self.wanted.send_replace(Arc::new(texts));
    }

    /// The scores of `query` for the tools whose texts hash to `tools` and whose lexical
    /// scores are `lexical`: blended where a tool has a vector, when the query's embedding is
    /// had; lexical otherwise.
    pub(crate) async fn rank(&self, query: &str, tools: &[TextHash], lexical: Vec<f64>) -> Ranked {
        let vectors: Vec<Option<Arc<[f32]>>> = {
            let known = self.vectors.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            tools.iter().map(|hash| known.get(hash).cloned()).collect()
        };
        let embedded = vectors.iter().filter(|vector| vector.is_some()).count();
        if embedded == 0 {
            let error =
                self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
            return Ranked { scores: lexical, blended: false, embedded, error };
        }
        match self.embedder.embed(&[query.to_owned()]).await {
            Ok(mut found) => {
                let query = found.pop().unwrap_or_default();
                let tools: Vec<Option<&[f32]>> = vectors.iter().map(Option::as_deref).collect();
                let scores = blend(&lexical, &query, &tools, self.weight);
                Ranked { scores, blended: true, embedded, error: None }
            }
            Err(error) => {
                tracing::warn!(error = %error, "tool search fell back to the lexical ranking");
                Ranked { scores: lexical, blended: false, embedded, error: Some(error.to_string()) }
            }
        }
    }

    /// Bring in the vectors `texts` lack: the cache's (when it can be read), then the
    /// provider's a batch at a time, each cached as it comes. Stops early, with what it has,
    /// when `superseded` says a newer catalog came.
    ///
    /// # Errors
    ///
    /// The provider failing (the batches before are kept).
    async fn embed(
        &self,
        pool: &PgPool,
        texts: &[String],
        superseded: impl Fn() -> bool,
    ) -> Result<(), EmbedError> {
        let mut missing: Vec<(TextHash, &String)> = Vec::new();
        {
            let known = self.vectors.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            let mut seen = HashSet::new();
            for text in texts {
                let hash = text_hash(text);
                if !known.contains_key(&hash) && seen.insert(hash) {
                    missing.push((hash, text));
                }
            }
        }
        if !missing.is_empty() {
            let hashes: Vec<TextHash> = missing.iter().map(|(hash, _)| *hash).collect();
            let found =
                cached(pool, self.embedder.model(), &hashes).await.unwrap_or_else(|error| {
                    tracing::warn!(error = %error, "the tool embeddings cache could not be read");
                    HashMap::new()
                });
            let mut known = self.vectors.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            for (hash, vector) in found {
                known.insert(hash, vector.into());
            }
            missing.retain(|(hash, _)| !known.contains_key(hash));
        }
        for batch in missing.chunks(BATCH) {
            if superseded() {
                return Ok(());
            }
            let batch_texts: Vec<String> = batch.iter().map(|(_, text)| (*text).clone()).collect();
            let patience = self.embedder.timeout().max(PATIENCE);
            let vectors = self.embedder.embed_within(&batch_texts, patience).await?;
            let pairs: Vec<(TextHash, &[f32])> = batch
                .iter()
                .zip(&vectors)
                .map(|((hash, _), vector)| (*hash, &vector[..]))
                .collect();
            if let Err(error) = store(pool, self.embedder.model(), &pairs).await {
                tracing::warn!(error = %error, "tool embeddings could not be cached");
            }
            let mut known = self.vectors.write().unwrap_or_else(|poisoned| poisoned.into_inner());
            for ((hash, _), vector) in batch.iter().zip(vectors) {
                known.insert(*hash, vector.into());
            }
        }
        if !superseded() {
            let current: HashSet<TextHash> = texts.iter().map(|text| text_hash(text)).collect();
            self.vectors
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .retain(|hash, _| current.contains(hash));
        }
        Ok(())
    }
}

/// The background task: embed each catalog [`Semantic::catalog`] is handed, the newest first,
/// trying again after a failure (sooner when the catalog changes), until the layer is dropped.
async fn embed_catalogs(
    semantic: Weak<Semantic>,
    mut wanted: watch::Receiver<Arc<Vec<String>>>,
    pool: PgPool,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let texts = Arc::clone(&wanted.borrow_and_update());
        let outcome = {
            let Some(layer) = semantic.upgrade() else { return };
            let outcome = layer.embed(&pool, &texts, || wanted.has_changed().unwrap_or(true)).await;
            let mut failure = layer.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match &outcome {
                Ok(()) => *failure = None,
                Err(error) => {
                    tracing::warn!(error = %error, "the tools could not be embedded; tool search ranks them lexically until they are");
                    *failure = Some(error.to_string());
                }
            }
            outcome
        };
        match outcome {
            Ok(()) => {
                backoff = FIRST_BACKOFF;
                if wanted.changed().await.is_err() {
                    return;
                }
            }
            Err(_) => {
                tokio::select! {
                    changed = wanted.changed() => if changed.is_err() { return },
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MOST_BACKOFF);
            }
        }
    }
}
