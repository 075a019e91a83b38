//! The nightly export: feedback and failures of a time range, each joined with its execution
//! (and so with who made the call: its principal, OAuth client and role), written as RFC 4180
//! CSV for the people who curate the context file. Files are named after the day they cover
//! and replaced atomically, so re-running the export overwrites them.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use chrono::{DateTime, Duration, NaiveDate, TimeDelta, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// The half-open range `[since, until)` to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExportRange {
    pub(crate) since: DateTime<Utc>,
    pub(crate) until: DateTime<Utc>,
}

impl ExportRange {
    /// Parse `--since` and `--until`: a duration back from now (`24h`, `7d`, `30m`, `2w`), a
    /// date (`2026-11-20`, midnight UTC) or an RFC 3339 time. `until` defaults to now.
    ///
    /// # Errors
    ///
    /// When a bound cannot be read, or `since` is not before `until`.
    pub(crate) fn parse(
        since: &str,
        until: Option<&str>,
        now: DateTime<Utc>,
    ) -> anyhow::Result<ExportRange> {
        let since = parse_bound(since, now).with_context(|| format!("--since {since:?}"))?;
        let until = match until {
            Some(text) => parse_bound(text, now).with_context(|| format!("--until {text:?}"))?,
            None => now,
        };
        if since >= until {
            bail!("--since ({since}) must be before --until ({until})");
        }
        Ok(ExportRange { since, until })
    }

    /// The day the files are named after: the day of the range's last instant.
    pub(crate) fn label(&self) -> String {
        (self.until - TimeDelta::nanoseconds(1)).format("%Y-%m-%d").to_string()
    }
}

fn parse_bound(text: &str, now: DateTime<Utc>) -> anyhow::Result<DateTime<Utc>> {
    let text = text.trim();
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date.and_hms_opt(0, 0, 0).context("invalid date")?.and_utc());
    }
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let amount: i64 = number.parse().map_err(|_| {
        anyhow::anyhow!(
            "expected a duration such as 24h or 7d, a date such as 2026-11-20, or an RFC 3339 time"
        )
    })?;
    let duration = match unit {
        "s" => Duration::seconds(amount),
        "m" => Duration::minutes(amount),
        "h" => Duration::hours(amount),
        "d" => Duration::days(amount),
        "w" => Duration::weeks(amount),
        _ => bail!("unknown duration unit {unit:?}: use s, m, h, d or w"),
    };
    Ok(now - duration)
}

/// What one export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExportSummary {
    pub(crate) feedback_file: PathBuf,
    pub(crate) feedback_rows: usize,
    pub(crate) failures_file: PathBuf,
    pub(crate) failures_rows: usize,
}

