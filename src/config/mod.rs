//! Configuration: the process environment (with `.env`) plus an optional `orca.yaml`, turned into
//! one validated [`Config`]. Every problem is collected and reported at once, each with the file
//! (or variable) and the key it concerns.

mod auth;
mod catalog;
mod cluster;
mod databases;
mod external;
mod guard;
mod http;
mod ip_range;
mod llm;
mod masking;
mod metabase;
mod oauth;
mod policy;
mod pool;
mod raw;
mod schema;
mod suggest;
#[cfg(test)]
mod tests;
mod weaviate;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tool::Verb;
#[cfg(test)]
pub(crate) use auth::ApiKey;
pub(crate) use auth::{AuthConfig, Principal, PrincipalKind, ToolAccess};
pub(crate) use catalog::CatalogConfig;
pub(crate) use databases::{DatabaseConfig, valid_name as valid_database_name};
pub(crate) use external::{
    Availability, ExternalConfig, ExternalServerConfig, ExternalTransport, PinMode, SignInMode,
    UpstreamOAuth, UpstreamProtocol, glob_match,
};
pub(crate) use guard::{GuardConfig, SecretsMode};
pub(crate) use http::{HealthDetails, HttpConfig};
pub(crate) use ip_range::IpRange;
pub(crate) use llm::{LlmConfig, LlmTool, provider_names};
pub(crate) use metabase::{MetabaseAuth, MetabaseConfig};
pub(crate) use oauth::{NO_TOKEN_TYPE, OAuthConfig, secure_or_loopback, split_origin, token_type};
pub(crate) use pool::PoolConfig;
use raw::{RawAuth, RawData, RawHttp, RawSql, RawTracking};
pub(crate) use schema::File as ConfigFile;
pub(crate) use weaviate::WeaviateConfig;

/// The internal servers orca can host: a closed list. Each is enabled by configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ServerKind {
    /// orca's own tools: `list_servers`, `submit_feedback`.
    Orca,
    /// SQL on `DATABASE_URL`: `execute_sql`, `add_records`, `generate_schema`, `format_results`.
    Postgres,
    /// The data-provider toolset on `DATABASE_URL`: `query_sql`, `explain_sql`.
    Data,
    /// Metabase's API on `METABASE_URL`: dashboards, cards, collections, queries.
    Metabase,
    /// Weaviate on `WEAVIATE_URL`: collections, tenants, objects, searches, aggregates.
    Weaviate,
}

