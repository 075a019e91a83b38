//! The provider and the cache of the semantic layer: texts embedded by a provider (an
//! OpenAI-compatible `/v1/embeddings`, or Gemini's `batchEmbedContents`), and tool embeddings
//! cached in `orca.tool_embeddings` by model and the SHA-256 of their text.

use std::collections::HashMap;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::llm::Provider;

/// Inputs sent in one request (Gemini accepts at most 100 a batch).
const BATCH: usize = 100;

/// Why embeddings could not be had; the search then falls back to the lexical ranking.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EmbedError {
    #[error("the embeddings provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the embeddings provider answered HTTP {0}")]
    Status(u16),
    #[error("the embeddings provider's answer could not be read: {0}")]
    Answer(String),
    #[error("the embeddings cache failed: {0}")]
    Cache(String),
}

/// A configured embeddings model.
#[derive(Debug, Clone)]
pub(crate) struct Embedder {
    provider: Provider,
    base_url: String,
    api_key: Option<SecretString>,
    model: String,
    /// How long one request may take before it is abandoned.
    timeout: Duration,
    http: reqwest::Client,
}

impl Embedder {
    /// An embedder for `model` at `base_url` (OpenAI: including `/v1`; Google: the API's root).
    pub(crate) fn new(
        provider: Provider,
        base_url: &str,
        api_key: Option<SecretString>,
        model: &str,
        timeout: Duration,
    ) -> Embedder {
        crate::tls::install();
        let http = reqwest::Client::builder()
            .user_agent(concat!("orca/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .build()
            .unwrap_or_default();
        Embedder {
            provider,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model: model.to_owned(),
            timeout,
            http,
        }
    }

    /// How long one request may take, as configured.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The model's name, the cache's key with each text's hash.
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    /// One vector per text, in order.
    ///
    /// # Errors
    ///
    /// The provider unreachable, answering an error status, or an answer without one vector
    /// per text.
    pub(crate) async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_within(texts, self.timeout).await
    }

    /// [`Embedder::embed`], each request abandoned after `timeout` instead of the configured
    /// time.
    ///
    /// # Errors
    ///
    /// As [`Embedder::embed`].
    pub(crate) async fn embed_within(
        &self,
        texts: &[String],
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            let found = match self.provider {
                Provider::Google => self.gemini(batch, timeout).await?,
                // The catalog's configuration never names the client (`config/catalog.rs`).
                Provider::OpenAi | Provider::Anthropic | Provider::Client => {
                    self.openai(batch, timeout).await?
                }
            };
            if found.len() != batch.len() {
                return Err(EmbedError::Answer(format!(
                    "{} vectors for {} texts",
                    found.len(),
                    batch.len()
                )));
            }
            vectors.extend(found);
        }
        Ok(vectors)
    }

    async fn openai(
        &self,
        batch: &[String],
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut request = self
            .http
            .post(format!("{}/embeddings", self.base_url))
            .timeout(timeout)
            .json(&json!({ "model": self.model, "input": batch }));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key.expose_secret());
        }
        let answer = send(request).await?;
        let mut data: Vec<(u64, Vec<f32>)> = answer
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| EmbedError::Answer("no `data` list".to_owned()))?
            .iter()
            .enumerate()
            .map(|(position, item)| {
                let index = item.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
                vector(item.get("embedding")).map(|vector| (index, vector))
            })
            .collect::<Result<_, _>>()?;
        data.sort_by_key(|(index, _)| *index);
        Ok(data.into_iter().map(|(_, vector)| vector).collect())
    }

    async fn gemini(
        &self,
        batch: &[String],
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = format!("models/{}", self.model.trim_start_matches("models/"));
        let requests: Vec<Value> = batch
            .iter()
            .map(|text| json!({ "model": model, "content": { "parts": [{ "text": text }] } }))
            .collect();
        let mut request = self
            .http
            .post(format!("{}/v1beta/{model}:batchEmbedContents", self.base_url))
            .timeout(timeout)
            .json(&json!({ "requests": requests }));
        if let Some(key) = &self.api_key {
            request = request.header("x-goog-api-key", key.expose_secret());
        }
        let answer = send(request).await?;
        answer
            .get("embeddings")
            .and_then(Value::as_array)
            .ok_or_else(|| EmbedError::Answer("no `embeddings` list".to_owned()))?
            .iter()
            .map(|item| vector(item.get("values")))
            .collect()
    }
}

async fn send(request: reqwest::RequestBuilder) -> Result<Value, EmbedError> {
    let response = request.send().await.map_err(|error| {
        EmbedError::Unreachable(if error.is_timeout() {
            "timed out".to_owned()
        } else {
            "no connection".to_owned()
        })
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(EmbedError::Status(status.as_u16()));
    }
    response.json().await.map_err(|_| EmbedError::Answer("not JSON".to_owned()))
}

fn vector(value: Option<&Value>) -> Result<Vec<f32>, EmbedError> {
    let numbers = value
        .and_then(Value::as_array)
        .ok_or_else(|| EmbedError::Answer("an item without its vector".to_owned()))?;
    let vector: Vec<f32> =
        numbers.iter().filter_map(Value::as_f64).map(|number| number as f32).collect();
    if vector.is_empty() || vector.len() != numbers.len() {
        return Err(EmbedError::Answer("a vector that is not a list of numbers".to_owned()));
    }
    Ok(vector)
}

/// The SHA-256 of a text, the cache's key.
pub(crate) fn text_hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The vectors the cache holds for `model` among `hashes` (texts' SHA-256), by hash.
///
/// # Errors
///
/// The cache failing.
pub(crate) async fn cached(
    pool: &PgPool,
    model: &str,
    hashes: &[[u8; 32]],
) -> Result<HashMap<[u8; 32], Vec<f32>>, EmbedError> {
    let keys: Vec<Vec<u8>> = hashes.iter().map(|hash| hash.to_vec()).collect();
    let rows: Vec<(Vec<u8>, Vec<f32>)> = sqlx::query_as(
        "SELECT text_sha256, embedding FROM orca.tool_embeddings \
         WHERE model = $1 AND text_sha256 = ANY($2)",
    )
    .bind(model)
    .bind(&keys)
    .fetch_all(pool)
    .await
    .map_err(|error| EmbedError::Cache(error.to_string()))?;
    Ok(rows
        .into_iter()
        .filter_map(|(key, vector)| Some((<[u8; 32]>::try_from(key).ok()?, vector)))
        .collect())
}

/// Keep `vectors` in the cache for `model`, each under its text's hash.
///
/// # Errors
///
/// The cache failing.
pub(crate) async fn store(
    pool: &PgPool,
    model: &str,
    vectors: &[([u8; 32], &[f32])],
) -> Result<(), EmbedError> {
    if vectors.is_empty() {
        return Ok(());
    }
    let mut insert = sqlx::QueryBuilder::new(
        "INSERT INTO orca.tool_embeddings (model, text_sha256, embedding) ",
    );
    insert.push_values(vectors, |mut row, (hash, vector)| {
        row.push_bind(model).push_bind(hash.to_vec()).push_bind(vector.to_vec());
    });
    insert.push(" ON CONFLICT DO NOTHING");
    insert.build().execute(pool).await.map_err(|error| EmbedError::Cache(error.to_string()))?;
    Ok(())
}
