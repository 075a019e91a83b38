//! The target databases the SQL tools serve, each a catalog chosen by name: its pool, its limits,
//! its schema cache, its context file, and its health (reachable or not, and what it supports,
//! found at connect time), probed in the background so that one database that is down is
//! reported as such and never stops the others.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::{SchemaCache, Target};
use crate::config::SqlConfig;
use crate::context::ContextStore;
use crate::tool::{ErrorCode, ToolError};

/// How often a database's health is checked again.
const PROBE_INTERVAL: Duration = Duration::from_secs(10);
/// How long start-up waits for the first `LISTEN` on the channel of schema changes.
const FIRST_LISTEN: Duration = Duration::from_secs(5);
/// How long one probe may take before the database counts as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What one database is configured with.
#[derive(Debug, Clone)]
pub(crate) struct DatabaseSettings {
    /// The catalog name.
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) read_only: bool,
    /// Globs over the schemas to show; every schema when empty.
    pub(crate) schemas: Vec<String>,
    /// The SQL limits, with this database's timeout and row cap applied.
    pub(crate) sql: SqlConfig,
    pub(crate) context: ContextStore,
}

/// One target database.
#[derive(Debug)]
pub(crate) struct Database {
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) target: Target,
    pub(crate) read_only: bool,
    pub(crate) sql: SqlConfig,
    pub(crate) schema_cache: SchemaCache,
    pub(crate) context: ContextStore,
    health: watch::Sender<Health>,
    /// orca's state database, once known: where a schema change is told to every replica.
    events: Arc<std::sync::OnceLock<sqlx::PgPool>>,
}

/// Whether a database answers, and what it supports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Health {
    /// `connecting` until the first probe, then `running` or why it is not.
    pub(crate) status: String,
    /// The server's version string (`SHOW server_version`), once reached.
    pub(crate) version: Option<String>,
    /// What it supports, found when first reached.
    pub(crate) features: Option<Features>,
}

/// The PostgreSQL features orca uses that a compatible database may lack, found by trying each
/// at connect time rather than assumed from a version number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Features {
    /// `TABLESAMPLE SYSTEM` (sampling of large tables for statistics, profiles and samples).
    pub(crate) tablesample: bool,
    /// `pg_stat_user_tables` (last analyze and vacuum times in table descriptions).
    pub(crate) stat_views: bool,
    /// `EXPLAIN (FORMAT JSON)` (plans and the rows a write would affect).
    pub(crate) explain_json: bool,
}

impl Features {
    /// The names of the features missing, for people.
    pub(crate) fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if !self.tablesample {
            missing.push("TABLESAMPLE");
        }
        if !self.stat_views {
            missing.push("pg_stat_user_tables");
        }
        if !self.explain_json {
            missing.push("EXPLAIN (FORMAT JSON)");
        }
        missing
    }

    /// What a database is assumed to support before it was reached: everything, so that a call
    /// tries rather than refuses.
    pub(crate) const ASSUMED: Features =
        Features { tablesample: true, stat_views: true, explain_json: true };
}

impl Database {
    pub(crate) fn new(pool: sqlx::PgPool, settings: DatabaseSettings) -> Database {
        let target = Target::named(pool, &settings.name);
        let (health, _) = watch::channel(Health {
            status: "connecting".to_owned(),
            version: None,
            features: None,
        });
        Database {
            schema_cache: SchemaCache::for_catalog(&settings.name, settings.schemas),
            name: settings.name,
            description: settings.description,
            target,
            read_only: settings.read_only,
            sql: settings.sql,
            context: settings.context,
            health,
            events: Arc::default(),
        }
    }

    /// After DDL ran through orca on this database: this replica's schema cache and masked
    /// sessions are dropped now, and every replica's through `NOTIFY` on orca's state database
    /// ([`Databases::follow_schema_changes`]). A notification that cannot be sent is logged:
    /// the other replicas then see the change within `sql.schema_cache_ttl_seconds`.
    pub(crate) async fn schema_changed(&self) {
        self.forget_schema().await;
        let Some(state) = self.events.get() else { return };
        if let Err(error) = sqlx::query("SELECT pg_catalog.pg_notify($1, $2)")
            .bind(SCHEMA_CHANNEL)
            .bind(&self.name)
            .execute(state)
            .await
        {
            tracing::warn!(database = %self.name, %error, "the other replicas were not told of a schema change");
        }
    }

