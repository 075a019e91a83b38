//! Which PostgreSQL orca talks to: the configured URLs, or the embedded cluster under
//! `ORCA_HOME` (database `orca` for orca's state, `chinook` for the SQL tools).

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};

use crate::config::{Config, mask_url};
use crate::embedded::EmbeddedPostgres;

/// The databases of one run.
#[derive(Debug)]
pub(super) struct Databases {
    /// orca's own state: `ORCA_DATABASE_URL`, else `DATABASE_URL`, else the embedded `orca`.
    pub(super) state_url: SecretString,
    /// The database the SQL tools work on: `DATABASE_URL`, else the embedded `chinook`.
    pub(super) target_url: Option<SecretString>,
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
                target_url: config.database_url.clone(),
                embedded: None,
            });
        }
        let cluster = EmbeddedPostgres::start(&config.home.join("pg"), config.pg_bindir.as_deref())
            .await
            .context("cannot start the embedded PostgreSQL (set ORCA_DATABASE_URL to use an existing server)")?;
        cluster.ensure_database("orca").await?;
        let target_url = if load_sample {
            cluster.ensure_chinook("chinook").await?;
            Some(SecretString::from(cluster.url("chinook")))
        } else {
            None
        };
        Ok(Databases {
            state_url: SecretString::from(cluster.url("orca")),
            target_url,
            embedded: Some(cluster),
        })
    }

    /// Whether the databases are the embedded cluster's (with Chinook as the target).
    pub(super) fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// The target database as it may be printed.
    pub(super) fn target_description(&self) -> Option<String> {
        self.target_url.as_ref().map(|url| mask_url(url.expose_secret()))
    }

    /// Stop the embedded cluster if this process started it.
    pub(super) async fn close(self) -> anyhow::Result<()> {
        match self.embedded {
            Some(cluster) => cluster.stop().await,
            None => Ok(()),
        }
    }
}
