//! Materialization: the rows of a read stored as a table (`CREATE TABLE AS`, replaced, or
//! appended to) or kept as a view. The query must be a read the classifier accepted
//! ([`ReadOnlyQuery`]) and call no volatile function (checked in the same transaction), and
//! the target is named only through quoted identifiers, never in orca's own schema or a system
//! schema. Everything happens in one transaction with local timeouts.

use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::Error;
use super::policy;
use super::read::{ReadOnlyQuery, set_local_timeouts};

/// Schemas nothing is materialized into.
const PROTECTED_SCHEMAS: [&str; 4] = ["orca", "pg_catalog", "information_schema", "pg_toast"];

/// How the rows reach the target table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaterializeMode {
    /// A new table; an existing one is an error.
    Create,
    /// The table is dropped (if it exists) and created again from the query.
    Replace,
    /// The rows are inserted into the existing table.
    Append,
}

/// What to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Materialization {
    Table(MaterializeMode),
    View { or_replace: bool },
}

/// The outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Materialized {
    /// Rows written (0 for a view).
    pub(crate) affected_rows: u64,
    pub(crate) duration: Duration,
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Store the rows of `query` in `schema.name` (or define a view of it there).
///
/// # Errors
///
/// `Denied` for a protected schema, `Volatile`, `Query` (the target exists for `create`, is
/// missing for `append`, has dependents for `replace`, types do not match ...), `Timeout`,
/// `Unavailable`.
pub(crate) async fn materialize(
    pool: &PgPool,
    query: &ReadOnlyQuery,
    schema: &str,
    name: &str,
    what: Materialization,
    timeout: Duration,
) -> Result<Materialized, Error> {
    if PROTECTED_SCHEMAS.contains(&schema) || schema.starts_with("pg_") {
        return Err(Error::Denied {
            reasons: vec![format!("schema `{schema}` belongs to PostgreSQL or to orca")],
        });
    }
    let target = format!("{}.{}", quote(schema), quote(name));
    let select = &query.statement().text;
    let statements: Vec<String> = match what {
        Materialization::Table(MaterializeMode::Create) => {
            vec![format!("CREATE TABLE {target} AS\n{select}")]
        }
        Materialization::Table(MaterializeMode::Replace) => vec![
            format!("DROP TABLE IF EXISTS {target}"),
            format!("CREATE TABLE {target} AS\n{select}"),
        ],
        Materialization::Table(MaterializeMode::Append) => {
            vec![format!("INSERT INTO {target}\nSELECT * FROM (\n{select}\n) AS q")]
        }
        Materialization::View { or_replace } => vec![format!(
            "CREATE {}VIEW {target} AS\n{select}",
            if or_replace { "OR REPLACE " } else { "" }
        )],
    };
    let started = Instant::now();
    let mut connection = pool.acquire().await.map_err(Error::from_connect)?;
    let guard = timeout + Duration::from_secs(5);
    let work = async {
        sqlx::query("BEGIN").execute(&mut *connection).await.map_err(Error::from_query)?;
        let outcome = async {
            set_local_timeouts(&mut connection, timeout).await?;
            let calls = policy::volatile_calls(&mut connection, query.statement())
                .await
                .map_err(Error::from_query)?;
            if !calls.is_empty() {
                return Err(Error::Volatile { calls });
            }
            let mut affected_rows = 0;
            for statement in &statements {
                let result = sqlx::query(sqlx::AssertSqlSafe(statement.clone()))
                    .persistent(false)
                    .execute(&mut *connection)
                    .await
                    .map_err(Error::from_query)?;
                affected_rows = result.rows_affected();
            }
            Ok(affected_rows)
        }
        .await;
        match outcome {
            Ok(affected_rows) => {
                sqlx::query("COMMIT").execute(&mut *connection).await.map_err(Error::from_query)?;
                Ok(affected_rows)
            }
            Err(error) => {
                let _ = sqlx::query("ROLLBACK").execute(&mut *connection).await;
                Err(error)
            }
        }
    };
    let affected_rows = match tokio::time::timeout(guard, work).await {
        Ok(result) => result.map_err(|error: Error| error.with_timeout(timeout))?,
        Err(_) => {
            drop(connection.detach());
            return Err(Error::Timeout { after: timeout });
        }
    };
    let affected_rows =
        if matches!(what, Materialization::View { .. }) { 0 } else { affected_rows };
    Ok(Materialized { affected_rows, duration: started.elapsed() })
}