#[derive(Debug, sqlx::FromRow)]
struct FeedbackExportRow {
    feedback_id: Uuid,
    feedback_token: Uuid,
    execution_id: Uuid,
    server: String,
    tool: String,
    status: String,
    llm_provider: Option<String>,
    llm_model: Option<String>,
    rating: String,
    rating_score: Option<i32>,
    comment: Option<String>,
    user_id: Option<String>,
    principal: String,
    agent_id: Option<String>,
    execution_time_ms: Option<i32>,
    executed_at: DateTime<Utc>,
    feedback_created_at: DateTime<Utc>,
    feedback_updated_at: Option<DateTime<Utc>>,
    source: String,
    client_id: Option<String>,
    role: Option<String>,
    database_name: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
struct FailureExportRow {
    failure_id: Uuid,
    execution_id: Uuid,
    server: String,
    tool: String,
    status: String,
    error_type: String,
    error_code: Option<String>,
    error_details: Option<String>,
    retry_attempt: i32,
    llm_provider: Option<String>,
    llm_model: Option<String>,
    principal: String,
    failed_at: DateTime<Utc>,
    source: String,
    client_id: Option<String>,
    role: Option<String>,
    database_name: Option<String>,
}

/// Write `feedback-<day>.csv` and `failures-<day>.csv` into `out_dir`. Calls made by
/// `orca eval` are left out unless `include_eval`; the `source` column tells them apart. With
/// `database`, only the calls on that target database are written.
///
/// # Errors
///
/// When the database cannot be read or the files cannot be written; nothing half-written is
/// left in place of an earlier file.
pub(crate) async fn export(
    pool: &PgPool,
    range: ExportRange,
    out_dir: &Path,
    include_eval: bool,
    database: Option<&str>,
) -> anyhow::Result<ExportSummary> {
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let label = range.label();

    let feedback = read_feedback(pool, range, include_eval, database).await?;
    let failures = read_failures(pool, range, include_eval, database).await?;

    let feedback_file = out_dir.join(format!("feedback-{label}.csv"));
    write_csv(
        &feedback_file,
        &FeedbackExportRow::HEADER,
        feedback.iter().map(FeedbackExportRow::cells),
    )?;

    let failures_file = out_dir.join(format!("failures-{label}.csv"));
    write_csv(
        &failures_file,
        &FailureExportRow::HEADER,
        failures.iter().map(FailureExportRow::cells),
    )?;
    // What the files hold is recorded, so that the retention keeps every day until it was
    // exported (a one-database export covers only that database: not recorded).
    if database.is_none() {
        sqlx::query("INSERT INTO orca.tracking_exports (range_from, range_until) VALUES ($1, $2)")
            .bind(range.since)
            .bind(range.until)
            .execute(pool)
            .await
            .context("cannot record the export's range")?;
    }

    Ok(ExportSummary {
        feedback_file,
        feedback_rows: feedback.len(),
        failures_file,
        failures_rows: failures.len(),
    })
}

/// The feedback given or changed in `range`, each row with its execution.
///
/// Each row's execution is found by its key in the one partition of its day (a lateral
/// lookup, pruned at run time), never by a join the planner could make over every day.
async fn read_feedback(
    pool: &PgPool,
    range: ExportRange,
    include_eval: bool,
    database: Option<&str>,
) -> anyhow::Result<Vec<FeedbackExportRow>> {
    sqlx::query_as(
        "SELECT f.id AS feedback_id, f.feedback_token, f.execution_id, e.mcp_name AS server, e.tool_name AS tool, \
         e.status, e.llm_provider, e.llm_model, f.rating, f.rating_score, f.comment, f.user_id, e.principal, e.agent_id, \
         e.execution_time_ms, e.created_at AS executed_at, f.created_at AS feedback_created_at, \
         f.updated_at AS feedback_updated_at, e.source, e.client_id, e.role, e.database_name \
         FROM orca.mcp_feedback f CROSS JOIN LATERAL (SELECT * FROM orca.mcp_executions x \
           WHERE x.id = f.execution_id AND x.created_at = f.execution_created_at LIMIT 1) e \
         WHERE coalesce(f.updated_at, f.created_at) >= $1 AND coalesce(f.updated_at, f.created_at) < $2 \
         AND (e.source <> 'eval' OR $3) \
         AND ($4::text IS NULL OR e.database_name = $4) \
         ORDER BY coalesce(f.updated_at, f.created_at), f.id",
    )
    .bind(range.since)
    .bind(range.until)
    .bind(include_eval)
    .bind(database)
    .fetch_all(pool)
    .await
    .context("cannot read feedback from the database")
}

/// The failures recorded in `range`, each row with its execution.
async fn read_failures(
    pool: &PgPool,
    range: ExportRange,
    include_eval: bool,
    database: Option<&str>,
) -> anyhow::Result<Vec<FailureExportRow>> {
    sqlx::query_as(
        "SELECT fl.id AS failure_id, fl.execution_id, e.mcp_name AS server, e.tool_name AS tool, e.status, fl.error_type, \
         fl.error_code, fl.error_details::text AS error_details, fl.retry_attempt, e.llm_provider, e.llm_model, e.principal, \
         fl.created_at AS failed_at, e.source, e.client_id, e.role, e.database_name \
         FROM orca.mcp_failures fl CROSS JOIN LATERAL (SELECT * FROM orca.mcp_executions x \
           WHERE x.id = fl.execution_id AND x.created_at = fl.execution_created_at LIMIT 1) e \
         WHERE fl.created_at >= $1 AND fl.created_at < $2 \
         AND (e.source <> 'eval' OR $3) \
         AND ($4::text IS NULL OR e.database_name = $4) \
         ORDER BY fl.created_at, fl.id",
    )
    .bind(range.since)
    .bind(range.until)
    .bind(include_eval)
    .bind(database)
    .fetch_all(pool)
    .await
    .context("cannot read failures from the database")
}

impl FeedbackExportRow {
    /// The CSV columns, in the order of [`cells`](Self::cells).
    const HEADER: [&'static str; 22] = [
        "feedback_id",
        "feedback_token",
        "execution_id",
        "server",
        "tool",
        "status",
        "llm_provider",
        "llm_model",
        "rating",
        "rating_score",
        "comment",
        "user_id",
        "principal",
        "agent_id",
        "execution_time_ms",
        "executed_at",
        "feedback_created_at",
        "feedback_updated_at",
        "source",
        "client_id",
        "role",
        "database",
    ];

