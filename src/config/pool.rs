//! `database:` in `orca.yaml`: the size of orca's two connection pools, the one on the target
//! database (`DATABASE_URL`) and the one on orca's own state (`ORCA_DATABASE_URL`).

use schemars::JsonSchema;
use serde::Deserialize;

/// The largest pool a setting may ask for: PostgreSQL's own default `max_connections` is 100.
const MOST: u64 = 1_000;

/// The size of each pool. A pool opens connections on demand up to `max_connections` and closes
/// those idle for five minutes, but never goes below `min_connections`, which it opens at start:
/// `min_connections` equal to `max_connections` gives a fixed-size pool, whose connection count
/// does not creep up with the load's rare peaks (what a long-running replica wants; a desktop
/// client's `serve --stdio` is better served by the lazy default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolConfig {
    pub(crate) max_connections: u32,
    pub(crate) min_connections: u32,
}

impl PoolConfig {
    /// The numbers `sql` builds a pool from.
    pub(crate) fn size(&self) -> crate::sql::PoolSize {
        crate::sql::PoolSize { max: self.max_connections, min: self.min_connections }
    }
}

impl Default for PoolConfig {
    fn default() -> PoolConfig {
        PoolConfig { max_connections: 8, min_connections: 0 }
    }
}

/// `database:` as written: the size of each of the two pools (the target database's and orca's
/// own state's).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Pool")]
pub(super) struct RawDatabase {
    /// At most this many connections per pool (1 to 1,000).
    #[schemars(extend("default" = 8), range(min = 1, max = 1000))]
    max_connections: Option<u64>,
    /// Connections opened at start and kept; equal to `max_connections`: a fixed-size pool.
    #[schemars(extend("default" = 0))]
    min_connections: Option<u64>,
}

impl RawDatabase {
    pub(super) fn validate(self, file: &str, errors: &mut Vec<String>) -> PoolConfig {
        let default = PoolConfig::default();
        let max_connections = match self.max_connections {
            None => default.max_connections,
            Some(count @ 1..=MOST) => count as u32,
            Some(count) => {
                errors.push(format!(
                    "{file}: database.max_connections: {count} is out of range; give 1 to {MOST}"
                ));
                default.max_connections
            }
        };
        let min_connections = match self.min_connections {
            None => default.min_connections,
            Some(count) if count <= u64::from(max_connections) => count as u32,
            Some(count) => {
                errors.push(format!(
                    "{file}: database.min_connections: {count} is more than database.max_connections ({max_connections})"
                ));
                default.min_connections.min(max_connections)
            }
        };
        PoolConfig { max_connections, min_connections }
    }
}