impl ServerKind {
    pub(crate) const ALL: [ServerKind; 5] = [
        ServerKind::Orca,
        ServerKind::Postgres,
        ServerKind::Data,
        ServerKind::Metabase,
        ServerKind::Weaviate,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            ServerKind::Orca => "orca",
            ServerKind::Postgres => "postgres",
            ServerKind::Data => "data",
            ServerKind::Metabase => "metabase",
            ServerKind::Weaviate => "weaviate",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<ServerKind> {
        ServerKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    fn known_names() -> String {
        ServerKind::ALL.map(ServerKind::name).join(", ")
    }
}

#[derive(Debug, Clone)]
pub(crate) struct TrackingConfig {
    pub(crate) enabled: bool,
    pub(crate) queue_capacity: usize,
    pub(crate) batch_size: usize,
    pub(crate) replay_interval: Duration,
    pub(crate) max_response_bytes: usize,
    /// Days of tracking kept before a day's partitions are dropped (0: kept for ever).
    pub(crate) retention_days: u32,
}

/// The validated configuration of one orca process.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Where orca keeps its state: the embedded cluster, the spill file.
    pub(crate) home: PathBuf,
    pub(crate) config_file: Option<PathBuf>,
    /// Where the PostgreSQL server binaries are (`ORCA_PG_BINDIR`); found by search when unset.
    pub(crate) pg_bindir: Option<PathBuf>,
    /// The database the SQL tools work on (`DATABASE_URL`).
    pub(crate) database_url: Option<SecretString>,
    /// orca's own state: tracking, feedback, tokens (`ORCA_DATABASE_URL`).
    pub(crate) state_database_url: Option<SecretString>,
    /// The named target databases (`databases:`); empty: `DATABASE_URL` alone, or the embedded
    /// Chinook database.
    pub(crate) databases: Vec<DatabaseConfig>,
    /// The size of each connection pool (`database:`).
    pub(crate) database: PoolConfig,
    /// Internal servers enabled by `orca.yaml` (`None`: all of them).
    pub(crate) servers: Option<Vec<ServerKind>>,
    pub(crate) auth: AuthConfig,
    pub(crate) http: HttpConfig,
    pub(crate) tracking: TrackingConfig,
    pub(crate) sql: SqlConfig,
    /// `--read-only` or `read_only: true`: write tools are absent and writes are refused.
    pub(crate) read_only: bool,
    /// `ORCA_SECRET`: the key of confirmation tokens; generated into `ORCA_HOME` when unset.
    pub(crate) secret: Option<SecretString>,
    /// `ORCA_TRACE_URL`: where the console links a call's trace, with `{trace_id}` in it
    /// (`http://jaeger:16686/trace/{trace_id}`); `None`: the trace id is shown as text.
    pub(crate) trace_url: Option<String>,
    /// External MCP servers from `external-mcps.yaml` (`ORCA_EXTERNAL_MCPS`).
    pub(crate) external: ExternalConfig,
    /// Limits of the `data` server's metadata and profiling tools (`data:`).
    pub(crate) data: DataConfig,
    /// Masking policies by id (`masking:`): column name -> rule.
    pub(crate) masking: BTreeMap<String, BTreeMap<String, crate::privacy::mask::MaskRule>>,
    /// Model providers, per-tool defaults and the context file (`llm:` and the environment).
    pub(crate) llm: LlmConfig,
    /// The `metabase` server (`METABASE_URL` and credentials, or `metabase:`); `None` when unset.
    pub(crate) metabase: Option<MetabaseConfig>,
    /// Weaviate (`WEAVIATE_URL`, `WEAVIATE_API_KEY`, `weaviate:`); `None` when the URL is unset.
    pub(crate) weaviate: Option<WeaviateConfig>,
    /// `catalog:`: when `tools/list` offers tool search instead of every tool.
    pub(crate) catalog: CatalogConfig,
    /// Where the other replicas reach this one (`cluster.advertise_url`).
    pub(crate) cluster: cluster::ClusterConfig,
    /// `guard:`: what becomes of credentials in results and errors.
    pub(crate) guard: GuardConfig,
}

/// `data:` in `orca.yaml`.
#[derive(Debug, Clone)]
pub(crate) struct DataConfig {
    /// `get_stats` counts rows exactly when the planner estimates fewer than this; above it the
    /// estimate is returned and marked as one.
    pub(crate) exact_count_max_rows: u64,
    /// Profiling and PII detection read at most about this many rows of a larger table
    /// (`TABLESAMPLE`), and say that they sampled.
    pub(crate) sample_rows: u64,
}

impl Default for DataConfig {
    fn default() -> DataConfig {
        DataConfig { exact_count_max_rows: 1_000_000, sample_rows: 100_000 }
    }
}

/// Who confirms a write that a dry run announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteConfirmation {
    /// The dry run returns a confirmation token to the caller (the model).
    Model,
    /// The dry run returns an approval id; a person approves it out of band.
    Human,
}

/// Limits and policy of the SQL tools (`sql:` in `orca.yaml`).
#[derive(Debug, Clone)]
pub(crate) struct SqlConfig {
    pub(crate) write_confirmation: WriteConfirmation,
    pub(crate) token_lifetime: Duration,
    pub(crate) default_max_rows: usize,
    pub(crate) hard_max_rows: usize,
    pub(crate) max_result_bytes: usize,
    pub(crate) default_timeout: Duration,
    pub(crate) max_timeout: Duration,
    pub(crate) schema_cache_ttl: Duration,
    /// How long a `query_sql` page token stays valid.
    pub(crate) page_token_lifetime: Duration,
    /// Whether a masked caller's SQL that uses a masked column other than as itself is refused
    /// with a clear error (it would see masked values only either way).
    pub(crate) refuse_masked_sql: bool,
}

impl Default for SqlConfig {
    fn default() -> SqlConfig {
        SqlConfig {
            write_confirmation: WriteConfirmation::Model,
            token_lifetime: Duration::from_secs(600),
            default_max_rows: 1000,
            hard_max_rows: 50_000,
            max_result_bytes: 1024 * 1024,
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(300),
            schema_cache_ttl: Duration::from_secs(300),
            page_token_lifetime: Duration::from_secs(24 * 3600),
            refuse_masked_sql: true,
        }
    }
}

impl Config {
    pub(crate) fn spill_file(&self) -> PathBuf {
        self.home.join("tracking-spill.jsonl")
    }

