//! `orca tracking maintain` (the retention of the tracking tables): what a running orca does every hour to them (create
//! the coming days' partitions, drop the days past `tracking.retention_days` that were
//! exported), run once now, saying what it did.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use secrecy::ExposeSecret;

use super::databases::Databases;
use super::output::print;
use crate::config::Config;
use crate::tracking;

/// `orca tracking ...`
#[derive(Debug, Subcommand)]
pub(super) enum TrackingCommand {
    /// Create the coming days' partitions and drop the days past tracking.retention_days
    #[command(long_about = "Create the partitions of the tracking tables for yesterday to a week \
        ahead, and drop each day older than tracking.retention_days (0: none) whose failures and \
        ratings an `orca export-feedback` run has covered (any day, when no export ever ran). \
        A running orca does this every hour; this runs it once and says what it did. --at \
        takes another time as now (RFC 3339), to see what that day would drop (it does drop it).\n\n\
        Examples:\n  orca tracking maintain\n  orca tracking maintain --at 2027-06-01T00:00:00Z")]
    Maintain(MaintainArgs),
}

#[derive(Debug, Args)]
pub(super) struct MaintainArgs {
    /// The time taken as now (RFC 3339); default: now
    #[arg(long)]
    at: Option<String>,
}

pub(super) async fn run(config: Config, command: TrackingCommand) -> anyhow::Result<ExitCode> {
    let TrackingCommand::Maintain(args) = command;
    let now = match &args.at {
        None => chrono::Utc::now(),
        Some(text) => chrono::DateTime::parse_from_rfc3339(text)
            .with_context(|| format!("--at {text:?} is not an RFC 3339 time"))?
            .to_utc(),
    };
    let databases = Databases::open(&config, false).await?;
    let pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
    let outcome = async {
        tracking::migrate(&pool).await?;
        Ok::<_, anyhow::Error>(
            tracking::partitions::maintain(&pool, config.tracking.retention_days, now).await?,
        )
    }
    .await;
    pool.close().await;
    databases.close().await?;
    let done = outcome?;
    let days = |days: &[chrono::NaiveDate]| {
        if days.is_empty() {
            "none".to_owned()
        } else {
            days.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        }
    };
    print(&format!(
        "partitions created for: {}\ndropped (days ending before the retention): {}\nkept past the retention, not exported yet: {}",
        days(&done.created),
        days(&done.dropped),
        days(&done.kept_for_export)
    ));
    Ok(ExitCode::SUCCESS)
}
