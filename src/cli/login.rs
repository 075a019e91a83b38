//! `orca login UPSTREAM` and `orca logout UPSTREAM`: a person signs in to an external server
//! declared with `oauth: {mode: shared}` (the browser when there is one, the URL printed
//! either way, the redirect taken on a loopback port), and the sign-in is sealed into orca's
//! database, where every replica finds it; `logout` forgets it. For `mode: per_user` the
//! sign-in is the stdio principal's own (`auth.stdio`, the user of `orca serve` over stdio on
//! this machine); people on HTTP sign in from the console.
//!
//! # Design notes
//!
//! `cli/login.rs` holds `orca login` and `orca logout` for an external server with `oauth: {mode:
//! shared}` (or `per_user`, then as the stdio principal's own sign-in): the sign-in through
//! `client::auth` with a `LoopbackBrowser`, kept in `external::TokenVault`; `cli::secret_text`
//! gives the vault the orca secret's text.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use secrecy::ExposeSecret;

use super::databases::Databases;
use super::output::{print, print_error};
use crate::client::McpClient;
use crate::client::auth::{Authorizer, AuthorizerConfig, Grant, LoopbackBrowser};
use crate::config::{Config, ExternalTransport, SignInMode, UpstreamOAuth};
use crate::external::{TokenVault, confinement_of, identity_of};
use crate::tracking;

#[derive(Debug, Args)]
pub(super) struct LoginArgs {
    /// The external server's key in external-mcps.yaml
    #[arg(value_name = "UPSTREAM")]
    upstream: String,

    /// Print the sign-in URL without starting a browser
    #[arg(long)]
    no_browser: bool,
}

#[derive(Debug, Args)]
pub(super) struct LogoutArgs {
    /// The external server's key in external-mcps.yaml
    #[arg(value_name = "UPSTREAM")]
    upstream: String,
}

/// An OAuth upstream as the commands need it: its URL, its settings, its extra headers.
struct OAuthUpstream<'a> {
    url: &'a str,
    oauth: &'a UpstreamOAuth,
    headers: Vec<(String, String)>,
}

/// The URL and the OAuth settings of `key`, or why it has none.
fn oauth_upstream<'a>(config: &'a Config, key: &str) -> anyhow::Result<OAuthUpstream<'a>> {
    let server = config
        .external
        .servers
        .iter()
        .find(|server| server.key == key)
        .with_context(|| format!("no external server `{key}` in external-mcps.yaml"))?;
    match &server.transport {
        ExternalTransport::Http { url, oauth: Some(oauth), headers, .. } => {
            let headers = headers
                .iter()
                .map(|(name, value)| (name.clone(), value.expose_secret().to_owned()))
                .collect();
            Ok(OAuthUpstream { url: url.as_str(), oauth, headers })
        }
        _ => anyhow::bail!("`{key}` does not sign in with OAuth (no `oauth:` in its entry)"),
    }
}

/// Whose sign-in the commands handle: the shared one, or for `per_user` the stdio principal's.
fn subject(config: &Config, oauth: &UpstreamOAuth) -> String {
    match oauth.mode {
        SignInMode::PerUser => config.auth.stdio.user_identity(),
        SignInMode::Service | SignInMode::Shared => String::new(),
    }
}

async fn vault(
    config: &Config,
    databases: &Databases,
) -> anyhow::Result<(sqlx::PgPool, TokenVault)> {
    let pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
    tracking::migrate(&pool).await?;
    let vault =
        TokenVault::new(pool.clone(), &super::secret_text(config.secret.as_ref(), &config.home)?);
    Ok((pool, vault))
}

/// `orca login UPSTREAM`.
pub(super) async fn login(config: Config, args: LoginArgs) -> anyhow::Result<ExitCode> {
    let OAuthUpstream { url, oauth, headers } = oauth_upstream(&config, &args.upstream)?;
    if oauth.mode == SignInMode::Service {
        print(&format!(
            "`{}` signs in as orca itself (oauth.mode: service); there is nothing to sign in to\n",
            args.upstream
        ));
        return Ok(ExitCode::SUCCESS);
    }
    let subject = subject(&config, oauth);
    let databases = Databases::open(&config, false).await?;
    let (pool, vault) = vault(&config, &databases).await?;
    let announce: crate::client::auth::Announce = Box::new(|url, opened| {
        if opened {
            print_error(&format!("A browser was opened to sign in. If it did not, open:\n  {url}"));
        } else {
            print_error(&format!("Open this address to sign in:\n  {url}"));
        }
    });
    let agent = LoopbackBrowser::bind(announce, !args.no_browser).await?;
    let mut settings = AuthorizerConfig::new(url, Grant::AuthorizationCode(Arc::new(agent)));
    settings.store = Arc::new(vault.store(&args.upstream, &subject));
    settings.identity = identity_of(oauth);
    settings.confinement = Some(confinement_of(oauth));
    settings.sign_in_hint = format!("run `orca login {}`", args.upstream);
    let authorizer = Arc::new(Authorizer::new(settings)?);
    // A stale sign-in is replaced: the server's own 401 starts a fresh one.
    authorizer.sign_out().await?;
    let options = crate::client::HttpOptions { bearer_token: None, headers, ..Default::default() };
    let outcome = McpClient::http_authorized(url, options, authorizer).await;
    let result = match outcome {
        Ok(client) => {
            let tools = client.list_tools().await.map(|tools| tools.len()).unwrap_or(0);
            let whose = if subject.is_empty() {
                "every orca replica on this database uses the sign-in".to_owned()
            } else {
                format!(
                    "the sign-in is `{}`'s own (the stdio principal); people on HTTP sign in from the console",
                    config.auth.stdio.name
                )
            };
            print(&format!("signed in to `{}` ({tools} tools); {whose}\n", args.upstream));
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => Err(anyhow::anyhow!("cannot sign in to `{}`: {error}", args.upstream)),
    };
    pool.close().await;
    databases.close().await?;
    result
}

/// `orca logout UPSTREAM`.
pub(super) async fn logout(config: Config, args: LogoutArgs) -> anyhow::Result<ExitCode> {
    let subject = subject(&config, oauth_upstream(&config, &args.upstream)?.oauth);
    let databases = Databases::open(&config, false).await?;
    let (pool, vault) = vault(&config, &databases).await?;
    let forgotten = vault.forget(&args.upstream, &subject).await;
    pool.close().await;
    databases.close().await?;
    if forgotten? {
        print(&format!("signed out of `{}`\n", args.upstream));
    } else {
        print(&format!("`{}` had no sign-in\n", args.upstream));
    }
    Ok(ExitCode::SUCCESS)
}