    /// The effective configuration as a person reads it, with every secret masked.
    pub(crate) fn describe(&self) -> BTreeMap<&'static str, String> {
        let mut out = BTreeMap::new();
        self.describe_sources(&mut out);
        self.describe_auth(&mut out);
        self.describe_http(&mut out);
        out.insert(
            "database",
            format!(
                "max_connections={} min_connections={} (each of the target's and the state's pools)",
                self.database.max_connections, self.database.min_connections
            ),
        );
        let tracking = &self.tracking;
        out.insert(
            "tracking",
            format!(
                "enabled={} queue_capacity={} batch_size={} replay_interval_ms={} max_response_bytes={} retention_days={}",
                tracking.enabled,
                tracking.queue_capacity,
                tracking.batch_size,
                tracking.replay_interval.as_millis(),
                tracking.max_response_bytes,
                tracking.retention_days
            ),
        );
        self.describe_llm(&mut out);
        let sql = &self.sql;
        out.insert(
            "sql",
            format!(
                "write_confirmation={} token_lifetime_seconds={} default_max_rows={} hard_max_rows={} max_result_bytes={} default_timeout_ms={} max_timeout_ms={} schema_cache_ttl_seconds={} page_token_lifetime_seconds={}",
                match sql.write_confirmation {
                    WriteConfirmation::Model => "model",
                    WriteConfirmation::Human => "human",
                },
                sql.token_lifetime.as_secs(),
                sql.default_max_rows,
                sql.hard_max_rows,
                sql.max_result_bytes,
                sql.default_timeout.as_millis(),
                sql.max_timeout.as_millis(),
                sql.schema_cache_ttl.as_secs(),
                sql.page_token_lifetime.as_secs()
            ),
        );
        out.insert("read_only", self.read_only.to_string());
        out.insert(
            "ORCA_SECRET",
            if self.secret.is_some() {
                "(set)".into()
            } else {
                format!("(unset: generated once into {})", self.home.join("secret").display())
            },
        );
        self.describe_upstreams(&mut out);
        out
    }

    /// Where the configuration, the state and the databases are, and which servers run.
    fn describe_sources(&self, out: &mut BTreeMap<&'static str, String>) {
        out.insert("ORCA_HOME", self.home.display().to_string());
        out.insert(
            "ORCA_CONFIG",
            self.config_file.as_ref().map_or("(none)".into(), |path| path.display().to_string()),
        );
        let url = |value: &Option<SecretString>| {
            value
                .as_ref()
                .map_or("(unset: embedded PostgreSQL)".into(), |url| mask_url(url.expose_secret()))
        };
        out.insert("DATABASE_URL", url(&self.database_url));
        out.insert(
            "ORCA_PG_BINDIR",
            self.pg_bindir
                .as_ref()
                .map_or("(search PATH, pg_config, /usr/lib/postgresql)".into(), |dir| {
                    dir.display().to_string()
                }),
        );
        out.insert("ORCA_DATABASE_URL", url(&self.state_database_url));
        if !self.databases.is_empty() {
            let listed: Vec<String> = self
                .databases
                .iter()
                .map(|database| {
                    format!("{} ({})", database.name, mask_url(database.url.expose_secret()))
                })
                .collect();
            out.insert("databases", listed.join(", "));
        }
        let servers = match &self.servers {
            None => format!("all ({})", ServerKind::known_names()),
            Some(list) => list.iter().map(|kind| kind.name()).collect::<Vec<_>>().join(", "),
        };
        out.insert("servers", servers);
    }

    /// Who may call: the API keys, the sign-in and its roles, stdio and anonymous callers.
    fn describe_auth(&self, out: &mut BTreeMap<&'static str, String>) {
        let keys: Vec<String> = self
            .auth
            .api_keys
            .iter()
            .map(|key| {
                format!(
                    "{} [{}] sha256:{}…",
                    key.principal.name,
                    verbs_text(&key.principal.verbs),
                    &hex::encode(key.sha256)[..8]
                )
            })
            .collect();
        out.insert(
            "auth.api_keys",
            if keys.is_empty() {
                "(none: anonymous on loopback only)".into()
            } else {
                keys.join("; ")
            },
        );
        if let Some(oauth) = &self.auth.oauth {
            out.insert(
                "auth.oauth",
                format!(
                    "issuer {}, audience {}, required scopes [{}], user {}, client {}, roles {}, console sign-in {}",
                    oauth.issuer,
                    oauth.resource,
                    oauth.required_scopes.join(", "),
                    oauth.user_claim,
                    oauth.client_claim,
                    oauth.roles_claim.as_deref().unwrap_or("(none)"),
                    oauth.console_client_id.as_deref().unwrap_or("(none)")
                ),
            );
            let roles: Vec<String> = self
                .auth
                .roles
                .iter()
                .map(|(name, role)| {
                    let tools = role
                        .tools
                        .as_ref()
                        .map_or_else(|| "every tool".to_owned(), |tools| tools.written().join(" "));
                    let limit = role
                        .calls_per_minute
                        .map_or_else(String::new, |limit| format!(", {limit} calls/min"));
                    let masking = role
                        .masking
                        .as_ref()
                        .map_or_else(String::new, |policy| format!(", masking {}", policy.id));
                    format!("{name} [{}] tools: {tools}{limit}{masking}", verbs_text(&role.verbs))
                })
                .collect();
            out.insert(
                "auth.roles",
                if roles.is_empty() { "(none: tokens may read)".into() } else { roles.join("; ") },
            );
        }
        out.insert(
            "auth.stdio",
            format!("{} [{}]", self.auth.stdio.name, verbs_text(&self.auth.stdio.verbs)),
        );
        out.insert(
            "auth.anonymous",
            format!("{} [{}]", self.auth.anonymous.name, verbs_text(&self.auth.anonymous.verbs)),
        );
    }

    /// The HTTP transport's limits and whom it admits.
    fn describe_http(&self, out: &mut BTreeMap<&'static str, String>) {
        out.insert("http.max_body_bytes", self.http.max_body_bytes.to_string());
        let http = &self.http;
        out.insert(
            "http.limits",
            format!(
                "max_connections={} header_timeout_ms={} body_timeout_ms={} max_json_depth={} auth_failures_per_minute={} drain_timeout_ms={}",
                http.max_connections,
                http.header_timeout.as_millis(),
                http.body_timeout.as_millis(),
                http.max_json_depth,
                http.auth_failures_per_minute,
                http.drain_timeout.as_millis()
            ),
        );
        out.insert(
            "http.health_details",
            match http.health_details {
                HealthDetails::Counts => "counts (/healthz and /metrics name no server or tool)",
                HealthDetails::Names => "names (/healthz and /metrics name servers and tools)",
            }
            .into(),
        );
        out.insert(
            "http.trusted_proxies",
            if http.trusted_proxies.is_empty() {
                "(none: the peer address is the client)".into()
            } else {
                http.trusted_proxies.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            },
        );
        out.insert(
            "http.allowed_hosts",
            self.http
                .allowed_hosts
                .as_ref()
                .map_or("loopback names and the bound address".into(), |hosts| hosts.join(", ")),
        );
        out.insert(
            "http.allowed_origins",
            if self.http.allowed_origins.is_empty() {
                "(none: browser origins refused)".into()
            } else {
                self.http.allowed_origins.join(", ")
            },
        );
    }

    /// Each model provider, each tool's model and the prompts' limits.
    fn describe_llm(&self, out: &mut BTreeMap<&'static str, String>) {
        for endpoint in &self.llm.endpoints {
            let key: &'static str = match endpoint.provider {
                crate::llm::Provider::OpenAi => "llm.openai",
                crate::llm::Provider::Anthropic => "llm.anthropic",
                crate::llm::Provider::Google => "llm.google",
                crate::llm::Provider::Client => "llm.client",
            };
            let state = if endpoint.api_key.is_some() {
                "key set".to_owned()
            } else if crate::llm::is_configured(endpoint) {
                "no key (a server of its own)".to_owned()
            } else {
                format!("not configured: set {}", endpoint.provider.key_variables())
            };
            out.insert(key, format!("{state}, {}", mask_url(&endpoint.base_url)));
        }
        out.insert(
            "llm.tools",
            self.llm
                .tools
                .iter()
                .map(|(tool, model)| {
                    format!("{}={}/{}", tool.as_str(), model.provider, model.model)
                })
                .collect::<Vec<_>>()
                .join(" "),
        );
        out.insert(
            "llm",
            format!(
                "timeout_ms={} max_retries={} max_backoff_ms={} context_budget_tokens={} schema_budget_tokens={}",
                self.llm.client.timeout.as_millis(),
                self.llm.client.max_retries,
                self.llm.client.max_backoff.as_millis(),
                self.llm.context_budget_tokens,
                self.llm.schema_budget_tokens
            ),
        );
        out.insert("ORCA_CONTEXT_FILE", self.llm.context_file.display().to_string());
    }

    /// The external servers and the Metabase and Weaviate upstreams.
    fn describe_upstreams(&self, out: &mut BTreeMap<&'static str, String>) {
        let external = match &self.external.file {
            None => "(none)".to_owned(),
            Some(file) => {
                let servers: Vec<String> = self
                    .external
                    .servers
                    .iter()
                    .map(|server| match &server.availability {
                        Availability::Enabled => {
                            format!("{} ({})", server.key, server.transport.name())
                        }
                        Availability::Disabled => format!("{} (disabled)", server.key),
                        Availability::MissingCredentials(names) => {
                            format!("{} (missing credentials: {})", server.key, names.join(", "))
                        }
                    })
                    .collect();
                format!("{}: {}", file.display(), servers.join("; "))
            }
        };
        out.insert("ORCA_EXTERNAL_MCPS", external);
        out.insert(
            "METABASE_URL",
            self.metabase
                .as_ref()
                .map_or("(unset: server disabled)".into(), MetabaseConfig::describe),
        );
        out.insert(
            "WEAVIATE_URL",
            self.weaviate.as_ref().map_or("(unset: weaviate disabled)".into(), |weaviate| {
                let headers: Vec<&str> =
                    weaviate.headers.iter().map(|(name, _)| name.as_str()).collect();
                format!(
                    "{}, {}, headers [{}], timeout_ms={} max_results_bytes={}",
                    weaviate.display_url(),
                    if weaviate.api_key.is_some() { "API key set" } else { "anonymous" },
                    headers.join(", "),
                    weaviate.timeout.as_millis(),
                    weaviate.max_results_bytes
                )
            }),
        );
    }
}

