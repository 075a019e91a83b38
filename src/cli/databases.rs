//! Which PostgreSQL orca talks to: the configured URLs, or the embedded cluster under
//! `ORCA_HOME` (database `orca` for orca's state, `chinook` for the SQL tools); and the target
//! databases of the SQL tools, built with their pools, limits and context files.
//!
//! # Design notes
//!
//! `cli/databases.rs` decides which PostgreSQL to use (configured URLs or the embedded cluster) and
//! which target databases the SQL tools serve (`databases:` in `orca.yaml`, else `DATABASE_URL`
//! named after its database, else the embedded `chinook`), and connects them (`connect_targets`: a
//! lazy pool each, its limits, its context file, each distinct file watched once); `cli/output.rs`
//! is the only place that writes to stdout; `cli/context.rs` holds `orca context check [--watch]`,
//! `refresh-schema` (writes through a temporary file and a rename) and `suggest` (lessons from
//! `tracking`, a model's additions checked to keep the file parseable, a unified diff from
//! `similar`; `--out` may not be the context file, which is never written).

use std::path::Path;

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};

use crate::config::{Config, DatabaseConfig, mask_url};
use crate::context::{ContextStore, ContextWatch};
use crate::embedded::EmbeddedPostgres;
use crate::servers::sql_common::{Database, DatabaseSettings, Databases as Targets};

/// One target database of the SQL tools, before it is connected.
#[derive(Debug, Clone)]
pub(super) struct TargetSpec {
    /// The catalog name.
    pub(super) name: String,
    pub(super) url: SecretString,
    /// Its entry of `databases:`, when it has one.
    pub(super) config: Option<DatabaseConfig>,
}

/// The databases of one run.
#[derive(Debug)]
pub(super) struct Databases {
    /// orca's own state: `ORCA_DATABASE_URL`, else `DATABASE_URL`, else the embedded `orca`.
    pub(super) state_url: SecretString,
    /// The databases the SQL tools work on: `databases:`, else `DATABASE_URL`, else the
    /// embedded `chinook`.
    pub(super) targets: Vec<TargetSpec>,
    embedded: Option<EmbeddedPostgres>,
}

impl Databases {
    /// Resolve the URLs, starting the embedded cluster when none is configured. With
    /// `load_sample`, the embedded cluster gets the Chinook database (once).
    pub(super) async fn open(config: &Config, load_sample: bool) -> anyhow::Result<Databases> {
        let configured_state =
            config.state_database_url.clone().or_else(|| config.database_url.clone());
        if let Some(state_url) = configured_state {
            return Ok(Databases {
                state_url,
                targets: configured_targets(config),
                embedded: None,
            });
        }
        let cluster = EmbeddedPostgres::start(&config.home.join("pg"), config.pg_bindir.as_deref())
            .await
            .context("cannot start the embedded PostgreSQL (set ORCA_DATABASE_URL to use an existing server)")?;
        cluster.ensure_database("orca").await?;
        let mut targets = configured_targets(config);
        if targets.is_empty() && load_sample {
            cluster.ensure_chinook("chinook").await?;
            targets.push(TargetSpec {
                name: "chinook".to_owned(),
                url: SecretString::from(cluster.url("chinook")),
                config: None,
            });
        }
        Ok(Databases {
            state_url: SecretString::from(cluster.url("orca")),
            targets,
            embedded: Some(cluster),
        })
    }

    /// Whether the target is the embedded cluster's Chinook database.
    pub(super) fn serves_embedded_chinook(&self) -> bool {
        self.embedded.is_some() && self.targets.iter().any(|target| target.config.is_none())
    }

    /// The target databases as they may be printed.
    pub(super) fn target_description(&self) -> Option<String> {
        let listed: Vec<String> = self
            .targets
            .iter()
            .map(|target| format!("{} ({})", target.name, mask_url(target.url.expose_secret())))
            .collect();
        (!listed.is_empty()).then(|| listed.join(", "))
    }

