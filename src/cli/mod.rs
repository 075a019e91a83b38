//! The command line: `serve`, `demo`, `migrate`, `export-feedback`, `doctor` and `key`, each a
//! thin sequence over the library: load configuration, open the databases, build the registry,
//! hand over to the gateway or the exporter, and shut down cleanly.
//!
//! # Design notes
//!
//! The commands (`serve`, `demo`, `migrate`, `export-feedback`, `doctor`, `key new`, `approve`,
//! `context`) as thin sequences over the library.

mod ask;
mod context;
mod databases;
mod eval;
mod login;
mod masking;
mod output;
mod pins;
mod reference;
mod retention;
mod skills;
mod tools;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use secrecy::ExposeSecret;

use crate::config::{self, Config, Env, ServerKind};
use crate::external::ExternalServers;
use crate::gateway::http::HttpOptions;
use crate::gateway::{AppState, Metrics};
use crate::registry::{Registry, ServerDependencies};
use crate::tracking::{self, ExportRange, Tracker};
use databases::Databases;
use output::{print, print_error};

const ABOUT: &str =
    "One gateway that gives LLM clients safe, tracked access to data systems over MCP";

const LONG_ABOUT: &str = "\
One gateway that gives LLM clients safe, tracked access to data systems over MCP.

Every tool call is authorized, recorded in PostgreSQL with a feedback token, and can be rated
afterwards; `export-feedback` writes the ratings and failures to CSV for review.

Databases: DATABASE_URL is the database the SQL tools work on, ORCA_DATABASE_URL holds orca's own
state. When neither is set, orca runs a private PostgreSQL under ORCA_HOME from the local server
binaries. Configuration: environment variables (and .env), plus an optional orca.yaml
(--config or ORCA_CONFIG). Logs go to stderr; set ORCA_LOG (for example `debug`) to change the level.";