fn verbs_text(verbs: &BTreeSet<Verb>) -> String {
    verbs.iter().map(|verb| verb.as_str()).collect::<Vec<_>>().join(",")
}

/// A snapshot of the environment, so that loading is a pure function of its inputs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Env {
    vars: HashMap<String, String>,
}

impl Env {
    /// The process environment, after `.env` in the working directory (if any) has been applied.
    /// Variables already set win over `.env`.
    pub(crate) fn from_process() -> Env {
        // A missing .env is the normal case; a malformed one is reported by dotenvy as an error
        // we surface through the log, since it would otherwise silently drop settings.
        if let Err(error) = dotenvy::dotenv()
            && !error.not_found()
        {
            tracing::warn!("ignoring .env: {error}");
        }
        Env { vars: std::env::vars().collect() }
    }

    /// An environment of exactly these variables (tests and the fuzz targets).
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Env {
        Env {
            vars: pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str).filter(|value| !value.is_empty())
    }
}

/// All the problems found in one load, each naming its file or variable and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigErrors(pub(crate) Vec<String>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "invalid configuration ({} problem{}):",
            self.0.len(),
            if self.0.len() == 1 { "" } else { "s" }
        )?;
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "  - {error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Load and validate the configuration.
///
/// `config_path` is `--config`; without it `ORCA_CONFIG`, then `./orca.yaml` if it exists.
///
/// # Errors
///
/// Every problem found, in one [`ConfigErrors`].
pub(crate) fn load(config_path: Option<&Path>, env: &Env) -> Result<Config, ConfigErrors> {
    let mut errors = Vec::new();
    let (config_file, document, file_label) = read_config_file(config_path, env, &mut errors);
    let sections = Sections::split(&document, &file_label, &mut errors);

    let home = match env.get("ORCA_HOME") {
        Some(home) => PathBuf::from(home),
        None => default_home(env),
    };
    let target_database_url = database_url(env, "DATABASE_URL", &mut errors);
    let state_database_url = database_url(env, "ORCA_DATABASE_URL", &mut errors);

    let servers =
        sections.servers.and_then(|value| enabled_servers(value, &file_label, &mut errors));

    let database = sections
        .database
        .and_then(|value| section::<pool::RawDatabase>(value, "database", &file_label, &mut errors))
        .unwrap_or_default()
        .validate(&file_label, &mut errors);
    let raw_auth: RawAuth = sections
        .auth
        .and_then(|value| section(value, "auth", &file_label, &mut errors))
        .unwrap_or_default();
    let (masking, masking_kinds) = masking::load(sections.masking, &file_label, &mut errors);
    let mut auth = auth::validate_auth(raw_auth, &masking, &file_label, &mut errors);
    masking::give_kinds(&mut auth, &masking_kinds);
    let raw_http: RawHttp = sections
        .http
        .and_then(|value| section(value, "http", &file_label, &mut errors))
        .unwrap_or_default();
    let http = http::validate_http(raw_http, &file_label, &mut errors);
    let raw_tracking: RawTracking = sections
        .tracking
        .and_then(|value| section(value, "tracking", &file_label, &mut errors))
        .unwrap_or_default();
    let tracking = validate_tracking(raw_tracking, &file_label, &mut errors);
    let raw_sql: RawSql = sections
        .sql
        .and_then(|value| section(value, "sql", &file_label, &mut errors))
        .unwrap_or_default();
    let sql = validate_sql(raw_sql, &file_label, &mut errors);
    let read_only = match sections.read_only {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(other) => {
            errors.push(format!("{file_label}: read_only: expected true or false, found {other}"));
            false
        }
    };
    let secret = secret(env, &mut errors);
    let trace_url = trace_url(env, &mut errors);

    let external = external::load(env, &mut errors);
    let raw_data: RawData = sections
        .data
        .and_then(|value| section(value, "data", &file_label, &mut errors))
        .unwrap_or_default();
    let data = validate_data(raw_data, &file_label, &mut errors);

    let llm = llm::load(sections.llm, env, &file_label, &home, &mut errors);
    let metabase = metabase::load(sections.metabase, env, &file_label, &mut errors);
    let weaviate = weaviate::load(sections.weaviate, env, &file_label, &mut errors);
    let databases = databases::load(sections.databases, env, &file_label, &mut errors);
    let catalog = sections
        .catalog
        .and_then(|value| {
            section::<catalog::RawCatalog>(value, "catalog", &file_label, &mut errors)
        })
        .unwrap_or_default()
        .validate(env.get("ORCA_CATALOG_SEARCH_ABOVE"), &file_label, &mut errors);
    let cluster = sections
        .cluster
        .and_then(|value| {
            section::<cluster::RawCluster>(value, "cluster", &file_label, &mut errors)
        })
        .unwrap_or_default()
        .validate(env.get("ORCA_ADVERTISE_URL"), &file_label, &mut errors);
    let guard = sections
        .guard
        .and_then(|value| section::<guard::RawGuard>(value, "guard", &file_label, &mut errors))
        .unwrap_or_default()
        .validate(&file_label, &mut errors);

    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    let pg_bindir = env.get("ORCA_PG_BINDIR").map(PathBuf::from);
    Ok(Config {
        home,
        config_file,
        pg_bindir,
        database_url: target_database_url,
        state_database_url,
        databases,
        database,
        servers,
        auth,
        http,
        tracking,
        sql,
        read_only,
        secret,
        trace_url,
        external,
        data,
        masking,
        llm,
        metabase,
        weaviate,
        catalog,
        cluster,
        guard,
    })
}