    async fn forget_schema(&self) {
        self.schema_cache.invalidate();
        self.target.masked.invalidate().await;
    }

    pub(crate) fn health(&self) -> Health {
        self.health.borrow().clone()
    }

    /// What this database supports (everything until it was reached).
    pub(crate) fn features(&self) -> Features {
        self.health.borrow().features.unwrap_or(Features::ASSUMED)
    }

    /// How this database answers `EXPLAIN`.
    pub(crate) fn plan_format(&self) -> crate::sql::PlanFormat {
        if self.features().explain_json {
            crate::sql::PlanFormat::Json
        } else {
            crate::sql::PlanFormat::Text
        }
    }

    /// Check that the database answers and, the first time, find what it supports.
    pub(crate) async fn probe(&self) {
        let outcome = tokio::time::timeout(PROBE_TIMEOUT * 2, async {
            let mut connection =
                match tokio::time::timeout(PROBE_TIMEOUT, self.target.pool.acquire()).await {
                    Ok(connection) => connection?,
                    Err(_) => return Err(sqlx::Error::PoolTimedOut),
                };
            let version: String =
                sqlx::query_scalar("SHOW server_version").fetch_one(&mut *connection).await?;
            drop(connection);
            let known = self.health.borrow().features;
            let features = match known {
                Some(features) => features,
                None => detect(&self.target.pool).await?,
            };
            Ok::<_, sqlx::Error>((version, features))
        })
        .await;
        let next = match outcome {
            Ok(Ok((version, features))) => Health {
                status: "running".to_owned(),
                version: Some(version),
                features: Some(features),
            },
            Ok(Err(error)) => Health {
                status: format!("unreachable: {}", self.why_unreachable(error).await),
                ..self.health()
            },
            Err(_) => Health {
                status: format!("unreachable: no answer within {} s", PROBE_TIMEOUT.as_secs()),
                ..self.health()
            },
        };
        self.health.send_if_modified(|health| {
            let changed = *health != next;
            if changed {
                if next.status == "running" {
                    tracing::info!(database = %self.name, "database reachable");
                } else {
                    tracing::warn!(database = %self.name, "{}", next.status);
                }
                *health = next;
            }
            changed
        });
    }

    /// Why the pool could not reach the database: a pool that gave up waiting is asked once
    /// more with a single connection, whose error names the cause.
    async fn why_unreachable(&self, error: sqlx::Error) -> String {
        use sqlx::Connection as _;
        if !matches!(error, sqlx::Error::PoolTimedOut) {
            return unreachable_reason(&error);
        }
        let options = self.target.pool.connect_options();
        match tokio::time::timeout(PROBE_TIMEOUT, sqlx::PgConnection::connect_with(&options)).await
        {
            Ok(Err(error)) => unreachable_reason(&error),
            Ok(Ok(connection)) => {
                let _ = connection.close().await;
                unreachable_reason(&error)
            }
            Err(_) => format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
        }
    }

    /// Refuse a write to a read-only database.
    ///
    /// # Errors
    ///
    /// `UNAUTHORIZED` when the database is read-only.
    pub(crate) fn check_writable(&self) -> Result<(), ToolError> {
        if self.read_only {
            return Err(ToolError::new(
                ErrorCode::Unauthorized,
                format!("database `{}` is read-only: writes are refused", self.name),
            )
            .not_retryable()
            .with_hint("write to a database that is not read_only in orca.yaml"));
        }
        Ok(())
    }

    /// The database as `list_servers` and `res://catalogs` show it.
    pub(crate) fn summary(&self) -> Value {
        let health = self.health();
        json!({
            "name": self.name,
            "description": self.description,
            "status": health.status,
            "read_only": self.read_only,
            "version": health.version,
            "features": health.features,
        })
    }
}