#[derive(Debug, Parser)]
#[command(name = "orca", version, about = ABOUT, long_about = LONG_ABOUT, propagate_version = true)]
struct Cli {
    /// Path of orca.yaml [default: $ORCA_CONFIG, else ./orca.yaml when present]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP to clients, over stdio or Streamable HTTP
    #[command(
        long_about = "Serve MCP to clients, over stdio (one client that started orca, such as Claude Desktop) \
        or over Streamable HTTP at /mcp (any number of clients; also /mcp/feedback, /healthz and /metrics).\n\n\
        Examples:\n  orca serve --stdio\n  orca serve --http 127.0.0.1:9000\n  orca serve --http 0.0.0.0:9000 --stateful   (needs auth.api_keys)"
    )]
    Serve(ServeArgs),
    /// Load the Chinook sample database and serve it over HTTP, printing the client setup
    Demo(DemoArgs),
    /// Create or update orca's own tables (schema `orca`) in the state database
    Migrate,
    /// Write feedback and failures of a time range to CSV files
    #[command(long_about = "Write feedback-<day>.csv (each rating joined with its execution) and \
        failures-<day>.csv (each failure joined with its execution) into --out. Files are named after \
        the last day of the range, and re-running replaces them.\n\n\
        Examples:\n  orca export-feedback --since 24h --out /var/lib/orca/exports\n  \
        orca export-feedback --since 2026-11-20 --until 2026-11-21 --out ./exports")]
    ExportFeedback(ExportArgs),
    /// Print the effective configuration (secrets masked) and check every connection
    Doctor,
    /// Print the JSON Schema of orca.yaml or external-mcps.yaml, or write the generated reference
    #[command(subcommand)]
    Config(reference::ConfigCommand),
    /// Manage HTTP API keys
    #[command(subcommand)]
    Key(KeyCommand),
    /// Approve a write that a dry run announced (with `sql.write_confirmation: human`)
    #[command(
        long_about = "Approve a write that execute_sql announced in a dry run, when orca.yaml \
        sets `sql: {write_confirmation: human}`. The dry run returns an approval id instead of a \
        confirmation token; after approval the same execute_sql call (dry_run=false, \
        read_only=false) runs the statement once.\n\n\
        Examples:\n  orca approve --list\n  orca approve 0192f3c4-..."
    )]
    Approve(ApproveArgs),
    /// Curate the context file: check it, refresh its schema overview, suggest additions
    #[command(subcommand)]
    Context(context::ContextCommand),
    /// Look after the tracking tables' partitions (what a running orca does every hour)
    #[command(subcommand)]
    Tracking(retention::TrackingCommand),
    /// Prepare masking in the databases (the roles with `masking:` read through roles of their own)
    #[command(subcommand)]
    Masking(masking::MaskingCommand),
    /// List an MCP server's tools, or convert them for OpenAI, Anthropic or Gemini
    #[command(
        long_about = "List the tools of an MCP server (--stdio or --url), or of orca's own \
        gateway with neither (the configuration of `orca serve`, run in this process), as a table, \
        as JSON, or converted for a model provider: cleaned names, schemas normalized for the \
        provider; a tool whose schema cannot be converted is left out with a warning.\n\n\
        Examples:\n  orca tools\n  orca tools --format openai --exclude 'execute_*'\n  \
        orca tools --stdio \"npx -y @modelcontextprotocol/server-everything\" --format gemini\n  \
        orca tools --url http://127.0.0.1:9000/mcp --token $KEY --format anthropic\n\n\
        `orca tools held` lists the external tools held until a person approves them (pin: hold), \
        with what changed; `orca tools approve SERVER [TOOL]` approves them.",
        args_conflicts_with_subcommands = true
    )]
    Tools(tools::ToolsArgs),
    /// Call one tool of an MCP server by its name and print the result as JSON
    #[command(long_about = "Call one tool of an MCP server (--stdio or --url), or of orca's own \
        gateway with neither, and print {\"success\", \"data\", \"error\"} as JSON. Exit status: \
        0 success, 1 the tool reported an error (printed), 2 a usage error (invalid --args, unknown tool).\n\n\
        Examples:\n  orca call list_servers\n  orca call execute_sql --args '{\"sql\": \"SELECT 1\", \"dry_run\": false}'\n  \
        orca call echo --args '{\"message\": \"hi\"}' --stdio \"npx -y @modelcontextprotocol/server-everything\"")]
    Call(tools::CallArgs),
    /// List an MCP server's skills, or load one (verified against its listing) and print it
    #[command(long_about = skills::LONG_ABOUT)]
    Skills(skills::SkillsArgs),
    /// Answer a question with a model that calls an MCP server's tools
    #[command(long_about = "Answer a question with a model on the OpenAI Chat Completions API \
        (OPENAI_BASE_URL and OPENAI_API_KEY, so Ollama, vLLM or any compatible server works) that \
        calls the tools of an MCP server (--stdio or --url), or of orca's own gateway with neither. \
        Each tool call the model asks for runs through MCP, and its result goes back to the model, \
        until the model answers without tool calls or --max-steps is reached (exit 1). A write that \
        needs a confirmation token is never confirmed on its own: the dry run is shown and the \
        person at the terminal decides (without a terminal, it is refused). `--provider anthropic` \
        asks through Anthropic's Messages API with orca's own provider settings instead.\n\n\
        Examples:\n  orca ask \"Which 5 artists have the most tracks?\"\n  \
        OPENAI_BASE_URL=http://localhost:11434/v1 orca ask \"...\" --model llama3.1 --transcript steps.jsonl")]
    Ask(ask::AskArgs),
    /// Measure generate_sql's execution accuracy on a question set, with and without the context file
    #[command(long_about = eval::LONG_ABOUT)]
    Eval(eval::EvalArgs),
    /// Sign in to an external server declared with `oauth: {mode: shared}`
    #[command(
        long_about = "Sign in to an external MCP server whose entry in external-mcps.yaml has \
        `oauth: {mode: shared}`: a browser is opened when there is one, the address is printed either \
        way, and the server's authorization comes back to a loopback port. The sign-in is sealed into \
        orca's database (with a key derived from ORCA_SECRET), where every replica finds it.\n\n\
        Example:\n  orca login linear"
    )]
    Login(login::LoginArgs),
    /// Forget the sign-in to an external server
    Logout(login::LogoutArgs),
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).multiple(false))]
struct ApproveArgs {
    /// The approval id from the dry run
    #[arg(group = "which", value_name = "ID")]
    id: Option<String>,

