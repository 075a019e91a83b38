//! `catalog:` in `orca.yaml`: when `tools/list` offers tool search (`search_tools` and
//! `call_tool`) instead of every tool.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::llm::Provider;

/// The share of the semantic score in the blend when `catalog.embeddings.weight` is not set:
/// the weight the `tune` half of `scripts/bench-catalog model` chose with all-MiniLM-L6-v2
/// (BENCHMARKS.md).
const DEFAULT_WEIGHT: f64 = 0.8;

/// When search replaces the full list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CatalogConfig {
    /// Search is offered when the caller may see more tools than this.
    pub(crate) search_above: usize,
    /// Principals (API key names, token users) who always get search, whatever the count.
    pub(crate) principals: Vec<String>,
    /// Roles (`auth.roles`) whose holders always get search.
    pub(crate) roles: Vec<String>,
    /// The semantic layer, when a provider with embeddings is configured.
    pub(crate) embeddings: Option<EmbeddingsConfig>,
    /// How long a client may keep orca's own part of a list (SEP-2549's `ttlMs`): the most any
    /// merged list says, lowered by what each external server in it says of its own part.
    pub(crate) cache_ttl: Duration,
    /// Whether orca's lists may be shared across callers (`cacheScope: public`): said only when
    /// every external server in a list says so too and no caller sees a list of its own.
    pub(crate) cache_public: bool,
}

/// `catalog.embeddings`: which model embeds tools and queries, reached through the `llm:`
/// provider's endpoint (`OPENAI_BASE_URL` and key, or `GEMINI_BASE_URL` and key).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EmbeddingsConfig {
    pub(crate) provider: Provider,
    pub(crate) model: String,
    /// The share of the semantic score in the blend, 0 to 1 ([`DEFAULT_WEIGHT`] unless set).
    pub(crate) weight: f64,
    /// One request to the provider is abandoned after this long.
    pub(crate) timeout: Duration,
}

impl Default for CatalogConfig {
    fn default() -> CatalogConfig {
        CatalogConfig {
            search_above: 40,
            principals: Vec::new(),
            roles: Vec::new(),
            embeddings: None,
            cache_ttl: Duration::ZERO,
            cache_public: false,
        }
    }
}

/// `catalog:` as written: when `tools/list` offers tool search (`search_tools` and
/// `call_tool`) instead of every tool.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Catalog")]
pub(super) struct RawCatalog {
    /// Search is offered when a caller may see more tools than this (`ORCA_CATALOG_SEARCH_ABOVE`
    /// when unset here).
    #[schemars(extend("default" = 40))]
    search_above: Option<u64>,
    /// Principals (API key names, token users) who always get search, whatever the count.
    #[serde(default)]
    principals: Vec<String>,
    /// Roles (`auth.roles`) whose holders always get search.
    #[serde(default)]
    roles: Vec<String>,
    /// The semantic layer of the search: a model that embeds tools and queries; default none
    /// (lexical ranking only).
    embeddings: Option<RawEmbeddings>,
    /// How long (milliseconds) a 2026-07-28 client may keep orca's lists (`ttlMs`); 0: not at
    /// all.
    #[schemars(extend("default" = 0))]
    cache_ttl_ms: Option<u64>,
    /// `public`: the lists may be shared across callers; `private`: they may not.
    #[schemars(extend("enum" = ["private", "public"], "default" = "private"))]
    cache_scope: Option<String>,
}

/// `catalog.embeddings` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Embeddings")]
struct RawEmbeddings {
    /// `openai` (any OpenAI-compatible `/v1/embeddings`: `OPENAI_BASE_URL`, `OPENAI_API_KEY`) or
    /// `google` (`GEMINI_BASE_URL`, `GEMINI_API_KEY`).
    #[schemars(extend("enum" = ["openai", "google", "gemini"]))]
    provider: String,
    /// The embedding model, such as `text-embedding-3-small`.
    model: String,
    /// The share of the semantic score in the blend, from 0 to 1.
    #[schemars(extend("default" = DEFAULT_WEIGHT), range(min = 0.0, max = 1.0))]
    weight: Option<f64>,
    /// A search's wait for its query's embedding (milliseconds).
    #[schemars(extend("default" = 10_000))]
    timeout_ms: Option<u64>,
}

impl RawCatalog {
    /// The section checked; `variable` is `ORCA_CATALOG_SEARCH_ABOVE`, used when the file does
    /// not set `search_above`.
    pub(super) fn validate(
        self,
        variable: Option<&str>,
        file: &str,
        errors: &mut Vec<String>,
    ) -> CatalogConfig {
        let defaults = CatalogConfig::default();
        let search_above = match (self.search_above, variable) {
            (Some(count), _) => usize::try_from(count).unwrap_or(usize::MAX),
            (None, Some(text)) => text.trim().parse().unwrap_or_else(|_| {
                errors.push(format!(
                    "environment: ORCA_CATALOG_SEARCH_ABOVE: `{text}` is not a number of tools"
                ));
                defaults.search_above
            }),
            (None, None) => defaults.search_above,
        };
        for (key, names) in [("principals", &self.principals), ("roles", &self.roles)] {
            if let Some(index) = names.iter().position(|name| name.trim().is_empty()) {
                errors.push(format!("{file}: catalog.{key}[{index}]: a name may not be empty"));
            }
        }
        let embeddings = self.embeddings.and_then(|raw| {
            let Some(provider @ (Provider::OpenAi | Provider::Google)) =
                Provider::parse(&raw.provider)
            else {
                errors.push(format!(
                    "{file}: catalog.embeddings.provider: `{}` has no embeddings here; use openai (or any OpenAI-compatible server) or google",
                    raw.provider
                ));
                return None;
            };
            let weight = raw.weight.unwrap_or(DEFAULT_WEIGHT);
            if !(0.0..=1.0).contains(&weight) {
                errors.push(format!("{file}: catalog.embeddings.weight: must be from 0 to 1"));
            }
            if raw.model.trim().is_empty() {
                errors.push(format!("{file}: catalog.embeddings.model: may not be empty"));
            }
            Some(EmbeddingsConfig {
                provider,
                model: raw.model,
                weight,
                timeout: Duration::from_millis(raw.timeout_ms.unwrap_or(10_000).max(1)),
            })
        });
        let cache_public = match self.cache_scope.as_deref() {
            None | Some("private") => false,
            Some("public") => true,
            Some(other) => {
                errors.push(format!(
                    "{file}: catalog.cache_scope: `{other}` is neither private nor public"
                ));
                false
            }
        };
        CatalogConfig {
            search_above,
            principals: self.principals,
            roles: self.roles,
            embeddings,
            cache_ttl: Duration::from_millis(self.cache_ttl_ms.unwrap_or(0)),
            cache_public,
        }
    }
}
