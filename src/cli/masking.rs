//! `orca masking setup`: prepares, on every target database, what the roles with `masking:`
//! read (`privacy::setup`), or with `--print` writes the SQL for an administrator to run; and
//! the masking checks of `orca doctor`, which say for each database and policy what is missing.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use secrecy::ExposeSecret;
use sqlx::Connection;

use super::databases::{Databases, TargetSpec};
use super::output::print;
use crate::config::Config;
use crate::privacy::mask::MaskingPolicy;
use crate::privacy::setup::{self, MaskRole};

/// `orca masking ...`
#[derive(Debug, Subcommand)]
pub(super) enum MaskingCommand {
    /// Prepare the masked roles on every target database, or print the SQL that does
    #[command(long_about = "Prepare, on every target database, what each masking policy that a \
        role of orca.yaml holds reads: a database role of its own that holds nothing but views \
        computing the masked values (orca does this itself at the first masked call when its \
        database role may create roles and schemas). With --print, write the SQL instead, for an \
        administrator to run with psql as a role that may (it creates the roles, the schemas \
        `orca_mask` and `<role>__<schema>`, and grants on them only).\n\n\
        Examples:\n  orca masking setup\n  orca masking setup --print > masking.sql && psql -f masking.sql \"$DATABASE_URL\"")]
    Setup(SetupArgs),
}

#[derive(Debug, Args)]
pub(super) struct SetupArgs {
    /// Print the SQL instead of running it
    #[arg(long)]
    print: bool,
}

/// The masking policies the configured roles hold, salted from the orca secret, each once.
pub(super) fn policies(config: &Config) -> anyhow::Result<Vec<Arc<MaskingPolicy>>> {
    let secret = crate::sql::Secret::load(config.secret.as_ref(), &config.home)?;
    let mut auth = config.auth.clone();
    auth.salt_masking(|id| crate::privacy::salt(&secret, id));
    Ok(salted_policies(&auth))
}

/// The masking policies of `auth`'s roles (salted already), each once.
pub(super) fn salted_policies(auth: &crate::config::AuthConfig) -> Vec<Arc<MaskingPolicy>> {
    let mut policies: BTreeMap<String, Arc<MaskingPolicy>> = BTreeMap::new();
    for role in auth.roles.values() {
        if let Some(policy) = &role.masking {
            policies.entry(policy.id.clone()).or_insert_with(|| Arc::clone(policy));
        }
    }
    policies.into_values().collect()
}

pub(super) async fn run(config: Config, command: MaskingCommand) -> anyhow::Result<ExitCode> {
    let MaskingCommand::Setup(args) = command;
    let policies = policies(&config)?;
    if policies.is_empty() {
        print("no role in orca.yaml has `masking:`; there is nothing to prepare");
        return Ok(ExitCode::SUCCESS);
    }
    let databases = Databases::open(&config, false).await?;
    let mut failed = false;
    for target in &databases.targets {
        let mut connection = sqlx::PgConnection::connect(target.url.expose_secret())
            .await
            .map_err(crate::sql::Error::from_connect)
            .with_context(|| format!("database `{}`", target.name))?;
        let catalog = setup::read_catalog(&mut connection)
            .await
            .map_err(crate::sql::Error::from_query)
            .with_context(|| format!("database `{}`", target.name))?;
        for policy in &policies {
            let role = MaskRole::of(policy);
            let plan = setup::plan(&role, policy, &catalog);
            if args.print {
                let script = setup::script(&mut connection, &role, &plan)
                    .await
                    .map_err(crate::sql::Error::from_query)?;
                print(&format!(
                    "-- database `{}`, masking policy `{}` (role {})\n{script}",
                    target.name, policy.id, role.name
                ));
                continue;
            }
            let outcome = async {
                let applied = setup::apply(&mut connection, &role, &plan).await?;
                setup::verify(&mut connection, &role, policy).await?;
                Ok::<_, setup::SetupError>(applied)
            }
            .await;
            match outcome {
                Ok(applied) => print(&format!(
                    "database `{}`, policy `{}`: {} as role {}{}",
                    target.name,
                    policy.id,
                    if applied.built { "prepared" } else { "already prepared" },
                    role.name,
                    hidden_note(&applied.hidden),
                )),
                Err(error) => {
                    failed = true;
                    print(&format!("database `{}`, policy `{}`: {error}", target.name, policy.id));
                }
            }
        }
        connection.close().await.ok();
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn hidden_note(hidden: &BTreeMap<setup::QualifiedRelation, String>) -> String {
    if hidden.is_empty() {
        return String::new();
    }
    let names: Vec<String> =
        hidden.keys().map(|(schema, name)| format!("{schema}.{name}")).collect();
    format!("; not readable under masking: {}", names.join(", "))
}

/// `orca doctor`'s check of one database for `policy`: what orca's role may do, whether the
/// setup was made, and whether the masked role can log in and read nothing unmasked.
pub(super) async fn check(target: &TargetSpec, policy: &MaskingPolicy) -> Result<String, String> {
    let role = MaskRole::of(policy);
    let mut connection = sqlx::PgConnection::connect(target.url.expose_secret())
        .await
        .map_err(|error| crate::sql::Error::from_connect(error).to_string())?;
    let catalog = setup::read_catalog(&mut connection)
        .await
        .map_err(|error| crate::sql::Error::from_query(error).to_string())?;
    let plan = setup::plan(&role, policy, &catalog);
    let diagnosis = setup::diagnose(&mut connection, &role, &plan).await;
    let verified = match &diagnosis {
        Ok(setup::Diagnosis::Prepared) => {
            setup::verify(&mut connection, &role, policy).await.map_err(|error| error.to_string())
        }
        _ => Ok(()),
    };
    connection.close().await.ok();
    verified?;
    match diagnosis.map_err(|error| error.to_string())? {
        setup::Diagnosis::Prepared => {
            let options: sqlx::postgres::PgConnectOptions = target
                .url
                .expose_secret()
                .parse()
                .map_err(|_| "the database URL is invalid".to_owned())?;
            let login = options.username(&role.name).password(role.password());
            match sqlx::PgConnection::connect_with(&login).await {
                Ok(connection) => {
                    connection.close().await.ok();
                    Ok(format!("prepared as role {}{}", role.name, hidden_note(&plan.hidden)))
                }
                Err(error) => Err(setup::SetupError::Login {
                    role: role.name.clone(),
                    reason: crate::sql::Error::from_connect(error).to_string(),
                }
                .to_string()),
            }
        }
        setup::Diagnosis::Preparable => Ok(format!(
            "not prepared yet; orca's role may prepare it (role {}), which happens at the first masked call or with `orca masking setup`",
            role.name
        )),
    }
}
