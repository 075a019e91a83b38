//! The shape of `orca.yaml` as written by a person, before validation. Every struct denies
//! unknown fields so that a typo is an error, never a silently ignored setting.

use serde::Deserialize;

/// `auth:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    /// API keys accepted on HTTP, each stored as the SHA-256 of the key.
    #[serde(default)]
    pub(super) api_keys: Vec<RawApiKey>,
    /// The principal used for stdio connections.
    pub(super) stdio: Option<RawPrincipal>,
    /// Verbs of anonymous loopback callers when no API key is configured.
    pub(super) anonymous: Option<RawPrincipal>,
    /// orca as an OAuth 2.1 resource server: the issuer whose tokens it accepts.
    pub(super) oauth: Option<super::oauth::RawOAuth>,
    /// Roles named by a token's roles claim, each with its verbs.
    #[serde(default)]
    pub(super) roles: std::collections::BTreeMap<String, super::oauth::RawRole>,
}

/// One entry of `auth.api_keys`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApiKey {
    pub(super) name: String,
    pub(super) sha256: String,
    /// The key's verbs; or `role`, whose verbs, tools and rate limit it gets.
    pub(super) verbs: Option<Vec<String>>,
    pub(super) role: Option<String>,
}

/// `auth.stdio` and `auth.anonymous`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrincipal {
    pub(super) name: Option<String>,
    pub(super) verbs: Option<Vec<String>>,
}

/// `http:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    pub(super) max_body_bytes: Option<u64>,
    pub(super) allowed_hosts: Option<Vec<String>>,
    pub(super) allowed_origins: Option<Vec<String>>,
    pub(super) max_connections: Option<u64>,
    pub(super) header_timeout_ms: Option<u64>,
    pub(super) body_timeout_ms: Option<u64>,
    pub(super) max_json_depth: Option<u64>,
    pub(super) auth_failures_per_minute: Option<u64>,
    pub(super) drain_timeout_ms: Option<u64>,
    pub(super) trusted_proxies: Option<Vec<String>>,
    pub(super) public_url: Option<String>,
    pub(super) health_details: Option<String>,
}

/// `tracking:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTracking {
    pub(super) enabled: Option<bool>,
    pub(super) queue_capacity: Option<u64>,
    pub(super) batch_size: Option<u64>,
    pub(super) replay_interval_ms: Option<u64>,
    pub(super) max_response_bytes: Option<u64>,
    pub(super) retention_days: Option<u64>,
}

/// `sql:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSql {
    pub(super) write_confirmation: Option<String>,
    pub(super) token_lifetime_seconds: Option<u64>,
    pub(super) default_max_rows: Option<u64>,
    pub(super) hard_max_rows: Option<u64>,
    pub(super) max_result_bytes: Option<u64>,
    pub(super) default_timeout_ms: Option<u64>,
    pub(super) max_timeout_ms: Option<u64>,
    pub(super) schema_cache_ttl_seconds: Option<u64>,
    pub(super) page_token_lifetime_seconds: Option<u64>,
    pub(super) refuse_masked_sql: Option<bool>,
}

/// `data:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawData {
    pub(super) exact_count_max_rows: Option<u64>,
    pub(super) sample_rows: Option<u64>,
}