    /// List approval requests that wait for a person
    #[arg(long, group = "which")]
    list: bool,

    /// Who approves, recorded with the approval; never the principal that asked for the write [default: $USER]
    #[arg(long, value_name = "NAME")]
    by: Option<String>,
}

#[derive(Debug, Args)]
#[group(skip)]
#[command(group = clap::ArgGroup::new("transport").required(true).multiple(false))]
struct ServeArgs {
    /// Serve one client on stdin/stdout
    #[arg(long, group = "transport")]
    stdio: bool,

    /// Serve Streamable HTTP on this address, for example 127.0.0.1:9000
    #[arg(long, value_name = "ADDR", group = "transport")]
    http: Option<SocketAddr>,

    /// Keep MCP sessions (Mcp-Session-Id) instead of stateless requests; HTTP only
    #[arg(long, requires = "http")]
    stateful: bool,

    /// Serve only these internal servers (comma-separated) [default: from orca.yaml, else all]
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    servers: Vec<String>,

    /// Refuse every write: write tools are hidden and execute_sql runs reads only
    #[arg(long)]
    read_only: bool,
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Address to serve on
    #[arg(long, default_value = "127.0.0.1:9000", value_name = "ADDR")]
    addr: SocketAddr,

    /// Refuse every write: write tools are hidden and execute_sql runs reads only
    #[arg(long)]
    read_only: bool,
}

#[derive(Debug, Args)]
struct ExportArgs {
    /// Start of the range: a duration back from now (24h, 7d), a date (2026-11-20) or an RFC 3339 time
    #[arg(long, value_name = "WHEN")]
    since: String,

    /// End of the range (exclusive), in the same forms [default: now]
    #[arg(long, value_name = "WHEN")]
    until: Option<String>,

    /// Directory to write the CSV files into (created if missing)
    #[arg(long, value_name = "DIR")]
    out: PathBuf,

    /// Include the calls of `orca eval` runs (left out by default; the `source` column tells them apart)
    #[arg(long)]
    include_eval: bool,

    /// Only the calls on this target database (its name in orca.yaml's `databases`; the `database` column says each call's)
    #[arg(long, value_name = "NAME")]
    database: Option<String>,
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Generate a new API key and print it with the orca.yaml entry that accepts it
    New {
        /// Name of the key's principal, recorded with every call it makes
        #[arg(long)]
        name: String,
        /// Verbs the key grants (comma-separated): read, create, update, delete
        #[arg(long, value_delimiter = ',', default_value = "read")]
        verbs: Vec<String>,
    },
}

/// The stack of each of the runtime's threads.
const WORKER_STACK_BYTES: usize = 8 * 1024 * 1024;

/// Entry point of the binary.
pub fn main() -> ExitCode {
    crate::tls::install();
    let env = Env::from_process();
    let cli = Cli::parse();
    let stdio = matches!(&cli.command, Command::Serve(args) if args.stdio);
    init_tracing(&env, stdio);
    // Worker threads get the main thread's 8 MiB of stack rather than tokio's 2: a tool call's
    // future is polled on a worker, and an unoptimized build (the demo profile) keeps large
    // copies of nested futures on the stack.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK_BYTES)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            print_error(&format!("error: cannot start the async runtime: {error}"));
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli, env));
    // Background tasks (such as a stuck client connection) must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(code) => code,
        Err(error) => {
            match error.downcast_ref::<config::ConfigErrors>() {
                Some(errors) => print_error(&format!("error: {errors}")),
                None => print_error(&format!("error: {error:#}")),
            }
            ExitCode::from(if error.is::<config::ConfigErrors>() { 2 } else { 1 })
        }
    }
}

fn init_tracing(env: &Env, stdio: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = env.get("ORCA_LOG").or_else(|| env.get("RUST_LOG")).unwrap_or("orca=info,warn");
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("orca=info,warn"));
    let ansi = !stdio && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