    /// The target database a command names with `--database`, or the only one.
    pub(super) fn target(&self, requested: Option<&str>) -> anyhow::Result<&TargetSpec> {
        let names = || {
            self.targets.iter().map(|target| target.name.as_str()).collect::<Vec<_>>().join(", ")
        };
        match requested {
            Some(name) => {
                self.targets.iter().find(|target| target.name == name).with_context(|| {
                    format!(
                        "--database: no database named `{name}`; the databases are: {}",
                        names()
                    )
                })
            }
            None => match self.targets.as_slice() {
                [] => anyhow::bail!(
                    "no target database: set DATABASE_URL or list `databases` in orca.yaml"
                ),
                [only] => Ok(only),
                _ => anyhow::bail!(
                    "several databases are configured; choose one with --database: {}",
                    names()
                ),
            },
        }
    }

    /// Stop the embedded cluster if this process started it.
    pub(super) async fn close(self) -> anyhow::Result<()> {
        match self.embedded {
            Some(cluster) => cluster.stop().await,
            None => Ok(()),
        }
    }
}

/// The target databases the configuration names: `databases:`, else `DATABASE_URL` as one
/// database named after it.
fn configured_targets(config: &Config) -> Vec<TargetSpec> {
    if !config.databases.is_empty() {
        return config
            .databases
            .iter()
            .map(|database| TargetSpec {
                name: database.name.clone(),
                url: database.url.clone(),
                config: Some(database.clone()),
            })
            .collect();
    }
    config
        .database_url
        .iter()
        .map(|url| TargetSpec {
            name: name_of(url.expose_secret()),
            url: url.clone(),
            config: None,
        })
        .collect()
}

/// The catalog name of a database known only by its URL: its database name, made a valid
/// catalog name (`postgres` when the URL names none).
fn name_of(url: &str) -> String {
    let database = url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .ok()
        .and_then(|options| options.get_database().map(str::to_owned))
        .unwrap_or_else(|| "postgres".to_owned());
    let cleaned: String = database
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .take(63)
        .collect();
    if crate::config::valid_database_name(&cleaned) { cleaned } else { "postgres".to_owned() }
}

/// Connect (lazily) to every target database: one pool each, sized by `database:`, its limits,
/// and its context file (the configured one unless it names its own, each watched once).
pub(super) fn connect_targets(
    config: &Config,
    targets: &[TargetSpec],
    shared_context: &ContextStore,
) -> anyhow::Result<(Targets, Vec<ContextWatch>)> {
    let mut list = Vec::new();
    let mut watches = Vec::new();
    let mut stores: Vec<ContextStore> = vec![shared_context.clone()];
    for target in targets {
        let pool = crate::sql::connect_target(target.url.expose_secret(), config.database.size())
            .with_context(|| format!("database `{}`", target.name))?;
        crate::sql::open_minimum(&pool, config.database.size());
        let entry = target.config.as_ref();
        let mut sql = config.sql.clone();
        if let Some(timeout) = entry.and_then(|entry| entry.statement_timeout) {
            sql.default_timeout = timeout;
            sql.max_timeout = sql.max_timeout.max(timeout);
        }
        if let Some(rows) = entry.and_then(|entry| entry.max_rows) {
            sql.hard_max_rows = rows;
            sql.default_max_rows = sql.default_max_rows.min(rows);
        }
        let context = match entry.and_then(|entry| entry.context_file.as_deref()) {
            None => shared_context.clone(),
            Some(path) => context_store(path, &mut stores, &mut watches),
        };
        list.push(Database::new(
            pool,
            DatabaseSettings {
                name: target.name.clone(),
                description: entry.and_then(|entry| entry.description.clone()),
                read_only: config.read_only
                    || entry.and_then(|entry| entry.read_only).unwrap_or(false),
                schemas: entry.map(|entry| entry.schemas.clone()).unwrap_or_default(),
                sql,
                context,
            },
        ));
    }
    Ok((Targets::new(list), watches))
}

/// The store of the context file at `path`, shared by the databases that name the same file.
fn context_store(
    path: &Path,
    stores: &mut Vec<ContextStore>,
    watches: &mut Vec<ContextWatch>,
) -> ContextStore {
    if let Some(store) = stores.iter().find(|store| store.path() == path) {
        return store.clone();
    }
    let store = ContextStore::open(path.to_path_buf());
    match store.watch() {
        Ok(watch) => watches.push(watch),
        Err(error) => tracing::warn!(
            "cannot watch the context file {} for changes ({error}); it is read once",
            path.display()
        ),
    }
    stores.push(store.clone());
    store
}
