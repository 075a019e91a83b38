//! `orca tools held` and `orca tools approve SERVER [TOOL]`: the external tools held for a
//! person (a definition that changed, a tool added after the first listing, one whose text
//! reads as poisoned), each with what changed and its diff, and their approval, which pins the
//! held definition, records who approved it and tells every running replica.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use secrecy::ExposeSecret as _;

use super::Databases;
use super::output::{print, print_error};
use crate::config::{Config, Env};
use crate::external::{ApproveError, Approver, Held};

#[derive(Debug, Subcommand)]
pub(super) enum PinsCommand {
    /// List the external tools held until a person approves them, with what changed
    Held {
        /// Print them as JSON
        #[arg(long)]
        json: bool,
    },
    /// Approve what is held of a server (every held tool, or TOOL only): its definition is pinned and served
    Approve(ApproveToolsArgs),
}

#[derive(Debug, Args)]
pub(super) struct ApproveToolsArgs {
    /// The server's key in external-mcps.yaml
    #[arg(value_name = "SERVER")]
    server: String,

    /// The server's own name for the tool (as `orca tools held` shows it); every held tool of the server without it
    #[arg(value_name = "TOOL")]
    tool: Option<String>,

    /// Approve only if the held definition still has this SHA-256 (as `orca tools held` shows it)
    #[arg(long, value_name = "HASH", requires = "tool")]
    sha256: Option<String>,

    /// Who approves, recorded with the approval [default: $USER]
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
}

pub(super) async fn run(
    config: Config,
    command: PinsCommand,
    env: &Env,
) -> anyhow::Result<ExitCode> {
    let databases = Databases::open(&config, false).await?;
    let pool = crate::tracking::connect(databases.state_url.expose_secret(), &config.database)?;
    crate::tracking::migrate(&pool).await?;
    let outcome = match command {
        PinsCommand::Held { json } => held(&pool, json).await,
        PinsCommand::Approve(args) => approve(&pool, args, env).await,
    };
    pool.close().await;
    databases.close().await?;
    outcome
}

async fn held(pool: &sqlx::PgPool, json: bool) -> anyhow::Result<ExitCode> {
    let held = crate::external::held_tools(pool).await.context("cannot read the held tools")?;
    if json {
        print(&serde_json::to_string_pretty(&held)?);
    } else {
        print(&held_text(&held));
    }
    Ok(ExitCode::SUCCESS)
}

/// The held tools for a person, one block each.
fn held_text(held: &[Held]) -> String {
    if held.is_empty() {
        return "no external tool is held\n".to_owned();
    }
    let mut text = String::new();
    for tool in held {
        text.push_str(&format!(
            "{} {}: {} (held since {})\n  sha256 {}{}\n",
            tool.server,
            tool.tool,
            tool.what,
            tool.held_at.to_rfc3339(),
            tool.sha256,
            tool.pinned_sha256
                .as_ref()
                .map_or_else(String::new, |pinned| format!(", pinned {pinned}")),
        ));
        for finding in &tool.findings {
            text.push_str(&format!(
                "  finding: {} in {}: {}\n",
                finding["rule"].as_str().unwrap_or("?"),
                finding["at"].as_str().unwrap_or("?"),
                finding["excerpt"].as_str().unwrap_or(""),
            ));
        }
        for line in tool.diff.lines() {
            text.push_str("  | ");
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&format!(
            "  approve: orca tools approve {} {} --sha256 {}\n\n",
            tool.server, tool.tool, tool.sha256
        ));
    }
    text
}

async fn approve(
    pool: &sqlx::PgPool,
    args: ApproveToolsArgs,
    env: &Env,
) -> anyhow::Result<ExitCode> {
    let name = args
        .by
        .or_else(|| env.get("USER").map(str::to_owned))
        .unwrap_or_else(|| "console".to_owned());
    // The person at this machine, as the stdio principal is (`orca approve` records them so).
    let mut person = crate::config::Principal::new(name, Default::default());
    person.kind = crate::config::PrincipalKind::Stdio;
    let identity = person.identity();
    let outcome = crate::external::approve_tools(
        pool,
        &args.server,
        args.tool.as_deref(),
        args.sha256.as_deref(),
        Approver { identity: &identity, via: "orca tools approve" },
    )
    .await;
    match outcome {
        Ok(approved) => {
            let mut text = String::new();
            for tool in approved {
                text.push_str(&format!(
                    "approved {} {}: pinned {} (was {}); every replica serves it now\n",
                    tool.server,
                    tool.tool,
                    tool.sha256,
                    tool.pinned_sha256.as_deref().unwrap_or("not pinned")
                ));
            }
            print(&text);
            Ok(ExitCode::SUCCESS)
        }
        Err(error @ ApproveError::Database(_)) => Err(anyhow::anyhow!(error)),
        Err(error) => {
            print_error(&format!("error: {error}; `orca tools held` lists what is held"));
            Ok(ExitCode::from(1))
        }
    }
}