/// The configuration file (`--config`, else `ORCA_CONFIG`, else `./orca.yaml` if it exists), its
/// document (empty without a file) and the name its problems are reported under.
fn read_config_file(
    config_path: Option<&Path>,
    env: &Env,
    errors: &mut Vec<String>,
) -> (Option<PathBuf>, Value, String) {
    let explicit =
        config_path.map(Path::to_path_buf).or_else(|| env.get("ORCA_CONFIG").map(PathBuf::from));
    let config_file = match explicit {
        Some(path) => Some(path),
        None => Some(PathBuf::from("orca.yaml")).filter(|path| path.is_file()),
    };
    let document = match &config_file {
        None => Value::Object(Default::default()),
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => parse_yaml(&text, path, errors),
            Err(error) => {
                errors.push(format!("{}: cannot read: {error}", path.display()));
                Value::Object(Default::default())
            }
        },
    };
    let file_label = config_file
        .as_ref()
        .map_or_else(|| "orca.yaml".to_owned(), |path| path.display().to_string());
    (config_file, document, file_label)
}

/// `servers:`, the internal servers to run: known names, each once.
fn enabled_servers(value: &Value, file: &str, errors: &mut Vec<String>) -> Option<Vec<ServerKind>> {
    let names: Option<Vec<String>> = section(value, "servers", file, errors);
    let mut kinds = Vec::new();
    for (index, name) in names?.iter().enumerate() {
        match ServerKind::parse(name) {
            Some(kind) if !kinds.contains(&kind) => kinds.push(kind),
            Some(_) => errors.push(format!("{file}: servers[{index}]: `{name}` is listed twice")),
            None => errors.push(format!(
                "{file}: servers[{index}]: unknown server `{name}`; known servers: {}",
                ServerKind::known_names()
            )),
        }
    }
    Some(kinds)
}

