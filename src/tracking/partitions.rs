//! The daily partitions of the tracking tables (migration `20261202000000_tracking_partitions`):
//! created a week ahead, made on demand for a record of a day that has none (a replayed spill,
//! a clock far off), and dropped whole once past `tracking.retention_days`.
//!
//! A day's executions, failures and feedback (both partitioned by the time of their execution)
//! are dropped together, and only when every failure and rating of that day lies in a
//! range some `orca export-feedback` run recorded in `orca.tracking_exports`: what was never
//! exported is kept, and said so in the log. An installation that never exported prunes by age
//! alone. Daily partitions are named `<table>_dYYYYMMDD` (UTC days); the partition the migration
//! made of everything stored before it is `<table>_until_YYYYMMDD`, bounded above by that day.
//! Every change runs under one advisory lock, so replicas take turns.

use chrono::{DateTime, Days, NaiveDate, Utc};
use sqlx::PgPool;

/// Each tracking table and the column it is partitioned by.
const TABLES: [(&str, &str); 3] = [
    ("mcp_executions", "created_at"),
    ("mcp_failures", "execution_created_at"),
    ("mcp_feedback", "execution_created_at"),
];

/// How many days ahead of today partitions exist.
const AHEAD_DAYS: u64 = 7;

/// The advisory lock of partition changes (any value unlikely to collide; orca's only one).
const LOCK: i64 = 0x6f72_6361_7061_7274; // "orcapart"

/// What one round of maintenance did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Maintenance {
    /// Days whose partitions were created.
    pub(crate) created: Vec<NaiveDate>,
    /// Partitions dropped (by the upper bound of their range).
    pub(crate) dropped: Vec<NaiveDate>,
    /// Days past the retention kept because failures or ratings of theirs were not exported.
    pub(crate) kept_for_export: Vec<NaiveDate>,
}

/// The partitions of `table` as their names tell: the daily ones by day, and the upper bound of
/// the partition of everything before the migration.
#[derive(Debug, Default)]
struct Existing {
    days: Vec<NaiveDate>,
    until: Option<NaiveDate>,
}

async fn existing(pool: &PgPool, table: &str) -> Result<Existing, sqlx::Error> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_catalog.pg_inherits i \
         JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = ('orca.' || $1)::regclass",
    )
    .bind(table)
    .fetch_all(pool)
    .await?;
    let mut found = Existing::default();
    let day = |text: &str| NaiveDate::parse_from_str(text, "%Y%m%d").ok();
    for name in names {
        let Some(rest) = name.strip_prefix(table) else { continue };
        if let Some(date) = rest.strip_prefix("_d").and_then(day) {
            found.days.push(date);
        } else if let Some(date) = rest.strip_prefix("_until_").and_then(day) {
            found.until = Some(found.until.map_or(date, |known| known.max(date)));
        }
    }
    found.days.sort_unstable();
    Ok(found)
}

fn partition_name(table: &str, day: NaiveDate) -> String {
    format!("{table}_d{}", day.format("%Y%m%d"))
}

fn start_of(day: NaiveDate) -> DateTime<Utc> {
    day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc()
}

/// Make sure every table has a partition for each of `days` (a day before the earliest daily
/// partition that the first partition covers needs none).
///
/// # Errors
///
/// The database's.
pub(crate) async fn ensure_days(
    pool: &PgPool,
    days: impl IntoIterator<Item = NaiveDate>,
) -> Result<Vec<NaiveDate>, sqlx::Error> {
    let mut wanted: Vec<NaiveDate> = days.into_iter().collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut created = Vec::new();
    // One table per transaction: a transaction that held one parent's lock while it waited for
    // another's could deadlock with a rating, which reads executions while it writes feedback.
    for (table, _) in TABLES {
        let existing = existing(pool, table).await?;
        let missing: Vec<&NaiveDate> = wanted
            .iter()
            .filter(|day| {
                !existing.days.contains(day) && existing.until.is_none_or(|until| **day >= until)
            })
            .collect();
        if missing.is_empty() {
            continue;
        }
        let mut transaction = pool.begin().await?;
        sqlx::query("SELECT pg_catalog.pg_advisory_xact_lock($1)")
            .bind(LOCK)
            .execute(&mut *transaction)
            .await?;
        for day in missing {
            let next = day.checked_add_days(Days::new(1)).unwrap_or(*day);
            let statement = format!(
                "CREATE TABLE IF NOT EXISTS orca.\"{}\" PARTITION OF orca.\"{table}\" FOR VALUES FROM ('{}') TO ('{}')",
                partition_name(table, *day),
                start_of(*day).to_rfc3339(),
                start_of(next).to_rfc3339(),
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&mut *transaction).await?;
            if !created.contains(day) {
                created.push(*day);
            }
        }
        transaction.commit().await?;
    }
    Ok(created)
}