    /// The row as the CSV cells of its columns.
    fn cells(&self) -> Vec<String> {
        vec![
            self.feedback_id.to_string(),
            self.feedback_token.to_string(),
            self.execution_id.to_string(),
            self.server.clone(),
            self.tool.clone(),
            self.status.clone(),
            text(&self.llm_provider),
            text(&self.llm_model),
            self.rating.clone(),
            self.rating_score.map(|score| score.to_string()).unwrap_or_default(),
            text(&self.comment),
            text(&self.user_id),
            self.principal.clone(),
            text(&self.agent_id),
            self.execution_time_ms.map(|ms| ms.to_string()).unwrap_or_default(),
            time(self.executed_at),
            time(self.feedback_created_at),
            self.feedback_updated_at.map(time).unwrap_or_default(),
            self.source.clone(),
            text(&self.client_id),
            text(&self.role),
            text(&self.database_name),
        ]
    }
}

impl FailureExportRow {
    /// The CSV columns, in the order of [`cells`](Self::cells).
    const HEADER: [&'static str; 17] = [
        "failure_id",
        "execution_id",
        "server",
        "tool",
        "status",
        "error_type",
        "error_code",
        "error_details",
        "retry_attempt",
        "llm_provider",
        "llm_model",
        "principal",
        "failed_at",
        "source",
        "client_id",
        "role",
        "database",
    ];

    /// The row as the CSV cells of its columns.
    fn cells(&self) -> Vec<String> {
        vec![
            self.failure_id.to_string(),
            self.execution_id.to_string(),
            self.server.clone(),
            self.tool.clone(),
            self.status.clone(),
            self.error_type.clone(),
            text(&self.error_code),
            text(&self.error_details),
            self.retry_attempt.to_string(),
            text(&self.llm_provider),
            text(&self.llm_model),
            self.principal.clone(),
            time(self.failed_at),
            self.source.clone(),
            text(&self.client_id),
            text(&self.role),
            text(&self.database_name),
        ]
    }
}

fn text(value: &Option<String>) -> String {
    value.clone().unwrap_or_default()
}

fn time(value: DateTime<Utc>) -> String {
    value.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Write a CSV file next to its final name, then rename it into place.
fn write_csv(
    path: &Path,
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) -> anyhow::Result<()> {
    let partial = path.with_extension("csv.partial");
    {
        let mut writer = csv::Writer::from_path(&partial)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        writer.write_record(header)?;
        for row in rows {
            writer.write_record(&row)?;
        }
        writer.flush()?;
    }
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_bounds_accept_durations_dates_and_times() {
        let now = DateTime::parse_from_rfc3339("2026-11-21T02:00:00Z").unwrap().with_timezone(&Utc);
        let range = ExportRange::parse("24h", None, now).unwrap();
        assert_eq!(range.since.to_rfc3339(), "2026-11-20T02:00:00+00:00");
        assert_eq!(range.label(), "2026-11-21");
        let range = ExportRange::parse("2026-11-20", Some("2026-11-21"), now).unwrap();
        assert_eq!(range.label(), "2026-11-20");
        let range = ExportRange::parse("2026-11-20T10:00:00+02:00", Some("1h"), now).unwrap();
        assert_eq!(range.since.to_rfc3339(), "2026-11-20T08:00:00+00:00");
        assert!(ExportRange::parse("7x", None, now).is_err());
        assert!(ExportRange::parse("yesterday", None, now).is_err());
        assert!(ExportRange::parse("1h", Some("2h"), now).is_err());
    }
}
