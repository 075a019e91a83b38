//! The shape of `orca.yaml` as written by a person, before validation. Every struct denies
//! unknown fields so that a typo is an error, never a silently ignored setting. The doc comments
//! are the configuration reference's descriptions (`orca config reference` renders them from the
//! JSON Schema these structs derive), and each `default` is checked against what the validation
//! really falls back to (`schema::tests`).

use schemars::JsonSchema;
use serde::Deserialize;

/// `auth:` section: who may call orca and what they may do.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Auth")]
pub(super) struct RawAuth {
    /// API keys accepted on HTTP as `Authorization: Bearer`, each stored as the SHA-256 of the
    /// key (`orca key new` prints an entry). Without keys (and without `oauth`), HTTP serves
    /// anonymous callers on a loopback address only.
    #[serde(default)]
    pub(super) api_keys: Vec<RawApiKey>,
    /// The principal of stdio connections (`orca serve --stdio`).
    pub(super) stdio: Option<RawPrincipal>,
    /// The principal of anonymous HTTP callers when no API key is configured (loopback only).
    pub(super) anonymous: Option<RawPrincipal>,
    /// orca as an OAuth 2.1 resource server: also accept access tokens (JWTs) from this issuer.
    pub(super) oauth: Option<super::oauth::RawOAuth>,
    /// Roles by name: what a token (by the roles its `roles_claim` holds) or an API key with
    /// `role:` may do.
    #[serde(default)]
    pub(super) roles: std::collections::BTreeMap<String, super::oauth::RawRole>,
}

/// One entry of `auth.api_keys`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ApiKey")]
pub(super) struct RawApiKey {
    /// The key's principal: recorded with every call made with it.
    pub(super) name: String,
    /// The SHA-256 of the key, as 64 hex characters (the key itself is never stored).
    pub(super) sha256: String,
    /// The verbs the key grants (`read`, `create`, `update`, `delete`): give either `verbs` (at
    /// least one) or `role`.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::verb_list")]
    pub(super) verbs: Option<Vec<String>>,
    /// A role of `auth.roles` whose verbs, tools, rate limit and masking the key gets, instead
    /// of `verbs`.
    pub(super) role: Option<String>,
}

/// `auth.stdio` and `auth.anonymous`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Principal")]
pub(super) struct RawPrincipal {
    /// The principal's name, recorded with every call (default `local` for stdio, `anonymous`
    /// for anonymous HTTP callers).
    pub(super) name: Option<String>,
    /// Its verbs (`read`, `create`, `update`, `delete`); default: all four.
    #[serde(default)]
    #[schemars(schema_with = "super::schema::verb_list")]
    pub(super) verbs: Option<Vec<String>>,
}

/// `http:` section: the limits and checks of the Streamable HTTP edge.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Http")]
pub(super) struct RawHttp {
    /// Larger requests get 413 at once, before authentication and before any `100 Continue`.
    #[schemars(extend("default" = 4_194_304), range(min = 1))]
    pub(super) max_body_bytes: Option<u64>,
    /// The `Host` headers accepted; `"*"` disables the check. Default: `localhost`,
    /// `127.0.0.1`, `::1` and the bound address.
    pub(super) allowed_hosts: Option<Vec<String>>,
    /// Browser `Origin`s accepted (`*` matches a port, as in `http://localhost:*`); default none.
    /// The server's own origin, and on a loopback bind any loopback origin, always pass.
    pub(super) allowed_origins: Option<Vec<String>>,
    /// Open connections at once; one more gets 503 and is closed.
    #[schemars(extend("default" = 1024), range(min = 1))]
    pub(super) max_connections: Option<u64>,
    /// A client slower than this to send its headers is disconnected (milliseconds).
    #[schemars(extend("default" = 10_000), range(min = 1))]
    pub(super) header_timeout_ms: Option<u64>,
    /// A request body must arrive within this (milliseconds), counted from when orca starts
    /// reading it (after authentication); else 408 and the connection is closed.
    #[schemars(extend("default" = 10_000), range(min = 1))]
    pub(super) body_timeout_ms: Option<u64>,
    /// Deeper JSON-RPC bodies on `/mcp` get 400.
    #[schemars(extend("default" = 64), range(min = 1))]
    pub(super) max_json_depth: Option<u64>,
    /// Failed keys per client address and per key in a minute before 429 with `Retry-After` (a
    /// valid key is always served).
    #[schemars(extend("default" = 10), range(min = 1))]
    pub(super) auth_failures_per_minute: Option<u64>,
    /// After SIGTERM, open requests get this long (milliseconds) to finish before they are
    /// cancelled.
    #[schemars(extend("default" = 10_000), range(min = 1))]
    pub(super) drain_timeout_ms: Option<u64>,
    /// Reverse proxies (IP addresses or CIDR ranges such as `10.0.0.0/8`) whose
    /// `X-Forwarded-For` or `Forwarded` names the client; default none: the peer is the client.
    pub(super) trusted_proxies: Option<Vec<String>>,
    /// orca's address as browsers reach it (`scheme://host[:port]`), for the console's sign-ins
    /// to OAuth upstreams; set it behind a reverse proxy. Default: the request's `Host` over
    /// http, only when it names orca itself.
    pub(super) public_url: Option<String>,
    /// Whether the unauthenticated `/healthz` and `/metrics` name servers and tools (`names`)
    /// or only count them by state (`counts`).
    #[schemars(extend("enum" = ["counts", "names"], "default" = "counts"))]
    pub(super) health_details: Option<String>,
}