/// Why a database did not answer, in words that name no host, user or password.
fn unreachable_reason(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Io(io) => format!("cannot connect ({})", io.kind()),
        sqlx::Error::Tls(_) => "the TLS handshake failed".to_owned(),
        sqlx::Error::PoolTimedOut => "no connection within the pool's timeout".to_owned(),
        sqlx::Error::Database(database) => match database.code().as_deref() {
            Some("28P01" | "28000") => "the server refused the credentials".to_owned(),
            Some("3D000") => "the database does not exist".to_owned(),
            Some(code) => format!("the server answered with an error (SQLSTATE {code})"),
            None => "the server answered with an error".to_owned(),
        },
        _ => "cannot connect".to_owned(),
    }
}

/// Try each optional feature once: a statement that fails says the feature is missing.
///
/// # Errors
///
/// When no connection can be had.
pub(crate) async fn detect(pool: &sqlx::PgPool) -> Result<Features, sqlx::Error> {
    const TRIES: [&str; 3] = [
        "EXPLAIN SELECT 1 FROM pg_catalog.pg_class TABLESAMPLE SYSTEM (1) REPEATABLE (0)",
        "SELECT relid FROM pg_catalog.pg_stat_user_tables LIMIT 0",
        "EXPLAIN (FORMAT JSON) SELECT 1",
    ];
    let mut connection = pool.acquire().await?;
    let mut works = [false; TRIES.len()];
    for (index, sql) in TRIES.into_iter().enumerate() {
        works[index] = sqlx::query(sql).execute(&mut *connection).await.is_ok();
    }
    let [tablesample, stat_views, explain_json] = works;
    Ok(Features { tablesample, stat_views, explain_json })
}

/// The channel on orca's state database where a replica tells the others that a database's
/// schema changed (the payload: the database's catalog name).
pub(crate) const SCHEMA_CHANNEL: &str = "orca_schema_changed";

/// Every target database, in configuration order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Databases {
    list: Arc<[Arc<Database>]>,
}

/// Two handles are equal when they hold the same databases.
impl PartialEq for Databases {
    fn eq(&self, other: &Databases) -> bool {
        Arc::ptr_eq(&self.list, &other.list)
    }
}

impl Databases {
    pub(crate) fn new(list: Vec<Database>) -> Databases {
        let events: Arc<std::sync::OnceLock<sqlx::PgPool>> = Arc::default();
        let list = list
            .into_iter()
            .map(|mut database| {
                database.events = Arc::clone(&events);
                Arc::new(database)
            })
            .collect();
        Databases { list }
    }

    /// Tell the other replicas of schema changes through `state` (orca's state database), and
    /// follow theirs: a `LISTEN` that drops a database's schema cache and masked sessions when
    /// another replica ran DDL on it, for as long as the task runs. After the listening
    /// connection was lost and made again, every cache is dropped (a notification may have
    /// been missed).
    /// The context file each database's SQL is written with, by the digest of its text: what
    /// `/healthz` and the directory of replicas show, so that replicas serving different
    /// versions can be told.
    pub(crate) fn context_versions(&self) -> serde_json::Map<String, serde_json::Value> {
        self.iter()
            .map(|database| {
                (database.name.clone(), database.context.current().digest.clone().into())
            })
            .collect()
    }

    /// One digest of every database's context version: equal on replicas that serve the same
    /// context files.
    pub(crate) fn context_version(&self) -> String {
        use sha2::Digest as _;
        let mut hash = sha2::Sha256::new();
        for (name, digest) in self.context_versions() {
            hash.update(name.as_bytes());
            hash.update([0]);
            hash.update(digest.as_str().unwrap_or_default().as_bytes());
            hash.update([0]);
        }
        hex::encode(&hash.finalize()[..8])
    }