async fn run(cli: Cli, env: Env) -> anyhow::Result<ExitCode> {
    if let Command::Key(KeyCommand::New { name, verbs }) = &cli.command {
        return key_new(name, verbs);
    }
    match cli.command {
        // Generated from the code alone: no configuration is read.
        Command::Config(command) => return reference::run(command),
        Command::Tools(mut args) => match args.pins.take() {
            Some(command) => {
                let config = config::load(cli.config.as_deref(), &env)?;
                return pins::run(config, command, &env).await;
            }
            None => return tools::tools(args, cli.config.as_deref(), &env).await,
        },
        Command::Skills(args) => return skills::skills(args, cli.config.as_deref(), &env).await,
        Command::Call(args) => return tools::call(args, cli.config.as_deref(), &env).await,
        Command::Ask(args) => return ask::ask(args, cli.config.as_deref(), &env).await,
        _ => {}
    }
    let config = config::load(cli.config.as_deref(), &env)?;
    // Traces are exported by the commands that serve calls; the queued spans (tracking's write
    // included, which the stop flushes) are exported once the command has stopped.
    let telemetry = match cli.command {
        Command::Serve(_) | Command::Demo(_) => crate::telemetry::start(|key| env.get(key))?,
        _ => None,
    };
    let outcome = run_command(cli.command, config, &env).await;
    if let Some(telemetry) = telemetry {
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    outcome
}

async fn run_command(command: Command, config: Config, env: &Env) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => serve(config, args).await,
        Command::Demo(args) => demo(config, args).await,
        Command::Migrate => migrate(config).await,
        Command::ExportFeedback(args) => export_feedback(config, args).await,
        Command::Doctor => doctor(config).await,
        Command::Masking(command) => masking::run(config, command).await,
        Command::Tracking(command) => retention::run(config, command).await,
        Command::Approve(args) => approve(config, args, env).await,
        Command::Context(command) => context::run(config, command).await,
        Command::Key(_)
        | Command::Config(_)
        | Command::Tools(_)
        | Command::Skills(_)
        | Command::Call(_)
        | Command::Ask(_) => {
            unreachable!("handled above")
        }
        Command::Eval(args) => eval::run(config, args).await,
        Command::Login(args) => login::login(config, args).await,
        Command::Logout(args) => login::logout(config, args).await,
    }
}