/// The days of `instants`, for [`ensure_days`].
pub(crate) fn days_of(instants: impl IntoIterator<Item = DateTime<Utc>>) -> Vec<NaiveDate> {
    instants.into_iter().map(|instant| instant.date_naive()).collect()
}

/// One round: partitions from yesterday to a week ahead, and the days past `retention_days`
/// (0: keep everything) dropped unless something of theirs was not exported.
///
/// # Errors
///
/// The database's.
pub(crate) async fn maintain(
    pool: &PgPool,
    retention_days: u32,
    now: DateTime<Utc>,
) -> Result<Maintenance, sqlx::Error> {
    let today = now.date_naive();
    let first = today.checked_sub_days(Days::new(1)).unwrap_or(today);
    let days: Vec<NaiveDate> = (0..=AHEAD_DAYS + 1)
        .filter_map(|offset| first.checked_add_days(Days::new(offset)))
        .collect();
    let mut maintenance =
        Maintenance { created: ensure_days(pool, days).await?, ..Maintenance::default() };
    if retention_days == 0 {
        return Ok(maintenance);
    }
    // A partition whose whole range ends at or before this is past the retention.
    let horizon = today.checked_sub_days(Days::new(u64::from(retention_days))).unwrap_or(today);
    let executions = existing(pool, "mcp_executions").await?;
    let mut candidates: Vec<(NaiveDate, bool)> = executions
        .days
        .iter()
        .filter(|day| day.checked_add_days(Days::new(1)).is_some_and(|end| end <= horizon))
        .map(|day| (*day, false))
        .collect();
    if let Some(until) = executions.until.filter(|until| *until <= horizon) {
        candidates.push((until, true));
    }
    let exported_ever: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM orca.tracking_exports)")
            .fetch_one(pool)
            .await?;
    for (day, until) in candidates {
        let suffix = if until {
            format!("_until_{}", day.format("%Y%m%d"))
        } else {
            format!("_d{}", day.format("%Y%m%d"))
        };
        if exported_ever && !exported(pool, &suffix).await? {
            maintenance.kept_for_export.push(day);
            continue;
        }
        // Feedback and failures first, executions (what finds the day) last, each in a
        // transaction of its own (no two parents locked at once); a round cut short is
        // finished by the next.
        for (table, _) in TABLES.iter().rev() {
            let mut transaction = pool.begin().await?;
            sqlx::query("SELECT pg_catalog.pg_advisory_xact_lock($1)")
                .bind(LOCK)
                .execute(&mut *transaction)
                .await?;
            sqlx::raw_sql("SET LOCAL lock_timeout = '5s'").execute(&mut *transaction).await?;
            let statement = format!("DROP TABLE IF EXISTS orca.\"{table}{suffix}\"");
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&mut *transaction).await?;
            transaction.commit().await?;
        }
        maintenance.dropped.push(day);
    }
    if !maintenance.kept_for_export.is_empty() {
        tracing::warn!(
            days = ?maintenance.kept_for_export,
            "tracking partitions past tracking.retention_days are kept: they hold failures or ratings no `orca export-feedback` run has covered yet"
        );
    }
    if !maintenance.dropped.is_empty() {
        tracing::info!(days = ?maintenance.dropped, "tracking partitions past tracking.retention_days dropped");
    }
    Ok(maintenance)
}

/// Whether every failure and rating of the partitions named with `suffix` lies in a range an
/// export run covered.
async fn exported(pool: &PgPool, suffix: &str) -> Result<bool, sqlx::Error> {
    let statement = format!(
        "SELECT NOT EXISTS (SELECT 1 FROM orca.\"mcp_failures{suffix}\" f WHERE NOT EXISTS \
           (SELECT 1 FROM orca.tracking_exports x WHERE x.range_from <= f.created_at AND f.created_at < x.range_until)) \
         AND NOT EXISTS (SELECT 1 FROM orca.\"mcp_feedback{suffix}\" r WHERE NOT EXISTS \
           (SELECT 1 FROM orca.tracking_exports x WHERE x.range_from <= coalesce(r.updated_at, r.created_at) \
              AND coalesce(r.updated_at, r.created_at) < x.range_until))"
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(statement)).fetch_one(pool).await
}

/// Whether `error` is PostgreSQL's "no partition of relation found for row".
pub(crate) fn is_missing_partition(error: &sqlx::Error) -> bool {
    error.as_database_error().and_then(|error| error.code()).as_deref() == Some("23514")
        && error.as_database_error().is_some_and(|error| error.message().contains("no partition"))
}