/// `tracking:`, checked: the queue, the batches, the stored responses and the retention.
fn validate_tracking(raw: RawTracking, file: &str, errors: &mut Vec<String>) -> TrackingConfig {
    TrackingConfig {
        enabled: raw.enabled.unwrap_or(true),
        queue_capacity: positive(
            raw.queue_capacity,
            10_000,
            "tracking.queue_capacity",
            file,
            errors,
        ),
        batch_size: positive(raw.batch_size, 1024, "tracking.batch_size", file, errors),
        replay_interval: Duration::from_millis(positive(
            raw.replay_interval_ms,
            2_000,
            "tracking.replay_interval_ms",
            file,
            errors,
        ) as u64),
        max_response_bytes: positive(
            raw.max_response_bytes,
            64 * 1024,
            "tracking.max_response_bytes",
            file,
            errors,
        ),
        retention_days: u32::try_from(raw.retention_days.unwrap_or(90)).unwrap_or_else(|_| {
            errors.push(format!("{file}: tracking.retention_days: too large"));
            90
        }),
    }
}

/// `data:`, checked: the `data` server's counting and sampling limits.
fn validate_data(raw: RawData, file: &str, errors: &mut Vec<String>) -> DataConfig {
    DataConfig {
        exact_count_max_rows: raw
            .exact_count_max_rows
            .unwrap_or(DataConfig::default().exact_count_max_rows),
        sample_rows: match raw.sample_rows {
            Some(0) => {
                errors.push(format!("{file}: data.sample_rows: must be greater than zero"));
                DataConfig::default().sample_rows
            }
            Some(rows) => rows,
            None => DataConfig::default().sample_rows,
        },
    }
}

/// `ORCA_SECRET`, the key of confirmation tokens, if set and long enough.
fn secret(env: &Env, errors: &mut Vec<String>) -> Option<SecretString> {
    match env.get("ORCA_SECRET") {
        Some(secret) if secret.len() < 32 => {
            errors.push(
                "environment: ORCA_SECRET: must be at least 32 characters; leave it unset to have one generated in ORCA_HOME".to_owned(),
            );
            None
        }
        Some(secret) => Some(SecretString::from(secret.to_owned())),
        None => None,
    }
}