    /// Follow the schema changes that other replicas announce, until the task is aborted:
    /// each announced database's cached schema is forgotten, and every one is each time the
    /// channel is heard again (a notice may have been missed while it was not).
    ///
    /// Returns once the first `LISTEN` was made or failed (or after [`FIRST_LISTEN`]), so that
    /// the first one never forgets a schema that a call has already read and cached.
    pub(crate) async fn follow_schema_changes(
        &self,
        state: sqlx::PgPool,
    ) -> tokio::task::JoinHandle<()> {
        if let Some(first) = self.list.first() {
            let _ = first.events.set(state.clone());
        }
        let databases = self.clone();
        let (first_listen, listening) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut first_listen = Some(first_listen);
            loop {
                let listened: Result<std::convert::Infallible, sqlx::Error> = async {
                    let mut listener = sqlx::postgres::PgListener::connect_with(&state).await?;
                    listener.ignore_pool_close_event(true);
                    listener.listen(SCHEMA_CHANNEL).await?;
                    // Listening (again): whatever changed meanwhile is read afresh.
                    for database in databases.iter() {
                        database.forget_schema().await;
                    }
                    if let Some(first_listen) = first_listen.take() {
                        let _ = first_listen.send(());
                    }
                    loop {
                        let notification = listener.recv().await?;
                        for database in databases.iter() {
                            if database.name == notification.payload() {
                                database.forget_schema().await;
                            }
                        }
                    }
                }
                .await;
                let Err(error) = listened;
                // Start-up goes on without the channel: it is heard once the database is back.
                first_listen.take();
                tracing::debug!(%error, "schema changes of other replicas not followed; trying again");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
        let _ = tokio::time::timeout(FIRST_LISTEN, listening).await;
        task
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Database>> {
        self.list.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.list.iter().map(|database| database.name.clone()).collect()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Database>> {
        self.list.iter().find(|database| database.name == name)
    }

    /// Whether any database takes writes.
    pub(crate) fn any_writable(&self) -> bool {
        self.list.iter().any(|database| !database.read_only)
    }

    /// The database a call names, or the only one when it names none.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND` for an unknown name and `INVALID_INPUT` for no name among several, both
    /// listing the names.
    pub(crate) fn resolve(&self, requested: Option<&str>) -> Result<&Arc<Database>, ToolError> {
        match requested {
            Some(name) => self.get(name).ok_or_else(|| {
                ToolError::not_found(format!(
                    "no database named `{name}`; the databases are: {}",
                    self.names().join(", ")
                ))
                .not_retryable()
                .with_hint("set `database` to one of these names (res://catalogs describes them)")
            }),
            None => match &*self.list {
                [only] => Ok(only),
                _ => Err(ToolError::invalid_input(format!(
                    "several databases are served; set `database` to one of: {}",
                    self.names().join(", ")
                ))
                .with_hint("res://catalogs describes each database")),
            },
        }
    }

    /// Probe every database at once, each bounded by the probe timeout.
    pub(crate) async fn probe_all(&self) {
        futures::future::join_all(self.list.iter().map(|database| database.probe())).await;
    }

    /// Prepare, in the background, each masking policy on each database (the first masked call
    /// would otherwise do it), so that a database where one cannot be set up is reported at start
    /// (its masked callers are refused, never served unmasked).
    pub(crate) fn prepare_masking(&self, policies: &[Arc<crate::privacy::mask::MaskingPolicy>]) {
        for database in self.list.iter() {
            for policy in policies {
                let (database, policy) = (Arc::clone(database), Arc::clone(policy));
                tokio::spawn(async move {
                    let _ = database.target.masked.session(&policy).await;
                });
            }
        }
    }

    /// Probe every database now and then every few seconds, for as long as the task runs.
    pub(crate) fn monitor(&self) -> tokio::task::JoinHandle<()> {
        let databases = self.clone();
        tokio::spawn(async move {
            loop {
                databases.probe_all().await;
                tokio::time::sleep(PROBE_INTERVAL).await;
            }
        })
    }
}

impl crate::directory::LiveSummaries for Databases {
    /// Every database as `list_servers` shows it.
    fn summaries(&self) -> Vec<Value> {
        self.list.iter().map(|database| database.summary()).collect()
    }
}