/// `tracking:` section: the record of every call.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Tracking")]
pub(super) struct RawTracking {
    /// Record every call (executions, failures); when off, feedback has nothing to attach to.
    #[schemars(extend("default" = true))]
    pub(super) enabled: Option<bool>,
    /// Records waiting for the background writer; beyond it records go to the spill file.
    #[schemars(extend("default" = 10_000), range(min = 1))]
    pub(super) queue_capacity: Option<u64>,
    /// The most records per database transaction (one binary COPY).
    #[schemars(extend("default" = 1024), range(min = 1))]
    pub(super) batch_size: Option<u64>,
    /// How often (milliseconds) spilled records are retried while the database is down.
    #[schemars(extend("default" = 2000), range(min = 1))]
    pub(super) replay_interval_ms: Option<u64>,
    /// Stored responses are cut at this many bytes (the full size is kept in `response_bytes`).
    #[schemars(extend("default" = 65_536), range(min = 1))]
    pub(super) max_response_bytes: Option<u64>,
    /// Whole days older than this are dropped once exported; 0 keeps everything.
    #[schemars(extend("default" = 90))]
    pub(super) retention_days: Option<u64>,
}

/// `sql:` section: the limits and the write policy of the SQL tools.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Sql")]
pub(super) struct RawSql {
    /// Who confirms a write a dry run announced: `model` (the dry run returns a confirmation
    /// token) or `human` (an approval id, approved with `orca approve` or in the console).
    #[schemars(extend("enum" = ["model", "human"], "default" = "model"))]
    pub(super) write_confirmation: Option<String>,
    /// How long a confirmation token stays valid (seconds).
    #[schemars(extend("default" = 600), range(min = 1))]
    pub(super) token_lifetime_seconds: Option<u64>,
    /// Rows a read returns unless its `max_rows` says otherwise.
    #[schemars(extend("default" = 1000), range(min = 1))]
    pub(super) default_max_rows: Option<u64>,
    /// The most rows `max_rows` may ask for.
    #[schemars(extend("default" = 50_000), range(min = 1))]
    pub(super) hard_max_rows: Option<u64>,
    /// A read stops (`truncated`) past this many bytes of JSON.
    #[schemars(extend("default" = 1_048_576), range(min = 1))]
    pub(super) max_result_bytes: Option<u64>,
    /// The statement timeout of a call that sets none (milliseconds).
    #[schemars(extend("default" = 30_000), range(min = 1))]
    pub(super) default_timeout_ms: Option<u64>,
    /// The longest statement timeout a call may ask for (milliseconds).
    #[schemars(extend("default" = 300_000), range(min = 1))]
    pub(super) max_timeout_ms: Option<u64>,
    /// How long (seconds) `generate_schema` and `add_records` reuse the introspected schema.
    #[schemars(extend("default" = 300), range(min = 1))]
    pub(super) schema_cache_ttl_seconds: Option<u64>,
    /// How long (seconds) a `query_sql` page token stays valid.
    #[schemars(extend("default" = 86_400), range(min = 1))]
    pub(super) page_token_lifetime_seconds: Option<u64>,
    /// Refuse a masked caller's SQL that uses a masked column other than as itself (a courtesy:
    /// it sees masked values either way).
    #[schemars(extend("default" = true))]
    pub(super) refuse_masked_sql: Option<bool>,
}

/// `data:` section: the limits of the `data` server's metadata and profiling tools.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Data")]
pub(super) struct RawData {
    /// `get_stats` counts rows exactly below this planner estimate (above it the estimate is
    /// returned and marked as one); also what `ask_for_time_window` calls large.
    #[schemars(extend("default" = 1_000_000))]
    pub(super) exact_count_max_rows: Option<u64>,
    /// Profiling and PII detection read about this many rows of a larger table (`TABLESAMPLE`),
    /// and say that they sampled.
    #[schemars(extend("default" = 100_000), range(min = 1))]
    pub(super) sample_rows: Option<u64>,
}