/// `ORCA_TRACE_URL`: the console's link to a call's trace, a URL with `{trace_id}` in it.
fn trace_url(env: &Env, errors: &mut Vec<String>) -> Option<String> {
    env.get("ORCA_TRACE_URL").map(str::trim).and_then(|template| {
        let web = template.starts_with("http://") || template.starts_with("https://");
        if web && template.contains("{trace_id}") && url::Url::parse(template).is_ok() {
            Some(template.to_owned())
        } else {
            errors.push(
                "environment: ORCA_TRACE_URL: must be an http(s) URL with {trace_id} in it, such as http://jaeger:16686/trace/{trace_id}".to_owned(),
            );
            None
        }
    })
}

fn validate_sql(raw: RawSql, file: &str, errors: &mut Vec<String>) -> SqlConfig {
    let defaults = SqlConfig::default();
    let write_confirmation = match raw.write_confirmation.as_deref() {
        None | Some("model") => WriteConfirmation::Model,
        Some("human") => WriteConfirmation::Human,
        Some(other) => {
            errors.push(format!(
                "{file}: sql.write_confirmation: `{other}` is not one of: model, human"
            ));
            WriteConfirmation::Model
        }
    };
    let mut number = |value: Option<u64>, default: u64, key: &str| -> u64 {
        match value {
            Some(0) => {
                errors.push(format!("{file}: sql.{key}: must be greater than 0"));
                default
            }
            Some(value) => value,
            None => default,
        }
    };
    let as_u64 = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let config = SqlConfig {
        write_confirmation,
        token_lifetime: Duration::from_secs(number(
            raw.token_lifetime_seconds,
            defaults.token_lifetime.as_secs(),
            "token_lifetime_seconds",
        )),
        default_max_rows: number(
            raw.default_max_rows,
            as_u64(defaults.default_max_rows),
            "default_max_rows",
        ) as usize,
        hard_max_rows: number(raw.hard_max_rows, as_u64(defaults.hard_max_rows), "hard_max_rows")
            as usize,
        max_result_bytes: number(
            raw.max_result_bytes,
            as_u64(defaults.max_result_bytes),
            "max_result_bytes",
        ) as usize,
        default_timeout: Duration::from_millis(number(
            raw.default_timeout_ms,
            millis(defaults.default_timeout),
            "default_timeout_ms",
        )),
        max_timeout: Duration::from_millis(number(
            raw.max_timeout_ms,
            millis(defaults.max_timeout),
            "max_timeout_ms",
        )),
        schema_cache_ttl: Duration::from_secs(number(
            raw.schema_cache_ttl_seconds,
            defaults.schema_cache_ttl.as_secs(),
            "schema_cache_ttl_seconds",
        )),
        page_token_lifetime: Duration::from_secs(number(
            raw.page_token_lifetime_seconds,
            defaults.page_token_lifetime.as_secs(),
            "page_token_lifetime_seconds",
        )),
        refuse_masked_sql: raw.refuse_masked_sql.unwrap_or(defaults.refuse_masked_sql),
    };
    if config.default_max_rows > config.hard_max_rows {
        errors.push(format!("{file}: sql.default_max_rows: must not exceed sql.hard_max_rows"));
    }
    if config.default_timeout > config.max_timeout {
        errors.push(format!("{file}: sql.default_timeout_ms: must not exceed sql.max_timeout_ms"));
    }
    config
}

fn parse_yaml(text: &str, path: &Path, errors: &mut Vec<String>) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_saphyr::from_str::<Value>(text) {
        Ok(Value::Null) => Value::Object(Default::default()),
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            errors.push(format!("{}: the top level must be a mapping of sections", path.display()));
            Value::Object(Default::default())
        }
        Err(error) => {
            errors.push(format!("{}: not valid YAML: {error}", path.display()));
            Value::Object(Default::default())
        }
    }
}

/// The top-level sections of `orca.yaml`. Unknown section names are errors.
struct Sections<'a> {
    servers: Option<&'a Value>,
    database: Option<&'a Value>,
    databases: Option<&'a Value>,
    auth: Option<&'a Value>,
    http: Option<&'a Value>,
    tracking: Option<&'a Value>,
    sql: Option<&'a Value>,
    read_only: Option<&'a Value>,
    data: Option<&'a Value>,
    masking: Option<&'a Value>,
    llm: Option<&'a Value>,
    metabase: Option<&'a Value>,
    weaviate: Option<&'a Value>,
    catalog: Option<&'a Value>,
    cluster: Option<&'a Value>,
    guard: Option<&'a Value>,
}

impl<'a> Sections<'a> {
    const KNOWN: [&'static str; 16] = [
        "servers",
        "database",
        "databases",
        "auth",
        "http",
        "tracking",
        "sql",
        "read_only",
        "data",
        "masking",
        "llm",
        "metabase",
        "weaviate",
        "catalog",
        "cluster",
        "guard",
    ];