/// What a running gateway holds, and how to take it down.
struct Running {
    state: AppState,
    databases: Databases,
    /// Reloads the context file while the gateway runs; dropped at the end.
    _context_watch: Option<crate::context::ContextWatch>,
    /// Reload the target databases' own context files.
    _target_watches: Vec<crate::context::ContextWatch>,
    /// Probes the target databases' health.
    monitor: tokio::task::JoinHandle<()>,
    /// Follows the other replicas' schema changes.
    schema_changes: tokio::task::JoinHandle<()>,
    /// Says this replica is alive in the directory of replicas (with `cluster.advertise_url`).
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    async fn start(
        config: Config,
        servers: Option<Vec<ServerKind>>,
        load_sample: bool,
    ) -> anyhow::Result<Running> {
        let databases = Databases::open(&config, load_sample).await?;
        let state_pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
        tracking::migrate(&state_pool).await?;
        crate::sql::open_minimum(&state_pool, config.database.size());
        let tracker = if config.tracking.enabled {
            Tracker::start(state_pool.clone(), &config.tracking, config.spill_file())
        } else {
            Tracker::disabled()
        };
        let enabled = servers.or_else(|| config.servers.clone());
        let secret = crate::sql::Secret::load(config.secret.as_ref(), &config.home)?;
        let cluster = crate::cluster::Cluster::new(
            state_pool.clone(),
            config.cluster.advertise_url.clone(),
            &secret,
        );
        let mut config = config;
        config.auth.salt_masking(|id| crate::privacy::salt(&secret, id));
        let directory: crate::directory::Directory = Arc::default();
        if databases.serves_embedded_chinook() {
            seed_chinook_context(&config.llm.context_file);
        }
        let (intelligence, context_watch) =
            crate::servers::postgres::Intelligence::start(&config.llm);
        // The target databases are connected only when a server that uses them is enabled.
        let sql_enabled = enabled.as_ref().is_none_or(|kinds| {
            kinds.iter().any(|kind| matches!(kind, ServerKind::Postgres | ServerKind::Data))
        });
        let no_targets: &[databases::TargetSpec] = &[];
        let (targets, target_watches) = databases::connect_targets(
            &config,
            if sql_enabled { &databases.targets } else { no_targets },
            &intelligence.context,
        )?;
        // Each database's health is known (or its probe timed out) before the first call, and
        // followed while orca runs; a database that is down never stops the others.
        // Schema changes are followed before the first schema is read and cached.
        let schema_changes = targets.follow_schema_changes(state_pool.clone()).await;
        targets.probe_all().await;
        targets.prepare_masking(&masking::salted_policies(&config.auth));
        let monitor = targets.monitor();
        let heartbeat = {
            let targets = targets.clone();
            cluster.join(move || {
                serde_json::json!({
                    "version": env!("CARGO_PKG_VERSION"),
                    "context_version": targets.context_version(),
                })
            })
        };
        let replica =
            crate::gateway::Replica { cluster, databases: targets.clone(), secret: secret.clone() };
        let registry = Registry::build(
            enabled.as_deref(),
            ServerDependencies {
                state_pool: state_pool.clone(),
                tracker: tracker.clone(),
                databases: targets,
                secret,
                read_only: config.read_only,
                directory: directory.clone(),
                data: config.data.clone(),
                masking: config.masking.clone(),
                intelligence,
                metabase: config.metabase.clone(),
                weaviate: config.weaviate.clone(),
            },
        )?;
        registry.connect().await;
        let registry = if config.external.servers.is_empty() {
            registry
        } else {
            let vault = crate::external::TokenVault::new(
                state_pool.clone(),
                &secret_text(config.secret.as_ref(), &config.home)?,
            );
            let external = ExternalServers::start(
                &config.external.servers,
                registry.internal_tool_names(),
                directory,
                Some(vault),
                config.http.public_url.clone(),
                Some(crate::external::Pins::new(state_pool.clone())),
            )
            .await?;
            registry.with_external(external)
        };
        let state = AppState::new(
            Arc::new(config),
            Arc::new(registry),
            tracker,
            state_pool,
            Arc::new(Metrics::default()),
            replica,
        );
        Ok(Running {
            state,
            databases,
            _context_watch: context_watch,
            _target_watches: target_watches,
            monitor,
            schema_changes,
            heartbeat,
        })
    }

    async fn stop(self) -> anyhow::Result<()> {
        self.monitor.abort();
        self.schema_changes.abort();
        if let Some(heartbeat) = self.heartbeat {
            heartbeat.abort();
        }
        // The others know at once that this replica is gone.
        self.state.cluster.leave().await;
        if let Some(external) = self.state.registry.external() {
            external.shutdown().await;
        }
        self.state.tracker.shutdown().await;
        self.state.state_pool.close().await;
        self.databases.close().await
    }
}

/// With the embedded Chinook database, start from the context file shipped for it when there
/// is none yet (a person curates it from there; orca never overwrites it).
fn seed_chinook_context(path: &std::path::Path) {
    if path.exists() {
        return;
    }
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, crate::context::CHINOOK_CONTEXT));
    match written {
        Ok(()) => tracing::info!("wrote the Chinook context file to {}", path.display()),
        Err(error) => {
            tracing::warn!("cannot write the Chinook context file to {}: {error}", path.display());
        }
    }
}