    fn split(document: &'a Value, file: &str, errors: &mut Vec<String>) -> Sections<'a> {
        let empty = Sections {
            servers: None,
            database: None,
            databases: None,
            auth: None,
            http: None,
            tracking: None,
            sql: None,
            read_only: None,
            data: None,
            masking: None,
            llm: None,
            metabase: None,
            weaviate: None,
            catalog: None,
            cluster: None,
            guard: None,
        };
        let Value::Object(map) = document else { return empty };
        for key in map.keys() {
            if !Sections::KNOWN.contains(&key.as_str()) {
                errors.push(format!(
                    "{file}: {key}: unknown key; known keys: {}{}",
                    Sections::KNOWN.join(", "),
                    suggest::did_you_mean(key, Sections::KNOWN)
                ));
            }
        }
        Sections {
            servers: map.get("servers"),
            database: map.get("database"),
            databases: map.get("databases"),
            auth: map.get("auth"),
            http: map.get("http"),
            tracking: map.get("tracking"),
            sql: map.get("sql"),
            read_only: map.get("read_only"),
            data: map.get("data"),
            masking: map.get("masking"),
            llm: map.get("llm"),
            metabase: map.get("metabase"),
            weaviate: map.get("weaviate"),
            catalog: map.get("catalog"),
            cluster: map.get("cluster"),
            guard: map.get("guard"),
        }
    }
}

/// Deserialize one section, recording an error that names the exact key on failure.
fn section<T: DeserializeOwned>(
    value: &Value,
    name: &str,
    file: &str,
    errors: &mut Vec<String>,
) -> Option<T> {
    if value.is_null() {
        return serde_json::from_value(Value::Object(Default::default())).ok();
    }
    match serde_path_to_error::deserialize(value.clone()) {
        Ok(parsed) => Some(parsed),
        Err(error) => {
            let path = error.path().to_string();
            let key = if path == "." { name.to_owned() } else { format!("{name}.{path}") };
            let message = suggest::with_suggestion(error.into_inner().to_string());
            errors.push(format!("{file}: {key}: {message}"));
            None
        }
    }
}

fn positive(
    value: Option<u64>,
    default: usize,
    key: &str,
    file: &str,
    errors: &mut Vec<String>,
) -> usize {
    match value {
        None => default,
        Some(0) => {
            errors.push(format!("{file}: {key}: must be greater than zero"));
            default
        }
        Some(value) => usize::try_from(value).unwrap_or(usize::MAX),
    }
}

fn validate_verbs(
    verbs: &[String],
    key: &str,
    file: &str,
    errors: &mut Vec<String>,
) -> BTreeSet<Verb> {
    let mut out = BTreeSet::new();
    for (index, text) in verbs.iter().enumerate() {
        match Verb::parse(text) {
            Some(verb) => {
                out.insert(verb);
            }
            None => errors.push(format!(
                "{file}: {key}[{index}]: unknown verb `{text}`; expected one of read, create, update, delete"
            )),
        }
    }
    out
}

fn database_url(env: &Env, var: &str, errors: &mut Vec<String>) -> Option<SecretString> {
    let value = env.get(var)?;
    if !(value.starts_with("postgres://") || value.starts_with("postgresql://")) {
        errors.push(format!("environment: {var}: expected a postgres:// or postgresql:// URL"));
        return None;
    }
    if let Err(error) = sqlx::postgres::PgConnectOptions::from_str(value) {
        // The parser's message can quote the URL; keep only its kind.
        let _ = error;
        errors
            .push(format!("environment: {var}: not a valid PostgreSQL URL ({})", mask_url(value)));
        return None;
    }
    Some(SecretString::from(value.to_owned()))
}

/// `ORCA_HOME` when unset: `~/.local/share/orca`, or `/var/lib/orca` for root, whose home
/// directory the `postgres` user cannot traverse.
fn default_home(env: &Env) -> PathBuf {
    if running_as_root() {
        return PathBuf::from("/var/lib/orca");
    }
    if let Some(data) = env.get("XDG_DATA_HOME") {
        return PathBuf::from(data).join("orca");
    }
    match env.get("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/orca"),
        None => PathBuf::from(".orca"),
    }
}

/// Whether this process runs with uid 0, read from `/proc/self` so no unsafe call is needed.
pub(crate) fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// A database URL with its password replaced by `****`, safe to print.
pub(crate) fn mask_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return "****".into() };
    let (authority, tail) = match rest.find('/') {
        Some(index) => rest.split_at(index),
        None => (rest, ""),
    };
    let masked_authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:****@{host}"),
            None => format!("{userinfo}@{host}"),
        },
        None => authority.to_owned(),
    };
    // Query parameters may carry a password too (`?password=`).
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=****"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{masked_authority}{tail}")
}

/// Whether an HTTP bind address is loopback, where anonymous callers may be served.
pub(crate) fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}