fn parse_servers(names: &[String]) -> anyhow::Result<Option<Vec<ServerKind>>> {
    if names.is_empty() {
        return Ok(None);
    }
    let mut kinds = Vec::new();
    for name in names {
        let kind = ServerKind::parse(name.trim()).with_context(|| {
            format!(
                "--servers: unknown server `{name}`; known servers: {}",
                ServerKind::ALL.map(ServerKind::name).join(", ")
            )
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    Ok(Some(kinds))
}

async fn serve(mut config: Config, args: ServeArgs) -> anyhow::Result<ExitCode> {
    config.read_only |= args.read_only;
    let servers = parse_servers(&args.servers)?;
    if let Some(addr) = args.http {
        crate::gateway::http::check_bind(&config, addr)?;
    }
    let running = Running::start(config, servers, true).await?;
    let result = match args.http {
        None => crate::gateway::stdio::serve(running.state.clone(), shutdown_signal()).await,
        Some(addr) => serve_http(&running, addr, HttpOptions { stateful: args.stateful }).await,
    };
    let stopped = running.stop().await;
    result?;
    stopped?;
    Ok(ExitCode::SUCCESS)
}

async fn serve_http(
    running: &Running,
    addr: SocketAddr,
    options: HttpOptions,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    tracing::info!(
        "serving MCP on http://{bound}/mcp ({}), servers: {}",
        if options.stateful { "stateful sessions" } else { "stateless" },
        running.state.registry.server_names().join(", ")
    );
    tracing::info!("web console on http://{bound}/");
    crate::gateway::http::serve(listener, running.state.clone(), options, shutdown_signal()).await
}

async fn demo(mut config: Config, args: DemoArgs) -> anyhow::Result<ExitCode> {
    config.read_only |= args.read_only;
    crate::gateway::http::check_bind(&config, args.addr)?;
    let running = Running::start(config, None, true).await?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.addr))?;
    let bound = listener.local_addr()?;
    tracing::info!(
        "serving MCP on http://{bound}/mcp (stateless), servers: {}",
        running.state.registry.server_names().join(", ")
    );
    print(&output::demo_banner(
        bound,
        running.databases.target_description().as_deref(),
        &running.state.config,
    ));
    let result = crate::gateway::http::serve(
        listener,
        running.state.clone(),
        HttpOptions { stateful: false },
        shutdown_signal(),
    )
    .await;
    let stopped = running.stop().await;
    result?;
    stopped?;
    Ok(ExitCode::SUCCESS)
}

async fn migrate(config: Config) -> anyhow::Result<ExitCode> {
    let databases = Databases::open(&config, false).await?;
    let pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
    let result = tracking::migrate(&pool).await;
    pool.close().await;
    databases.close().await?;
    result?;
    print(&format!(
        "orca's tables are up to date in {}",
        config::mask_url(databases_state_url_text(&config).as_str())
    ));
    Ok(ExitCode::SUCCESS)
}

fn databases_state_url_text(config: &Config) -> String {
    config.state_database_url.as_ref().or(config.database_url.as_ref()).map_or_else(
        || format!("the embedded PostgreSQL under {}", config.home.display()),
        |url| url.expose_secret().to_owned(),
    )
}

async fn export_feedback(config: Config, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let range = ExportRange::parse(&args.since, args.until.as_deref(), chrono::Utc::now())?;
    let databases = Databases::open(&config, false).await?;
    let pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
    let result = async {
        sqlx::query("SELECT 1").execute(&pool).await.context("cannot reach the state database")?;
        tracking::export(&pool, range, &args.out, args.include_eval, args.database.as_deref()).await
    }
    .await;
    pool.close().await;
    databases.close().await?;
    let summary = result?;
    print(&format!(
        "wrote {} ({} rows) and {} ({} rows) for {} .. {}",
        summary.feedback_file.display(),
        summary.feedback_rows,
        summary.failures_file.display(),
        summary.failures_rows,
        range.since.to_rfc3339(),
        range.until.to_rfc3339()
    ));
    let spill = config.spill_file();
    if spill.exists() || spill.with_extension("jsonl.replaying").exists() {
        tracing::warn!(
            "{} holds tracking records that have not reached the database yet; they are replayed by the running server",
            spill.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn doctor(config: Config) -> anyhow::Result<ExitCode> {
    let mut report = String::from("effective configuration (secrets masked):\n");
    for (key, value) in config.describe() {
        report.push_str(&format!("  {key:<22} {value}\n"));
    }
    report.push_str("\nchecks:\n");
    let mut healthy = true;
    let mut check = |report: &mut String, name: &str, outcome: Result<String, String>| match outcome
    {
        Ok(detail) => report.push_str(&format!("  ok    {name}: {detail}\n")),
        Err(detail) => {
            healthy = false;
            report.push_str(&format!("  FAIL  {name}: {detail}\n"));
        }
    };
    if config.state_database_url.is_none() && config.database_url.is_none() {
        let found = crate::embedded::find_bindir(config.pg_bindir.as_deref()).await;
        check(
            &mut report,
            "postgresql binaries",
            found.map(|dir| dir.display().to_string()).map_err(|error| format!("{error:#}")),
        );
    }
    match Databases::open(&config, false).await {
        Err(error) => check(&mut report, "databases", Err(format!("{error:#}"))),
        Ok(databases) => {
            let pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
            let state = async {
                let version: String = sqlx::query_scalar("SHOW server_version").fetch_one(&pool).await.map_err(|error| error.to_string())?;
                let table: Option<String> = sqlx::query_scalar("SELECT to_regclass('orca._sqlx_migrations')::text")
                    .fetch_one(&pool)
                    .await
                    .map_err(|error| error.to_string())?;
                let migrated = match table {
                    None => None,
                    Some(_) => Some(
                        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM orca._sqlx_migrations WHERE success")
                            .fetch_one(&pool)
                            .await
                            .map_err(|error| error.to_string())?,
                    ),
                };
                match migrated {
                    Some(count) => Ok(format!("PostgreSQL {version}, {count} migration(s) applied")),
                    None => Err(format!("PostgreSQL {version} reachable, but orca's tables are missing: run `orca migrate`")),
                }
            }
            .await;
            let migrated = state.is_ok();
            check(&mut report, "state database", state);
            if migrated {
                check(&mut report, "replicas", crate::cluster::describe(&pool).await);
            }
            pool.close().await;
            let masking_policies = masking::policies(&config)?;
            for target in &databases.targets {
                let target_pool = tracking::connect(target.url.expose_secret(), &config.database)?;
                let outcome = async {
                    let version: String = sqlx::query_scalar("SHOW server_version")
                        .fetch_one(&target_pool)
                        .await
                        .map_err(|error| crate::sql::Error::from_query(error).to_string())?;
                    let features = crate::servers::sql_common::detect_features(&target_pool)
                        .await
                        .map_err(|error| crate::sql::Error::from_query(error).to_string())?;
                    let missing = features.missing();
                    Ok(if missing.is_empty() {
                        format!("reachable, PostgreSQL {version}")
                    } else {
                        format!(
                            "reachable, PostgreSQL {version}; without {} (the tools that use it fall back)",
                            missing.join(", ")
                        )
                    })
                }
                .await;
                check(&mut report, &format!("database `{}`", target.name), outcome);
                target_pool.close().await;
                for policy in &masking_policies {
                    let outcome = masking::check(target, policy).await;
                    check(
                        &mut report,
                        &format!("masking `{}` on `{}`", policy.id, target.name),
                        outcome,
                    );
                }
            }
            if !databases.targets.is_empty() {
                let per_pool = config.database.max_connections;
                let targets = databases.targets.len() as u32;
                check(
                    &mut report,
                    "connections",
                    Ok(format!(
                        "at most {} to PostgreSQL: {targets} target database(s) x {per_pool} (database.max_connections) + {per_pool} for orca's state",
                        (targets + 1) * per_pool
                    )),
                );
            }
            let spill = config.spill_file();
            let pending =
                std::fs::read_to_string(&spill).map(|text| text.lines().count()).unwrap_or(0);
            check(
                &mut report,
                "tracking spill file",
                Ok(if pending == 0 {
                    "empty".into()
                } else {
                    format!("{pending} record(s) waiting in {}", spill.display())
                }),
            );
            databases.close().await?;
        }
    }
    if let Some(oauth) = &config.auth.oauth {
        check(&mut report, "oauth issuer", crate::gateway::check_issuer(oauth).await);
    }
    if let Some(metabase) = &config.metabase {
        check(&mut report, "metabase", crate::servers::metabase::doctor(metabase).await);
    }
    if let Some(weaviate) = &config.weaviate {
        check(&mut report, "weaviate", crate::servers::weaviate::doctor_check(weaviate).await);
    }
    print(&report);
    Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn key_new(name: &str, verbs: &[String]) -> anyhow::Result<ExitCode> {
    use rand::Rng;
    for verb in verbs {
        if crate::tool::Verb::parse(verb).is_none() {
            anyhow::bail!("--verbs: unknown verb `{verb}`; expected read, create, update, delete");
        }
    }
    let bytes: [u8; 32] = rand::rng().random();
    let key = format!("orca_{}", hex::encode(bytes));
    let hash = crate::gateway::hash_key(&key);
    print(&format!(
        "API key (shown once; give it to the client as `Authorization: Bearer <key>`):\n\n  {key}\n\n\
         Add this to orca.yaml under auth.api_keys:\n\n  - name: {name}\n    sha256: {hash}\n    verbs: [{}]\n",
        verbs.join(", ")
    ));
    Ok(ExitCode::SUCCESS)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}

async fn approve(config: Config, args: ApproveArgs, env: &Env) -> anyhow::Result<ExitCode> {
    let databases = Databases::open(&config, false).await?;
    let state_pool = tracking::connect(databases.state_url.expose_secret(), &config.database)?;
    tracking::migrate(&state_pool).await?;
    let outcome = approve_with(&state_pool, args, env).await;
    state_pool.close().await;
    databases.close().await?;
    outcome
}

async fn approve_with(
    state_pool: &sqlx::PgPool,
    args: ApproveArgs,
    env: &Env,
) -> anyhow::Result<ExitCode> {
    if args.list {
        let pending = crate::sql::pending_approvals(state_pool)
            .await
            .context("cannot read the approval requests")?;
        print(&output::approval_list(&pending));
        return Ok(ExitCode::SUCCESS);
    }
    let id = args.id.unwrap_or_default();
    let id = uuid::Uuid::try_parse(id.trim())
        .with_context(|| format!("`{id}` is not an approval id (a UUID from the dry run)"))?;
    let approver = args
        .by
        .or_else(|| env.get("USER").map(str::to_owned))
        .unwrap_or_else(|| "console".to_owned());
    // A person at the console holds every verb; HTTP approvals check the key's verbs. They are
    // at this machine, as the stdio principal is: of that name, they are its owner.
    let verbs: Vec<&str> = crate::tool::Verb::ALL.iter().map(|verb| verb.as_str()).collect();
    let mut person = crate::config::Principal::new(approver.clone(), Default::default());
    person.kind = crate::config::PrincipalKind::Stdio;
    match crate::sql::approve(state_pool, id, (&person.identity(), &approver), &verbs).await {
        Ok(request) => {
            print(&output::approved(&request));
            Ok(ExitCode::SUCCESS)
        }
        Err(error @ crate::sql::ApproveError::OwnRequest(_)) => {
            print_error(&format!(
                "error: {error}; pass `--by NAME` with the name of the person approving"
            ));
            Ok(ExitCode::from(1))
        }
        Err(crate::sql::ApproveError::NotFound(id)) => {
            print_error(&format!(
                "error: no pending approval {id} (unknown, expired or already used); `orca approve --list` shows the pending ones"
            ));
            Ok(ExitCode::from(1))
        }
        Err(error) => Err(anyhow::anyhow!(error)),
    }
}

/// The text of the orca secret (`ORCA_SECRET`, else the file `sql::Secret::load` keeps in
/// `ORCA_HOME`), from which the vault of upstream sign-ins derives its key.
pub(crate) fn secret_text(
    configured: Option<&secrecy::SecretString>,
    home: &std::path::Path,
) -> anyhow::Result<String> {
    if let Some(secret) = configured {
        return Ok(secret.expose_secret().to_owned());
    }
    // Loading makes sure the file exists (it is written on first use).
    crate::sql::Secret::load(None, home)?;
    let path = home.join("secret");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text.trim().to_owned())
}
